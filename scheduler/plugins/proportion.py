"""proportion: share the cluster between queues by weight (iterative water-filling, capped by capability and
request, floored at guarantee); order, limit, admit and reclaim by that `deserved` share (spec §5.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import MetricsSink, QueueReport, Vote
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Job, Queue, Task, TaskStatus, sum_by_queue

__all__ = ["Proportion", "QueueAttr", "water_fill"]


@dataclass
class QueueAttr:
    name: str
    weight: int
    deserved: np.ndarray
    allocated: np.ndarray
    request: np.ndarray
    elastic: np.ndarray
    inqueue: np.ndarray
    guarantee: np.ndarray
    real_capability: np.ndarray
    share: float = 0.0

    def update_share(self) -> None:
        """max over dimensions of allocated / deserved (0/0 = 0, x/0 = 1)."""
        share = 0.0
        for a, d in zip(self.allocated.tolist(), self.deserved.tolist(), strict=True):  # floats: no numpy scalars
            s = (0.0 if a == 0 else 1.0) if d == 0 else a / d
            share = max(share, s)
        self.share = share


def _le(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b + EPSILON))


def _le_dims(a: np.ndarray, b: np.ndarray, dims: np.ndarray) -> bool:
    """LessEqualWithDimension: compare only the dimensions `dims` asks for."""
    # in Python floats over the few dimensions (the same IEEE comparisons): this runs once per task placed
    return all(x <= y + EPSILON for x, y, m in zip(a.tolist(), b.tolist(), dims.tolist(), strict=True)
               if m > EPSILON)


def water_fill(total: np.ndarray, attrs: list[QueueAttr]) -> None:
    """Volcano's deserved loop: each round hands out the remainder by weight to the queues not yet met."""
    remaining = total.copy()
    meet: set[str] = set()
    while True:
        total_weight = sum(a.weight for a in attrs if a.name not in meet)
        if total_weight == 0:
            break
        old_remaining = remaining.copy()
        increased = np.zeros_like(total)
        decreased = np.zeros_like(total)
        for a in attrs:
            if a.name in meet:
                continue
            old = a.deserved.copy()
            a.deserved = a.deserved + remaining * (a.weight / total_weight)
            a.deserved = np.minimum(a.deserved, a.real_capability)
            a.deserved = np.minimum(a.deserved, a.request)
            if _le(a.request, a.deserved) or np.array_equal(a.deserved, old):
                meet.add(a.name)
            a.deserved = np.maximum(a.deserved, a.guarantee)
            a.update_share()
            increased += np.maximum(a.deserved - old, 0.0)
            decreased += np.maximum(old - a.deserved, 0.0)
        remaining = remaining - increased + decreased
        if bool(np.all(remaining < EPSILON)) or np.array_equal(remaining, old_remaining):
            break


