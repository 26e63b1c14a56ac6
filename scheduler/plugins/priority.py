"""priority: order tasks by pod priority and jobs by PodGroup priorityClass; lower-priority jobs are victims.

Volcano's `plugins/priority` (spec §5.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Task

__all__ = ["Priority"]


def _desc(a: int, b: int) -> int:
    return -1 if a > b else (1 if a < b else 0)


class Priority:
    name = "priority"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn

    def task_order(self, left: Task, right: Task) -> int:
        return _desc(left.priority, right.priority)

    def job_order(self, left: Job, right: Job) -> int:
        return _desc(left.priority, right.priority)

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        assert self.ssn is not None
        pjob = self.ssn.jobs[preemptor.job]
        victims = []
        for t in preemptees:
            job = self.ssn.jobs.get(t.job)
            if job is None:
                continue
            if job.uid != pjob.uid:
                if job.priority < pjob.priority:
                    victims.append(t)
            elif t.priority < preemptor.priority:
                victims.append(t)
        return victims

    def job_starving(self, job: Job) -> bool:
        """Elastic jobs keep asking until every replica runs."""
        return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)
