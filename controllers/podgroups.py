"""PodGroups for workloads that are not Volcano Jobs (Volcano's pg-controller, spec/volcano.md §3).

dispatch maps a plain pod using one of lahar's scheduler names to `("PodGroup", ns, podgroup_name(pod))`; this
reconciler creates `podgroup-<ownerUID|podUID>` from the pod and its owner, then stamps the pod annotation
`scheduling.k8s.io/group-name`. ReplicaSets / StatefulSets scaled to 0 lose their PodGroup; for them the PodGroup
follows the pod template (create-or-update), for plain pods and batch Jobs it is created once.

    podgroup_name(pod)                    -> "podgroup-<controller owner UID, else pod UID>"
    wants_podgroup(pod, scheduler_names)  -> does the pg-controller handle this pod at all
    build_podgroup(pod, name=..., ...)    -> the PodGroup object (pure)
    reconcile(ctx, namespace, name)       -> Result

PodGroups named otherwise (a Volcano Job's `<job>-<uid>`, or one a user wrote) are not this reconciler's: a no-op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.controllers import _meta
from lahar.controllers.context import Context, Result
from lahar.kube import errors, podspec
from lahar.kube.models import labels

__all__ = [
    "INHERITED_ANNOTATION_PREFIX",
    "build_podgroup",
    "min_member",
    "network_topology",
    "podgroup_name",
    "reconcile",
    "wants_podgroup",
]

INHERITED_ANNOTATION_PREFIX = "volcano.sh/"  # owner and pod annotations copied onto the PodGroup
_OWNER_KINDS = {
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "Job": "batchjobs",
}
_WORKLOAD_KINDS = ("ReplicaSet", "StatefulSet")  # create-or-update, and deleted at replicas 0 (WorkLoadSupport)
_API_VERSION = "scheduling.volcano.sh/v1beta1"


# --- pure decisions ------------------------------------------------------------------------------------------------


def podgroup_name(pod: Mapping[str, Any]) -> str:
    """helpers.GeneratePodgroupName: the controller owner's UID, else the pod's own UID."""
    owner = _meta.controller_of(dict(pod))
    uid = (owner or {}).get("uid") or (pod.get("metadata") or {}).get("uid") or ""
    return f"{labels.PODGROUP_NAME_PREFIX}{uid}"


def wants_podgroup(pod: Mapping[str, Any], scheduler_names: Iterable[str]) -> bool:
    """The pod uses one of our scheduler names and is not yet tied to a PodGroup."""
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return spec.get("schedulerName") in set(scheduler_names) and not annotations.get(labels.GROUP_NAME_ANNOTATION)


def min_member(owner_annotations: Mapping[str, str]) -> int:
    """`scheduling.volcano.sh/group-min-member` on the owner; 1 when absent, unparsable or negative."""
    raw = owner_annotations.get(labels.GROUP_MIN_MEMBER_ANNOTATION)
    if raw is None:
        return 1
    try:
        value = int(str(raw).strip())
    except ValueError:
        return 1
    if value < 0 or value > 2**31 - 1:
        return 1
    return value


def network_topology(pod_annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """networkTopology from `volcano.sh/network-topology-mode` / `-highest-tier`; mode defaults to hard."""
    mode = pod_annotations.get(labels.NETWORK_TOPOLOGY_MODE_ANNOTATION)
    tier = pod_annotations.get(labels.NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION)
    if mode is None and tier is None:
        return None
    spec: dict[str, Any] = {"mode": "hard"}
    if mode is not None and mode.lower() in ("hard", "soft"):
        spec["mode"] = mode.lower()
    if tier is not None:
        with contextlib.suppress(ValueError):
            spec["highestTierAllowed"] = int(tier.strip())
    return spec


def _owner_references(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """newPGOwnerReferences: the pod's own references when one is a controller, else a controller ref to the pod."""
    refs = list((pod.get("metadata") or {}).get("ownerReferences") or ())
    if any(ref.get("controller") for ref in refs):
        return [dict(ref) for ref in refs]
    return [_meta.controller_ref(dict(pod), api_version="v1", kind="Pod")]


