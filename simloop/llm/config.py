"""The ``[llm]`` section of a run config: one default role plus partial overrides per role.

A role name may be dotted (``assistant.rewrite``); it resolves as
default ⊕ roles["assistant"] ⊕ roles["assistant.rewrite"], so an agent can give one of
its stages another model without repeating the endpoint settings.  Overrides are typed
(``LLMRoleOverride``: only the keys given count) and, like the whole config, frozen once
validated: code that wants other settings builds a new config (``model_copy``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from ..errors import ConfigError, first_error
from ..urls import check_url

__all__ = ["LLMRole", "LLMRoleOverride", "LLMConfig", "DEFAULT_BASE_URL", "NO_KEY", "KEY_GOES",
           "role_setting"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (vLLM, Ollama, llama.cpp, the mock) ignore the key, but the client wants one.
NO_KEY = "sk-no-key"
# What simloop.search.jvm.prepare_environment puts in OPENAI_API_KEY for pyserini's import
# when the user has no key: it means "no key" here, and is never sent to an endpoint.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Where an LLM key belongs (said when a base URL carries one): never in the URL or the config.
KEY_GOES = "OPENAI_API_KEY (or the variable the config's api_key_env names)"


def _env_name(value: str) -> str:
    # The message never repeats the value: someone may have pasted the key itself.
    if not _ENV_NAME.match(value) or len(value) > 64:
        raise ValueError("must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not the key")
    return value


def _no_key_in_url(value: str | None) -> str | None:
    return None if value is None else check_url(value, KEY_GOES)


# A base URL with a key in it (user:KEY@, ?api-key=KEY) is refused: the config is recorded in run.json.
BaseURL = Annotated[str | None, AfterValidator(_no_key_in_url)]


class LLMRole(BaseModel):
    """Where and how one role talks to a model.  Holds the NAME of the key variable only."""

    # hide_input_in_errors: a key pasted into the wrong field must not be echoed back.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    base_url: BaseURL = Field(None, description="None: $OPENAI_BASE_URL, else the OpenAI API")
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
        return _env_name(value)

    def endpoint(self) -> str:
        """The base URL this role talks to (explicit, else $OPENAI_BASE_URL, else OpenAI).
        A key in $OPENAI_BASE_URL is refused as one in the config is (a ConfigError)."""
        url = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not self.base_url:
            check_url(url, KEY_GOES, "OPENAI_BASE_URL", error=ConfigError)
        return url.rstrip("/")

    def api_key(self) -> str:
        """Read at client creation only; never stored on a model, stage or log line."""
        key = os.environ.get(self.api_key_env)
        return key or NO_KEY

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price_prompt_per_1k is None and self.price_completion_per_1k is None:
            return None
        return (prompt_tokens * (self.price_prompt_per_1k or 0.0)
                + completion_tokens * (self.price_completion_per_1k or 0.0)) / 1000.0



class LLMRoleOverride(BaseModel):
    """Some of ``LLMRole``'s settings for one role; only the keys given override."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    base_url: BaseURL = None
    model: str | None = None
    api_key_env: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    rpm: float | None = Field(None, gt=0)
    tpm: int | None = Field(None, gt=0)
    timeout_s: float | None = Field(None, gt=0)
    max_attempts: int | None = Field(None, ge=1, le=50)
    retry_after_cap_s: float | None = Field(None, ge=0)
    backoff_base_s: float | None = Field(None, ge=0)
    backoff_cap_s: float | None = Field(None, ge=0)
    price_prompt_per_1k: float | None = Field(None, ge=0)
    price_completion_per_1k: float | None = Field(None, ge=0)

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, value: str | None) -> str | None:
        return None if value is None else _env_name(value)

    @model_serializer(mode="wrap")
    def _only_what_is_set(self, handler: Any) -> dict[str, Any]:
        # Dumped (run.json, the config hash) as written: a key left out must stay left out
        # when the config is read back, or its None would override the default.
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}

    def settings(self) -> dict[str, Any]:
        """The keys this override sets."""
        return self.model_dump()


_ROLE_KEYS = frozenset(LLMRole.model_fields)  # tests check LLMRoleOverride has the same keys


def role_setting(flag: str, key: str, value: Any) -> Any:
    """``value`` for the role setting ``key`` as ``flag`` gives it (``--base-url``), validated
    as a role's own setting is, so that a bad one is one ConfigError naming the flag."""
    try:
        LLMRoleOverride.model_validate({key: value})
    except ValidationError as exc:
        raise ConfigError(f"{flag}: {first_error(exc)[1]}") from None
    return value


def _flatten(roles: dict[str, Any]) -> dict[str, Any]:
    """TOML writes [llm.roles.assistant.rewrite] as a table nested in "assistant"; no role
    setting is a table, so a nested table is always a sub-role: stored as "assistant.rewrite"."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, table: Any) -> None:
        if not isinstance(table, dict):
            flat[prefix] = table
            return
        flat[prefix] = {k: v for k, v in table.items() if not isinstance(v, dict)}
        for key, value in table.items():
            if isinstance(value, dict):
                walk(f"{prefix}.{key}", value)

    for name, table in roles.items():
        walk(name, table)
    return flat


def _override(name: str, table: Any) -> LLMRoleOverride:
    """One role's table, validated with a message that names the role and the key."""
    if isinstance(table, LLMRoleOverride):
        return table
    if not isinstance(table, dict):
        raise ConfigError(f"llm.roles.{name}: expected a table of settings")
    unknown = sorted(set(table) - _ROLE_KEYS)
    if unknown:
        raise ConfigError(f"llm.roles.{name}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_ROLE_KEYS))})")
    try:
        return LLMRoleOverride.model_validate(table)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise ConfigError(f"llm.roles.{name}: {where}: {msg}") from None


class LLMConfig(BaseModel):
    """``[llm]``: ``default`` settings, ``roles`` overrides, and an optional sqlite cache file."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    default: LLMRole = Field(default_factory=LLMRole)
    roles: dict[str, LLMRoleOverride] = Field(
        default_factory=dict,
        description="partial overrides keyed by role (simulator, assistant, judge, assistant.rewrite)",
    )
    cache: Path | None = Field(None, description="sqlite file caching completions (None: off)")

    @model_validator(mode="before")
    @classmethod
    def _typed_roles(cls, data: Any) -> Any:
        # Validated here, not by the field, so errors read "llm.roles.<role>: <key>: ..."
        # (a ConfigError, which also keeps pydantic from echoing the input).
        if isinstance(data, dict) and isinstance(data.get("roles"), dict):
            roles = _flatten(data["roles"])
            data = {**data, "roles": {name: _override(name, table) for name, table in roles.items()}}
        return data

    def resolve(self, role: str) -> LLMRole:
        """default ⊕ every configured prefix of ``role`` (``a`` then ``a.b``), validated."""
        merged = self.default.model_dump()
        parts = role.split(".")
        for i in range(1, len(parts) + 1):
            over = self.roles.get(".".join(parts[:i]))
            if over is not None:
                merged.update(over.settings())
        try:
            return LLMRole.model_validate(merged)
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise ConfigError(f"llm.roles.{role}: {where}: {msg}") from None

    def with_every_role(self, **settings: Any) -> LLMConfig:
        """A copy with ``settings`` in the default and in every role override, so that every
        role gets them whatever the overrides say (``--base-url``/``--model``)."""
        if not settings:
            return self
        roles = {name: _override(name, {**over.settings(), **settings}) for name, over in self.roles.items()}
        default = LLMRole.model_validate({**self.default.model_dump(exclude_unset=True), **settings})
        return self.model_copy(update={"default": default, "roles": roles})
