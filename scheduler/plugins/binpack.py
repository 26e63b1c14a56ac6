"""binpack: prefer nodes that the task fills most — per requested resource, (used + request) / allocatable
weighted by `binpack.cpu`, `binpack.memory`, `binpack.resources.<name>`, averaged, × 100 × `binpack.weight`.

Volcano's `plugins/binpack` (spec §5.4); vectorised over the node arrays and cached per request like nodeorder;
what depends on the request alone (`Prepared`) is worked out once per request and session.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import REUSE_ROWS, REUSE_STATIC
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task

__all__ = ["MAX_NODE_SCORE", "BinPack", "Prepared", "Weights", "binpack_scores", "parse_weights"]

MAX_NODE_SCORE = 100.0  # kube-scheduler framework.MaxNodeScore
_FEW = 8  # rows recomputed at most, for the per-row float path (numpy's per-call cost dominates below it)


class Weights:
    """`binpack.weight` and the per-resource weights (cpu, memory and those listed in `binpack.resources`)."""

    __slots__ = ("weight", "resources")

    def __init__(self, weight: int, resources: dict[str, int]) -> None:
        self.weight = weight
        self.resources = resources

    def __repr__(self) -> str:
        return f"Weights(weight={self.weight}, resources={self.resources})"


def _int(args: Mapping[str, Any], key: str, default: int) -> int:
    """Volcano Arguments.GetInt: ints (and numeric strings) are taken, anything else keeps the default."""
    v = args.get(key)
    if isinstance(v, bool) or v is None:
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            return default
    return default


def parse_weights(args: Mapping[str, Any]) -> Weights:
    """Volcano calculateWeight: every weight defaults to 1; a negative resource weight falls back to 1."""
    weight = _int(args, "binpack.weight", 1)
    cpu = _int(args, "binpack.cpu", 1)
    memory = _int(args, "binpack.memory", 1)
    cpu = 1 if cpu < 0 else cpu
    memory = 1 if memory < 0 else memory
    resources: dict[str, int] = {}
    listed = args.get("binpack.resources")
    for name in (listed.split(",") if isinstance(listed, str) else []):
        name = name.strip()
        if not name:
            continue
        w = _int(args, f"binpack.resources.{name}", 1)
        resources[name] = 1 if w < 0 else w
    resources["cpu"] = cpu
    resources["memory"] = memory
    return Weights(weight, resources)


class Prepared:
    """What `binpack_scores` derives from a request and the weights alone, worked out once per request: the
    dimensions scored (requested and weighted), their requests and weights, and the weight sum."""

    __slots__ = ("dims", "req", "w", "zero_w", "weight_sum", "scale", "scalar")

    def __init__(self, request: np.ndarray, weights: np.ndarray, weight: int) -> None:
        self.dims = np.flatnonzero((request >= EPSILON) & (weights >= 0))
        self.req, self.w = request[self.dims], weights[self.dims]
        self.zero_w = self.w == 0
        self.weight_sum = float(self.w.sum())
        self.scale = MAX_NODE_SCORE * weight
        # (dim, request, weight) as floats, for the few-rows path: with at most two dimensions, plain float
        # arithmetic in numpy's order gives numpy's results to the bit (a sum of two is the same either way round)
        self.scalar = ([(int(d), float(q), float(x)) for d, q, x in zip(self.dims, self.req, self.w, strict=True)]
                       if len(self.dims) <= 2 else None)

    def scores(self, allocatable: np.ndarray, used: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Over every node (`rows` None) or over `rows`."""
        n = len(allocatable) if rows is None else len(rows)
        if not len(self.dims):
            return np.zeros(n)
        if rows is not None and n <= _FEW and self.scalar is not None:
            return np.array([self._row(allocatable, used, row) for row in rows.tolist()], dtype=np.float64)
        if rows is None:
            alloc, final = allocatable[:, self.dims], used[:, self.dims] + self.req
        else:
            sel = np.ix_(rows, self.dims)
            alloc, final = allocatable[sel], used[sel] + self.req
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where((alloc == 0) | (final > alloc) | self.zero_w, 0.0, final * self.w / alloc)
        score = per.sum(axis=1)
        if self.weight_sum > 0:
            score = score / self.weight_sum
        return score * self.scale


    def _row(self, allocatable: np.ndarray, used: np.ndarray, row: int) -> float:
        score = 0.0
        for d, req, w in self.scalar or ():
            alloc = allocatable.item(row, d)
            final = used.item(row, d) + req
            if alloc != 0 and final <= alloc and w != 0:
                score += final * w / alloc
        if self.weight_sum > 0:
            score = score / self.weight_sum
        return score * self.scale


def binpack_scores(request: np.ndarray, allocatable: np.ndarray, used: np.ndarray, weights: np.ndarray,
                   weight: int) -> np.ndarray:
    """BinPackingScore over nodes (rows): `weights[r]` < 0 marks a resource without a weight (skipped)."""
    return Prepared(request, weights, weight).scores(allocatable, used)


class BinPack:
    name = "binpack"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.weights = parse_weights(self.arguments)
        self._vector = np.zeros(0)
        self._cache: RowCache | None = None
        self._prepared: dict[bytes, Prepared] = {}  # per request, this session

    def on_session_open(self, ssn: Session) -> None:
        names = ssn.resources.names
        self._vector = np.array([float(self.weights.resources.get(n, -1)) for n in names])
        self._prepared = {}
        nodes = ssn.arrays
        self._cache = RowCache(nodes, lambda prep, rows: prep.scores(nodes.allocatable, nodes.used, rows))

    def _prepare(self, key: bytes, request: np.ndarray) -> Prepared:
        prep = self._prepared.get(key)
        if prep is None:
            prep = self._prepared[key] = Prepared(request, self._vector, self.weights.weight)
        return prep

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """A node's score reads its allocatable and used row and the request alone."""
        if self.weights.weight == 0:
            return REUSE_STATIC, None
        return None if self._cache is None else (REUSE_ROWS, task.resreq.tobytes())

    def node_order_rows(self, task: Task) -> Callable[[np.ndarray], np.ndarray]:
        assert self._cache is not None
        nodes = self._cache.arrays
        prep = self._prepare(task.resreq.tobytes(), task.resreq)
        return functools.partial(prep.scores, nodes.allocatable, nodes.used)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """Zero everywhere when `binpack.weight` is 0 (Volcano registers no NodeOrderFn then)."""
        if self.weights.weight == 0:
            return np.zeros(len(candidates))
        key = task.resreq.tobytes()
        prep = self._prepare(key, task.resreq)
        if self._cache is None or self._cache.arrays is not nodes:
            return prep.scores(nodes.allocatable, nodes.used)[candidates]
        return self._cache.get(key, prep)[candidates]