def build_podgroup(pod: Mapping[str, Any], *, name: str, owner_annotations: Mapping[str, str] | None = None,
                   namespace_annotations: Mapping[str, str] | None = None,
                   default_queue: str = "default") -> dict[str, Any]:
    """buildPodGroupFromPod. Queue: the pod's `scheduling.volcano.sh/queue-name`, else the namespace's, else the
    default queue (Volcano leaves that last step to the PodGroup webhook; lahar does it here so it holds without)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    owner_annotations = dict(owner_annotations or {})
    pod_annotations = dict(meta.get("annotations") or {})
    members = min_member(owner_annotations)
    requests = podspec.pod_requests(pod)
    min_resources = {res: (q * members).canonical for res, q in sorted(requests.items())}

    annotations: dict[str, str] = {}
    for source in (owner_annotations, pod_annotations):  # pod annotations override inherited ones
        for key, value in source.items():
            if key.startswith(INHERITED_ANNOTATION_PREFIX):
                annotations[key] = value

    queue = (pod_annotations.get(labels.QUEUE_NAME_ANNOTATION)
             or (namespace_annotations or {}).get(labels.QUEUE_NAME_ANNOTATION)
             or default_queue)
    pg_spec: dict[str, Any] = {"minMember": members, "queue": queue, "minResources": min_resources}
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    topology = network_topology(pod_annotations)
    if topology is not None:
        pg_spec["networkTopology"] = topology
    out_meta: dict[str, Any] = {"name": name, "namespace": meta.get("namespace"),
                                "ownerReferences": _owner_references(pod)}
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": _API_VERSION, "kind": "PodGroup", "metadata": out_meta, "spec": pg_spec,
            "status": {"phase": "Pending"}}


def _needs_update(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """shouldUpdateExistingPodGroup: spec or annotations differ (compared on the fields we own)."""
    cur_spec = current.get("spec") or {}
    for key, value in desired["spec"].items():
        if cur_spec.get(key) != value:
            return True
    for key in ("priorityClassName", "networkTopology"):
        if key in cur_spec and key not in desired["spec"]:
            return True
    cur_ann = (current.get("metadata") or {}).get("annotations") or {}
    want_ann = desired["metadata"].get("annotations") or {}
    return {k: v for k, v in cur_ann.items() if k.startswith(INHERITED_ANNOTATION_PREFIX)} != want_ann


def _is_live(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def _representative(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod the PodGroup is built from: one not yet annotated (the newest template) first, then newest."""
    def key(p: dict[str, Any]) -> tuple[bool, str, str]:
        meta = p.get("metadata") or {}
        return (bool((meta.get("annotations") or {}).get(labels.GROUP_NAME_ANNOTATION)),
                _invert(meta.get("creationTimestamp") or ""), meta.get("name") or "")
    return sorted(pods, key=key)[0]


