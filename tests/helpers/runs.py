"""Hand-built transcripts, manifests and run directories (eval, report, export, recorder, CLI).

Built from the pydantic models directly (not by running the engine), so every number a
test checks can be worked out by hand from what is written here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from simloop.config import RunConfig
from simloop.run.manifest import new_manifest
from simloop.run.recorder import Recorder
from simloop.schema import (
    AssistantTurn,
    Behaviour,
    ErrorInfo,
    GoldTurn,
    Passage,
    PluginRef,
    PtkbUse,
    RunManifest,
    ScenarioRef,
    Stage,
    Stop,
    Transcript,
    Turn,
    UserTurn,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
PTKB = ["I am vegetarian.", "I live in Porto.", "I play the cello.", "I have a dog."]


def turn(index: int, *, utterance: str | None = None, response: str | None = None, ptkb: Sequence[int] = (),
         passages: Sequence[str | tuple[str, bool]] = (), grade: float | None = None, rubric_id: str | None = None,
         gold: GoldTurn | None = None, stages: Sequence[Stage] = (), latency_ms: float = 100.0,
         rewritten: str | None = None, ptkb_used: Sequence[int] | None = None) -> Turn:
    """A turn; ``ptkb`` are 1-based indices in the assistant's order (all ``used`` unless
    ``ptkb_used`` names the used ones), ``passages`` docids in rank order (``(docid, used)``
    to mark a cited one)."""
    ps = []
    for rank, p in enumerate(passages, start=1):
        docid, used = (p, False) if isinstance(p, str) else p
        ps.append(Passage(rank=rank, docid=docid, score=round(10.0 - rank, 2), used=used))
    uses = [PtkbUse(index=i, statement=PTKB[(i - 1) % len(PTKB)], score=round(1.0 - n / 10, 2),
                    used=ptkb_used is None or i in ptkb_used) for n, i in enumerate(ptkb)]
    return Turn(
        index=index,
        user=UserTurn(utterance=utterance or f"question {index}?", grade=grade, rubric_id=rubric_id),
        assistant=AssistantTurn(response=response or f"answer {index}.", passages=ps, ptkb_provenance=uses,
                                rewritten_query=rewritten),
        stages=list(stages), latency_ms=latency_ms, gold=gold,
    )


def transcript(turns: Iterable[Turn], *, run_id: str = "run-a", persona: str = "p1", topic: str = "t1",
               repeat: int = 0, reason: str = "user_satisfied", by: str = "simulator", seconds: float = 2.0,
               error: tuple[str, str] | None = None, behaviour: Behaviour | None = None) -> Transcript:
    return Transcript(
        run_id=run_id, dialogue_id=f"{persona}--{topic}--{repeat}",
        scenario=ScenarioRef(persona_id=persona, topic_id=topic, behaviour=behaviour or Behaviour(), seed=repeat),
        simulator=PluginRef(name="scripted"), assistant=PluginRef(name="scripted"),
        started_at=T0, ended_at=T0 + timedelta(seconds=seconds),
        stop=Stop(reason=reason, by=by), turns=list(turns),
        error=ErrorInfo(type=error[0], message=error[1]) if error else None,
    )


def write_run(run_dir: Path, transcripts: Sequence[Transcript], config: dict | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    run_id = transcripts[0].run_id if transcripts else run_dir.name
    manifest = RunManifest(run_id=run_id, config=config or {}, config_hash="0" * 16,
                           simulator=PluginRef(name="scripted"), assistant=PluginRef(name="scripted"),
                           status="finished")
    (run_dir / "run.json").write_text(manifest.model_dump_json(indent=2))
    with (run_dir / "dialogues.jsonl").open("w") as fh:
        for t in transcripts:
            fh.write(t.model_dump_json() + "\n")
    return run_dir


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def lines_of(run_dir: Path) -> list[dict]:
    """The dialogue lines of a run folder, as JSON objects."""
    return [json.loads(x) for x in (run_dir / "dialogues.jsonl").read_text().splitlines()]


def numbered_transcript(i: int) -> Transcript:
    """A bare finished dialogue ``d<i>`` of run ``r1``, recorded now."""
    now = datetime.now(UTC)
    return Transcript(run_id="r1", dialogue_id=f"d{i}",
                      scenario=ScenarioRef(persona_id="p", topic_id="t", behaviour=Behaviour(), seed=i),
                      simulator=PluginRef(name="s"), assistant=PluginRef(name="a"),
                      started_at=now, ended_at=now, stop=Stop(reason="user_satisfied", by="simulator"))


def bare_manifest(h: str = "h1") -> RunManifest:
    """The manifest of run ``r1`` with config hash ``h``."""
    return RunManifest(run_id="r1", config={}, config_hash=h, simulator=PluginRef(name="s"),
                       assistant=PluginRef(name="a"))


def persona_run(tmp_path: Path) -> Path:
    """A finished run directory of two persona dialogues (real files, as `simloop run` writes)."""
    cfg = RunConfig(out=tmp_path, run_id="personas")
    ref = PluginRef(name="offline")
    rec = Recorder.create(tmp_path, new_manifest("personas", cfg, simulator=ref,
                                                  assistant=PluginRef(name="bm25_extractive"), scenarios=2))
    now = datetime.now(UTC)
    lines = [Transcript(run_id="personas", dialogue_id=f"p1--t{i}--0",
                        scenario=ScenarioRef(persona_id="p1", topic_id=f"t{i}", behaviour=Behaviour(), seed=0),
                        simulator=ref, assistant=PluginRef(name="bm25_extractive"), started_at=now, ended_at=now,
                        stop=Stop(reason="user_satisfied", by="simulator")) for i in (1, 2)]
    rec.dir.dialogues.write_text("".join(t.model_dump_json() + "\n" for t in lines))
    rec.finish("finished", {"scenarios": 2})
    return rec.dir.path
