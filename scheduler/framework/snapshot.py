"""The world as one session sees it: jobs (PodGroups with their pods as tasks), queues, nodes and their arrays.

`build(...)` turns plain API objects (from the informer cache, or a YAML file for `lahar simulate`) into a
`Snapshot`; sessions mutate it only through `Statement`. Counters and checks follow Volcano's `api/job_info.go`.
"""

from __future__ import annotations

import copy
import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lahar.kube.models import labels
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, ResourceIndex

__all__ = [
    "ALLOCATED",
    "DEFAULT_SCHEDULER_NAMES",
    "FitErrors",
    "Job",
    "Node",
    "Queue",
    "Snapshot",
    "Task",
    "TaskStatus",
    "build",
    "node_ready",
    "pod_requests",
    "sum_by_queue",
    "task_status",
]

DEFAULT_SCHEDULER_NAMES = frozenset({"volcano", "lahar"})
TASK_SPEC_KEY = "volcano.sh/task-spec"


class TaskStatus(enum.StrEnum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


ALLOCATED = frozenset({TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED})
TERMINATED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
_READY = (TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.SUCCEEDED)


def node_kind(status: TaskStatus) -> str:
    """How a task in `status` books its node: pipelined (future idle), releasing, or used."""
    if status is TaskStatus.PIPELINED:
        return "pipelined"
    if status is TaskStatus.RELEASING:
        return "releasing"
    return "used"


def task_status(pod: Mapping[str, Any]) -> TaskStatus:
    """Volcano's getTaskStatus."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if (pod.get("spec") or {}).get("nodeName") else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


def _requests(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((container.get("resources") or {}).get("requests")) or {}


def pod_requests(pod: Mapping[str, Any], resources: ResourceIndex) -> tuple[np.ndarray, np.ndarray]:
    """(Resreq, InitResreq): the sum of containers and sidecars (+ overhead); and kube's PodRequests. A numpy twin
    of `kube.podspec.pod_requests`, kept apart for the session's hot loop; a table test holds the two together."""
    spec = pod.get("spec") or {}
    resreq = resources.zeros()
    for c in spec.get("containers") or []:
        resreq += resources.vector(_requests(c))
    sidecars = resources.zeros()
    init = resreq.copy()
    for c in spec.get("initContainers") or []:
        v = resources.vector(_requests(c))
        if c.get("restartPolicy") == "Always":  # sidecar: runs alongside the app containers
            sidecars += v
            init = np.maximum(init, sidecars)
        else:
            init = np.maximum(init, sidecars + v)
    resreq += sidecars
    init = np.maximum(init, resreq)
    if spec.get("overhead"):
        ov = resources.vector(spec["overhead"])
        resreq += ov
        init += ov
    return resreq, init


def _is_empty(vec: np.ndarray) -> bool:
    return bool(np.all(vec < EPSILON))


def _rl_key(rl: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(rl.items())) if rl else ()


# (resource names, the pod's request fields) → (Resreq, InitResreq, best effort): pods of one task template share
# their requests, and parsing quantities was most of a first snapshot's time (100k pods at a scheduler's start)
_REQUESTS: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, bool]] = {}
_REQUESTS_MAX = 65_536


def _task_requests(pod: Mapping[str, Any], resources: ResourceIndex) -> tuple[np.ndarray, np.ndarray, bool]:
    """`pod_requests` and best-effort, memoised by the fields they read; fresh arrays every call."""
    spec = pod.get("spec") or {}
    try:
        key = (resources.names, tuple(_rl_key(_requests(c)) for c in spec.get("containers") or ()),
               tuple((_rl_key(_requests(c)), c.get("restartPolicy")) for c in spec.get("initContainers") or ()),
               _rl_key(spec.get("overhead")))
        hit = _REQUESTS.get(key)
    except (TypeError, AttributeError):  # a malformed spec: computed (and refused) the long way
        key, hit = None, None
    if hit is None:
        resreq, init = pod_requests(pod, resources)
        hit = (resreq, init, _is_empty(init))
        if key is not None:
            if len(_REQUESTS) >= _REQUESTS_MAX:
                _REQUESTS.clear()
            _REQUESTS[key] = hit
    return hit[0].copy(), hit[1].copy(), hit[2]


