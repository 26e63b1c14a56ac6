"""drf: dominant resource fairness — jobs with the lower dominant share go first and may preempt jobs whose share
stays at least as high; with `enableHierarchy`, hDRF orders and reclaims between queues of a weighted tree.

Volcano's `plugins/drf` (spec §5.4). The queue tree comes from the annotations `volcano.sh/hierarchy` (e.g.
`root/sci/dev`) and `volcano.sh/hierarchy-weights` (e.g. `1/2/8`), else from `spec.parent` and `spec.weight`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.kube.models import labels
from lahar.scheduler.framework.hooks import MetricsSink
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Job, Queue, Task

__all__ = ["SHARE_DELTA", "Drf", "HNode", "calculate_share", "queue_hierarchies"]

SHARE_DELTA = 0.000001


def calculate_share(allocated: np.ndarray, total: np.ndarray) -> float:
    """The dominant share: max over the cluster's resources (those ≥ 0.1) of allocated / total."""
    mask = total >= EPSILON
    if not mask.any():
        return 0.0
    return float(max(0.0, float(np.max(allocated[mask] / total[mask]))))


def _share_dims(total: np.ndarray) -> list[tuple[int, float]]:
    """(index, total) of the resources `calculate_share` divides by (those ≥ 0.1)."""
    return [(i, t) for i, t in enumerate(total.tolist()) if t >= EPSILON]


def _dominant_share(allocated: np.ndarray, dims: list[tuple[int, float]]) -> float:
    """`calculate_share` over `_share_dims(total)`, in float arithmetic: the same quotients and max, bit for bit,
    without numpy's per-call cost on a handful of resources (it runs on every allocation)."""
    if not dims:
        return 0.0
    a = allocated.tolist()
    return max(0.0, max(a[i] / t for i, t in dims))


class HNode:
    """A node of the hDRF tree: a queue path segment, or (leaf, `children is None`) a job."""

    __slots__ = ("parent", "allocated", "share", "request", "weight", "saturated", "hierarchy", "children",
                 "demanding")

    def __init__(self, hierarchy: str, weight: float, allocated: np.ndarray, request: np.ndarray, *,
                 leaf: bool = False, parent: HNode | None = None) -> None:
        self.parent = parent
        self.allocated = allocated
        self.share = 0.0
        self.request = request
        self.weight = weight
        self.saturated = False
        self.hierarchy = hierarchy
        self.children: dict[str, HNode] | None = None if leaf else {}
        self.demanding: np.ndarray | None = None  # root only: the demanding mask the tree was last computed with

    def clone(self, parent: HNode | None = None) -> HNode:
        n = HNode(self.hierarchy, self.weight, self.allocated.copy(), self.request.copy(),
                  leaf=self.children is None, parent=parent)
        n.share = self.share
        n.saturated = self.saturated
        n.demanding = self.demanding
        if self.children is not None:
            n.children = {k: c.clone(n) for k, c in self.children.items()}
        return n


def _resource_saturated(allocated: np.ndarray, request: np.ndarray, demanding: np.ndarray) -> bool:
    """Any allocated resource that reached the job's request, or that the job wants but nobody can get more of."""
    for i in np.flatnonzero(allocated >= EPSILON):
        if allocated[i] != 0 and request[i] != 0 and allocated[i] >= request[i]:
            return True
        if not demanding[i] and request[i] != 0:
            return True
    return False


def _parse_weights(weights: str, n: int) -> list[float]:
    out = []
    parts = weights.split("/") if weights else []
    for i in range(n):
        try:
            w = float(parts[i])
        except (IndexError, ValueError):
            w = 1.0
        out.append(max(w, 1.0))
    return out


def queue_hierarchies(queues: Mapping[str, Queue]) -> dict[str, tuple[str, str]]:
    """Each queue's (hierarchy, weights): its annotations when both are set, else built from `spec.parent` up to
    `root` (Volcano's BuildEffectiveQueueHierarchy); a cycle or a missing parent ends the chain at `root`."""
    out: dict[str, tuple[str, str]] = {}

    def build(name: str, seen: frozenset[str]) -> tuple[str, str]:
        if name in out:
            return out[name]
        q = queues.get(name)
        if name == "root" or q is None or name in seen:
            return ("root", "1")
        ann = (q.queue.get("metadata") or {}).get("annotations") or {}
        h, w = ann.get(labels.HIERARCHY_ANNOTATION), ann.get(labels.HIERARCHY_WEIGHTS_ANNOTATION)
        if h and w:
            out[name] = (h, w)
            return out[name]
        ph, pw = build(q.parent or "root", seen | {name})
        out[name] = (f"{ph}/{name}", f"{pw}/{max(q.weight, 1)}")
        return out[name]

    for name in queues:
        build(name, frozenset())
    out.setdefault("root", ("root", "1"))
    return out


