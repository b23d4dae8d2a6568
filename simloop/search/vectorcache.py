"""The persistent vector cache: what an encoder computed for a text, kept on disk for every
later run (``<cache>/vectors.sqlite``, ``<cache>`` as ``settings.cache_root``).

A vector is a pure function of the encoder (its weights, and the code that runs them) and
the exact text, so the key is the digest of those (``key``): passages, sentences, PTKB
statements and utterances alike, from any index or run, never a docid.  An encoder looks
its texts up before it encodes them and stores what it computed (``embeddings.py``); so
the first run embeds only what it retrieves, and later runs find it.
``simloop index build --embeddings`` fills the same cache up front (``vectors.fill``).

SQLite in WAL mode, for several processes at once: a reader never sees a torn entry (each
write is a transaction), readers never wait for the writer, and writers take turns.  A row
is ``(key, crc32, float32 bytes)``; one whose length or checksum does not match is ignored
(and overwritten when its text is encoded again).  The cache is a help, never a
requirement: a file that cannot be opened, read or written is logged once and the
encoder goes on without it (a reader or writer that finds the file busy for long skips that
batch, and tries the next one).  Encoders that open a new file at the same moment (the
MiniLM and PTKB encoders of one run) all keep it.

Size: bounded by ``settings.vector_cache_mb`` (``SIMLOOP_VECTOR_CACHE_MB``, default 1024;
the demo corpus' 10,033 passages and 36,953 sentences take ~93 MB: 2,080 bytes a MiniLM vector).  Past the bound the
oldest quarter of the rows is dropped (first in, first out: counting uses would turn every
lookup into a write), checked when a cache that stored something is closed.  Lookups are
batched (one query per batch of texts) and run on the encoder's worker thread, never on
the event loop; ``scripts/bench_demo.py`` measures them.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["VectorCache", "key", "CACHE_FILE"]

log = logging.getLogger(__name__)

CACHE_FILE = "vectors.sqlite"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, "
           "crc INTEGER NOT NULL, vec BLOB NOT NULL)")
_CHUNK = 500  # texts per SELECT (SQLite allows 999 parameters on the oldest builds)
_OPEN_WAIT_S = 10.0
_WRITE_WAIT_S = 2.0  # a writer waits this long for another; then it skips (a cache, not a store)
_KEEP = 0.75  # a trim keeps this share of the bound


def key(encoder_id: str, text: str) -> bytes:
    """The cache key of ``text`` for the encoder named ``encoder_id`` (16 bytes)."""
    return hashlib.blake2b(f"{encoder_id}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest()


class VectorCache:
    """The vectors of one encoder (``encoder_id``: name, weights, code version) in the cache
    file ``path``.  Blocking; one thread at a time (an encoder's worker thread, or an index
    build's main thread).  ``max_mb`` bounds the file (0: no bound)."""

    def __init__(self, path: Path, encoder_id: str, dim: int, max_mb: int = 1024):
        self.path, self.encoder_id, self.dim, self.max_mb = Path(path), encoder_id, dim, max_mb
        self._conn: sqlite3.Connection | None = None
        self._broken = False  # unusable: logged once, then every call is a no-op
        self._stored = 0
        self._lock = threading.Lock()  # open/close may come from another thread than the lookups
        self.stats = {"lookups": 0, "hits": 0, "stored": 0, "ignored": 0}

    # ---- connection

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # Opening may wait for another process's first write (the schema, WAL mode);
                # then each write waits at most _WRITE_WAIT_S for the others.
                conn = sqlite3.connect(self.path, timeout=_OPEN_WAIT_S, check_same_thread=False,
                                       isolation_level=None)  # autocommit; writes open their own transaction
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                except sqlite3.OperationalError:
                    # SQLite answers "locked" at once, without waiting, while another
                    # connection switches a new file to WAL.  The mode belongs to the file, and
                    # every connection follows it from its next read: nothing is left to do.
                    pass
                conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per commit: a crash may lose the last rows
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA busy_timeout={int(_WRITE_WAIT_S * 1000)}")
                self._conn = conn
            except (sqlite3.Error, OSError) as exc:
                self._give_up(exc)
        return self._conn

    def _give_up(self, exc: BaseException) -> None:
        self._broken = True
        log.warning("vector cache %s unusable (%s); going on without it (delete the file to start a new one)",
                    self.path, exc)
        self.close()

    # ---- reading and writing

    def lookup(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The stored vector of each text (read-only float32 rows), None where there is none
        or the stored one is damaged."""
        out: list[np.ndarray | None] = [None] * len(texts)
        conn = self._connect()
        if conn is None or not texts:
            return out
        keys = [key(self.encoder_id, t) for t in texts]
        rows: dict[bytes, tuple[int, bytes]] = {}
        try:
            for start in range(0, len(keys), _CHUNK):
                part = keys[start:start + _CHUNK]
                marks = ",".join("?" * len(part))
                for k, crc, vec in conn.execute(f"SELECT key, crc, vec FROM vectors WHERE key IN ({marks})", part):
                    rows[bytes(k)] = (crc, bytes(vec))
        except sqlite3.OperationalError as exc:  # busy beyond the wait: these texts are misses this time
            log.info("vector cache %s: %d lookups skipped (%s)", self.path, len(texts), exc)
            return out
        except sqlite3.Error as exc:
            self._give_up(exc)
            return out
        for i, k in enumerate(keys):
            found = rows.get(k)
            if found is not None:
                out[i] = self._decode(*found)
        self.stats["lookups"] += len(texts)
        self.stats["hits"] += sum(v is not None for v in out)
        return out

    def _decode(self, crc: int, blob: bytes) -> np.ndarray | None:
        if len(blob) != 4 * self.dim or zlib.crc32(blob) != crc:
            self.stats["ignored"] += 1
            return None
        vec = np.frombuffer(blob, dtype=np.float32)
        return vec  # frombuffer over bytes: read-only, as cached rows must be

    def store(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep ``vectors`` (one float32 row per text) for later runs; a busy or broken
        cache skips it (logged), never fails the caller."""
        conn = self._connect()
        if conn is None or not texts:
            return
        rows = []
        for text, vec in zip(texts, np.asarray(vectors, dtype=np.float32)):
            blob = np.ascontiguousarray(vec).tobytes()
            rows.append((key(self.encoder_id, text), zlib.crc32(blob), blob))
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO vectors (key, crc, vec) VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:  # busy beyond the wait, a full disk, a read-only file
            log.info("vector cache %s: %d vectors not stored (%s)", self.path, len(rows), exc)
            return
        except sqlite3.Error as exc:
            self._give_up(exc)
            return
        self._stored += len(rows)
        self.stats["stored"] += len(rows)

    # ---- size

    def size_bytes(self) -> int:
        """The bytes the live rows take (pages in use)."""
        conn = self._connect()
        if conn is None:
            return 0
        pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
        return int((pages - free) * size)

    def trim(self) -> int:
        """Past the bound, drop the oldest rows down to ``_KEEP`` of it; returns rows dropped."""
        conn = self._connect()
        if conn is None or self.max_mb <= 0:
            return 0
        try:
            used, bound = self.size_bytes(), self.max_mb * 1024 * 1024
            if used <= bound:
                return 0
            count = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            drop = int(count * (1 - _KEEP * bound / used)) + 1
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM vectors WHERE id IN (SELECT id FROM vectors ORDER BY id LIMIT ?)", (drop,))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.info("vector cache %s: not trimmed (%s)", self.path, exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return 0
        log.info("vector cache %s: dropped the oldest %d vectors (over %d MB)", self.path, drop, self.max_mb)
        return drop

    def close(self) -> None:
        """Trim if this cache stored anything, and close the file.  Idempotent."""
        with self._lock:
            if self._conn is None:
                return
            if self._stored and not self._broken:
                self._stored = 0
                self.trim()
            self._conn.close()
            self._conn = None