class Proportion:
    name = "proportion"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.ssn: Session | None = None
        self.attrs: dict[str, QueueAttr] = {}

    def report_metrics(self, sink: MetricsSink) -> None:
        for name, a in self.attrs.items():
            sink.queue(name, QueueReport(allocated=a.allocated, request=a.request, deserved=a.deserved,
                                         real_capacity=a.real_capability, inqueue=a.inqueue, share=a.share))

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.attrs = {}
        total = ssn.total.copy()
        total_guarantee = ssn.resources.zeros()
        for q in ssn.queues.values():
            total_guarantee += q.guarantee
        zeros = ssn.resources.zeros
        jobs = list(ssn.jobs.values())
        for name in dict.fromkeys(job.queue for job in jobs):  # queues with jobs, in order of their first job
            q = ssn.queues[name]
            cap = q.capability.copy()
            if cap[0] <= 0:
                cap[0] = np.inf
            if cap[1] <= 0:
                cap[1] = np.inf
            real = np.minimum(total - total_guarantee + q.guarantee, cap)
            self.attrs[name] = QueueAttr(q.name, q.weight, zeros(), zeros(), zeros(), zeros(), zeros(),
                                         q.guarantee.copy(), real)
        if jobs:
            self._sum_jobs(ssn, jobs)
        water_fill(total, list(self.attrs.values()))

    def _sum_jobs(self, ssn: Session, jobs: list[Job]) -> None:
        """Each queue's allocated, request, inqueue and elastic resources over its jobs, in one vector pass: only
        jobs with pending tasks or minResources need a look of their own."""
        width = len(ssn.resources)
        pending = TaskStatus.PENDING
        # per job: allocated | request (allocated + pending requests) | inqueue | elastic (allocated without
        # minResources)
        rows = np.tile(np.concatenate([job.allocated for job in jobs]).reshape(len(jobs), width), 4)
        rows[:, 2 * width:3 * width] = 0.0
        for i in [i for i, job in enumerate(jobs) if job.min_resources is not None or pending in job.index]:
            job = jobs[i]
            for t in job.index.get(pending, {}).values():
                rows[i, width:2 * width] += t.resreq
            if job.min_resources is None:
                continue
            if job.phase == "Inqueue":  # its bound tasks are in allocated already: reserve only the rest
                rows[i, 2 * width:3 * width] += np.maximum(job.min_resources - job.allocated, 0.0)
            if job.phase == "Running" and job.count(*ALLOCATED) >= job.min_available:
                rows[i, 2 * width:3 * width] += np.maximum(job.min_resources - job.allocated, 0.0)
            rows[i, 3 * width:] = job.elastic_resources()
        sums = sum_by_queue(jobs, list(self.attrs), 4 * width, rows)
        for k, attr in enumerate(self.attrs.values()):
            attr.allocated, attr.request, attr.inqueue, attr.elastic = (v.copy() for v in np.split(sums[k], 4))

    def _attr(self, queue: Queue) -> QueueAttr | None:
        return self.attrs.get(queue.uid)

    def queue_order(self, left: Queue, right: Queue) -> int:
        """Higher spec.priority first, then the lower share of deserved."""
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self._attr(left), self._attr(right)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        """Victims come from queues holding more than they deserve, until they no longer do."""
        assert self.ssn is not None
        victims = []
        allocations: dict[str, np.ndarray] = {}
        for t in reclaimees:
            job = self.ssn.jobs[t.job]
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            allocated = allocations.setdefault(job.queue, attr.allocated.copy())
            if np.any(allocated < reclaimer.resreq - EPSILON):
                continue
            if not _le(allocated, attr.deserved):
                allocated -= t.resreq
                victims.append(t)
        return victims

    def overused(self, queue: Queue) -> bool:
        attr = self._attr(queue)
        return attr is not None and _le(attr.deserved, attr.allocated)

    def _within_deserved(self, queue: Queue, task: Task) -> bool:
        attr = self._attr(queue)
        if attr is None:
            return True
        return _le_dims(attr.allocated + task.resreq, attr.deserved, task.resreq)

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return queue.state == "Open" and self._within_deserved(queue, task)

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return self._within_deserved(queue, task)

    def job_enqueueable(self, job: Job) -> Vote:
        assert self.ssn is not None
        queue = self.ssn.queues[job.queue]
        if queue.state != "Open":
            return Vote.REJECT
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return Vote.PERMIT
        need = job.min_resources + attr.allocated + attr.inqueue - attr.elastic
        if _le_dims(need, attr.real_capability, job.min_resources):
            return Vote.PERMIT
        self.ssn.record_podgroup_event(job, "Normal", "Unschedulable", "queue resource quota insufficient")
        return Vote.REJECT

    def job_enqueued(self, job: Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.inqueue += job.min_resources

    def on_allocate(self, task: Task) -> None:
        self._book(task, +1)

    def on_deallocate(self, task: Task) -> None:
        self._book(task, -1)

    def _book(self, task: Task, sign: int) -> None:
        assert self.ssn is not None
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return
        attr = self.attrs.get(job.queue)
        if attr is not None:
            if sign > 0:  # the same sums as `+= sign * resreq`, without the product array
                attr.allocated += task.resreq
            else:
                attr.allocated -= task.resreq
            attr.update_share()
