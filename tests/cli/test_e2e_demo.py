"""End to end through the real stack: personas/, offline simulator, bm25_extractive,
the real pyserini demo index, MiniLM and MPNet, the real CLI in a subprocess."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simloop.inputs.personas import load_personas
from simloop.run import read_manifest, read_transcripts
from tests.helpers.data import ROOT

pytestmark = pytest.mark.slow


def simloop(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "simloop", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# DESIGN §4: "Fields are always present (null when empty)": the raw line, not the model
# (which fills defaults on reading), must carry each of them.
_TOP = {"schema_version", "run_id", "dialogue_id", "scenario", "simulator", "assistant", "started_at", "ended_at",
        "stop", "turns", "usage", "error"}
_NESTED = {"scenario": {"persona_id", "topic_id", "behaviour", "seed"}, "simulator": {"name", "params"},
           "assistant": {"name", "params"}, "stop": {"reason", "by", "detail", "utterance"},
           "usage": {"calls", "prompt_tokens", "completion_tokens", "retries", "cost_usd"}}
_TURN = {"index", "user", "assistant", "stages", "latency_ms"}
_USER = {"utterance", "rubric_id", "grade", "intent"}
_ANSWER = {"response", "rewritten_query", "passages", "ptkb_provenance", "context"}
_STAGE = {"name", "model", "prompt_tokens", "completion_tokens", "latency_ms", "cached", "retries"}


def assert_design_fields(line: dict) -> None:
    assert _TOP <= line.keys(), _TOP - line.keys()
    for key, want in _NESTED.items():
        assert want <= line[key].keys(), (key, want - line[key].keys())
    for turn in line["turns"]:
        assert _TURN <= turn.keys() and _USER <= turn["user"].keys() and _ANSWER <= turn["assistant"].keys()
        assert {"strategy", "tokens"} <= turn["assistant"]["context"].keys()
        assert all({"rank", "docid", "score", "used"} <= p.keys() for p in turn["assistant"]["passages"])
        assert all({"index", "statement", "score", "used"} <= p.keys() for p in turn["assistant"]["ptkb_provenance"])
        assert all(_STAGE <= s.keys() for s in turn["stages"]), turn["stages"]


def test_demo_dialogues_validate(demo_run):
    # The demo on six personas' first topics (conftest.py: the run is shared with test_adversaries).
    assert demo_run.returncode == 0, demo_run.stderr
    run_dir = Path(demo_run.stdout.strip().splitlines()[-1])
    assert run_dir == demo_run.run_dir
    ts = list(read_transcripts(run_dir))  # every line validates against the schema
    assert len(ts) == 6
    ptkb = {p.id: p.ptkb for p in load_personas(ROOT / "personas")}
    for t in ts:
        assert t.stop.by == "simulator" or t.stop.reason == "max_turns", t.stop
        assert t.error is None
        # The closing line is the simulator's last word, never a turn the assistant answers.
        assert t.stop.utterance or t.stop.by != "simulator"
        assert not {turn.user.intent for turn in t.turns} & {"farewell", "give_up"}
        for turn in t.turns:
            a = turn.assistant
            assert a.passages and all(p.docid and p.rank >= 1 for p in a.passages)
            # provenance ranks the whole PTKB, best first (DESIGN §4), and names its statements
            ranked = [(u.index, u.statement) for u in a.ptkb_provenance]
            assert sorted(ranked) == list(enumerate(ptkb[t.scenario.persona_id], 1))
            assert [u.score for u in a.ptkb_provenance] == sorted((u.score for u in a.ptkb_provenance), reverse=True)
            assert {"ptkb", "rewrite", "retrieve", "generate"} <= {s.name for s in turn.stages}  # the agent's stages
            assert turn.user.utterance.strip()
    assert len({t.scenario.persona_id for t in ts}) >= 2
    for line in (run_dir / "dialogues.jsonl").read_text().splitlines():
        assert_design_fields(json.loads(line))
    manifest = read_manifest(run_dir)
    assert manifest.status == "finished" and manifest.counts["dialogues"] == 6
    show = simloop("show", str(run_dir), "--dialogue", ts[0].dialogue_id)
    sout, serr = show.communicate(timeout=120)
    assert show.returncode == 0 and ts[0].turns[0].user.utterance[:20] in sout
    assert "closing line" in sout


def test_sigkill_then_resume_records_each_dialogue_once(tmp_path):
    # Two turns a dialogue (the kill, not the dialogue, is the point), so some are recorded,
    # two in flight and one not started when the kill comes.
    run_dir = tmp_path / "k"
    p = simloop("run", "--limit", "6", "--concurrency", "2", "--max-turns", "2", "--out", str(tmp_path),
                "--run-id", "k", "--no-progress")
    lines = run_dir / "dialogues.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if lines.exists() and lines.read_text().count("\n") >= 3:
            break
        if p.poll() is not None:
            pytest.fail("run ended before it could be killed: " + p.stderr.read())
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    before = lines.read_text().count("\n")
    assert before < 6, "run finished before the kill; nothing to resume"
    assert read_manifest(run_dir).status == "running"  # killed: never finished
    r = simloop("run", "--resume", str(run_dir), "--no-progress")
    out, err = r.communicate(timeout=600)
    assert r.returncode == 0, err
    ids = [t.dialogue_id for t in read_transcripts(run_dir)]
    assert len(ids) == 6 and len(set(ids)) == 6
    assert read_manifest(run_dir).status == "finished"
