"""What the job reconciler creates, built as plain dicts: the pods of each task, the PodGroup, the PVCs.

Names, labels and annotations exactly as Volcano's `createJobPod` / `createOrUpdatePodGroup` (spec/volcano.md §1.7,
§2.3), minResources as `calcPGMinResources`; every child name is deterministic (see docs/compatibility.md). Pure.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.kube import quantity
from lahar.kube.models import labels as keys

__all__ = [
    "JOB_API_VERSION",
    "JOB_KIND",
    "build_pod",
    "build_podgroup",
    "build_pvc",
    "controller_ref",
    "min_resources",
    "min_task_member",
    "normalize",
    "partition_id",
    "pod_index",
    "pod_name",
    "pod_quota_usage",
    "podgroup_name",
    "podgroup_spec",
    "pvc_name",
    "task_of",
    "volume_claims",
]

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_KIND = "Job"
_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def normalize(job: dict[str, Any], *, default_queue: str = "default", scheduler_name: str = "volcano") -> dict[str, Any]:
    """A deep copy with the defaults the CRD schema and /jobs/mutate would have set (for objects that skipped them):
    task names `default<i>`, `minAvailable` = Σ task minAvailable|replicas, `maxRetry` 3, `queue`, `schedulerName`."""
    job = copy.deepcopy(job)
    spec = job.setdefault("spec", {})
    tasks = spec.setdefault("tasks", [])
    for i, task in enumerate(tasks):
        task.setdefault("name", f"default{i}")
        task["replicas"] = int(task.get("replicas") or 0)
        task.setdefault("template", {})
    if spec.get("minAvailable") is None:
        spec["minAvailable"] = sum(int(t["minAvailable"]) if t.get("minAvailable") is not None else t["replicas"]
                                   for t in tasks)
    spec["minAvailable"] = int(spec["minAvailable"])
    if spec.get("maxRetry") is None:
        spec["maxRetry"] = 3
    if not spec.get("queue"):
        spec["queue"] = default_queue
    if not spec.get("schedulerName"):
        spec["schedulerName"] = scheduler_name
    return job


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def controller_ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(job)
    return {"apiVersion": JOB_API_VERSION, "kind": JOB_KIND, "name": meta.get("name"), "uid": meta.get("uid"),
            "controller": True, "blockOwnerDeletion": True}


def podgroup_name(job: Mapping[str, Any]) -> str:
    meta = _meta(job)
    return f"{meta.get('name')}-{meta.get('uid')}"


def pod_name(job_name: str, task: str, index: int) -> str:
    return f"{job_name}-{task}-{index}"


def pod_index(pod: Mapping[str, Any]) -> int | None:
    """The task index of a job pod: its `volcano.sh/task-index` annotation, else the name's last dash part."""
    meta = _meta(pod)
    text = (meta.get("annotations") or {}).get(keys.TASK_INDEX_KEY) or str(meta.get("name") or "").rsplit("-", 1)[-1]
    try:
        return int(text)
    except ValueError:
        return None


def task_of(pod: Mapping[str, Any]) -> str:
    """GetTaskKey: the `volcano.sh/task-spec` annotation, `default` when missing."""
    return (_meta(pod).get("annotations") or {}).get(keys.TASK_SPEC_KEY) or keys.DEFAULT_TASK_SPEC


def partition_id(task: Mapping[str, Any], index: int) -> str | None:
    policy = task.get("partitionPolicy") or {}
    size = int(policy.get("partitionSize") or 0)
    return str(index // size) if size > 0 else None


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:12]


def pvc_name(job: Mapping[str, Any], volume: Mapping[str, Any]) -> str:
    """Volcano draws `<job>-pvc-<random 12>`; lahar derives the 12 characters from the job UID and mount path."""
    meta = _meta(job)
    return f"{meta.get('name')}-pvc-{_short_hash(str(meta.get('uid')), str(volume.get('mountPath')))}"


