"""sla: a job may wait at most `sla-waiting-time` (plugin argument, or the PodGroup annotation
`volcano.sh/sla-waiting-time`); jobs whose deadline comes first go first, and a job past it is forced through
enqueue and counts as pipelined.

Volcano's `plugins/sla` (spec §5.4). Durations use Go's syntax (`1h2m3s4ms5us6ns`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lahar.kube import durations
from lahar.kube.models import labels
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job

__all__ = ["ARGUMENT", "Sla", "parse_duration", "waiting_time"]

ARGUMENT = "sla-waiting-time"
# Volcano's JobInfo reads the bare key; the spec (and lahar's job controller) use the prefixed one.
ANNOTATIONS = (labels.SLA_WAITING_TIME_KEY, "sla-waiting-time")



def waiting_time(job: Job) -> float | None:
    """The job's own waiting time from its PodGroup annotations (positive durations only)."""
    ann = (job.podgroup.get("metadata") or {}).get("annotations") or {}
    for key in ANNOTATIONS:
        v = ann.get(key)
        if v is not None:
            d = parse_duration(str(v))
            return d if d is not None and d > 0 else None
    return None


def _timestamp(text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def parse_duration(text: str) -> float | None:
    """Go's time.ParseDuration, in seconds; None when malformed (Volcano ignores a bad waiting time)."""
    try:
        return durations.parse(text)
    except ValueError:
        return None


class Sla:
    name = "sla"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.global_wait: float | None = None
        if ARGUMENT in self.arguments:
            raw = self.arguments[ARGUMENT]
            d = parse_duration(raw) if isinstance(raw, str) else None
            if d is not None and d > 0:
                self.global_wait = d
        self.now = dt.datetime.now(dt.UTC)
        self._waits: dict[str, float | None] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.now = _timestamp(ssn.timestamp) or dt.datetime.now(dt.UTC)
        self._waits = {uid: waiting_time(j) for uid, j in ssn.jobs.items()}

    def _wait(self, job: Job) -> float | None:
        w = self._waits.get(job.uid) if job.uid in self._waits else waiting_time(job)
        return w if w is not None else self.global_wait

    def _deadline(self, job: Job, wait: float) -> dt.datetime:
        created = _timestamp(job.creation) or self.now
        return created + dt.timedelta(seconds=wait)

    def job_order(self, left: Job, right: Job) -> int:
        """Jobs with a waiting time before those without; then the earlier creation + waiting time first."""
        lw, rw = self._wait(left), self._wait(right)
        if lw is None:
            return 0 if rw is None else 1
        if rw is None:
            return -1
        ld, rd = self._deadline(left, lw), self._deadline(right, rw)
        return -1 if ld < rd else (1 if ld > rd else 0)

    def _permit(self, job: Job) -> Vote:
        w = self._wait(job)
        if w is None:
            return Vote.ABSTAIN
        created = _timestamp(job.creation)
        if created is None or (self.now - created).total_seconds() < w:
            return Vote.ABSTAIN
        return Vote.PERMIT

    def job_enqueueable(self, job: Job) -> Vote:
        """PERMIT once the job has waited longer than its waiting time (forces it into the queue), else abstain."""
        return self._permit(job)

    def job_pipelined(self, job: Job) -> Vote:
        return self._permit(job)
