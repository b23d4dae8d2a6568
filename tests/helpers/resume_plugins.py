"""Plugins for the resume tests, imported by the CLI subprocess (the checkout on PYTHONPATH),
and the run command that loads them."""

from __future__ import annotations

import os
import subprocess

from simloop.errors import LLMConnectionError
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT
from tests.helpers.plugins import EchoAssistant, ScriptedSimulator

__all__ = ["ScriptedSimulator", "FlakyLLMAssistant"]

OUTAGE = "RESUME_TEST_OUTAGE"  # set: the "endpoint" is down; unset: it is back
# The names a run loads them by.
SIM, ASSISTANT = "tests.helpers.resume_plugins:ScriptedSimulator", "tests.helpers.resume_plugins:FlakyLLMAssistant"


class FlakyLLMAssistant(EchoAssistant):
    """Echoes, but while ``$RESUME_TEST_OUTAGE`` is set every dialogue whose id contains
    one of its comma-separated parts fails as an LLM call does once the retries ran out.
    The switch is an environment variable, not a parameter, so the run's config (and its
    hash) is the same before and after the outage, as with a real endpoint."""

    async def respond(self, state):
        parts = [p for p in os.environ.get(OUTAGE, "").split(",") if p]
        if any(p in state.dialogue_id for p in parts):
            raise LLMConnectionError("assistant.generate: connection refused after 5 attempts")
        return await super().respond(state)


def resume_cli(*args: str, outage: str | None = None) -> subprocess.CompletedProcess:
    """The real CLI with these plugins loadable, the "endpoint" down for ``outage`` (see
    ``FlakyLLMAssistant``) or up when None."""
    env = {k: v for k, v in os.environ.items() if k != OUTAGE}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if outage:
        env[OUTAGE] = outage
    return simloop_cli(*args, env=env)
