"""backfill: place BestEffort tasks (no requests) of non-pending jobs on any node that passes the predicates,
immediately and without gang semantics (spec §5.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import FitErrors, Task, TaskStatus

__all__ = ["Backfill"]


class Backfill:
    name = "backfill"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def _pending(self, ssn: Session) -> list[Task]:
        queues: dict[str, list] = {}
        pipelined = TaskStatus.PIPELINED
        for job in ssn.jobs.values():
            if not job.best_effort_pending and not job.index.get(pipelined):
                continue
            if job.is_pending() or ssn.job_valid(job) is not None or job.queue not in ssn.queues:
                continue
            for t in job.with_status(TaskStatus.PIPELINED):
                if t.best_effort:
                    ssn.unplace(t)
            tasks = [t for t in job.index.get(TaskStatus.PENDING, {}).values() if t.best_effort and not t.sch_gated]
            if tasks:
                tasks.sort(key=ssn.task_key())
                queues.setdefault(job.queue, []).append((job, tasks))
        out: list[Task] = []
        qkey = _cmp_key(ssn.queue_order)
        jkey = _cmp_key(ssn.job_order)
        for qname in sorted(queues, key=lambda q: qkey(ssn.queues[q])):
            for _, tasks in sorted(queues[qname], key=lambda jt: jkey(jt[0])):
                out.extend(tasks)
        return out

    def execute(self, ssn: Session) -> None:
        for task in self._pending(ssn):
            job = ssn.jobs[task.job]
            st = ssn.pre_predicate(task)
            if st is not None:
                job.fit_errors[task.uid] = FitErrors(len(ssn.arrays), error=st.message or st.reason)
                continue
            feasible, errors = ssn.predicate_nodes(task)
            if errors is not None:
                job.fit_errors[task.uid] = errors
                continue
            ssn.allocate(task, ssn.best_node(task, np.flatnonzero(feasible)))


def _cmp_key(less):  # noqa: ANN001, ANN202
    import functools
    return functools.cmp_to_key(lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0))
