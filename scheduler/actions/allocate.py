"""allocate: place pending tasks queue by queue, job by job; a job's statement is committed only when the gang is
ready, kept (not committed) when only pipelined, else discarded (spec §5.3). A job with a networkTopology goes
through `_network.allocate_job` (one HyperNode for the whole gang); one with a subGroupPolicy through
`_subgroups.allocate_job` (each subgroup whole under its own HyperNode, minSubGroups per policy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.actions import _network, _subgroups
from lahar.scheduler.actions._util import PriorityQueue
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import FitErrors, Job, Queue, Task, TaskStatus
from lahar.scheduler.framework.statement import Statement

__all__ = ["Allocate"]


class Allocate:
    name = "allocate"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.predicate_error_cache = bool(args.get("predicateErrorCacheEnable", True))

    def execute(self, ssn: Session) -> None:
        enqueue_enabled = "enqueue" in ssn.conf.actions
        queues: PriorityQueue[Queue] = PriorityQueue(ssn.queue_order)
        jobs_by_queue: dict[str, PriorityQueue[Job]] = {}
        pending_status = TaskStatus.PENDING
        for job in ssn.jobs.values():
            if job.phase in ("", "Pending"):  # job.is_pending(), inline: this loop sees every job of the cluster
                if enqueue_enabled:
                    continue
                job.phase = "Inqueue"
            waiting = job.index.get(pending_status)
            if not waiting or len(waiting) <= job.best_effort_pending:
                continue  # nothing for allocate (BestEffort tasks are backfill's)
            if ssn.job_valid(job) is not None:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order)
                queues.push(queue)
            jobs_by_queue[job.queue].push(job)

        pending: dict[str, list[Task]] = {}
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = jobs_by_queue.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            tasks = pending.get(job.uid)
            if tasks is None:
                tasks = [t for t in job.index.get(TaskStatus.PENDING, {}).values()
                         if not t.sch_gated and not t.best_effort]
                tasks.sort(key=ssn.task_key(), reverse=True)  # pop() from the end = first in task order
                pending[job.uid] = tasks
            if not tasks:
                queues.push(queue)
                continue
            if self._cannot_be_ready(ssn, job, tasks):
                tasks.clear()  # no node arrangement can make this gang ready now: skip it this session
                queues.push(queue)
                continue
            constraint = _network.constraint_of(ssn, job)
            policies = _subgroups.policies_of(ssn, job)
            if policies:
                stmt = _subgroups.allocate_job(self, ssn, job, tasks, queue, constraint, policies)
            elif constraint is None:
                stmt = self._allocate_tasks(ssn, tasks, job, queue)
            else:
                stmt = _network.allocate_job(self, ssn, job, tasks, queue, constraint)
            if tasks:
                jobs.push(job)
            if stmt is not None:
                stmt.commit()
                if constraint is not None or policies:
                    _network.record(ssn, job)
            queues.push(queue)

    @staticmethod
    def _cannot_be_ready(ssn: Session, job: Job, tasks: list[Task]) -> bool:
        """A necessary condition, checked in one vector pass per distinct request: even if every pending task took
        the free (or being freed) slots that fit its request, the gang would stay below minAvailable. Trying would
        only end in a discard; on a full cluster this turns a backlog of gangs from O(tasks·nodes) into O(jobs)."""
        need = job.min_available - job.ready_task_num() - job.waiting_task_num() - job.best_effort_pending
        if need <= 0 or not len(ssn.arrays):
            return False
        arrays = ssn.arrays
        groups: dict[bytes, list[Task]] = {}
        for t in tasks:
            groups.setdefault(t.init_resreq.tobytes(), []).append(t)
        slots = ssn.state(_SLOTS, lambda: RowCache(arrays, lambda req, rows: _slots(arrays, req, rows)))
        possible = 0
        for key, members in groups.items():
            possible += min(len(members), int(slots.get(key, members[0].init_resreq).sum()))
            if possible >= need:
                return False
        if not job.fit_errors:
            first = tasks[-1]
            _, errors = ssn.predicate_nodes(first)
            job.fit_errors[first.uid] = errors or _exhausted(
                ssn, first, f"only {possible} of the {need} more tasks the gang needs fit in free resources")
        return True

    def _allocate_tasks(self, ssn: Session, tasks: list[Task], job: Job, queue: Queue) -> Statement | None:
        stmt = self.place_tasks(ssn, tasks, job, queue)
        if ssn.job_ready(job):
            return stmt
        if not ssn.job_pipelined(job):
            stmt.discard()
        return None

    def place_tasks(self, ssn: Session, tasks: list[Task], job: Job, queue: Queue,
                    mask: np.ndarray | None = None) -> Statement:
        """Pop tasks (in task order) and place each on its best node — among `mask`'s nodes when given — until the
        gang is ready or a task that fits nowhere ends it; the statement holds what was placed."""
        stmt = ssn.statement()
        arrays = ssn.arrays
        scored_among_candidates = not ssn.has_hook("best_node")  # else a plugin may pick a node of its own
        while tasks:
            task = tasks.pop()
            if not ssn.allocatable(queue, task):
                continue
            if self.predicate_error_cache and job.task_has_fit_errors(task):
                continue
            st = ssn.pre_predicate(task)
            if st is not None:
                job.fit_errors[task.uid] = FitErrors(len(arrays), error=st.message or st.reason)
                break
            feasible, errors = ssn.predicate_nodes(task)
            if mask is not None:
                feasible = feasible & mask
                if errors is None and not feasible.any():
                    errors = _network.errors_within(ssn, task, mask)
            if errors is not None:
                job.fit_errors[task.uid] = errors
                if job.need_continue_allocating():
                    continue
                break
            idle_is_future = arrays.future_is_idle()
            if idle_is_future:  # feasible already holds "fits idle" (future idle = idle)
                candidates = np.flatnonzero(feasible)
            else:
                idle_ok = feasible & ssn.fit_idle.get(task.init_resreq.tobytes(), task.init_resreq)
                candidates = np.flatnonzero(idle_ok)
                if len(candidates) == 0:
                    candidates = np.flatnonzero(feasible)
            node = ssn.best_node(task, candidates)
            if (idle_is_future and scored_among_candidates) or (task.init_resreq <= arrays.idle[node] + EPSILON).all():
                stmt.allocate(task, node)  # (a candidate fits idle: the first test is the second's known answer)
            elif (task.init_resreq <= arrays.future_idle_row(node) + EPSILON).all():
                stmt.pipeline(task, node)
            if tasks and ssn.job_ready(job):
                break
        return stmt


_SLOTS = "allocate:slots"  # Session.state key: per request, the tasks of it each node could still take


def _slots(arrays: NodeArrays, req: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Per node (or per row of `rows`), how many tasks requesting `req` fit its free (or being freed) resources and
    its free pod slots. Kept by a RowCache across the jobs of a session: a placement changes one row."""
    if rows is None:
        free, pods, max_pods = arrays.future_idle(), arrays.pods, arrays.max_pods
    else:
        free = arrays.idle[rows] + arrays.releasing[rows] - arrays.pipelined[rows]
        pods, max_pods = arrays.pods[rows], arrays.max_pods[rows]
    room = np.maximum(max_pods - pods, 0).astype(np.float64)
    dims = req > EPSILON
    slots = np.floor((free + EPSILON)[:, dims] / req[dims]).min(axis=1) if dims.any() else room
    return np.minimum(np.maximum(slots, 0), room)  # type: ignore[no-any-return]