def _invert(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


# --- the I/O shell -------------------------------------------------------------------------------------------------


def _owner_annotations(ctx: Context, namespace: str, pod: Mapping[str, Any]) -> tuple[dict[str, str], list[Any]]:
    """getAnnotationsFromUpperRes (first owner wins per key; a ReplicaSet also inherits its Deployment's), plus the
    workload owners (ReplicaSet / StatefulSet objects) found on the way."""
    merged: dict[str, str] = {}
    workloads: list[Any] = []
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        handle = _OWNER_KINDS.get(ref.get("kind") or "")
        if handle is None or not ref.get("name"):
            continue
        try:
            owner = ctx.client.get(_meta.rt(ctx, handle), ref["name"], namespace=namespace)
        except (errors.NotFound, LookupError):
            continue
        found = dict((owner.get("metadata") or {}).get("annotations") or {})
        if ref["kind"] == "ReplicaSet":
            deployment = _meta.controller_of(owner)
            if deployment and deployment.get("kind") == "Deployment":
                with contextlib.suppress(errors.NotFound, LookupError):
                    dep = ctx.client.get(_meta.rt(ctx, "deployments"), deployment["name"], namespace=namespace)
                    found = {**((dep.get("metadata") or {}).get("annotations") or {}), **found}
        if ref["kind"] in _WORKLOAD_KINDS and ref.get("controller"):
            workloads.append(owner)
        for key, value in found.items():
            merged.setdefault(key, value)
    return merged, workloads


def _namespace_annotations(ctx: Context, namespace: str) -> dict[str, str]:
    try:
        ns = ctx.client.get(_meta.rt(ctx, "namespaces"), namespace)
    except errors.NotFound:
        return {}
    return dict((ns.get("metadata") or {}).get("annotations") or {})


def _replicas(workload: Mapping[str, Any]) -> int:
    value = (workload.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _workload_of_podgroup(ctx: Context, namespace: str, pg: Mapping[str, Any]) -> dict[str, Any] | None:
    ref = _meta.controller_of(dict(pg))
    if not ref or ref.get("kind") not in _WORKLOAD_KINDS:
        return None
    try:
        owner = ctx.client.get(_meta.rt(ctx, _OWNER_KINDS[ref["kind"]]), ref["name"], namespace=namespace)
    except errors.NotFound:
        return None
    return owner if (owner.get("metadata") or {}).get("uid") == ref.get("uid") else None


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    if not name.startswith(labels.PODGROUP_NAME_PREFIX):
        return Result()
    pg_rt = _meta.rt(ctx, "podgroups")
    pods_rt = _meta.rt(ctx, "pods")
    try:
        current: dict[str, Any] | None = ctx.client.get(pg_rt, name, namespace=namespace)
    except errors.NotFound:
        current = None

    members = [p for p in ctx.client.list(pods_rt, namespace=namespace)["items"]
               if podgroup_name(p) == name and (p.get("spec") or {}).get("schedulerName") in ctx.scheduler_names]
    # a pod already tied to another PodGroup (e.g. a LeaderWorkerSet's own) is not ours
    ours = [p for p in members
            if ((p["metadata"].get("annotations") or {}).get(labels.GROUP_NAME_ANNOTATION) or name) == name]
    live = [p for p in ours if _is_live(p)]

    if current is not None:
        workload = _workload_of_podgroup(ctx, namespace, current)
        if workload is not None and _replicas(workload) == 0:
            with contextlib.suppress(errors.NotFound):
                ctx.client.delete(pg_rt, name, namespace=namespace)
            return Result()
    if not live:
        return Result()

    pod = _representative(live)
    owner_annotations, workloads = _owner_annotations(ctx, namespace, pod)
    if any(_replicas(w) == 0 for w in workloads):
        return Result()
    desired = build_podgroup(pod, name=name, owner_annotations=owner_annotations,
                             namespace_annotations=_namespace_annotations(ctx, namespace),
                             default_queue=ctx.default_queue)
    if current is None:
        with contextlib.suppress(errors.AlreadyExists):
            ctx.client.create(pg_rt, desired, namespace=namespace)
    elif workloads and _needs_update(current, desired):
        updated = dict(current)
        updated["spec"] = {**(current.get("spec") or {}), **desired["spec"]}
        for key in ("priorityClassName", "networkTopology"):
            if key not in desired["spec"]:
                updated["spec"].pop(key, None)
        meta = dict(current["metadata"])
        kept = {k: v for k, v in (meta.get("annotations") or {}).items()
                if not k.startswith(INHERITED_ANNOTATION_PREFIX)}
        meta["annotations"] = {**kept, **(desired["metadata"].get("annotations") or {})}
        updated["metadata"] = meta
        ctx.client.update(pg_rt, updated, namespace=namespace)  # resourceVersion from the read: 409 on a race

    for p in live:
        if not (p["metadata"].get("annotations") or {}).get(labels.GROUP_NAME_ANNOTATION):
            with contextlib.suppress(errors.NotFound):
                ctx.client.patch(pods_rt, p["metadata"]["name"],
                                 {"metadata": {"annotations": {labels.GROUP_NAME_ANNOTATION: name}}},
                                 namespace=namespace, patch_type="strategic")
    return Result()