def volume_claims(job: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """(claim name, volume spec, lahar creates it) for each `spec.volumes[]` entry, in order."""
    out = []
    for volume in (job.get("spec") or {}).get("volumes") or ():
        name = volume.get("volumeClaimName")
        if name:
            out.append((name, volume, False))
        else:
            out.append((pvc_name(job, volume), volume, volume.get("volumeClaim") is not None))
    return out


def build_pvc(job: Mapping[str, Any], name: str, claim_spec: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(job)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": meta.get("namespace"), "ownerReferences": [controller_ref(job)]},
            "spec": copy.deepcopy(dict(claim_spec))}


def build_pod(job: Mapping[str, Any], task: Mapping[str, Any], index: int, *, forwarding: bool = False) -> dict[str, Any]:
    """createJobPod: the template plus Volcano's names, owner, labels, annotations, volumes and defaults."""
    meta = _meta(job)
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    job_name = str(meta.get("name"))
    template = copy.deepcopy(task.get("template") or {})
    tmeta = template.get("metadata") or {}
    task_name = str(task.get("name") or "")
    pod_spec = template.get("spec") or {}
    pod_spec.setdefault("containers", [])
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.get("schedulerName")
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]

    seen: set[str] = set()
    for claim, volume, _ in volume_claims(job):
        if claim in seen:
            continue  # duplicate volumes: the webhook rejects them
        seen.add(claim)
        vol_name = f"{job_name}-{_short_hash(str(meta.get('uid')), claim)}"
        pod_spec.setdefault("volumes", []).append({"name": vol_name, "persistentVolumeClaim": {"claimName": claim}})
        for c in pod_spec["containers"]:
            c.setdefault("volumeMounts", []).append({"mountPath": volume.get("mountPath"), "name": vol_name})

    ts_key = task_name or keys.DEFAULT_TASK_SPEC
    idx = str(index)
    annotations = dict(tmeta.get("annotations") or {})
    annotations[keys.TASK_INDEX_KEY] = idx
    annotations[keys.TASK_SPEC_KEY] = ts_key
    annotations[keys.GROUP_NAME_ANNOTATION] = podgroup_name(job)
    annotations[keys.JOB_NAME_KEY] = job_name
    annotations[keys.QUEUE_NAME_KEY] = str(spec.get("queue") or "")
    annotations[keys.JOB_VERSION_KEY] = str(int(status.get("version") or 0))
    annotations[keys.POD_TEMPLATE_KEY] = f"{job_name}-{task_name}"
    annotations[keys.JOB_RETRY_COUNT_KEY] = str(int(status.get("retryCount") or 0))
    if task.get("topologyPolicy"):
        annotations[keys.NUMA_POLICY_KEY] = str(task["topologyPolicy"])
    job_annotations = meta.get("annotations") or {}
    for key in (keys.PREEMPTABLE_KEY, keys.COOLDOWN_TIME_KEY, keys.REVOCABLE_ZONE_KEY):
        if key in job_annotations:
            annotations[key] = job_annotations[key]
    if keys.JDB_MIN_AVAILABLE_KEY in job_annotations:
        annotations[keys.JDB_MIN_AVAILABLE_KEY] = job_annotations[keys.JDB_MIN_AVAILABLE_KEY]
    elif keys.JDB_MAX_UNAVAILABLE_KEY in job_annotations:
        annotations[keys.JDB_MAX_UNAVAILABLE_KEY] = job_annotations[keys.JDB_MAX_UNAVAILABLE_KEY]

    pod_labels = dict(tmeta.get("labels") or {})
    pod_labels[keys.TASK_INDEX_KEY] = idx
    pod_labels[keys.JOB_NAME_KEY] = job_name
    pod_labels[keys.TASK_SPEC_KEY] = ts_key
    pod_labels[keys.JOB_NAMESPACE_KEY] = str(meta.get("namespace") or "")
    pod_labels[keys.QUEUE_NAME_KEY] = str(spec.get("queue") or "")
    job_labels = meta.get("labels") or {}
    for key in (keys.PREEMPTABLE_KEY, keys.COOLDOWN_TIME_KEY):
        if key in job_labels:
            pod_labels[key] = job_labels[key]
    part = partition_id(task, index)
    if part is not None:
        pod_labels[keys.PARTITION_ID_KEY] = part
    if forwarding:
        annotations[keys.JOB_FORWARDING_KEY] = "true"
        pod_labels[keys.JOB_FORWARDING_KEY] = "true"

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(job_name, task_name, index), "namespace": meta.get("namespace"),
                     "ownerReferences": [controller_ref(job)], "labels": pod_labels, "annotations": annotations},
        "spec": pod_spec,
    }


