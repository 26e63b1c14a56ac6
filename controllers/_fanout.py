"""Bounded concurrency for a reconcile's independent API calls: a Job's pod creates and deletes go out side by side.

Sits under `controllers.jobs` (Volcano's syncJob/killJob start one goroutine per pod and wait for all): one thread
pool per process, shared by every reconcile in it and rebuilt in a forked child; `run` waits for every call and
returns each item's outcome in input order, so the caller decides what is a failure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["DEFAULT_LIMIT", "Outcome", "run", "shutdown"]

DEFAULT_LIMIT = 16

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """`fn(item)` returned `value`, or raised `error` (an `Exception`; anything else propagates from `run`)."""

    item: T
    value: R | None = None
    error: Exception | None = None


_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    _pools.clear()  # the parent's pool threads do not exist in the child


os.register_at_fork(after_in_child=_reset_after_fork)


def _pool(limit: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(limit)
        if pool is None:
            pool = _pools[limit] = ThreadPoolExecutor(limit, thread_name_prefix=f"lahar-fanout-{limit}")
        return pool


def _call(fn: Callable[[T], R], item: T) -> Outcome[T, R]:
    try:
        return Outcome(item, value=fn(item))
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which sorts them
        return Outcome(item, error=exc)


def run(fn: Callable[[T], R], items: Sequence[T], limit: int = DEFAULT_LIMIT) -> list[Outcome[T, R]]:
    """`fn(item)` for every item, at most `limit` calls in flight in this process (the pool is shared by every
    caller), waiting for all of them. One item, or `limit` ≤ 1, runs in the calling thread, one after another.
    `fn` must not call `run` itself (a full pool would wait on itself)."""
    if len(items) <= 1 or limit <= 1:
        return [_call(fn, item) for item in items]
    pool = _pool(limit)
    futures = [pool.submit(_call, fn, item) for item in items]
    return [f.result() for f in futures]


def shutdown() -> None:
    """Stop the pools (tests, process exit); the next `run` starts a new one."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=True)
