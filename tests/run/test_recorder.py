import asyncio
import errno
import json
import os
import sys
from pathlib import Path

import pytest

from simloop.errors import DataFileError, ResumeError
from simloop.run import ReadReport, Recorder, read_manifest, read_transcripts
from tests.helpers.data import ROOT
from tests.helpers.runs import bare_manifest, numbered_transcript
from tests.helpers.tmpfs import TMPFS, in_tmpfs


async def test_append_and_read_back(tmp_path: Path):
    rec = Recorder.create(tmp_path, bare_manifest())
    for i in range(3):
        await rec.append(numbered_transcript(i))
    rec.finish("finished", {"dialogues": 3})
    got = [t.dialogue_id for t in read_transcripts(tmp_path / "r1")]
    assert got == ["d0", "d1", "d2"]
    assert '"status": "finished"' in (tmp_path / "r1" / "run.json").read_text()
    counts = read_manifest(tmp_path / "r1").counts  # every count README names, 0 or not
    assert counts["dialogues"] == counts["recorded"] == 3 and counts["retried"] == 0 and counts["errors"] == 0


def test_a_run_stopped_before_its_first_dialogue_reads_as_empty(tmp_path: Path):
    # Interrupted at once: run.json, no dialogues.jsonl; show/eval/report see an empty run.
    rec = Recorder.create(tmp_path, bare_manifest())
    rec.finish("interrupted", {})
    assert not (tmp_path / "r1" / "dialogues.jsonl").exists()
    assert list(read_transcripts(tmp_path / "r1")) == []
    (tmp_path / "plain").mkdir()  # a folder that is no run at all still says so
    with pytest.raises(DataFileError, match="a run directory"):
        list(read_transcripts(tmp_path / "plain"))


