"""Why a task would (not) go to each node of an open session — resources, the first predicate that said no, and the
topology plan — read-only, for `lahar explain` and `lahar simulate`.

Part of `scheduler.placement`; reads the session's `Placement` when numa-aware or deviceshare is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.placement.placement import placement

if TYPE_CHECKING:
    from lahar.scheduler.framework.session import Session

__all__ = ["explain"]


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
