"""What several test modules share, by concern: the checkout and hand-written inputs (``data``),
the real CLI and its servers in subprocesses (``cli``), fakes at the plugin and model seams
(``plugins``, ``models``), hand-built transcripts and run folders (``runs``), the Sim.API client
and inputs (``simapi``), the memory test's (``memorytest``), the offline user's dialogues
(``dialogues``), the LLM client's request (``llm``), the import graph (``imports``), and the
plugin modules CLI subprocesses load by ``module:attr`` (``tests.helpers.*_plugins``, with the
checkout on ``PYTHONPATH``).  Test modules import these, never each other."""
