"""The review clock of `lahar webhook --workers N`: each worker process stamps when its review in progress began,
and the supervisor (`webhooks.server.Supervisor`) kills a worker whose review has run past the limit.

Why outside the process: the CEL engine is Rust holding the GIL with no interrupt, so no thread of the stuck worker
can stop it, or even run. The stamp is one float in a file-backed page per worker (`<dir>/<pid>`, mmap), written
with a plain memory store at the start and the end of each review (well under a microsecond), and read by the
parent without any help from the worker. `ReviewClock` is the worker's side (a no-op unless the supervisor set
`WATCH_DIR_ENV`), `started_at` and `overdue` the supervisor's; `overdue` is the pure decision.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CLOCK", "WATCH_DIR_ENV", "ReviewClock", "forget", "overdue", "started_at"]

WATCH_DIR_ENV = "LAHAR_WEBHOOK_WATCH_DIR"   # set by the supervisor; spawned workers inherit it
_SLOT = struct.Struct("d")                   # time.monotonic() when the review began; 0.0 when idle


class ReviewClock:
    """The worker's stamp: `begin()` before a review's work, `end()` after it (both cheap; no-ops when no
    supervisor watches). `time.monotonic()` is CLOCK_MONOTONIC on Linux: the same clock in every process."""

    def __init__(self) -> None:
        self._page: mmap.mmap | None = None
        self._opened = False
        os.register_at_fork(after_in_child=self._reset)   # a forked child stamps its own page, not its parent's

    def _reset(self) -> None:
        self._page, self._opened = None, False

    def _open(self) -> mmap.mmap | None:
        self._opened = True
        directory = os.environ.get(WATCH_DIR_ENV)
        if not directory:
            return None
        path = Path(directory) / str(os.getpid())
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, _SLOT.size)
            return mmap.mmap(fd, _SLOT.size)
        finally:
            os.close(fd)

    def begin(self) -> None:
        page = self._page if self._opened else self._open_page()
        if page is not None:
            _SLOT.pack_into(page, 0, time.monotonic())

    def end(self) -> None:
        page = self._page
        if page is not None:
            _SLOT.pack_into(page, 0, 0.0)

    def _open_page(self) -> mmap.mmap | None:
        self._page = self._open()
        return self._page


CLOCK = ReviewClock()


def started_at(directory: str | os.PathLike[str], pid: int) -> float | None:
    """When worker `pid`'s review in progress began (monotonic seconds), or None when it is idle or has no page."""
    try:
        data = (Path(directory) / str(pid)).read_bytes()
    except OSError:
        return None
    if len(data) < _SLOT.size:
        return None
    (value,) = _SLOT.unpack_from(data)
    return value if value > 0 else None


def forget(directory: str | os.PathLike[str], pid: int) -> None:
    """Drop a dead worker's page and its metrics snapshot (`webhooks.shared_metrics`)."""
    for name in (str(pid), f"{pid}.prom"):
        with contextlib.suppress(OSError):
            (Path(directory) / name).unlink()


def overdue(started: Mapping[int, float | None], *, now: float, limit: float) -> list[int]:
    """The workers (pids, in order) whose review in progress began more than `limit` seconds before `now`;
    a limit of 0 or less watches nothing."""
    if limit <= 0:
        return []
    return sorted(pid for pid, at in started.items() if at is not None and now - at > limit)
