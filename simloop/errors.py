"""The one error tree of simloop.

Outside exceptions (pydantic, openai, OS, Java) are translated into these at module
boundaries, so callers and the CLI only ever catch ``SimloopError``.  ``BadInputError``
and its children are the user's to fix: the CLI prints one line and exits 2.

    SimloopError
    ├── BadInputError                 exit code 2, nothing written
    │   ├── ConfigError               a config file, SIMLOOP_* variable or flag
    │   ├── DataFileError             a persona, topic, corpus, qrels or result file
    │   ├── PluginNotFoundError       an assistant or simulator name
    │   ├── IndexMissingError         no Lucene index where one was named
    │   ├── ResumeError               a run directory that cannot be resumed
    │   └── SimApiAuthError           a Sim.API server refused the token
    ├── RetrievalError                the search backend (JVM, index, embedder) at run time
    ├── LLMError                      a chat call failed after the retry layer; .stage says what it cost
    │   ├── LLMStatusError            an HTTP error status (.status)
    │   │   └── ContextOverflowError  a prompt longer than the context window (.role, .prompt_tokens, .window)
    │   ├── LLMTimeoutError
    │   ├── LLMConnectionError
    │   ├── StructuredOutputError     JSON that did not validate, even after one repair
    │   ├── InvalidOutputError        text the caller's check rejected (garbage, wrong role) on every attempt
    │   └── EmptyCompletionError
    ├── DialogueError                 a plugin broke the contract during a dialogue
    ├── SimApiError                   a Sim.API server answered with an error
    └── ApiError                      the rehearsal server's HTTP errors (status + message)
"""

from __future__ import annotations

import copy
import errno
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # a type only: the error tree loads before (and without) the models
    from .schema import ErrorSource, Stage

__all__ = [
    "SimloopError",
    "BadInputError",
    "ConfigError",
    "DataFileError",
    "PluginNotFoundError",
    "IndexMissingError",
    "ResumeError",
    "RetrievalError",
    "LLMError",
    "LLMStatusError",
    "ContextOverflowError",
    "LLMTimeoutError",
    "LLMConnectionError",
    "StructuredOutputError",
    "EmptyCompletionError",
    "InvalidOutputError",
    "DialogueError",
    "ContractError",
    "ApiError",
    "SimApiError",
    "SimApiAuthError",
    "first_error",
    "error_source",
    "check_port",
    "check_known",
    "listen_error",
]


class SimloopError(Exception):
    """Base of every error simloop raises on purpose."""


class BadInputError(SimloopError):
    """Something the user gave us is wrong (file, flag, name); exit code 2."""


class ConfigError(BadInputError):
    """A config file, environment variable or flag does not validate."""


class DataFileError(BadInputError):
    """A persona, topic, corpus or qrels file is missing or malformed (names file and field)."""


class PluginNotFoundError(BadInputError):
    """An assistant/simulator name that is neither registered nor an importable module:attr."""


class IndexMissingError(BadInputError):
    """The retrieval index directory does not exist or is not a Lucene index."""


class ResumeError(BadInputError):
    """A run directory cannot be resumed (missing files, config hash mismatch)."""


class RetrievalError(SimloopError):
    """The search backend failed at run time."""


class LLMError(SimloopError):
    """A chat-completion call failed after the retry layer gave up.

    ``stage`` records what the failed call cost (tokens, latency, retries, the error), so
    a transcript or a judge can bill it; None when the failure came before any call.
    """

    def __init__(self, message: str, *, stage: Stage | None = None):
        super().__init__(message)
        self.stage: Stage | None = stage

    def with_stage(self, stage: Stage) -> LLMError:
        """A copy of this error carrying ``stage`` (same type, message and fields)."""
        new = copy.copy(self)
        new.stage = stage
        return new


class LLMStatusError(LLMError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, message: str, status: int | None = None, *, stage: Stage | None = None):
        super().__init__(message, stage=stage)
        self.status = status


