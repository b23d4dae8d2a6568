"""Plugins for tests/distributed/test_distributed.py that Ray workers can import (the tests put the
checkout on PYTHONPATH)."""

from __future__ import annotations

import os

from tests.helpers.plugins import EchoAssistant, ScriptedSimulator

__all__ = ["ScriptedSimulator", "EchoAssistant", "CrashOnce", "CrashOn", "FailsInWorkers"]


class CrashOnce(EchoAssistant):
    """Echoes, but the first worker process to reach ``after`` replies dies on the spot.

    ``os._exit`` is a hard death (no cleanup, dialogues in flight lost), like an OOM kill.
    The marker file, created atomically, makes it happen once per run, not once per worker.
    """

    def __init__(self, ctx=None, marker: str = "", after: int = 20):
        super().__init__(ctx)
        self.marker, self.after = marker, after

    async def respond(self, state):
        if self.seen + 1 == self.after and self.marker and _claim(self.marker):
            os._exit(1)
        return await super().respond(state)


class CrashOn(EchoAssistant):
    """Echoes, but kills its process whenever it is asked about ``dialogue`` (a poison dialogue)."""

    def __init__(self, ctx=None, dialogue: str = ""):
        super().__init__(ctx)
        self.dialogue = dialogue

    async def respond(self, state):
        if state.dialogue_id == self.dialogue:
            os._exit(1)
        return await super().respond(state)


def _claim(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


class FailsInWorkers(EchoAssistant):
    """Builds in the driver, fails to build in a Ray worker (a node without what it needs)."""

    def __init__(self, ctx=None):
        super().__init__(ctx)
        import ray

        if ray.is_initialized() and ray.get_runtime_context().get_actor_id():
            raise RuntimeError("this node has no GPU")
