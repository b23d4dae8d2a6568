"""When an LLM call is worth another attempt, how long the server asked us to wait, and
which error answers are refusals rather than failures.

The retry loop itself is tenacity's, in ``ChatModel`` (DESIGN §7: one retry layer); these are
its rules, kept apart so the client module stays about the call.

A *refusal* is an error answer about the request itself: a parameter or value the server
does not accept (``response_format`` of type ``json_schema`` on llama-cpp-python, ``n`` > 1
on an older llama-server, an argument OpenAI does not know), a prompt longer than the
model's context window, or a model the server does not have.  Sending the same request
again gets the same answer, whatever the status (llama-cpp-python answers a refused value
with 500), so a refusal is never retried as transient: the client degrades the request
(capabilities.py) or gives up with an error that says why.  The wordings matched are the
servers' own (see the mock-llm profiles, ``simloop/fakes/mockprofiles.py``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from ..errors import EmptyCompletionError, InvalidOutputError

__all__ = ["retryable", "retry_after_s", "Refusal", "classify", "refusal_of"]

RefusalKind = Literal["param", "context", "model"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """What an error answer refused: a ``param`` (``response_format``, ``n``, ``seed`` ...),
    the prompt's length (``context``: ``prompt_tokens`` and ``window`` when the body says),
    or the ``model`` name.  ``message`` is the server's own text; ``whole``: the server knows
    no such parameter at all ("Unrecognized request argument"), rather than refusing a value."""

    kind: RefusalKind
    message: str
    param: str = ""
    prompt_tokens: int | None = None
    window: int | None = None
    whole: bool = False  # the parameter itself is unknown to the server, not one of its values


# ---------------------------------------------------------------------------- wordings

# Words of a refusal of a parameter or value (OpenAI, vLLM, llama.cpp, pydantic/FastAPI servers).
_REFUSED = re.compile(
    r"not supported|unsupported|unrecognized request argument|unknown (?:parameter|field|argument)|"
    r"extra inputs are not permitted|extra_forbidden|input should be|literal_error|must be one of|"
    r"only one completion choice|not allowed|is not permitted|invalid value|must be 1 when|"
    r"value must be between|does not support|not implemented|validation error|invalid type for|"
    r"missing required parameter", re.I)
_UNRECOGNIZED = re.compile(r"unrecognized request argument supplied:\s*([A-Za-z_][\w.]*)", re.I)
# Which parameter a refusal names, most specific first.  ``n`` needs care: it is a letter.
_PARAMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("response_format", re.compile(r"response_format|json_schema|json_object|'text' or 'json_object'", re.I)),
    ("n", re.compile(r"completion choice|field 'n'|\bn must be\b|'n'|`n`|\bparam(?:eter)?[=: ]+n\b|"
                     r"'loc': \('body', 'n'\)", re.I)),
    ("seed", re.compile(r"\bseed\b", re.I)),
    ("logprobs", re.compile(r"logprobs", re.I)),
    ("stop", re.compile(r"'stop'|`stop`|\bstop sequences?\b|'loc': \('body', 'stop'", re.I)),
)
_OVERFLOW = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|context size|context window|"
    r"context length|prompt is too long|too many tokens|input_tokens", re.I)
# "maximum context length is 2048 tokens", "available context size (512 tokens)", "context window of 2048"
_WINDOW = re.compile(r"(?:maximum context length is|context size \(|context window of)\s*(\d+)", re.I)
# "(413 in the messages", "request (614 tokens)", "prompt contains at least 9000 input tokens",
# "messages resulted in 8227 tokens", "requested 413 tokens in the messages", "Requested tokens (413)"
_PROMPT = re.compile(r"\((\d+) in the messages|request \((\d+) tokens\)|contains (?:at least )?(\d+) input tokens|"
                     r"resulted in (\d+) tokens|requested (\d+) tokens in the messages|requested tokens \((\d+)\)|"
                     r"request has (\d+) input tokens",
                     re.I)
_NO_MODEL = re.compile(r"model\b.{0,80}?(?:does not exist|not found|no such model|is not available|unknown)|"
                       r"model_not_found|unknown model", re.I | re.S)


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _first(match: re.Match[str] | None) -> int | None:
    if match is None:
        return None
    return next((int(g) for g in match.groups() if g), None)


def classify(status: int, body: Any) -> Refusal | None:
    """The refusal an error answer (``status``, decoded ``body``: the ``error`` object, the
    whole body, or its text) stands for, or None for any other failure (a rate limit, an
    overloaded or broken server, a bad key: those the retry rules decide)."""
    if status < 400 or status in (401, 403, 408, 429):
        return None
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = str(error.get("message") or error.get("detail") or "")
        kind, code, param = (str(error.get(k) or "") for k in ("type", "code", "param"))
        text = " ".join((message, kind, code, param))
    else:
        message = text = error if isinstance(error, str) else json.dumps(error, default=str)
        kind = code = param = ""
        error = {}
    if _OVERFLOW.search(text):
        window = _number(error.get("n_ctx")) or _first(_WINDOW.search(message))
        prompt = _number(error.get("n_prompt_tokens")) or _first(_PROMPT.search(message))
        return Refusal("context", message, prompt_tokens=prompt, window=window)
    if (status == 404 or code == "model_not_found") and _NO_MODEL.search(text):
        return Refusal("model", message)
    if status == 400 and re.search(r"model '[^']*' not found", message):  # llama-server's router mode
        return Refusal("model", message)
    if not _REFUSED.search(text):
        return None
    unrecognized = _UNRECOGNIZED.search(message)
    if unrecognized:
        name = unrecognized.group(1)
        if name.split(".")[0] in ("schema", "response_format"):
            return Refusal("param", message, param="response_format", whole=name == "response_format")
        return Refusal("param", message, param=name.split(".")[0], whole=True)
    if param.split(".")[-1] in ("n", "seed", "stop", "logprobs", "top_logprobs"):
        return Refusal("param", message, param=param.split(".")[-1].removeprefix("top_"))
    for name, pattern in _PARAMS:
        if pattern.search(text):
            return Refusal("param", message, param=name)
    if status < 500:  # a 4xx in a refusal's words that names nothing we know: still not transient
        return Refusal("param", message)
    return None


def refusal_of(exc: BaseException) -> Refusal | None:
    """The refusal an openai ``APIStatusError`` stands for (None for anything else)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return None
    return classify(exc.status_code, exc.body if exc.body is not None else exc.message)


# ---------------------------------------------------------------------------- retries


def retryable(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, server errors, timeouts, lost connections, unusable
    output.  Never a refusal (see the module's docstring), whatever its status."""
    import openai

    if isinstance(exc, (EmptyCompletionError, InvalidOutputError, openai.APIConnectionError)):  # + APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        if not (exc.status_code in (408, 429) or exc.status_code >= 500):
            return False
        return refusal_of(exc) is None
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