class ContextOverflowError(LLMStatusError):
    """The server refused a prompt too long for the model's context window.  Never retried:
    the same prompt is as long the next time.  ``prompt_tokens`` and ``window`` are the
    server's counts when it gave them (None when it did not)."""

    def __init__(self, message: str, *, role: str = "", prompt_tokens: int | None = None, window: int | None = None,
                 status: int | None = 400, stage: Stage | None = None):
        super().__init__(message, status, stage=stage)
        self.role = role
        self.prompt_tokens = prompt_tokens
        self.window = window


class LLMTimeoutError(LLMError):
    """The endpoint did not answer in time."""


class LLMConnectionError(LLMError):
    """The connection failed or was cut."""


class StructuredOutputError(LLMError):
    """The model's JSON did not validate, even after the repair attempt."""


class EmptyCompletionError(LLMError):
    """The model returned no content."""


class InvalidOutputError(LLMError):
    """Every attempt's text was rejected by the caller's check (``ChatModel.chat(check=...)``):
    not language, the wrong role, a copy of the prompt.  Retried like an empty completion."""


class DialogueError(SimloopError):
    """A plugin could not go on with a dialogue (recorded, the run goes on)."""


class ContractError(DialogueError):
    """A plugin returned something the protocol does not allow (the engine's finding)."""


class ApiError(SimloopError):
    """An HTTP error the rehearsal server (`simloop serve`) answers with: status and detail."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


class SimApiError(SimloopError):
    """A Sim.API server answered a request with an HTTP error (the client side)."""

    def __init__(self, status: int, detail: str, path: str):
        super().__init__(f"{path}: HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class SimApiAuthError(BadInputError):
    """A Sim.API server rejected the token (a bad flag: exit 2)."""


def error_source(exc: BaseException, side: Literal["simulator", "assistant"]) -> ErrorSource:
    """Which part failed (``error.source``) when ``exc`` came out of the ``side`` plugin
    (``simulator`` or ``assistant``): an LLM or retrieval failure anywhere in its cause
    chain names the infrastructure, a timeout or a broken contract the engine; anything
    else is the plugin's own failure."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, LLMError):
            return "llm"
        if isinstance(cause, RetrievalError):
            return "retrieval"
        cause = cause.__cause__
    if isinstance(exc, (ContractError, TimeoutError)):
        return "engine"
    return side


def first_error(exc) -> tuple[str, str]:
    """(field path, message) of a pydantic ``ValidationError``'s first error: the one line
    every boundary reports (``topics.0.rubric: Field required``).  The message is one line,
    and our own validators' (``ValueError``) read as written, without pydantic's prefix."""
    err = exc.errors(include_url=False)[0]
    msg = " ".join(str(err["msg"]).split()).removeprefix("Value error, ")
    return ".".join(str(p) for p in err["loc"]), msg


def check_known(flag: str, given: Sequence[str], known: Sequence[str]) -> None:
    """A value that names nothing is a typo: one line naming the first such value and what
    is known (the first 20 of them), instead of an empty selection."""
    unknown = [g for g in given if g not in known]
    if unknown:
        shown = ", ".join(known[:20]) + (f" ... ({len(known)} in all)" if len(known) > 20 else "")
        raise BadInputError(f"unknown {flag} {unknown[0]!r} (known: {shown or 'none'})")


def check_port(port: int, who: str = "") -> None:
    """A ``--port`` outside 0-65535 is one line for the user (``bind`` would raise
    OverflowError, ``getaddrinfo`` blame the host).  ``who`` prefixes the message."""
    if not 0 <= port <= 65535:
        raise BadInputError(f"{who}--port {port}: a port is 0-65535")


def listen_error(host: str, port: int, exc: OSError, who: str = "") -> BadInputError:
    """The one line for a server that cannot bind ``host:port`` (``simloop serve``, ``mock-llm``)."""
    busy = exc.errno == errno.EADDRINUSE
    why = "already in use (another server? pick another --port)" if busy else (exc.strerror or str(exc))
    return BadInputError(f"{who}cannot listen on {host}:{port}: {why}")
