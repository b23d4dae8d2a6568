"""The rehearsal server's state on disk: one small sqlite file, so runs survive a restart.

Three tables: ``runs`` (one ``HostedRun`` document per Sim.API run: queue position, the
current session with its simulator memory), ``records`` (the ``/run/dump`` lines, appended per
turn) and ``sessions`` (debug sessions opened per team, the debug budget).  Each step of
a run is saved in one transaction together with the records it produced, so a crash
leaves either the old step or the new one, never half of it.  Bearer tokens are never
stored here; runs carry the team id only.

Calls block on the disk: the server runs them on a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..schema import utcnow
from .protocol import DumpRecord
from .sessions import SavedSession

__all__ = ["HostedRun", "Mode", "Store"]

Mode = Literal["run", "debug"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    mode TEXT NOT NULL, run_id TEXT NOT NULL, team_id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (mode, run_id));
CREATE TABLE IF NOT EXISTS records (
    mode TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (mode, run_id, seq));
CREATE TABLE IF NOT EXISTS sessions (
    team_id TEXT NOT NULL, mode TEXT NOT NULL, opened INTEGER NOT NULL,
    PRIMARY KEY (team_id, mode));
"""


class HostedRun(BaseModel):
    """One Sim.API run as stored (a row of ``runs``)."""

    mode: Mode
    run_id: str
    team_id: str
    description: str
    track_persona: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)  # the team's own ``extra`` at /run/start, kept as sent
    created_at: datetime = Field(default_factory=utcnow)
    queue: list[tuple[str, str]]  # (persona id, topic id), the order sessions are opened in
    position: int = 0  # index in ``queue`` of the current session
    completed: bool = False
    run_dir: str
    session: SavedSession | None = None  # the current session
    counts: dict[str, int] = Field(default_factory=dict)
    seq: int = 0  # dump records written
    numbering: dict[str, int] = Field(default_factory=dict)  # records per pair: the "<topic>_<i>" numbers


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by worker threads, serialised by a lock: writes are small.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def load_runs(self) -> list[HostedRun]:
        with self._lock:
            rows = self._db.execute("SELECT data FROM runs ORDER BY rowid").fetchall()
        return [HostedRun.model_validate_json(r[0]) for r in rows]

    def save(self, run: HostedRun, records: Iterable[tuple[int, DumpRecord]] = (), replace: bool = False,
             sessions_opened: int = 0) -> None:
        """Write a run, the dump records of its latest step and the sessions it opened
        (budget) in one transaction.

        ``replace`` drops the records of an earlier run with the same id (a reused debug id).
        """
        mode, run_id, team_id = run.mode, run.run_id, run.team_id
        text = json.dumps(run.model_dump(mode="json"), separators=(",", ":"))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if replace:
                    self._db.execute("DELETE FROM records WHERE mode=? AND run_id=?", (mode, run_id))
                self._db.execute(
                    "INSERT INTO runs (mode, run_id, team_id, data) VALUES (?,?,?,?) "
                    "ON CONFLICT (mode, run_id) DO UPDATE SET team_id=excluded.team_id, data=excluded.data",
                    (mode, run_id, team_id, text),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO records (mode, run_id, seq, data) VALUES (?,?,?,?)",
                    [(mode, run_id, seq, json.dumps(rec.model_dump(mode="json"))) for seq, rec in records],
                )
                if sessions_opened:
                    self._db.execute(
                        "INSERT INTO sessions (team_id, mode, opened) VALUES (?,?,?) "
                        "ON CONFLICT (team_id, mode) DO UPDATE SET opened = opened + excluded.opened",
                        (team_id, mode, sessions_opened),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def records(self, mode: str, run_id: str) -> list[dict[str, Any]]:
        """The dump records of a run as they were stored (``DumpRecord`` documents), sent on as they are."""
        with self._lock:
            rows = self._db.execute(
                "SELECT data FROM records WHERE mode=? AND run_id=? ORDER BY seq", (mode, run_id)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def sessions_opened(self, team_id: str, mode: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT opened FROM sessions WHERE team_id=? AND mode=?", (team_id, mode)
            ).fetchone()
        return row[0] if row else 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
