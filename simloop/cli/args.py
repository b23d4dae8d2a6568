"""Flag parsing shared by every command (kept apart from cli.py so command modules can
import it without importing each other)."""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..errors import BadInputError

__all__ = ["parse_param", "parse_params"]


def parse_param(text: str, flag: str = "--param") -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON when it is JSON ("3" -> 3, "true" -> True)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise BadInputError(f"{flag} {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def parse_params(pairs: Iterable[str] | None, flag: str = "--param") -> dict[str, Any]:
    return dict(parse_param(p, flag) for p in pairs or ())
