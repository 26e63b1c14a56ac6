"""The ReplicaSet controller's decision: `replicaset_plan` keeps `spec.replicas` active pods.

Part of `devcluster.workloads` (pure, over `_objects`); `WorkloadControllers` (in `workloads.controllers`) applies the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar.devcluster.workloads._objects import (
    BURST,
    Plan,
    _compact,
    _deletion_rank,
    _int,
    _meta,
    _name,
    _owned,
    _pod_from_template,
    _spec,
    is_active,
    is_ready,
)
from lahar.kube.client import Obj


def replicaset_plan(rs: Mapping[str, Any], pods: Sequence[Obj]) -> Plan:
    """Keep `spec.replicas` active pods owned by `rs` (create from the template / delete the cheapest first)."""
    if _meta(rs).get("deletionTimestamp"):
        return Plan()
    owned = _owned(pods, rs)
    active = [p for p in owned if is_active(p)]
    want = _int(_spec(rs).get("replicas"), 1)
    create: list[Obj] = []
    delete: list[str] = []
    diff = want - len(active)
    if diff > 0:
        template = _spec(rs).get("template") or {}
        create = [_pod_from_template(rs, template) for _ in range(min(diff, BURST))]
    elif diff < 0:
        delete = [_name(p) for p in sorted(active, key=_deletion_rank)[:-diff]]
    ready = sum(1 for p in active if is_ready(p))
    status = _compact({"replicas": len(active), "fullyLabeledReplicas": len(active), "readyReplicas": ready,
                       "availableReplicas": ready,
                       "observedGeneration": _meta(rs).get("generation")}, "replicas")
    return Plan(create=tuple(create), delete=tuple(delete), status=status)


