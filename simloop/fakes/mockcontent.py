"""What the mock LLM says: deterministic, plausible content for a chat-completion request.

Everything here is a pure function of (seed, request body), so a test can rely on the
same request giving the same answer.  JSON answers are built from the request's JSON
schema, and fields that carry provenance (``references``, ``*_ids``, ``docid``) are filled
with ids the prompt shows in square brackets, so grounded-generation code gets real ids.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any

from ..text import TOKENS_PER_WORD

__all__ = ["Composer", "schema_in_prompt"]

_ID = re.compile(r"\[([A-Za-z0-9][A-Za-z0-9_:.#/\-]{0,80})\]")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]{2,}")
_STOP = frozenset(
    "the and for with that this from have what which your you are was were will would could should about "
    "there their they them then than into onto also just like more most some such only very can does did "
    "how why when where who whom whose not but all any each its it's i'm me my our ours please tell know "
    "want need give make let write answer question user assistant reply respond".split()
)
_ASKS_QUESTION = re.compile(
    r"(\b(write|generate|ask|compose|formulate|produce|next)\b.{0,60}\b(question|utterance|query|message)\b)"
    r"|(\byou are (a|the) (simulated )?user\b)|(\bsimulat\w* (a |the )?user\b)", re.I | re.S)
_ASKS_NUMBER = re.compile(r"\b(only|single|just)\s+(a\s+)?(number|digit|integer|score|grade)\b", re.I)
_RANGE = re.compile(r"\b(\d{1,2})\s*(?:-|–|to)\s*(\d{1,2})\b")
_ID_NAME = re.compile(r"reference|ids\b|ids_|_ids|^ids|docid|doc_id|citation|passage_id|indices", re.I)
_SCORE_NAME = re.compile(r"grade|score|rating", re.I)
_TEXT_NAME = re.compile(r"response|answer|text|reply|utterance|summary|content|message", re.I)
_QUESTION_NAME = re.compile(r"question|query|utterance|rewrite", re.I)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # multi-part content: keep the text parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def schema_in_prompt(messages: list[Any]) -> dict[str, Any] | None:
    """The JSON schema the last user message asks the answer to follow, if it shows one (a
    client that cannot send ``response_format`` writes it into the prompt; a capable model
    follows it).  Looked for in the message's last 8,000 characters, at most 64 braces."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = _content(users[-1])[-8000:] if users else ""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(64):
        if start < 0:
            return None
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and (value.get("type") == "object" or "properties" in value):
            return value
        start = text.find("{", start + 1)
    return None