async def test_torn_tail_is_reported_and_cut_on_resume(tmp_path: Path):
    rec = Recorder.create(tmp_path, bare_manifest())
    await rec.append(numbered_transcript(0))
    rec.close()
    path = tmp_path / "r1" / "dialogues.jsonl"
    full = numbered_transcript(1).model_dump_json()
    with path.open("a") as fh:
        fh.write(full[: len(full) // 2])  # a crash mid-write
    report = ReadReport()
    assert [t.dialogue_id for t in read_transcripts(tmp_path / "r1", report)] == ["d0"]
    assert report.torn_tail
    rec2, done, rep = Recorder.resume(tmp_path / "r1", "h1")
    assert done == {"d0"} and rep.torn_tail
    await rec2.append(numbered_transcript(1))
    rec2.close()
    assert [t.dialogue_id for t in read_transcripts(tmp_path / "r1")] == ["d0", "d1"]


def test_resume_refuses_other_config(tmp_path: Path):
    Recorder.create(tmp_path, bare_manifest("aaa")).close()
    with pytest.raises(ResumeError, match="config differs"):
        Recorder.resume(tmp_path / "r1", "bbb")


def test_existing_run_dir_is_not_overwritten(tmp_path: Path):
    Recorder.create(tmp_path, bare_manifest()).close()
    with pytest.raises(ResumeError, match="already exists"):
        Recorder.create(tmp_path, bare_manifest())


def test_invalid_line_is_skipped_and_reported_with_file_and_line(tmp_path: Path, caplog):
    d = tmp_path / "r"
    d.mkdir()
    (d / "dialogues.jsonl").write_text(numbered_transcript(0).model_dump_json() + '\n{"schema_version": "1.0"}\n')
    report = ReadReport()
    assert [t.dialogue_id for t in read_transcripts(d, report)] == ["d0"]
    assert report.bad_lines == [2] and "run_id: Field required" in report.reasons[2]
    assert "dialogues.jsonl:2: corrupt line skipped (not a transcript: run_id: Field required)" in caplog.text


def test_bad_run_id(tmp_path: Path):
    m = bare_manifest()
    m.run_id = "../escape"
    with pytest.raises(DataFileError, match="run id"):
        Recorder.create(tmp_path, m)


# Group commit: dialogues that end together share one write and one fsync, and each append
# still returns only once its own line is on disk (or raises).


async def test_many_dialogues_ending_at_once_share_fsyncs(tmp_path: Path, monkeypatch):
    rec = Recorder.create(tmp_path, bare_manifest())
    synced: list[int] = []  # lines on disk at each fsync
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append(sum(1 for _ in (tmp_path / "r1" / "dialogues.jsonl").open("rb")))

    monkeypatch.setattr(os, "fsync", counting_fsync)
    done: list[int] = []

    async def end(i: int) -> None:
        await rec.append(numbered_transcript(i))
        # back from append: this dialogue's line was on disk at the last fsync so far
        assert f'"d{i}"' in (tmp_path / "r1" / "dialogues.jsonl").read_text()
        done.append(i)

    await asyncio.gather(*(end(i) for i in range(200)))
    rec.close()
    assert sorted(done) == list(range(200)) and rec.written == 200 and rec.tally.counts()["dialogues"] == 200
    assert sorted(t.dialogue_id for t in read_transcripts(tmp_path / "r1")) == sorted(f"d{i}" for i in range(200))
    assert len(synced) < 20 and synced[-1] == 200  # one at a time would be 200 fsyncs


async def test_a_failed_write_fails_exactly_the_lines_in_it(tmp_path: Path, monkeypatch):
    rec = Recorder.create(tmp_path, bare_manifest())
    real = Recorder._append_sync
    calls = []

    def flaky(self, lines: list) -> None:
        calls.append(len(lines))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(self, lines)

    monkeypatch.setattr(Recorder, "_append_sync", flaky)
    results = await asyncio.gather(*(rec.append(numbered_transcript(i)) for i in range(30)), return_exceptions=True)
    failed = [i for i, r in enumerate(results) if isinstance(r, OSError)]
    assert len(failed) == calls[1] > 0  # the whole second batch, nothing else
    await rec.append(numbered_transcript(99))  # the disk is back: later lines are written again
    rec.close()
    on_disk = {t.dialogue_id for t in read_transcripts(tmp_path / "r1")}
    assert on_disk == {f"d{i}" for i in range(30) if i not in failed} | {"d99"}
    assert rec.written == 31 - len(failed)


async def test_lines_written_for_cancelled_waiters_are_counted(tmp_path: Path, monkeypatch):
    # Ctrl-C cancels dialogues waiting for the writer while their lines already go out in
    # another's batch: run.json said "13 dialogues recorded" over 51 lines on disk.
    rec = Recorder.create(tmp_path, bare_manifest())
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (__import__("time").sleep(0.05), real_fsync(fd)))
    tasks = [asyncio.ensure_future(rec.append(numbered_transcript(i))) for i in range(20)]
    await asyncio.sleep(0.02)  # d0 is being written alone; d1-d19 queue behind it
    await asyncio.sleep(0.05)  # d1's batch (d1-d19) is being written; d2-d19 wait for the lock
    for t in tasks[2:]:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    rec.finish("interrupted", {})
    on_disk = sum(1 for _ in read_transcripts(tmp_path / "r1"))
    counts = read_manifest(tmp_path / "r1").counts
    assert on_disk == 20 and counts["recorded"] == counts["dialogues"] == 20


async def test_retried_survives_a_resume_that_never_finishes(tmp_path: Path):
    from simloop.schema import ErrorInfo

    rec = Recorder.create(tmp_path, bare_manifest())
    for i in range(3):
        t = numbered_transcript(i)
        if i:
            t.error = ErrorInfo(source="llm", type="APIError", message="500")
        await rec.append(t)
    rec.finish("finished", {})
    rec2, done, _ = Recorder.resume(tmp_path / "r1", "h1", retry_errors=True)
    assert done == {"d0"}
    rec2.close()  # killed: no finish
    assert read_manifest(tmp_path / "r1").counts["retried"] == 2
    rec3, _, _ = Recorder.resume(tmp_path / "r1", "h1", retry_errors=True)
    rec3.finish("finished", {})
    assert read_manifest(tmp_path / "r1").counts["retried"] == 2  # not counted twice


async def test_a_full_disk_names_the_file_it_could_not_write(tmp_path: Path, monkeypatch):
    rec = Recorder.create(tmp_path, bare_manifest())

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")  # as a write on an open file says it: no file name

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        await rec.append(numbered_transcript(0))
    rec.close()
    assert caught.value.filename == str(tmp_path / "r1" / "dialogues.jsonl") and caught.value.errno == 28


def test_resuming_a_run_on_a_read_only_file_system_is_refused_before_any_write(tmp_path: Path, monkeypatch):
    import simloop.files as files
    from simloop.run.runlock import LOCK_FILE

    rec = Recorder.create(tmp_path, bare_manifest())
    rec.finish("interrupted", {})
    (tmp_path / "r1" / LOCK_FILE).unlink()
    run_dir = str(tmp_path / "r1")
    real_access, real_statvfs = os.access, os.statvfs

    class ReadOnly:  # statvfs of a read-only mount (the real one, but for the flag)
        def __init__(self, real):
            self.f_flag = real.f_flag | os.ST_RDONLY

    monkeypatch.setattr(files.os, "access", lambda p, mode: False if str(p) == run_dir else real_access(p, mode))
    monkeypatch.setattr(files.os, "statvfs",
                        lambda p: ReadOnly(real_statvfs(p)) if str(p) == run_dir else real_statvfs(p))
    refused = f"cannot resume {run_dir}: cannot write in {run_dir} \\(read-only file system\\)"
    with pytest.raises(ResumeError, match=refused):
        Recorder.resume(tmp_path / "r1", "h1")
    assert not (tmp_path / "r1" / LOCK_FILE).exists()  # nothing written, not even the lock


async def test_resuming_a_finished_run_that_adds_nothing_keeps_its_finish_time(tmp_path: Path):
    rec = Recorder.create(tmp_path, bare_manifest())
    await rec.append(numbered_transcript(0))
    rec.finish("finished", {})
    finished_at = read_manifest(tmp_path / "r1").finished_at
    rec2, done, _ = Recorder.resume(tmp_path / "r1", "h1")
    assert done == {"d0"}
    rec2.finish("finished", {})  # "0 to go"
    assert read_manifest(tmp_path / "r1").finished_at == finished_at
    rec3, _, _ = Recorder.resume(tmp_path / "r1", "h1")
    await rec3.append(numbered_transcript(1))  # this one adds a dialogue: a new finish time
    rec3.finish("finished", {})
    assert read_manifest(tmp_path / "r1").finished_at > finished_at


# A real full disk (tests/helpers/tmpfs.py): the recorder in a process of its own, on a 16 KB
# tmpfs that a filler file fills up after the run has started; it prints what it saw.
_ON_A_FULL_DISK = '''
import asyncio, json, os, sys
from pathlib import Path
from simloop.config import RunConfig
from simloop.run import Recorder
from simloop.run.manifest import new_manifest
from simloop.schema import PluginRef
from tests.helpers.runs import numbered_transcript

mnt = Path(os.environ["MNT"])
rec = Recorder.create(mnt, new_manifest("r1", RunConfig(), simulator=PluginRef(name="s"),
                                        assistant=PluginRef(name="a"), scenarios=40))

async def main():
    await rec.append(numbered_transcript(0))  # one line: the file's first page is partly used
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    os.close(fd)
    ends = await asyncio.gather(*(rec.append(numbered_transcript(i)) for i in range(1, 40)), return_exceptions=True)
    return [type(e).__name__ for e in ends if isinstance(e, BaseException)]

failed = asyncio.run(main())
rec.finish("failed", {"scenarios": 40})
print(json.dumps({"failed": failed, "written": rec.written, "error": [rec.write_error.errno, rec.write_error.filename],
                  "manifest_error": repr(rec.manifest_error)}))
'''


@TMPFS
def test_a_full_disk_leaves_whole_lines_and_an_interrupted_run_json(tmp_path: Path):
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    out.mkdir()
    script = f'{sys.executable} -c "$CODE" > "$OUT/said.json" && cp -a "$MNT/r1" "$OUT/r1"'
    p = in_tmpfs(mnt, "16k", script, env={"CODE": _ON_A_FULL_DISK, "OUT": str(out), "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    said = json.loads((out / "said.json").read_text())
    assert said["failed"] and set(said["failed"]) == {"OSError"}
    assert said["error"] == [errno.ENOSPC, str(mnt / "r1" / "dialogues.jsonl")]  # names the file
    assert said["manifest_error"] == "None"
    # the batch that did not fit was cut off again: whole lines only, as many as were counted
    raw = (out / "r1" / "dialogues.jsonl").read_bytes()
    ids = [json.loads(line)["dialogue_id"] for line in raw.splitlines()]
    assert raw.endswith(b"\n") and len(ids) == said["written"] and "d0" in ids
    manifest = read_manifest(out / "r1")  # no room for a new copy: the compact form, in place
    assert manifest.status == "interrupted" and manifest.counts["dialogues"] == said["written"]
    assert "no room for a new copy" in p.stderr and not (out / "r1" / "run.json").read_text().startswith("{\n")
