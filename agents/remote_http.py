"""remote_http: an assistant served elsewhere, called over a small JSON protocol.

Each turn is one ``POST {url}`` with

    {"dialogue_id": str, "turn": int (1-based), "utterance": str,
     "history": [{"utterance": str, "response": str}, ...],   # finished turns, oldest first
     "ptkb": [str, ...]}                                        # statement i has index i + 1

and the server answers ``200`` with

    {"response": str,
     "passages": [{"docid": str, "score": float, "used": bool, "text"?: str}, ...],  # ranked
     "ptkb_provenance": [{"index": int (1-based), "score"?: float, "used"?: bool}, ...],  # ranked
     "rewritten_query"?: str}

Unknown fields are ignored both ways; a PTKB index outside the persona's PTKB is
dropped and noted on the stage.  A bearer token is read from the environment variable
named by ``token_env`` (the name, never the token, is what a run records).

Failures (timeout, connection error, HTTP status >= 400, a body that is not the reply
above): with ``on_error = "raise"`` (the default) the turn raises ``DialogueError``
naming the cause, and the engine ends that dialogue with ``stop.reason = "error"`` and
``error = {type, message}`` while the run goes on - a turn without a real answer would
make the rest of the transcript meaningless.  With ``on_error = "reply"`` the turn is
recorded instead, with an empty passage list, the response ``REMOTE_ERROR_RESPONSE`` and
a ``remote`` stage whose ``error`` says what failed, and the dialogue continues.

One HTTP client per run, made on the first turn: its connections are kept alive between
turns and dialogues, and ``aclose()`` (called once when the run ends) closes it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simloop.errors import DialogueError, first_error
from simloop.parts import current_utterance, stage_note
from simloop.run import Context
from simloop.schema import AssistantReply, ContextInfo, DialogueState, Passage, PtkbUse, Stage
from simloop.urls import TOKEN_ENV_GOES, check_url, redact_urls

__all__ = ["RemoteHTTP", "RemotePassage", "RemotePtkb", "RemoteReply", "REMOTE_ERROR_RESPONSE"]

REMOTE_ERROR_RESPONSE = "Sorry, I cannot answer right now."


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RemotePassage(_Lenient):
    docid: str = Field(min_length=1)
    score: float = 0.0
    used: bool = False
    text: str | None = None


class RemotePtkb(_Lenient):
    index: int
    score: float | None = None
    used: bool = True  # a server that sends a set (no flag) relies on all of it


class RemoteReply(_Lenient):
    response: str
    passages: list[RemotePassage] = Field(default_factory=list)
    ptkb_provenance: list[RemotePtkb] = Field(default_factory=list)
    rewritten_query: str | None = None


def _request(state: DialogueState) -> dict[str, Any]:
    return {"dialogue_id": state.dialogue_id, "turn": len(state.turns) + 1, "utterance": current_utterance(state),
            "history": [{"utterance": u, "response": a} for u, a in state.history()], "ptkb": list(state.ptkb)}


def _failure(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout after {timeout_s:g}s"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.TransportError):
        return f"connection failed ({type(exc).__name__})"
    if isinstance(exc, ValidationError):
        where, msg = first_error(exc)
        return f"bad reply: {where or '(root)'}: {msg}"
    return f"bad reply: {exc}"


class RemoteHTTP:
    # The remote assistant retrieves (or not) on its own: --k / retrieval.k is rejected.
    DEPTH_PARAM = None

    def __init__(self, ctx: Context, url: str, timeout_s: float = 30.0, on_error: Literal["raise", "reply"] = "raise",
                 token_env: str | None = None):
        check_url(url, TOKEN_ENV_GOES, "url")  # the run records its params in run.json
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        if timeout_s <= 0 or on_error not in ("raise", "reply"):
            raise ValueError("need timeout_s > 0 and on_error 'raise' or 'reply'")
        self.ctx, self.url, self.timeout_s, self.on_error, self.token_env = ctx, url, timeout_s, on_error, token_env
        self._http: httpx.AsyncClient | None = None

    def _headers(self) -> dict[str, str]:
        if not self.token_env:
            return {}
        secret = getattr(self.ctx, "secret", None)  # the run's context, else the environment
        token = secret(self.token_env) if secret else os.environ.get(self.token_env)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _call(self, body: dict[str, Any]) -> RemoteReply:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout_s, headers=self._headers())
        response = await self._http.post(self.url, json=body)
        response.raise_for_status()
        return RemoteReply.model_validate_json(response.content)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def respond(self, state: DialogueState) -> AssistantReply:
        t0 = time.perf_counter()
        try:
            remote = await self._call(_request(state))
        except (httpx.HTTPError, ValidationError, ValueError) as exc:
            return self._failed(state, _failure(exc, self.timeout_s), t0)
        stage = Stage(name="remote", latency_ms=round((time.perf_counter() - t0) * 1000, 3))
        ptkb = [PtkbUse(index=p.index, statement=state.ptkb[p.index - 1], score=p.score, used=p.used)
                for p in remote.ptkb_provenance if 1 <= p.index <= len(state.ptkb)]
        dropped = len(remote.ptkb_provenance) - len(ptkb)
        if dropped:
            stage = stage_note(stage, f"dropped {dropped} PTKB index(es) outside 1..{len(state.ptkb)}")
        passages = [Passage(rank=i, docid=p.docid, score=p.score, used=p.used, text=p.text)
                    for i, p in enumerate(remote.passages, 1)]
        return AssistantReply(response=remote.response, rewritten_query=remote.rewritten_query, passages=passages,
                              ptkb_provenance=ptkb, context=ContextInfo(strategy="remote"), stages=[stage])

    def _failed(self, state: DialogueState, what: str, t0: float) -> AssistantReply:
        message = f"remote_http turn {len(state.turns) + 1}: {what} (POST {redact_urls(self.url)})"
        if self.on_error == "raise":
            raise DialogueError(message)
        stage = Stage(name="remote", latency_ms=round((time.perf_counter() - t0) * 1000, 3), error=message)
        return AssistantReply(response=REMOTE_ERROR_RESPONSE, context=ContextInfo(strategy="remote"), stages=[stage])
