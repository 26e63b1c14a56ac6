"""gang: all-or-nothing for PodGroups — a job is valid, ready, pipelined or starving by its minMember (spec §5.4).

Writes the PodGroup `Unschedulable` / `Scheduled` conditions when the session closes.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from lahar.scheduler.framework.hooks import Code, Status, Vote
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Task, TaskStatus

__all__ = ["Gang", "Progress", "order_by_progress", "progress_of", "releasing_fills_gang"]

NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"


class Gang:
    name = "gang"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.ssn: Session | None = None
        # job uid → (the job, its version, its progress): job order compares jobs many times between two changes
        self._progress: dict[str, tuple[Job, int, Progress]] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self._progress = {}

    def progress(self, job: Job) -> Progress:
        """`progress_of(job)`, recomputed only when the job's tasks changed (`Job.version`) since last asked."""
        hit = self._progress.get(job.uid)
        if hit is not None and hit[0] is job and hit[1] == job.version:
            return hit[2]
        p = progress_of(job)
        self._progress[job.uid] = (job, job.version, p)
        return p

    def job_valid(self, job: Job) -> Status | None:
        if not job.check_task_valid():
            return Status(Code.UNSCHEDULABLE, NOT_ENOUGH_PODS_OF_TASK, self.name,
                          "Not enough valid pods of each task for gang-scheduling")
        valid = job.valid_task_num()
        if valid < job.min_available:
            return Status(Code.UNSCHEDULABLE, NOT_ENOUGH_TASKS, self.name,
                          f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}")
        return None

    def _victims(self, preemptees: list[Task]) -> list[Task]:
        """A job yields tasks only while its ready count stays above minAvailable."""
        assert self.ssn is not None
        occupied: dict[str, int] = {}
        victims = []
        for t in preemptees:
            job = self.ssn.jobs.get(t.job)
            if job is None:
                continue
            if t.job not in occupied:
                occupied[t.job] = job.ready_task_num()
            if occupied[t.job] > job.min_available:
                occupied[t.job] -= 1
                victims.append(t)
        return victims

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        return self._victims(preemptees)

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        return self._victims(reclaimees)

    def job_order(self, left: Job, right: Job) -> int:
        """Jobs not yet ready go first, and among them a stalled gang before one that never ran (`order_by_progress`)."""
        return order_by_progress(self.progress(left), self.progress(right))

    def job_ready(self, job: Job) -> bool:
        return job.check_task_ready() and job.is_ready()

    def job_pipelined(self, job: Job) -> Vote:
        return Vote.PERMIT if job.check_task_pipelined() and job.is_pipelined() else Vote.REJECT

    def job_starving(self, job: Job) -> bool:
        return job.is_starving()

    def on_session_close(self, ssn: Session) -> None:
        for job in ssn.closing:  # settled jobs keep the conditions they were closed with (Session.close)
            if not job.is_ready():
                if releasing_fills_gang(job):
                    continue
                schedulable = job.ready_task_num() + job.count(TaskStatus.PIPELINED)
                unready = job.min_available - schedulable
                msg = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {job.fit_error(counts=False)}"
                job.job_fit_error = msg
                ssn.update_podgroup_condition(job, {
                    "type": "Unschedulable", "status": "True", "lastTransitionTime": ssn.now(),
                    "transitionID": ssn.uid, "reason": NOT_ENOUGH_RESOURCES, "message": msg,
                })
            else:
                ssn.update_podgroup_condition(job, {
                    "type": "Scheduled", "status": "True", "lastTransitionTime": ssn.now(),
                    "transitionID": ssn.uid, "reason": "tasks in gang are ready to be scheduled", "message": "",
                })


class Progress(enum.IntEnum):
    """Where a gang stands, in the order gang's job order serves them."""

    STALLED = 0  # some pods run from earlier sessions, but fewer than minAvailable (it lost pods)
    WAITING = 1  # not ready and nothing of it runs yet
    READY = 2


_RUNS = (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING)


def progress_of(job: Job) -> Progress:
    if job.is_ready():
        return Progress.READY
    return Progress.STALLED if job.count(*_RUNS) else Progress.WAITING


def order_by_progress(left: Progress, right: Progress) -> int:
    """-1 when `left` goes first. A gang that runs below minAvailable (a node under it died, volcano#5805) gets freed
    capacity before a gang of the same queue and priority that never ran, whatever drf's share says: its running
    pods hold resources for nothing until it is whole again. Ready jobs go last, as in Volcano."""
    return (left > right) - (left < right)


_SCHEDULED = (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED)


def releasing_fills_gang(job: Job) -> bool:
    """A gang short of minMember only because some of its pods are terminating on their nodes (they still hold
    their slots), with nothing pending or pipelined, gets no Unschedulable condition (Volcano's
    shouldSkipUnschedulableForReleasing); releasing pods that never reached a node do not count."""
    releasing = sum(1 for t in job.index.get(TaskStatus.RELEASING, {}).values() if t.node_name)
    if releasing == 0 or job.count(TaskStatus.PENDING, TaskStatus.PIPELINED):
        return False
    return job.count(*_SCHEDULED) + releasing >= job.min_available
