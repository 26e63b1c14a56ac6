"""tdm: time-division multiplexing of revocable nodes (Volcano's `plugins/tdm`).

A node labelled `volcano.sh/revocable-zone: <zone>` lends itself to preemptable work only while its zone's window
(argument `tdm.revocable-zone.<zone>: "HH:MM-HH:MM"`, in UTC) is open. A task may use such a node when it carries
`volcano.sh/revocable-zone: "*"` (or `volcano.sh/preemptable: "true"`); it then scores 100 there. Preemptable or
revocable preemptors preempt nobody; the others may evict preemptable Running tasks on ordinary nodes, each job's
share capped by its disruption budget (PodGroup annotations `volcano.sh/jdb-min-available` /
`volcano.sh/jdb-max-unavailable`, default 1). Non-preemptable jobs go first; a job is pipelined only when it has
its minimum. `victim_tasks`, the shuffle action's VictimTasks hook, finds the preemptable tasks on revocable nodes
whose window has closed, at most once per `tdm.evict.period` (default 1m). The decisions are pure functions over
plain data.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lahar.kube import durations
from lahar.kube.models import labels as keys
from lahar.scheduler.framework.hooks import REUSE_STATIC, NodeFilter, Vote
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Task, TaskStatus

__all__ = [
    "MAX_NODE_SCORE",
    "Tdm",
    "max_evictions",
    "parse_window",
    "task_revocable_zone",
    "window_seconds",
    "zone_error",
]

ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
MAX_NODE_SCORE = 100.0
NOT_ALLOWED = "not allow to dispatch to revocable node"  # upstream's reason text
DAY = 24 * 60

# Go's time.Parse with layout "15:04": an hour of one or two digits (0-23), minutes of exactly two (00-59).
_CLOCK = re.compile(r"^([0-9]{1,2}):([0-9]{2})$")


def _clock(text: str) -> int:
    m = _CLOCK.match(text)
    if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise ValueError(f'parsing time "{text}" as "15:04": cannot parse')
    return int(m.group(1)) * 60 + int(m.group(2))


def parse_window(raw: str) -> tuple[int, int]:
    """`"HH:MM-HH:MM"` (surrounding blanks allowed) → (start, end) in minutes of the day; ValueError otherwise.
    An end at or before the start is on the next day (so equal ends are a whole day)."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ValueError(f"revocable zone {raw} format error")
    return _clock(parts[0]), _clock(parts[1])


def window_seconds(start: int, end: int) -> int:
    """How long the window is open, in seconds (upstream's end − start)."""
    return ((end - start) if start < end else (end + DAY - start)) * 60


def zone_error(zones: Mapping[str, str], zone: str, now: dt.datetime) -> str | None:
    """None when `zone`'s window is open at `now` (UTC, both ends included), else why not (upstream's texts). A
    window across midnight is open on both sides of it."""
    raw = zones.get(zone)
    if raw is None:
        return f"revocable zone {zone} not support"
    try:
        start, end = parse_window(raw)
    except ValueError as e:
        return str(e)
    now = now.astimezone(dt.UTC)
    t = now.hour * 60 + now.minute + (now.second + now.microsecond / 1e6) / 60
    if start < end:
        open_ = start <= t <= end
    else:  # ends the next day: open from the start to midnight, and from midnight to the end
        open_ = t >= start or t <= end
    return None if open_ else f"current time beyond revocable zone {zone}:{raw}"


