"""Structured output helpers: OpenAI strict JSON schemas from pydantic models, and validation.

Kept apart from the transport so agents and tests can build the same ``response_format``
the ChatModel sends, and so the mock server's schema handling can be checked against it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["strict_json_schema", "response_format_for", "validate_json", "REPAIR_PROMPT", "CUT_OFF"]

M = TypeVar("M", bound=BaseModel)
REPAIR_PROMPT = (
    "Your previous reply was not valid: {problem}\n"
    "Reply again with only the corrected JSON object, matching the required schema exactly."
)
# The problem of an answer that stopped at the token limit (finish_reason "length"): it is
# never taken for the answer, and the repair is told to write less, not to fix a typo.
CUT_OFF = ("the reply was cut off at the token limit (max_tokens {max_tokens}) before the JSON object was "
           "complete; write a shorter object ({problem})")


def _strip_fences(text: str) -> str:
    match = re.match(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", text, re.S)
    return match.group(1) if match else text


def _problem(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:5])


def validate_json(schema: type[M], text: str) -> tuple[M | None, str]:
    """(the object, "") or (None, what is wrong).  A reply that wraps its object in prose
    ("Here it is: {...}"), as models asked in plain text do, is read for the object between
    its first ``{`` and last ``}``; JSON cut short has no closing brace there and still fails."""
    body = _strip_fences(text)
    try:
        return schema.model_validate_json(body), ""
    except ValidationError as exc:
        start, end = body.find("{"), body.rfind("}")
        candidates = [body]
        if 0 <= start < end and (start > 0 or end < len(body.rstrip()) - 1):
            candidates.append(body[start:end + 1])
            try:
                return schema.model_validate_json(candidates[-1]), ""
            except ValidationError:
                pass
        problem = _problem(exc)
        if exc.errors()[0]["type"] != "json_invalid":
            return None, problem  # valid JSON against the schema: a lenient reading finds the same
        for candidate in candidates:
            obj, lenient = _with_raw_controls(schema, candidate)
            if obj is not None:
                return obj, ""
            problem = lenient or problem
        return None, problem


def _with_raw_controls(schema: type[M], body: str) -> tuple[M | None, str]:
    """``body`` read with raw newlines and tabs allowed inside strings (JSON forbids them;
    llama.cpp's JSON grammar lets a model write them, and SmolLM2 does), then validated:
    (the object, ""), or (None, what the schema says is wrong), or (None, "") when even
    this reading finds no JSON."""
    try:
        data = json.loads(body, strict=False)
    except ValueError:
        return None, ""
    try:
        return schema.model_validate(data), ""
    except ValidationError as exc:
        return None, _problem(exc)


def _strict(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_strict(v, root) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:  # strict mode forbids keys next to $ref: inline it
        target: Any = root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strict(sub, root) for name, sub in value.items()}
        elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems"):
            out[key] = _strict(value, root)
        elif not (key == "default" and value is None):
            out[key] = value
    if out.get("type") == "object":
        out.setdefault("additionalProperties", False)
        out["required"] = list(out.get("properties", {}))
    return out


def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The pydantic model's JSON schema in OpenAI's strict form (all keys required, no extras)."""
    raw = schema.model_json_schema()
    return _strict(raw, raw)


@functools.lru_cache(maxsize=256)
def response_format_for(schema: type[BaseModel]) -> dict[str, Any]:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": strict_json_schema(schema), "strict": True}}
