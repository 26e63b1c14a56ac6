"""The status writes a session's result asks for, computed purely: each closing job's PodGroup status (phase,
counts, conditions) and events, its pods' `PodScheduled=False` conditions, and each queue's `status.allocated` and
PodGroup counts per phase.

`Session.close` (framework/session.py) calls `close_job` per job it does not reuse and `queue_status` once;
`scheduler.commit` writes what changed. Volcano's jobStatus / UpdatePodGroupCondition / queue status rules, with
one rule of lahar's own: a status is written only when its meaning changes (volcano#3072, #3080). Conditions carry
no counts that change with the cluster's size; those go into the aggregated FailedScheduling Event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.scheduler.framework.nodes import EPSILON, ResourceIndex
from lahar.scheduler.framework.snapshot import ALLOCATED, TERMINATED, Job, Queue, TaskStatus, sum_by_queue

__all__ = ["PHASE_COUNTERS", "JobClose", "PodCondition", "PodGroupUpdate", "close_job", "job_status",
           "pod_condition_changed", "queue_allocated", "queue_counts_changed", "queue_status", "status_changed"]

# PodGroup phase → the Queue status counter (Volcano QueueStatus: pending, running, unknown, inqueue, completed).
PHASE_COUNTERS = {"Pending": "pending", "Running": "running", "Unknown": "unknown", "Inqueue": "inqueue",
                  "Completed": "completed"}


@dataclass(slots=True)
class PodGroupUpdate:
    """The PodGroup status a session computed; `changed` = differs from the stored one (ignoring times/ids)."""

    namespace: str
    name: str
    status: dict[str, Any]
    changed: bool
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


@dataclass(frozen=True, slots=True)
class PodCondition:
    """`PodScheduled=False` for a pod left pending (or pipelined, with its nominated node). `message` has no node
    counts; `event_message` (the FailedScheduling Event's) has them, as kube-scheduler's FitError text."""

    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    nominated_node: str = ""
    event_message: str = ""


@dataclass(slots=True)
class JobClose:
    """What closing one job asks to write. `reusable`: nothing was written and nothing came from this session
    alone, so the next session may reuse it while the job's inputs stay the same (see `Session.close`). Not frozen:
    one is made per closing job, and a frozen dataclass is several times slower to build."""

    update: PodGroupUpdate
    conditions: list[PodCondition]
    pipelined: dict[str, str]  # pod key → nominated node
    reusable: bool


def job_status(job: Job, old: Mapping[str, Any], session_uid: str) -> dict[str, Any]:
    """Volcano jobStatus(): the job's conditions of this session merged over the stored ones (same type replaced),
    the phase from the allocated counts and this session's Unschedulable condition, and the pod counts."""
    status = dict(old)
    if job.conditions:
        conditions = [dict(c) for c in old.get("conditions") or []]
        for ctype, cond in job.conditions.items():
            for i, c in enumerate(conditions):
                if c.get("type") == ctype:
                    conditions[i] = dict(cond)
                    break
            else:
                conditions.append(dict(cond))
        status["conditions"] = conditions
    unschedulable = False
    for c in status.get("conditions") or ():
        if c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("transitionID") == session_uid:
            unschedulable = True
            break
    running = job.count(TaskStatus.RUNNING)
    if running and unschedulable:
        status["phase"] = "Unknown"
    else:
        terminated = job.count(*TERMINATED)
        allocated = job.count(*ALLOCATED) + terminated
        if allocated >= job.min_available:
            status["phase"] = "Completed" if terminated == allocated and allocated else "Running"
        elif job.phase != "Inqueue":
            status["phase"] = "Pending"
        else:
            status["phase"] = "Inqueue"
    status["running"] = running
    status["failed"] = job.count(TaskStatus.FAILED)
    status["succeeded"] = job.count(TaskStatus.SUCCEEDED)
    return status


def _cond_key(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return (c.get("type"), c.get("status"), c.get("reason") or "", c.get("message") or "")


def status_changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Differs in phase, counts or conditions (ignoring transition times and session ids)?"""
    for k in ("phase", "running", "failed", "succeeded"):
        if (new.get(k) or 0) != (old.get(k) or 0):
            return True
    nc, oc = new.get("conditions") or [], old.get("conditions") or []
    if len(nc) != len(oc):
        return True
    return sorted(map(_cond_key, nc), key=str) != sorted(map(_cond_key, oc), key=str)


def pod_condition_changed(pod: Mapping[str, Any], reason: str, message: str, nominated_node: str = "") -> bool:
    """Whether writing `PodScheduled=False` with this reason and message (and nominated node) would change the pod:
    the stored condition differs in status, reason or message (its lastTransitionTime does not count), or the
    nominated node differs. Write only when this says so."""
    status = pod.get("status") or {}
    if (status.get("nominatedNodeName") or "") != nominated_node:
        return True
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return not (c.get("status") == "False" and c.get("reason") == reason and c.get("message") == message)
    return True


def _events(job: Job, status: Mapping[str, Any], old: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A changed status's events: the job's of this session, plus Unschedulable (a gang left pending with fit
    errors) or Scheduled (just turned Running)."""
    events = list(job.events)
    if (status.get("phase") in ("Pending", "Inqueue", "Unknown") and job.min_available > 0
            and (job.fit_errors or job.job_fit_error)):
        events.append(("Warning", "Unschedulable", f"{job.count(TaskStatus.PENDING)}/{len(job.tasks)} tasks in gang "
                                                   f"unschedulable: {job.fit_error()}"))
    elif status.get("phase") == "Running" and old.get("phase") != "Running":
        events.append(("Normal", "Scheduled", "pod group is ready"))
    return events


def _news(events: Sequence[tuple[str, str, str]], old: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The events of a job whose status did not change, less the plugins' Unschedulable ones that the stored
    Unschedulable condition already carries (enqueue holding the job back again, every session): re-sending them
    would be a write per held job per tick for no news."""
    said = [c.get("message") or "" for c in old.get("conditions") or ()
            if c.get("type") == "Unschedulable" and c.get("status") == "True"]
    return [e for e in events if not (e[1] == "Unschedulable" and e[2] and any(e[2] in m for m in said))]


def _pod_conditions(job: Job) -> list[PodCondition]:
    """`PodScheduled=False` for the job's pending pods (their fit errors, or the role's when allocate skipped the
    pod, or the job's) and pipelined ones (Schedulable, nominated); gated pods and unchanged conditions left out."""
    index = job.index
    if not index.get(TaskStatus.PENDING) and not index.get(TaskStatus.PIPELINED):
        return []  # the usual case: every pod placed
    base = job.job_fit_error or "all nodes are unavailable"
    by_role = {job.tasks[uid].role: fe for uid, fe in job.fit_errors.items() if uid in job.tasks}
    out: list[PodCondition] = []
    for status_ in (TaskStatus.PENDING, TaskStatus.PIPELINED):
        for t in job.index.get(status_, {}).values():
            if t.sch_gated:
                continue
            if status_ is TaskStatus.PIPELINED:
                reason, msg, nominated = ("Schedulable",
                                          f"Pod {t.key} can possibly be assigned to {t.node_name} once resource "
                                          "is released", t.node_name)
                full = msg
            else:
                fe = job.fit_errors.get(t.uid) or by_role.get(t.role)  # skipped by allocate's role cache
                reason, nominated = "Unschedulable", ""
                msg, full = (fe.message(counts=False), fe.message()) if fe else (base, base)
            if pod_condition_changed(t.pod, reason, msg, nominated):
                out.append(PodCondition(t.namespace, t.name, t.uid, reason, msg, nominated, full))
    return out


def close_job(job: Job, session_uid: str) -> JobClose:
    """Everything closing `job` writes: its PodGroup status (the stored one kept when nothing changed), events,
    pod conditions and pipelined pods."""
    pipelined = {t.key: t.node_name for t in job.index.get(TaskStatus.PIPELINED, {}).values()}
    old = dict(job.podgroup.get("status") or {})
    status = job_status(job, old, session_uid)
    changed = status_changed(status, old)
    events = _events(job, status, old) if changed else _news(job.events, old)
    update = PodGroupUpdate(job.namespace, job.name, status if changed else old, changed, events)
    conditions = _pod_conditions(job)
    reusable = not (changed or events or job.fit_errors or job.phase != (old.get("phase") or ""))
    return JobClose(update, conditions, pipelined, reusable)


def _parent(queues: Mapping[str, Queue], name: str) -> str:
    q = queues.get(name)
    if q is None or name == "root":
        return ""
    return q.parent or ("root" if "root" in queues else "")


def _normal(rl: Mapping[str, Any], resources: ResourceIndex) -> dict[str, float]:
    v = resources.vector(rl)
    return {n: round(float(v[i]), 3) for i, n in enumerate(resources.names) if abs(v[i]) >= EPSILON}


def queue_allocated(jobs: Sequence[Job], queues: Mapping[str, Queue],
                    resources: ResourceIndex) -> tuple[dict[str, dict[str, str]], list[str]]:
    """(queue → `status.allocated`, the queues whose stored value differs): the Allocated/Binding/Bound/Running
    requests of each queue's jobs, summed up the parent chain (a cycle is cut where it closes)."""
    names = list(queues)
    sums = sum_by_queue(list(jobs), names, len(resources))
    alloc = {name: sums[i] for i, name in enumerate(names)}
    rolled = {name: v.copy() for name, v in alloc.items()}
    for name, vec in alloc.items():
        seen = {name}
        parent = _parent(queues, name)
        while parent and parent in rolled and parent not in seen:
            rolled[parent] += vec
            seen.add(parent)
            parent = _parent(queues, parent)
    out: dict[str, dict[str, str]] = {}
    changed: list[str] = []
    for name, vec in rolled.items():
        rl = resources.to_list(vec)
        out[name] = rl
        current = ((queues[name].queue.get("status") or {}).get("allocated")) or {}
        if _normal(current, resources) != _normal(rl, resources):
            changed.append(name)
    return out, changed


def queue_counts_changed(stored: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    """Whether the queue's stored PodGroup counters differ from `counts` (a missing counter is 0, as Volcano's
    omitempty leaves it)."""
    return any(int(stored.get(k) or 0) != int(counts.get(k) or 0) for k in PHASE_COUNTERS.values())


def queue_status(jobs: Sequence[Job], queues: Mapping[str, Queue], resources: ResourceIndex,
                 phases: Mapping[str, str]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, int]], list[str]]:
    """(queue → `status.allocated`, queue → PodGroup counts per phase, the queues whose stored status differs in
    either). `phases`: job uid → the PodGroup phase this session computed (the stored one for a job not in it).
    The counts are each queue's own PodGroups (not rolled up, as the queue controller counts them); allocated is
    rolled up the parent chain (`queue_allocated`). Both come from the same session, so they agree (volcano#3137,
    #4584: allocated and the counters wrong or always 0)."""
    allocated, changed = queue_allocated(jobs, queues, resources)
    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(PHASE_COUNTERS.values(), 0) for name in queues}
    for job in jobs:
        key = PHASE_COUNTERS.get(phases.get(job.uid, job.phase) or "")
        if key and job.queue in counts:
            counts[job.queue][key] += 1
    dirty = set(changed)
    for name, c in counts.items():
        if queue_counts_changed((queues[name].queue.get("status") or {}), c):
            dirty.add(name)
    return allocated, counts, [name for name in queues if name in dirty]
