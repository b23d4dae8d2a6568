"""simloop: many conversations at once between a simulated user and a personalised
assistant, every turn recorded with its retrieval and PTKB provenance (TREC iKAT).

    import simloop
    run = simloop.run("run.toml", concurrency=32)        # blocking; a Run (dir, manifest, stats)
    run = await simloop.arun(config)                      # inside a running event loop (Jupyter, servers)
    for t in simloop.read_transcripts(run.dir): ...       # Transcript models, tolerant of a torn last line
    summary = simloop.evaluate(run.dir, ptkb_qrels=...)   # the same as `simloop eval`

``__all__`` is the public API: these functions, the models of every file simloop reads
and writes, the plugin protocols and the error tree.  It is an allow-list, and
``tests/test_api.py`` checks it against the ``TYPE_CHECKING`` imports below.  Everything
else is private to its subpackage.  Importing simloop is cheap: names load on first use,
and nothing pulls in torch, pyserini or openai until a run needs them.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

# The subpackages simloop.run and simloop.evaluate share their names with the functions
# below.  Importing a subpackage for the first time binds it on its parent package, so
# both are imported before the functions are bound: later imports of simloop.run.* find
# the package in sys.modules and leave simloop.run the function.  Both faces are light.
from . import evaluate as _evaluate_package  # noqa: F401
from . import run as _run_package  # noqa: F401
from .api import Run, arun, evaluate, run

if _TYPE_CHECKING:  # what static tools see; at run time the faces load these on demand
    from .config import PluginSpec, RunConfig, ScenarioSelection
    from .errors import (
        ApiError,
        BadInputError,
        ConfigError,
        ContextOverflowError,
        ContractError,
        DataFileError,
        DialogueError,
        EmptyCompletionError,
        IndexMissingError,
        InvalidOutputError,
        LLMConnectionError,
        LLMError,
        LLMStatusError,
        LLMTimeoutError,
        PluginNotFoundError,
        ResumeError,
        RetrievalError,
        SimApiAuthError,
        SimApiError,
        SimloopError,
        StructuredOutputError,
        error_source,
    )
    from .evaluate import DialogueScores, RunSummary
    from .llm import LLMConfig, LLMRole, LLMRoleOverride
    from .memory import MemoryStrategy
    from .memorytest import MemoryResults
    from .run import Assistant, Context, UserSimulator, read_transcripts
    from .schema import (
        AssistantReply,
        AssistantTurn,
        Behaviour,
        ContextInfo,
        DialogueState,
        ErrorInfo,
        GoldTurn,
        Hit,
        LLMCapabilities,
        Passage,
        Persona,
        PluginRef,
        PtkbUse,
        RubricQuestion,
        RunManifest,
        Scenario,
        ScenarioRef,
        SimulatorTurn,
        Stage,
        Stop,
        Topic,
        Transcript,
        Turn,
        Usage,
        UserTurn,
    )
    from .search import Embedder, RetrievalConfig, Retriever
else:
    from .lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        # configuration
        "config": ("PluginSpec", "RunConfig", "ScenarioSelection"),
        "llm": ("LLMConfig", "LLMRole", "LLMRoleOverride"),
        # the error tree: every class of errors.py, and error_source (the transcript's error field)
        "errors": (
            "ApiError", "BadInputError", "ConfigError", "ContextOverflowError", "ContractError", "DataFileError",
            "DialogueError",
            "EmptyCompletionError", "IndexMissingError", "InvalidOutputError", "LLMConnectionError", "LLMError",
            "LLMStatusError", "LLMTimeoutError", "PluginNotFoundError", "ResumeError", "RetrievalError",
            "SimApiAuthError", "SimApiError", "SimloopError", "StructuredOutputError", "error_source",
        ),
        # what `simloop eval` and `simloop memory` write
        "evaluate": ("DialogueScores", "RunSummary"),
        "memorytest": ("MemoryResults",),
        # protocols a plugin implements or receives, and the transcripts' reader
        "run": ("Assistant", "Context", "UserSimulator", "read_transcripts"),
        "memory": ("MemoryStrategy",),
        "search": ("Embedder", "RetrievalConfig", "Retriever"),
        # inputs, the transcript and the plugin I/O
        "schema": (
            "AssistantReply", "AssistantTurn", "Behaviour", "ContextInfo", "DialogueState", "ErrorInfo", "GoldTurn",
            "Hit", "LLMCapabilities", "Passage", "Persona", "PluginRef", "PtkbUse", "RubricQuestion", "RunManifest",
            "Scenario", "ScenarioRef", "SimulatorTurn", "Stage", "Stop", "Topic", "Transcript", "Turn", "Usage",
            "UserTurn",
        ),
    })

__all__ = [
    "ApiError", "Assistant", "AssistantReply", "AssistantTurn", "BadInputError", "Behaviour", "ConfigError", "Context",
    "ContextInfo", "ContextOverflowError", "ContractError", "DataFileError", "DialogueError", "DialogueScores",
    "DialogueState", "Embedder", "EmptyCompletionError", "ErrorInfo", "GoldTurn", "Hit", "IndexMissingError",
    "InvalidOutputError", "LLMCapabilities", "LLMConfig", "LLMConnectionError", "LLMError", "LLMRole",
    "LLMRoleOverride", "LLMStatusError", "LLMTimeoutError", "MemoryResults", "MemoryStrategy", "Passage", "Persona",
    "PluginNotFoundError", "PluginRef", "PluginSpec", "PtkbUse", "ResumeError", "RetrievalConfig", "RetrievalError",
    "Retriever", "RubricQuestion", "Run", "RunConfig", "RunManifest", "RunSummary", "Scenario", "ScenarioRef",
    "ScenarioSelection", "SimApiAuthError", "SimApiError", "SimloopError", "SimulatorTurn", "Stage", "Stop",
    "StructuredOutputError", "Topic", "Transcript", "Turn", "Usage", "UserSimulator", "UserTurn", "arun",
    "error_source", "evaluate", "read_transcripts", "run",
]
