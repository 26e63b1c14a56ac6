"""reclaim: a starving job in a queue below its deserved share evicts running tasks of other, reclaimable queues
that are above theirs, and pipelines onto the freed resources (spec §5.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.scheduler.actions._util import (
    fits,
    gang_floor,
    pipeline_without_eviction,
    preempt_candidate_nodes,
    starving_by_queue,
    victims_order,
)
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Queue, Task, TaskStatus
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

        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = preemptors.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            pending = tasks.get(job.uid)
            if pending and ssn.job_starving(job):
                self._reclaim_for_job(ssn, queue, job, pending)
            queues.push(queue)

    def _reclaim_for_job(self, ssn: Session, queue: Queue, job: Job, pending: list[Task]) -> None:
        """One statement for the job's gang: reclaim task by task until it is no longer starving, then commit if
        its gang is pipelined, else discard (no eviction is left behind for a gang that does not land). Volcano
        keeps each job's statement open across the other queues' turns, so a later job could pipeline onto
        evictions that are then discarded; here a job's statement is settled before the next job's begins."""
        stmt = ssn.statement()
        while pending and ssn.job_starving(job) and not ssn.overused(queue):
            task = pending.pop()
            if ssn.pre_predicate(task) is not None:
                continue
            if pipeline_without_eviction(ssn, stmt, task, queue):  # a member that fits as it is (volcano#5131)
                continue
            # one with preemptionPolicy Never, or one its queue may not reclaim for, is skipped and the next is
            # tried (as Volcano does), not the whole job
            if task.preemption_policy == "Never" or not ssn.preemptive(queue, task):
                continue
            if not _reclaim_for_task(ssn, stmt, job, task):
                break
        if ssn.job_pipelined(job) and stmt.evicts():
            stmt.commit()
        else:  # not placed, or placed without reclaiming anything: allocate's business
            stmt.discard()


def _reclaim_for_task(ssn: Session, stmt: Statement, job: Job, task: Task) -> bool:
    """Evict reclaimable tasks of other queues on the best node where that makes `task` fit, and pipeline it there;
    each node's evictions are their own statement, kept only if the task lands on that node (volcano#5067)."""
    arrays = ssn.arrays
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
        victims = gang_floor(ssn, "reclaimable", ssn.reclaimable(task, reclaimees))
        if not victims:
            continue
        future = arrays.future_idle_row(node)
        for v in victims:
            future = future + v.resreq
        if not fits(task.init_resreq, future):
            continue
        node_stmt = ssn.statement()
        for victim in victims:
            if fits(task.init_resreq, arrays.future_idle_row(node)):
                break
            node_stmt.evict(victim, "reclaim")
        if fits(task.init_resreq, arrays.future_idle_row(node)):
            node_stmt.pipeline(task, node)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False