def _flag(value: Any) -> bool | None:
    """Go's strconv.ParseBool; None when it does not parse."""
    text = str(value)
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def task_revocable_zone(pod: Mapping[str, Any]) -> str:
    """`"*"` when the pod may use revocable nodes: its `volcano.sh/revocable-zone` annotation is `*`, or, without
    that annotation, `volcano.sh/preemptable` is true; else `""` (Volcano's GetPodRevocableZone)."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    if keys.REVOCABLE_ZONE_KEY in ann:
        return "*" if ann[keys.REVOCABLE_ZONE_KEY] == "*" else ""
    return "*" if keys.PREEMPTABLE_KEY in ann and _flag(ann[keys.PREEMPTABLE_KEY]) else ""


def job_preemptable(podgroup: Mapping[str, Any]) -> bool:
    """The PodGroup's `volcano.sh/preemptable` (annotation, then label); false when absent or malformed."""
    meta = podgroup.get("metadata") or {}
    for src in ("annotations", "labels"):
        values = meta.get(src) or {}
        if keys.PREEMPTABLE_KEY in values:
            return bool(_flag(values[keys.PREEMPTABLE_KEY]))
    return False


def _int_or_percent(value: str, total: int) -> int:
    """intstr: an integer as is, `N%` of `total` rounded up; anything else 0."""
    try:
        return int(value)
    except ValueError:
        pass
    if value.endswith("%"):
        try:
            return math.ceil(int(value[:-1]) * total / 100)
        except ValueError:
            return 0
    return 0


def max_evictions(annotations: Mapping[str, str], *, tasks: int, running: int, finished: int) -> int:
    """How many of a job's tasks may be evicted now (Volcano getMaxPodEvictNum): by `jdb-min-available` (running
    − min, when above it) or `jdb-max-unavailable` (max − those already not running); 1 without a budget. The
    min-available annotation is read first, as the JobInfo reads it."""
    if keys.JDB_MIN_AVAILABLE_KEY in annotations:
        min_available = _int_or_percent(str(annotations[keys.JDB_MIN_AVAILABLE_KEY]), tasks)
        return running - min_available if running >= min_available else 1
    if keys.JDB_MAX_UNAVAILABLE_KEY in annotations:
        max_unavailable = _int_or_percent(str(annotations[keys.JDB_MAX_UNAVAILABLE_KEY]), tasks)
        unavailable = tasks - finished - running
        return 0 if unavailable >= max_unavailable else max_unavailable - unavailable
    return 1


def _job_cap(job: Job) -> int:
    ann = (job.podgroup.get("metadata") or {}).get("annotations") or {}
    return max_evictions(ann, tasks=len(job.tasks), running=job.count(TaskStatus.RUNNING),
                         finished=job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED))


def capped(jobs: Mapping[str, Job], candidates: Iterable[Task]) -> list[Task]:
    """Candidates grouped by job (first-seen order), each group cut to its job's budget; unknown jobs dropped."""
    by_job: dict[str, list[Task]] = {}
    for t in candidates:
        by_job.setdefault(t.job, []).append(t)
    out: list[Task] = []
    for uid, tasks in by_job.items():
        job = jobs.get(uid)
        if job is not None:
            out.extend(tasks[:max(0, min(_job_cap(job), len(tasks)))])
    return out


def _zones(arguments: Mapping[str, Any]) -> dict[str, str]:
    return {k.replace(ZONE_PREFIX, "", 1): str(v) for k, v in arguments.items()
            if isinstance(k, str) and ZONE_PREFIX in k}


def _period(arguments: Mapping[str, Any]) -> float:
    try:
        return durations.parse(str(arguments[EVICT_PERIOD]))
    except (KeyError, ValueError):
        return 60.0


