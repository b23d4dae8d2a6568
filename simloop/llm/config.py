"""The ``[llm]`` section of a run config: one default role plus partial overrides per role.

A role name may be dotted (``assistant.rewrite``); it resolves as
default ⊕ roles["assistant"] ⊕ roles["assistant.rewrite"], so an agent can give one of
its stages another model without repeating the endpoint settings.  Overrides are plain
dicts (the CLI rewrites them in place), so their keys are checked on resolution too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError, first_error

__all__ = ["LLMRole", "LLMConfig", "DEFAULT_BASE_URL", "NO_KEY"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (vLLM, Ollama, llama.cpp, the mock) ignore the key, but the client wants one.
NO_KEY = "sk-no-key"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LLMRole(BaseModel):
    """Where and how one role talks to a model.  Holds the NAME of the key variable only."""

    # hide_input_in_errors: a key pasted into the wrong field must not be echoed back.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    base_url: str | None = Field(None, description="None: $OPENAI_BASE_URL, else the OpenAI API")
    model: str = "gpt-4o-mini"
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the environment variable holding the key")
    temperature: float = Field(0.7, ge=0, le=2)
    max_tokens: int = Field(512, ge=1)
    rpm: float | None = Field(None, gt=0, description="requests per minute per endpoint (None: unlimited)")
    tpm: int | None = Field(None, gt=0, description="tokens per minute per endpoint (None: unlimited)")
    timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(5, ge=1, le=50)
    retry_after_cap_s: float = Field(30.0, ge=0)
    backoff_base_s: float = Field(0.5, ge=0, description="first backoff ceiling; doubles per attempt (full jitter)")
    backoff_cap_s: float = Field(20.0, ge=0)
    price_prompt_per_1k: float | None = Field(None, ge=0)
    price_completion_per_1k: float | None = Field(None, ge=0)

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, value: str) -> str:
        # The message never repeats the value: someone may have pasted the key itself.
        if not _ENV_NAME.match(value) or len(value) > 64:
            raise ValueError("must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not the key")
        return value

    def endpoint(self) -> str:
        """The base URL this role talks to (explicit, else $OPENAI_BASE_URL, else OpenAI)."""
        url = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return url.rstrip("/")

    def api_key(self) -> str:
        """Read at client creation only; never stored on a model, stage or log line."""
        return os.environ.get(self.api_key_env) or NO_KEY

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price_prompt_per_1k is None and self.price_completion_per_1k is None:
            return None
        return (prompt_tokens * (self.price_prompt_per_1k or 0.0)
                + completion_tokens * (self.price_completion_per_1k or 0.0)) / 1000.0


_ROLE_KEYS = frozenset(LLMRole.model_fields)


class LLMConfig(BaseModel):
    """``[llm]``: ``default`` settings, ``roles`` overrides, and an optional sqlite cache file."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    default: LLMRole = Field(default_factory=LLMRole)
    roles: dict[str, Any] = Field(
        default_factory=dict,
        description="partial overrides keyed by role (simulator, assistant, judge, assistant.rewrite)",
    )
    cache: Path | None = Field(None, description="sqlite file caching completions (None: off)")

    @model_validator(mode="before")
    @classmethod
    def _flatten_roles(cls, data: Any) -> Any:
        # TOML writes [llm.roles.assistant.rewrite] as a table nested in "assistant"; no role
        # setting is a table, so a nested table is always a sub-role: store it as "assistant.rewrite".
        if isinstance(data, dict) and isinstance(data.get("roles"), dict):
            flat: dict[str, Any] = {}

            def walk(prefix: str, table: Any) -> None:
                if not isinstance(table, dict):
                    flat[prefix] = table  # not a table: reported by resolve()
                    return
                flat[prefix] = {k: v for k, v in table.items() if not isinstance(v, dict)}
                for key, value in table.items():
                    if isinstance(value, dict):
                        walk(f"{prefix}.{key}", value)

            for name, table in data["roles"].items():
                walk(name, table)
            data = {**data, "roles": flat}
        return data

    @model_validator(mode="after")
    def _roles_resolve(self) -> "LLMConfig":
        # Fail at load time, naming the role and key, rather than mid-run.
        for name in self.roles:
            self.resolve(name)
        return self

    def resolve(self, role: str) -> LLMRole:
        """default ⊕ every configured prefix of ``role`` (``a`` then ``a.b``), validated."""
        merged = self.default.model_dump()
        parts = role.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            over = self.roles.get(name)
            if over is None:
                continue
            if not isinstance(over, dict):
                raise ConfigError(f"llm.roles.{name}: expected a table of settings")
            unknown = sorted(set(over) - _ROLE_KEYS)
            if unknown:
                known = ", ".join(sorted(_ROLE_KEYS))
                raise ConfigError(f"llm.roles.{name}: unknown key {unknown[0]!r} (known: {known})")
            merged.update(over)
        try:
            return LLMRole.model_validate(merged)
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise ConfigError(f"llm.roles.{role}: {where}: {msg}") from None

