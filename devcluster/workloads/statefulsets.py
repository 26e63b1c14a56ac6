"""The StatefulSet controller's decision: `statefulset_plan`, ordinal pods created in order (OrderedReady) or
all at once (Parallel), replaced highest ordinal first on a template change.

Part of `devcluster.workloads` (pure, over `_objects`); `WorkloadControllers` (in `workloads.controllers`) applies the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar.devcluster.workloads._objects import (
    STS_POD_INDEX_LABEL,
    STS_POD_NAME_LABEL,
    STS_REVISION_LABEL,
    Plan,
    _compact,
    _int,
    _meta,
    _name,
    _owned,
    _pod_from_template,
    _spec,
    _status,
    is_active,
    is_ready,
    is_terminal,
    template_hash,
)
from lahar.kube.client import Obj


def _ordinal(sts_name: str, pod: Mapping[str, Any]) -> int | None:
    name = _name(pod)
    prefix = f"{sts_name}-"
    if not name.startswith(prefix) or not name[len(prefix):].isdigit():
        return None
    return int(name[len(prefix):])


def statefulset_plan(sts: Mapping[str, Any], pods: Sequence[Obj]) -> Plan:
    """`spec.replicas` pods named `<sts>-0..N-1`. OrderedReady (the default) creates ordinal i only once 0..i-1 are
    Running and Ready and removes the highest ordinal first, one at a time; Parallel does it all at once. Finished
    pods are deleted to be recreated; a template change replaces pods highest ordinal first (RollingUpdate)."""
    if _meta(sts).get("deletionTimestamp"):
        return Plan()
    spec = _spec(sts)
    name = _name(sts)
    want = _int(spec.get("replicas"), 1)
    parallel = spec.get("podManagementPolicy") == "Parallel"
    revision = f"{name}-{template_hash(spec.get('template') or {})}"
    by_ordinal: dict[int, Obj] = {}
    for pod in _owned(pods, sts):
        ordinal = _ordinal(name, pod)
        if ordinal is not None:
            by_ordinal[ordinal] = pod
    create: list[Obj] = []
    delete: list[str] = []
    terminating = any(_meta(p).get("deletionTimestamp") for p in by_ordinal.values())
    finished = [p for p in by_ordinal.values() if is_terminal(p) and not _meta(p).get("deletionTimestamp")]
    delete += [_name(p) for p in finished]
    blocked = bool(finished) or terminating
    for i in range(want):
        pod = by_ordinal.get(i)
        if pod is None:
            if parallel or not blocked:
                create.append(_sts_pod(sts, i, revision))
            if not parallel:
                break
        elif not parallel and not (is_active(pod) and is_ready(pod)):
            break
    extra = sorted((i for i, p in by_ordinal.items() if i >= want and not _meta(p).get("deletionTimestamp")),
                   reverse=True)
    if extra and (parallel or not terminating):
        delete += [f"{name}-{i}" for i in (extra if parallel else extra[:1])]
    active = [p for i, p in by_ordinal.items() if is_active(p)]
    updated = [p for p in active if (_meta(p).get("labels") or {}).get(STS_REVISION_LABEL) == revision]
    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    if (strategy == "RollingUpdate" and not create and not delete and not terminating and len(active) == want
            and all(is_ready(p) for p in active)):
        partition = _int(((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition"), 0)
        outdated = sorted((i for i, p in by_ordinal.items() if i >= partition and i < want
                           and (_meta(p).get("labels") or {}).get(STS_REVISION_LABEL) != revision), reverse=True)
        if outdated:
            delete.append(f"{name}-{outdated[0]}")
    ready = sum(1 for p in active if is_ready(p))
    current = _status(sts).get("currentRevision") or revision
    if len(updated) == len(active) == want:
        current = revision
    status = _compact({"observedGeneration": _meta(sts).get("generation"), "replicas": len(active),
                       "readyReplicas": ready, "availableReplicas": ready,
                       "currentReplicas": len(updated) if current == revision else len(active) - len(updated),
                       "updatedReplicas": len(updated), "currentRevision": current, "updateRevision": revision,
                       "collisionCount": 0}, "replicas", "availableReplicas", "collisionCount")
    return Plan(create=tuple(create), delete=tuple(dict.fromkeys(delete)), owner_patch=_sts_defaults_patch(sts),
                status=status)


def _sts_defaults_patch(sts: Mapping[str, Any]) -> Obj | None:
    """kube-apiserver's StatefulSet defaults that kubectl reads (`rollout status` needs `updateStrategy.type`)."""
    spec = _spec(sts)
    patch: Obj = {}
    if not (spec.get("updateStrategy") or {}).get("type"):
        patch["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    if not spec.get("podManagementPolicy"):
        patch["podManagementPolicy"] = "OrderedReady"
    if spec.get("revisionHistoryLimit") is None:
        patch["revisionHistoryLimit"] = 10
    return {"spec": patch} if patch else None


def _sts_pod(sts: Mapping[str, Any], ordinal: int, revision: str) -> Obj:
    name = f"{_name(sts)}-{ordinal}"
    extra: Obj = {"hostname": name}
    service = _spec(sts).get("serviceName")
    if service:
        extra["subdomain"] = service
    return _pod_from_template(sts, _spec(sts).get("template") or {}, name=name, spec_extra=extra,
                              labels={STS_POD_NAME_LABEL: name, STS_POD_INDEX_LABEL: str(ordinal),
                                      STS_REVISION_LABEL: revision})


