"""``simloop mock-llm``: a real OpenAI-compatible HTTP server with latency and injected faults.

It is a small HTTP/1.1 server on ``asyncio.Protocol`` (keep-alive, no framework):
benchmarks drive 1,000 concurrent dialogues through it on a 2-core box, so a request
costs one parse, one JSON build and one timer — no task per request, no ASGI stack.
Content is a pure function of (seed, request body) (see ``mockcontent``); whether a
request fails is drawn from a separate seeded stream, so a retried request can succeed.

Faults: ``429`` (with Retry-After), ``500``, ``timeout`` (hang until the client gives up;
released on shutdown), ``cut`` (connection closed mid-response), ``badjson`` (200, content
not valid JSON), ``garbage`` (200, plain text that is no language, JSON wanted or not:
"#@! &&&& ~~~ 42", "xkqt zzrv"), ``empty`` (200, empty content).  ``rpm_limit`` makes the server itself
answer 429 to a client (per Authorization header) above that many requests per minute.

``profile`` makes it answer as a real server does (``mockservers.py``: llama-cpp-python,
llama-server, vLLM, Ollama, OpenAI): what it refuses and how, ``n``, the context window
(``context_window``) and where it reports it.  The CLI is in ``mockcli.py``.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInputError, check_port, listen_error
from ..text import clip_to_tokens, count_tokens
from .mockcontent import Composer, schema_in_prompt
from .mockhttp import Connection, Request, error, response
from .mockprofiles import Plan, Refused
from .mockservers import PROFILES, make_profile

__all__ = ["FAULT_KINDS", "PROFILES", "MockOptions", "MockLLM"]

FAULT_KINDS = ("429", "500", "timeout", "cut", "badjson", "garbage", "empty")
_EXTRA_KINDS = ("400",)  # opt-in only: a non-retryable client error, for tests of "fail at once"
_COMPOSED_MAX = 4096  # answers kept (MockLLM._compose), of bodies up to
_COMPOSED_MAX_BODY = 16 * 1024  # bytes each: at most 64 MiB


@dataclass
class MockOptions:
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0  # uniform extra latency in [0, jitter]
    seed: int = 0
    fault_rate: float = 0.0
    faults: Iterable[str] | str = FAULT_KINDS
    retry_after_s: float = 1.0
    retry_after_header: str = "seconds"  # "seconds" (Retry-After) or "ms" (retry-after-ms)
    rpm_limit: int | None = None
    rpm_window_s: float = 60.0  # the rpm_limit is enforced as rpm_limit * window / 60 per window
    hang_s: float = 300.0
    model: str = "mock-model"
    script: list[str] = field(default_factory=list)  # outcomes ("ok" or a fault) for the next requests
    profile: str = "stub"  # whose contract to answer with (mockprofiles.PROFILES)
    context_window: int | None = None  # tokens (None: the profile's default; the stub has none)
    refuse: Iterable[str] | str = ()  # stub: parameters refused as OpenAI refuses unknown ones
    no_json: bool = False  # stub: the model writes prose whatever it is asked

    def __post_init__(self) -> None:
        if isinstance(self.refuse, str):
            self.refuse = [r.strip() for r in self.refuse.split(",") if r.strip()]
        self.refuse = tuple(self.refuse)
        if self.profile not in PROFILES:
            raise BadInputError(f"mock-llm: unknown profile {self.profile!r}; known: {', '.join(PROFILES)}")
        if self.context_window is not None and self.context_window < 16:
            raise BadInputError(f"mock-llm: --context-window must be at least 16 tokens, got {self.context_window}")
        if (self.refuse or self.no_json) and self.profile != "stub":
            raise BadInputError("mock-llm: --refuse and --no-json shape the stub; a server profile has its own rules")
        if isinstance(self.faults, str):
            self.faults = [f.strip() for f in self.faults.split(",") if f.strip()]
        self.faults = tuple(self.faults)
        bad = [f for f in (*self.faults, *self.script) if f not in (*FAULT_KINDS, *_EXTRA_KINDS, "ok")]
        if bad:
            raise BadInputError(f"mock-llm: unknown fault {bad[0]!r}; known: {','.join(FAULT_KINDS)}")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise BadInputError(f"mock-llm: fault rate must be within 0..1, got {self.fault_rate}")
        if self.fault_rate > 0 and not self.faults:
            raise BadInputError("mock-llm: a fault rate needs at least one fault kind")
        if self.retry_after_header not in ("seconds", "ms"):
            raise BadInputError("mock-llm: retry_after_header must be 'seconds' or 'ms'")
        if self.rpm_limit is not None and self.rpm_limit < 1:  # None is the way to say "no limit"
            raise BadInputError("mock-llm: --rpm-limit must be at least 1 (leave it out for no limit), "
                                f"got {self.rpm_limit}")
        if min(self.latency_ms, self.latency_jitter_ms, self.retry_after_s, self.rpm_window_s, self.hang_s) < 0:
            raise BadInputError("mock-llm: latencies, windows and waits must not be negative")


class _Stats:
    """Counters behind ``GET /stats``; also an in-process log of request outcomes for tests."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.by_status: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        # Token usage of the completions delivered (200s, empty and garbage ones included): what a
        # paid endpoint would bill, for tests that compare it with what simloop recorded.
        self.billed: Counter[str] = Counter(prompt_tokens=0, completion_tokens=0)
        self.peak_rpm = 0
        self.started = time.time()
        self._t0 = time.monotonic()
        self._minute: deque[float] = deque()
        self._seconds: deque[list[int]] = deque()  # [second since start, count]
        self.log: deque[tuple[float, str]] = deque(maxlen=100_000)  # (monotonic time, outcome)

    def arrive(self, now: float) -> None:
        self.requests += 1
        self._minute.append(now)
        while now - self._minute[0] > 60.0:
            self._minute.popleft()
        self.peak_rpm = max(self.peak_rpm, len(self._minute))
        second = int(now - self._t0)
        if self._seconds and self._seconds[-1][0] == second:
            self._seconds[-1][1] += 1
        else:
            self._seconds.append([second, 1])
            while self._seconds[0][0] < second - 119:
                self._seconds.popleft()

    def outcome(self, now: float, status: int | None, fault: str | None) -> None:
        if status is not None:
            self.by_status[str(status)] += 1
        if fault is not None:
            self.faults[fault] += 1
        self.log.append((now, fault or str(status)))

    def snapshot(self) -> dict[str, Any]:
        now = int(time.monotonic() - self._t0)
        counts = {s: n for s, n in self._seconds}
        return {"requests": self.requests, "by_status": dict(self.by_status), "faults": dict(self.faults),
                "billed": dict(self.billed),
                "peak_rpm": self.peak_rpm, "rps": [counts.get(s, 0) for s in range(max(0, now - 119), now + 1)],
                "started": self.started}