class Composer:
    """Builds the choices of one request; ``rng`` is seeded from (seed, body) for determinism."""

    def __init__(self, request: dict[str, Any], body: bytes, seed: int):
        digest = hashlib.sha256(str(seed).encode() + b"\0" + body).digest()
        self.rng = random.Random(digest)
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        self.prompt = "\n".join(_content(m) for m in messages)
        self.prompt_hash = int.from_bytes(hashlib.sha256(self.prompt.encode()).digest()[:8], "big")
        self.ids = list(dict.fromkeys(_ID.findall(self.prompt)))
        users = [_content(m) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else self.prompt
        self.words = self._content_words(last) or self._content_words(self.prompt) or ["topic"]
        budget = request.get("max_tokens") or request.get("max_completion_tokens") or 512
        self.max_words = max(3, int(budget / TOKENS_PER_WORD))
        self.wants_question = bool(_ASKS_QUESTION.search(self.prompt))

    @staticmethod
    def _content_words(text: str) -> list[str]:
        text = _ID.sub(" ", text)  # passage ids are cited, not talked about
        return [w for w in _WORD.findall(text) if w.lower() not in _STOP]

    # -- plain text -----------------------------------------------------------------------

    def _pick(self, k: int) -> list[str]:
        return [self.rng.choice(self.words) for _ in range(k)]

    def question(self) -> str:
        a, b, c = self._pick(3)
        templates = ["What do you know about {a} and {b}?", "Can you tell me more about {a} {b}?",
                     "How does {a} relate to {c}?", "Which {a} would you recommend for {b}?",
                     "Is {a} a good idea if I care about {c}?"]
        return self.rng.choice(templates).format(a=a, b=b, c=c)

    def answer(self) -> str:
        sentences = []
        for i in range(self.rng.randint(2, 3)):
            a, b, c = self._pick(3)
            cite = f" [{self.ids[(self.prompt_hash + i) % len(self.ids)]}]" if self.ids else ""
            sentences.append(self.rng.choice([
                f"{a.capitalize()} is closely tied to {b} and {c}{cite}.",
                f"Regarding {a}, most sources point to {b} as the main factor{cite}.",
                f"You may also consider {a} together with {b}, especially for {c}{cite}.",
            ]))
        words = " ".join(sentences).split()
        return " ".join(words[: self.max_words])

    def number(self) -> str:
        match = _RANGE.search(self.prompt)
        lo, hi = (int(match.group(1)), int(match.group(2))) if match else (0, 5)
        lo, hi = min(lo, hi), max(lo, hi)
        return str(lo + self.prompt_hash % (hi - lo + 1))

    def text(self) -> str:
        if _ASKS_NUMBER.search(self.prompt):
            return self.number()
        return self.question() if self.wants_question else self.answer()

    # -- JSON -----------------------------------------------------------------------------

    def json_text(self, response_format: dict[str, Any]) -> str:
        schema = None
        if response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema") if isinstance(spec, dict) else None
        return self.json_for(schema)

    def json_for(self, schema: Any) -> str:
        """A JSON object valid against ``schema``; without one, any plausible object."""
        if not isinstance(schema, dict):
            value: Any = {"response": self.text(), "references": self.ids[:3]}
        else:
            value = _Builder(self, schema).build(schema, "", 0)
        return json.dumps(value, ensure_ascii=False)

    def garbage(self) -> str:
        """Plain text that is no language (what a broken model or proxy emits): symbols and
        digits, or a keyboard mash of consonants.  Never empty, never JSON."""
        if self.rng.random() < 0.5:
            return " ".join(self.rng.choice("#@!~^%$&*+=|<>") * self.rng.randint(1, 4) for _ in range(6)) + \
                f" {self.rng.randint(0, 999)}"
        return " ".join("".join(self.rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(self.rng.randint(3, 6)))
                        for _ in range(self.rng.randint(2, 5)))

    def bad_json(self, json_wanted: bool) -> str:
        if json_wanted:  # a truncated object: the commonest real-world failure
            return '{"response": "' + " ".join(self._pick(4))
        return "#@! " + " ".join(self.rng.choice("~^%$&*") * self.rng.randint(1, 4) for _ in range(6))


class _Builder:
    """A JSON value valid against a (strict, pydantic-generated) JSON schema."""

    def __init__(self, composer: Composer, root: dict[str, Any]):
        self.c, self.root = composer, root

    def _deref(self, schema: dict[str, Any]) -> dict[str, Any]:
        for _ in range(32):  # bounded: a self-referencing $ref must not loop forever
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/"):
                return schema
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema

    def build(self, schema: Any, name: str, depth: int) -> Any:
        if not isinstance(schema, dict) or depth > 12:
            return None
        schema = self._deref(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][(self.c.prompt_hash + depth) % len(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            variants = [v for v in schema.get(key) or [] if isinstance(v, dict)]
            if variants:
                real = [v for v in variants if self._deref(v).get("type") != "null"] or variants
                return self.build(real[0], name, depth + 1)
        for part in schema.get("allOf") or []:
            schema = {**self._deref(part), **{k: v for k, v in schema.items() if k != "allOf"}}
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        return getattr(self, f"_{kind}", self._string)(schema, name, depth)

    def _object(self, schema: dict[str, Any], name: str, depth: int) -> dict[str, Any]:
        props = schema.get("properties") or {}
        return {key: self.build(sub, key, depth + 1) for key, sub in props.items()}

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", max(lo, 3)))
        items = self._deref(schema.get("items") or {})
        if _ID_NAME.search(name) and items.get("type") in ("string", "integer", None):
            found = self._ids(items.get("type") == "integer")
            values = found[: max(lo, min(hi, 3))]
            while len(values) < lo:
                values.append(len(values) + 1 if items.get("type") == "integer" else f"doc_{len(values) + 1}")
            return values
        count = max(lo, min(hi, 2))
        return [self.build(items, name, depth + 1) for _ in range(count)]

    def _ids(self, numeric: bool) -> list[Any]:
        if numeric:
            return [int(i) for i in self.c.ids if i.isdigit()]
        return [i for i in self.c.ids if not i.isdigit()] or list(self.c.ids)

    def _string(self, schema: dict[str, Any], name: str, depth: int) -> str:
        if _ID_NAME.search(name):
            ids = self._ids(False)
            value = ids[0] if ids else "doc_1"
        elif _QUESTION_NAME.search(name):
            value = self.c.question()
        elif _TEXT_NAME.search(name):
            value = self.c.answer()
        else:
            value = " ".join(self.c._pick(2))
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        if len(value) < lo:
            value = (value + " ") * (lo // max(1, len(value)) + 1)
        return value[: int(hi)] if hi is not None else value

    def _bounds(self, schema: dict[str, Any], step: float, default: tuple[float, float]) -> tuple[float, float]:
        lo = schema.get("minimum", schema.get("exclusiveMinimum", None))
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            lo = schema["exclusiveMinimum"] + step
        hi = schema.get("maximum", None)
        if "exclusiveMaximum" in schema and "maximum" not in schema:
            hi = schema["exclusiveMaximum"] - step
        lo = default[0] if lo is None else lo
        hi = max(lo, default[1] if hi is None else hi)
        return lo, hi

    def _integer(self, schema: dict[str, Any], name: str, depth: int) -> int:
        lo, hi = self._bounds(schema, 1, (0, 5 if _SCORE_NAME.search(name) else 10))
        lo, hi = math.ceil(lo), math.floor(hi)
        span = max(1, hi - lo + 1)
        seed = self.c.prompt_hash if _SCORE_NAME.search(name) else self.c.rng.randrange(1 << 30)
        return int(lo + seed % span)

    def _number(self, schema: dict[str, Any], name: str, depth: int) -> float:
        lo, hi = self._bounds(schema, 1e-6, (0.0, 1.0))
        frac = (self.c.prompt_hash % 1000) / 999 if _SCORE_NAME.search(name) else self.c.rng.random()
        return min(hi, max(lo, round(lo + (hi - lo) * frac, 4)))

    def _boolean(self, schema: dict[str, Any], name: str, depth: int) -> bool:
        return bool((self.c.prompt_hash >> depth) & 1)

    def _null(self, schema: dict[str, Any], name: str, depth: int) -> None:
        return None
