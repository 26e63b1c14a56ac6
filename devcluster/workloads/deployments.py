"""The Deployment controller's decision: `deployment_plan`, one ReplicaSet per pod template, rolled out by Recreate.

Part of `devcluster.workloads` (pure, over `_objects`); `WorkloadControllers` (in `workloads.controllers`) applies the plan.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lahar.devcluster.workloads._objects import (
    DESIRED_ANNOTATION,
    MAX_ANNOTATION,
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    Plan,
    _compact,
    _condition,
    _int,
    _meta,
    _name,
    _owned,
    _owner_ref,
    _spec,
    _status,
    _ts,
    template_hash,
)
from lahar.kube.client import Obj


def _revision(rs: Mapping[str, Any]) -> int:
    try:
        return int((_meta(rs).get("annotations") or {}).get(REVISION_ANNOTATION, "0"))
    except ValueError:
        return 0


def _max_unavailable(deploy: Mapping[str, Any], desired: int) -> int:
    strategy = _spec(deploy).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0
    raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(raw, str) and raw.endswith("%"):
        return desired * int(raw[:-1]) // 100
    return min(int(raw), desired)


def _new_replicaset(deploy: Mapping[str, Any], name: str, pod_hash: str, replicas: int, revision: int) -> Obj:
    spec = _spec(deploy)
    template = json.loads(json.dumps(spec.get("template") or {}))
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH_LABEL: pod_hash}
    selector = json.loads(json.dumps(spec.get("selector") or {}))
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH_LABEL: pod_hash}
    rs_spec: Obj = {"replicas": replicas, "selector": selector, "template": template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": _meta(deploy).get("namespace"), "labels": dict(tmeta["labels"]),
                         "annotations": {REVISION_ANNOTATION: str(revision), DESIRED_ANNOTATION: str(replicas),
                                         MAX_ANNOTATION: str(replicas)},
                         "ownerReferences": [_owner_ref(deploy)]},
            "spec": rs_spec}


def deployment_plan(deploy: Mapping[str, Any], replicasets: Sequence[Obj], *, now: dt.datetime) -> Plan:
    """Deployment → one ReplicaSet per pod template (`<name>-<pod-template-hash>`), rolled out by Recreate: the old
    ReplicaSets go to 0 first, then the new one is created at `spec.replicas`; scaling changes the current one."""
    if _meta(deploy).get("deletionTimestamp"):
        return Plan()
    spec = _spec(deploy)
    name = _name(deploy)
    desired = _int(spec.get("replicas"), 1)
    pod_hash = template_hash(spec.get("template") or {}, _status(deploy).get("collisionCount"))
    new_name = f"{name}-{pod_hash}"
    owned = _owned(replicasets, deploy)
    new = next((rs for rs in owned if _name(rs) == new_name), None)
    old = [rs for rs in owned if _name(rs) != new_name]
    create: list[Obj] = []
    scale: list[tuple[str, int]] = []
    delete: list[str] = []
    paused = bool(spec.get("paused"))
    if not paused:
        for rs in old:
            if _int(_spec(rs).get("replicas"), 1) != 0:
                scale.append((_name(rs), 0))
        old_running = sum(int(_status(rs).get("replicas") or 0) for rs in old)
        if new is None:
            if not scale and old_running == 0:
                revision = max((_revision(rs) for rs in owned), default=0) + 1
                create.append(_new_replicaset(deploy, new_name, pod_hash, desired, revision))
        elif _int(_spec(new).get("replicas"), 1) != desired:
            scale.append((new_name, desired))
        history = _int(spec.get("revisionHistoryLimit"), 10)
        idle = sorted((rs for rs in old if _int(_spec(rs).get("replicas"), 1) == 0
                       and not _status(rs).get("replicas")), key=_revision)
        delete = [_name(rs) for rs in idle[:max(0, len(idle) - history)]]
    elif new is not None and _int(_spec(new).get("replicas"), 1) != desired:
        scale.append((new_name, desired))  # a paused Deployment still scales; it only does not roll out

    def count(rs_list: Iterable[Mapping[str, Any]], key: str) -> int:
        return sum(int(_status(rs).get(key) or 0) for rs in rs_list)

    everything = owned
    available = count(everything, "availableReplicas")
    updated = count([new] if new is not None else [], "replicas")
    new_available = count([new] if new is not None else [], "availableReplicas")
    previous = _status(deploy).get("conditions") or []
    t = _ts(now)
    min_available = desired - _max_unavailable(deploy, desired)
    conditions = [
        _condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", t,
                   previous, update_time=True) if available >= min_available else
        _condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum "
                   "availability.", t, previous, update_time=True),
    ]
    if new is None and create:
        progressing = ("NewReplicaSetCreated", f'Created new replica set "{new_name}"')
    elif new is not None and updated == desired and new_available >= desired and not old:
        progressing = ("NewReplicaSetAvailable", f'ReplicaSet "{new_name}" has successfully progressed.')
    else:
        progressing = ("ReplicaSetUpdated", f'ReplicaSet "{new_name}" is progressing.')
    conditions.append(_condition("Progressing", "True", *progressing, t, previous, update_time=True))
    replicas = count(everything, "replicas")
    status = _compact({"observedGeneration": _meta(deploy).get("generation"), "replicas": replicas,
                       "updatedReplicas": updated, "readyReplicas": count(everything, "readyReplicas"),
                       "availableReplicas": available,
                       "unavailableReplicas": max(0, replicas - available, desired - available),
                       "conditions": conditions,
                       "collisionCount": _status(deploy).get("collisionCount")})
    return Plan(create=tuple(create), delete=tuple(delete), scale=tuple(scale), status=status)


