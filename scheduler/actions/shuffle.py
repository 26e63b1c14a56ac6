"""shuffle: evict the running tasks that plugins name as victims (Volcano's `actions/shuffle`), so that allocate can
place them again, elsewhere, in a later session.

The victims come from the VictimTasks hook (rescheduling's strategies, tdm's closed revocable windows), then pass
the VictimFilter hook (pdb's budgets, cdp's cooldown). Then the pure `choose` keeps each job at or above its
minAvailable and caps the evictions of one session at the action's `maxEvictions` (default 10; 0 or less: no cap).
Each eviction gets a Normal `Evict` Event on the victim's PodGroup that names the pod, its node and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task, TaskStatus

__all__ = ["DEFAULT_MAX_EVICTIONS", "Proposal", "Shuffle", "choose", "max_evictions"]

DEFAULT_MAX_EVICTIONS = 10


@dataclass(frozen=True, slots=True)
class Proposal:
    """One victim as `choose` sees it: the task's uid, its job, and the job's ready count and minAvailable."""

    uid: str
    job: str
    ready: int
    min_available: int


def choose(proposals: Sequence[Proposal], *, limit: int) -> list[str]:
    """The uids to evict, in proposal order: a victim whose eviction would leave its job below minAvailable is
    skipped (the job's later victims too, as its count does not go down); at most `limit` (≤ 0: all)."""
    left: dict[str, int] = {}
    out: list[str] = []
    for p in proposals:
        if 0 < limit <= len(out):
            break
        n = left.setdefault(p.job, p.ready)
        if n - 1 < p.min_available:
            continue
        left[p.job] = n - 1
        out.append(p.uid)
    return out


def max_evictions(arguments: Mapping[str, Any]) -> int:
    """The `maxEvictions` argument: an integer (a float or a string of digits is read as one); anything else, or
    absent, is the default."""
    value = arguments.get("maxEvictions", DEFAULT_MAX_EVICTIONS)
    if isinstance(value, bool):
        return DEFAULT_MAX_EVICTIONS
    try:
        return int(value)
    except (TypeError, ValueError):
        return DEFAULT_MAX_EVICTIONS


class Shuffle:
    name = "shuffle"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.limit = max_evictions(self.arguments)

    def execute(self, ssn: Session) -> None:
        running = [t for job in ssn.jobs.values() for t in job.tasks.values() if t.status is TaskStatus.RUNNING]
        if not running or not ssn.has_hook("victim_tasks"):
            return
        proposed = ssn.victim_tasks(running)
        if not proposed:
            return
        why = {t.uid: reason for t, reason in proposed}
        allowed = ssn.victim_filter([t for t, _ in proposed])
        proposals = []
        for t in allowed:
            job = ssn.jobs.get(t.job)
            if job is not None:
                proposals.append(Proposal(t.uid, t.job, job.ready_task_num(), job.min_available))
        chosen = set(choose(proposals, limit=self.limit))
        victims: list[Task] = [t for t in allowed if t.uid in chosen]
        stmt = ssn.statement()
        for t in victims:
            stmt.evict(t, self.name)
        stmt.commit()
        for t in victims:
            ssn.record_podgroup_event(ssn.jobs[t.job], "Normal", "Evict",
                                      f"{self.name}: pod {t.namespace}/{t.name} evicted from node {t.node_name}: "
                                      f"{why[t.uid]}")
