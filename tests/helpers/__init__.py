"""What several test modules share: paths and hand-written inputs (``data``), the real CLI in
subprocesses (``cli``), fakes at the plugin seams (``fakes``), hand-built transcripts and run
folders (``runs``), and the plugin modules CLI subprocesses load by ``module:attr``
(``tests.helpers.*_plugins``; the checkout on ``PYTHONPATH``).  Test modules import these,
never each other."""
