"""``LLMPool``: every role's ``ChatModel`` for one run, and what they share.

Roles that talk to the same base URL share one ``ChatClient`` (``http.py``: openai's request
and errors, sent by simloop) per key variable and ONE throttle, because rate limits belong
to the endpoint, not to whoever is calling.  Roles on the same endpoint and model share
one ``Negotiated`` (``capabilities.py``): what that server accepts is learnt once for all of
them.  The pool also answers the engine's question before each new dialogue: has a role's
prompt outgrown the context window (``halted``)?  Then new dialogues would hit it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..schema import LLMCapabilities
from ..urls import redact_urls
from .cache import CompletionCache
from .capabilities import Negotiated
from .client import ChatModel
from .config import LLMConfig, LLMRole
from .limits import Endpoint, Permit
from .usage import RoleUsage, merge_usage

if TYPE_CHECKING:
    from .http import ChatClient

__all__ = ["LLMPool"]


class LLMPool:
    """Every role's ChatModel for one run; one client per endpoint and key, one throttle per endpoint.

    ``permit``: a request-permit source shared with other processes (see ``llmlimits.Permit``);
    when given, it replaces each rate-limited endpoint's local throttle.  ``capabilities``:
    the run's records of what its servers accept (from the preflight probe, or a resumed
    run's; ``run.json`` ``llm.capabilities``): the pool updates them in place as it learns,
    and appends one for each endpoint and model it meets that has none.
    """

    def __init__(self, config: LLMConfig, permit: Permit | None = None,
                 capabilities: list[LLMCapabilities] | None = None):
        self.config = config
        self.capabilities = capabilities if capabilities is not None else []
        self._permit = permit
        self._models: dict[str, ChatModel] = {}
        self._clients: dict[tuple[str, str], ChatClient] = {}
        self._endpoints: dict[str, Endpoint] = {}
        self._negotiated: dict[tuple[str, str], Negotiated] = {}
        self._usage: dict[str, RoleUsage] = {}
        self._cache = CompletionCache(config.cache) if config.cache else None
        self._limits = self._endpoint_limits()

    def _endpoint_limits(self) -> dict[str, tuple[float | None, int | None]]:
        # Any role resolves like the default or one configured override, so these cover every
        # endpoint; where roles disagree on a shared endpoint's limit, the strictest wins.
        limits: dict[str, tuple[float | None, int | None]] = {}
        for s in [self.config.default, *(self.config.resolve(name) for name in self.config.roles)]:
            rpm, tpm = limits.get(s.endpoint(), (None, None))
            limits[s.endpoint()] = (
                min(x for x in (rpm, s.rpm) if x is not None) if (rpm or s.rpm) else None,
                min(x for x in (tpm, s.tpm) if x is not None) if (tpm or s.tpm) else None,
            )
        return limits

    def _client_for(self, s: LLMRole) -> ChatClient:
        slot = (s.endpoint(), s.api_key_env)
        if slot not in self._clients:
            from .http import ChatClient

            self._clients[slot] = ChatClient(s.endpoint(), s.api_key(), s.timeout_s)
        return self._clients[slot]

    def _negotiated_for(self, s: LLMRole) -> Negotiated:
        slot = (s.endpoint(), s.model)
        if slot not in self._negotiated:
            shown = redact_urls(s.endpoint())
            record = next((r for r in self.capabilities if r.endpoint == shown and r.model == s.model), None)
            if record is None:
                record = LLMCapabilities(endpoint=shown, model=s.model)
                self.capabilities.append(record)
            self._negotiated[slot] = Negotiated(record)
        return self._negotiated[slot]

    def model(self, role: str) -> ChatModel:
        """The ChatModel for ``role`` (created once; raises ConfigError for bad overrides)."""
        if role not in self._models:
            s = self.config.resolve(role)
            url = s.endpoint()
            if url not in self._endpoints:
                rpm, tpm = self._limits.get(url, (s.rpm, s.tpm))
                self._endpoints[url] = Endpoint(url, rpm, tpm, self._permit)
            usage = self._usage.setdefault(role, RoleUsage(s.model))
            self._models[role] = ChatModel(role, s, self._client_for(s), self._endpoints[url], usage, self._cache,
                                           self._negotiated_for(s))
        return self._models[role]

    def halted(self) -> str | None:
        """Why no new dialogue should start, or None: a role's prompt was refused as longer
        than its model's context window, and new dialogues would send the same prompts."""
        for negotiated in self._negotiated.values():
            rec = negotiated.record
            for role, tokens in rec.overflows.items():
                size = f"{tokens} tokens" if tokens else "a prompt"
                window = f"{rec.context_window} tokens" if rec.context_window else "its size unknown"
                return (f"LLM role {role!r} ({rec.model} at {rec.endpoint}): {size} did not fit the context window "
                        f"({window}); no new dialogue starts, as they would not fit either")
        return None

    def usage(self) -> dict[str, Any]:
        """``{"total": {...}, "by_role": {role: {"model", ...}}, "by_model": {model: {...}}}``."""
        by_model: dict[str, list[RoleUsage]] = {}
        for row in self._usage.values():
            by_model.setdefault(row.model, []).append(row)
        return {
            "total": merge_usage(list(self._usage.values()), "*").as_dict(),
            "by_role": {role: {"model": row.model, **row.as_dict()} for role, row in self._usage.items()},
            "by_model": {model: merge_usage(rows, model).as_dict() for model, rows in by_model.items()},
        }

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
        if self._cache is not None:
            await self._cache.aclose()
            self._cache = None
