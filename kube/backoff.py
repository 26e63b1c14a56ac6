"""Retry backoff: the one pure function every retrying loop uses (informer reconnects, the dispatcher's enqueue
loop, the work queue's reconcile retries, the worker supervisor's restarts).

Sits in kube, the lowest layer, so every caller can import it. Exponential `base·2^attempt` capped at `cap`, with
an optional jitter so that many clients failing at the same moment (an API server or Redis restart) do not all
come back at the same moment.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal

__all__ = ["Jitter", "delay"]

Jitter = Literal["none", "equal", "full"]
_MAX_EXPONENT = 30  # 2^30 · any sane base is past every cap; keeps the float finite for huge attempt counts


def delay(attempt: int, *, base: float, cap: float, jitter: Jitter = "equal",
          rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry number `attempt` (0 = the first retry, after one failure).

    The ceiling is `min(cap, base·2^attempt)`. `jitter`: "none" → the ceiling; "equal" → half fixed, half random
    (`ceiling/2 + rng()·ceiling/2`, never less than half the ceiling); "full" → `rng()·ceiling`. `rng` returns a
    float in [0, 1). A negative attempt, base or cap is an error naming the argument.
    """
    for name, value in (("attempt", attempt), ("base", base), ("cap", cap)):
        if value < 0:
            raise ValueError(f"backoff {name} must not be negative, got {value!r}")
    ceiling = min(cap, base * 2.0 ** min(attempt, _MAX_EXPONENT))
    if jitter == "none":
        return ceiling
    if jitter == "equal":
        return ceiling / 2 + rng() * ceiling / 2
    if jitter == "full":
        return rng() * ceiling
    raise ValueError(f"backoff jitter must be one of none, equal, full, got {jitter!r}")
