"""Process settings: the ``SIMLOOP_*`` variables that say how this process works (its event
loop, HTTP client, encoder threads, caches, Java), not what a run produces.

Every one is declared in ``PROCESS_SETTINGS`` and read here, by one function each, with one
message for a bad value (a ``ConfigError``, which the CLI reports as one line and exit 2
before any command writes a file; ``check`` reads them all at start).  Every other
``SIMLOOP_*`` variable is a run setting: ``config.py`` maps it onto a ``RunConfig`` field,
and refuses one that names neither.  ``SCRIPT_SETTINGS`` are read by the repository's
scripts and tests, never by simloop: declared so that a command run from a shell that sets
them does not take them for run settings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigError

__all__ = ["PROCESS_SETTINGS", "SCRIPT_SETTINGS", "EVENT_LOOPS", "LLM_TRANSPORTS", "is_setting", "choice", "count",
           "check", "event_loop", "llm_http", "embed_threads", "embed_runtime", "demo_vectors", "vector_cache_mb",
           "cache_root", "cache_named", "jvm_options", "serve_tokens"]

PROCESS_SETTINGS: dict[str, str] = {
    "SIMLOOP_EVENT_LOOP": "the event loop: uvloop (the default where installed) or asyncio",
    "SIMLOOP_LLM_HTTP": "the HTTP client of LLM requests: wire (the default), aiohttp, openai-aiohttp or httpx",
    "SIMLOOP_EMBED_THREADS": "threads of each encoder (MiniLM, MPNet) in a run; default 1",
    "SIMLOOP_TORCH_THREADS": "the older name of SIMLOOP_EMBED_THREADS",
    "SIMLOOP_EMBED_RUNTIME": "who runs the encoders' layers on small batches: onnx (the default) or numpy",
    "SIMLOOP_DEMO_VECTORS": "1: fill the vector cache with the demo corpus up front (minutes, once); 0 (the default): "
                            "runs embed what they retrieve, as they go",
    "SIMLOOP_VECTOR_CACHE_MB": "the most megabytes the vector cache keeps (oldest dropped first); default 1024, 0: "
                               "no bound",
    "SIMLOOP_CACHE": "the cache folder (demo corpus and index, vector cache, unpacked models); default "
                     "~/.cache/simloop",
    "SIMLOOP_JVM_OPTIONS": "extra options for Java (space-separated, e.g. -Xmx2g)",
    "SIMLOOP_SERVE_TOKENS": "simloop serve's bearer tokens, TEAM=TOKEN,...",
}
SCRIPT_SETTINGS: dict[str, str] = {
    "SIMLOOP_IKAT_DATA": "the iKAT data folder of the benches and tests (scripts/bench_common.py)",
    "SIMLOOP_TEST_CACHE": "the test suite's cache folder (scripts/test)",
    "SIMLOOP_TEST_WORKERS": "the test suite's pytest-xdist workers (scripts/test)",
}
EVENT_LOOPS = ("uvloop", "asyncio")
# "wire": simloop's lean client (llm/aio.py), plain http over its own connections and https
# over aiohttp; "aiohttp": the same client with aiohttp for plain http too; "openai-aiohttp":
# openai's own aiohttp client (to compare); "httpx": the fallback without aiohttp.
LLM_TRANSPORTS = ("wire", "aiohttp", "openai-aiohttp", "httpx")


def is_setting(name: str) -> bool:
    """Is ``name`` a process or script setting (so not a run setting)?"""
    return name in PROCESS_SETTINGS or name in SCRIPT_SETTINGS


def choice(env: str, choices: Sequence[str], default: str, wanted: str | None = None, *, arg: str) -> str:
    """``wanted`` (the argument called ``arg``), else ``$env``, else ``default``; case and
    surrounding spaces forgiven.  A value not in ``choices`` is a ConfigError naming its source."""
    given = wanted or os.environ.get(env) or default
    name = given.strip().lower()
    if name not in choices:
        raise ConfigError(f"{arg if wanted else env}={given!r}: expected one of {', '.join(choices)}")
    return name


def count(env: str, default: int, *older: str, minimum: int = 1, meaning: str = "") -> int:
    """A whole number >= ``minimum`` from ``$env`` (or the first set of the ``older`` names it
    replaced), else ``default``.  Anything else is a ConfigError naming the variable (and
    ``meaning``, what the number counts)."""
    for name in (env, *older):
        raw = os.environ.get(name, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < minimum:
                raise ConfigError(f"{name}={raw!r}: expected a whole number{meaning or f', at least {minimum}'}")
            return int(raw)
    return default


def check() -> None:
    """Read every setting that can hold a bad value: the first bad one is a ConfigError."""
    event_loop()
    llm_http()
    embed_threads()
    embed_runtime()
    demo_vectors()
    vector_cache_mb()


def event_loop(wanted: str | None = None) -> str:
    """The event loop asked for: ``wanted`` (the argument ``loop``), else
    ``$SIMLOOP_EVENT_LOOP``, else uvloop (``loop.py`` falls back where it is not installed)."""
    return choice("SIMLOOP_EVENT_LOOP", EVENT_LOOPS, "uvloop", wanted, arg="loop")


def llm_http(wanted: str | None = None) -> str:
    """The LLM requests' HTTP client asked for: ``wanted`` (the argument ``transport``), else
    ``$SIMLOOP_LLM_HTTP``, else ``wire`` (the LLM layer falls back to httpx without aiohttp)."""
    return choice("SIMLOOP_LLM_HTTP", LLM_TRANSPORTS, "wire", wanted, arg="transport")


def embed_threads() -> int:
    """Threads for the encoders (MiniLM and MPNet) in a run, both numpy's BLAS threads and
    ONNX Runtime's intra-op threads: one unless ``SIMLOOP_EMBED_THREADS`` says more (see
    ``search/embeddings.py`` for why one); ``SIMLOOP_TORCH_THREADS`` is its old name."""
    return count("SIMLOOP_EMBED_THREADS", 1, "SIMLOOP_TORCH_THREADS")


def embed_runtime() -> str:
    """Who runs the encoders' layers on small batches: ``onnx`` (ONNX Runtime, the default:
    less CPU per short sentence) or ``numpy`` (``SIMLOOP_EMBED_RUNTIME``;
    ``search/onnx_layers.py``)."""
    return choice("SIMLOOP_EMBED_RUNTIME", ("onnx", "numpy"), "onnx", arg="SIMLOOP_EMBED_RUNTIME")


def demo_vectors() -> bool:
    """Is the vector cache filled with the demo corpus up front: ``SIMLOOP_DEMO_VECTORS``
    ``1``, or ``0`` (the default: runs embed what they retrieve).  Anything else is refused,
    not guessed: a typo such as ``yes`` or ``false`` would do what it did not mean (the CLI
    checks it before any command)."""
    raw = os.environ.get("SIMLOOP_DEMO_VECTORS", "")
    if raw not in ("", "0", "1"):
        raise ConfigError(f"SIMLOOP_DEMO_VECTORS={raw!r}: expected 0 (embed as runs need it, the default) "
                          "or 1 (fill the vector cache with the demo corpus up front)")
    return raw == "1"


def vector_cache_mb() -> int:
    """The bound of the vector cache in megabytes (``SIMLOOP_VECTOR_CACHE_MB``, default 1024;
    ``0``: no bound).  Anything but a whole number is a ConfigError."""
    return count("SIMLOOP_VECTOR_CACHE_MB", 1024, minimum=0, meaning=" of megabytes (0: no bound)")


def cache_root(cache_dir: Path | None = None) -> Path:
    """``cache_dir``, else ``$SIMLOOP_CACHE``, else ``~/.cache/simloop``: where the demo
    corpus and index, the vector cache and the unpacked models are kept."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("SIMLOOP_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "simloop"


def cache_named(root: Path) -> str:
    """The cache folder ``root`` as a message names it: by the variable when it set it."""
    return f"SIMLOOP_CACHE={root}" if os.environ.get("SIMLOOP_CACHE") else f"cache folder {root}"


def jvm_options() -> list[str]:
    """The user's own Java options (``SIMLOOP_JVM_OPTIONS``, space-separated); Java checks them."""
    return os.environ.get("SIMLOOP_JVM_OPTIONS", "").split()


def serve_tokens() -> str:
    """``SIMLOOP_SERVE_TOKENS`` as given (``TEAM=TOKEN,...``; ``simloop serve`` parses it), or ''."""
    return os.environ.get("SIMLOOP_SERVE_TOKENS", "")
