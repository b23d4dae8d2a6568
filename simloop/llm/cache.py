"""On-disk completion cache (sqlite, stdlib) so reruns are cheap and reproducible.

The key is the sha256 of everything that shapes a completion (model, messages,
temperature, max_tokens, n, response_format, seed); the endpoint is left out so a run
replays the same answers from a local mirror of the same model.  Every sqlite call runs
on one dedicated worker thread: the connection never crosses threads, writes are
serialised without locks, and the event loop never blocks on disk.  WAL mode lets
several processes (Ray workers) read while one writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["CachedCompletion", "CompletionCache", "cache_key"]

T = TypeVar("T")

_SCHEMA = """CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"""


@dataclass(frozen=True)
class CachedCompletion:
    texts: list[str]
    prompt_tokens: int
    completion_tokens: int


def cache_key(request: dict[str, Any]) -> str:
    """sha256 over the fields that decide the answer; canonical JSON so dict order is irrelevant."""
    fields = ("model", "messages", "temperature", "max_tokens", "n", "response_format", "seed")
    payload = {k: request.get(k) for k in fields}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class CompletionCache:
    """Async get/put over one sqlite file; safe for any number of concurrent callers."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simloop-llmcache")
        self._conn: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:  # opened lazily, on the worker thread that will use it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable enough for a cache
            conn.execute(_SCHEMA)
            conn.commit()
            self._conn = conn
        return self._conn

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def get(self, key: str) -> CachedCompletion | None:
        def read() -> str | None:
            row = self._connect().execute("SELECT value FROM completions WHERE key = ?", (key,)).fetchone()
            return row[0] if row else None

        raw = await self._run(read)
        if raw is None:
            self.misses += 1
            return None
        self.hits += 1
        data = json.loads(raw)
        return CachedCompletion(list(data["texts"]), int(data["prompt_tokens"]), int(data["completion_tokens"]))

    async def put(self, key: str, value: CachedCompletion) -> None:
        raw = json.dumps({"texts": value.texts, "prompt_tokens": value.prompt_tokens,
                          "completion_tokens": value.completion_tokens}, ensure_ascii=False)

        def write() -> None:
            conn = self._connect()
            conn.execute("INSERT OR REPLACE INTO completions (key, value, created) VALUES (?, ?, ?)",
                         (key, raw, time.time()))
            conn.commit()

        await self._run(write)

    async def aclose(self) -> None:
        def close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await self._run(close)
        finally:
            self._executor.shutdown(wait=False)
