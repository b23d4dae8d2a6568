"""The assistant of tests/run/test_view.py, imported by the CLI subprocess (the checkout on
PYTHONPATH): it records everything it is shown, one JSON line per call."""

from __future__ import annotations

import json
from pathlib import Path

from simloop.schema import AssistantReply, DialogueState

__all__ = ["Recorder"]


class Recorder:
    """Writes ``state`` (all of it) to ``out`` on every call, with what its own memory held
    and the memory dict's identity, then answers with a fixed sentence."""

    def __init__(self, ctx, out: str = ""):
        self.out = Path(out)

    async def respond(self, state: DialogueState) -> AssistantReply:
        memory = state.assistant_memory
        seen = {"state": state.model_dump(mode="json"), "memory_id": id(memory), "calls_before": memory.get("calls", 0),
                "attrs": sorted(vars(state))}
        memory["calls"] = memory.get("calls", 0) + 1
        with self.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(seen) + "\n")
        return AssistantReply(response=f"Answer number {memory['calls']}: I do not know much about that, sorry.")