def _bool_flag(meta: Mapping[str, Any], key: str, default: bool) -> bool:
    for src in ("annotations", "labels"):
        v = (meta.get(src) or {}).get(key)
        if v is not None:
            return str(v).lower() == "true"
    return default


def _pod_index(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) >= 3:
        try:
            return int(parts[-1])
        except ValueError:
            return None
    return None


class Task:
    """One pod of a job (Volcano TaskInfo). `node` is the row in `NodeArrays` (-1 when unplaced)."""

    __slots__ = ("uid", "key", "namespace", "name", "job", "role", "resreq", "init_resreq", "best_effort",
                 "priority", "status", "node", "node_name", "preemptable", "creation", "pod", "index", "sch_gated",
                 "signature", "preemption_policy")

    def __init__(self, pod: Mapping[str, Any], resources: ResourceIndex, *, job: str = "") -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or self.key
        self.job = job
        self.role: str = (meta.get("annotations") or {}).get(TASK_SPEC_KEY) or ""
        self.resreq, self.init_resreq, self.best_effort = _task_requests(pod, resources)
        self.priority: int = int(spec.get("priority") or 0)
        self.status = task_status(pod)
        self.node = -1
        self.node_name: str = spec.get("nodeName") or ""
        self.preemptable = _bool_flag(meta, labels.PREEMPTABLE_KEY, True)
        self.creation: str = meta.get("creationTimestamp") or ""
        self.pod = pod
        self.index = _pod_index(self.name)
        self.sch_gated = bool(spec.get("schedulingGates"))
        self.signature: Any = None
        self.preemption_policy: str = spec.get("preemptionPolicy") or ""

    def __repr__(self) -> str:
        return f"Task({self.key}, {self.status}, node={self.node_name or '-'})"

    def clone(self) -> Task:
        t = Task.__new__(Task)
        for s in Task.__slots__:
            setattr(t, s, getattr(self, s))
        return t


class FitErrors:
    """Why a task fits no node: a histogram of per-node reasons, rendered like kube-scheduler's FitError."""

    __slots__ = ("total", "reasons", "error")

    def __init__(self, total: int = 0, reasons: Counter[str] | None = None, error: str = "") -> None:
        self.total = total
        self.reasons: Counter[str] = reasons if reasons is not None else Counter()
        self.error = error

    def message(self, *, counts: bool = True) -> str:
        """kube-scheduler's text ("0/3 nodes are available: 3 Insufficient cpu."), or with `counts=False` the same
        reasons without the node counts ("no node is available: Insufficient cpu."): what a pod's condition carries,
        so a node joining or leaving does not rewrite every pending pod's status (volcano#3072)."""
        if self.error and not self.reasons:
            return self.error
        head = f"0/{self.total} nodes are available" if counts else "no node is available"
        if not self.reasons:
            return head
        parts = sorted(f"{n} {r}" for r, n in self.reasons.items()) if counts else sorted(self.reasons)
        return f"{head}: {', '.join(parts)}."


