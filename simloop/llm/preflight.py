"""Preflight: ask each LLM endpoint a run needs for an answer before anything is written.

A run whose simulator or assistant talks to a model would otherwise create its run
directory and record every dialogue as an ``llm`` error when the server is down, the
URL lacks its ``/v1`` or the key is missing.  One ``GET {base_url}/models`` per distinct
endpoint (every OpenAI-compatible server answers it: OpenAI, vLLM, Ollama, llama.cpp,
LiteLLM, ``simloop mock-llm``) finds those before the run starts (exit 2).

Only "does not answer" fails there: a connection error, no connection within
``PREFLIGHT_TIMEOUT_S``, no answer within the role's own timeout (as for its calls, at most
``LISTING_READ_MAX_S``), 401/403 (the key) or 404 (not an OpenAI-compatible API at that
URL).  A 429 or 5xx means the server is there and busy; the retry layer deals with that
during the run.  A server that takes the connection but answers slowly is busy too:
llama-cpp-python answers ``GET /models`` only once the generation it works on is done,
which on a small machine takes longer than a connection should.  The key is sent, never
shown.

Then each distinct (endpoint, model) is probed (``probe.py``): which form of structured
output it takes, whether it knows the model, its context window when it reports one.  An
unknown model, a server that cannot produce JSON, or a window too small for a role's
``max_tokens`` (plus the prompt size the role declares) is bad input: exit 2, before anything
is written.  What the probes learnt is returned, for the run's pool and ``run.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from ..errors import BadInputError, ConfigError
from ..files import sqlite_problem
from ..schema import LLMCapabilities
from ..urls import redact_urls
from .config import DEFAULT_BASE_URL, NO_KEY, LLMConfig, LLMRole
from .probe import probe
from .transport import env_proxies

__all__ = ["check_endpoints", "check_cache", "check_judge_llm", "check_role", "check_window", "PREFLIGHT_TIMEOUT_S",
           "LISTING_READ_MAX_S"]

PREFLIGHT_TIMEOUT_S = 10.0  # to connect (and to send): a server that is up takes a connection at once
LISTING_READ_MAX_S = 120.0  # the answer may wait for a generation in progress, as the probe's does


def _listing(role: LLMRole, client: httpx.Client) -> tuple[str | None, Any]:
    """(the problem, or None; the decoded ``GET /models`` body, or None)."""
    url = role.endpoint() + "/models"
    read = min(role.timeout_s, LISTING_READ_MAX_S)
    try:
        resp = client.get(url, headers={"Authorization": f"Bearer {role.api_key()}"},
                          timeout=httpx.Timeout(PREFLIGHT_TIMEOUT_S, read=read))
    except httpx.ConnectTimeout:
        return f"no connection within {PREFLIGHT_TIMEOUT_S:g} s", None
    except httpx.TimeoutException:
        return f"connected, but no answer to GET /models within {read:g} s (the role's timeout)", None
    except httpx.HTTPError as exc:
        return f"cannot connect ({type(exc).__name__})", None
    if resp.status_code in (401, 403):
        return f"HTTP {resp.status_code}: the key was refused (is ${role.api_key_env} set and valid?)", None
    if resp.status_code == 404:
        return "HTTP 404 on GET /models: not an OpenAI-compatible API at this URL (it usually ends in /v1)", None
    try:
        return None, resp.json() if resp.status_code == 200 else None
    except ValueError:
        return None, None


def check_role(name: str, role: LLMRole, client: httpx.Client, flag: str = "--base-url") -> Any:
    """Raise a ConfigError naming ``name``, the URL and the problem, if the endpoint does not
    answer; ``flag`` is the command's flag that sets the URL.  Returns its model listing."""
    problem, listing = _listing(role, client)
    if problem is not None:
        raise ConfigError(f"LLM role {name!r} at {redact_urls(role.endpoint())}: {problem}; "
                          f"check {flag} / [llm] in the config, or start the server")
    return listing


def check_window(name: str, role: LLMRole, caps: LLMCapabilities, min_prompt: int = 0) -> None:
    """A role whose ``max_tokens`` plus the smallest prompt it sends (``min_prompt``, as the
    plugin declares it; at least one token) exceeds the window the server reported cannot
    work: refused here rather than failing every dialogue."""
    window = caps.context_window
    need = role.max_tokens + max(1, min_prompt)
    if window is not None and need > window:
        prompt = f" + its smallest prompt, {min_prompt} tokens," if min_prompt else ""
        raise ConfigError(f"LLM role {name!r} ({role.model} at {caps.endpoint}): max_tokens {role.max_tokens}{prompt} "
                          f"leaves no room in the model's context window of {window} tokens; lower max_tokens "
                          "([llm] max_tokens) or start the server with a larger context")


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


def check_endpoints(llm: LLMConfig, roles: Iterable[str], flag: str = "--base-url", *,
                    min_prompt: Mapping[str, int] | None = None) -> list[LLMCapabilities]:
    """One request per distinct (URL, key variable) among ``roles``, then a probe per distinct
    (URL, model); the first that fails raises.  ``min_prompt``: the smallest prompt (tokens)
    a role sends, where its plugin says.  Returns what the probes learnt.  When there is a
    role, the chat client's modules are imported here too."""
    resolved = {name: llm.resolve(name) for name in dict.fromkeys(roles)}
    endpoints: dict[tuple[str, str], tuple[str, LLMRole]] = {}  # the first role per (URL, key variable)
    for name, role in resolved.items():
        endpoints.setdefault((role.endpoint(), role.api_key_env), (name, role))
    if not endpoints:
        return []
    check_cache(llm)
    # Proxy variables are honoured, as the chat client itself does.  Plain-http endpoints
    # reached directly never negotiate TLS (no proxy, and the client follows no redirect), so
    # they skip loading the CA bundle: 50-100 ms of CPU in front of every such run.
    plain = not env_proxies() and all(url.startswith("http://") for url, _ in endpoints)
    found: list[LLMCapabilities] = []
    with httpx.Client(timeout=PREFLIGHT_TIMEOUT_S, verify=not plain, follow_redirects=False) as client:
        listings = {url: check_role(name, role, client, flag) for (url, _), (name, role) in endpoints.items()}
        users: dict[tuple[str, str], list[str]] = {}
        for name, role in resolved.items():
            users.setdefault((role.endpoint(), role.model), []).append(name)
        for (url, _), names in users.items():
            role = resolved[names[0]]
            caps = probe(role, client, ", ".join(repr(n) for n in names), listings.get(url))
            for name in names:
                check_window(name, resolved[name], caps, (min_prompt or {}).get(name, 0))
            found.append(caps)
    # The run will call a model: import the client stack (openai: 0.5-1 s of CPU) now, before
    # any dialogue starts, not at the first call, on the event loop, while every dialogue waits.
    from . import http  # noqa: F401
    return found
