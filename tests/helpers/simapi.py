"""A Sim.API server's inputs and a client written only from SIMULATION_API.md §1–§3.

The client (``SimApi``) is plain httpx and JSON: no simloop import, so it checks the protocol,
not simloop's own models."""

from __future__ import annotations

from pathlib import Path

import httpx

from simloop.config import RunConfig

TOKEN_A = "dGVhbS1hLXNlY3JldC10b2tlbi0xMjM0NQ=="  # base64, like the organisers' tokens
TOKEN_B = "dGVhbS1iLW90aGVyLXRva2VuLTk4NzY1"
TOKENS = {"team-a": TOKEN_A, "team-b": TOKEN_B}

PERSONA = """id = "{pid}"
name = "{pid}"
ptkb = ["I live in Lisbon.", "I am vegetarian.", "I run three times a week."]
[behaviour]
patience = 2
{topics}
"""
TOPIC = """[[topics]]
id = "{tid}"
title = "Topic {tid}"
[[topics.rubric]]
id = "q1"
question = "What is a marathon and how long is it?"
[[topics.rubric]]
id = "q2"
question = "What do runners eat before a race?"
"""


def write_persona_topics(root: Path, layout: dict[str, list[str]]) -> Path:
    """A personas folder: for each persona id, its topics (two rubric questions each)."""
    root.mkdir(parents=True, exist_ok=True)
    for pid, tids in layout.items():
        topics = "\n".join(TOPIC.format(tid=t) for t in tids)
        (root / f"{pid}.toml").write_text(PERSONA.format(pid=pid, topics=topics))
    return root


def make_cfg(tmp: Path, simulator: str = "offline", params: dict | None = None, **kw) -> RunConfig:
    personas = write_persona_topics(tmp / "personas", {"ana": ["ana-run"], "ben": ["ben-food", "ben-city"]})
    return RunConfig.model_validate({
        "out": str(tmp / "out"), "scenarios": {"personas_dir": str(personas)},
        "simulator": {"name": simulator, "params": params or {}}, "max_turns": 12, **kw})


class SimApi:
    """Sim.API as SIMULATION_API.md describes it: bearer token, JSON bodies."""

    def __init__(self, base: str, token: str | None, api: str = "run"):
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self.http = httpx.AsyncClient(base_url=base, headers=headers, timeout=30)
        self.api = api

    async def close(self):
        await self.http.aclose()

    async def start(self, run_id, description="rehearsal", **fields):
        return await self.http.post(f"/{self.api}/start", json={"run_id": run_id, "description": description, **fields})

    async def cont(self, run_id, response, **fields):
        return await self.http.post(f"/{self.api}/continue", json={"run_id": run_id, "response": response, **fields})

    async def get(self, what, run_id, api=None):
        return await self.http.get(f"/{api or self.api}/{what}", params={"run_id": run_id})
