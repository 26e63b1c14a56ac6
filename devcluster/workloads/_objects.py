"""What the devcluster workload controllers share: the labels and annotations kube's controllers write,
plain-data readers of objects, pod-from-template, the scale-down order, conditions, and `Plan` (one reconcile's writes).

Bottom of `devcluster.workloads`: pure functions over plain dicts, imported by every controller module.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube.client import Obj

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
STS_REVISION_LABEL = "controller-revision-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_ANNOTATION = "deployment.kubernetes.io/max-replicas"
DEFAULT_SCHEDULER = "default-scheduler"
BURST = 500  # most pods one reconcile creates (kube's slow-start batches end at 500 too)

Clock = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(s: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None


# ---------------------------------------------------------------------------------------------------------------
# plain-data helpers


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with `controller: true`, if any."""
    return next((r for r in _meta(obj).get("ownerReferences") or [] if r.get("controller")), None)


def _owned(items: Iterable[Obj], owner: Mapping[str, Any]) -> list[Obj]:
    uid = _meta(owner).get("uid")
    return [o for o in items if (ref := controller_of(o)) is not None and ref.get("uid") == uid]


def _owner_ref(owner: Mapping[str, Any]) -> Obj:
    meta = _meta(owner)
    return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return _status(pod).get("phase") in ("Succeeded", "Failed")


def is_active(pod: Mapping[str, Any]) -> bool:
    """Counts toward replicas: not finished and not being deleted (kube's `FilterActivePods`)."""
    return not is_terminal(pod) and not _meta(pod).get("deletionTimestamp")


def is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in _status(pod).get("conditions") or [])


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery rand.SafeEncodeString: no vowels, no 0/1/3


def template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    """A stable short hash of a pod template (kube's `ComputeHash`: fnv-32a over the template, safe-encoded)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(int(collision_count)).encode()
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(h))


def _pod_from_template(owner: Mapping[str, Any], template: Mapping[str, Any], *, name: str | None = None,
                       generate_name: str | None = None, labels: Mapping[str, str] | None = None,
                       annotations: Mapping[str, str] | None = None, spec_extra: Mapping[str, Any] | None = None,
                       ) -> Obj:
    """A Pod for `owner` from its template (kube's `GetPodFromTemplate`): template labels, annotations, spec and a
    controller ownerReference."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": _meta(owner).get("namespace"),
                 "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
                 "ownerReferences": [_owner_ref(owner)]}
    all_annotations = {**(tmeta.get("annotations") or {}), **(annotations or {})}
    if all_annotations:
        meta["annotations"] = all_annotations
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name or f"{_name(owner)}-"
    spec = json.loads(json.dumps(template.get("spec") or {}))
    spec.update(spec_extra or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _deletion_rank(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """Pods sorted by this go first when scaling down (kube's `ActivePods` order): unassigned before assigned,
    Pending before Running, not ready before ready, more restarts first, newer before older."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(_status(pod).get("phase") or "Pending", 0)
    restarts = sum(int(cs.get("restartCount") or 0) for cs in _status(pod).get("containerStatuses") or [])
    created = _meta(pod).get("creationTimestamp") or ""
    return (bool(_spec(pod).get("nodeName")), phase_rank, is_ready(pod), -restarts,
            tuple(-ord(c) for c in created), _name(pod))


def _condition(kind: str, status: str, reason: str, message: str, now: str, previous: Iterable[Mapping[str, Any]],
               *, update_time: bool = False) -> Obj:
    """A condition that keeps its previous timestamps when nothing about it changed."""
    prev = next((c for c in previous if c.get("type") == kind), None)
    if prev is not None and (prev.get("status"), prev.get("reason"), prev.get("message")) == (status, reason, message):
        return dict(prev)
    since = prev.get("lastTransitionTime") if prev is not None and prev.get("status") == status else None
    cond: Obj = {"type": kind, "status": status, "reason": reason, "message": message}
    if update_time:
        cond["lastUpdateTime"] = now
    cond["lastTransitionTime"] = since or now
    if not update_time:
        cond["lastProbeTime"] = now
    return cond


@dataclass(frozen=True)
class Plan:
    """One reconcile's writes: objects to create, names to delete, `(name, replicas)` scale changes (ReplicaSets of a
    Deployment), an optional spec patch of the owner, and its new `status` (None: leave it)."""

    create: tuple[Obj, ...] = ()
    delete: tuple[str, ...] = ()
    scale: tuple[tuple[str, int], ...] = ()
    owner_patch: Obj | None = None
    status: Obj | None = None


def _compact(status: Obj, *keep: str) -> Obj:
    """Drop zero counters kube marks `omitempty` (keep the ones that are always written)."""
    return {k: v for k, v in status.items() if v not in (0, None, [], {}) or k in keep}


