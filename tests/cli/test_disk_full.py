"""A disk that fills up during a run (issue 35: exit 1 with `OSError: No space left on
device`, no file named, no resume hint, run.json left `running`): one line naming the file
and the resume command, exit 1, run.json `interrupted`, every line on disk whole, and the
resume finishes the run once there is room.  Real OS failures: a small tmpfs, and a
file-size limit (RLIMIT_FSIZE), which needs no root."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.helpers.data import ROOT
from tests.helpers.tmpfs import TMPFS, in_tmpfs

# 41 persona x topic pairs of the shipped personas, twice: ~3 KB a dialogue, ~250 KB in all.
RUN = ["run", "--personas", str(ROOT / "personas"), "--simulator", "tests.helpers.plugins:QuickSimulator",
       "--assistant", "tests.helpers.plugins:EchoAssistant", "--repeat", "2", "--no-progress", "--run-id", "r"]
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _the_one_line(stderr: str, run: Path, reason: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(f"simloop: cannot write {run}/dialogues.jsonl: {reason}; "), lines[0]
    assert lines[0].endswith(f"run.json says interrupted; make room, then finish it with: simloop run --resume {run}")
    return lines[0]


def _whole_lines(run: Path) -> list[str]:
    """The dialogue ids on disk; every line parses (none half-written)."""
    raw = (run / "dialogues.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line)["dialogue_id"] for line in raw.splitlines()]


@TMPFS
def test_a_disk_that_fills_up_stops_the_run_resumably(tmp_path: Path):
    out = tmp_path / "copy"
    argv = " ".join(f"'{a}'" for a in (sys.executable, "-m", "simloop", *RUN, "--out", "$MNT"))
    script = f'''
{argv.replace("'$MNT'", '"$MNT"')} > "$OUT/full.out" 2> "$OUT/full.err"; echo $? > "$OUT/full.rc"
cp -a "$MNT/r" "$OUT/after-full"
mount -o remount,size=2m "$MNT"
{sys.executable} -m simloop run --resume "$MNT/r" --no-progress > "$OUT/resume.out" 2> "$OUT/resume.err"
echo $? > "$OUT/resume.rc"
cp -a "$MNT/r" "$OUT/after-resume"
'''
    out.mkdir()
    p = in_tmpfs(tmp_path / "mnt", "48k", script, env={**ENV, "OUT": str(out)})
    assert p.returncode == 0, p.stderr
    run = tmp_path / "mnt" / "r"  # the path the commands saw (the folder itself is gone now)

    assert (out / "full.rc").read_text().strip() == "1"
    line = _the_one_line((out / "full.err").read_text(), run, "No space left on device")
    assert (out / "full.out").read_text().splitlines()[-1] == str(run)  # the run directory, last line as ever
    manifest = json.loads((out / "after-full" / "run.json").read_text())
    kept = _whole_lines(out / "after-full")
    assert manifest["status"] == "interrupted" and 0 < len(kept) < 82
    assert manifest["counts"]["dialogues"] == manifest["counts"]["recorded"] == len(kept)
    assert f"; {len(kept)} dialogues are recorded, " in line

    assert (out / "resume.rc").read_text().strip() == "0", (out / "resume.err").read_text()
    done = _whole_lines(out / "after-resume")
    assert sorted(done) == sorted(set(done)) and len(done) == 82 and done[:len(kept)] == kept
    assert json.loads((out / "after-resume" / "run.json").read_text())["status"] == "finished"


def test_a_file_size_limit_stops_the_run_resumably(tmp_path: Path):
    def limited() -> None:  # in the child: its files may grow to 40 KB (the parent's stay as they are)
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    p = subprocess.run([sys.executable, "-m", "simloop", *RUN, "--out", str(tmp_path)], cwd=ROOT, text=True,
                       capture_output=True, timeout=300, env={**os.environ, **ENV}, preexec_fn=limited)
    run = tmp_path / "r"
    assert p.returncode == 1, p.stderr
    _the_one_line(p.stderr, run, "File too large")
    kept = _whole_lines(run)
    assert 0 < len(kept) < 82 and (run / "dialogues.jsonl").stat().st_size <= 40_000
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["counts"]["dialogues"] == len(kept)

    p = subprocess.run([sys.executable, "-m", "simloop", "run", "--resume", str(run), "--no-progress"], cwd=ROOT,
                       text=True, capture_output=True, timeout=300, env={**os.environ, **ENV})
    assert p.returncode == 0, p.stderr
    assert sorted(_whole_lines(run)) == sorted(set(_whole_lines(run))) and len(_whole_lines(run)) == 82
