"""What a server accepts, per endpoint and model, and requests shaped to fit it (DESIGN §7).

Servers differ: llama-cpp-python refuses ``response_format`` of type ``json_schema`` but
builds a grammar from ``{"type": "json_object", "schema": ...}``; several servers ignore
``n`` and return one choice; some know no ``seed``.  Every role's request is written the
OpenAI way, and ``Negotiated.shape`` turns it into the form this server takes:

- structured output: ``json_schema``, else ``json_object`` with the schema next to it, else
  plain text with the schema described in the prompt (the caller validates and repairs);
- ``seed`` dropped where refused; ``n`` > 1 sent as n single requests where not honoured
  (``ChatModel`` does that part, each request counted and billed).

What is known comes from the preflight probe (``probe.py``), else is learnt from the first
answer or refusal during the run.  Learning happens once per (endpoint, model): a call
whose request touches a capability still unsettled takes the lock, so concurrent first
calls wait for one to find out instead of all being refused.  Once settled, shaping is a
few attribute reads per request.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..schema import LearntBy, LLMCapabilities
from .retry import Refusal

__all__ = ["Negotiated", "SCHEMA_IN_PROMPT", "json_object_format", "schema_in_prompt"]

# Appended to the last user message when the server takes no response_format at all.
SCHEMA_IN_PROMPT = (
    "\n\nAnswer with a single JSON object and nothing else: no prose before or after it, no code "
    "fences. The object must satisfy this JSON Schema:\n{schema}"
)
_ORDER = ("json_schema", "json_object", "text")
_SHAPED_MAX = 512


def _schema(fmt: dict[str, Any]) -> dict[str, Any] | None:
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else fmt.get("schema")
    return schema if isinstance(schema, dict) else None


def json_object_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """``{"type": "json_object", "schema": ...}`` for a ``json_schema`` response format: the
    form llama-cpp-python turns into a grammar (servers that ignore ``schema`` still give JSON)."""
    schema = _schema(fmt)
    return {"type": "json_object", "schema": schema} if schema is not None else {"type": "json_object"}


def schema_in_prompt(messages: list[dict[str, Any]], fmt: dict[str, Any]) -> list[dict[str, Any]]:
    """``messages`` with the schema of ``fmt`` described at the end of the last user message."""
    schema = _schema(fmt) or {"type": "object"}
    note = SCHEMA_IN_PROMPT.format(schema=json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = m["content"] + note
            return out
    return [*out, {"role": "user", "content": note.strip()}]


class Negotiated:
    """One (endpoint, model): its ``LLMCapabilities`` record (updated in place, as the run's
    record in ``run.json``), what is still to learn, and the lock the learning call holds."""

    __slots__ = ("record", "unsettled", "_lock", "_shaped")

    def __init__(self, record: LLMCapabilities):
        self.record = record
        learnt = record.learnt
        self.unsettled = {name for name in ("structured", "n", "seed") if getattr(learnt, name) == "assumed"}
        self._lock: asyncio.Lock | None = None
        # id(json_schema format) -> (that format, its json_object form): shaping a request reads
        # one dict; the format itself is kept so that its id cannot be reused while cached.
        self._shaped: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    # -- learning ---------------------------------------------------------------------------

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def touches(self, request: dict[str, Any]) -> bool:
        """Does ``request`` use a capability not learnt yet?"""
        u = self.unsettled
        return bool(("structured" in u and request.get("response_format") is not None)
                    or ("n" in u and (request.get("n") or 1) > 1)
                    or ("seed" in u and request.get("seed") is not None))

    def _learn(self, name: str, value: Any, how: LearntBy) -> None:
        setattr(self.record, name, value)
        setattr(self.record.learnt, name, how)
        self.unsettled.discard(name)

    def answered(self, sent: dict[str, Any], choices: int, usage: bool) -> None:
        """An answer to ``sent`` (as shaped) came back with ``choices`` choices and usage or not."""
        rec, u = self.record, self.unsettled
        if u:
            if "structured" in u and "response_format" in sent:
                self._learn("structured", rec.structured, "response")
            if "seed" in u and "seed" in sent:
                self._learn("seed", True, "response")
        n = sent.get("n") or 1
        if n > 1 and ("n" in u or (rec.n and choices < n)):  # fewer choices than asked: n is ignored
            self._learn("n", choices >= n, "response")
        if rec.usage != usage or rec.learnt.usage == "assumed":
            self._learn("usage", usage, "response")

    def degrade(self, refusal: Refusal, sent: dict[str, Any]) -> bool:
        """Adapt to a refusal of ``sent``; True when the request can be sent again in another
        form (also when a concurrent call adapted already), False when nothing is left to drop."""
        rec = self.record
        if refusal.param == "response_format":
            fmt = sent.get("response_format")
            if fmt is None:
                return False
            was = fmt.get("type") if fmt.get("type") in _ORDER else "json_schema"
            if _ORDER.index(rec.structured) > _ORDER.index(was):
                return True  # another call already stepped down past what this one sent
            if was == "text":
                return False
            # A server that knows no response_format at all takes no form of it: straight to text.
            self._learn("structured", "text" if refusal.whole else _ORDER[_ORDER.index(was) + 1], "refusal")
            return True
        if refusal.param == "seed" and "seed" in sent:
            if rec.seed:
                self._learn("seed", False, "refusal")
            return True
        if refusal.param == "n" and (sent.get("n") or 1) > 1:
            if rec.n:
                self._learn("n", False, "refusal")
            return True
        return False

    def overflowed(self, role: str, prompt_tokens: int | None, window: int | None) -> None:
        """A prompt of ``role`` was refused as longer than the context window."""
        if window is not None and self.record.context_window != window:
            self.record.context_window = window
            self.record.learnt.context_window = "refusal"
        if role not in self.record.overflows:
            self.record.overflows = {**self.record.overflows, role: prompt_tokens or 0}

    # -- shaping ----------------------------------------------------------------------------

    def shape(self, request: dict[str, Any]) -> dict[str, Any]:
        """The body to send for ``request`` (OpenAI's form, ``None`` for unset): unset values
        and ``n`` = 1 left out, then fitted to what this server takes."""
        send = {k: v for k, v in request.items() if v is not None and not (k == "n" and v == 1)}
        rec = self.record
        fmt = send.get("response_format")
        if fmt is not None and rec.structured != "json_schema":
            kind = fmt.get("type")
            if kind == "json_schema" and rec.structured == "json_object":
                send["response_format"] = self._json_object(fmt)
            elif kind in ("json_schema", "json_object") and rec.structured == "text":
                del send["response_format"]
                send["messages"] = schema_in_prompt(send["messages"], fmt)
        if not rec.seed:
            send.pop("seed", None)
        if not rec.n:  # one choice per request: ChatModel asks for the others one by one
            send.pop("n", None)
        return send

    def _json_object(self, fmt: dict[str, Any]) -> dict[str, Any]:
        hit = self._shaped.get(id(fmt))
        if hit is not None and hit[0] is fmt:
            return hit[1]
        if len(self._shaped) >= _SHAPED_MAX:
            self._shaped.clear()
        shaped = json_object_format(fmt)
        self._shaped[id(fmt)] = (fmt, shaped)
        return shaped
