"""The run subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .engine import Engine, Event, RunStats, gather_until_cancelled
    from .interrupt import INTERRUPTED, at_hard_exit, exit_now, sigterm_as_sigint, until_signalled
    from .manifest import (
        find_validity,
        new_manifest,
        simulator_digest,
        simulator_identity,
        validity_card_path,
        versions,
    )
    from .plugins import (
        Assistant,
        ChecksSources,
        ChoosesScenarios,
        Closable,
        Context,
        UserSimulator,
        available,
        close_plugins,
        effective_params,
        load_plugin,
        plugin_llm_min_prompts,
        plugin_llm_roles,
        plugin_needs,
    )
    from .recorder import Recorder, check_out_dir, check_run_id, new_run_id, occupied
    from .runfiles import DIALOGUES, INFRASTRUCTURE, ReadReport, read_manifest, read_transcripts
    from .runner import PreparedRun, execute, llm_roles, prepare_run, resume_config
    from .scenarios import iter_scenarios, load_sources
    from .session import DialogueSession, DialogueSpec
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "engine": ("Engine", "Event", "RunStats", "gather_until_cancelled",),
        "interrupt": ("INTERRUPTED", "at_hard_exit", "exit_now", "sigterm_as_sigint", "until_signalled",),
        "manifest": (
            "find_validity", "new_manifest", "simulator_digest", "simulator_identity", "validity_card_path", "versions",
        ),
        "plugins": (
            "Assistant", "ChecksSources", "ChoosesScenarios", "Closable", "Context", "UserSimulator", "available",
            "close_plugins", "effective_params", "load_plugin", "plugin_llm_min_prompts", "plugin_llm_roles",
            "plugin_needs",
        ),
        "recorder": ("Recorder", "check_out_dir", "check_run_id", "new_run_id", "occupied",),
        "runfiles": ("DIALOGUES", "INFRASTRUCTURE", "ReadReport", "read_manifest", "read_transcripts",),
        "runner": ("PreparedRun", "execute", "llm_roles", "prepare_run", "resume_config",),
        "scenarios": ("iter_scenarios", "load_sources",),
        "session": ("DialogueSession", "DialogueSpec",),
    })

__all__ = [
    "Assistant", "ChecksSources", "ChoosesScenarios", "Closable", "Context", "DIALOGUES", "DialogueSession",
    "DialogueSpec", "Engine", "Event", "INFRASTRUCTURE", "INTERRUPTED", "PreparedRun", "ReadReport", "Recorder",
    "RunStats", "UserSimulator", "at_hard_exit", "available", "check_out_dir", "check_run_id", "close_plugins",
    "effective_params", "execute", "exit_now", "find_validity", "gather_until_cancelled", "iter_scenarios",
    "llm_roles", "load_plugin", "load_sources", "new_manifest", "new_run_id", "occupied", "plugin_llm_min_prompts",
    "plugin_llm_roles", "plugin_needs", "prepare_run", "read_manifest", "read_transcripts", "resume_config",
    "sigterm_as_sigint", "simulator_digest", "simulator_identity", "until_signalled", "validity_card_path",
    "versions",
]