def _time(text: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


class Tdm:
    name = "tdm"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.zones = _zones(self.arguments)
        self.evict_period = _period(self.arguments)
        self.now = dt.datetime.now(dt.UTC)
        self._ssn: Session | None = None
        self.node_zones: list[str] = []
        self._zone_errors: dict[str, str | None] = {}
        self._filters: dict[bool, NodeFilter] = {}
        self._open_scores = np.zeros(0)
        self._job_flags: dict[str, tuple[Mapping[str, Any], bool]] = {}  # job uid → (its PodGroup, preemptable)

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self.now = _time(ssn.timestamp)
        self.node_zones = [n.labels.get(keys.REVOCABLE_ZONE_KEY, "") for n in ssn.nodes]
        self._zone_errors = {z: zone_error(self.zones, z, self.now) for z in set(self.node_zones) if z}
        self._filters = {}
        self._open_scores = np.array([MAX_NODE_SCORE if z and self._zone_errors[z] is None else 0.0
                                      for z in self.node_zones], dtype=np.float64)

    def on_session_close(self, ssn: Session) -> None:
        self._ssn = None

    def _filter(self, revocable: bool) -> NodeFilter:
        """The answer for every task of one kind (it depends on nothing else), built once per session."""
        f = self._filters.get(revocable)
        if f is None:
            reasons = np.array([None if not z else (self._zone_errors[z] or (None if revocable else NOT_ALLOWED))
                                for z in self.node_zones], dtype=object)
            feasible = np.array([r is None for r in reasons], dtype=bool)
            f = self._filters[revocable] = NodeFilter(feasible, reasons, ~feasible, all_feasible=bool(feasible.all()))
        return f

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        return self._filter(task_revocable_zone(task.pod) != "")

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """The open revocable zones' scores (fixed when the session opens) or zero."""
        return REUSE_STATIC, bool(task_revocable_zone(task.pod)) and bool(self._open_scores.any())

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        if not task_revocable_zone(task.pod):
            return np.zeros(len(candidates))
        return self._open_scores[candidates]

    def _zone_of(self, node_name: str) -> str | None:
        assert self._ssn is not None
        row = self._ssn.arrays.index.get(node_name) if node_name else None
        return None if row is None else self.node_zones[row]

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        """Preemptable and revocable preemptors get no victims; the others, preemptable Running tasks on
        ordinary nodes within each job's budget."""
        assert self._ssn is not None
        if preemptor.preemptable or task_revocable_zone(preemptor.pod):
            return []
        return capped(self._ssn.jobs, (t for t in preemptees if t.preemptable and t.status is TaskStatus.RUNNING
                                       and self._zone_of(t.node_name) == ""))

    def job_order(self, left: Job, right: Job) -> int:
        lp, rp = self._preemptable(left), self._preemptable(right)
        return 0 if lp == rp else (1 if lp else -1)

    def _preemptable(self, job: Job) -> bool:
        """`job_preemptable` of the job's PodGroup, read once per PodGroup object (job order asks it per compare)."""
        got = self._job_flags.get(job.uid)
        if got is None or got[0] is not job.podgroup:
            got = self._job_flags[job.uid] = (job.podgroup, job_preemptable(job.podgroup))
        return got[1]

    def job_pipelined(self, job: Job) -> Vote:
        return Vote.PERMIT if job.is_pipelined() else Vote.REJECT

    def job_starving(self, job: Job) -> bool:
        return not job_preemptable(job.podgroup) and job.count(TaskStatus.PENDING) > 0

    def victim_tasks(self, tasks: list[Task]) -> list[Task]:
        """shuffle's VictimTasks hook: the preemptable Running tasks on revocable nodes whose window is closed, per
        job within its budget; nothing when the last search was less than `tdm.evict.period` ago (the time is kept
        across sessions). Like upstream it looks at the nodes, not at `tasks` (every running task)."""
        assert self._ssn is not None
        ssn = self._ssn
        last: dict[str, dt.datetime] = ssn.shared_state((self.name, "last-evict"), dict)
        now = _time(ssn.timestamp)
        at = last.get("at")
        if at is not None and at + dt.timedelta(seconds=self.evict_period) > now:
            return []
        victims: list[Task] = []
        for zone in self.zones:
            if zone_error(self.zones, zone, now) is None:
                continue
            victims.extend(capped(ssn.jobs, _running_preemptable(ssn.nodes, zone)))
        last["at"] = now
        return victims


def _running_preemptable(nodes: Sequence[Any], zone: str) -> Iterable[Task]:
    for n in nodes:
        if n.labels.get(keys.REVOCABLE_ZONE_KEY, "") != zone:
            continue
        for t in n.tasks.values():
            if t.preemptable and t.status is TaskStatus.RUNNING:
                yield t
