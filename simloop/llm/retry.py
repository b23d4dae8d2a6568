"""When an LLM call is worth another attempt, and how long the server asked us to wait.

The retry loop itself is tenacity's, in ``ChatModel`` (one retry layer); these are
its rules, kept apart so the client module stays about the call.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from ..errors import EmptyCompletionError, InvalidOutputError

__all__ = ["retryable", "retry_after_s"]


def retryable(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, server errors, timeouts, lost connections, unusable output."""
    import openai

    if isinstance(exc, (EmptyCompletionError, InvalidOutputError, openai.APIConnectionError)):  # + APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    return False


def retry_after_s(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    return None
