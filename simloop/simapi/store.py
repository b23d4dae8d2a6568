"""The rehearsal server's state on disk: one small sqlite file, so runs survive a restart.

Three tables: ``runs`` (one JSON document per Sim.API run: queue position, the current
session with its simulator memory), ``records`` (the ``/run/dump`` lines, appended per
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
from pathlib import Path
from typing import Any

__all__ = ["Store"]

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

    def load_runs(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT data FROM runs ORDER BY rowid").fetchall()
        return [json.loads(r[0]) for r in rows]

    def save(self, mode: str, run_id: str, team_id: str, data: dict[str, Any],
             records: Iterable[tuple[int, dict[str, Any]]] = (), replace: bool = False,
             sessions_opened: int = 0) -> None:
        """Write a run, the dump records of its latest step and the sessions it opened
        (budget) in one transaction.

        ``replace`` drops the records of an earlier run with the same id (a reused debug id).
        """
        text = json.dumps(data, separators=(",", ":"))
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
                    [(mode, run_id, seq, json.dumps(rec)) for seq, rec in records],
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
