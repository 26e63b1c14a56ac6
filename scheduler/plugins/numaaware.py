"""numa-aware: a node passes only if its Topology Manager would admit the pod with what is free per NUMA node; the
score prefers placements on fewer NUMA nodes; the chosen CPUs are reserved for the rest of the session.

A thin plugin over the per-session `scheduler.placement.Placement` (shared with deviceshare, which registers the
devices as more hint providers): it plans every (task, node) pair — hints, kubelet-exact merge
(`scheduler.topology.merge`), concrete CPUs and devices — and its plans become the `volcano.sh/topology-decision`
annotation written with the bind (spec volcano.md §5.4).

Beyond Volcano: a task's `volcano.sh/numa-topology-policy` stricter than its node's (e.g. `single-numa-node` on a
`best-effort` node) is honoured by the scheduler — the merge runs under the stricter policy — instead of making
the node unusable; a weaker one changes nothing (the node's kubelet enforces its own policy regardless).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.scheduler.framework.hooks import REUSE_STATIC, NodeFilter
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.placement import Placement, placement

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session

__all__ = ["NumaAware"]


# --- the plugin -----------------------------------------------------------------------------------------------------


class NumaAware:
    """Volcano's `numa-aware` plugin (argument `weight`, default 1)."""

    name = "numa-aware"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.weight = int(args.get("weight", 1) or 1)
        self.placement: Placement | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.placement = placement(ssn)
        self.placement.cpu_side = True

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        assert self.placement is not None
        return self.placement.predicate(task, nodes)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        assert self.placement is not None
        return self.placement.scores(task, candidates) * self.weight

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Zero everywhere for a task that needs no planning."""
        if self.placement is None or self.placement.task_info(task)[0]:
            return None
        return REUSE_STATIC, None

    def on_allocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_deallocate(task)

    def on_session_close(self, ssn: Session) -> None:
        if self.placement is not None:
            self.placement.close()
