"""lahar dispatch's sender: while Redis (or the broker) is away it keeps the work and retries with the shared
jittered backoff (kube.backoff), doubling from 0.1 s to 5 s, and starts again from the bottom after a success."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lahar.controllers.dispatch import Work
from lahar.controllers.workqueue import Key
from lahar.dispatcher import Dispatcher


class _NoRedis:
    """Enough of a Redis client for building a Dispatcher that never talks to it."""

    def register_script(self, script: str) -> Any:
        return lambda **_: None


class _FakeStop(threading.Event):
    """The sender's stop event with fake time: records each wait and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.is_set()


@pytest.mark.parametrize(("r", "want"), [
    (0.0, [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.5, 2.5]),
    (0.5, [0.075, 0.15, 0.3, 0.6, 1.2, 2.4, 3.75, 3.75]),
], ids=["low-draw-is-half-the-ceiling", "middle-draw"])
def test_enqueue_retries_back_off_with_jitter_up_to_5s(r: float, want: list[float]) -> None:
    failures = len(want)
    sent: list[Key] = []

    def send(key: Key) -> bool:
        if len(stop.waits) < failures:
            raise ConnectionError("redis away")
        sent.append(key)
        stop.set()  # the test ends once the work got through
        return True

    d = Dispatcher(client=None, redis=_NoRedis(), send=send, rng=lambda: r)
    stop = _FakeStop()
    key = Key("Job", "default", "j1")
    d._outbox.put(Work(key))
    d._send_loop(stop)  # in this thread: returns once the work is sent
    assert stop.waits == pytest.approx(want)
    assert sent == [key] and d.stats["errors"] == failures and d.stats["sent"] == 1
