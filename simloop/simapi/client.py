"""The client side of `rehearse`: an httpx client for any Sim.API server (the organisers'
or ``simloop serve``) and the local state file a restarted client resumes from.

The client knows the endpoints and nothing about assistants: ``rehearse.py`` drives it.
Errors become ``SimApiError`` with the HTTP status and the server's ``detail``; the bearer
token is sent in the header only and never appears in an error message or the state file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from ..errors import BadInputError, SimApiAuthError, SimApiError
from ..files import atomic_write
from .protocol import SERVER_HEADER, UserUtterance

__all__ = ["SimApiClient", "StateFile"]


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    return " ".join(str(detail).split())[:300]


class SimApiClient:
    """``debug`` picks the ``/debug/*`` endpoints for start, continue and session."""

    def __init__(self, api: str, token: str, debug: bool = False, timeout_s: float = 600.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        # A base path (".../simulation/") is kept: paths below are joined onto it.
        base = api if api.endswith("/") else api + "/"
        self._http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"},
                                       timeout=timeout_s, transport=transport)
        self.api = "debug" if debug else "run"
        self.base = base
        self.simloop_server = False  # set by verify(): the server accepts meta.simloop

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, retries: int = 0, **kw: Any) -> httpx.Response:
        """One request; ``retries`` only for idempotent GETs (a repeated POST would
        advance the conversation twice)."""
        for attempt in range(retries + 1):
            try:
                response = await self._http.request(method, path, **kw)
                break
            except httpx.TransportError:
                if attempt == retries:
                    raise
                await asyncio.sleep(min(8.0, 0.5 * 2**attempt))
        if response.status_code == 401:
            raise SimApiAuthError(f"{path}: the server rejected the token ({_detail(response)})")
        if response.status_code >= 400:
            raise SimApiError(response.status_code, _detail(response), path)
        return response

    async def verify(self) -> str:
        r = await self._call("GET", "auth/verify", retries=3)
        self.simloop_server = SERVER_HEADER in r.headers
        return str(r.json().get("team_id", ""))

    async def start(self, run_id: str, description: str, track_persona: bool) -> UserUtterance:
        # 2025 reads track_persona, 2026 reads extra.track_persona: send both.
        body = {"run_id": run_id, "description": description, "track_persona": track_persona,
                "extra": {"track_persona": track_persona}}
        r = await self._call("POST", f"{self.api}/start", json=body)
        return UserUtterance.model_validate(r.json())

    async def continue_(self, payload: dict[str, Any]) -> UserUtterance:
        r = await self._call("POST", f"{self.api}/continue", json=payload)
        return UserUtterance.model_validate(r.json())

    async def session(self, run_id: str) -> UserUtterance:
        r = await self._call("GET", f"{self.api}/session", retries=3, params={"run_id": run_id})
        return UserUtterance.model_validate(r.json())

    def has_status(self) -> bool:
        return self.api == "run" or self.simloop_server  # the organisers have no /debug/status

    async def status(self, run_id: str) -> dict[str, Any] | None:
        """The run's status; None when the server does not know it (or has no endpoint)."""
        if not self.has_status():
            return None
        try:
            r = await self._call("GET", f"{self.api}/status", retries=3, params={"run_id": run_id})
        except SimApiError as exc:
            if exc.status == 404:
                return None
            raise
        return r.json()


class StateFile:
    """One run's resume state, replaced atomically (write, fsync, rename) on every save."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise BadInputError(f"{self.path}: unreadable rehearse state ({exc}); delete it to start over") from None

    def write(self, data: dict[str, Any]) -> None:
        atomic_write(self.path, json.dumps(data))
