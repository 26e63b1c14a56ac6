"""kube.backoff.delay: the one retry backoff (exponential, capped, with jitter) as a table."""

from __future__ import annotations

import pytest

from lahar.kube import backoff


@pytest.mark.parametrize(("attempt", "jitter", "r", "want"), [
    (0, "none", 0.5, 0.5),
    (1, "none", 0.5, 1.0),
    (3, "none", 0.5, 4.0),
    (10, "none", 0.5, 10.0),
    (10_000, "none", 0.5, 10.0),
    (0, "equal", 0.0, 0.25),
    (0, "equal", 0.999, 0.25 + 0.999 * 0.25),
    (2, "equal", 0.5, 1.5),
    (10, "equal", 0.0, 5.0),
    (0, "full", 0.0, 0.0),
    (2, "full", 0.5, 1.0),
    (10, "full", 0.5, 5.0),
], ids=["first-no-jitter", "second-doubles", "fourth", "capped", "huge-attempt-capped",
        "equal-low-is-half", "equal-high-below-ceiling", "equal-middle", "equal-capped-low",
        "full-low-is-zero", "full-middle", "full-capped"])
def test_delay(attempt: int, jitter: backoff.Jitter, r: float, want: float) -> None:
    assert backoff.delay(attempt, base=0.5, cap=10.0, jitter=jitter, rng=lambda: r) == pytest.approx(want)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"attempt": -1}, "attempt"), ({"base": -0.1}, "base"), ({"cap": -1.0}, "cap"), ({"jitter": "half"}, "jitter"),
], ids=["negative-attempt", "negative-base", "negative-cap", "unknown-jitter"])
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    args = {"attempt": 1, "base": 0.5, "cap": 10.0} | kwargs
    with pytest.raises(ValueError, match=f"backoff {field} "):
        backoff.delay(args.pop("attempt"), **args)


def test_equal_jitter_spreads_many_clients() -> None:
    import random

    rng = random.Random(7)
    delays = {round(backoff.delay(3, base=0.2, cap=10.0, rng=rng.random), 6) for _ in range(100)}
    assert len(delays) > 90 and all(0.8 <= d < 1.6 for d in delays)
