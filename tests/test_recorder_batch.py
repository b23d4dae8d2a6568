"""Group commit in the recorder: dialogues that end together share one write and one fsync,
and each append still returns only once its own line is on disk (or raises)."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from pathlib import Path

from simloop.run.recorder import Recorder, read_transcripts
from simloop.schema import Behaviour, PluginRef, RunManifest, ScenarioRef, Stop, Transcript


def _t(i: int) -> Transcript:
    now = datetime.now(timezone.utc)
    return Transcript(run_id="r1", dialogue_id=f"d{i}",
                      scenario=ScenarioRef(persona_id="p", topic_id="t", behaviour=Behaviour(), seed=i),
                      simulator=PluginRef(name="s"), assistant=PluginRef(name="a"),
                      started_at=now, ended_at=now, stop=Stop(reason="user_satisfied", by="simulator"))


def _manifest() -> RunManifest:
    return RunManifest(run_id="r1", config={}, config_hash="h1", simulator=PluginRef(name="s"),
                       assistant=PluginRef(name="a"))


async def test_many_dialogues_ending_at_once_share_fsyncs(tmp_path: Path, monkeypatch):
    rec = Recorder.create(tmp_path, _manifest())
    synced: list[int] = []  # lines on disk at each fsync
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append(sum(1 for _ in (tmp_path / "r1" / "dialogues.jsonl").open("rb")))

    monkeypatch.setattr(os, "fsync", counting_fsync)
    done: list[int] = []

    async def end(i: int) -> None:
        await rec.append(_t(i))
        # back from append: this dialogue's line was on disk at the last fsync so far
        assert f'"d{i}"' in (tmp_path / "r1" / "dialogues.jsonl").read_text()
        done.append(i)

    await asyncio.gather(*(end(i) for i in range(200)))
    rec.close()
    assert sorted(done) == list(range(200)) and rec.written == 200 and rec.tally.counts()["dialogues"] == 200
    assert sorted(t.dialogue_id for t in read_transcripts(tmp_path / "r1")) == sorted(f"d{i}" for i in range(200))
    assert len(synced) < 20 and synced[-1] == 200  # one at a time would be 200 fsyncs


async def test_a_failed_write_fails_exactly_the_lines_in_it(tmp_path: Path, monkeypatch):
    rec = Recorder.create(tmp_path, _manifest())
    real = Recorder._append_sync
    calls = []

    def flaky(self, lines: bytes) -> None:
        calls.append(lines.count(b"\n"))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(self, lines)

    monkeypatch.setattr(Recorder, "_append_sync", flaky)
    results = await asyncio.gather(*(rec.append(_t(i)) for i in range(30)), return_exceptions=True)
    failed = [i for i, r in enumerate(results) if isinstance(r, OSError)]
    assert len(failed) == calls[1] > 0  # the whole second batch, nothing else
    await rec.append(_t(99))  # the disk is back: later lines are written again
    rec.close()
    on_disk = {t.dialogue_id for t in read_transcripts(tmp_path / "r1")}
    assert on_disk == {f"d{i}" for i in range(30) if i not in failed} | {"d99"}
    assert rec.written == 31 - len(failed)
