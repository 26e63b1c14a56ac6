"""nodeorder: score candidate nodes like kube-scheduler's NodeResourcesFit (LeastAllocated / MostAllocated) and
BalancedAllocation, weighted by Volcano's defaults (`leastrequested.weight` 1, `mostrequested.weight` 0,
`balancedresource.weight` 1). Vectorised over the candidate rows of the node arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scheduler.framework.nodes import NodeArrays, RowCache
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Task

__all__ = ["MAX_NODE_SCORE", "NodeOrder", "balanced_allocation", "least_allocated", "most_allocated"]

MAX_NODE_SCORE = 100.0
# kube-scheduler's non-zero defaults for pods that request no cpu / memory (used when scoring).
DEFAULT_MILLI_CPU = 100.0
DEFAULT_MEMORY = 200.0 * 1024 * 1024


def least_allocated(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """Per node, mean over cpu and memory of ⌊(allocatable − requested) · 100 / allocatable⌋ (0 if over)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor((allocatable - requested) * MAX_NODE_SCORE / allocatable)
    per = np.where((allocatable <= 0) | (requested > allocatable), 0.0, per)
    return np.floor(per.sum(axis=1) / per.shape[1])


def most_allocated(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor(requested * MAX_NODE_SCORE / allocatable)
    per = np.where((allocatable <= 0) | (requested > allocatable), 0.0, per)
    return np.floor(per.sum(axis=1) / per.shape[1])


def balanced_allocation(allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """⌊(1 − std(requested/allocatable)) · 100⌋ over cpu and memory, fractions capped at 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(allocatable > 0, requested / allocatable, 0.0)
    frac = np.minimum(frac, 1.0)
    std = np.abs(frac[:, 0] - frac[:, 1]) / 2.0 if frac.shape[1] == 2 else frac.std(axis=1)
    return np.floor((1.0 - std) * MAX_NODE_SCORE)


class NodeOrder:
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.least_weight = float(args.get("leastrequested.weight", 1))
        self.most_weight = float(args.get("mostrequested.weight", 0))
        self.balanced_weight = float(args.get("balancedresource.weight", 1))
        self._cache: RowCache | None = None
        self._alloc: np.ndarray | None = None

    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.arrays
        cols = [nodes.resources.cpu, nodes.resources.memory]
        self._alloc = np.ascontiguousarray(nodes.allocatable[:, cols])
        self._cache = RowCache(nodes, lambda req, rows: self._score(nodes, req, rows))

    def _score(self, nodes: NodeArrays, req: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        assert self._alloc is not None
        cols = [nodes.resources.cpu, nodes.resources.memory]
        if rows is None:
            alloc, used = self._alloc, nodes.used[:, cols]
        else:
            alloc, used = self._alloc[rows], nodes.used[rows][:, cols]
        nonzero = np.array([req[0] if req[0] > 0 else DEFAULT_MILLI_CPU, req[1] if req[1] > 0 else DEFAULT_MEMORY])
        score = np.zeros(len(alloc), dtype=np.float64)
        if self.least_weight:
            score += least_allocated(alloc, used + nonzero) * self.least_weight
        if self.most_weight:
            score += most_allocated(alloc, used + nonzero) * self.most_weight
        if self.balanced_weight:
            score += balanced_allocation(alloc, used + req) * self.balanced_weight
        return score

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        req = task.resreq[[nodes.resources.cpu, nodes.resources.memory]]
        if self._cache is None or self._cache.arrays is not nodes:
            return self._score(nodes, req, None)[candidates]
        return self._cache.get(req.tobytes(), req)[candidates]
