"""pyinstrument helpers: profile a coroutine, list the top functions by self time."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any


async def profiled(coro: Awaitable[Any], text_out: Path | None = None,
                   interval: float = 0.0005) -> tuple[Any, dict[str, Any]]:
    """Await ``coro`` under pyinstrument (every task on the loop is sampled, not just this one).

    Without pyinstrument (the ``bench`` extra) the coroutine still runs, unprofiled."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return await coro, {"top_self": [], "by_package": {}, "note": "pyinstrument not installed (extra 'bench')"}

    profiler = Profiler(interval=interval, async_mode="disabled")
    profiler.start()
    try:
        result = await coro
    finally:
        profiler.stop()
    if text_out is not None:
        text_out.parent.mkdir(parents=True, exist_ok=True)
        text_out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    session = profiler.last_session
    return result, {"top_self": top_self(session), "by_package": by_package(session)}


# Where the loop waits (for the recorder's thread, for timers): wall-clock samples, not CPU.
IDLE = ("epoll.poll", "select.select", "poll.poll", "lock.acquire")


def _busy_total(session: Any) -> float:
    """Sampled time minus the loop's idle waits, so shares are of the CPU actually spent."""
    root = session.root_frame()
    idle = 0.0
    stack = [root]
    while stack:
        f = stack.pop()
        stack.extend(f.children)
        if not f.is_synthetic and f.function in IDLE:
            idle += f.total_self_time
    return max(root.time - idle, 1e-9)


def top_self(session: Any, n: int = 25) -> list[dict[str, Any]]:
    """Functions with the most self time, aggregated over every call site (idle waits left out)."""
    root = session.root_frame()
    if root is None:
        return []
    total = _busy_total(session)
    agg: dict[str, float] = {}
    stack = [root]
    while stack:
        f = stack.pop()
        stack.extend(f.children)
        if f.is_synthetic or f.function in IDLE:  # "[self]", "[await]" ...: already in their parent
            continue
        key = f"{f.function} ({f.file_path_short}:{f.line_no})"
        agg[key] = agg.get(key, 0.0) + f.total_self_time
    rows = sorted(agg.items(), key=lambda kv: -kv[1])[:n]
    return [{"function": k, "self_s": round(v, 4), "share": round(v / total, 4)} for k, v in rows]


def by_package(session: Any) -> dict[str, float]:
    """Self-time share per top-level package (``simloop``, ``pydantic``, ``asyncio`` ...)."""
    root = session.root_frame()
    if root is None:
        return {}
    total = _busy_total(session)
    agg: dict[str, float] = {}
    stack = [root]
    while stack:
        f = stack.pop()
        stack.extend(f.children)
        if f.is_synthetic or f.function in IDLE:
            continue
        path = (f.file_path or "").replace("\\", "/")
        if "site-packages/" in path:
            pkg = path.split("site-packages/", 1)[1].split("/", 1)[0]
        elif "/lib/python" in path:
            pkg = "stdlib:" + path.rsplit("/lib/python", 1)[1].split("/", 2)[1]
        elif "/simloop/" in path or "/agents/" in path or "/scripts/" in path:
            pkg = path.rsplit("/", 2)[-2]
        else:
            pkg = f.file_path_short or "?"
        agg[pkg] = agg.get(pkg, 0.0) + f.total_self_time
    return {k: round(v / total, 4) for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:12]}
