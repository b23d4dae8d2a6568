"""Which HTTP client sends the LLM requests (``$SIMLOOP_LLM_HTTP``): a process setting.

Kept apart from ``http.py``, which imports openai, so that the CLI can refuse a bad value
at start (one line, exit 2, before any command writes a file) without that import.
"""

from __future__ import annotations

from importlib.util import find_spec

from ..settings import llm_http

__all__ = ["transport_name", "env_proxies"]

# "wire": plain http over simloop's own connections (llm/wire.py), https over aiohttp
# (llm/aio.py); "aiohttp": aiohttp for plain http too; "openai-aiohttp": openai's own
# DefaultAioHttpClient (to compare); "httpx": the fallback without aiohttp (llm/http.py).


def transport_name(wanted: str | None = None) -> str:
    """``wire`` when aiohttp is installed and nothing else is asked for (argument, then
    ``$SIMLOOP_LLM_HTTP``), else ``httpx``.  A name not in ``settings.LLM_TRANSPORTS`` is a ConfigError."""
    name = llm_http(wanted)
    if name != "httpx" and find_spec("aiohttp") is None:
        return "httpx"
    return name


def env_proxies() -> bool:
    """Does the environment name an HTTP(S) proxy?  (Then requests go the way it says.)"""
    import urllib.request

    return any(k in ("http", "https", "all") for k in urllib.request.getproxies())
