"""Process settings chosen by environment variable (``SIMLOOP_EVENT_LOOP``,
``SIMLOOP_LLM_HTTP``): one way to read them and one message for a bad value, which the CLI
reports as one line and exit 2 before any command writes a file."""

from __future__ import annotations

import os
from typing import Sequence

from .errors import ConfigError

__all__ = ["choice"]


def choice(env: str, choices: Sequence[str], default: str, wanted: str | None = None, *, arg: str) -> str:
    """``wanted`` (the argument called ``arg``), else ``$env``, else ``default``; case and
    surrounding spaces forgiven.  A value not in ``choices`` is a ConfigError naming its source."""
    given = wanted or os.environ.get(env) or default
    name = given.strip().lower()
    if name not in choices:
        raise ConfigError(f"{arg if wanted else env}={given!r}: expected one of {', '.join(choices)}")
    return name
