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
# The extra local-llm (simloop llm-server): PyPI has no binary wheel of llama-cpp-python, so
# pip compiles llama.cpp (about 6 minutes on 2 cores).  The wheel is built once into a
# wheelhouse under the user's cache and found there by every later install (--find-links),
# in this checkout or another.
WHEELHOUSE="${XDG_CACHE_HOME:-$HOME/.cache}/simloop/wheels"
llama_wheel() {
  local version log pid t0 next
  version="$(sed -n 's/.*"llama-cpp-python\[server\]==\([0-9][0-9.]*\)".*/\1/p' pyproject.toml | head -n 1)"
  [ -n "$version" ] || { echo "setup: no pinned llama-cpp-python in pyproject.toml" >&2; exit 1; }
  mkdir -p "$WHEELHOUSE"
  compgen -G "$WHEELHOUSE/llama_cpp_python-$version-*.whl" >/dev/null && return 0
  echo "setup: building llama-cpp-python $version from source for simloop[local-llm]: about 6 minutes" \
       "on 2 cores, once (the wheel is kept in $WHEELHOUSE)" >&2
  log="$(mktemp "${TMPDIR:-/tmp}/simloop-llama-build.XXXXXX")"
  t0=$(date +%s)
  "$VENV/bin/python" -m pip wheel --no-deps --disable-pip-version-check -w "$WHEELHOUSE" \
    "llama-cpp-python==$version" >"$log" 2>&1 &
  pid=$!
  next=$(( t0 + 30 ))
  while kill -0 "$pid" 2>/dev/null; do  # pip -q shows nothing while it compiles: say it is alive
    sleep 1
    if (( $(date +%s) >= next )) && kill -0 "$pid" 2>/dev/null; then
      echo "setup: still building llama-cpp-python ($(( $(date +%s) - t0 )) s)" >&2
      next=$(( next + 30 ))
    fi
  done
  if ! wait "$pid"; then
    echo "setup: building llama-cpp-python failed (a C/C++ compiler is needed); the end of $log:" >&2
    tail -n 15 "$log" >&2
    exit 1
  fi
  rm -f "$log"
  echo "setup: built llama-cpp-python in $(( $(date +%s) - t0 )) s" >&2
}
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
  FIND_LINKS=()
  case ",$EXTRAS," in *,local-llm,*) llama_wheel; FIND_LINKS=(--find-links "$WHEELHOUSE") ;; esac
  SPEC="."
  [ -n "$EXTRAS" ] && SPEC=".[$EXTRAS]"
  # PYTHONWARNINGS: setuptools' notes on editable installs are boxes of asterisks in every
  # fresh setup's output, about nothing the user can act on; a failure still shows (and the
  # import check below catches it).
  PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    ${FIND_LINKS[@]+"${FIND_LINKS[@]}"} -e "$SPEC" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  CHECK="import simloop.cli, torch, pyserini"
  case ",$EXTRAS," in *,local-llm,*) CHECK="$CHECK, llama_cpp" ;; esac  # loads its native library
  "$VENV/bin/python" -c "$CHECK" || { echo "setup: install failed" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
  echo "setup: done in $(( $(date +%s) - t0 )) s" >&2
fi
export PATH="$VENV/bin:$PATH"
# Models and data come from installed packages only; never from a hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
