"""scripts/bench runs and writes its fixed-format results (a smoke run; no timing asserted).

Benchmarks are not tests: figures depend on the machine.  This only checks that the
harness works end to end on its smallest benchmark and that ``results.json`` keeps the
format DESIGN §11 fixes: ``{figure: {"value", "target", "ok"}}``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.data import ROOT


@pytest.mark.timeout(120)
def test_bench_quick_engine_overhead_writes_valid_results(tmp_path):
    # bench_main.py is what scripts/bench execs after setting up the venv (already set up here).
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_main.py"), "--quick", "--only", "engine_overhead",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert "engine_overhead_ms_per_turn" in results
    for name, fig in results.items():
        assert set(fig) == {"value", "target", "ok"}, name
        assert isinstance(fig["ok"], bool)
    fig = results["engine_overhead_ms_per_turn"]
    assert isinstance(fig["value"], (int, float)) and fig["value"] > 0 and fig["target"] == 1.0
    details = json.loads((tmp_path / "details.json").read_text())
    assert details["machine"]["cores"] >= 1 and details["benches"]["engine_overhead"]["best"]["turns"] > 0
    md = (tmp_path / "results.md").read_text()
    assert "engine_overhead_ms_per_turn" in md and "## Machine" in md


def test_bench_rejects_an_unknown_benchmark(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_main.py"), "--only", "nope",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown benchmark 'nope'" in proc.stderr
    assert not (tmp_path / "results.json").exists()


def test_bench_report_shows_every_target_kind(tmp_path):
    # Range targets ([lo, hi]) and "more is better" figures must read right in results.md.
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_common import figure, range_figure
    from bench_report import write_markdown

    results = {"voice_non_question_share": range_figure(0.29, 0.10, 0.40),
               "voice_words_per_utterance": range_figure(20.0, 8.5, 15.8),
               "grader_auc_true_vs_restated": figure(0.97, 0.90, better="higher"),
               "voice_top_utterance_share": figure(0.004, 0.01)}
    assert results["voice_non_question_share"]["ok"] and not results["voice_words_per_utterance"]["ok"]
    write_markdown(tmp_path / "r.md", results, {})
    md = (tmp_path / "r.md").read_text()
    assert "| 0.1–0.4 | yes |" in md and "| 8.5–15.8 | **no** |" in md
    assert "| ≥ 0.9 | yes |" in md and "| ≤ 0.01 | yes |" in md