# --- PodGroup ------------------------------------------------------------------------------------------------------

def min_task_member(task: Mapping[str, Any]) -> int:
    """getMinTaskMember: task.minAvailable, else minPartitions × partitionSize, else replicas."""
    if task.get("minAvailable") is not None:
        return int(task["minAvailable"])
    policy = task.get("partitionPolicy") or {}
    if int(policy.get("minPartitions") or 0) and int(policy.get("partitionSize") or 0):
        return int(policy["minPartitions"]) * int(policy["partitionSize"])
    return int(task.get("replicas") or 0)


def _sum_containers(containers: Iterable[Mapping[str, Any]], field: str) -> dict[str, quantity.Quantity]:
    total: dict[str, quantity.Quantity] = {}
    for c in containers:
        total = quantity.add(total, (c.get("resources") or {}).get(field) or {})
    return total


def _max_into(a: dict[str, quantity.Quantity], b: Mapping[str, quantity.Quantity]) -> dict[str, quantity.Quantity]:
    out = dict(a)
    for k, v in b.items():
        if k not in out or v > out[k]:
            out[k] = v
    return out


def _pod_resources(pod_spec: Mapping[str, Any], field: str) -> dict[str, quantity.Quantity]:
    """resourcehelper.PodRequests/PodLimits: max(Σ containers + sidecars, each init container + sidecars before it)
    plus overhead."""
    total = _sum_containers(pod_spec.get("containers") or (), field)
    sidecars: dict[str, quantity.Quantity] = {}
    init_max: dict[str, quantity.Quantity] = {}
    for c in pod_spec.get("initContainers") or ():
        own = quantity.resource_list((c.get("resources") or {}).get(field) or {})
        if c.get("restartPolicy") == "Always":
            sidecars = quantity.add(sidecars, own)
            init_max = _max_into(init_max, sidecars)
        else:
            init_max = _max_into(init_max, quantity.add(sidecars, own))
    result = _max_into(quantity.add(total, sidecars), init_max)
    if pod_spec.get("overhead"):
        result = quantity.add(result, pod_spec["overhead"])
    return result


