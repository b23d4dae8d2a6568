"""Plugins for tests/test_resume.py, imported by the CLI subprocess (tests/ on PYTHONPATH)."""

from __future__ import annotations

import os

from conftest import EchoAssistant, ScriptedSimulator

from simloop.errors import LLMConnectionError

__all__ = ["ScriptedSimulator", "FlakyLLMAssistant"]

OUTAGE = "RESUME_TEST_OUTAGE"  # set: the "endpoint" is down; unset: it is back


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
