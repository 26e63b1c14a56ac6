"""enqueue: move Pending PodGroups to Inqueue while their queue has room (JobEnqueueable), one job per queue per
turn; Inqueue is what lets the job controller create the pods (spec §5.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.scheduler.actions._util import PriorityQueue
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Queue

__all__ = ["Enqueue"]


class Enqueue:
    name = "enqueue"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        queues: PriorityQueue[Queue] = PriorityQueue(ssn.queue_order)
        seen: set[str] = set()
        jobs: dict[str, PriorityQueue[Job]] = {}
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if queue.uid not in seen:
                seen.add(queue.uid)
                queues.push(queue)
            if job.phase in ("", "Pending"):  # job.is_pending(), inline: this loop sees every job of the cluster
                jobs.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        while not queues.empty():
            queue = queues.pop()
            pending = jobs.get(queue.uid)
            if pending is None or pending.empty():
                continue
            job = pending.pop()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = "Inqueue"
            queues.push(queue)
