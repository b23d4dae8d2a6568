"""Preflight: ask each LLM endpoint a run needs for an answer before anything is written.

A run whose simulator or assistant talks to a model would otherwise create its run
directory and record every dialogue as an ``llm`` error when the server is down, the
URL lacks its ``/v1`` or the key is missing.  One ``GET {base_url}/models`` per distinct
endpoint (every OpenAI-compatible server answers it: OpenAI, vLLM, Ollama, llama.cpp,
LiteLLM, ``simloop mock-llm``) finds those before the run starts (DESIGN §12: exit 2).

Only "does not answer" fails: a connection error, a timeout, 401/403 (the key) or 404
(not an OpenAI-compatible API at that URL).  A 429 or 5xx means the server is there and
busy; the retry layer deals with that during the run.  The key is sent, never shown.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx

from ..errors import BadInputError, ConfigError
from ..files import sqlite_problem
from ..urls import redact_urls
from .config import DEFAULT_BASE_URL, NO_KEY, LLMConfig, LLMRole
from .transport import env_proxies

__all__ = ["check_endpoints", "check_cache", "check_judge_llm", "check_role", "PREFLIGHT_TIMEOUT_S"]

PREFLIGHT_TIMEOUT_S = 10.0


def _problem(role: LLMRole, client: httpx.Client) -> str | None:
    url = role.endpoint() + "/models"
    try:
        resp = client.get(url, headers={"Authorization": f"Bearer {role.api_key()}"})
    except httpx.TimeoutException:
        return f"no answer within {PREFLIGHT_TIMEOUT_S:g} s"
    except httpx.HTTPError as exc:
        return f"cannot connect ({type(exc).__name__})"
    if resp.status_code in (401, 403):
        return f"HTTP {resp.status_code}: the key was refused (is ${role.api_key_env} set and valid?)"
    if resp.status_code == 404:
        return "HTTP 404 on GET /models: not an OpenAI-compatible API at this URL (it usually ends in /v1)"
    return None


def check_role(name: str, role: LLMRole, client: httpx.Client, flag: str = "--base-url") -> None:
    """Raise a ConfigError naming ``name``, the URL and the problem, if the endpoint does not
    answer; ``flag`` is the command's flag that sets the URL."""
    problem = _problem(role, client)
    if problem is not None:
        raise ConfigError(f"LLM role {name!r} at {redact_urls(role.endpoint())}: {problem}; "
                          f"check {flag} / [llm] in the config, or start the server")


def check_judge_llm(role: LLMRole, flags: str) -> None:
    """``--judge`` with nothing to call: no endpoint of its own and no key for the default
    one (the OpenAI API), so every call would fail after its retries.  ``flags`` names how
    the command sets an endpoint.  Shared by `simloop eval` and `simloop memory`."""
    if role.endpoint() == DEFAULT_BASE_URL.rstrip("/") and role.api_key() == NO_KEY:
        raise BadInputError(f"--judge needs an LLM: pass {flags} (or set {role.api_key_env})")


def check_cache(llm: LLMConfig) -> None:
    """The completion cache is opened lazily, at the first call: a file that is not an SQLite
    database would fail every dialogue of the run, so it is refused before the run starts."""
    problem = None if llm.cache is None else sqlite_problem(llm.cache)
    if problem is not None:
        raise ConfigError(f"--cache {llm.cache} (llm.cache): {problem}; give another file, or --no-cache")


def check_endpoints(llm: LLMConfig, roles: Iterable[str], flag: str = "--base-url") -> None:
    """One request per distinct (URL, key variable) among ``roles``; the first that fails raises.
    When there is one, the chat client's modules are imported here too."""
    seen: set[tuple[str, str]] = set()
    todo = []
    for name in roles:
        role = llm.resolve(name)
        key = (role.endpoint(), role.api_key_env)
        if key not in seen:
            seen.add(key)
            todo.append((name, role))
    if not todo:
        return
    check_cache(llm)
    # Proxy variables are honoured, as the chat client itself does.  Plain-http endpoints
    # reached directly never negotiate TLS (no proxy, and the client follows no redirect), so
    # they skip loading the CA bundle: 50-100 ms of CPU in front of every such run.
    plain = not env_proxies() and all(role.endpoint().startswith("http://") for _, role in todo)
    with httpx.Client(timeout=PREFLIGHT_TIMEOUT_S, verify=not plain, follow_redirects=False) as client:
        for name, role in todo:
            check_role(name, role, client, flag)
    # The run will call a model: import the client stack (openai: 0.5-1 s of CPU) now, before
    # any dialogue starts, not at the first call, on the event loop, while every dialogue waits.
    from . import http  # noqa: F401
