# Sourced by scripts/*: make .venv ready on a fresh machine, quickly when already done.
# Usage: . scripts/_setup.sh [extras]   e.g. ". scripts/_setup.sh test"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
# The stamp records what was installed: "HASH extras=a,b".  A changed pyproject re-installs;
# extras already there are kept, so alternating ./scripts/test, ./scripts/bench and
# ./scripts/demo (each wants its own set) installs once, not on every switch.
STAMP="$VENV/.simloop-setup"
HASH="$(cat pyproject.toml scripts/_setup.sh | sha256sum | cut -c1-16)"
HAVE=""
if [ -f "$STAMP" ] && [ "$(cut -d' ' -f1 "$STAMP")" = "$HASH" ]; then
  HAVE="$(sed -n 's/^[^ ]* extras=//p' "$STAMP")"
fi
EXTRAS="$(printf '%s\n' ${EXTRAS//,/ } ${HAVE//,/ } | awk NF | sort -u | paste -sd, -)"
WANT="$HASH extras=$EXTRAS"
if [ ! -f "$STAMP" ] || ! grep -qxF "$WANT" "$STAMP"; then
  t0=$(date +%s)
  echo "setup: installing simloop${EXTRAS:+[$EXTRAS]} into .venv (first run takes about 2 minutes)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
  # torch first, pinned: this version resolves to the CPU build here; pyserini would
  # otherwise pull the newest torch with several GB of CUDA packages.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v '^WARNING: Location' >&2 || true
  SPEC="."
  [ -n "$EXTRAS" ] && SPEC=".[$EXTRAS]"
  # PYTHONWARNINGS: setuptools' notes on editable installs are boxes of asterisks in every
  # fresh setup's output, about nothing the user can act on; a failure still shows (and the
  # import check below catches it).
  PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$SPEC" 2>&1 \
    | grep -v '^WARNING: Location' >&2 || true
  "$VENV/bin/python" -c "import simloop.cli, torch, pyserini" || { echo "setup: install failed" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
  echo "setup: done in $(( $(date +%s) - t0 )) s" >&2
fi
export PATH="$VENV/bin:$PATH"
# Models and data come from installed packages only; never from a hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
