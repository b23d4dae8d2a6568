"""docs/cli.md is every command's --help as the parser prints it now (scripts/cli_reference.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.data import ROOT

SCRIPT = ROOT / "scripts" / "cli_reference.py"


def _check(page) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--out", str(page)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_cli_reference_page_matches_the_parser():
    proc = _check(ROOT / "docs" / "cli.md")
    assert proc.returncode == 0, proc.stderr


def test_a_stale_page_is_caught(tmp_path):
    page = tmp_path / "cli.md"
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    page.write_text(current.replace("--max-turns MAX_TURNS", "--max-turn MAX_TURNS", 1), encoding="utf-8")
    proc = _check(page)
    assert proc.returncode == 1 and "stale" in proc.stderr
    assert page.read_text(encoding="utf-8") != current  # --check never rewrites the page
