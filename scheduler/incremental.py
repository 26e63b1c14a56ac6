"""The session snapshot kept up to date from informer events: `SnapshotInputs.upsert / delete` record what changed
(dirty sets); `snapshot()` applies only that to the previous snapshot, so an idle tick costs next to nothing.

Fed by `scheduler.cache.SchedulerCache`; produces what `scheduler.framework.snapshot.build` would from the same
objects. The session mutates the snapshot it is handed; the next `snapshot()` first undoes what that session
changed (tasks it placed, pipelined or evicted are re-derived from their pods; per-session job fields are reset on
the jobs it closed — a settled job carries none).
A change of the node set, of the queue set, of any PriorityClass or of the resource vocabulary rebuilds in full.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.kube.informers import key_of
from lahar.kube.models import labels
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.nodes import ResourceIndex
from lahar.scheduler.framework.snapshot import TERMINATED, Job, Node, Queue, Snapshot, Task, TaskStatus, node_kind

__all__ = ["EXTRA_KINDS", "KINDS", "SnapshotInputs"]

Obj = Mapping[str, Any]

EXTRA_KINDS = ("numatopologies", "devices", "namespaces", "hypernodes", "poddisruptionbudgets", "resourcequotas",
               "persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes", "csidrivers",
               "csistoragecapacities", "resourceclaims", "resourceslices", "deviceclasses")
_NO_MAX_PODS = 2**63 - 1  # np.iinfo(np.int64).max, as build() uses for nodes without allocatable pods
KINDS = ("pods", "nodes", "podgroups", "queues", "priority_classes", *EXTRA_KINDS)


def _pod_names(pod: Obj) -> frozenset[str]:
    spec = pod.get("spec") or {}
    out: set[str] = set()
    for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        out.update(((c.get("resources") or {}).get("requests") or {}).keys())
    return frozenset(out)


def _names(kind: str, obj: Obj | None) -> frozenset[str]:
    """The resource names `build` would take from this object into the snapshot's ResourceIndex."""
    if obj is None:
        return frozenset()
    if kind == "pods":
        return _pod_names(obj)
    if kind == "nodes":
        return frozenset(((obj.get("status") or {}).get("allocatable") or {}).keys()) if snapshots.node_ready(obj) else frozenset()
    if kind == "queues":
        return frozenset(((obj.get("spec") or {}).get("capability") or {}).keys())
    return frozenset()


def _group_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    group = ann.get(labels.GROUP_NAME_ANNOTATION) or ann.get(labels.VOLCANO_GROUP_NAME_ANNOTATION)
    return f"{meta.get('namespace') or 'default'}/{group}" if group else ""


def _remove_task(job: Job, task: Task) -> None:
    """The inverse of `Job.add_task` for the task's current status."""
    job.version += 1
    job.tasks.pop(task.uid, None)
    bucket = job.index.get(task.status)
    if bucket is not None:
        bucket.pop(task.uid, None)
        if not bucket:
            del job.index[task.status]
    if task.status in snapshots.ALLOCATED:
        job.allocated -= task.resreq
    if task.status is TaskStatus.PENDING and task.best_effort:
        job.best_effort_pending -= 1