class MockLLM:
    """The server.  ``url = await mock.start()`` (port 0 picks a free port), then ``aclose()``."""

    def __init__(self, options: MockOptions | None = None, **overrides: Any):
        self.options = options or MockOptions(**overrides)
        if options is not None and overrides:
            self.options = MockOptions(**{**options.__dict__, **overrides})
        self._stats = _Stats()
        self._fault_rng = random.Random(self.options.seed)
        self._script: deque[str] = deque(self.options.script)
        self._composed: dict[bytes, tuple[list[str], int, int]] = {}  # see _compose
        self._windows: dict[str, deque[float]] = {}
        o = self.options
        self._profile = make_profile(o.profile, o.model, o.context_window, tuple(o.refuse), o.no_json)
        self._plain = self._profile.plain  # the stub with nothing to check: its benchmarked path
        self._connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self.url = ""
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        check_port(port, "mock-llm: ")
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                lambda: Connection(self._dispatch, self._connections), host, port, backlog=4096)
        except OSError as exc:
            raise listen_error(host, port, exc, "mock-llm: ") from None
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{self.port}/v1"
        return self.url

    async def aclose(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for conn in list(self._connections):  # hanging "timeout" requests included
            conn.abort()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> MockLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- for tests ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()
        self._windows.clear()

    def inject(self, *outcomes: str) -> None:
        """Queue outcomes ("ok" or a fault kind) for the next chat requests, in order."""
        MockOptions(script=list(outcomes))  # validates the names
        self._script.extend(outcomes)

    @property
    def log(self) -> list[tuple[float, str]]:
        """(monotonic arrival time, outcome) per chat request: "200", "429", a fault kind ..."""
        return list(self._stats.log)

    # -- requests ----------------------------------------------------------------------------

    def _dispatch(self, conn: Connection, req: Request) -> None:
        path = req.path.rstrip("/") or "/"
        if path.endswith("/chat/completions"):  # any prefix: /v1, none, or a proxy's deployment path
            if req.method != "POST":
                return conn.send(error(405, "use POST", "invalid_request_error", req.keep_alive), req.keep_alive)
            return self._chat(conn, req)
        body: dict[str, Any] | None
        if req.method == "GET" and path in ("/v1/models", "/models"):
            body = self._profile.models()
        elif req.method == "GET" and path == "/props" and (body := self._profile.props()) is not None:
            pass
        elif req.method == "GET" and path in ("/stats", "/v1/stats"):
            body = self.stats()
        elif req.method == "POST" and path in ("/stats/reset", "/v1/stats/reset"):
            self.reset_stats()
            body = {"ok": True}
        elif req.method == "GET" and path in ("/", "/health"):
            body = {"ok": True, "url": self.url}
        else:
            return conn.send(error(404, f"no route {req.method} {path}", "not_found", req.keep_alive), req.keep_alive)
        conn.send(response(200, json.dumps(body).encode(), req.keep_alive), req.keep_alive)

    def _latency(self) -> float:
        o = self.options
        jitter = self._fault_rng.uniform(0, o.latency_jitter_ms) if o.latency_jitter_ms else 0.0
        return (o.latency_ms + jitter) / 1000.0

    def _pick_fault(self) -> str | None:
        if self._script:
            outcome = self._script.popleft()
            return None if outcome == "ok" else outcome
        o = self.options
        if o.fault_rate > 0 and self._fault_rng.random() < o.fault_rate:
            return self._fault_rng.choice(o.faults)  # type: ignore[arg-type]
        return None

    def _over_limit(self, req: Request, now: float) -> float | None:
        """Seconds until this client may send again, or None when under its rpm limit."""
        o = self.options
        if not o.rpm_limit:
            return None
        window = self._windows.setdefault(req.headers.get("authorization", ""), deque())
        while window and now - window[0] >= o.rpm_window_s:
            window.popleft()
        if len(window) >= max(1, int(o.rpm_limit * o.rpm_window_s / 60.0)):
            return window[0] + o.rpm_window_s - now
        window.append(now)
        return None

    def _retry_headers(self, seconds: float) -> list[tuple[str, str]]:
        if self.options.retry_after_header == "ms":
            return [("retry-after-ms", str(int(math.ceil(seconds * 1000))))]
        return [("retry-after", f"{seconds:g}")]

    def _chat(self, conn: Connection, req: Request) -> None:
        now = time.monotonic()
        self._stats.arrive(now)
        keep = req.keep_alive
        try:
            body = json.loads(req.body)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("'messages' must be a list")
        except ValueError as exc:
            self._stats.outcome(now, 400, None)
            return conn.send(error(400, f"invalid request body: {exc}", "invalid_request_error", keep), keep)
        wait = self._over_limit(req, now)
        if wait is not None:
            self._stats.outcome(now, 429, None)
            msg = f"rate limit reached: {self.options.rpm_limit} requests per minute"
            return conn.send(error(429, msg, "rate_limit_exceeded", keep, self._retry_headers(wait)), keep)
        plan = None if self._plain else self._profile.admit(body)
        if isinstance(plan, Refused):  # the request itself is refused, as that server would
            self._stats.outcome(now, plan.status, None)
            return conn.send(response(plan.status, json.dumps(plan.payload).encode(), keep), keep)
        fault = self._pick_fault()
        if fault == "429":
            self._stats.outcome(now, 429, fault)
            payload = error(429, "injected rate limit", "rate_limit_exceeded", keep,
                             self._retry_headers(self.options.retry_after_s))
            return conn.send(payload, keep)
        if fault == "400":
            self._stats.outcome(now, 400, fault)
            return conn.send(error(400, "injected bad request", "invalid_request_error", keep), keep)
        delay = self._latency()
        if fault == "500":
            self._stats.outcome(now, 500, fault)
            return conn.respond(error(500, "injected server error", "server_error", keep), keep, delay)
        if fault == "timeout":
            self._stats.outcome(now, None, fault)
            return conn.hang(self.options.hang_s)
        payload, usage = self._completion(body, req.body, fault, keep, plan)
        if fault == "cut":
            self._stats.outcome(now, None, fault)
            head = payload.index(b"\r\n") + 2
            upto = head if self._fault_rng.random() < 0.5 else (payload.index(b"\r\n\r\n") + len(payload)) // 2
            return conn.cut(payload, upto, delay)
        self._stats.outcome(now, 200, fault)
        self._stats.billed.update(usage)
        conn.respond(payload, keep, delay)

    def _compose(self, body: dict[str, Any], raw: bytes, fault: str | None,
                 plan: Plan | None) -> tuple[list[str], int, int]:
        """(choices' texts, prompt hash, prompt tokens): a pure function of (seed, body, fault).
        Fault-free answers to small bodies are kept: benchmarks send the same few prompts
        thousands of times, and composing one was two thirds of the mock's CPU per request
        (which shares the 2 cores with the client it measures)."""
        cacheable = fault in (None, "cut") and len(raw) <= _COMPOSED_MAX_BODY
        if cacheable and raw in self._composed:
            return self._composed[raw]
        if plan is None:  # the plain stub: what the request's own fields ask for
            given = body.get("response_format")
            fmt: dict[str, Any] = given if isinstance(given, dict) else {}
            n, wants_json = max(1, min(int(body.get("n") or 1), 16)), fmt.get("type") in ("json_object", "json_schema")
            spec = fmt.get("json_schema")
            schema = fmt.get("schema") if fmt.get("type") == "json_object" else \
                spec.get("schema") if isinstance(spec, dict) else None
            if not wants_json and (schema := schema_in_prompt(body["messages"])) is not None:
                wants_json = True  # a schema written into the prompt is followed
            tokens = None
        else:
            n, wants_json, schema, tokens = plan.n, plan.json, plan.schema, plan.prompt_tokens
            if not wants_json and not self._profile.no_json:
                found = schema_in_prompt(plan.messages)
                wants_json, schema = found is not None, found
            body = {**body, "messages": plan.messages}
        composer = Composer(body, raw, self.options.seed)
        if fault == "empty":
            texts = [""] * n
        elif fault == "badjson":
            texts = [composer.bad_json(wants_json) for _ in range(n)]
        elif fault == "garbage":
            texts = [composer.garbage() for _ in range(n)]
        else:
            texts = [composer.json_for(schema) if wants_json else composer.text() for _ in range(n)]
        if tokens is None:
            tokens = count_tokens(composer.prompt) + 3 * len(body["messages"])
        composed = (texts, composer.prompt_hash, tokens)
        if cacheable:
            if len(self._composed) >= _COMPOSED_MAX:
                del self._composed[next(iter(self._composed))]  # the oldest
            self._composed[raw] = composed
        return composed

    def _completion(self, body: dict[str, Any], raw: bytes, fault: str | None,
                    keep: bool, plan: Plan | None = None) -> tuple[bytes, dict[str, int]]:
        texts, prompt_hash, prompt_tokens = self._compose(body, raw, fault, plan)
        limit = plan.max_tokens if plan is not None else None
        finish = ["stop"] * len(texts)
        if limit is not None:  # a longer answer stops at the token limit, mid-word or mid-JSON
            cut = [count_tokens(t) > limit for t in texts]
            texts = [clip_to_tokens(t, max(2, limit)) if c else t for t, c in zip(texts, cut)]  # a word at least
            finish = ["length" if c else "stop" for c in cut]
        completion_tokens = sum(count_tokens(t) for t in texts)
        out: dict[str, Any] = {
            "id": f"chatcmpl-mock-{prompt_hash:016x}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model") or self.options.model,
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": f,
                         "logprobs": None} for i, (t, f) in enumerate(zip(texts, finish))],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if plan is not None:
            self._profile.decorate(out, body)
        reported = out["usage"]  # billed as reported (llama-server reports the first of n choices only)
        usage = {"prompt_tokens": reported["prompt_tokens"], "completion_tokens": reported["completion_tokens"]}
        return response(200, json.dumps(out, ensure_ascii=False).encode(), keep), usage
