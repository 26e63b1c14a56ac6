"""Durations as Kubernetes and Go write them: `time.ParseDuration`, `Duration.String()`, and kubectl's AGE column.

Used wherever a spec carries a Go duration (policy timeouts, `lahar.sh/sim-duration`, `sla-waiting-time`, cron
`@every`) and wherever lahar prints one (Job `runningDuration`, AGE columns).
"""

from __future__ import annotations

import re

__all__ = ["format", "human", "parse"]

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse(text: str) -> float:
    """Go's `time.ParseDuration`, in seconds: `90s`, `1m30s`, `1.5h`, `300ms`, `-2s`, `0`; else ValueError with
    Go's text (`time: invalid duration "5"`)."""
    s = text.strip()
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos == 0 or pos != len(s):
        raise ValueError(f'time: invalid duration "{text}"')
    return sign * total


def format(seconds: float) -> str:  # noqa: A001 - Go's name for it, read as `durations.format(...)`
    """Go's `time.Duration.String()`: `0s`, `1.5s`, `2m0s`, `1h0m5s`, `500ms`."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def human(seconds: float) -> str:
    """apimachinery's `duration.HumanDuration` (kubectl's AGE, vcctl's tables): `45s`, `3m20s`, `2h5m`, `3d4h`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"