def _extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified name outside kubernetes.io, not `requests.`-prefixed."""
    if name in _COMPUTE or name.startswith("hugepages-") or name.startswith("requests."):
        return False
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io")


def pod_quota_usage(pod_spec: Mapping[str, Any]) -> dict[str, quantity.Quantity]:
    """Volcano's GetPodQuotaUsage (kube's quota PodUsageFunc): `count/pods`, `pods`, cpu/memory/ephemeral-storage as
    bare, `requests.` and `limits.` names, hugepages and extended resources under their name and `requests.<name>`."""
    requests = _pod_resources(pod_spec, "requests")
    limits = _pod_resources(pod_spec, "limits")
    one = quantity.parse("1")
    out: dict[str, quantity.Quantity] = {"count/pods": one, "pods": one}
    for name in _COMPUTE:
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = value
            out[f"requests.{name}"] = value
        elif _extended(name):
            out[f"requests.{name}"] = value
            out[name] = value  # GetPodQuotaUsage copies non-native `requests.<x>` back to `<x>`
    return out


def _times(usage: Mapping[str, quantity.Quantity], n: int) -> dict[str, quantity.Quantity]:
    out: dict[str, quantity.Quantity] = {}
    for _ in range(max(0, n)):
        out = quantity.add(out, usage)
    return out


def min_resources(job: Mapping[str, Any], priorities: Mapping[str, int] | None = None) -> dict[str, str]:
    """calcPGMinResources: tasks by PriorityClass value (desc, stable); if job.minAvailable < Σ task minimums the
    first minAvailable pods, else each task's minimum then the remaining replicas up to minAvailable."""
    priorities = priorities or {}
    spec = job.get("spec") or {}
    tasks = list(spec.get("tasks") or ())
    job_min = int(spec.get("minAvailable") or 0)
    ranked = sorted(tasks, key=lambda t: -int(priorities.get(((t.get("template") or {}).get("spec") or {})
                                                             .get("priorityClassName") or "", 0)))
    usage = [pod_quota_usage((t.get("template") or {}).get("spec") or {}) for t in ranked]
    total_min = sum(int(t["minAvailable"]) if t.get("minAvailable") is not None else int(t.get("replicas") or 0)
                    for t in tasks)
    req: dict[str, quantity.Quantity] = {}
    if job_min < total_min:
        count = job_min
        for t, u in zip(ranked, usage, strict=True):
            replicas = int(t.get("replicas") or 0)
            if count <= replicas:
                req = quantity.add(req, _times(u, count))
                break
            req = quantity.add(req, _times(u, replicas))
            count -= replicas
        return quantity.render(req)
    pods = 0
    for t, u in zip(ranked, usage, strict=True):
        if t.get("minAvailable") is None:
            continue
        valid = min(int(t["minAvailable"]), job_min - pods)
        req = quantity.add(req, _times(u, valid))
        pods += valid
        if pods >= job_min:
            break
    if pods < job_min:
        left_count = job_min - pods
        for t, u in zip(ranked, usage, strict=True):
            replicas = int(t.get("replicas") or 0)
            left = replicas
            if t.get("minAvailable") is not None:
                if int(t["minAvailable"]) == replicas:
                    continue
                left = replicas - int(t["minAvailable"])
            take = min(left, left_count)
            req = quantity.add(req, _times(u, take))
            left_count -= take
            if left_count <= 0:
                break
    return quantity.render(req)


def _sub_group_policy(task: Mapping[str, Any]) -> dict[str, Any]:
    policy = task.get("partitionPolicy") or {}
    out: dict[str, Any] = {
        "name": task.get("name"),
        "subGroupSize": int(policy.get("partitionSize") or 0),
        "minSubGroups": int(policy.get("minPartitions") or 0),
        "labelSelector": {"matchLabels": {keys.TASK_SPEC_KEY: task.get("name")}},
        "matchLabelKeys": [keys.PARTITION_ID_KEY],
    }
    if policy.get("networkTopology"):
        out["networkTopology"] = copy.deepcopy(policy["networkTopology"])
    return out


def podgroup_spec(job: Mapping[str, Any], priorities: Mapping[str, int] | None = None) -> dict[str, Any]:
    spec = job.get("spec") or {}
    tasks = spec.get("tasks") or ()
    out: dict[str, Any] = {
        "minMember": int(spec.get("minAvailable") or 0),
        "minTaskMember": {t.get("name"): min_task_member(t) for t in tasks},
        "queue": spec.get("queue"),
        "minResources": min_resources(job, priorities),
    }
    if spec.get("priorityClassName"):
        out["priorityClassName"] = spec["priorityClassName"]
    topology = spec.get("networkTopology")
    if topology:
        nt: dict[str, Any] = {"mode": topology.get("mode") or "hard"}
        if topology.get("highestTierAllowed") is not None:
            nt["highestTierAllowed"] = topology["highestTierAllowed"]
        elif topology.get("highestTierName"):
            nt["highestTierName"] = topology["highestTierName"]
        out["networkTopology"] = nt
    groups = [_sub_group_policy(t) for t in tasks if t.get("partitionPolicy")]
    if groups:
        out["subGroupPolicy"] = groups
    return out


def build_podgroup(job: Mapping[str, Any], priorities: Mapping[str, int] | None = None) -> dict[str, Any]:
    meta = _meta(job)
    pg_meta: dict[str, Any] = {"name": podgroup_name(job), "namespace": meta.get("namespace"),
                               "ownerReferences": [controller_ref(job)]}
    if meta.get("annotations"):
        pg_meta["annotations"] = dict(meta["annotations"])
    if meta.get("labels"):
        pg_meta["labels"] = dict(meta["labels"])
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": pg_meta,
            "spec": podgroup_spec(job, priorities)}