def _exhausted(ssn: Session, task: Task, fallback: str) -> FitErrors:
    """Why `task` would find no node once the gang's fitting tasks took every free slot — what Volcano reports for
    the first task of the gang that fits nowhere: per node, the plugin that rejects it, else the resource (or the
    pod count) that runs out first. Node classes as kube-scheduler's FitError: "0/3 nodes are available: ..."."""
    arrays = ssn.arrays
    f = ssn.predicate(task)
    req = task.init_resreq
    dims = np.flatnonzero(req > EPSILON)
    free = arrays.future_idle() + EPSILON
    room = np.maximum(arrays.max_pods - arrays.pods, 0)
    out = FitErrors(total=len(arrays), error=fallback)
    names = ssn.resources.names
    feasible = np.asarray(f.feasible, dtype=bool)
    for i in np.flatnonzero(~feasible):  # one vector pass for the rest: this runs on 1,000-node clusters
        out.reasons[f.reasons[i] if f.reasons is not None and f.reasons[i] is not None
                    else "node(s) didn't match the predicates"] += 1
    rows = np.flatnonzero(feasible)
    if not len(rows):
        return out
    if not len(dims):
        out.reasons["Too many pods"] += len(rows)
        return out
    slots = free[np.ix_(rows, dims)] / req[dims]
    first = dims[np.argmin(slots, axis=1)]  # the first resource that runs out, per node
    pods = room[rows] < np.floor(slots.min(axis=1))
    if pods.any():
        out.reasons["Too many pods"] += int(pods.sum())
    for k, c in zip(*np.unique(first[~pods], return_counts=True), strict=True):
        out.reasons[f"Insufficient {names[int(k)]}"] += int(c)
    return out
