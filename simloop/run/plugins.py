"""Plugin protocols (DESIGN §3), the registry, and the shared context plugins are built with.

A plugin is a class constructed as ``Cls(ctx, **params)``.  Built-ins are registered
under the entry-point groups ``simloop.assistants`` and ``simloop.simulators``; anything
else is loaded as ``module:attr``.  One instance serves every dialogue of a run, so
per-dialogue state lives in ``DialogueState.*_memory``, never on the instance.

Besides its protocol a plugin may have (each optional, read through the helpers here):
``async def aclose()``, called once when the run ends (``close_plugins``); ``needs``, the
shared resources to open before the first dialogue (``plugin_needs``); ``llm_roles``, the
LLM roles it calls, whose endpoints are asked for an answer before the run
(``plugin_llm_roles``); ``llm_min_prompt_tokens``, the smallest prompt (tokens) it sends per
role, checked against the context window a server reports (``plugin_llm_min_prompts``);
``params``, its effective parameters when it validates or derives them itself
(``effective_params``).  A simulator may also ``check_sources(personas, cfg)``
before the run, or bring its own scenarios (``lanes(done)``, ``ChoosesScenarios``).

What a run records about a plugin are its *effective* parameters (``effective_params``):
the given ones with every default filled in, so a run can be rebuilt from its record.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import types
import typing
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, overload, runtime_checkable

from pydantic import TypeAdapter, ValidationError

from ..errors import BadInputError, DataFileError, PluginNotFoundError
from ..schema import AssistantReply, DialogueState, LLMCapabilities, Persona, Scenario, SimulatorTurn

if TYPE_CHECKING:  # heavy modules, imported only when a plugin asks for them
    from ..config import RunConfig
    from ..llm import ChatModel
    from ..search import Embedder, Retriever

_ANY = TypeAdapter(Any)


def _jsonable(value: Any, fallback: Any = str) -> Any:
    """``value`` as JSON-ready data (what run.json and transcripts record); str() for the rest."""
    return _ANY.dump_python(value, mode="json", fallback=fallback)


__all__ = ["UserSimulator", "Assistant", "Closable", "ChoosesScenarios", "ChecksSources", "Plugin", "PluginKind",
           "Context", "load_plugin", "effective_params", "close_plugins", "check_params", "with_run_depth",
           "chooses_scenarios", "plugin_needs", "plugin_llm_roles", "available", "GROUPS"]

PluginKind = Literal["assistant", "simulator"]
GROUPS: dict[PluginKind, str] = {"assistant": "simloop.assistants", "simulator": "simloop.simulators"}


@runtime_checkable
class UserSimulator(Protocol):
    """The simulated user: opens a dialogue, then answers each assistant reply (DESIGN §3)."""

    async def open(self, state: DialogueState) -> SimulatorTurn: ...

    async def next(self, state: DialogueState) -> SimulatorTurn: ...


@runtime_checkable
class Assistant(Protocol):
    """The assistant under test: one reply per user turn (DESIGN §3)."""

    async def respond(self, state: DialogueState) -> AssistantReply: ...


Plugin = UserSimulator | Assistant


@runtime_checkable
class Closable(Protocol):
    """A plugin (or shared resource) with something to release when the run ends."""

    def aclose(self) -> Awaitable[None]: ...


@runtime_checkable
class ChoosesScenarios(Protocol):
    """A simulator whose user lives elsewhere (``simapi``): it brings the scenarios, one
    sequential lane per remote conversation, skipping the dialogue ids in ``done``."""

    def lanes(self, done: set[str]) -> list[AsyncIterator[Scenario]]: ...


@runtime_checkable
class ChecksSources(Protocol):
    """A simulator that checks the run's personas and topics before anything is written
    (the rubric simulator needs rubric questions); a problem is a ``BadInputError``."""

    def check_sources(self, personas: list[Persona], cfg: RunConfig) -> None: ...


def chooses_scenarios(simulator: object) -> TypeGuard[ChoosesScenarios]:
    """Does ``simulator`` bring its own scenarios (a remote user), as ``lanes(done)``?"""
    return callable(getattr(simulator, "lanes", None))


def plugin_needs(plugin: object) -> tuple[str, ...]:
    """What ``plugin`` declares it needs opened before the first dialogue (``needs``:
    ``retriever``, ``embedder``, ``embedder:mpnet``); none when it declares nothing."""
    return tuple(getattr(plugin, "needs", ()) or ())


def plugin_llm_roles(plugin: object) -> tuple[str, ...]:
    """The LLM roles ``plugin`` says it calls (``llm_roles``, an attribute or a property)."""
    return tuple(getattr(plugin, "llm_roles", ()) or ())


def plugin_llm_min_prompts(plugin: object) -> dict[str, int]:
    """The smallest prompt (tokens) ``plugin`` says it sends per LLM role (``llm_min_prompt_tokens``)."""
    return dict(getattr(plugin, "llm_min_prompt_tokens", None) or {})


@dataclass
class Context:
    """Shared, lazily created resources: one retriever, one embedder, one model per role.

    Resources are created on first use (a run with the template simulator never boots
    an LLM client; a run without retrieval never boots the JVM) and closed by the engine.
    Tests pass fakes through ``overrides`` (seams, not mocks of internals).  ``secrets``
    are values of environment variables given in-process (``rehearse --token``): a
    plugin asks ``secret(NAME)`` and records only the name.
    """

    config: RunConfig
    overrides: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    # What the run's LLM servers accept (the preflight's findings): the pool learns on in them.
    llm_capabilities: list[LLMCapabilities] = field(default_factory=list)
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

    async def retriever(self) -> Retriever:
        from ..search import open_retriever

        return await self._get("retriever", lambda: open_retriever(self.config.retrieval))

    async def embedder(self, encoder: str = "minilm") -> Embedder:
        """The run's embedder for ``encoder`` (``minilm``, or ``mpnet`` for the PTKB ranker):
        made on first use, shared by every dialogue, closed (its worker thread stopped) by
        ``aclose``.  Overrides go by key: ``embedder`` (MiniLM), ``embedder:mpnet``; a fake
        for one never stands in for the other (a ranker must not score with vectors it was
        not tuned on without anyone noticing)."""
        from ..search import open_embedder

        if encoder != "minilm":
            return await self._get(f"embedder:{encoder}", lambda: open_embedder(encoder=encoder))

        # Passage vectors stored with the run's index make re-ranking a lookup; the demo
        # index's folder is resolved on first use (retrieval builds it first).
        index = self.config.retrieval.index if self.config is not None else None

        def stored() -> Path | None:
            from ..search import demo_index_path

            if index is not None:
                return Path(index).expanduser()
            try:
                return demo_index_path()
            except DataFileError:  # no demo corpus installed: nothing stored either
                return None

        return await self._get("embedder", lambda: open_embedder(index=stored))

    def chat(self, role: str) -> ChatModel:
        """The ChatModel for ``role`` (``simulator``, ``assistant``, ``judge`` or an
        assistant stage such as ``assistant.rewrite``, falling back to its base role).
        All roles share one LLMPool, so throttles are per endpoint, not per role."""
        key = f"chat:{role}"
        if key in self.overrides:
            return self.overrides[key]
        if "llm_pool" in self.overrides:  # e.g. a Ray worker's pool with a cluster-wide permit
            return self.overrides["llm_pool"].model(role)
        if "llm_pool" not in self._cache:
            from ..llm import LLMPool

            self._cache["llm_pool"] = LLMPool(self.config.llm, capabilities=self.llm_capabilities)
        return self._cache["llm_pool"].model(role)

    def llm_halted(self) -> str | None:
        """Why no new dialogue should start (a role's prompt outgrew its model's context
        window: ``LLMPool.halted``), or None; asked by the engine before each dialogue."""
        pool = self.overrides.get("llm_pool") or self._cache.get("llm_pool")
        halted = getattr(pool, "halted", None)
        return halted() if halted is not None else None

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


def _registered(kind: PluginKind) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUPS[kind])}


def available(kind: PluginKind) -> list[str]:
    """Registered plugin names of ``kind`` (``assistant`` or ``simulator``), sorted."""
    return sorted(_registered(kind))


# module:attr names that older run.json files record, and where those classes live now.
_MOVED = {"simloop.memoryprobes:ProbeSimulator": "simloop.memorytest.probes:ProbeSimulator"}


def resolve(kind: PluginKind, name: str) -> type:
    """Find the class for ``name``: a registered name or ``module:attr``."""
    name = _MOVED.get(name, name)
    registered = _registered(kind)
    if name in registered:
        return registered[name].load()
    if ":" not in name:
        known = ", ".join(sorted(registered)) or "none"
        raise PluginNotFoundError(f"unknown {kind} {name!r}; known: {known} (or module:attr)")
    module_name, _, attr = name.partition(":")
    if not module_name.strip() or not attr.strip():
        raise PluginNotFoundError(f"{kind} {name!r}: give a registered name or module:attr (both parts)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # not only ImportError: the module's own code runs (SyntaxError, RuntimeError ...)
        raise PluginNotFoundError(f"cannot import {kind} module {module_name!r}: "
                                  f"{type(exc).__name__}: {_one_line(exc)}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginNotFoundError(f"module {module_name!r} has no {kind} {attr!r}") from None


def effective_params(plugin: object, given: dict[str, Any]) -> dict[str, Any]:
    """The parameters ``plugin`` runs with, defaults included, as JSON values.

    A plugin that validates or derives its parameters may say so itself with a ``params``
    dict; otherwise they are read off its constructor: ``given`` bound to the signature,
    defaults applied (``ctx`` and ``**kwargs`` left out).  A plugin built by ``load_plugin``
    is described by what it was built with (``--k`` included), not only what was given.
    """
    own = getattr(plugin, "params", None)
    if isinstance(own, dict):
        return _jsonable(own, fallback=str)
    try:
        given = {**given, **_BUILT_WITH.get(plugin, {})}  # e.g. k from --k, validated values
    except TypeError:  # not weak-referenceable (or unhashable): what was given is what we know
        pass
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


async def close_plugins(*plugins: object) -> None:
    """Call each plugin's optional ``aclose()`` once (the run has ended); one that fails
    does not keep the others open."""
    errors: list[Exception] = []
    seen: set[int] = set()
    for plugin in plugins:
        if not isinstance(plugin, Closable) or id(plugin) in seen:  # the same instance twice is closed once
            continue
        seen.add(id(plugin))
        try:
            result = plugin.aclose()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # report the first once the rest are closed
            errors.append(exc)
    if errors:
        raise errors[0]


def _annotations(cls: type[Any]) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool] | None:
    """(constructor parameters after ``ctx``, their resolved annotations, takes **kwargs),
    or None when the constructor cannot be introspected (then the plugin checks alone)."""
    try:
        sig = inspect.signature(cls)
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable forward references, C types: nothing to check against
        return None
    params = list(sig.parameters.values())[1:]  # the first one is ctx
    named = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, hints, any(p.kind is p.VAR_KEYWORD for p in params)


_WORDS = {float: "a number", int: "an integer", bool: "true or false", str: "a string", type(None): "null"}


def _describe(annotation: Any) -> str:
    """What a parameter accepts, in words a user can act on ("a number", "one of 'full', 'summary'")."""
    if annotation in _WORDS:
        return _WORDS[annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if args and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def check_params(kind: PluginKind, name: str, cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against the constructor's type hints (pydantic, lax: ``"3"`` is
    an int, ``"abc"`` is not a float), with the validated values; a wrong name or type is
    one BadInputError naming the parameter and what it accepts.  Ranges are the plugin's
    own checks (its ValueError), which run after this."""
    found = _annotations(cls)
    if found is None:
        return dict(params)
    named, hints, open_ended = found
    out = dict(params)
    for key, value in params.items():
        if key not in named:
            if open_ended:
                continue
            known = ", ".join(named) or "none"
            raise BadInputError(f"bad params for {kind} {name!r}: unknown parameter {key!r}; known: {known}")
        hint = hints.get(key, Any)
        if hint is Any:
            continue
        try:
            out[key] = TypeAdapter(hint).validate_python(value)
        except ValidationError:
            raise BadInputError(f"bad params for {kind} {name!r}: {key}={value!r} is not accepted; "
                                f"{key} takes {_describe(hint)}") from None
        except Exception:  # a hint pydantic cannot build a validator for: the plugin checks it
            continue
    missing = [k for k, p in named.items() if p.default is p.empty and k not in out]
    if missing:  # else the constructor's TypeError ("__init__() missing 1 required positional argument")
        how = getattr(cls, "HOW_TO_RUN", None) or \
            f"give {' '.join(f'--{kind}-param {k}=VALUE' for k in missing)}"
        raise BadInputError(f"{kind} {name!r} needs the parameter(s) {', '.join(missing)}; {how}")
    return out


