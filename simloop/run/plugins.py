"""Plugin protocols (DESIGN §3), the registry, and the shared context plugins are built with.

A plugin is a class constructed as ``Cls(ctx, **params)``.  Built-ins are registered
under the entry-point groups ``simloop.assistants`` and ``simloop.simulators``; anything
else is loaded as ``module:attr``.  One instance serves every dialogue of a run, so
per-dialogue state lives in ``DialogueState.*_memory``, never on the instance.  A plugin
may have ``async def aclose()``: it is called once, when the run ends (``close_plugins``).

What a run records about a plugin are its *effective* parameters (``effective_params``):
the given ones with every default filled in, so a run can be rebuilt from its record.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from pydantic import TypeAdapter

from ..errors import BadInputError, DataFileError, PluginNotFoundError
from ..schema import AssistantReply, DialogueState, SimulatorTurn

if TYPE_CHECKING:  # heavy modules, imported only when a plugin asks for them
    from ..config import RunConfig

_ANY = TypeAdapter(Any)


def _jsonable(value: Any, fallback: Any = str) -> Any:
    """``value`` as JSON-ready data (what run.json and transcripts record); str() for the rest."""
    return _ANY.dump_python(value, mode="json", fallback=fallback)


__all__ = ["UserSimulator", "Assistant", "Context", "load_plugin", "effective_params", "close_plugins",
           "available", "GROUPS"]

GROUPS = {"assistant": "simloop.assistants", "simulator": "simloop.simulators"}


@runtime_checkable
class UserSimulator(Protocol):
    """The simulated user: opens a dialogue, then answers each assistant reply (DESIGN §3)."""

    async def open(self, state: DialogueState) -> SimulatorTurn: ...

    async def next(self, state: DialogueState) -> SimulatorTurn: ...


@runtime_checkable
class Assistant(Protocol):
    """The assistant under test: one reply per user turn (DESIGN §3)."""

    async def respond(self, state: DialogueState) -> AssistantReply: ...


@dataclass
class Context:
    """Shared, lazily created resources: one retriever, one embedder, one model per role.

    Resources are created on first use (a run with the template simulator never boots
    an LLM client; a run without retrieval never boots the JVM) and closed by the engine.
    Tests pass fakes through ``overrides`` (seams, not mocks of internals).  ``secrets``
    are values of environment variables given in-process (``rehearse --token``): a
    plugin asks ``secret(NAME)`` and records only the name.
    """

    config: "RunConfig"
    overrides: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def _get(self, key: str, make: Callable[[], Any]) -> Any:
        if key in self.overrides:
            return self.overrides[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._cache:
                value = make()
                if inspect.isawaitable(value):
                    value = await value
                self._cache[key] = value
            return self._cache[key]

    async def retriever(self):
        from ..search.bm25 import open_retriever

        return await self._get("retriever", lambda: open_retriever(self.config.retrieval))

    async def embedder(self):
        """The run's embedder: made on first use, shared by every dialogue, closed (its
        worker thread stopped) by ``aclose``."""
        from ..search.embeddings import open_embedder

        # Passage vectors stored with the run's index make re-ranking a lookup; the demo
        # index's folder is resolved on first use (retrieval builds it first).
        index = self.config.retrieval.index

        def stored() -> Path | None:
            from ..search.corpus import demo_index_path

            if index is not None:
                return Path(index).expanduser()
            try:
                return demo_index_path()
            except DataFileError:  # no demo corpus installed: nothing stored either
                return None

        return await self._get("embedder", lambda: open_embedder(index=stored))

    def chat(self, role: str):
        """The ChatModel for ``role`` (``simulator``, ``assistant``, ``judge`` or an
        assistant stage such as ``assistant.rewrite``, falling back to its base role).
        All roles share one LLMPool, so throttles are per endpoint, not per role."""
        key = f"chat:{role}"
        if key in self.overrides:
            return self.overrides[key]
        if "llm_pool" in self.overrides:  # e.g. a Ray worker's pool with a cluster-wide permit
            return self.overrides["llm_pool"].model(role)
        if "llm_pool" not in self._cache:
            from ..llm.client import LLMPool

            self._cache["llm_pool"] = LLMPool(self.config.llm)
        return self._cache["llm_pool"].model(role)

    def secret(self, name: str) -> str | None:
        """The value of the variable ``name``: given in-process, else from the environment."""
        return self.secrets.get(name) or os.environ.get(name) or None

    async def aclose(self) -> None:
        for value in list(self._cache.values()):
            close = getattr(value, "aclose", None) or getattr(value, "close", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
        self._cache.clear()


def _registered(kind: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=GROUPS[kind])}


def available(kind: str) -> list[str]:
    """Registered plugin names of ``kind`` (``assistant`` or ``simulator``), sorted."""
    return sorted(_registered(kind))


# module:attr names that older run.json files record, and where those classes live now.
_MOVED = {"simloop.memoryprobes:ProbeSimulator": "simloop.memorytest.probes:ProbeSimulator"}


def resolve(kind: str, name: str) -> type:
    """Find the class for ``name``: a registered name or ``module:attr``."""
    name = _MOVED.get(name, name)
    registered = _registered(kind)
    if name in registered:
        return registered[name].load()
    if ":" not in name:
        known = ", ".join(sorted(registered)) or "none"
        raise PluginNotFoundError(f"unknown {kind} {name!r}; known: {known} (or module:attr)")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginNotFoundError(f"cannot import {kind} module {module_name!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginNotFoundError(f"module {module_name!r} has no {kind} {attr!r}") from None


def effective_params(plugin: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The parameters ``plugin`` runs with, defaults included, as JSON values.

    A plugin that validates or derives its parameters may say so itself with a ``params``
    dict; otherwise they are read off its constructor: ``given`` bound to the signature,
    defaults applied (``ctx`` and ``**kwargs`` left out).
    """
    own = getattr(plugin, "params", None)
    if isinstance(own, dict):
        return _jsonable(own, fallback=str)
    try:
        sig = inspect.signature(type(plugin))
        bound = sig.bind_partial(None, **given)
    except (TypeError, ValueError):  # no introspectable signature: what was given is all we know
        return _jsonable(given, fallback=str)
    bound.apply_defaults()
    names = list(sig.parameters)
    out = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if name == names[0] or kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return _jsonable(out, fallback=str)


async def close_plugins(*plugins: Any) -> None:
    """Call each plugin's optional ``aclose()`` once (the run has ended); one that fails
    does not keep the others open."""
    errors, seen = [], set()
    for plugin in plugins:
        close = getattr(plugin, "aclose", None)
        if close is None or id(plugin) in seen:  # the same instance twice is closed once
            continue
        seen.add(id(plugin))
        try:
            result = close()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # report the first once the rest are closed
            errors.append(exc)
    if errors:
        raise errors[0]


def load_plugin(kind: str, name: str, params: dict[str, Any], ctx: Context) -> Any:
    """Build a plugin instance; bad params become one clear BadInputError."""
    cls = resolve(kind, name)
    try:
        instance = cls(ctx, **params)
    except TypeError as exc:
        raise BadInputError(f"bad params for {kind} {name!r}: {exc}") from None
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        raise BadInputError(f"bad params for {kind} {name!r}: {_one_line(exc)}") from None
    proto = Assistant if kind == "assistant" else UserSimulator
    if not isinstance(instance, proto):
        raise PluginNotFoundError(f"{name!r} does not implement the {kind} protocol")
    return instance


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
