"""The preflight probe: what one server accepts for one model, learnt before the run starts.

Why a probe for some capabilities and not for others (DESIGN §7, §12):

- structured output: probed.  One tiny JSON request (a few tokens) tells which form the
  server takes, and a server that cannot produce JSON at all (it refuses every form, or
  answers prose whatever is asked) is then bad input, exit 2, instead of a run whose every
  dialogue fails.  A form taken but answered with broken JSON is kept (a bad sample proves
  nothing): the run validates and repairs.  It also finds an unknown model name (404 on vLLM, Ollama, OpenAI) while
  the user can still fix the flag.
- ``seed``: rides along in the same request (a refusal names it; it is dropped and the
  request sent again), so it costs nothing more.
- usage: read off the same answer.
- the context window: read where the server reports it (``GET /models``: vLLM's
  ``max_model_len``, llama-server's ``meta.n_ctx``; else llama-server's ``GET /props``), so
  a role whose ``max_tokens`` leaves no room for a prompt is refused before the run.
  llama-cpp-python reports it nowhere: the first refusal of an over-long prompt tells it.
- ``n`` > 1: not probed.  Few roles ask for several choices and a probe would generate
  them all; the first such call learns it (one choice back: the rest asked one by one).

A probe that meets a transient failure (429, 5xx, timeout) gives up quietly: what it did
not learn stays ``assumed`` and is learnt during the run.  The probe's requests are counted
in the record (``probe_requests``), not in the run's usage.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from ..errors import ConfigError
from ..schema import LLMCapabilities, StructuredMode
from ..urls import redact_urls
from .capabilities import json_object_format, schema_in_prompt
from .config import LLMRole
from .retry import classify

__all__ = ["probe", "window_of", "PROBE_MAX_TOKENS"]

log = logging.getLogger(__name__)

PROBE_MAX_TOKENS = 48
_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
           "additionalProperties": False}
_FORMAT = {"type": "json_schema", "json_schema": {"name": "probe", "schema": _SCHEMA, "strict": True}}
_ASK = 'Is water wet? Reply with a JSON object of one key, "ok", whose value is true or false.'
_REPAIR = "That was not a JSON object. Reply with only the JSON object, for example {\"ok\": true}."
_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "text")


def window_of(listing: Any, model: str) -> int | None:
    """The context window a ``GET /models`` body reports for ``model`` (vLLM ``max_model_len``,
    llama-server ``meta.n_ctx``), or None.  A server listing one model serves it whatever the name."""
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    named = [e for e in entries if e.get("id") == model or model in (e.get("aliases") or [])]
    for entry in named or (entries if len(entries) == 1 else []):
        meta = entry.get("meta")
        for value in (entry.get("max_model_len"), meta.get("n_ctx") if isinstance(meta, dict) else None):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _props_window(base: str, client: httpx.Client, headers: dict[str, str]) -> int | None:
    """llama-server's ``GET /props`` (at the server's root): ``default_generation_settings.n_ctx``."""
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        resp = client.get(root + "/props", headers=headers)
        settings = resp.json().get("default_generation_settings") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 else None


def _is_json_object(text: str) -> bool:
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    for candidate in (body, body[body.find("{"): body.rfind("}") + 1]):
        try:
            if isinstance(json.loads(candidate), dict):
                return True
        except ValueError:
            continue
    return False


class _Probe:
    """One (endpoint, model)'s probe: sends, counts, and remembers what each form got."""

    def __init__(self, role: LLMRole, client: httpx.Client, names: str, offered: list[str]):
        self.role, self.client, self.names, self.offered = role, client, names, offered
        self.url = role.endpoint() + "/chat/completions"
        self.headers = {"Authorization": f"Bearer {role.api_key()}"}
        self.record = LLMCapabilities(endpoint=redact_urls(role.endpoint()), model=role.model)
        self.seen: list[str] = []  # what each form got, for the message when none works
        self.no_format = False

    def where(self) -> str:
        return f"LLM role{'s' if ',' in self.names else ''} {self.names} ({self.role.model} at {self.record.endpoint})"

    def send(self, body: dict[str, Any]) -> tuple[int, Any]:
        self.record.probe_requests += 1
        resp = self.client.post(self.url, json=body, headers=self.headers,
                                timeout=min(self.role.timeout_s, 120.0))
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text

    def body(self, mode: StructuredMode, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.role.model, "messages": messages, "temperature": 0.0,
                                "max_tokens": PROBE_MAX_TOKENS}
        if self.record.seed:
            body["seed"] = 7
        if mode == "json_schema":
            body["response_format"] = _FORMAT
        elif mode == "json_object":
            body["response_format"] = json_object_format(_FORMAT)
        else:
            body["messages"] = schema_in_prompt(messages, _FORMAT)
        return body

    def refused(self, status: int, answer: Any) -> str:
        """Why the request was refused, as far as it is the request's fault; raises ConfigError
        for what the user must fix (the model name, a key, a request the server never takes)."""
        refusal = classify(status, answer)
        error = answer.get("error", answer) if isinstance(answer, dict) else answer
        message = error.get("message", error) if isinstance(error, dict) else error
        said = " ".join(str(message).split())[:200]
        if refusal is not None and refusal.kind == "model":
            offered = ", ".join(self.offered[:20]) or "none listed"
            raise ConfigError(f"{self.where()}: the server has no model {self.role.model!r} (it offers: {offered}); "
                              "check --model / [llm] model")
        if status in (401, 403):
            raise ConfigError(f"{self.where()}: HTTP {status} on a chat request: the key was refused "
                              f"(is ${self.role.api_key_env} set and valid?)")
        if refusal is not None and refusal.kind == "context":
            raise ConfigError(f"{self.where()}: a prompt of a few dozen tokens does not fit the model's context "
                              f"window ({said}); start the server with a larger context")
        return f"HTTP {status}: {said}"

    def answer(self, mode: StructuredMode) -> str | None:
        """The text of the first choice in ``mode`` (a seed refused is dropped on the way), or
        None when the server refused the form; transient failures raise ``_GiveUp``."""
        messages = [{"role": "user", "content": _ASK}]
        for _ in range(3):
            status, answer = self.send(self.body(mode, messages))
            if status == 200 and isinstance(answer, dict) and isinstance(answer.get("choices"), list):
                return self.read(answer)
            refusal = classify(status, answer)
            if refusal is None and (status in (408, 429) or status >= 500):
                raise _GiveUp(f"HTTP {status}")
            why = self.refused(status, answer)
            if refusal is not None and refusal.param == "response_format" and refusal.whole:
                self.no_format = True  # it knows no response_format at all: no json_object either
            if refusal is not None and refusal.param == "seed" and self.record.seed:
                self.record.seed, self.record.learnt.seed = False, "probe"
                continue
            self.seen.append(f"{mode}: {why}")
            if mode == "text":  # even a plain request is refused: nothing here is about JSON
                raise ConfigError(f"{self.where()}: the server refused a plain chat request ({why})")
            return None
        return None

    def read(self, answer: dict[str, Any]) -> str:
        usage = answer.get("usage")
        self.record.usage = isinstance(usage, dict) and "completion_tokens" in usage
        self.record.learnt.usage = "probe"
        served = answer.get("model")
        if isinstance(served, str) and served and served != self.role.model:
            self.record.answers_as = served
        choices = answer["choices"]
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        return content if isinstance(content, str) else ""

    def structured(self) -> None:
        """The first form whose answer is a JSON object.  When none is, but some form was taken
        and answered with something JSON-like (an object cut short, malformed), the server can
        produce JSON and the samples were bad: the first such form is kept, and validation and
        repair deal with it during the run.  Only a server that never even tries (it refuses
        every form, or answers prose whatever is asked) is bad input: ConfigError."""
        tried: StructuredMode | None = None
        for mode in _MODES:
            if mode == "json_object" and self.no_format:
                continue
            text = self.answer(mode)
            if text is not None and mode == "text" and not _is_json_object(text):  # one repair, as structured() does
                repair = [{"role": "user", "content": _ASK}, {"role": "assistant", "content": text},
                          {"role": "user", "content": _REPAIR}]
                status, answer = self.send(self.body("text", repair))
                text = self.read(answer) if status == 200 and isinstance(answer, dict) and \
                    isinstance(answer.get("choices"), list) else text
            if text is not None and _is_json_object(text):
                self.settle(mode)
                return
            if text is not None:
                self.seen.append(f"{mode}: answered {' '.join(text.split())[:60]!r}, not a JSON object")
                if tried is None and text.lstrip().startswith(("{", "```")):
                    tried = mode
        if tried is not None:
            log.warning("%s: no valid JSON object in the probe's answers (%s); %s kept, answers are validated "
                        "and repaired during the run", self.where(), "; ".join(self.seen), tried)
            self.settle(tried)
            return
        raise ConfigError(f"{self.where()}: the server cannot produce JSON, which these roles need "
                          f"({'; '.join(self.seen)}); use a server or model that can (see `simloop mock-llm --help` "
                          "for what each server accepts)")

    def settle(self, mode: StructuredMode) -> None:
        self.record.structured, self.record.learnt.structured = mode, "probe"
        if self.record.learnt.seed == "assumed":
            self.record.learnt.seed = "probe"


class _GiveUp(Exception):
    """A transient failure during the probe: learn the rest during the run."""


def probe(role: LLMRole, client: httpx.Client, names: str, listing: Any) -> LLMCapabilities:
    """What the server at ``role``'s endpoint accepts for its model.  ``names``: the roles
    that use it (for messages); ``listing``: its ``GET /models`` body.  Raises ConfigError for
    bad input (an unknown model, a server that cannot produce JSON)."""
    offered = [str(e.get("id")) for e in (listing.get("data") or []) if isinstance(e, dict)] \
        if isinstance(listing, dict) and isinstance(listing.get("data"), list) else []
    p = _Probe(role, client, names, offered)
    window = window_of(listing, role.model) or _props_window(role.endpoint(), client, p.headers)
    if window is not None:
        p.record.context_window, p.record.learnt.context_window = window, "probe"
    try:
        p.structured()
    except (_GiveUp, httpx.HTTPError) as exc:
        why = str(exc) if isinstance(exc, _GiveUp) else type(exc).__name__
        log.warning("%s: probe stopped (%s); what it did not learn is learnt during the run", p.where(), why)
    return p.record
