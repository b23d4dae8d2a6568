"""ChatModel (DESIGN §7): throttle, retries, cache, usage, JSON output, over an endpoint's ``ChatClient``.

One ``LLMPool`` per run (``pool.py``) hands out a ``ChatModel`` per role.  openai's own
retries are off (``max_retries=0``): tenacity here is the only retry layer, so attempts,
waits and ``Retry-After`` handling are counted once and reported in each ``Stage``.  A
refusal (``retry.py``) is no transient failure: the request is fitted to what the server
takes (``capabilities.py``) and sent again, or the call fails with an error saying why.

``openai`` is imported lazily: most commands never talk to a model.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from ..errors import (
    ContextOverflowError,
    EmptyCompletionError,
    InvalidOutputError,
    LLMConnectionError,
    LLMError,
    LLMStatusError,
    LLMTimeoutError,
    StructuredOutputError,
)
from ..schema import LLMCapabilities, Stage
from ..text import count_tokens
from ..urls import redact_urls
from .cache import CachedCompletion, CompletionCache, cache_key
from .capabilities import Negotiated
from .config import NO_KEY, LLMConfig, LLMRole
from .limits import Endpoint
from .meter import bill
from .retry import Refusal, refusal_of, retry_after_s
from .retry import retryable as _retryable
from .structured import CUT_OFF, REPAIR_PROMPT, response_format_for, strict_json_schema, validate_json
from .usage import RoleUsage, Tally, sum_stages

if TYPE_CHECKING:
    from .http import ChatClient

__all__ = ["LLMRole", "LLMConfig", "ChatModel", "ChatResult", "strict_json_schema", "response_format_for",
           "retry_after_s"]

M = TypeVar("M", bound=BaseModel)
# A caller's check of one choice's text: None when usable, else why not (ChatModel.chat).
Check = Callable[[str], "str | None"]
_KEYLIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-]{6,}")


@dataclass(frozen=True)
class ChatResult:
    text: str  # the first choice
    texts: list[str]  # all n choices
    stage: Stage
    truncated: bool = False  # the first choice stopped at max_tokens (finish_reason "length")


# A refusal that names a capability adapts the request and sends it again; each step drops
# something (json_schema -> json_object -> text, n, seed), so a few re-sends are all there is.
_RESENDS = 5


# ----------------------------------------------------------------------------- helpers


def _count(value: Any) -> int:
    """A token count from the usage block (absent, null or malformed counts as 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _content(choice: Any) -> str:
    """The text of one choice of a decoded chat completion ("" when missing)."""
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _singles(request: dict[str, Any], have: int, n: int) -> list[dict[str, Any]]:
    """One-choice requests for choices ``have`` .. ``n`` - 1 of ``request`` (a server that
    ignores ``n``).  A seeded request gets the next seeds, or each would repeat the first."""
    seed = request.get("seed")
    return [{**request, "n": 1, "seed": None if seed is None else seed + i} for i in range(have, n)]


def _one_line(text: str, secret: str | None, limit: int = 300) -> str:
    """Exception text for humans and logs: one line, bounded, with no key in it (nor in a URL)."""
    if secret and secret != NO_KEY and len(secret) >= 4:
        text = text.replace(secret, "***")
    text = _KEYLIKE.sub("***", redact_urls(" ".join(str(text).split())))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------- the model


@dataclass(eq=False)
class ChatModel:
    """One role's view of the pool: its settings, client, endpoint limits and the shared cache."""

    role: str
    settings: LLMRole
    _client: ChatClient = field(repr=False)
    _endpoint: Endpoint = field(repr=False)
    _usage: RoleUsage = field(repr=False)
    _cache: CompletionCache | None = field(default=None, repr=False)
    _caps: Negotiated = field(default_factory=lambda: Negotiated(LLMCapabilities(endpoint="", model="")),
                              repr=False)  # shared by every role on this endpoint and model

    @property
    def model(self) -> str:
        return self.settings.model

    async def chat(self, messages: Sequence[dict[str, Any]], *, stage: str, temperature: float | None = None,
                   max_tokens: int | None = None, n: int = 1, response_format: dict[str, Any] | None = None,
                   seed: int | None = None, check: Check | None = None) -> ChatResult:
        """One completion (``n`` choices).  Raises a typed ``LLMError`` whose ``stage`` says what it cost.

        ``check`` rejects unusable text inside the retry layer: the result keeps only the choices
        it accepts; when it accepts none the attempt counts as failed (``InvalidOutputError``,
        retried like an empty completion, counted in ``stage.retries``), and a rejected text is
        neither returned nor cached."""
        request = self._request(messages, temperature, max_tokens, n, response_format, seed)
        result, key = await self._complete(request, stage, check)
        await self._store(key, result)
        return result

    async def structured(self, messages: Sequence[dict[str, Any]], schema: type[M], *, stage: str,
                         temperature: float | None = None, max_tokens: int | None = None,
                         seed: int | None = None) -> tuple[M, Stage]:
        """A validated ``schema`` instance; one repair round if the JSON does not validate.

        Only answers that led to a valid object are cached, so a rerun replays a success
        exactly and retries a failure afresh.
        """
        request = self._request(messages, temperature, max_tokens, 1, response_format_for(schema), seed)
        first, key1 = await self._complete(request, stage)
        obj, problem = validate_json(schema, first.text)
        if obj is not None:
            await self._store(key1, first)
            return obj, first.stage
        if first.truncated:  # cut JSON is never read as an answer: the repair is told why it failed
            problem = CUT_OFF.format(max_tokens=request["max_tokens"], problem=problem)
        repair = [*request["messages"], {"role": "assistant", "content": first.text},
                  {"role": "user", "content": REPAIR_PROMPT.format(problem=problem)}]
        try:
            second, key2 = await self._complete({**request, "messages": repair}, stage)
        except LLMError as exc:  # the failed repair bills the first answer too
            raise exc.with_stage(sum_stages(first.stage, exc.stage or first.stage)) from exc.__cause__
        total = sum_stages(first.stage, second.stage)
        obj, problem = validate_json(schema, second.text)
        if obj is None:
            if second.truncated:
                problem = CUT_OFF.format(max_tokens=request["max_tokens"], problem=problem)
            message = _one_line(f"{self._where()}: output does not match {schema.__name__} after one repair: "
                                f"{problem}", self._client.api_key)
            self._usage.errors += 1
            raise StructuredOutputError(message, stage=total.model_copy(
                update={"error": f"StructuredOutputError: {message}"}))
        await self._store(key1, first)
        await self._store(key2, second)
        return obj, total

    # -- internals ----------------------------------------------------------------------

    def _where(self) -> str:
        # Redacted too (_one_line): a proxy URL may carry the key in its path or query.
        return _one_line(f"{self.role} ({self.settings.model} at {self._endpoint.url})", self._client.api_key)

    def _request(self, messages: Sequence[dict[str, Any]], temperature: float | None, max_tokens: int | None,
                 n: int, response_format: dict[str, Any] | None, seed: int | None) -> dict[str, Any]:
        s = self.settings
        return {"model": s.model, "messages": [dict(m) for m in messages],
                "temperature": s.temperature if temperature is None else temperature,
                "max_tokens": s.max_tokens if max_tokens is None else max_tokens,
                "n": n, "response_format": response_format, "seed": seed}

    def _stage(self, name: str, t0: float, *, prompt: int = 0, completion: int = 0, cached: bool = False,
               retries: int = 0, error: str | None = None) -> Stage:
        cost = self.settings.cost(0, 0) if cached else self.settings.cost(prompt, completion)
        return Stage(name=name, model=self.settings.model, prompt_tokens=prompt, completion_tokens=completion,
                     latency_ms=round((time.perf_counter() - t0) * 1000, 3), cached=cached, retries=retries,
                     cost_usd=cost, role=self.role, error=error)

    async def _complete(self, request: dict[str, Any], name: str,
                        check: Check | None = None) -> tuple[ChatResult, str | None]:
        """Cache lookup, else the retried HTTP call.  Returns the cache key still to be written."""
        t0 = time.perf_counter()
        key = cache_key(request) if self._cache is not None else None
        if key is not None and self._cache is not None:
            hit = await self._cache.get(key)
            if hit is not None and check is not None:  # cached before the check existed or changed
                hit = hit if all(check(t) is None for t in hit.texts) else None
            if hit is not None:
                # Nothing was sent, so nothing is billed: a hit records no tokens (DESIGN §7).
                stage = self._stage(name, t0, cached=True)
                self._file(stage)
                return ChatResult(hit.texts[0], hit.texts, stage), None
        tally = Tally()
        try:
            texts, cut = await self._with_retries(request, tally, check)
        except asyncio.CancelledError:  # e.g. the dialogue's timeout: the requests were still sent
            if tally.sent:  # the last one's usage never arrived, so it bills no tokens we know of
                self._file(self._stage(name, t0, prompt=tally.prompt, completion=tally.completion,
                                       retries=tally.retries, error="cancelled: stopped waiting for the answer"))
            raise
        except Exception as exc:
            err = self._translate(exc, max(1, tally.sent))
            if err is None:
                raise  # not an LLM failure but a bug: let it surface as it is
            cause = None if err is exc else exc
            failed = self._stage(name, t0, prompt=tally.prompt, completion=tally.completion, retries=tally.retries,
                                 error=f"{type(err).__name__}: {err}")
            self._file(failed)
            raise err.with_stage(failed) from cause
        stage = self._stage(name, t0, prompt=tally.prompt, completion=tally.completion, retries=tally.retries)
        self._file(stage)
        return ChatResult(texts[0], texts, stage, cut), key

    def _file(self, stage: Stage) -> None:
        """Count ``stage`` in the role's usage and on the dialogue step's meter."""
        self._usage.add(stage)
        bill(stage)

    async def _store(self, key: str | None, result: ChatResult) -> None:
        if key is not None and self._cache is not None:
            s = result.stage
            await self._cache.put(key, CachedCompletion(result.texts, s.prompt_tokens, s.completion_tokens))

    async def _with_retries(self, request: dict[str, Any], tally: Tally,
                            check: Check | None = None) -> tuple[list[str], bool]:
        # Most calls succeed at once, so the first attempt runs before tenacity is set up (its
        # per-call objects and callback checks were ~5% of the CPU per call); on a retryable
        # failure tenacity takes over with that failure as its attempt 1, so its rules decide.
        try:
            return await self._attempt(request, tally, check)
        except Exception as exc:
            if not _retryable(exc):
                raise
            first = exc
        retrying = AsyncRetrying(stop=stop_after_attempt(self.settings.max_attempts), wait=self._wait,
                                 retry=retry_if_exception(_retryable), reraise=True)
        outcome: tuple[list[str], bool] | None = None
        send = request
        async for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number == 1:
                    raise first
                outcome = await self._attempt(send, tally, check)
            last = attempt.retry_state.outcome
            rejected = last is not None and isinstance(last.exception(), InvalidOutputError)
            if rejected and request.get("seed") is not None:
                # A seeded model would write the same rejected text again: the next attempt
                # asks with the next seed (still reproducible; the cache key keeps the first).
                send = {**request, "seed": request["seed"] + attempt.retry_state.attempt_number}
        assert outcome is not None  # reraise=True: tenacity either returns or raises
        return outcome

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when given (capped), else exponential backoff, full jitter."""
        s = self.settings
        hinted = retry_after_s(state.outcome.exception() if state.outcome else None)
        if hinted is not None:
            return min(hinted, s.retry_after_cap_s)
        ceiling = min(s.backoff_cap_s, s.backoff_base_s * 2 ** (state.attempt_number - 1))
        return random.uniform(0.0, ceiling)

    async def _attempt(self, request: dict[str, Any], tally: Tally,
                       check: Check | None = None) -> tuple[list[str], bool]:
        """One attempt: (the accepted choices' texts, was the first cut at max_tokens)."""
        caps = self._caps
        if caps.unsettled and caps.touches(request):
            async with caps.lock:  # the first such call learns; concurrent ones wait, then read it
                return await self._fitted(request, tally, check)
        return await self._fitted(request, tally, check)

    async def _fitted(self, request: dict[str, Any], tally: Tally, check: Check | None) -> tuple[list[str], bool]:
        """``request`` sent in the form this server takes.  A refusal that names a capability
        adapts it and sends again: not a retry of a transient failure (it spends no attempt),
        but a request all the same, counted in the stage.  Choices a server did not give
        (``n`` ignored) are asked for one at a time, each counted and billed."""
        caps = self._caps
        for _ in range(_RESENDS):
            send = caps.shape(request)
            try:
                texts, cut = await self._send(send, tally)
                n = request["n"] or 1
                if len(texts) < n:
                    extra = await asyncio.gather(*(self._send(caps.shape(single), tally)
                                                   for single in _singles(request, len(texts), n)))
                    texts += [t for more, _ in extra for t in more][: n - len(texts)]
                break
            except Exception as exc:
                refusal = refusal_of(exc)
                if refusal is None or refusal.kind == "model":
                    raise
                if refusal.kind == "context":
                    raise self._overflow(refusal, send, exc) from exc
                if not caps.degrade(refusal, send):
                    raise
        else:
            raise LLMError(f"{self._where()}: the server refused every form of the request")
        if not texts or any(not t.strip() for t in texts):
            raise EmptyCompletionError(f"{self._where()}: the model returned empty content")
        if check is not None:
            reasons = [check(t) for t in texts]
            texts = [t for t, r in zip(texts, reasons) if r is None]
            if not texts:
                raise InvalidOutputError(f"{self._where()}: unusable output ({next(r for r in reasons if r)})")
        return texts, cut

    async def _send(self, send: dict[str, Any], tally: Tally) -> tuple[list[str], bool]:
        """One HTTP request: (its choices' texts, was the first cut at max_tokens)."""
        estimate = sum(len(str(m.get("content") or "")) for m in send["messages"]) // 4 + 1
        entry = await self._endpoint.admit(estimate)
        self._usage.requests += 1
        tally.sent += 1
        # The answer is read as plain JSON: building openai's ChatCompletion models for the
        # few values read here cost a tenth of the client's CPU per call.
        raw = await self._client.complete(send)
        try:
            response = json.loads(raw.content)
        except ValueError:  # not JSON (a proxy's HTML page); UnicodeDecodeError is a ValueError
            response = None
        choices = response.get("choices") if isinstance(response, dict) else None
        if not isinstance(choices, list):  # e.g. an HTML page with status 200 from a misconfigured proxy
            raise LLMError(f"{self._where()}: the endpoint did not answer with a chat completion")
        usage = response.get("usage")
        reported = isinstance(usage, dict) and "completion_tokens" in usage
        usage = usage if isinstance(usage, dict) else {}
        texts = [_content(c) for c in choices]
        prompt = _count(usage.get("prompt_tokens")) or estimate
        # A server that reports no usage is billed by estimate, never as free.
        completion = _count(usage.get("completion_tokens")) if reported else sum(count_tokens(t) for t in texts)
        self._endpoint.reconcile(entry, prompt + completion)
        # Billed before the text is judged: a rejected answer cost as much as a used one.
        tally.prompt, tally.completion = tally.prompt + prompt, tally.completion + completion
        self._caps.answered(send, len(texts), reported)
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        return texts, first.get("finish_reason") == "length"

    def _overflow(self, refusal: Refusal, send: dict[str, Any], exc: BaseException) -> ContextOverflowError:
        """The error for a prompt the server refused as too long (and the pool learns it)."""
        self._caps.overflowed(self.role, refusal.prompt_tokens, refusal.window)
        window = refusal.window or self._caps.record.context_window
        if refusal.prompt_tokens:
            size = f"{refusal.prompt_tokens} tokens"
        else:
            size = f"about {sum(count_tokens(str(m.get('content') or '')) for m in send['messages'])} tokens"
        fits = f"the context window of {window} tokens" if window else "the model's context window"
        text = (f"{self._where()}: the prompt ({size}) does not fit {fits}; not retried (it would not fit "
                f"the next time either): start the server with a larger context, or give this role less to read")
        return ContextOverflowError(_one_line(text, self._client.api_key), role=self.role,
                                    prompt_tokens=refusal.prompt_tokens, window=window,
                                    status=getattr(exc, "status_code", 400))

    def _translate(self, exc: BaseException, attempts: int) -> LLMError | None:
        """openai exceptions → the simloop tree (one line, no key); None for foreign bugs."""
        import openai

        key = self._client.api_key
        tried = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, EmptyCompletionError):
            return EmptyCompletionError(f"{self._where()}: the model returned empty content {tried}")
        if isinstance(exc, InvalidOutputError):
            return InvalidOutputError(_one_line(f"{exc} {tried}", key))
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, openai.APITimeoutError):
            text = f"{self._where()}: no answer within {self.settings.timeout_s:g} s {tried}"
            return LLMTimeoutError(_one_line(text, key))
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
            return LLMConnectionError(_one_line(f"{self._where()}: connection failed {tried} ({detail})", key))
        if isinstance(exc, openai.APIStatusError):
            body = exc.body if exc.body is not None else exc.message
            message = body.get("message", body) if isinstance(body, dict) else body
            text = f"{self._where()}: HTTP {exc.status_code} {tried}: {message}"
            return LLMStatusError(_one_line(text, key), status=exc.status_code)
        if isinstance(exc, openai.OpenAIError):
            return LLMError(_one_line(f"{self._where()}: {type(exc).__name__} {tried}: {exc}", key))
        return None