def with_run_depth(name: str, cls: type, params: dict[str, Any], k: int | None) -> dict[str, Any]:
    """An assistant's params with the run's ``retrieval.k`` (``--k``) applied: it becomes
    the ``k`` parameter, or is rejected when the assistant has none, naming the parameter
    that sets its depth (class attribute ``DEPTH_PARAM``), so it is never ignored."""
    if k is None:
        return params
    found = _annotations(cls)
    if found is not None and "k" in found[0]:
        if "k" in params and params["k"] != k:
            raise BadInputError(f"assistant {name!r}: --k / retrieval.k is {k} but --assistant-param k is "
                                f"{params['k']!r}; give one of them")
        return {**params, "k": k}
    depth = getattr(cls, "DEPTH_PARAM", None)
    fix = f"set --assistant-param {depth}=N instead" if depth else "leave --k / retrieval.k unset"
    raise BadInputError(f"assistant {name!r} takes no retrieval depth k (--k / retrieval.k {k}); {fix}")


# What each plugin was built with (``load_plugin``): its effective params start from these.
_BUILT_WITH: weakref.WeakKeyDictionary[object, dict[str, Any]] = weakref.WeakKeyDictionary()


@overload
def load_plugin(kind: Literal["assistant"], name: str, params: dict[str, Any], ctx: Context) -> Assistant: ...
@overload
def load_plugin(kind: Literal["simulator"], name: str, params: dict[str, Any], ctx: Context) -> UserSimulator: ...
@overload
def load_plugin(kind: PluginKind, name: str, params: dict[str, Any], ctx: Context) -> Plugin: ...
def load_plugin(kind: PluginKind, name: str, params: dict[str, Any], ctx: Context) -> Plugin:
    """Build a plugin instance; bad params become one clear BadInputError."""
    cls = resolve(kind, name)
    params = check_params(kind, name, cls, params)
    if kind == "assistant":
        retrieval = getattr(getattr(ctx, "config", None), "retrieval", None)
        params = with_run_depth(name, cls, params, getattr(retrieval, "k", None))
    try:
        instance = cls(ctx, **params)
    except TypeError as exc:
        raise BadInputError(f"bad params for {kind} {name!r}: {exc}") from None
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        raise BadInputError(f"bad params for {kind} {name!r}: {_one_line(exc)}") from None
    proto: type[Assistant] | type[UserSimulator] = Assistant if kind == "assistant" else UserSimulator
    if not isinstance(instance, proto):
        raise PluginNotFoundError(f"{name!r} does not implement the {kind} protocol")
    try:
        _BUILT_WITH[instance] = dict(params)
    except TypeError:  # not weak-referenceable: effective_params falls back to what was given
        pass
    return instance


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
