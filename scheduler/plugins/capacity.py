"""capacity: queues get the `spec.deserved` share they declare (floored at guarantee), are capped by capability,
and may reclaim from queues above their deserved share; with `enableHierarchy`, queues form a tree under `root`
(by `spec.parent`), only leaves hold jobs, and every ancestor's capability is honoured too.

Volcano's `plugins/capacity` (spec §5.4), argument `ancestorReclaimLevel`. No Overused hook, as in Volcano.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import MetricsSink, QueueReport, Vote
from lahar.scheduler.framework.nodes import EPSILON, ResourceIndex
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Job, Queue, Task, TaskStatus

__all__ = [
    "ROOT",
    "Capacity",
    "QueueAttr",
    "deduct_sch_gated",
    "greater_partly_relevant",
    "inqueue_resource",
    "intersects",
    "le_dims",
    "le_partly_zero_filtered",
    "queue_share",
]

ROOT = "root"
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"


# --- Volcano's Resource comparisons, over vectors (pure) -------------------------------------------------------

def le_dims(r: np.ndarray, rr: np.ndarray, req: np.ndarray, names: tuple[str, ...]) -> tuple[bool, list[str]]:
    """LessEqualWithDimensionAndResourcesName: on the dimensions `req` asks for, r ≤ rr; else the names over."""
    over = (req > 0) & (r > rr)
    return (not over.any()), [names[i] for i in np.flatnonzero(over)]


def greater_partly_relevant(r: np.ndarray, rr: np.ndarray, rr_present: np.ndarray, req: np.ndarray) -> bool:
    """GreaterPartlyWithRelevantDimensions: r > rr on some dimension `req` asks for that `rr` has (cpu/memory:
    ≥ 0.1; scalars: declared)."""
    relevant = req > 0
    relevant[:2] &= rr[:2] >= EPSILON
    relevant[2:] &= rr_present[2:]
    return bool(np.any(relevant & (r > rr)))


def le_partly_zero_filtered(r: np.ndarray, rr: np.ndarray, req: np.ndarray) -> bool:
    """LessEqualPartlyWithDimensionZeroFiltered: r ≤ rr (with tolerance) on some requested dimension where r or rr
    is non-zero."""
    dims = (req > 0) & ~((r < EPSILON) & (rr < EPSILON))
    return bool(np.any(dims & ((r < rr) | (np.abs(r - rr) < EPSILON))))


def intersects(a: np.ndarray, b: np.ndarray) -> bool:
    """api.Intersection is non-empty: some dimension ≥ 0.1 in both."""
    return bool(np.any((a >= EPSILON) & (b >= EPSILON)))


def queue_share(allocated: np.ndarray, deserved: np.ndarray) -> float:
    """A queue without deserved is best-effort (share 1); else max over deserved dims of allocated / deserved."""
    mask = deserved >= EPSILON
    if not mask.any():
        return 1.0
    return float(max(0.0, float(np.max(allocated[mask] / deserved[mask]))))


def inqueue_resource(job: Job) -> np.ndarray:
    """GetInqueueResource: what minResources still reserves beyond what the job holds."""
    assert job.min_resources is not None
    return np.maximum(job.min_resources - job.allocated, 0.0)


def _only_queue_gate(task: Task) -> bool:
    gates = (task.pod.get("spec") or {}).get("schedulingGates") or []
    return bool(gates) and all(g.get("name") == QUEUE_ALLOCATION_GATE for g in gates)


def deduct_sch_gated(job: Job, res: np.ndarray) -> np.ndarray:
    """DeductSchGatedResources: minus the requests of pods held by scheduling gates (not counting pods held only
    by Volcano's queue-allocation gate), floored at 0."""
    gated = np.zeros_like(res)
    for t in job.tasks.values():
        if t.sch_gated and not _only_queue_gate(t):
            gated += t.resreq
    if np.all(gated < EPSILON):
        return res
    return np.maximum(res - gated, 0.0)


# --- queue attributes ----------------------------------------------------------------------------------------

@dataclass
class QueueAttr:
    name: str
    deserved: np.ndarray
    deserved_present: np.ndarray  # bool: dimensions declared in deserved (scalars count even when 0)
    guarantee: np.ndarray
    guarantee_present: np.ndarray
    capability: np.ndarray  # NaN = not set (hierarchy inherits from the parent)
    allocated: np.ndarray
    request: np.ndarray
    elastic: np.ndarray
    inqueue: np.ndarray
    real_capability: np.ndarray
    share: float = 0.0
    ancestors: list[str] = field(default_factory=list)
    children: dict[str, QueueAttr] = field(default_factory=dict)

    def update_share(self) -> None:
        self.share = queue_share(self.allocated, self.deserved)


def _vector(resources: ResourceIndex, rl: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """A resource list as (values with NaN where absent, present mask)."""
    v = resources.vector(rl, missing=np.nan)
    return v, ~np.isnan(v)


def _new_attr(q: Queue, resources: ResourceIndex) -> QueueAttr:
    spec = q.queue.get("spec") or {}
    d, dp = _vector(resources, spec.get("deserved"))
    g, gp = _vector(resources, (spec.get("guarantee") or {}).get("resource"))
    cap, _ = _vector(resources, spec.get("capability"))
    zeros = resources.zeros
    return QueueAttr(q.name, np.nan_to_num(d), dp, np.nan_to_num(g), gp, cap, zeros(), zeros(), zeros(), zeros(),
                     zeros())


def _queue_level(left: QueueAttr, right: QueueAttr) -> int:
    """Volcano getQueueLevel: index of the last common ancestor while the two ancestor lists agree."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] == right.ancestors[i]:
            level = i
        else:
            return level
    return level


def _compare_share(left: QueueAttr, right: QueueAttr) -> int:
    """compareShareWithDeserved: lower share first; on a tie, queues with deserved before best-effort ones."""
    if left.share == right.share:
        lh, rh = bool(np.any(left.deserved >= EPSILON)), bool(np.any(right.deserved >= EPSILON))
        if lh == rh:
            return 0
        return -1 if lh else 1
    return -1 if left.share < right.share else 1


class Capacity:
    name = "capacity"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        try:
            level = int(self.arguments.get("ancestorReclaimLevel", 0))
        except (TypeError, ValueError):
            level = 0
        self.ancestor_reclaim_level = max(level, 0)
        self.ssn: Session | None = None
        self.attrs: dict[str, QueueAttr] = {}
        self.hierarchy = False
        self.ready = True
        self.error = ""

    # --- session ---------------------------------------------------------------------------------------------

    def report_metrics(self, sink: MetricsSink) -> None:
        for name, a in self.attrs.items():
            sink.queue(name, QueueReport(allocated=a.allocated, request=a.request, deserved=a.deserved,
                                         real_capacity=a.real_capability, inqueue=a.inqueue, share=a.share))

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.attrs = {}
        self.hierarchy = any(p is self and opt.enabled("enableHierarchy") for tier in ssn.tiers for opt, p in tier)
        if self.hierarchy:
            self.ready = self._build_hierarchical(ssn)
        else:
            self._build_flat(ssn)

    def _account(self, attr: QueueAttr, job: Job) -> None:
        for s in ALLOCATED:
            for t in job.index.get(s, {}).values():
                attr.allocated += t.resreq
                attr.request += t.resreq
        for t in job.index.get(TaskStatus.PENDING, {}).values():
            attr.request += t.resreq
        if job.min_resources is not None:
            running = job.phase == "Running" and job.count(*ALLOCATED) >= job.min_available
            if job.phase == "Inqueue" or running:
                attr.inqueue += deduct_sch_gated(job, inqueue_resource(job))
        attr.elastic += job.elastic_resources()

    def _build_flat(self, ssn: Session) -> None:
        total_guarantee = ssn.resources.zeros()
        for q in ssn.queues.values():
            total_guarantee += q.guarantee
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is None:
                q = ssn.queues[job.queue]
                attr = _new_attr(q, ssn.resources)
                real = np.maximum(ssn.total - total_guarantee, 0.0) + attr.guarantee
                if q.has_capability:
                    cap = np.where(np.isnan(attr.capability), np.inf, attr.capability)
                    cap[:2] = np.where(cap[:2] <= 0, np.inf, cap[:2])
                    attr.capability = cap
                    real = np.minimum(real, cap)
                else:
                    attr.capability = ssn.resources.zeros()
                attr.real_capability = real
                self.attrs[job.queue] = attr
            self._account(attr, job)
        for attr in self.attrs.values():
            attr.deserved = np.maximum(np.minimum(attr.deserved, attr.real_capability), attr.guarantee)
            attr.deserved_present = attr.deserved_present | attr.guarantee_present
            attr.update_share()

    def _build_hierarchical(self, ssn: Session) -> bool:
        for q in ssn.queues.values():
            self.attrs[q.name] = _new_attr(q, ssn.resources)
        linked: set[str] = set()
        for name in ssn.queues:
            err = self._link(ssn, name, (), linked)
            if err:
                self.error = err
                return False
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            if attr.children:
                self.error = f"The Queue <{attr.name}> of Job <{job.uid}> is not leaf queue"
                return False
            before = [a.copy() for a in (attr.allocated, attr.request, attr.inqueue, attr.elastic)]
            self._account(attr, job)
            deltas = [now - old for now, old in zip((attr.allocated, attr.request, attr.inqueue, attr.elastic),
                                                    before, strict=True)]
            for anc in attr.ancestors:
                a = self.attrs[anc]
                a.allocated += deltas[0]
                a.request += deltas[1]
                a.inqueue += deltas[2]
                a.elastic += deltas[3]
        root = self.attrs.get(ROOT)
        if root is None:
            self.error = f"Root queue {ROOT!r} not found in session queues"
            return False
        cap = root.capability
        if np.all(np.nan_to_num(cap) < EPSILON):
            root.capability = np.full(len(cap), np.inf)
        else:
            root.capability = np.nan_to_num(cap)
        root.real_capability = root.capability.copy()
        self._check_hierarchical(root)
        for attr in self.attrs.values():
            attr.update_share()
        return True

    def _link(self, ssn: Session, name: str, visiting: tuple[str, ...], linked: set[str]) -> str:
        """Volcano updateAncestors: wire `name` under its parent (default `root`), parents first."""
        if name == ROOT or name in linked:
            return ""
        if name in visiting:
            return f"cycle detected in queue hierarchy for queue {name}"
        parent = ssn.queues[name].parent or ROOT
        if parent not in ssn.queues:
            return f"the queue {name} has invalid parent queue {parent}"
        err = self._link(ssn, parent, (*visiting, name), linked)
        if err:
            return err
        p = self.attrs[parent]
        p.children[name] = self.attrs[name]
        self.attrs[name].ancestors = [*p.ancestors, parent]
        linked.add(name)
        return ""

    def _check_hierarchical(self, attr: QueueAttr) -> None:
        """Volcano checkHierarchicalQueue: children inherit unset capability, deserved ≥ guarantee, and get
        realCapability = (parent's realCapability − Σ children's guarantee)⁺ + own guarantee, capped by capability."""
        total_guarantee = np.zeros_like(attr.allocated)
        total_deserved = np.zeros_like(attr.allocated)
        present = np.zeros(len(attr.allocated), dtype=bool)
        for child in attr.children.values():
            child.deserved = np.maximum(child.deserved, child.guarantee)
            child.deserved_present = child.deserved_present | child.guarantee_present
            total_deserved += child.deserved
            total_guarantee += child.guarantee
            present |= child.deserved_present
            cap = child.capability.copy()
            unset = np.isnan(cap)
            unset[:2] |= ~unset[:2] & (np.nan_to_num(cap[:2]) <= 0)
            cap[unset] = attr.capability[unset]
            child.capability = cap
        if attr.name == ROOT:
            attr.guarantee = total_guarantee
            attr.deserved = total_deserved
            attr.deserved_present = present
        for child in attr.children.values():
            real = np.maximum(attr.real_capability - total_guarantee, 0.0) + child.guarantee
            child.real_capability = np.minimum(real, child.capability)
        for child in attr.children.values():
            self._check_hierarchical(child)

    def on_session_close(self, ssn: Session) -> None:
        self.attrs = {}

    # --- helpers -------------------------------------------------------------------------------------------------

    def _leaf(self, queue: str) -> bool:
        attr = self.attrs.get(queue)
        return attr is None or not attr.children

    def _chain(self, queue: str) -> list[QueueAttr]:
        """The queue then its ancestors up to root (only the queue without hierarchy)."""
        attr = self.attrs[queue]
        return [attr, *(self.attrs[a] for a in reversed(attr.ancestors))]

    def _ancestor_at(self, attr: QueueAttr, depth: int) -> str | None:
        if depth <= 0 or len(attr.ancestors) < depth:
            return None
        return attr.ancestors[len(attr.ancestors) - depth]

    def _shares_non_root_ancestor(self, a: QueueAttr, b: QueueAttr) -> bool:
        level = self.ancestor_reclaim_level
        aa = {x for d in range(1, level + 1) if (x := self._ancestor_at(a, d)) is not None}
        bb = {x for d in range(1, level + 1) if (x := self._ancestor_at(b, d)) is not None}
        return any(x != ROOT and x in bb for x in aa)

    def _reclaimee_ancestor(self, reclaimer: QueueAttr, reclaimee: QueueAttr,
                            level: int) -> tuple[QueueAttr | None, bool]:
        rid = self._ancestor_at(reclaimee, level)
        if rid is None or rid == ROOT:
            return None, False
        if self._ancestor_at(reclaimer, level) == rid:
            return None, False
        return self.attrs.get(rid), True

    def _victim_key(self, ssn: Session, reclaimer: Task) -> Callable[[Task], Any]:
        """BuildVictimsPriorityQueue: lowest-ordered first; across queues (hierarchy) the queue closest to the
        reclaimer's in the tree first."""
        pjob = ssn.jobs.get(reclaimer.job)

        def cmp(a: Task, b: Task) -> int:
            if a.job == b.job:
                return -1 if ssn.task_order(b, a) else (1 if ssn.task_order(a, b) else 0)
            ja, jb = ssn.jobs[a.job], ssn.jobs[b.job]
            if self.hierarchy and pjob is not None and ja.queue != jb.queue:
                pa, la, lb = self.attrs.get(pjob.queue), self.attrs.get(ja.queue), self.attrs.get(jb.queue)
                if pa is not None and la is not None and lb is not None:
                    ll, rl = _queue_level(la, pa), _queue_level(lb, pa)
                    if ll != rl:
                        return -1 if ll > rl else 1
            return -1 if ssn.job_order(jb, ja) else (1 if ssn.job_order(ja, jb) else 0)

        return functools.cmp_to_key(cmp)

    # --- hooks ---------------------------------------------------------------------------------------------------

    def queue_order(self, left: Queue, right: Queue) -> int:
        """Higher spec.priority first; then (hierarchy) leaves first and, for two leaves, the shares of their
        first differing ancestors; else the lower share of deserved."""
        if not self.ready:
            return 0
        if left.priority != right.priority:
            return right.priority - left.priority
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if la is None or ra is None:
            return 0
        if not self.hierarchy:
            return _compare_share(la, ra)
        ll, rl = not la.children, not ra.children
        if ll and not rl:
            return -1
        if rl and not ll:
            return 1
        if not ll and not rl:
            return _compare_share(la, ra)
        level = _queue_level(la, ra)
        lp = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.name
        rp = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.name
        return _compare_share(self.attrs[lp], self.attrs[rp])

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        """Victims come from queues above deserved on a dimension they use (or whose deserved does not cover the
        victim at all), never below guarantee; with `ancestorReclaimLevel`, ancestors must be over too."""
        assert self.ssn is not None
        ssn = self.ssn
        if not self.ready:
            return []
        rjob = ssn.jobs.get(reclaimer.job)
        rattr = self.attrs.get(rjob.queue) if rjob is not None else None
        if rattr is None:
            return []
        hier = self.hierarchy and self.ancestor_reclaim_level > 0
        allocations: dict[str, np.ndarray] = {}
        victims = []
        for t in sorted(reclaimees, key=self._victim_key(ssn, reclaimer)):
            job = ssn.jobs.get(t.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            if not intersects(t.resreq, reclaimer.init_resreq):
                continue
            allocated = allocations.setdefault(job.queue, attr.allocated.copy())
            if not np.all(attr.guarantee <= allocated - t.resreq + EPSILON):
                continue
            if not intersects(t.resreq, attr.deserved):
                if hier and self._shares_non_root_ancestor(rattr, attr) and not intersects(reclaimer.resreq,
                                                                                           rattr.deserved):
                    continue
            elif not greater_partly_relevant(allocated, attr.deserved, attr.deserved_present, t.resreq):
                continue
            ancestor_allocs: list[np.ndarray] = []
            eligible = True
            if hier:
                for level in range(1, self.ancestor_reclaim_level + 1):
                    anc, need = self._reclaimee_ancestor(rattr, attr, level)
                    if not need:
                        continue
                    if anc is None:
                        eligible = False
                        break
                    aalloc = allocations.setdefault(anc.name, anc.allocated.copy())
                    ancestor_allocs.append(aalloc)
                    if not intersects(t.resreq, anc.deserved):
                        continue
                    if not greater_partly_relevant(aalloc, anc.deserved, anc.deserved_present, t.resreq):
                        eligible = False
                        break
            if not eligible:
                continue
            allocated -= t.resreq
            for a in ancestor_allocs:
                a -= t.resreq
            victims.append(t)
        return victims

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """May this queue reclaim for `task`: within realCapability, and under deserved on some dimension."""
        if not self.ready or queue.state != "Open":
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return False
        req = task.resreq
        future = attr.allocated + req
        if not le_dims(future, attr.real_capability, req, self._names())[0]:
            return False
        if le_partly_zero_filtered(future, attr.deserved, req):
            return True
        if self.hierarchy and self.ancestor_reclaim_level > 0:
            for level in range(1, self.ancestor_reclaim_level + 1):
                aid = self._ancestor_at(attr, level)
                if aid is None or aid == ROOT or aid not in self.attrs:
                    continue
                anc = self.attrs[aid]
                if le_partly_zero_filtered(anc.allocated + req, anc.deserved, req):
                    return True
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        """Open, (hierarchy) a leaf, and allocated + request ≤ realCapability for the queue and every ancestor."""
        if queue.state != "Open" or not self.ready:
            return False
        if self.hierarchy and not self._leaf(queue.name):
            return False
        if queue.name not in self.attrs:
            return True
        names = self._names()
        return all(le_dims(a.allocated + task.resreq, a.real_capability, task.resreq, names)[0]
                   for a in self._chain(queue.name))

    def job_enqueueable(self, job: Job) -> Vote:
        """minResources + allocated + inqueue − elastic ≤ realCapability, for the queue and every ancestor."""
        assert self.ssn is not None
        if not self.ready:
            return Vote.REJECT
        if self.hierarchy and not self._leaf(job.queue):
            return Vote.REJECT
        queue = self.ssn.queues[job.queue]
        if queue.state != "Open":
            return Vote.REJECT
        if job.min_resources is None or job.queue not in self.attrs:
            return Vote.PERMIT
        names = self._names()
        for a in self._chain(job.queue):
            need = job.min_resources + a.allocated + a.inqueue - a.elastic
            ok, over = le_dims(need, a.real_capability, job.min_resources, names)
            if not ok:
                msg = "queue resource quota insufficient"
                if over:
                    msg += ": " + ", ".join(f"insufficient {n}" for n in over)
                self.ssn.record_podgroup_event(job, "Normal", "Unschedulable", msg)
                return Vote.REJECT
        return Vote.PERMIT

    def job_enqueued(self, job: Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        ded = deduct_sch_gated(job, job.min_resources)
        attr.inqueue += ded
        if self.hierarchy:
            for anc in attr.ancestors:
                self.attrs[anc].inqueue += ded

    def on_allocate(self, task: Task) -> None:
        self._book(task, +1)

    def on_deallocate(self, task: Task) -> None:
        self._book(task, -1)

    def _book(self, task: Task, sign: int) -> None:
        assert self.ssn is not None
        job = self.ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        attr.allocated += sign * task.resreq
        attr.update_share()
        if self.hierarchy:
            for anc in attr.ancestors:
                self.attrs[anc].allocated += sign * task.resreq

    def _names(self) -> tuple[str, ...]:
        assert self.ssn is not None
        return self.ssn.resources.names
