"""Admission metrics: a request counter and a latency histogram by path and verdict, in Prometheus text format.

The HTTP shell calls `Metrics.observe(path, verdict, seconds)` once per review and serves `Metrics.render()` at
`/metrics`. Written by hand (no prometheus_client): two metric families, a lock and a dict are all it takes.
Verdict labels: `allowed`, `denied`, `error` (a handler raised; the review was denied) and `invalid` (HTTP 400).
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

__all__ = ["BUCKETS", "CONTENT_TYPE", "VERDICTS", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
VERDICTS = ("allowed", "denied", "error", "invalid")
# seconds; admission answers are sub-millisecond to a few ms, kube-apiserver's webhook timeout is 10 s at most
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = "lahar_admission_requests_total"
DURATION = "lahar_admission_duration_seconds"


@dataclass
class _Series:
    count: int = 0
    total: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # non-cumulative, +Inf implicit


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _float(value: float) -> str:
    return repr(float(value)) if value != float("inf") else "+Inf"


class Metrics:
    """Thread-safe counters; one instance per app."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], _Series] = {}

    def observe(self, path: str, verdict: str, seconds: float) -> None:
        i = bisect.bisect_left(BUCKETS, seconds)
        with self._lock:
            s = self._series.get((path, verdict))
            if s is None:
                s = self._series[(path, verdict)] = _Series()
            s.count += 1
            s.total += seconds
            if i < len(BUCKETS):
                s.buckets[i] += 1

    def count(self, path: str, verdict: str) -> int:
        with self._lock:
            s = self._series.get((path, verdict))
            return s.count if s else 0

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of both families, series sorted by labels."""
        with self._lock:
            series = sorted((k, _Series(v.count, v.total, list(v.buckets))) for k, v in self._series.items())
        lines = [f"# HELP {REQUESTS} Admission reviews answered, by webhook path and verdict.",
                 f"# TYPE {REQUESTS} counter"]
        for (path, verdict), s in series:
            lines.append(f'{REQUESTS}{{path="{_label(path)}",verdict="{verdict}"}} {s.count}')
        lines += [f"# HELP {DURATION} Time to answer an admission review, by webhook path and verdict.",
                  f"# TYPE {DURATION} histogram"]
        for (path, verdict), s in series:
            labels = f'path="{_label(path)}",verdict="{verdict}"'
            cumulative = 0
            for bound, n in zip(BUCKETS, s.buckets, strict=True):
                cumulative += n
                lines.append(f'{DURATION}_bucket{{{labels},le="{_float(bound)}"}} {cumulative}')
            lines.append(f'{DURATION}_bucket{{{labels},le="+Inf"}} {s.count}')
            lines.append(f"{DURATION}_sum{{{labels}}} {_float(s.total)}")
            lines.append(f"{DURATION}_count{{{labels}}} {s.count}")
        return "\n".join(lines) + "\n"
