"""Plain workloads in devcluster: minimal Deployment, ReplicaSet, StatefulSet and batch/v1 Job controllers (and a
tiny default-scheduler), the part of kube-controller-manager and kube-scheduler a single-machine cluster needs.

Beside the simulated kubelets in `devcluster.runtime.Cluster`; talks only through the `kube.client.ClusterClient`
port (a `kube.apiserver.memory.MemoryClient` over the server's store). The decisions are pure functions over dicts:
`replicaset_plan`, `deployment_plan`, `statefulset_plan`, `job_plan` (owner + what it owns → a `Plan`: objects to
create, names to delete, scale changes, the new status) and `choose_node` (the default-scheduler's placement).
`WorkloadControllers` is the shell: `reconcile(kind, namespace, name)` re-reads the world and applies one plan
(level-based, idempotent); `sync()` runs every key once (tests); `start()`/`stop()` drive it from store watches in
background threads, with a periodic resync.

Deliberately small: a Deployment rolls out by Recreate whatever its strategy says (old ReplicaSets go to 0, then the
new one is scaled up); no ControllerRevisions, PVC templates, pod failure policies or TTL-after-finished.
Pods with `schedulerName: default-scheduler` (what `kubectl create deployment` makes) are bound to the least
loaded node that fits their requests, node selector and taints; every other scheduler name is left to its scheduler
(lahar's own for `volcano`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import errors, podspec, quantity, selectors
from lahar.kube.client import ClusterClient, Obj
from lahar.kube.resources import ResourceType

__all__ = [
    "CONTROLLER_UID_LABEL",
    "JOB_NAME_LABEL",
    "POD_TEMPLATE_HASH_LABEL",
    "Plan",
    "WorkloadControllers",
    "choose_node",
    "deployment_plan",
    "job_plan",
    "replicaset_plan",
    "statefulset_plan",
    "template_hash",
]

log = logging.getLogger(__name__)

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


# ---------------------------------------------------------------------------------------------------------------
# ReplicaSet


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


# ---------------------------------------------------------------------------------------------------------------
# Deployment


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


# ---------------------------------------------------------------------------------------------------------------
# StatefulSet


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


# ---------------------------------------------------------------------------------------------------------------
# batch/v1 Job


def _job_labels(job: Mapping[str, Any]) -> dict[str, str]:
    uid, name = str(_meta(job).get("uid") or ""), _name(job)
    return {CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name, LEGACY_CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: name}


def _job_defaults_patch(job: Mapping[str, Any]) -> Obj | None:
    """What kube-apiserver's Job defaulting adds and this store does not: the generated selector and template labels
    (so `kubectl logs job/NAME` and `kubectl describe` find the pods), completions/parallelism, backoffLimit."""
    spec = _spec(job)
    patch: Obj = {}
    if not spec.get("manualSelector") and not spec.get("selector"):
        labels = _job_labels(job)
        tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        patch["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: labels[CONTROLLER_UID_LABEL]}}
        patch["template"] = {"metadata": {"labels": {**tlabels, **labels}}}
    if spec.get("completions") is None and spec.get("parallelism") is None:
        patch["completions"] = patch["parallelism"] = 1
    elif spec.get("parallelism") is None:
        patch["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        patch["backoffLimit"] = 6
    if not spec.get("completionMode"):
        patch["completionMode"] = "NonIndexed"
    return {"spec": patch} if patch else None


def _finished_condition(job: Mapping[str, Any]) -> str | None:
    for c in _status(job).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def _pod_index(pod: Mapping[str, Any]) -> int | None:
    raw = (_meta(pod).get("annotations") or {}).get(JOB_INDEX_ANNOTATION)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def job_plan(job: Mapping[str, Any], pods: Sequence[Obj], *, now: dt.datetime) -> Plan:
    """batch/v1 Job: keep `min(parallelism, completions - succeeded)` pods running until `completions` pods succeed
    (Complete) or more than `backoffLimit` fail, or `activeDeadlineSeconds` passes (Failed); `suspend` removes the
    running pods. NonIndexed and Indexed completion modes; a pod's failures are counted as failed pods."""
    if _meta(job).get("deletionTimestamp"):
        return Plan()
    spec = _spec(job)
    t = _ts(now)
    owned = _owned(pods, job)
    active = [p for p in owned if is_active(p)]
    succeeded_pods = [p for p in owned if _status(p).get("phase") == "Succeeded"]
    failed = sum(1 for p in owned if _status(p).get("phase") == "Failed")
    parallelism = _int(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    if completions is None and spec.get("parallelism") is None:
        completions = 1
    indexed = spec.get("completionMode") == "Indexed" and completions is not None
    backoff_limit = _int(spec.get("backoffLimit"), 6)
    previous = list(_status(job).get("conditions") or [])
    status: Obj = dict(_status(job))
    suspended = bool(spec.get("suspend"))
    if not suspended and not status.get("startTime"):
        status["startTime"] = t
    if indexed:
        done_indexes = sorted({i for p in succeeded_pods if (i := _pod_index(p)) is not None and i < completions})
        succeeded = len(done_indexes)
    else:
        done_indexes = []
        succeeded = len(succeeded_pods)
    finished = _finished_condition(job)
    create: list[Obj] = []
    delete: list[str] = []
    conditions = [c for c in previous if c.get("type") not in ("Suspended",)]
    if finished is None:
        started = _parse_ts(status.get("startTime"))
        deadline = spec.get("activeDeadlineSeconds")
        failure: tuple[str, str] | None = None
        if failed > backoff_limit:
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif deadline is not None and started is not None and not suspended and \
                (now - started).total_seconds() >= int(deadline):
            failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
        complete = (succeeded >= completions) if completions is not None else (succeeded > 0 and not active)
        if failure is not None:
            conditions.append(_condition("Failed", "True", *failure, t, []))
            delete = [_name(p) for p in active]
            finished = "Failed"
        elif complete:
            conditions.append(_condition("Complete", "True", "CompletionsReached",
                                         "Reached expected number of succeeded pods", t, []))
            status["completionTime"] = t
            delete = [_name(p) for p in active]
            finished = "Complete"
        elif suspended:
            delete = [_name(p) for p in active]
            conditions.append(_condition("Suspended", "True", "JobSuspended", "Job suspended", t, previous))
        else:
            if completions is None:
                want = min(len(active), parallelism) if succeeded > 0 else parallelism  # let the rest finish
            else:
                want = min(parallelism, completions - succeeded)
            diff = want - len(active)
            template = spec.get("template") or {}
            if diff > 0 and indexed:
                busy = {_pod_index(p) for p in active} | set(done_indexes)
                free = [i for i in range(completions) if i not in busy][:min(diff, BURST)]
                create = [_job_pod(job, template, i) for i in free]
            elif diff > 0:
                create = [_job_pod(job, template, None) for _ in range(min(diff, BURST))]
            elif diff < 0:
                delete = [_name(p) for p in sorted(active, key=_deletion_rank)[:-diff]]
    else:
        delete = [_name(p) for p in active]  # finished: whatever still runs is stopped
    status["conditions"] = conditions
    status["active"] = 0 if finished else len(active) - len(delete) + len(create)
    status["ready"] = sum(1 for p in active if is_ready(p)) if not finished else 0
    status["succeeded"] = succeeded
    status["failed"] = failed
    if indexed:
        status["completedIndexes"] = _index_ranges(done_indexes)
    status = _compact(status, "ready")
    return Plan(create=tuple(create), delete=tuple(delete), owner_patch=_job_defaults_patch(job), status=status)


def _index_ranges(indexes: Sequence[int]) -> str:
    """`[0, 1, 2, 5]` → `0-2,5` (the form of status.completedIndexes)."""
    out: list[str] = []
    for i in indexes:
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _job_pod(job: Mapping[str, Any], template: Mapping[str, Any], index: int | None) -> Obj:
    labels = _job_labels(job)
    annotations: dict[str, str] = {}
    spec_extra: Obj = {}
    generate = f"{_name(job)}-"
    if index is not None:
        labels[JOB_INDEX_LABEL] = str(index)
        annotations[JOB_INDEX_ANNOTATION] = str(index)
        generate = f"{_name(job)}-{index}-"
        tspec = template.get("spec") or {}
        spec_extra["containers"] = [
            {**c, "env": [*(c.get("env") or []), {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{JOB_INDEX_ANNOTATION}']"}}}]}
            for c in tspec.get("containers") or []]
    return _pod_from_template(job, template, generate_name=generate, labels=labels, annotations=annotations,
                              spec_extra=spec_extra)


# ---------------------------------------------------------------------------------------------------------------
# the default-scheduler


def _node_term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        have = labels.get(key)
        ok = {"In": have in values, "NotIn": have not in values, "Exists": key in labels,
              "DoesNotExist": key not in labels}.get(op)
        if ok is None and op in ("Gt", "Lt") and have is not None and values:
            try:
                ok = int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])
            except ValueError:
                ok = False
        if not ok:
            return False
    return True


def node_fits(pod: Mapping[str, Any], node: Mapping[str, Any], used: Mapping[str, quantity.Quantity],
              pod_count: int) -> bool:
    """Node selector, required node affinity, NoSchedule/NoExecute taints, unschedulable, Ready, requests and pods."""
    labels = _meta(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in (_spec(pod).get("nodeSelector") or {}).items()):
        return False
    required = ((((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
    if required and not any(_node_term_matches(term, labels) for term in required):
        return False
    if _spec(node).get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not podspec.tolerates(pod, t)
           for t in _spec(node).get("taints") or []):
        return False
    if any(c.get("type") == "Ready" and c.get("status") != "True" for c in _status(node).get("conditions") or []):
        return False
    allocatable = _status(node).get("allocatable") or {}
    if "pods" in allocatable and pod_count + 1 > quantity.parse(allocatable["pods"]).value():
        return False
    free = quantity.sub(allocatable, used)
    return not quantity.fits(podspec.pod_requests(pod), free)


_NON_ZERO = {"cpu": quantity.parse("100m"), "memory": quantity.parse("200Mi")}  # kube-scheduler's scoring defaults


def _scored_requests(pod: Mapping[str, Any]) -> dict[str, quantity.Quantity]:
    """Requests for scoring: a container without cpu/memory requests counts as 100m / 200Mi (`GetNonzeroRequests`)."""
    return {**_NON_ZERO, **{k: v for k, v in podspec.pod_requests(pod).items() if v.milli_value() > 0}}


def choose_node(pod: Mapping[str, Any], nodes: Sequence[Obj], pods: Sequence[Obj]) -> str | None:
    """The node for `pod`: among the nodes it fits, the least requested (cpu and memory shares, requests without
    cpu/memory counted as kube-scheduler does), then the fewest pods, then by name."""
    used: dict[str, dict[str, quantity.Quantity]] = {}
    scored: dict[str, dict[str, quantity.Quantity]] = {}
    count: dict[str, int] = {}
    for p in pods:
        node = _spec(p).get("nodeName")
        if node and not is_terminal(p):
            used[node] = quantity.add(used.get(node), podspec.pod_requests(p))
            scored[node] = quantity.add(scored.get(node), _scored_requests(p))
            count[node] = count.get(node, 0) + 1
    best: tuple[float, int, str] | None = None
    for node in nodes:
        name = _name(node)
        if not node_fits(pod, node, used.get(name, {}), count.get(name, 0)):
            continue
        allocatable = quantity.resource_list(_status(node).get("allocatable"))
        shares = []
        for res in ("cpu", "memory"):
            cap = allocatable.get(res)
            if cap is not None and cap.milli_value() > 0:
                shares.append(scored.get(name, {}).get(res, quantity.Quantity()).milli_value() / cap.milli_value())
        score = (sum(shares) / len(shares) if shares else 0.0, count.get(name, 0), name)
        if best is None or score < best:
            best = score
    return best[2] if best else None


# ---------------------------------------------------------------------------------------------------------------
# the shell

Key = tuple[str, str, str]  # (kind, namespace, name); kind "Schedule" = a scheduling pass


def _rt(client: ClusterClient, group: str, version: str, plural: str, kind: str) -> ResourceType:
    registry = getattr(client, "registry", None)
    found = registry.get(group, version, plural) if registry is not None else None
    return found or ResourceType(group=group, version=version, kind=kind, plural=plural, namespaced=kind != "Node")


@dataclass
class WorkloadControllers:
    """Deployment, ReplicaSet, StatefulSet and Job controllers plus the default-scheduler over one cluster client.

    `reconcile(kind, namespace, name)` / `schedule()` are single level-based passes; `sync()` runs every key until
    nothing changes (tests); `start()` watches the store and reconciles in a background thread, resyncing every
    `resync_seconds`; `stop()` ends it.
    """

    client: ClusterClient
    clock: Clock = _utcnow
    default_scheduler: bool = True
    resync_seconds: float = 5.0
    _queue: queue.Queue = field(init=False, default_factory=queue.Queue)
    _pending: set[Key] = field(init=False, default_factory=set)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _threads: list[threading.Thread] = field(init=False, default_factory=list)
    _watches: dict[str, Any] = field(init=False, default_factory=dict)
    _unplaced: int = field(init=False, default=0)  # pods the last scheduling pass could not place

    def __post_init__(self) -> None:
        c = self.client
        self.rts: dict[str, ResourceType] = {
            "Deployment": _rt(c, "apps", "v1", "deployments", "Deployment"),
            "ReplicaSet": _rt(c, "apps", "v1", "replicasets", "ReplicaSet"),
            "StatefulSet": _rt(c, "apps", "v1", "statefulsets", "StatefulSet"),
            "Job": _rt(c, "batch", "v1", "jobs", "Job"),
        }
        self.pod_rt = _rt(c, "", "v1", "pods", "Pod")
        self.node_rt = _rt(c, "", "v1", "nodes", "Node")

    # one pass ---------------------------------------------------------------------------------------------------

    def _pods_for(self, owner: Obj) -> list[Obj]:
        ns = _meta(owner).get("namespace")
        selector = _spec(owner).get("selector") or {}
        try:
            text = str(selectors.from_label_selector(selector)) if selector else ""
        except selectors.SelectorError:
            text = ""
        items = self.client.list(self.pod_rt, namespace=ns, label_selector=text or None)["items"]
        if selector and not _owned(items, owner):  # a Job whose selector is not defaulted yet, an odd selector
            items = self.client.list(self.pod_rt, namespace=ns)["items"]
        return items

    def plan(self, kind: str, obj: Obj) -> Plan:
        """The plan for one owner, read from the cluster as it is now."""
        now = self.clock()
        if kind == "Deployment":
            rss = self.client.list(self.rts["ReplicaSet"], namespace=_meta(obj).get("namespace"))["items"]
            return deployment_plan(obj, rss, now=now)
        pods = self._pods_for(obj)
        if kind == "ReplicaSet":
            return replicaset_plan(obj, pods)
        if kind == "StatefulSet":
            return statefulset_plan(obj, pods)
        return job_plan(obj, pods, now=now)

    def reconcile(self, kind: str, namespace: str, name: str) -> Plan | None:
        """Re-read `kind` namespace/name and apply its plan; None when it is gone."""
        rt = self.rts[kind]
        try:
            obj = self.client.get(rt, name, namespace=namespace)
        except errors.NotFound:
            return None
        plan = self.plan(kind, obj)
        self._apply(kind, rt, obj, plan)
        return plan

    def _apply(self, kind: str, rt: ResourceType, obj: Obj, plan: Plan) -> None:
        ns, name = _meta(obj).get("namespace"), _name(obj)
        if plan.owner_patch:
            obj = self.client.patch(rt, name, plan.owner_patch, namespace=ns)
        child_rt = self.rts["ReplicaSet"] if kind == "Deployment" else self.pod_rt
        failures: list[str] = []
        for child in plan.create:
            try:
                self.client.create(child_rt, child, namespace=ns)
            except errors.AlreadyExists:
                continue
            except errors.ApiError as exc:
                failures.append(f"create {child_rt.kind}: {exc}")
                break  # a webhook or quota refusal will refuse the others too; retried on the next pass
        for child_name in plan.delete:
            with contextlib.suppress(errors.NotFound):
                self.client.delete(child_rt, child_name, namespace=ns, propagation_policy="Background")
        for rs_name, replicas in plan.scale:
            with contextlib.suppress(errors.NotFound):
                self.client.patch(self.rts["ReplicaSet"], rs_name, {
                    "metadata": {"annotations": {DESIRED_ANNOTATION: str(_int(_spec(obj).get("replicas"), 1)),
                                                 MAX_ANNOTATION: str(_int(_spec(obj).get("replicas"), 1))}},
                    "spec": {"replicas": replicas}}, namespace=ns)
        if plan.status is not None and plan.status != dict(_status(obj)):
            body = {**obj, "status": plan.status}
            try:
                self.client.update_status(rt, body, namespace=ns)
            except errors.Conflict:
                self._enqueue((kind, ns or "", name))
        if failures:
            raise errors.ApiError("; ".join(failures))

    def schedule(self) -> int:
        """Bind every pending default-scheduler pod that fits somewhere (oldest first); returns how many."""
        pods = self.client.list(self.pod_rt)["items"]
        waiting = sorted((p for p in pods if _spec(p).get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
                          and not _spec(p).get("nodeName") and is_active(p)),
                         key=lambda p: (_meta(p).get("creationTimestamp") or "", _name(p)))
        self._unplaced = len(waiting)
        if not waiting:
            return 0
        nodes = self.client.list(self.node_rt)["items"]
        bound = 0
        for pod in waiting:
            node = choose_node(pod, nodes, pods)
            if node is None:
                continue
            try:
                self.client.bind(namespace=_meta(pod)["namespace"], name=_name(pod), node_name=node)
            except (errors.NotFound, errors.Conflict):
                continue
            pods = [*pods, {**pod, "spec": {**_spec(pod), "nodeName": node}}]
            bound += 1
        self._unplaced = len(waiting) - bound
        return bound

    def keys(self) -> list[Key]:
        out: list[Key] = []
        for kind, rt in self.rts.items():
            for obj in self.client.list(rt)["items"]:
                out.append((kind, _meta(obj).get("namespace") or "", _name(obj)))
        return out

    def sync(self, *, max_rounds: int = 20) -> None:
        """Reconcile every object (and schedule) until a round changes nothing: a deterministic pass for tests."""
        for _ in range(max_rounds):
            before = self.client.list(self.pod_rt)["metadata"].get("resourceVersion")
            for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
                for k, ns, name in self.keys():
                    if k == kind:
                        self.reconcile(k, ns, name)
            if self.default_scheduler:
                self.schedule()
            after = self.client.list(self.pod_rt)["metadata"].get("resourceVersion")
            if before == after:
                return

    # threads ----------------------------------------------------------------------------------------------------

    def _enqueue(self, key: Key) -> None:
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
        self._queue.put(key)

    def _keys_for_event(self, kind: str, obj: Obj, event: str = "ADDED") -> list[Key]:
        ns = _meta(obj).get("namespace") or ""
        out: list[Key] = []
        if kind in self.rts:
            out.append((kind, ns, _name(obj)))
        ref = controller_of(obj)
        if ref is not None:
            owner_kind = ref.get("kind")
            group = str(ref.get("apiVersion") or "").split("/")[0]
            if (owner_kind, group) in (("ReplicaSet", "apps"), ("StatefulSet", "apps"), ("Deployment", "apps"),
                                       ("Job", "batch")) and owner_kind in self.rts:
                out.append((str(owner_kind), ns, str(ref.get("name"))))
        if self.default_scheduler and kind in ("Node", "Pod"):
            freed = kind == "Node" or event == "DELETED" or is_terminal(obj)
            waiting = kind == "Pod" and not _spec(obj).get("nodeName") and is_active(obj) and _spec(obj).get(
                "schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
            if waiting or (freed and self._unplaced):
                out.append(("Schedule", "", ""))  # a pod to place, or room freed for one that waits
        return out

    def _watch_loop(self, kind: str, rt: ResourceType) -> None:
        while not self._stop.is_set():
            try:
                listing = self.client.list(rt)
                for obj in listing["items"]:
                    for key in self._keys_for_event(kind, obj):
                        self._enqueue(key)
                watch = self.client.watch(rt, resource_version=listing["metadata"].get("resourceVersion"),
                                          allow_bookmarks=True)
                self._watches[kind] = watch
                if self._stop.is_set():
                    watch.stop()
                    return
                for event in watch:
                    if self._stop.is_set():
                        return
                    if event["type"] == "BOOKMARK":
                        continue
                    for key in self._keys_for_event(kind, event["object"], event["type"]):
                        self._enqueue(key)
            except errors.Gone:
                continue
            except Exception as exc:  # noqa: BLE001 — keep watching; relist after a pause
                if self._stop.is_set():
                    return
                log.warning("workloads: %s watch failed: %s; relisting", kind, exc)
                self._stop.wait(1.0)

    def _work_loop(self) -> None:
        while not self._stop.is_set():
            try:
                key = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if key is None:
                return
            with self._lock:
                self._pending.discard(key)
            kind, ns, name = key
            try:
                if kind == "Schedule":
                    self.schedule()
                else:
                    self.reconcile(kind, ns, name)
            except Exception as exc:  # noqa: BLE001 — the resync retries it
                if self._stop.is_set():
                    return
                log.warning("workloads: %s %s/%s: %s", kind, ns, name, exc)

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_seconds):
            try:
                for key in self.keys():
                    self._enqueue(key)
                if self.default_scheduler:
                    self._enqueue(("Schedule", "", ""))
            except Exception as exc:  # noqa: BLE001
                log.warning("workloads: resync failed: %s", exc)

    def start(self) -> WorkloadControllers:
        self._stop.clear()
        watched = [*self.rts.items(), ("Pod", self.pod_rt)]
        if self.default_scheduler:
            watched.append(("Node", self.node_rt))
        targets: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            (f"workloads-watch-{kind.lower()}", self._watch_loop, (kind, rt)) for kind, rt in watched]
        targets += [("workloads-worker", self._work_loop, ()), ("workloads-resync", self._resync_loop, ())]
        for name, target, args in targets:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(None)
        for watch in list(self._watches.values()):
            with contextlib.suppress(Exception):
                watch.stop()
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []
        self._watches = {}

    def __enter__(self) -> WorkloadControllers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
