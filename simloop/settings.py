"""Process settings chosen by environment variable (``SIMLOOP_EVENT_LOOP``,
``SIMLOOP_LLM_HTTP``, ``SIMLOOP_EMBED_THREADS``, ``SIMLOOP_EMBED_RUNTIME``, ``SIMLOOP_DEMO_VECTORS``): one way to read them and one message for a
bad value, which the CLI reports as one line and exit 2 before any command writes a file."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .errors import ConfigError

__all__ = ["choice", "count", "embed_runtime", "embed_threads", "demo_vectors"]


def choice(env: str, choices: Sequence[str], default: str, wanted: str | None = None, *, arg: str) -> str:
    """``wanted`` (the argument called ``arg``), else ``$env``, else ``default``; case and
    surrounding spaces forgiven.  A value not in ``choices`` is a ConfigError naming its source."""
    given = wanted or os.environ.get(env) or default
    name = given.strip().lower()
    if name not in choices:
        raise ConfigError(f"{arg if wanted else env}={given!r}: expected one of {', '.join(choices)}")
    return name


def count(env: str, default: int, *older: str) -> int:
    """A whole number >= 1 from ``$env`` (or the first set of the ``older`` names it replaced),
    else ``default``.  Anything else is a ConfigError naming the variable."""
    for name in (env, *older):
        raw = os.environ.get(name, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ConfigError(f"{name}={raw!r}: expected a whole number, at least 1")
            return int(raw)
    return default


def embed_threads() -> int:
    """Threads for the encoders (MiniLM and MPNet) in a run, both numpy's BLAS threads and
    ONNX Runtime's intra-op threads: one unless ``SIMLOOP_EMBED_THREADS`` says more (see
    ``search/embeddings.py`` for why one); ``SIMLOOP_TORCH_THREADS`` is its old name."""
    return count("SIMLOOP_EMBED_THREADS", 1, "SIMLOOP_TORCH_THREADS")


def embed_runtime() -> str:
    """Who runs the encoders' layers on small batches: ``onnx`` (ONNX Runtime, the default:
    1.5-1.9x less CPU per short sentence) or ``numpy`` (``SIMLOOP_EMBED_RUNTIME``;
    ``search/onnx_layers.py``)."""
    return choice("SIMLOOP_EMBED_RUNTIME", ("onnx", "numpy"), "onnx", arg="SIMLOOP_EMBED_RUNTIME")


def demo_vectors() -> bool:
    """Does the demo index get MiniLM vectors: ``SIMLOOP_DEMO_VECTORS`` ``1`` (the default)
    or ``0``.  Anything else is refused, not read as on: a typo such as ``no`` or ``false``
    would build the vectors it meant to skip (the CLI checks it before any command)."""
    raw = os.environ.get("SIMLOOP_DEMO_VECTORS", "")
    if raw not in ("", "0", "1"):
        raise ConfigError(f"SIMLOOP_DEMO_VECTORS={raw!r}: expected 0 (the demo index without MiniLM vectors) "
                          "or 1 (with them, the default)")
    return raw != "0"
