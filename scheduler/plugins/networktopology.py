"""network-topology-aware: HyperNode gradients for jobs with a `networkTopology`, HyperNode and node scores.

Volcano's `plugins/network-topology-aware`: `hypernode_gradient` lists the HyperNodes of tier ≤ highestTierAllowed
a job may land in (pre-filtered by its minResources), `hypernode_order` bin-packs HyperNodes, and `node_order`
keeps a constrained job's tasks close to where its gang already is (the tier of the lowest common ancestor) and
packs unconstrained pods into HyperNodes tier by tier with fading weights, so whole racks stay free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework import hypernodes
from lahar.scheduler.framework.hooks import REUSE_STATIC, REUSE_UNIFORM
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Job, Task, TaskStatus

__all__ = ["NetworkTopologyAware", "Options", "fading_weights", "parse_options"]

MAX_NODE_SCORE = 100.0  # kube-scheduler framework.MaxNodeScore
_PLACED = (*ALLOCATED, TaskStatus.PIPELINED)
_FEW = 8  # HyperNodes at most, for the float path of `_binpack` (numpy's per-call cost dominates below it)


def _number(args: Mapping[str, Any], key: str, default: float, kind: type) -> Any:
    """Volcano Arguments.GetInt / GetFloat64: numbers (and numeric strings) are taken, anything else is ignored;
    an int argument takes no fraction."""
    v = args.get(key)
    if isinstance(v, bool) or v is None:
        return default
    try:
        f = float(v.strip()) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        return default
    if kind is int:
        return int(f) if f.is_integer() else default
    return f


def _bool(args: Mapping[str, Any], key: str, default: bool) -> bool:
    v = args.get(key)
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return default


class Options:
    """The plugin's arguments with Volcano's defaults: `weight` 1, per-resource bin-pack weights (cpu, memory and
    `hypernode.binpack.resources`, each 1), `hypernode.binpack.normal-pod.enable` true, `.fading` 0.8."""

    __slots__ = ("weight", "resources", "normal_pod_enable", "fading")

    def __init__(self, weight: int, resources: dict[str, int], normal_pod_enable: bool, fading: float) -> None:
        self.weight = weight
        self.resources = resources
        self.normal_pod_enable = normal_pod_enable
        self.fading = fading

    def __repr__(self) -> str:
        return (f"Options(weight={self.weight}, resources={self.resources}, "
                f"normal_pod_enable={self.normal_pod_enable}, fading={self.fading})")


def parse_options(args: Mapping[str, Any]) -> Options:
    """Volcano getPriorityWeight / getNormalPodConfig: a negative weight or fading falls back to its default;
    fading 0 is allowed (only tier 1 counts)."""
    weight = int(_number(args, "weight", 1, int))
    weight = 1 if weight < 0 else weight
    cpu = int(_number(args, "hypernode.binpack.cpu", 1, int))
    memory = int(_number(args, "hypernode.binpack.memory", 1, int))
    resources = {"cpu": 1 if cpu < 0 else cpu, "memory": 1 if memory < 0 else memory}
    listed = args.get("hypernode.binpack.resources")
    for name in (listed.split(",") if isinstance(listed, str) else []):
        name = name.strip()
        if name:
            w = int(_number(args, f"hypernode.binpack.resources.{name}", 1, int))
            resources[name] = 1 if w < 0 else w
    fading = float(_number(args, "hypernode.binpack.normal-pod.fading", 0.8, float))
    fading = 0.8 if fading < 0 else fading
    return Options(weight, resources, _bool(args, "hypernode.binpack.normal-pod.enable", True), fading)


def fading_weights(tiers: tuple[int, ...], fading: float) -> dict[int, float]:
    """Every tier from the lowest to the highest present weighs fading^(tier-1) (0^0 = 1: with fading 0 only
    tier 1 counts)."""
    if not tiers:
        return {}
    return {t: float(fading ** (t - 1)) if t - 1 else 1.0 for t in range(tiers[0], tiers[-1] + 1)}


class NetworkTopologyAware:
    name = "network-topology-aware"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.options = parse_options(arguments or {})
        self.ssn: Session | None = None
        self.tree = hypernodes.Tree({}, [])
        self.names: list[str] = []
        self.pos: dict[str, int] = {}
        self.sums = hypernodes.RowSums(self.tree, [], {})  # per-HyperNode sums of node-row values
        self.hn_allocatable = np.zeros((0, 0))
        self.hn_used = np.zeros((0, 0))
        self.row_hypernodes: list[list[int]] = []  # per node row, the HyperNodes it is under
        self.row_members = np.zeros((0, 0))
        self.tier_of_row: dict[int, np.ndarray] = {}  # tier → per node row the HyperNode index of that tier (-1)
        self.leaf_of_row = np.zeros(0, dtype=np.intp)  # per node row its lowest HyperNode (-1: none)
        self.tier_weights = np.zeros(0)  # fading^(tier-1) per tier, lowest first
        self.tier_matrix = np.zeros((0, 0), dtype=np.intp)  # node row × tier → HyperNode index (len(names): none)
        # the distinct rows of tier_matrix (a node's HyperNode per tier) and each node row's: nodes of one path
        # score the same for a normal pod, so it is scored once per path
        self.paths = np.zeros((0, 0), dtype=np.intp)
        self.path_of_row = np.zeros(0, dtype=np.intp)
        self.tier_weight_sum = 0.0
        self.one_path = -1  # the HyperNode index of the only path when it is one tier long (len(names): none)
        self.by_leaf: dict[str, np.ndarray] = {}  # a job's HyperNode → LCA-tier score per lowest HyperNode
        self.constraints: dict[str, hypernodes.Constraint | None] = {}
        # job uid → ((job version, session decision), its HyperNode, its task counts per HyperNode), while valid
        self.memo: dict[str, tuple[tuple[int, str | None], str | None, np.ndarray | None]] = {}
        self.weights = np.zeros(0)
        self.binpack_dims: dict[bytes, tuple[Any, ...]] = {}  # request → its dims and HyperNode constants
        self.placed: dict[str, int] = {}

    # --- session ---------------------------------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.tree = tree = hypernodes.tree_of(ssn.snapshot.extras.get("hypernodes") or {}, [n.node for n in ssn.nodes])
        arrays = ssn.arrays
        self.names = sorted(tree.hypernodes)
        self.pos = {n: i for i, n in enumerate(self.names)}
        members = np.zeros((len(self.names), len(arrays)))
        for i, name in enumerate(self.names):
            members[i, tree.rows(name, arrays.index)] = 1.0
        self.sums = hypernodes.RowSums(tree, self.names, arrays.index)
        self.hn_allocatable = self.sums(arrays.allocatable)
        self.hn_used = self.sums(arrays.used)
        self.row_hypernodes = [np.flatnonzero(members[:, r]).tolist() for r in range(len(arrays))]
        self.row_members = np.ascontiguousarray(members.T)  # node row × HyperNode, 1 where the row is under it
        self.leaf_of_row = np.array([self.pos.get(tree.leaf_of(name), -1) for name in arrays.names], dtype=np.intp)
        self.by_leaf = {}
        self.constraints = {}
        self.memo = {}
        self.tier_of_row = {}
        for tier in range(tree.tiers[0], tree.tiers[-1] + 1) if tree.tiers else ():
            col = np.full(len(arrays), -1, dtype=np.intp)
            for name in reversed(tree.by_tier.get(tier, [])):  # the first by name wins for a node in two
                col[tree.rows(name, arrays.index)] = self.pos[name]
            self.tier_of_row[tier] = col
        tiers = sorted(self.tier_of_row)
        fading = fading_weights(self.tree.tiers, self.options.fading)
        self.tier_weights = np.array([fading[t] for t in tiers])
        self.tier_matrix = (np.stack([np.where(self.tier_of_row[t] >= 0, self.tier_of_row[t], len(self.names))
                                      for t in tiers], axis=1) if tiers
                            else np.zeros((len(arrays), 0), dtype=np.intp))
        self.tier_weight_sum = float(self.tier_weights.sum())
        if self.tier_matrix.size:
            paths, inverse = np.unique(self.tier_matrix, axis=0, return_inverse=True)
            self.paths, self.path_of_row = paths, np.asarray(inverse, dtype=np.intp).reshape(-1)
        else:
            self.paths = np.zeros((0, self.tier_matrix.shape[1]), dtype=np.intp)
            self.path_of_row = np.zeros(len(arrays), dtype=np.intp)
        self.one_path = int(self.paths[0, 0]) if self.paths.shape == (1, 1) else -1
        names = ssn.resources.names
        self.weights = np.array([float(self.options.resources.get(n, -1)) for n in names])
        self.binpack_dims = {}
        self.placed = {}

    def on_allocate(self, task: Task) -> None:
        if task.node >= 0 and len(self.names):
            used = self.hn_used
            for h in self.row_hypernodes[task.node]:  # a few rows: a view each is cheaper than a fancy index
                used[h] += task.resreq
            self.placed[task.uid] = task.node

    def on_deallocate(self, task: Task) -> None:
        row = self.placed.pop(task.uid, task.node)
        if row >= 0 and len(self.names):
            used = self.hn_used
            for h in self.row_hypernodes[row]:
                used[h] -= task.resreq

    # --- helpers ---------------------------------------------------------------------------------------------------

    def constraint(self, job: Job) -> hypernodes.Constraint | None:
        got = self.constraints.get(job.uid, False)
        if got is False:
            got = self.constraints[job.uid] = hypernodes.constraint(
                (job.podgroup.get("spec") or {}).get("networkTopology"), self.tree)
        return got  # type: ignore[return-value]

    def allocated(self, job: Job) -> str:
        """Where the job runs: the session's decision, else the PodGroup's annotation, joined (LCA) with the
        lowest HyperNodes of its tasks placed so far in this session."""
        assert self.ssn is not None
        key = (job.version, self.ssn.allocated_hypernodes.get(job.uid))
        memo = self.memo.get(job.uid)
        if memo is not None and memo[0] == key and memo[1] is not None:
            return memo[1]
        out = self._allocated(job)
        self.memo[job.uid] = (key, out, None)
        return out

    def _allocated(self, job: Job) -> str:
        assert self.ssn is not None
        base = self.ssn.allocated_hypernodes.get(job.uid)
        if base is None:
            base = ((job.podgroup.get("metadata") or {}).get("annotations") or {}).get(
                hypernodes.ALLOCATED_HYPERNODE_ANNOTATION, "")
            base = base if base in self.tree else ""
        out = base
        for status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            for t in job.index.get(status, {}).values():
                if t.node >= 0:
                    leaf = self.tree.leaf_of(t.node_name)
                    if leaf:
                        out = self.tree.lca(out, leaf)
        return out

    def _binpack(self, request: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """Per HyperNode in `idx` (None: every one): Σ weight·(used + request)/allocatable over requested weighted
        resources, / Σ weight; 0 when the request does not fit what the HyperNode has left."""
        key = request.tobytes()
        got = self.binpack_dims.get(key)
        if got is None:
            dims = np.flatnonzero((request >= EPSILON) & (self.weights >= 0))
            alloc = self.hn_allocatable[:, dims]
            w = self.weights[dims]
            total = float(w.sum())
            safe = np.where(alloc > 0, alloc, 1.0)  # ratio 0 where the HyperNode has none of the resource
            got = self.binpack_dims[key] = (dims, request[dims], safe, alloc > 0, alloc + EPSILON, w, total)
        dims, req, safe, has, limit, w, total = got
        n = len(self.names) if idx is None else len(idx)
        if not len(dims) or not n or total <= 0:
            return np.zeros(n)
        if idx is None and len(dims) <= 2 and n <= _FEW:
            return np.array([self._binpack_one(h, got) for h in range(n)], dtype=np.float64)
        if idx is not None:
            safe, has, limit = safe[idx], has[idx], limit[idx]
        final = (self.hn_used[:, dims] if idx is None else self.hn_used[np.ix_(idx, dims)]) + req
        over = (final > limit).any(axis=1)
        score = (np.where(has, final / safe, 0.0) * w).sum(axis=1) / total
        score[over] = 0.0
        return score

    def _binpack_at(self, request: np.ndarray, h: int) -> float:
        """`_binpack(request)[h]`, to the bit, without working out the other HyperNodes."""
        got = self.binpack_dims.get(request.tobytes())
        if got is not None and len(got[0]) <= 2 and got[6] > 0:
            return self._binpack_one(h, got)
        return float(self._binpack(request)[h])

    def _binpack_one(self, h: int, got: tuple[Any, ...]) -> float:
        """`_binpack` of one HyperNode in float arithmetic, numpy's order (a sum of at most two terms: the same
        to the bit), for a tree of a few HyperNodes where numpy's per-call cost is most of the work."""
        dims, req, safe, has, limit, w, total = got
        score = 0.0
        for j in range(len(dims)):
            final = self.hn_used.item(h, int(dims[j])) + req.item(j)
            if final > limit.item(h, j):
                return 0.0
            score += (final / safe.item(h, j) if has.item(h, j) else 0.0) * w.item(j)
        return score / total

    def _task_counts(self, job: Job) -> np.ndarray:
        """Per HyperNode, how many of the job's tasks run (or are placed) under it (Volcano scoreWithTaskNum)."""
        memo = self.memo.get(job.uid)
        if memo is not None and memo[0][0] == job.version and memo[2] is not None:
            return memo[2]
        rows = [t.node for s in _PLACED for t in job.index.get(s, {}).values() if t.node >= 0]
        counts = self.row_members[rows].sum(axis=0) if rows else np.zeros(len(self.names))
        if memo is not None and memo[0][0] == job.version:
            self.memo[job.uid] = (memo[0], memo[1], counts)
        return counts

    def _tier_score(self, tier: int) -> float:
        lo, hi = self.tree.tiers[0], self.tree.tiers[-1]
        if lo == hi:
            return 1.0
        return (hi - tier) / (hi - lo) if lo <= tier <= hi else 0.0

    # --- hooks -----------------------------------------------------------------------------------------------------

    def hypernode_gradient(self, job: Job) -> list[list[str]] | None:
        c = self.constraint(job)
        if c is None or not len(self.names):
            return None
        assert self.ssn is not None
        need = job.min_resources
        eligible = None
        if need is not None and (need > EPSILON).any():
            arrays = self.ssn.arrays
            idle = self.sums(arrays.idle)
            future = self.sums(arrays.future_idle())

            def eligible(name: str) -> bool:
                i = self.pos[name]
                return bool((need <= idle[i] + EPSILON).all() or (need <= future[i] + EPSILON).all())

        return hypernodes.gradient(self.tree, highest_tier=c.highest_tier, allocated=self.allocated(job),
                                   eligible=eligible)

    def hypernode_order(self, job: Job, names: list[str]) -> np.ndarray:
        """Bin-pack the job's whole request into each HyperNode; ties at the top broken by the share of the job's
        tasks already there; × 100 × weight."""
        idx = np.array([self.pos[n] for n in names], dtype=np.intp)
        request = np.zeros(self.hn_allocatable.shape[1]) if not job.tasks else sum(t.resreq for t in job.tasks.values())
        scores = self._binpack(np.asarray(request), idx)
        if len(scores) > 1:
            top = np.flatnonzero(scores >= scores.max())
            if len(top) > 1 and job.tasks:
                scores[top] += self._task_counts(job)[idx[top]] / len(job.tasks)
        return scores * MAX_NODE_SCORE * self.options.weight

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Zero everywhere without HyperNodes, or for a task of no job of the session, or a normal pod when
        normal-pod scoring is off; one number everywhere for a normal pod when every node is under one HyperNode
        of one tier; else asked every time (the scores follow the job's placements and the HyperNodes' usage)."""
        if not len(self.names):
            return REUSE_STATIC, None
        assert self.ssn is not None
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return REUSE_STATIC, None
        if self.constraint(job) is not None:
            return None
        if (not self.options.normal_pod_enable or not len(self.tier_weights) or self.tier_weight_sum <= 0):
            return REUSE_STATIC, None
        return (REUSE_UNIFORM, None) if self.one_path >= 0 else None

    def node_order_uniform(self, task: Task) -> float:
        """`node_order`'s score on every node of a normal pod when every node is under one HyperNode of one tier:
        the same arithmetic, on one number."""
        return self._one_path_score(task) * MAX_NODE_SCORE * self.options.weight

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        assert self.ssn is not None
        if not len(self.names) or not len(candidates):
            return np.zeros(len(candidates))
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return np.zeros(len(candidates))
        if self.constraint(job) is None:
            scores = self._normal_pod(task, candidates)
        else:
            scores = self._network_pod(job, candidates)
        return scores * MAX_NODE_SCORE * self.options.weight

    def _normal_pod(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        """Tier by tier, the bin-pack score of the HyperNode holding the node (a node under none: full score),
        weighted fading^(tier-1) and averaged."""
        if not self.options.normal_pod_enable:
            return np.zeros(len(candidates))
        if not len(self.tier_weights) or self.tier_weight_sum <= 0:
            return np.zeros(len(candidates))
        if self.one_path >= 0:
            return np.full(len(candidates), self._one_path_score(task))
        hn_scores = np.append(self._binpack(task.resreq), 1.0)  # last: under none
        per_path = (hn_scores[self.paths] @ self.tier_weights) / self.tier_weight_sum
        return per_path[self.path_of_row[candidates]]

    def _one_path_score(self, task: Task) -> float:
        """`_normal_pod`'s score, the same on every node, when every node is under one HyperNode of one tier (a
        cluster without HyperNode objects: the cluster's top alone): worked out for that HyperNode only."""
        h = self.one_path
        x = 1.0 if h == len(self.names) else self._binpack_at(task.resreq, h)
        return x * self.tier_weights.item(0) / self.tier_weight_sum

    def _network_pod(self, job: Job, candidates: np.ndarray) -> np.ndarray:
        """The lower the tier of the LCA of the node's HyperNode and the job's, the better (1 inside the job's own
        HyperNode); ties at the top broken by the share of the job's tasks under the node's HyperNode."""
        leaves = self.leaf_of_row[candidates]
        if (leaves == leaves[0]).all():
            return np.zeros(len(candidates))  # one HyperNode (a hard gang inside its rack): the same for every node
        allocated = self.allocated(job)
        if not allocated:
            return np.zeros(len(candidates))
        by_leaf = self.by_leaf.get(allocated)
        if by_leaf is None:
            by_leaf = np.zeros(len(self.names) + 1)  # the last: a node under no HyperNode (leaf -1)
            for leaf in np.unique(self.leaf_of_row):
                if leaf < 0:
                    continue
                name = self.names[leaf]
                if name == allocated:
                    by_leaf[leaf] = 1.0
                else:
                    lca = self.tree.lca(name, allocated)
                    by_leaf[leaf] = self._tier_score(self.tree.hypernodes[lca].tier) if lca else 0.0
            self.by_leaf[allocated] = by_leaf
        scores = by_leaf[leaves]  # leaf -1 reads the last entry, 0
        top = np.flatnonzero(scores >= scores.max())
        if len(top) > 1 and job.tasks:
            share = np.append(self._task_counts(job) / len(job.tasks), 0.0)
            scores[top] += share[leaves[top]]
        return scores
