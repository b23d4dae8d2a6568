"""``httpx2.Headers`` that remember their ``multi_items()`` until they are changed.

A chat request's headers are decoded to strings twice per call (openai's request building,
then the aiohttp transport), ~17 headers with two decodes and two property lookups each:
a few percent of the LLM layer's CPU per call (measured).  The headers themselves are
built once per set (``http.AsyncOpenAI._build_headers``, ``aio.LeanAioHttpClient``), so
the strings can be too.  Every way httpx2 offers to change headers forgets them.
"""

from __future__ import annotations

from typing import Any

import httpx2

__all__ = ["SnapHeaders"]


class SnapHeaders(httpx2.Headers):
    _items: list[tuple[str, str]] | None = None

    def multi_items(self) -> list[tuple[str, str]]:
        items = self._items
        if items is None:
            items = self._items = super().multi_items()
        return list(items)  # the caller's own list

    def plus(self, key: str, value: str) -> SnapHeaders:
        """A copy with ``key: value`` added last; ``key`` must not be present yet."""
        new = self.copy()
        items = self.multi_items()
        httpx2.Headers.__setitem__(new, key, value)  # appends: the name is new
        items.append((key.lower(), value))
        new._items = items
        return new

    def copy(self) -> SnapHeaders:
        new = SnapHeaders(self, encoding=self.encoding)
        new._items = self._items
        return new

    # -- every change forgets the strings -------------------------------------------------

    def __setitem__(self, key: str, value: str) -> None:
        self._items = None
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._items = None
        super().__delitem__(key)

    def update(self, headers: Any = None) -> None:  # type: ignore[override]
        self._items = None
        super().update(headers)

    @property
    def encoding(self) -> str:
        return httpx2.Headers.encoding.fget(self)  # type: ignore[attr-defined]

    @encoding.setter
    def encoding(self, value: str) -> None:
        self._items = None
        httpx2.Headers.encoding.fset(self, value)  # type: ignore[attr-defined]
