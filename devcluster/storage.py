"""devcluster's persistence: `kube.apiserver.ports.Backend` over SQLite (WAL), so a restart loses no acknowledged
write.

The store keeps all state in memory and calls `write`/`write_many` under its lock before it answers; this module
only makes those writes durable and hands them back (objects + recent event log) on `load()` at start.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

__all__ = ["SQLiteBackend"]

Obj = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, rv INTEGER NOT NULL, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS events (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, key TEXT NOT NULL, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class SQLiteBackend:
    """`objects(key PRIMARY KEY, rv, body)` + `events(rv PRIMARY KEY, type, key, body)`; one transaction per write
    (or per batch). WAL with synchronous=NORMAL: a killed process loses nothing it committed."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            db = Path(self.path)
            db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # created owner-only before SQLite opens it: SQLite gives -wal and -shm the mode of the database
            os.close(os.open(db, os.O_RDWR | os.O_CREAT, 0o600))
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._closed = False
        self._owner_only()

    def _owner_only(self) -> None:
        """state.db, -wal and -shm at 0600, also when an older version made them 0644."""
        if self.path == ":memory:":
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(self.path + suffix, 0o600)

    def load(self) -> tuple[int, dict[str, Obj], list[tuple[int, str, str, Obj]]]:
        """(current rv, key → object, event log in rv order)."""
        with self._lock:
            objects = {key: orjson.loads(body) for key, body in self._db.execute("SELECT key, body FROM objects")}
            events = [(rv, etype, key, orjson.loads(body)) for rv, etype, key, body in
                      self._db.execute("SELECT rv, type, key, body FROM events ORDER BY rv")]
            row = self._db.execute("SELECT value FROM meta WHERE name = 'rv'").fetchone()
        rv = max([row[0] if row else 0, *(e[0] for e in events[-1:])])
        return rv, objects, events

    def write(self, rv: int, type: str, key: str, obj: Obj) -> None:
        self.write_many([(rv, type, key, obj)])

    def write_many(self, records: Iterable[tuple[int, str, str, Obj]]) -> None:
        """Apply several writes in one transaction (upsert or delete the object, append the event, bump the rv)."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                last = 0
                for rv, etype, key, obj in records:
                    body = orjson.dumps(obj)
                    if etype == "DELETED":
                        cur.execute("DELETE FROM objects WHERE key = ?", (key,))
                    else:
                        cur.execute("INSERT INTO objects (key, rv, body) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE "
                                    "SET rv = excluded.rv, body = excluded.body", (key, rv, body))
                    cur.execute("INSERT OR REPLACE INTO events (rv, type, key, body) VALUES (?, ?, ?, ?)",
                                (rv, etype, key, body))
                    last = max(last, rv)
                cur.execute("INSERT INTO meta (name, value) VALUES ('rv', ?) ON CONFLICT(name) DO UPDATE SET "
                            "value = max(value, excluded.value)", (last,))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def trim(self, before_rv: int) -> None:
        """Forget events older than `before_rv` (objects are untouched)."""
        with self._lock:
            self._db.execute("DELETE FROM events WHERE rv < ?", (before_rv,))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._db.close()
