"""nodeorder: score candidate nodes with the kube-scheduler score plugins Volcano wraps, with Volcano's weights
and argument names (spec §5.4):

- per node, not normalised (Volcano's NodeOrderFn): NodeResourcesFit LeastAllocated (`leastrequested.weight` 1) and
  MostAllocated (`mostrequested.weight` 0) over cpu and memory; BalancedAllocation (`balancedresource.weight` 1)
  over cpu, memory and nvidia.com/gpu; preferred NodeAffinity (`nodeaffinity.weight` 2: the matched preference
  weights, as Volcano adds them without normalising); ImageLocality (`imagelocality.weight` 1).
- over the candidates, normalised to 0..100 then weighted (Volcano's BatchNodeOrderFn): TaintToleration
  (`tainttoleration.weight` 3, PreferNoSchedule taints), InterPodAffinity (`podaffinity.weight` 2, preferred
  terms and placed pods' terms), PodTopologySpread (`podtopologyspread.weight` 2, ScheduleAnyway constraints).

Resource scores are vectorised over the node arrays and cached per request (only changed rows recomputed); the
label and taint parts are cached per pod signature; pod-dependent parts read the session's pod view.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import REUSE_ROWS
from lahar.scheduler.framework.nodes import NodeArrays, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins import _affinity, _spread
from lahar.scheduler.plugins._podview import PodProfile, PodView, profile_of, view_of
from lahar.scheduler.plugins._shared.nodematch import (
    node_selector_terms_mask,
    static_masks,
    taint_groups,
    untolerated_prefer_no_schedule,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "MAX_NODE_SCORE",
    "NodeOrder",
    "balanced_allocation",
    "image_locality",
    "least_allocated",
    "most_allocated",
    "reverse_normalize",
]

MAX_NODE_SCORE = 100.0
# kube-scheduler's non-zero defaults for pods that request no cpu / memory (used when scoring).
DEFAULT_MILLI_CPU = 100.0
DEFAULT_MEMORY = 200.0 * 1024 * 1024
GPU = "nvidia.com/gpu"
MB = 1024 * 1024
IMAGE_MIN = 23 * MB
IMAGE_MAX_PER_CONTAINER = 1000 * MB

DEFAULT_WEIGHTS: dict[str, int] = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "podaffinity.weight": 2,
    "tainttoleration.weight": 3,
    "imagelocality.weight": 1,
    "podtopologyspread.weight": 2,
}


def _weight(args: Mapping[str, Any], key: str) -> float:
    """Volcano Arguments.GetInt: an int (or a numeric string); anything else keeps the default."""
    v = args.get(key, DEFAULT_WEIGHTS[key])
    try:
        return float(int(v))
    except (TypeError, ValueError):
        return float(DEFAULT_WEIGHTS[key])


def least_allocated(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """Per node, mean over the resources with allocatable > 0 of ⌊(allocatable − requested) · 100 /
    allocatable⌋ (0 where requested exceeds allocatable), floored (equal weights)."""
    valid = allocatable > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor((allocatable - requested) * MAX_NODE_SCORE / allocatable)
    per = np.where(~valid | (requested > allocatable), 0.0, per)
    return np.floor(per.sum(axis=1) / np.maximum(valid.sum(axis=1), 1))


def most_allocated(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """Per node, mean of ⌊min(requested, allocatable) · 100 / allocatable⌋ over resources with allocatable > 0."""
    valid = allocatable > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor(np.minimum(requested, allocatable) * MAX_NODE_SCORE / allocatable)
    per = np.where(valid, per, 0.0)
    return np.floor(per.sum(axis=1) / np.maximum(valid.sum(axis=1), 1))


def balanced_allocation(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """⌊(1 − std(requested/allocatable)) · 100⌋ over the resources with allocatable > 0, fractions capped at 1
    (two resources: |f₀ − f₁| / 2, as kube-scheduler computes it)."""
    valid = allocatable > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(valid, np.minimum(requested / allocatable, 1.0), 0.0)
    if frac.shape[1] == 2 and valid.all():
        std = np.abs((frac[:, 0] - frac[:, 1]) / 2.0)
    else:
        cnt = valid.sum(axis=1)
        mean = frac.sum(axis=1) / np.maximum(cnt, 1)
        var = (np.where(valid, frac - mean[:, None], 0.0) ** 2).sum(axis=1) / np.maximum(cnt, 1)
        std = np.where(cnt == 2, np.sqrt(var), np.where(cnt > 2, np.sqrt(var), 0.0))
    return np.floor((1.0 - std) * MAX_NODE_SCORE)


def reverse_normalize(counts: np.ndarray) -> np.ndarray:
    """DefaultNormalizeScore(100, reverse=true): 100 − ⌊100 · c / max⌋; 100 everywhere when max is 0."""
    top = float(counts.max()) if len(counts) else 0.0
    if top <= 0:
        return np.full(len(counts), MAX_NODE_SCORE)
    return MAX_NODE_SCORE - np.floor(MAX_NODE_SCORE * counts / top)


def image_locality(sums: np.ndarray, containers: int) -> np.ndarray:
    """ImageLocality calculatePriority: the summed scaled image sizes, clamped to [23 MB, 1000 MB · containers],
    mapped to 0..100."""
    hi = IMAGE_MAX_PER_CONTAINER * max(containers, 1)
    s = np.clip(sums, IMAGE_MIN, hi)
    return np.floor(MAX_NODE_SCORE * (s - IMAGE_MIN) / (hi - IMAGE_MIN))


class NodeOrder:
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.least_weight = _weight(args, "leastrequested.weight")
        self.most_weight = _weight(args, "mostrequested.weight")
        self.balanced_weight = _weight(args, "balancedresource.weight")
        self.node_affinity_weight = _weight(args, "nodeaffinity.weight")
        self.pod_affinity_weight = _weight(args, "podaffinity.weight")
        self.taint_weight = _weight(args, "tainttoleration.weight")
        self.image_weight = _weight(args, "imagelocality.weight")
        self.spread_weight = _weight(args, "podtopologyspread.weight")
        self._cache: RowCache | None = None
        self._reqs: dict[bytes, np.ndarray] = {}  # a task's request → its balanced columns (cpu, memory[, gpu])
        self._alloc: np.ndarray | None = None
        self._balloc: np.ndarray | None = None
        self._balloc_rows: list[list[float]] = []
        self._cols: list[int] = []
        self._bcols: list[int] = []
        self.view: PodView | None = None
        self._static: dict[str, np.ndarray | None] = {}
        self._taints: dict[str, np.ndarray | None] = {}
        self._images: dict[str, tuple[float, np.ndarray]] | None = None

    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.arrays
        r = nodes.resources
        self._cols = [r.cpu, r.memory]
        self._bcols = self._cols + ([r.pos[GPU]] if GPU in r.pos else [])
        self._alloc = np.ascontiguousarray(nodes.allocatable[:, self._cols])
        self._balloc = np.ascontiguousarray(nodes.allocatable[:, self._bcols])
        self._balloc_rows = self._balloc.tolist()
        self._cache = RowCache(nodes, lambda req, rows: self._score(nodes, req, rows))
        self._reqs = {}
        self.view = view_of(ssn, self)
        self._static.clear()
        self._taints.clear()
        self._images = None

    def on_allocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_deallocate(task)

    # --- resources (NodeResourcesFit, BalancedAllocation) ----------------------------------------------------

    def _score(self, nodes: NodeArrays, req: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """`req`: the pod's request over the balanced columns (cpu, memory[, gpu])."""
        assert self._alloc is not None and self._balloc is not None
        if rows is not None and len(rows) <= 8:  # after one placement: a row or two, cheaper in plain Python
            used = nodes.used
            cols = self._bcols
            r = req.tolist()
            out = []
            for i in rows.tolist():
                row = used[i].tolist()
                out.append(self._score_row(self._balloc_rows[i], [row[c] for c in cols], r))
            return np.array(out, dtype=np.float64)
        if rows is None:
            alloc, balloc, used = self._alloc, self._balloc, nodes.used[:, self._bcols]
        else:
            alloc, balloc, used = self._alloc[rows], self._balloc[rows], nodes.used[rows][:, self._bcols]
        score = np.zeros(len(alloc), dtype=np.float64)
        if self.least_weight or self.most_weight:
            nonzero = np.array([req[0] if req[0] > 0 else DEFAULT_MILLI_CPU, req[1] if req[1] > 0 else DEFAULT_MEMORY])
            requested = used[:, :2] + nonzero
            if self.least_weight:
                score += least_allocated(alloc, requested) * self.least_weight
            if self.most_weight:
                score += most_allocated(alloc, requested) * self.most_weight
        if self.balanced_weight and (req > 0).any():
            cols = [0, 1] + [i for i in range(2, len(req)) if req[i] > 0]  # scalars only when requested
            score += balanced_allocation(balloc[:, cols], used[:, cols] + req[cols]) * self.balanced_weight
        return score

    def _score_row(self, alloc: list[float], used: list[float], r: list[float]) -> float:
        """`_score` for one node with Python floats (the same formulas, operation for operation); `r` is the
        request over the balanced columns as floats."""
        score = 0.0
        if self.least_weight or self.most_weight:
            req0 = used[0] + (r[0] if r[0] > 0 else DEFAULT_MILLI_CPU)
            req1 = used[1] + (r[1] if r[1] > 0 else DEFAULT_MEMORY)
            least = most = 0.0
            cnt = 0
            for a, q in ((alloc[0], req0), (alloc[1], req1)):
                if a > 0:
                    cnt += 1
                    least += 0.0 if q > a else math.floor((a - q) * MAX_NODE_SCORE / a)
                    most += math.floor(min(q, a) * MAX_NODE_SCORE / a)
            cnt = max(cnt, 1)
            if self.least_weight:
                score += math.floor(least / cnt) * self.least_weight
            if self.most_weight:
                score += math.floor(most / cnt) * self.most_weight
        if self.balanced_weight and any(x > 0 for x in r):
            fracs = [min((used[c] + r[c]) / alloc[c], 1.0) for c in range(len(r))
                     if (c < 2 or r[c] > 0) and alloc[c] > 0]
            if len(fracs) == 2:
                std = abs((fracs[0] - fracs[1]) / 2.0)
            elif len(fracs) > 2:
                mean = sum(fracs) / len(fracs)
                std = math.sqrt(sum((f - mean) ** 2 for f in fracs) / len(fracs))
            else:
                std = 0.0
            score += math.floor((1.0 - std) * MAX_NODE_SCORE) * self.balanced_weight
        return score

    # --- per-signature node scores (NodeAffinity, ImageLocality, TaintToleration) ----------------------------

    def _static_scores(self, prof: PodProfile) -> np.ndarray | None:
        key = prof.score_key
        if key in self._static:
            return self._static[key]
        view = self.view
        assert view is not None
        out: np.ndarray | None = None
        if self.node_affinity_weight and prof.preferred_terms:
            raw = np.zeros(view.n, dtype=np.float64)
            for pt in prof.preferred_terms:
                w = int(pt.get("weight") or 0)
                if w:
                    raw += w * node_selector_terms_mask(view, [pt.get("preference") or {}])
            out = raw * self.node_affinity_weight
        if self.image_weight and prof.images:
            images = self._image_states(view)
            sums = np.zeros(view.n, dtype=np.float64)
            hit = False
            for name in prof.images:
                state = images.get(name)
                if state is not None:
                    scaled, idx = state
                    sums[idx] += scaled
                    hit = True
            if hit:
                spec = prof.spec
                containers = len(spec.get("containers") or ()) + len(spec.get("initContainers") or ())
                part = image_locality(sums, containers) * self.image_weight
                out = part if out is None else out + part
        self._static[key] = out
        return out

    def _image_states(self, view: PodView) -> dict[str, tuple[float, np.ndarray]]:
        """Image name → (size scaled by the share of nodes holding it, those nodes) from `status.images`."""
        if self._images is None:
            where: dict[str, list[int]] = {}
            size: dict[str, int] = {}
            for node in view.nodes:
                for img in (node.node.get("status") or {}).get("images") or ():
                    for name in img.get("names") or ():
                        where.setdefault(name, []).append(node.index)
                        size[name] = int(img.get("sizeBytes") or 0)
            total = max(view.n, 1)
            self._images = {name: (float(int(size[name] * (len(ix) / total))), np.array(ix, dtype=np.int64))
                            for name, ix in where.items()}
        return self._images

    def _taint_counts(self, prof: PodProfile) -> np.ndarray | None:
        """Per node, the PreferNoSchedule taints the pod does not tolerate (None when there are none anywhere)."""
        key = prof.static_key
        if key in self._taints:
            return self._taints[key]
        view = self.view
        assert view is not None
        out: np.ndarray | None = None
        for taints, idx in taint_groups(view):
            c = untolerated_prefer_no_schedule(taints, prof.tolerations)
            if c:
                if out is None:
                    out = np.zeros(view.n, dtype=np.float64)
                out[idx] = c
        self._taints[key] = out
        return out

    # --- the hook ----------------------------------------------------------------------------------------------

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Row by row when no part of the score is normalised over the candidates or reads other pods (untolerated
        PreferNoSchedule taints, inter-pod affinity, topology spread): resources by the request, node affinity and
        images by the pod's `score_key`, the taint part (a constant then) by its `static_key`."""
        if self._cache is None:
            return None
        key = task.resreq.tobytes()
        view = self.view
        if view is None:
            return REUSE_ROWS, key
        prof = profile_of(task)
        if self.taint_weight and self._taint_counts(prof) is not None:
            return None
        if self.pod_affinity_weight and (prof.aff_pref or prof.anti_pref or view.term_groups()):
            return None
        if self.spread_weight and prof.spread_soft:
            return None
        return REUSE_ROWS, (key, prof.score_key, prof.static_key)

    def node_order_rows(self, task: Task) -> Callable[[np.ndarray], np.ndarray]:
        """`node_order` over rows, for a task `node_order_reuse` answers for: the same parts, added in its order."""
        assert self._cache is not None
        nodes = self._cache.arrays
        key = task.resreq.tobytes()
        req = self._reqs.get(key)
        if req is None:
            req = self._reqs[key] = task.resreq[self._bcols]
        if self.view is None:
            return functools.partial(self._score, nodes, req)
        static = self._static_scores(profile_of(task))
        taint = MAX_NODE_SCORE * self.taint_weight if self.taint_weight else None

        def score_rows(rows: np.ndarray) -> np.ndarray:
            score = self._score(nodes, req, rows)
            if static is not None:
                score += static[rows]
            if taint is not None:
                score += taint
            return score

        return score_rows

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        if self._cache is None or self._cache.arrays is not nodes:
            if self._alloc is None or len(self._alloc) != len(nodes):
                self.on_session_open_arrays(nodes)
            req = task.resreq[self._bcols]
            score = self._score(nodes, req, None)[candidates]
        else:
            key = task.resreq.tobytes()  # the whole request as the key: its balanced columns taken once per request
            req = self._reqs.get(key)
            if req is None:
                req = self._reqs[key] = task.resreq[self._bcols]
            score = self._cache.get(key, req)[candidates]
        view = self.view
        if view is None:
            return score
        prof = profile_of(task)
        static = self._static_scores(prof)
        if static is not None:
            score += static[candidates]
        if self.taint_weight:
            counts = self._taint_counts(prof)
            if counts is None:
                score += MAX_NODE_SCORE * self.taint_weight
            else:
                score += reverse_normalize(counts[candidates]) * self.taint_weight
        if self.pod_affinity_weight and (prof.aff_pref or prof.anti_pref or view.term_groups()):
            raw = _affinity.raw_scores(view, prof)
            if raw is not None:
                score += _affinity.normalize(raw[candidates]) * self.pod_affinity_weight
        if self.spread_weight and prof.spread_soft:
            masks = static_masks(view, prof)
            score += _spread.scores(view, prof, candidates, masks.affinity_ok, masks.taints_ok) * self.spread_weight
        return score

    def on_session_open_arrays(self, nodes: NodeArrays) -> None:
        """Used without a session (unit tests calling `node_order` directly): resource columns only."""
        r = nodes.resources
        self._cols = [r.cpu, r.memory]
        self._bcols = self._cols + ([r.pos[GPU]] if GPU in r.pos else [])
        self._alloc = np.ascontiguousarray(nodes.allocatable[:, self._cols])
        self._balloc = np.ascontiguousarray(nodes.allocatable[:, self._bcols])
        self._balloc_rows = self._balloc.tolist()