class _JobAttr:
    __slots__ = ("allocated", "share")

    def __init__(self, allocated: np.ndarray, share: float) -> None:
        self.allocated = allocated
        self.share = share


class Drf:
    name = "drf"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.ssn: Session | None = None
        self.total = np.zeros(0)
        self._dims: list[tuple[int, float]] = []
        self.total_allocated = np.zeros(0)
        self.attrs: dict[str, _JobAttr] = {}
        self.hierarchy = False
        self.root: HNode | None = None
        self.paths: dict[str, tuple[list[str], list[float]]] = {}
        self.requests: dict[str, np.ndarray] = {}

    # --- session ---------------------------------------------------------------------------------------------

    def report_metrics(self, sink: MetricsSink) -> None:
        sink.total = self.total
        for uid, a in self.attrs.items():
            sink.job_share(uid, a.share, a.allocated)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = ssn.total.copy()
        self._dims = _share_dims(self.total)
        self.total_allocated = ssn.resources.zeros()
        self.hierarchy = any(p is self and opt.enabled("enableHierarchy") for tier in ssn.tiers for opt, p in tier)
        if self.hierarchy:
            self.root = HNode("root", 1.0, ssn.resources.zeros(), ssn.resources.zeros())
            for qname, (h, w) in queue_hierarchies(ssn.queues).items():
                segs = h.split("/")
                self.paths[qname] = (segs, _parse_weights(w, len(segs)))
        for job in ssn.jobs.values():
            alloc = ssn.resources.zeros()
            for s in ALLOCATED:
                for t in job.index.get(s, {}).values():
                    alloc += t.resreq
            attr = _JobAttr(alloc, calculate_share(alloc, self.total))
            self.attrs[job.uid] = attr
            if self.hierarchy:
                req = ssn.resources.zeros()
                for t in job.tasks.values():
                    req += t.resreq
                self.requests[job.uid] = req
                self.total_allocated += alloc
                self._update_hierarchical(self.root, self.total_allocated, job, attr)

    def on_session_close(self, ssn: Session) -> None:
        self.attrs = {}
        self.root = None

    # --- plain DRF ---------------------------------------------------------------------------------------------

    def job_order(self, left: Job, right: Job) -> int:
        """The lower dominant share first."""
        la, ra = self.attrs.get(left.uid), self.attrs.get(right.uid)
        if la is None or ra is None or la.share == ra.share:
            return 0
        return -1 if la.share < ra.share else 1

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        """Victims: tasks whose job's share after losing them (cumulatively) stays ≥ the preemptor job's after."""
        latt = self.attrs.get(preemptor.job)
        if latt is None:
            return []
        ls = calculate_share(latt.allocated + preemptor.resreq, self.total)
        allocations: dict[str, np.ndarray] = {}
        victims = []
        for t in preemptees:
            if t.job not in allocations:
                ratt = self.attrs.get(t.job)
                if ratt is None:
                    continue
                allocations[t.job] = ratt.allocated.copy()
            ralloc = allocations[t.job]
            ralloc -= t.resreq
            rs = calculate_share(ralloc, self.total)
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                victims.append(t)
        return victims

    def on_allocate(self, task: Task) -> None:
        self._book(task, +1)

    def on_deallocate(self, task: Task) -> None:
        self._book(task, -1)

    def _book(self, task: Task, sign: int) -> None:
        attr = self.attrs.get(task.job)
        if attr is None:
            return
        if sign > 0:
            np.add(attr.allocated, task.resreq, out=attr.allocated)
        else:
            np.subtract(attr.allocated, task.resreq, out=attr.allocated)
        attr.share = _dominant_share(attr.allocated, self._dims)
        if self.hierarchy and self.ssn is not None:
            job = self.ssn.jobs.get(task.job)
            if job is not None and job.queue in self.ssn.queues:
                self.total_allocated += sign * task.resreq
                self._update_hierarchical(self.root, self.total_allocated, job, attr)

    # --- hDRF --------------------------------------------------------------------------------------------------

    def _path(self, queue: str) -> tuple[list[str], list[float]]:
        return self.paths.get(queue) or (["root"], [1.0])

    def _build(self, root: HNode, job: Job, attr: _JobAttr) -> HNode:
        """Volcano buildHierarchy: create the queue path if missing, then (re)attach the job's leaf."""
        node = root
        segs, weights = self._path(job.queue)
        for i in range(1, len(segs)):
            assert node.children is not None
            child = node.children.get(segs[i])
            if child is None:
                child = HNode(segs[i], weights[i], np.zeros_like(self.total), np.zeros_like(self.total), parent=node)
                node.children[segs[i]] = child
            node = child
        assert node.children is not None
        leaf = HNode(job.uid, 1.0, attr.allocated, self.requests.get(job.uid, np.zeros_like(self.total)), leaf=True,
                     parent=node)
        leaf.share = attr.share
        node.children[job.uid] = leaf
        return leaf

    def _update_node(self, node: HNode, demanding: np.ndarray) -> None:
        """Volcano updateHierarchicalShare: leaves get their saturation, inner nodes the sum of their children's
        allocations, the non-saturated ones rescaled to the smallest dominant share among them."""
        if node.children is None:
            node.saturated = _resource_saturated(node.allocated, node.request, demanding)
            return
        for child in node.children.values():
            self._update_node(child, demanding)
        self._aggregate(node)

    def _aggregate(self, node: HNode) -> None:
        assert node.children is not None
        mdr = 1.0
        for child in node.children.values():
            if child.share != 0 and not child.saturated:
                mdr = min(mdr, calculate_share(child.allocated, self.total))
        allocated = np.zeros_like(self.total)
        saturated = True
        for child in node.children.values():
            if not child.saturated:
                saturated = False
            if child.share != 0:
                allocated += child.allocated if child.saturated else child.allocated * (mdr / child.share)
        node.allocated = allocated
        node.share = calculate_share(allocated, self.total)
        node.saturated = saturated

    def _update_hierarchical(self, root: HNode | None, total_allocated: np.ndarray, job: Job,
                             attr: _JobAttr) -> None:
        if root is None:
            return
        demanding = np.zeros(len(self.total), dtype=bool)
        names = self.total >= EPSILON
        demanding[names] = total_allocated[names] < self.total[names]
        leaf = self._build(root, job, attr)
        if root.demanding is None or not np.array_equal(root.demanding, demanding):
            self._update_node(root, demanding)  # saturation may change anywhere: the whole tree
            root.demanding = demanding
            return
        # Same demanding resources: only the nodes on the job's path can change (same result, O(depth)).
        leaf.saturated = _resource_saturated(leaf.allocated, leaf.request, demanding)
        node = leaf.parent
        while node is not None:
            self._aggregate(node)
            node = node.parent

    def _compare_queues(self, root: HNode | None, left: str, right: str) -> float:
        if root is None:
            return 0.0
        lpaths, rpaths = self._path(left)[0], self._path(right)[0]
        lnode: HNode | None = root
        rnode: HNode | None = root
        depth = min(len(lpaths), len(rpaths))
        for i in range(depth):
            if lnode is None or rnode is None:
                return 0.0
            if not lnode.saturated and rnode.saturated:
                return -1.0
            if lnode.saturated and not rnode.saturated:
                return 1.0
            lv, rv = lnode.share / lnode.weight, rnode.share / rnode.weight
            if lv != rv:
                return lv - rv
            if i < depth - 1:
                lnode = (lnode.children or {}).get(lpaths[i + 1])
                rnode = (rnode.children or {}).get(rpaths[i + 1])
        return 0.0

    def queue_order(self, left: Queue, right: Queue) -> int:
        """hDRF (only with enableHierarchy): demanding before saturated, then the lower weighted share, level by
        level down the two queues' paths."""
        if not self.hierarchy:
            return 0
        ret = self._compare_queues(self.root, left.name, right.name)
        return -1 if ret < 0 else (1 if ret > 0 else 0)

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        """hDRF (only with enableHierarchy): a reclaimee is a victim when, after the reclaimer got its task and the
        reclaimee lost its own, the reclaimer's queue still compares lower."""
        if not self.hierarchy or self.ssn is None:
            return None
        ssn = self.ssn
        ljob = ssn.jobs.get(reclaimer.job)
        if ljob is None or ljob.queue not in ssn.queues or reclaimer.job not in self.attrs or self.root is None:
            return []
        total_allocated = self.total_allocated.copy()
        root = self.root.clone()
        lalloc = self.attrs[ljob.uid].allocated + reclaimer.resreq
        lattr = _JobAttr(lalloc, calculate_share(lalloc, self.total))
        total_allocated += reclaimer.resreq
        self._update_hierarchical(root, total_allocated, ljob, lattr)
        victims = []
        for t in reclaimees:
            rjob = ssn.jobs.get(t.job)
            if rjob is None or rjob.queue not in ssn.queues or t.job not in self.attrs:
                continue
            total_allocated -= t.resreq
            ralloc = self.attrs[rjob.uid].allocated - t.resreq
            rattr = _JobAttr(ralloc, calculate_share(ralloc, self.total))
            self._update_hierarchical(root, total_allocated, rjob, rattr)
            ret = self._compare_queues(root, ljob.queue, rjob.queue)
            total_allocated += t.resreq
            rattr.allocated = rattr.allocated + t.resreq
            rattr.share = calculate_share(rattr.allocated, self.total)
            self._update_hierarchical(root, total_allocated, rjob, rattr)
            if ret < 0:
                victims.append(t)
        return victims
