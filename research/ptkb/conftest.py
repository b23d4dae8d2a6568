"""The research modules import each other by bare name and ``bench_ptkb`` from scripts/:
put both folders on the path (``python -m pytest research/ptkb``; not part of the suite)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "scripts")]
