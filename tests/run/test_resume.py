"""Resume you can trust (issue 14 item 2): corrupt lines found by every reader and moved out on
resume, infrastructure failures re-run with --retry-errors, run.json counts true for the whole
run after any number of resumes.  Through the real CLI in subprocesses, on real files."""

from __future__ import annotations

from simloop.run import ReadReport, Recorder, read_manifest, read_transcripts
from simloop.schema import ErrorInfo
from tests.helpers.resume_plugins import ASSISTANT, SIM, resume_cli
from tests.helpers.runs import bare_manifest, lines_of, numbered_transcript


def test_corrupt_lines_outage_and_retry_errors_end_to_end(tmp_path):
    run_dir = tmp_path / "r"
    first = resume_cli("run", "--simulator", SIM, "--assistant", ASSISTANT, "--persona", "aroha", "--persona",
                       "dieter", "--repeat", "2", "--out", tmp_path, "--run-id", "r", "--no-progress", outage="aroha")
    rows = lines_of(run_dir)
    n, failed = len(rows), sum("aroha" in r["dialogue_id"] for r in rows)
    assert 0 < failed < n and first.returncode == (1 if failed / n > 0.5 else 0), first.stderr
    for r in rows:
        assert ((r.get("error") or {}).get("source") == "llm") == ("aroha" in r["dialogue_id"]), r

    # A corrupt line in the middle (a dieter dialogue that had succeeded) and a torn last line.
    text = (run_dir / "dialogues.jsonl").read_text().splitlines(keepends=True)
    bad_no = next(i for i, r in enumerate(rows, start=1) if "dieter" in r["dialogue_id"] and i < n)
    lost = rows[bad_no - 1]["dialogue_id"]
    text[bad_no - 1] = '{"schema_version": "1.0", "run_id": "r", "dialog\n'
    (run_dir / "dialogues.jsonl").write_text("".join(text) + '{"schema_version": "1.0", "ru')

    for args in (("show", run_dir), ("eval", run_dir), ("report", run_dir, "--out", tmp_path / "r.html")):
        p = resume_cli(*args)
        assert p.returncode == 0, p.stderr
        # each problem said once (show said it twice: the reader's log line and its own note)
        assert p.stderr.count(f"dialogues.jsonl:{bad_no}: corrupt line skipped") == 1, (args, p.stderr)
        assert p.stderr.count(f"dialogues.jsonl:{n + 1}: last line is incomplete") == 1, (args, p.stderr)
        if args[0] == "show":  # and nothing else: one line per problem
            assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 2, p.stderr

    # Resume while the outage lasts, without --retry-errors: only the corrupt dialogue re-runs.
    p = resume_cli("run", "--resume", run_dir, "--no-progress", outage="aroha")
    assert p.returncode == first.returncode, p.stderr
    assert f"corrupt line(s) {bad_no} moved to dialogues.rejected.jsonl" in p.stderr
    rejected = (run_dir / "dialogues.rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 2 and rejected[0].startswith('{"schema_version": "1.0", "run_id": "r", "dialog')
    rows = lines_of(run_dir)
    ids = [r["dialogue_id"] for r in rows]
    assert len(ids) == n == len(set(ids)) and lost in ids
    assert sum(r.get("error") is not None for r in rows) == failed
    counts = read_manifest(run_dir).counts
    assert counts["dialogues"] == n and counts["errors"] == failed == counts["errors.infrastructure"]

    # The outage is over: --retry-errors replaces each failed line by its re-run.
    p = resume_cli("run", "--resume", run_dir, "--retry-errors", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert f"{failed} dialogue(s) that ended in an infrastructure error will re-run" in p.stderr
    rows = lines_of(run_dir)
    assert sorted(r["dialogue_id"] for r in rows) == sorted(ids)  # each exactly once
    assert all(r.get("error") is None and r["stop"]["reason"] == "user_satisfied" for r in rows)
    assert len((run_dir / "dialogues.retried.jsonl").read_text().splitlines()) == failed
    manifest = read_manifest(run_dir)
    assert manifest.status == "finished"
    want = {"dialogues": n, "errors": 0, "stop.user_satisfied": n, "recorded": n, "retried": failed, "scenarios": n}
    assert {k: manifest.counts.get(k) for k in want} == want

    # Any number of resumes later the counts still cover the whole run.  Flags equal to the
    # run's (the original command again) are accepted, and --concurrency may change.
    p = resume_cli("run", "--simulator", SIM, "--assistant", ASSISTANT, "--persona", "aroha", "--persona", "dieter",
                   "--repeat", "2", "--out", tmp_path, "--run-id", "r", "--resume", run_dir, "--retry-errors",
                   "--no-progress", "--concurrency", "3")
    assert p.returncode == 0 and f"resuming {run_dir}: {n} recorded, 0 to go" in p.stderr, p.stderr
    assert {k: read_manifest(run_dir).counts.get(k) for k in want} == want


async def test_resume_moves_repeated_and_corrupt_lines_and_keeps_plugin_errors(tmp_path):
    rec = Recorder.create(tmp_path, bare_manifest())
    plugin_error = numbered_transcript(2).model_copy(
        update={"error": ErrorInfo(type="ValueError", message="x", source="assistant")})
    retrieval_error = numbered_transcript(3).model_copy(update={"error": ErrorInfo(type="RetrievalError", message="y",
                                                                  source="retrieval")})
    for t in (numbered_transcript(0), numbered_transcript(1), plugin_error, retrieval_error):
        await rec.append(t)
    rec.close()
    path = rec.dir.dialogues
    with path.open("a") as fh:
        # garbage, then d0 a second time
        fh.write("not json at all\n" + numbered_transcript(0).model_dump_json() + "\n")
    rec2, done, report = Recorder.resume(tmp_path / "r1", "h1", retry_errors=True)
    assert done == {"d0", "d1", "d2"} and report.bad_lines == [5] and rec2.retried == 1
    assert [t.dialogue_id for t in read_transcripts(tmp_path / "r1", ReadReport())] == ["d0", "d1", "d2"]
    assert len((tmp_path / "r1" / "dialogues.rejected.jsonl").read_text().splitlines()) == 2
    assert rec2.counts() == {"dialogues": 3, "turns": 0, "errors": 1, "errors.infrastructure": 0,
                             "stop.user_satisfied": 3, "recorded": 3}
