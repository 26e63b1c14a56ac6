"""binpack: prefer nodes that the task fills most — per requested resource, (used + request) / allocatable
weighted by `binpack.cpu`, `binpack.memory`, `binpack.resources.<name>`, averaged, × 100 × `binpack.weight`.

Volcano's `plugins/binpack` (spec §5.4); vectorised over the node arrays and cached per request like nodeorder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task

__all__ = ["MAX_NODE_SCORE", "BinPack", "Weights", "binpack_scores", "parse_weights"]

MAX_NODE_SCORE = 100.0  # kube-scheduler framework.MaxNodeScore


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


def binpack_scores(request: np.ndarray, allocatable: np.ndarray, used: np.ndarray, weights: np.ndarray,
                   weight: int) -> np.ndarray:
    """BinPackingScore over nodes (rows): `weights[r]` < 0 marks a resource without a weight (skipped)."""
    dims = (request >= EPSILON) & (weights >= 0)
    if not dims.any():
        return np.zeros(len(allocatable))
    req, w = request[dims], weights[dims]
    alloc, final = allocatable[:, dims], used[:, dims] + req
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where((alloc == 0) | (final > alloc) | (w == 0), 0.0, final * w / alloc)
    score = per.sum(axis=1)
    weight_sum = float(w.sum())
    if weight_sum > 0:
        score = score / weight_sum
    return score * (MAX_NODE_SCORE * weight)


class BinPack:
    name = "binpack"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.weights = parse_weights(self.arguments)
        self._vector = np.zeros(0)
        self._cache: RowCache | None = None

    def on_session_open(self, ssn: Session) -> None:
        names = ssn.resources.names
        self._vector = np.array([float(self.weights.resources.get(n, -1)) for n in names])
        nodes = ssn.arrays
        self._cache = RowCache(nodes, lambda req, rows: self._score(nodes, req, rows))

    def _score(self, nodes: NodeArrays, req: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        if rows is None:
            return binpack_scores(req, nodes.allocatable, nodes.used, self._vector, self.weights.weight)
        return binpack_scores(req, nodes.allocatable[rows], nodes.used[rows], self._vector, self.weights.weight)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """Zero everywhere when `binpack.weight` is 0 (Volcano registers no NodeOrderFn then)."""
        if self.weights.weight == 0:
            return np.zeros(len(candidates))
        if self._cache is None or self._cache.arrays is not nodes:
            return self._score(nodes, task.resreq, None)[candidates]
        return self._cache.get(task.resreq.tobytes(), task.resreq)[candidates]
