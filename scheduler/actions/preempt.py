"""preempt: inside one queue, starving jobs evict lower-priority tasks of other jobs (then, tasks of their own job)
and pipeline onto the freed resources; committed only when the preemptor's whole gang is pipelined (spec §5.3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lahar.scheduler.actions._util import (
    PriorityQueue,
    fits,
    gang_floor,
    pipeline_without_eviction,
    preempt_candidate_nodes,
    victims_order,
)
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Queue, Task, TaskStatus
from lahar.scheduler.framework.statement import Statement

__all__ = ["Preempt", "preempt_task"]

PREEMPTABLE_STATUS = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


def preempt_task(ssn: Session, stmt: Statement, preemptor: Task, keep: Callable[[Task], bool]) -> bool:
    """Pipeline `preemptor` where it fits without evicting anything; else evict victims on the best node where that
    makes it fit, then pipeline it there. A task whose `preemptionPolicy` is Never evicts nothing (Volcano's
    taskEligibleToPreempt) but is still placed where it fits as it is."""
    if ssn.pre_predicate(preemptor) is not None:
        return False
    job = ssn.jobs[preemptor.job]
    queue = ssn.queues[job.queue]
    if pipeline_without_eviction(ssn, stmt, preemptor, queue):
        return True
    if preemptor.preemption_policy == "Never":
        return False
    arrays = ssn.arrays
    for node in preempt_candidate_nodes(ssn, preemptor):
        preemptees = sorted((t for t in ssn.nodes[node].tasks.values() if keep(t)), key=victims_order(ssn, preemptor))
        victims = gang_floor(ssn, "preemptable", ssn.preemptable(preemptor, preemptees))  # offered lowest first, so gang yields those
        if not victims:
            continue
        future = arrays.future_idle_row(node)
        for v in victims:
            future = future + v.resreq
        if not fits(preemptor.init_resreq, future):
            continue
        node_stmt = ssn.statement()  # this node's evictions only: undone if the preemptor does not land here
        for victim in sorted(victims, key=victims_order(ssn, preemptor)):
            if ssn.allocatable(queue, preemptor) and fits(preemptor.init_resreq, arrays.future_idle_row(node)):
                break
            node_stmt.evict(victim, "preempt")
        if ssn.allocatable(queue, preemptor) and fits(preemptor.init_resreq, arrays.future_idle_row(node)):
            node_stmt.pipeline(preemptor, node)
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False


class Preempt:
    name = "preempt"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        preemptors: dict[str, PriorityQueue[Job]] = {}
        tasks: dict[str, list[Task]] = {}
        under_request: list[Job] = []
        queues: dict[str, Queue] = {}
        key = ssn.task_key()
        for job in ssn.jobs.values():
            if job.is_pending() or ssn.job_valid(job) is not None:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            queues.setdefault(queue.uid, queue)
            if ssn.job_starving(job) and not (job.podgroup.get("spec") or {}).get("networkTopology"):
                # Volcano: a job with a networkTopology does not preempt (it would land outside its HyperNode)
                preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
                under_request.append(job)
                tasks[job.uid] = sorted((t for t in job.index.get(TaskStatus.PENDING, {}).values()
                                         if not t.sch_gated), key=key, reverse=True)

        for queue in sorted(queues.values(), key=lambda q: q.name):
            jobs = preemptors.get(queue.uid)
            while jobs is not None and not jobs.empty():
                pjob = jobs.pop()
                stmt = ssn.statement()
                assigned = False
                while ssn.job_starving(pjob) and tasks[pjob.uid]:
                    preemptor = tasks[pjob.uid].pop()

                    def other_job(t: Task, preemptor: Task = preemptor, pjob: Job = pjob) -> bool:
                        if t.status not in PREEMPTABLE_STATUS or not t.preemptable:
                            return False
                        if preemptor.best_effort and not t.best_effort:
                            return False
                        j = ssn.jobs.get(t.job)
                        return j is not None and j.queue == pjob.queue and t.job != preemptor.job

                    if preempt_task(ssn, stmt, preemptor, other_job):
                        assigned = True
                if ssn.job_pipelined(pjob) and stmt.evicts():
                    stmt.commit()
                else:  # not placed, or placed without evicting anything: allocate's business
                    stmt.discard()
                    continue
                if assigned:
                    jobs.push(pjob)

            for job in under_request:
                if job.queue != queue.uid:
                    continue
                own = sorted((t for t in job.index.get(TaskStatus.PENDING, {}).values() if not t.sch_gated),
                             key=key, reverse=True)
                stmt = ssn.statement()  # the whole job's own-task preemption: committed only if its gang is placed
                while own:
                    preemptor = own.pop()

                    def same_job(t: Task, preemptor: Task = preemptor) -> bool:
                        if t.status not in PREEMPTABLE_STATUS or not t.preemptable:
                            return False
                        if preemptor.best_effort and not t.best_effort:
                            return False
                        return t.job == preemptor.job

                    if not preempt_task(ssn, stmt, preemptor, same_job):
                        break
                if ssn.job_pipelined(job) and stmt.evicts():
                    stmt.commit()
                else:  # volcano#5011 commits what a lone task got; here the gang decides
                    stmt.discard()
