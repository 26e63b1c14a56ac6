"""numa-aware: a node passes only if its Topology Manager would admit the pod with what is free per NUMA node; the
score prefers placements on fewer NUMA nodes; the chosen CPUs are reserved for the rest of the session.

Sits between the snapshot (Volcano `Numatopology` objects in `Snapshot.extras`) and the bind: a per-session
`Placement` (plugins/_shared/placement.py; the topology readers and kubelet emulation are in
plugins/_shared/numatopology.py, re-exported here), shared with the deviceshare plugin (which registers the devices as more hint providers), plans every
(task, node) pair — hints, kubelet-exact merge (`scheduler.topology.merge`), concrete CPUs and devices — and its
plans become the `volcano.sh/topology-decision` annotation written with the bind (spec volcano.md §5.4).

Beyond Volcano: a task's `volcano.sh/numa-topology-policy` stricter than its node's (e.g. `single-numa-node` on a
`best-effort` node) is honoured by the scheduler — the merge runs under the stricter policy — instead of making
the node unusable; a weaker one changes nothing (the node's kubelet enforces its own policy regardless).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.scheduler.framework.hooks import NodeFilter
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins._shared.numatopology import (
    ALLOCATION_ANNOTATION,
    NUMA_MEMORY_ANNOTATION,
    NUMA_POLICY_ANNOTATION,
    OPTIONS_ANNOTATION,
    SCOPE_ANNOTATION,
    TOPOLOGY_DECISION_ANNOTATION,
    NodeTopology,
    container_cpu_requests,
    container_memory_requests,
    decision_annotation,
    effective_policy,
    is_guaranteed,
    node_topology,
    normalize_reverse,
    take_cpus,
    take_memory,
)
from lahar.scheduler.plugins._shared.placement import Placement, placement
from lahar.scheduler.plugins._shared.plans import DeviceSide, Plan, Rejection, cached

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session

__all__ = [
    "ALLOCATION_ANNOTATION",
    "NUMA_POLICY_ANNOTATION",
    "OPTIONS_ANNOTATION",
    "SCOPE_ANNOTATION",
    "TOPOLOGY_DECISION_ANNOTATION",
    "NUMA_MEMORY_ANNOTATION",
    "DeviceSide",
    "NodeTopology",
    "NumaAware",
    "Placement",
    "Plan",
    "Rejection",
    "container_cpu_requests",
    "container_memory_requests",
    "decision_annotation",
    "effective_policy",
    "explain",
    "is_guaranteed",
    "node_topology",
    "normalize_reverse",
    "cached",
    "placement",
    "take_cpus",
    "take_memory",
]



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

    def on_allocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_deallocate(task)

    def on_session_close(self, ssn: Session) -> None:
        if self.placement is not None:
            self.placement.close()


# --- explain ----------------------------------------------------------------------------------------------------------


def explain(ssn: Session, task: Task) -> list[dict[str, Any]]:
    """Why `task` would (not) go to each node of an open session: per node, whether its request fits the free
    resources, the first reason the node was rejected (resources first, then the first predicate plugin that said
    no, in tier order), and the topology plan — each provider's hints, the merged hint and the admit decision per
    merge (container, or the pod in pod scope), the NUMA nodes and CPUs it would get. Read-only."""
    arrays = ssn.arrays
    names = ssn.resources.names
    short = arrays.insufficient(task.init_resreq, arrays.future_idle()) if len(arrays) else []
    verdict = ssn.predicate(task)
    topo = placement(ssn).explain(task) if (ssn.plugins.get("numa-aware") is not None
                                            or ssn.plugins.get("deviceshare") is not None) else None
    out = []
    for i, n in enumerate(ssn.nodes):
        entry: dict[str, Any] = {"node": n.name, "fits": bool(short[i] < 0) if len(arrays) else False}
        reason = ""
        if short[i] >= 0:
            reason = f"Insufficient {names[short[i]]}"
        elif not verdict.feasible[i]:
            reason = str(verdict.reasons[i]) if verdict.reasons is not None and verdict.reasons[i] else "rejected"
        entry["rejected"] = reason
        if topo is not None:
            t = topo[i]
            entry.update({k: v for k, v in t.items() if k not in ("node", "reason")})
            entry["topology_reason"] = t.get("reason", "")
        out.append(entry)
    return out
