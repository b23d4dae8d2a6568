"""simloop: many conversations at once between a simulated user and a personalised
assistant, every turn recorded with its retrieval and PTKB provenance (TREC iKAT).

    import simloop
    run = simloop.run("run.toml", concurrency=32)        # blocking; a Run (dir, manifest, stats)
    run = await simloop.arun(config)                      # inside a running event loop (Jupyter, servers)
    for t in simloop.read_transcripts(run.dir): ...       # Transcript models, tolerant of a torn last line
    summary = simloop.evaluate(run.dir, ptkb_qrels=...)   # the same as `simloop eval`

``__all__`` is the public API (DESIGN §13): these functions, the models of every file
simloop reads and writes, the plugin protocols and the error tree.  Everything else is
private to its subpackage.  Importing simloop is cheap: names load on first use, and
nothing pulls in torch, pyserini or openai until a run needs them.
"""

import importlib as _importlib
import typing as _typing

# The subpackages simloop.run and simloop.evaluate share their names with the functions
# below.  Importing a subpackage for the first time binds it on its parent package, so
# both are imported before the functions are bound: later imports of simloop.run.* find
# the package in sys.modules and leave simloop.run the function.  Both are light.
from . import errors as _errors, evaluate as _evaluate_package, run as _run_package  # noqa: F401
from .api import Run, arun, evaluate, run

# public name -> the module that defines it (loaded on first use)
_BOUNDARY_HELPERS = {"first_error", "check_port", "listen_error"}
_EXPORTS: dict[str, str] = {
    # functions and their result
    **dict.fromkeys(["run", "arun", "evaluate", "Run"], "simloop.api"),
    "read_transcripts": "simloop.run.recorder",
    # configuration
    **dict.fromkeys(["RunConfig", "PluginSpec", "ScenarioSelection"], "simloop.config"),
    **dict.fromkeys(["LLMConfig", "LLMRole", "LLMRoleOverride"], "simloop.llm.config"),
    "RetrievalConfig": "simloop.search.config",
    # inputs, the transcript and the plugin I/O (schema.py)
    **dict.fromkeys([
        "Behaviour", "RubricQuestion", "GoldTurn", "Topic", "Persona", "Scenario", "ScenarioRef", "PluginRef", "Stop",
        "UserTurn", "Passage", "PtkbUse", "ContextInfo", "Stage", "AssistantTurn", "Turn", "Usage", "ErrorInfo",
        "Transcript", "RunManifest", "SimulatorTurn", "AssistantReply", "DialogueState", "Hit",
    ], "simloop.schema"),
    # what `simloop eval` and `simloop memory` write
    **dict.fromkeys(["RunSummary", "DialogueScores"], "simloop.evaluate.formats"),
    "MemoryResults": "simloop.memorytest.formats",
    # protocols a plugin implements or receives
    **dict.fromkeys(["UserSimulator", "Assistant", "Context"], "simloop.run.plugins"),
    "Retriever": "simloop.search.bm25",
    "Embedder": "simloop.search.embeddings",
    "MemoryStrategy": "simloop.memory.base",
    # the error tree: every class of errors.py (and error_source, public since the error
    # field was); not the helpers simloop's own boundaries use to word their one-line errors
    **dict.fromkeys([name for name in _errors.__all__ if name not in _BOUNDARY_HELPERS], "simloop.errors"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simloop' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return list(__all__)


if _typing.TYPE_CHECKING:  # what static tools see; at run time __getattr__ loads these on demand
    from .config import PluginSpec, RunConfig, ScenarioSelection
    from .errors import (
        BadInputError, ConfigError, DataFileError, DialogueError, EmptyCompletionError, IndexMissingError,
        LLMConnectionError, LLMError, LLMStatusError, LLMTimeoutError, PluginNotFoundError, ResumeError,
        RetrievalError, SimloopError, StructuredOutputError,
    )
    from .evaluate.formats import DialogueScores, RunSummary
    from .llm.config import LLMConfig, LLMRole, LLMRoleOverride
    from .memory.base import MemoryStrategy
    from .memorytest.formats import MemoryResults
    from .run.plugins import Assistant, Context, UserSimulator
    from .run.recorder import read_transcripts
    from .schema import (
        AssistantReply, AssistantTurn, Behaviour, ContextInfo, DialogueState, ErrorInfo, GoldTurn, Hit, Passage, Persona,
        PluginRef, PtkbUse, RubricQuestion, RunManifest, Scenario, ScenarioRef, SimulatorTurn, Stage, Stop, Topic,
        Transcript, Turn, Usage, UserTurn,
    )
    from .search.bm25 import Retriever
    from .search.config import RetrievalConfig
    from .search.embeddings import Embedder
