"""The conformance suite on `kube.apiserver.memory.MemoryClient` (the in-process engine, no HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lahar.kube.apiserver import memory, store
from tests.conformance.suite import *  # noqa: F403 - the shared tests and the `ns` fixture
from tests.conformance.suite import Backend


class _Recording:
    """Delegates to a MemoryClient and remembers the watches it opened (to trigger bookmarks on them)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.registry = inner.registry
        self.watches: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def watch(self, rt: Any, **kw: Any) -> Any:
        w = self._inner.watch(rt, **kw)
        self.watches.append(w)
        return w

    def send_bookmarks(self) -> None:
        for w in self.watches:
            w.bookmark()


@pytest.fixture
def backend() -> Iterator[Backend]:
    made: list[Any] = []

    def fresh(**store_options: Any) -> Any:
        c = memory.MemoryClient(store.Store(**store_options))
        made.append(c)
        return c

    client = _Recording(fresh())

    def small_history() -> tuple[Any, int]:
        return fresh(history=5), 5

    yield Backend(name="memory", client=client, settle=client._inner.tick, poll_timeout=5.0, small_history=small_history,
                  send_bookmarks=client.send_bookmarks)
    for w in client.watches:
        w.stop()
    for c in made:
        close = getattr(c, "close", None)
        if close:
            close()
