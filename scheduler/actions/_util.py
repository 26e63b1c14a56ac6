"""Shared pieces of the actions: ordered pops over changing priorities, victim ordering, preempt predicates."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np

from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Queue, Task
from lahar.scheduler.framework.statement import Statement

__all__ = ["PriorityQueue", "fits", "gang_floor", "pipeline_without_eviction", "preempt_candidate_nodes",
           "starving_by_queue", "victims_order"]

T = TypeVar("T")


def starving_by_queue(ssn: Session) -> tuple[PriorityQueue[Queue], dict[str, PriorityQueue[Job]], list[Job]]:
    """Volcano's preemptor collection of reclaim (and gangpreempt / gangreclaim): the queues of every valid,
    non-pending job in queue order; each queue's starving jobs in job order; and those jobs in session order."""
    queues: PriorityQueue[Queue] = PriorityQueue(ssn.queue_order)
    seen: set[str] = set()
    preemptors: dict[str, PriorityQueue[Job]] = {}
    starving: list[Job] = []
    for job in ssn.jobs.values():
        if job.is_pending() or ssn.job_valid(job) is not None:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.uid not in seen:
            seen.add(queue.uid)
            queues.push(queue)
        if ssn.job_starving(job):
            preemptors.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
            starving.append(job)
    return queues, preemptors, starving


class PriorityQueue(Generic[T]):
    """Volcano's util.PriorityQueue: a heap ordered by a `less(a, b)` function (evaluated at push/pop time)."""

    __slots__ = ("_heap", "_less", "_n")

    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = ()) -> None:
        self._less = less
        self._heap: list[_Item[T]] = []
        self._n = 0
        for it in items:
            self.push(it)

    def push(self, item: T) -> None:
        self._n += 1
        heapq.heappush(self._heap, _Item(item, self._less, self._n))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def empty(self) -> bool:
        return not self._heap

    def __len__(self) -> int:
        return len(self._heap)


class _Item(Generic[T]):
    __slots__ = ("item", "less", "seq")

    def __init__(self, item: T, less: Callable[[T, T], bool], seq: int) -> None:
        self.item = item
        self.less = less
        self.seq = seq

    def __lt__(self, other: _Item[T]) -> bool:
        if self.less(self.item, other.item):
            return True
        if self.less(other.item, self.item):
            return False
        return self.seq < other.seq


def fits(request: np.ndarray, available: np.ndarray) -> bool:
    return bool(np.all(request <= available + EPSILON))


def victims_order(ssn: Session, preemptor: Task) -> Callable[[Task], Any]:
    """BuildVictimsPriorityQueue: the lowest-ordered victim first (reverse task order within a job, else reverse
    job order)."""
    def cmp(a: Task, b: Task) -> int:
        if a.job == b.job:
            return -1 if ssn.task_order(b, a) else (1 if ssn.task_order(a, b) else 0)
        ja, jb = ssn.jobs[a.job], ssn.jobs[b.job]
        return -1 if ssn.job_order(jb, ja) else (1 if ssn.job_order(ja, jb) else 0)
    return functools.cmp_to_key(cmp)


def preempt_candidate_nodes(ssn: Session, task: Task) -> list[int]:
    """Nodes whose predicate failures (if any) are resolvable by evicting pods, best score first."""
    f = ssn.predicate(task)
    ok = f.feasible | ~(f.unresolvable if f.unresolvable is not None else np.zeros_like(f.feasible))
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return []
    scores = ssn.node_scores(task, idx)
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in idx[order]]


def pipeline_without_eviction(ssn: Session, stmt: Statement, task: Task, queue: Queue) -> bool:
    """Pipeline `task` on the best node where it already fits (future idle, a pod slot and every predicate), evicting
    nothing.

    A gang member that needs no victim is placed by preempt / reclaim with the members that do, so the gang can
    reach minAvailable in that statement (volcano#5131: Volcano skips such a task as "already schedulable", which
    caps the gang at N-1 and discards every eviction, session after session)."""
    if not ssn.allocatable(queue, task):
        return False
    feasible, _ = ssn.predicate_nodes(task)
    arrays = ssn.arrays
    idx = np.flatnonzero(feasible & (arrays.pods < arrays.max_pods))  # a free pod slot too, as allocate asks
    if len(idx) == 0:
        return False
    stmt.pipeline(task, ssn.best_node(task, idx))
    return True


def gang_floor(ssn: Session, hook: str, victims: list[Task]) -> list[Task]:
    """The victims, in their order, that leave each victim job at or above its minAvailable, when gang votes on
    `hook` (preemptable / reclaimable; a conf may switch that vote off). The victim votes let a later tier decide
    when an earlier one names nobody (Volcano's rule), so with priority and gang in tier 1 and drf or proportion in
    tier 2 the later tier could take a gang below its minAvailable; here task-level preempt and reclaim never break
    a gang, whichever tier chose (gangpreempt and gangreclaim evict whole gangs)."""
    if not any(p.name == "gang" for p in ssn.hooked(hook)):
        return victims
    left: dict[str, int] = {}
    out = []
    for t in victims:
        job = ssn.jobs.get(t.job)
        if job is None:
            continue
        n = left.setdefault(t.job, job.ready_task_num())
        if n > job.min_available:
            left[t.job] = n - 1
            out.append(t)
    return out