class Job:
    """A PodGroup and its tasks (Volcano JobInfo): status index, gang counters, fit errors.

    `version` counts changes to the tasks (added, removed, status changed); `closed` is what the last session that
    closed this job computed for it, kept by `Session.close` to skip jobs whose inputs did not change since."""

    __slots__ = ("uid", "namespace", "name", "queue", "min_available", "min_task_member", "priority", "podgroup",
                 "phase", "creation", "tasks", "index", "min_resources", "fit_errors", "job_fit_error",
                 "allocated", "conditions", "events", "best_effort_pending", "version", "closed")

    def __init__(self, podgroup: Mapping[str, Any], resources: ResourceIndex, *, queue: str, priority: int) -> None:
        meta = podgroup.get("metadata") or {}
        spec = podgroup.get("spec") or {}
        status = podgroup.get("status") or {}
        self.namespace: str = meta.get("namespace") or "default"
        self.name: str = meta.get("name") or ""
        self.uid = f"{self.namespace}/{self.name}"
        self.queue = queue
        self.min_available = int(spec.get("minMember") or 0)
        self.min_task_member: dict[str, int] = {k: int(v) for k, v in (spec.get("minTaskMember") or {}).items()}
        self.priority = priority
        self.podgroup = podgroup
        self.phase: str = status.get("phase") or ""
        self.creation: str = meta.get("creationTimestamp") or ""
        self.tasks: dict[str, Task] = {}
        self.index: dict[TaskStatus, dict[str, Task]] = {}
        mr = spec.get("minResources")
        self.min_resources: np.ndarray | None = resources.vector(mr) if mr else None
        self.fit_errors: dict[str, FitErrors] = {}
        self.job_fit_error = ""
        self.allocated = resources.zeros()
        self.best_effort_pending = 0
        self.conditions: dict[str, dict[str, Any]] = {}  # type → condition set in this session
        self.events: list[tuple[str, str, str]] = []  # (type, reason, message) for the PodGroup
        self.version = 0
        self.closed: Any = None  # session.Closed, or None

    def __repr__(self) -> str:
        return f"Job({self.uid}, {self.phase or 'Pending'}, min={self.min_available}, tasks={len(self.tasks)})"

    # --- task bookkeeping ----------------------------------------------------------------------------------------

    def add_task(self, task: Task) -> None:
        self.version += 1
        task.job = self.uid
        self.tasks[task.uid] = task
        self.index.setdefault(task.status, {})[task.uid] = task
        if task.status in ALLOCATED:
            self.allocated += task.resreq
        if task.status is TaskStatus.PENDING and task.best_effort:
            self.best_effort_pending += 1

    def update_status(self, task: Task, status: TaskStatus) -> None:
        self.version += 1
        old = task.status
        bucket = self.index.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
            if not bucket:
                del self.index[old]
        if old in ALLOCATED:
            self.allocated -= task.resreq
        if task.best_effort:
            self.best_effort_pending += (status is TaskStatus.PENDING) - (old is TaskStatus.PENDING)
        task.status = status
        self.index.setdefault(status, {})[task.uid] = task
        if status in ALLOCATED:
            self.allocated += task.resreq

    def count(self, *statuses: TaskStatus) -> int:
        index = self.index
        n = 0
        for s in statuses:
            b = index.get(s)
            if b:
                n += len(b)
        return n

    def with_status(self, status: TaskStatus) -> list[Task]:
        return list(self.index.get(status, {}).values())

    # --- gang counters (job_info.go) -----------------------------------------------------------------------------

    def ready_task_num(self) -> int:
        index = self.index  # count(*_READY) inline: gang's job order and job_ready ask this several times a task
        n = 0
        for s in _READY:
            b = index.get(s)
            if b:
                n += len(b)
        return n

    def waiting_task_num(self) -> int:
        return self.count(TaskStatus.PIPELINED)

    def pending_best_effort_num(self) -> int:
        return self.best_effort_pending

    def valid_task_num(self) -> int:
        return self.count(*ALLOCATED, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING)

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def is_pending(self) -> bool:
        return self.phase in ("", "Pending")

    @property
    def task_min_available_total(self) -> int:
        return sum(self.min_task_member.values())

    def _roles(self, statuses: Iterable[TaskStatus], *, best_effort_pending: bool = False) -> Counter[str]:
        out: Counter[str] = Counter()
        for s in statuses:
            for t in self.index.get(s, {}).values():
                out[t.role] += 1
        if best_effort_pending:
            for t in self.index.get(TaskStatus.PENDING, {}).values():
                if t.best_effort:
                    out[t.role] += 1
        return out

    def _task_mins_met(self, occupied: Counter[str]) -> bool:
        if self.min_available < self.task_min_available_total:
            return True
        return all(occupied[role] >= n for role, n in self.min_task_member.items() if n > 0)

    def check_task_valid(self) -> bool:
        if not self.min_task_member:
            return True
        return self._task_mins_met(self._roles((*ALLOCATED, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED,
                                                 TaskStatus.PENDING)))

    def check_task_ready(self) -> bool:
        if not self.min_task_member:
            return True
        return self._task_mins_met(self._roles((*ALLOCATED, TaskStatus.SUCCEEDED), best_effort_pending=True))

    def check_task_pipelined(self) -> bool:
        if not self.min_task_member:
            return True
        return self._task_mins_met(self._roles((*ALLOCATED, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED),
                                               best_effort_pending=True))

    def check_task_starving(self) -> bool:
        if not self.min_task_member or self.min_available < self.task_min_available_total:
            return False
        occupied = self._roles((*ALLOCATED, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED))
        return any(occupied[role] < n for role, n in self.min_task_member.items() if n > 0)

    def task_has_fit_errors(self, task: Task) -> bool:
        """Allocate's role cache: a task whose role already failed predicates this session is skipped."""
        return any(self.tasks[uid].role == task.role for uid in self.fit_errors if uid in self.tasks)

    def need_continue_allocating(self) -> bool:
        """After a task fits no node: can the job still become ready from the roles that did not fail?"""
        if self.min_available == len(self.tasks):
            return False
        failed = {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}
        pending = Counter(t.role for t in self.index.get(TaskStatus.PENDING, {}).values())
        if self.min_available < self.task_min_available_total or not self.min_task_member:
            left = sum(n for role, n in pending.items() if role not in failed)
            return self.ready_task_num() + self.waiting_task_num() + left >= self.min_available
        placed = self._roles((*ALLOCATED, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED))
        for role, n in self.min_task_member.items():
            if n <= 0:
                continue
            have = placed[role] + (0 if role in failed else pending[role])
            if have < n:
                return False
        return True

    def elastic_resources(self) -> np.ndarray:
        """What the job holds above its minResources (Volcano GetElasticResources)."""
        if self.min_resources is None:
            return self.allocated.copy()
        if np.all(self.allocated <= self.min_resources + EPSILON):
            return np.zeros_like(self.allocated)
        return np.maximum(self.allocated - self.min_resources, 0.0)

    def fit_error(self, *, counts: bool = True) -> str:
        """Volcano JobInfo.FitError: status histogram and minAvailable, the pending tasks (each Unschedulable), then
        the origin: the first task with per-node fit errors ("0/4 nodes are available: 4 Insufficient cpu."), else
        why enqueue held the job back (the plugins' Unschedulable events). `counts=False`: the origin without node counts
        (`FitErrors.message`), for the PodGroup's condition."""
        hist = [f"{len(ts)} {s}" for s, ts in self.index.items() if ts]
        hist.append(f"{self.min_available} minAvailable")
        msg = f"pod group is {'ready' if self.is_ready() else 'not ready'}, {', '.join(sorted(hist))}"
        pending = len(self.index.get(TaskStatus.PENDING, {}))
        if pending:
            msg += f"; Pending: {pending} Unschedulable"
        for uid, task in self.tasks.items():
            fe = self.fit_errors.get(uid)
            if fe is not None:
                return f"{msg}. Origin reason is {task.name}: {fe.message(counts=counts)}"
        held = [m for _, reason, m in self.events if reason == "Unschedulable"]
        if held:
            msg += f". Origin reason is: {held[-1]}"
        return msg

    def clone(self, tasks: Mapping[str, Task]) -> Job:
        j = Job.__new__(Job)
        for s in Job.__slots__:
            setattr(j, s, getattr(self, s))
        j.tasks = {uid: tasks[uid] for uid in self.tasks}
        j.index = {s: {uid: tasks[uid] for uid in b} for s, b in self.index.items()}
        j.allocated = self.allocated.copy()
        j.fit_errors = {}
        j.best_effort_pending = self.best_effort_pending
        j.conditions = {}
        j.events = []
        j.closed = None
        return j


