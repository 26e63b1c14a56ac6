"""reclaim: a starving job in a queue below its deserved share evicts running tasks of other, reclaimable queues
that are above theirs, and pipelines onto the freed resources (spec §5.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.scheduler.actions._util import fits, preempt_candidate_nodes, starving_by_queue, victims_order
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Queue, Task, TaskStatus
from lahar.scheduler.framework.statement import Statement

__all__ = ["Reclaim"]


class Reclaim:
    name = "reclaim"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        queues, preemptors, starving = starving_by_queue(ssn)
        key = ssn.task_key()
        tasks: dict[str, list[Task]] = {
            job.uid: sorted((t for t in job.index.get(TaskStatus.PENDING, {}).values() if not t.sch_gated),
                            key=key, reverse=True)
            for job in starving}

        statements: dict[str, Statement] = {}
        arrays = ssn.arrays
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = preemptors.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            pending = tasks.get(job.uid)
            if not pending or not ssn.job_starving(job):
                continue
            task = _next_preemptor(ssn, queue, pending)
            if task is None:
                continue
            stmt = statements.setdefault(job.uid, ssn.statement())
            assigned = False
            for node in preempt_candidate_nodes(ssn, task):
                reclaimees = []
                for t in ssn.nodes[node].tasks.values():
                    if t.status is not TaskStatus.RUNNING or t.best_effort or not t.preemptable:
                        continue
                    j = ssn.jobs.get(t.job)
                    if j is None or j.queue == job.queue:
                        continue
                    if not ssn.queues[j.queue].reclaimable:
                        continue
                    reclaimees.append(t)
                if not reclaimees:
                    continue
                reclaimees.sort(key=victims_order(ssn, task))
                victims = ssn.reclaimable(task, reclaimees)
                if not victims:
                    continue
                future = arrays.future_idle_row(node)
                for v in victims:
                    future = future + v.resreq
                if not fits(task.init_resreq, future):
                    continue
                for victim in victims:
                    if fits(task.init_resreq, arrays.future_idle_row(node)):
                        break
                    stmt.evict(victim, "reclaim")
                if fits(task.init_resreq, arrays.future_idle_row(node)):
                    stmt.pipeline(task, node)
                    assigned = True
                    break
            if ssn.job_pipelined(job):
                stmt.commit()
                statements.pop(job.uid, None)
            if assigned:
                jobs.push(job)
            queues.push(queue)
        for stmt in reversed(list(statements.values())):
            stmt.discard()


def _next_preemptor(ssn: Session, queue: Queue, pending: list[Task]) -> Task | None:
    """The job's next pending task that may reclaim: one with preemptionPolicy Never, one its queue may not reclaim
    for, or one that fails a pre-predicate is skipped and the next is tried (as Volcano does), not the whole job."""
    while pending:
        task = pending.pop()
        if task.preemption_policy == "Never" or not ssn.preemptive(queue, task):
            continue
        if ssn.pre_predicate(task) is not None:
            continue
        return task
    return None
