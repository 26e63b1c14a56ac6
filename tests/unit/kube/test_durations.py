"""Go durations and kubectl's AGE: `kube.durations` against Go's `time` package and apimachinery's tables."""

from __future__ import annotations

import pytest

from lahar.kube import durations

PARSE = [
    ("seconds", "90s", 90.0),
    ("compound", "1m30s", 90.0),
    ("fraction", "1.5h", 5400.0),
    ("fraction-minutes", "1.5m", 90.0),
    ("millis", "300ms", 0.3),
    ("hours-minutes", "2h45m", 9900.0),
    ("every-unit", "1h2m3s4ms5us6ns", 3723.004005006),
    ("micro-sign", "5µs", 5e-6),
    ("zero", "0", 0.0),
    ("negative", "-2s", -2.0),
    ("plus", "+5s", 5.0),
]


@pytest.mark.parametrize(("text", "seconds"), [c[1:] for c in PARSE], ids=[c[0] for c in PARSE])
def test_parse_like_go(text: str, seconds: float) -> None:
    assert durations.parse(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", "m", "s", "1m 2s", "3x"],
                         ids=["empty", "no-unit", "bad-unit", "no-number-m", "no-number-s", "space", "unknown-unit"])
def test_parse_rejects_with_gos_text(text: str) -> None:
    with pytest.raises(ValueError, match=f'time: invalid duration "{text}"'):
        durations.parse(text)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (1.5, "1.5s"), (60, "1m0s"), (3605, "1h0m5s"),
                                               (0.5, "500ms"), (59.25, "59.25s"), (-2, "-2s")],
                         ids=["zero", "fraction", "minute", "hour", "millis", "quarter", "negative"])
def test_format_like_go(seconds: float, text: str) -> None:
    assert durations.format(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (5, "5s"), (45, "45s"), (119, "119s"), (150, "2m30s"), (200, "3m20s"), (240, "4m"),
    (600, "10m"), (700, "11m"), (3 * 3600 + 60, "3h1m"), (3 * 3600 + 5 * 60, "3h5m"), (10 * 3600, "10h"),
    (30 * 3600, "30h"), (3 * 86400 + 3600, "3d1h"), (3 * 86400 + 4 * 3600, "3d4h"), (30 * 86400, "30d"),
    (400 * 86400, "400d"), (3 * 365 * 86400 + 86400, "3y1d"), (9 * 365 * 86400, "9y"),
], ids=lambda v: str(v))
def test_human_like_kubectl_age(seconds: int, text: str) -> None:
    assert durations.human(seconds) == text