class SnapshotInputs:
    """The objects a snapshot is built from, what changed since the last `snapshot()`, and that snapshot.

    `upsert(kind, obj)` / `delete(kind, obj)` are safe from informer threads; `snapshot()` is called from one thread
    (the session's) and returns the same, updated `Snapshot` object each time — hold it only until the next call.
    """

    def __init__(self, *, scheduler_names: Iterable[str] = snapshots.DEFAULT_SCHEDULER_NAMES,
                 default_queue: str = "default") -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Obj]] = {k: {} for k in KINDS}
        self._dirty: dict[str, set[str]] = {k: set() for k in KINDS}
        self._by_group: dict[str, set[str]] = {}  # "ns/podgroup" → keys of pods naming it
        self._pod_group: dict[str, str] = {}
        self._names: dict[tuple[str, str], frozenset[str]] = {}
        self._name_refs: Counter[str] = Counter()
        self._snap: Snapshot | None = None
        self._default_pc = 0
        # pod key → (its task in the snapshot, status and node row when attached)
        self._attached: dict[str, tuple[Task, TaskStatus, int]] = {}
        self.stats: Counter[str] = Counter()  # full_builds, incremental, pods_applied, session_repairs

    # --- events (informer threads) ---------------------------------------------------------------------------------

    def upsert(self, kind: str, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            self._objects[kind][key] = obj
            self._dirty[kind].add(key)
            if kind == "pods":
                self._regroup(key, _group_key(obj))

    def delete(self, kind: str, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            if self._objects[kind].pop(key, None) is not None:
                self._dirty[kind].add(key)
            if kind == "pods":
                self._regroup(key, "")

    def replace(self, kind: str, objs: Iterable[Obj]) -> None:
        """Set every object of a kind at once (tests, or a client without informers)."""
        fresh = {key_of(o): o for o in objs}
        with self._lock:
            self._dirty[kind].update(self._objects[kind].keys() ^ fresh.keys())
            self._dirty[kind].update(k for k, o in fresh.items() if self._objects[kind].get(k) is not o)
            self._objects[kind] = fresh
            if kind == "pods":
                for key in list(self._pod_group):
                    if key not in fresh:
                        self._regroup(key, "")
                for key, o in fresh.items():
                    self._regroup(key, _group_key(o))

    def _regroup(self, key: str, group: str) -> None:
        old = self._pod_group.get(key, "")
        if old == group:
            return
        if old:
            members = self._by_group.get(old)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._by_group[old]
            del self._pod_group[key]
        if group:
            self._by_group.setdefault(group, set()).add(key)
            self._pod_group[key] = group

    # --- the snapshot (the session's thread) -----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        snap = self._snap
        touched: set[str] = set()
        if snap is not None:
            touched = self._undo_session(snap)
        with self._lock:
            dirty = self._dirty
            self._dirty = {k: set() for k in KINDS}
            for kind in ("pods", "nodes", "queues"):
                objs = self._objects[kind]
                for key in dirty[kind]:
                    self._count_names(kind, key, objs.get(key))
            if snap is None or self._needs_full(snap, dirty):
                lists = {k: list(v.values()) for k, v in self._objects.items()}
                full = True
            else:
                full = False
                pods = dirty["pods"] | touched
                for pg_key in dirty["podgroups"]:
                    pods |= self._by_group.get(pg_key, set())
                    old = snap.jobs.get(pg_key)
                    if old is not None:
                        pods.update(t.key for t in old.tasks.values())
                changed = {k: {key: self._objects[k].get(key) for key in dirty[k]} for k in KINDS if k != "pods"}
                changed["pods"] = {key: self._objects["pods"].get(key) for key in pods}
        if full:
            return self._build(lists)
        self._apply(snap, changed)
        return snap

    def _count_names(self, kind: str, key: str, obj: Obj | None) -> None:
        new = _names(kind, obj)
        old = self._names.get((kind, key), frozenset())
        if new == old:
            return
        if new:
            self._names[(kind, key)] = new
        else:
            self._names.pop((kind, key), None)
        self._name_refs.update(new)
        self._name_refs.subtract(old)

    def _needs_full(self, snap: Snapshot, dirty: dict[str, set[str]]) -> bool:
        if dirty["priority_classes"]:
            return True
        nodes = self._objects["nodes"]
        for key in dirty["nodes"]:
            obj = nodes.get(key)
            if (obj is not None and snapshots.node_ready(obj)) != (key in snap.arrays.index):
                return True
        queues = self._objects["queues"]
        if any((key in queues) != (key in snap.queues) for key in dirty["queues"]):
            return True
        vocabulary = ResourceIndex(n for n, c in self._name_refs.items() if c > 0).names
        return vocabulary != snap.resources.names

    def _build(self, lists: dict[str, list[Obj]]) -> Snapshot:
        snap = snapshots.build(**lists, scheduler_names=self.scheduler_names, default_queue=self.default_queue)
        self._default_pc = next((int(pc.get("value") or 0) for pc in lists["priority_classes"]
                                 if pc.get("globalDefault")), 0)
        attached: dict[str, tuple[Task, TaskStatus, int]] = {}
        for job in snap.jobs.values():
            for t in job.tasks.values():
                attached[t.key] = (t, t.status, t.node)
        for node in snap.nodes:
            for t in node.others:
                attached[t.key] = (t, t.status, t.node)
        self._attached = attached
        self._snap = snap
        self.stats["full_builds"] += 1
        return snap

    def _undo_session(self, snap: Snapshot) -> set[str]:
        """Pods whose tasks the last session moved (placed, pipelined, evicted); reset per-session job fields."""
        touched: set[str] = set()
        arrays = snap.arrays
        if arrays.changes:
            attached = self._attached
            for row in set(arrays.changes):
                for t in snap.nodes[row].tasks.values():
                    rec = attached.get(t.key)
                    if rec is None or rec[0] is not t or rec[1] is not t.status or rec[2] != t.node:
                        touched.add(t.key)
            self.stats["session_repairs"] += 1
        # only the jobs the last session closed carry its per-session fields (all of them if it did not close)
        for job in snap.jobs.values() if snap.closed_jobs is None else snap.closed_jobs:
            if job.fit_errors:
                job.fit_errors = {}
            job.job_fit_error = ""
            if job.conditions:
                job.conditions = {}
            if job.events:
                job.events = []
            job.phase = (job.podgroup.get("status") or {}).get("phase") or ""
        return touched

    def _apply(self, snap: Snapshot, changed: dict[str, dict[str, Obj | None]]) -> None:
        self.stats["incremental"] += 1
        for key in changed["pods"]:
            self._detach(snap, key)
        res = snap.resources
        arrays = snap.arrays
        if changed["nodes"]:
            allocatable = arrays.allocatable.copy()  # shared with copies of the snapshot: replace, never write into
            max_pods = arrays.max_pods.copy()
            for key, obj in changed["nodes"].items():
                i = arrays.index.get(key)
                if i is None or obj is None:
                    continue
                old = snap.nodes[i]
                node = Node(obj, i)
                node.tasks, node.others = old.tasks, old.others
                snap.nodes[i] = node
                a = (obj.get("status") or {}).get("allocatable") or {}
                allocatable[i] = res.vector(a)
                arrays.idle[i] = allocatable[i] - arrays.used[i]
                mp = a.get("pods")
                max_pods[i] = int(float(str(mp))) if mp is not None else _NO_MAX_PODS
            arrays.allocatable = allocatable
            arrays.max_pods = max_pods
            snap.total = allocatable.sum(axis=0) if len(snap.nodes) else res.zeros()
        for key, obj in changed["queues"].items():
            if obj is not None:
                snap.queues[key] = Queue(obj, res)
        for key, obj in changed["podgroups"].items():
            snap.jobs.pop(key, None)
            if obj is None:
                continue
            spec = obj.get("spec") or {}
            qname = spec.get("queue") or self.default_queue
            if qname not in snap.queues:
                continue
            pc = spec.get("priorityClassName")
            prio = snap.priority_classes.get(pc, self._default_pc) if pc else self._default_pc
            job = Job(obj, res, queue=qname, priority=prio)
            snap.jobs[job.uid] = job
        for key, obj in changed["pods"].items():
            if obj is not None:
                self._attach(snap, key, obj)
        for kind in EXTRA_KINDS:
            extras = snap.extras.setdefault(kind, {})
            for key, obj in changed[kind].items():
                if obj is None:
                    extras.pop(key, None)
                else:
                    extras[key] = obj
        self.stats["pods_applied"] += len(changed["pods"])
        arrays.reset_version()

    def _detach(self, snap: Snapshot, key: str) -> None:
        rec = self._attached.pop(key, None)
        if rec is None:
            return
        task = rec[0]
        if task.node >= 0:
            snap.arrays.remove(task.node, task.resreq, node_kind(task.status))
            node = snap.nodes[task.node]
            if task.job:
                node.tasks.pop(task.uid, None)
            else:
                node.others = [t for t in node.others if t is not task]
        if task.job:
            job = snap.jobs.get(task.job)
            if job is not None and job.tasks.get(task.uid) is task:
                _remove_task(job, task)
            if snap.tasks.get(task.uid) is task:
                del snap.tasks[task.uid]

    def _attach(self, snap: Snapshot, key: str, pod: Obj) -> None:
        """One pod into the snapshot, exactly as `build` places it."""
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName") or ""
        group = _group_key(pod)
        ours = spec.get("schedulerName", "default-scheduler") in self.scheduler_names
        job = snap.jobs.get(group) if group and ours else None
        if job is None and not node_name:
            return
        task = Task(pod, snap.resources)
        if job is not None:
            job.add_task(task)
            snap.tasks[task.uid] = task
        if node_name and task.status not in TERMINATED:
            i = snap.arrays.index.get(node_name)
            if i is not None:
                task.node = i
                snap.arrays.add(i, task.resreq, node_kind(task.status))
                if job is not None:
                    snap.nodes[i].tasks[task.uid] = task
                else:
                    snap.nodes[i].others.append(task)
        if job is None and task.node < 0:
            return
        self._attached[key] = (task, task.status, task.node)