class Queue:
    """A Volcano Queue: weight, capability (∞ where unset), guarantee, deserved, parent, state."""

    __slots__ = ("uid", "name", "weight", "capability", "guarantee", "deserved", "parent", "state", "reclaimable",
                 "priority", "creation", "queue", "has_capability")

    def __init__(self, queue: Mapping[str, Any], resources: ResourceIndex) -> None:
        meta = queue.get("metadata") or {}
        spec = queue.get("spec") or {}
        status = queue.get("status") or {}
        self.name: str = meta.get("name") or ""
        self.uid = self.name
        self.weight = int(spec.get("weight") or 1)
        cap = spec.get("capability")
        self.has_capability = bool(cap)
        self.capability = resources.vector(cap, missing=np.inf) if cap else np.full(len(resources), np.inf)
        self.guarantee = resources.vector((spec.get("guarantee") or {}).get("resource"))
        d = spec.get("deserved")
        self.deserved = resources.vector(d) if d else None
        self.parent: str = spec.get("parent") or ""
        self.state: str = status.get("state") or "Open"
        self.reclaimable: bool = spec.get("reclaimable", True) is not False
        self.priority = int(spec.get("priority") or 0)
        self.creation: str = meta.get("creationTimestamp") or ""
        self.queue = queue

    def __repr__(self) -> str:
        return f"Queue({self.name}, weight={self.weight}, {self.state})"


class Node:
    """A Ready node: labels, taints, unschedulable flag, and the session's tasks placed on it. `others` are the pods
    bound here that belong to no session job (other schedulers, no PodGroup): read-only, for host ports and
    inter-pod affinity / topology spread (plugins/predicates, plugins/nodeorder)."""

    __slots__ = ("name", "index", "labels", "taints", "unschedulable", "node", "tasks", "others")

    def __init__(self, node: Mapping[str, Any], index: int) -> None:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        self.name: str = meta.get("name") or ""
        self.index = index
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.taints: list[dict[str, Any]] = list(spec.get("taints") or [])
        self.unschedulable = bool(spec.get("unschedulable"))
        self.node = node
        self.tasks: dict[str, Task] = {}
        self.others: list[Task] = []

    def __repr__(self) -> str:
        return f"Node({self.name})"


class Snapshot:
    """Everything a session reads and mutates; `copy()` gives an independent one (for tests and dry runs)."""

    __slots__ = ("resources", "nodes", "arrays", "jobs", "queues", "total", "priority_classes", "tasks", "extras",
                 "closed_jobs")

    def __init__(self, resources: ResourceIndex, nodes: list[Node], arrays: NodeArrays, jobs: dict[str, Job],
                 queues: dict[str, Queue], priority_classes: Mapping[str, int] | None = None,
                 extras: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        self.resources = resources
        self.nodes = nodes
        self.arrays = arrays
        self.jobs = jobs
        self.queues = queues
        self.total: np.ndarray = arrays.allocatable.sum(axis=0) if len(nodes) else resources.zeros()
        self.priority_classes = dict(priority_classes or {})
        self.tasks: dict[str, Task] = {uid: t for j in jobs.values() for uid, t in j.tasks.items()}
        # per-node objects of other kinds, by kind then node name: "numatopologies" (Volcano Numatopology),
        # "devices" (Koordinator Device); read-only inputs of the numa-aware and deviceshare plugins
        self.extras: dict[str, dict[str, Mapping[str, Any]]] = {k: dict(v) for k, v in (extras or {}).items()}
        # the jobs the last session closed, the only ones it left per-session fields on (conditions, fit errors,
        # events, phase: the others were settled, see Session.close); None = not known, any job may have them
        self.closed_jobs: list[Job] | None = None

    def copy(self) -> Snapshot:
        tasks = {uid: t.clone() for uid, t in self.tasks.items()}
        nodes = []
        for n in self.nodes:
            m = Node.__new__(Node)
            for s in Node.__slots__:
                setattr(m, s, getattr(n, s))
            m.tasks = {uid: tasks[uid] for uid in n.tasks}
            nodes.append(m)
        jobs = {uid: j.clone(tasks) for uid, j in self.jobs.items()}
        queues = {k: copy.copy(q) for k, q in self.queues.items()}
        return Snapshot(self.resources, nodes, self.arrays.copy(), jobs, queues, self.priority_classes, self.extras)


def sum_by_queue(jobs: Sequence[Job], queues: Sequence[str], width: int,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """Per queue (rows in `queues` order), the sum of its jobs' `allocated` vectors — or of `rows`, one per job —
    added in job order, exactly as a loop of `+=` from zero would; jobs of queues not listed are left out. One
    vector pass instead of one numpy call per job."""
    qi = {q: i for i, q in enumerate(queues)}
    idx = np.fromiter((qi.get(j.queue, -1) for j in jobs), dtype=np.intp, count=len(jobs))
    if rows is None:
        rows = (np.concatenate([j.allocated for j in jobs]).reshape(len(jobs), width) if jobs
                else np.zeros((0, width)))
    keep = idx >= 0
    if not keep.all():
        idx, rows = idx[keep], rows[keep]
    out = np.zeros((len(queues), width))
    for r in range(width):
        out[:, r] = np.bincount(idx, weights=rows[:, r], minlength=len(queues))
    return out


def node_ready(node: Mapping[str, Any]) -> bool:
    """Does a session see this node? NotReady only when it has a `Ready` condition whose status is not "True" (Volcano
    setNodeState before v1.11); a node without conditions (fresh, or built by a test table) is Ready. Volcano has not
    excluded out-of-sync nodes (used > allocatable) since v1.10, and neither does lahar: see docs/compatibility.md."""
    for c in (node.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return True


def _group_of(pod: Mapping[str, Any]) -> str:
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    return ann.get(labels.GROUP_NAME_ANNOTATION) or ann.get(labels.VOLCANO_GROUP_NAME_ANNOTATION) or ""


def build(*, pods: Iterable[Mapping[str, Any]] = (), nodes: Iterable[Mapping[str, Any]] = (),
          podgroups: Iterable[Mapping[str, Any]] = (), queues: Iterable[Mapping[str, Any]] = (),
          priority_classes: Iterable[Mapping[str, Any]] = (),
          scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES, default_queue: str = "default",
          numatopologies: Iterable[Mapping[str, Any]] = (), devices: Iterable[Mapping[str, Any]] = (),
          namespaces: Iterable[Mapping[str, Any]] = (), hypernodes: Iterable[Mapping[str, Any]] = (),
          poddisruptionbudgets: Iterable[Mapping[str, Any]] = (),
          resourcequotas: Iterable[Mapping[str, Any]] = (),
          persistentvolumeclaims: Iterable[Mapping[str, Any]] = (),
          persistentvolumes: Iterable[Mapping[str, Any]] = (), storageclasses: Iterable[Mapping[str, Any]] = (),
          csinodes: Iterable[Mapping[str, Any]] = (), csidrivers: Iterable[Mapping[str, Any]] = (),
          csistoragecapacities: Iterable[Mapping[str, Any]] = (), resourceclaims: Iterable[Mapping[str, Any]] = (),
          resourceslices: Iterable[Mapping[str, Any]] = (), deviceclasses: Iterable[Mapping[str, Any]] = ()) -> Snapshot:
    """A snapshot from API objects, like Volcano's cache.Snapshot(): Ready nodes only; jobs need a PodGroup and a
    known queue; every non-terminated pod bound to a node counts there, whichever scheduler placed it.
    Numatopology and Device objects (one per node, named after it), Namespaces (for pod affinity
    namespaceSelector), HyperNodes (the network topology, framework/hypernodes.py) and PodDisruptionBudgets (by
    namespace/name, for gangpreempt / gangreclaim and plugins/pdb) and ResourceQuotas (by namespace/name, for
    plugins/resourcequota), and PVCs (by namespace/name), PVs, StorageClasses, CSINodes and CSIDrivers (by name) and
    CSIStorageCapacities (by namespace/name, for the volume predicates), and ResourceClaims (by namespace/name), ResourceSlices and DeviceClasses (by name, for DRA) are kept
    as `Snapshot.extras`."""
    pods = list(pods)
    ready_nodes = [n for n in nodes if node_ready(n)]
    queue_objs = list(queues)
    names: set[str] = set()
    for n in ready_nodes:
        names.update(((n.get("status") or {}).get("allocatable") or {}).keys())
    for p in pods:
        spec = p.get("spec") or {}
        for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
            names.update(_requests(c).keys())
    for q in queue_objs:
        names.update(((q.get("spec") or {}).get("capability") or {}).keys())
    resources = ResourceIndex(names)

    node_list = [Node(n, i) for i, n in enumerate(sorted(ready_nodes, key=lambda n: n["metadata"]["name"]))]
    alloc = np.zeros((len(node_list), len(resources)))
    max_pods = np.zeros(len(node_list), dtype=np.int64)
    for node in node_list:
        a = (node.node.get("status") or {}).get("allocatable") or {}
        alloc[node.index] = resources.vector(a)
        mp = a.get("pods")
        max_pods[node.index] = int(float(str(mp))) if mp is not None else np.iinfo(np.int64).max
    arrays = NodeArrays(resources, [n.name for n in node_list], alloc, max_pods)

    pcs = {(pc.get("metadata") or {}).get("name"): int(pc.get("value") or 0) for pc in priority_classes}
    default_pc = next((int(pc.get("value") or 0) for pc in priority_classes if pc.get("globalDefault")), 0)
    queue_map = {q.name: q for q in (Queue(o, resources) for o in queue_objs)}
    jobs: dict[str, Job] = {}
    for pg in podgroups:
        spec = pg.get("spec") or {}
        qname = spec.get("queue") or default_queue
        if qname not in queue_map:
            continue
        pc = spec.get("priorityClassName")
        prio = pcs.get(pc, default_pc) if pc else default_pc
        job = Job(pg, resources, queue=qname, priority=prio)
        jobs[job.uid] = job

    ours = frozenset(scheduler_names)
    for p in pods:
        spec = p.get("spec") or {}
        status = task_status(p)
        node_name = spec.get("nodeName") or ""
        group = _group_of(p)
        ns = (p.get("metadata") or {}).get("namespace") or "default"
        job = jobs.get(f"{ns}/{group}") if group and spec.get("schedulerName", "default-scheduler") in ours else None
        if job is None and not node_name:
            continue
        task = Task(p, resources)
        if job is not None:
            job.add_task(task)
        if node_name and status not in TERMINATED:
            i = arrays.index.get(node_name)
            if i is not None:
                task.node = i
                arrays.add(i, task.resreq, node_kind(status))
                if job is not None:
                    node_list[i].tasks[task.uid] = task
                else:
                    node_list[i].others.append(task)
    arrays.reset_version()
    extras = {"numatopologies": {(o.get("metadata") or {}).get("name", ""): o for o in numatopologies},
              "devices": {(o.get("metadata") or {}).get("name", ""): o for o in devices},
              "namespaces": {(o.get("metadata") or {}).get("name", ""): o for o in namespaces},
              "hypernodes": {(o.get("metadata") or {}).get("name", ""): o for o in hypernodes},
              "poddisruptionbudgets": {f"{(o.get('metadata') or {}).get('namespace', '')}/"
                                       f"{(o.get('metadata') or {}).get('name', '')}": o for o in poddisruptionbudgets},
              "resourcequotas": {f"{(o.get('metadata') or {}).get('namespace', '')}/"
                                 f"{(o.get('metadata') or {}).get('name', '')}": o for o in resourcequotas},
              "persistentvolumeclaims": {f"{(o.get('metadata') or {}).get('namespace', '')}/"
                                         f"{(o.get('metadata') or {}).get('name', '')}": o
                                         for o in persistentvolumeclaims},
              "persistentvolumes": {(o.get("metadata") or {}).get("name", ""): o for o in persistentvolumes},
              "storageclasses": {(o.get("metadata") or {}).get("name", ""): o for o in storageclasses},
              "csinodes": {(o.get("metadata") or {}).get("name", ""): o for o in csinodes},
              "csidrivers": {(o.get("metadata") or {}).get("name", ""): o for o in csidrivers},
              "csistoragecapacities": {f"{(o.get('metadata') or {}).get('namespace', '')}/"
                                       f"{(o.get('metadata') or {}).get('name', '')}": o for o in csistoragecapacities},
              "resourceclaims": {f"{(o.get('metadata') or {}).get('namespace', '')}/"
                                 f"{(o.get('metadata') or {}).get('name', '')}": o for o in resourceclaims},
              "resourceslices": {(o.get("metadata") or {}).get("name", ""): o for o in resourceslices},
              "deviceclasses": {(o.get("metadata") or {}).get("name", ""): o for o in deviceclasses}}
    return Snapshot(resources, node_list, arrays, jobs, queue_map, pcs, extras)
