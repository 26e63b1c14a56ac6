"""Watch event → which keys to reconcile and which inbox items to push: the pure core of `lahar dispatch`.

`lahar.dispatcher` feeds every informer event through `route(...)`, pushes the returned inbox items, then enqueues
the keys (de-duplicated in Redis). The mapping follows Volcano's job_controller_handler.go (spec/volcano.md §2.1):
pods map to their owning Job (controller ownerReference, else the `volcano.sh/job-name` annotation); the request
events a level view cannot recover (PodEvicted, PodFailed with its exitCode, TaskCompleted, PodRunning/PodPending
transitions, PodGroup → Unknown) become inbox items for that Job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.controllers import _hypernode_tree
from lahar.controllers.workqueue import Key
from lahar.kube.models import labels

__all__ = [
    "ALWAYS",
    "HYPERNODE_TREE",
    "ON_SERVED",
    "KINDS",
    "ORPHANS_KIND",
    "RESOURCES",
    "Work",
    "exit_code",
    "job_of",
    "podgroup_name",
    "route",
]

Obj = dict[str, Any]

KINDS = ("Job", "PodGroup", "Queue", "CronJob", "Command", "Pod", "JobFlow", "JobTemplate", "Node", "HyperNode",
         "ConfigMap")
ORPHANS_KIND = "PodGroupGC"  # controllers/orphans.KIND: the collector of orphaned PodGroups
# kind → (group, version, plural) of what the dispatcher watches and the resync lists
RESOURCES: dict[str, tuple[str, str, str]] = {
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "CronJob": ("batch.volcano.sh", "v1alpha1", "cronjobs"),
    "Command": ("bus.volcano.sh", "v1alpha1", "commands"),
    "Pod": ("", "v1", "pods"),
    "JobFlow": ("flow.volcano.sh", "v1alpha1", "jobflows"),
    "JobTemplate": ("flow.volcano.sh", "v1alpha1", "jobtemplates"),
    "Node": ("", "v1", "nodes"),
    "HyperNode": ("topology.volcano.sh", "v1alpha1", "hypernodes"),
    "ConfigMap": ("", "v1", "configmaps"),  # only the discovery ConfigMaps route (to the HyperNode tree)
}
# the hypernode controller's one key: the whole tree is discovered and its statuses written at once
HYPERNODE_TREE = Key("HyperNodeTree", "", "discovery")
# keys reconciled on every resync even when no object names them: the queue reconciler ensures they exist; the
# HyperNode tree is reconciled whole
ALWAYS = (Key("Queue", "", "root"), Key("Queue", "", "default"), HYPERNODE_TREE)
# keys reconciled once a kind's informer starts: its first list may hold nothing (a CRD just applied), so no event
# would name them until the next resync
ON_SERVED: dict[str, tuple[Key, ...]] = {"HyperNode": (HYPERNODE_TREE,)}
FINISHED = frozenset({"Completed", "Failed", "Terminated"})

ADDED, MODIFIED, DELETED, RESYNC = "ADDED", "MODIFIED", "DELETED", "RESYNC"


@dataclass(frozen=True)
class Work:
    """Reconcile `key`, after pushing `inbox` onto its inbox (in order)."""

    key: Key
    inbox: tuple[dict[str, Any], ...] = ()


# -- small readers -----------------------------------------------------------------------------------------------


def _meta(obj: Obj | None) -> Obj:
    return (obj or {}).get("metadata") or {}


def _ann(obj: Obj | None) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def _phase(pod: Obj | None) -> str:
    return ((pod or {}).get("status") or {}).get("phase") or ""


def _job_phase(job: Obj | None) -> str:
    return (((job or {}).get("status") or {}).get("state") or {}).get("phase") or ""


def _controller_ref(obj: Obj, kind: str, group: str) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("kind") == kind and str(ref.get("apiVersion", "")).startswith(group + "/") and ref.get("controller"):
            return ref.get("name")
    for ref in _meta(obj).get("ownerReferences") or []:  # an owner not marked controller still routes
        if ref.get("kind") == kind and str(ref.get("apiVersion", "")).startswith(group + "/"):
            return ref.get("name")
    return None


def job_of(obj: Obj) -> str | None:
    """The Volcano Job a pod or PodGroup belongs to: controller ownerReference, else `volcano.sh/job-name`."""
    return _controller_ref(obj, "Job", "batch.volcano.sh") or _ann(obj).get(labels.JOB_NAME_KEY) or None


def exit_code(pod: Obj) -> int | None:
    """Volcano reads only the first container: `containerStatuses[0].state.terminated.exitCode`."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not statuses:
        return None
    terminated = (statuses[0].get("state") or {}).get("terminated")
    if not terminated or terminated.get("exitCode") is None:
        return None
    return int(terminated["exitCode"])


def _job_version(pod: Obj) -> int:
    try:
        return int(_ann(pod).get(labels.JOB_VERSION_KEY) or 0)
    except ValueError:
        return 0


def _task_replicas(job: Obj | None, task: str) -> int | None:
    for t in ((job or {}).get("spec") or {}).get("tasks") or []:
        if (t.get("name") or labels.DEFAULT_TASK_SPEC) == task:
            return int(t.get("replicas") if t.get("replicas") is not None else 1)
    return None


def _pod_signature(pod: Obj | None) -> tuple[Any, ...]:
    """What about a pod a reconciler can react to; updates that change none of it (heartbeats) are not routed."""
    if pod is None:
        return ()
    meta, spec, status = _meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    containers = tuple(
        (c.get("name"), c.get("ready"), c.get("restartCount"), tuple(sorted((c.get("state") or {}).keys())))
        for c in status.get("containerStatuses") or []
    )
    ready = tuple((c.get("type"), c.get("status")) for c in status.get("conditions") or [] if c.get("type") == "Ready")
    return (status.get("phase"), spec.get("nodeName"), meta.get("deletionTimestamp"), meta.get("annotations"),
            meta.get("labels"), containers, ready)


def _job_signature(job: Obj | None) -> tuple[Any, ...]:
    """A Job's own status writes (counters) are not routed back to it; spec, phase and metadata changes are."""
    meta = _meta(job)
    return (meta.get("generation"), meta.get("deletionTimestamp"), meta.get("annotations"), meta.get("labels"),
            tuple(meta.get("finalizers") or ()), _job_phase(job))


# -- per kind ----------------------------------------------------------------------------------------------------


def _pod_items(event: str, pod: Obj, old: Obj | None, siblings: Sequence[Obj], job: Obj | None) -> list[dict[str, Any]]:
    ann = _ann(pod)
    task = ann.get(labels.TASK_SPEC_KEY)
    if task is None:
        return []
    base = {"pod": _meta(pod).get("name"), "podUID": _meta(pod).get("uid"), "task": task,
            "jobVersion": _job_version(pod)}
    out_of_sync = labels.CONTROLLER_OUT_OF_SYNC_KEY in ann
    if event == DELETED:
        return [] if out_of_sync else [{"event": "PodEvicted", **base}]
    if event == ADDED:
        if out_of_sync:
            return []
        if _phase(pod) in ("", "Pending"):
            return [{"event": "PodPending", **base}]
        if _missed_while_away(pod, job):
            # it finished while no dispatcher watched (one restarting, devcluster restarted, a relist): the edge is
            # re-derived, or a PodFailed → RestartJob job would go Failed; a repeat of an edge already handled is
            # harmless (the version moved on, or no policy matches)
            return _finished_items(pod, base, siblings, job, task)
        return []
    if event != MODIFIED:
        return []
    before, after = _phase(old), _phase(pod)
    if before == after:
        return []
    if after in ("Failed", "Succeeded"):
        return _finished_items(pod, base, siblings, job, task)
    if after == "Running":
        return [{"event": "PodRunning", **base}]
    if after == "Pending":
        return [{"event": "PodPending", **base}]
    return []


def _finished_items(pod: Obj, base: dict[str, Any], siblings: Sequence[Obj], job: Obj | None,
                    task: str) -> list[dict[str, Any]]:
    if _phase(pod) == "Failed":
        return [{"event": "PodFailed", **base, "exitCode": exit_code(pod)}]
    replicas = _task_replicas(job, task)
    done = {_meta(p).get("name") for p in siblings
            if _ann(p).get(labels.TASK_SPEC_KEY) == task and _phase(p) == "Succeeded"}
    done.add(_meta(pod).get("name"))
    if replicas is not None and len(done) >= replicas:
        return [{"event": "TaskCompleted", "task": task, "jobVersion": base["jobVersion"]}]
    return []


ACTIVE = frozenset({"", "Pending", "Running"})


def _missed_while_away(pod: Obj, job: Obj | None) -> bool:
    """A finished pod seen first as ADDED, of its Job's current version, the Job still active (or not cached yet: the
    reconciler drops items of an older version)."""
    if _phase(pod) not in ("Failed", "Succeeded"):
        return False
    if job is None:
        return True
    version = int(((job.get("status") or {}).get("version")) or 0)
    return _job_phase(job) in ACTIVE and _job_version(pod) >= version


def _route_pod(event: str, pod: Obj, old: Obj | None, *, siblings: Sequence[Obj], job: Obj | None,
               scheduler_names: Iterable[str]) -> list[Work]:
    ns = _meta(pod).get("namespace") or "default"
    if event == MODIFIED and _pod_signature(old) == _pod_signature(pod):
        return []
    job_name = job_of(pod)
    if job_name:
        return [Work(Key("Job", ns, job_name), tuple(_pod_items(event, pod, old, siblings, job)))]
    ann = _ann(pod)
    if (event != DELETED and (pod.get("spec") or {}).get("schedulerName") in set(scheduler_names)
            and not ann.get(labels.GROUP_NAME_ANNOTATION)):
        # a plain pod for one of our schedulers: the podgroup reconciler gives it a PodGroup (spec §3)
        return [Work(Key("PodGroup", ns, podgroup_name(pod)))]
    if event == DELETED and ann.get(labels.GROUP_NAME_ANNOTATION):
        # its PodGroup may have no pods left: controllers/orphans.py starts its no-pods clock
        return [Work(Key(ORPHANS_KIND, ns, ann[labels.GROUP_NAME_ANNOTATION]))]
    return []


def podgroup_name(pod: Obj) -> str:
    """Volcano's GeneratePodgroupName: `podgroup-<controller owner UID, else the pod's UID>`."""
    owner = next((r for r in _meta(pod).get("ownerReferences") or [] if r.get("controller")), None)
    return f"{labels.PODGROUP_NAME_PREFIX}{(owner or {}).get('uid') or _meta(pod).get('uid') or ''}"


def _route_podgroup(event: str, pg: Obj, old: Obj | None) -> list[Work]:
    ns = _meta(pg).get("namespace") or "default"
    before, after = _phase(old), _phase(pg)
    out: list[Work] = []
    if str(_meta(pg).get("name", "")).startswith(labels.PODGROUP_NAME_PREFIX) and event in (ADDED, RESYNC):
        out.append(Work(Key("PodGroup", ns, _meta(pg)["name"])))  # a plain workload's: its owner may be gone
    job_name = job_of(pg)
    if event in (ADDED, RESYNC) and not job_name:
        # owner or pods gone (controllers/orphans.py); a Volcano Job's PodGroup is its job controller's (and the
        # garbage collector's once the Job is gone), so it costs the collector no reads
        out.append(Work(Key(ORPHANS_KIND, ns, _meta(pg)["name"])))
    if job_name and (event != MODIFIED or before != after or _meta(old).get("generation") != _meta(pg).get("generation")):
        items = ({"event": "Unknown"},) if event == MODIFIED and after == "Unknown" and before != "Unknown" else ()
        out.append(Work(Key("Job", ns, job_name), items))
    queue = (pg.get("spec") or {}).get("queue")
    if queue and (event != MODIFIED or before != after or (old or {}).get("spec", {}).get("queue") != queue):
        out.append(Work(Key("Queue", "", queue)))
        old_queue = ((old or {}).get("spec") or {}).get("queue")
        if old_queue and old_queue != queue:
            out.append(Work(Key("Queue", "", old_queue)))
    return out


def _route_job(event: str, job: Obj, old: Obj | None) -> list[Work]:
    meta = _meta(job)
    ns, name = meta.get("namespace") or "default", meta.get("name")
    out: list[Work] = []
    if event != MODIFIED or _job_signature(old) != _job_signature(job):
        out.append(Work(Key("Job", ns, name)))
    phase_changed = event != MODIFIED or _job_phase(old) != _job_phase(job)
    cron = _controller_ref(job, "CronJob", "batch.volcano.sh")
    if cron and phase_changed:
        out.append(Work(Key("CronJob", ns, cron)))
    flow = _controller_ref(job, "JobFlow", "flow.volcano.sh")
    if flow and phase_changed:  # a step's Job started, finished or went away: its flow may move on
        out.append(Work(Key("JobFlow", ns, flow)))
    template = _created_by(job, labels.CREATED_BY_JOB_TEMPLATE_KEY)
    if template and event in (ADDED, RESYNC):
        out.append(Work(Key("JobTemplate", *template)))
    if (event != DELETED and _job_phase(job) in FINISHED
            and (job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None and (phase_changed or event == RESYNC)):
        out.append(Work(Key("GC", ns, name)))
    return out


def _created_by(job: Obj, key: str) -> tuple[str, str] | None:
    """The (namespace, name) of a `<namespace>.<name>` createdBy label, as Volcano splits it (exactly one dot)."""
    parts = str((_meta(job).get("labels") or {}).get(key) or "").split(".")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


def _flow_signature(flow: Obj | None) -> tuple[Any, ...]:
    """A JobFlow's spec and phase; its own status writes that keep the phase are not routed back to it."""
    return (_meta(flow).get("generation"), _meta(flow).get("deletionTimestamp"),
            (((flow or {}).get("status") or {}).get("state") or {}).get("phase"))


def _route_queue(event: str, queue: Obj, old: Obj | None) -> list[Work]:
    name = _meta(queue).get("name")
    out = [] if event == DELETED else [Work(Key("Queue", "", name))]
    parent = (queue.get("spec") or {}).get("parent")
    if parent and parent != name and (event != MODIFIED or _queue_state(old) != _queue_state(queue)):
        out.append(Work(Key("Queue", "", parent)))
    return out


def _queue_state(queue: Obj | None) -> tuple[Any, ...]:
    return (((queue or {}).get("status") or {}).get("state"), ((queue or {}).get("spec") or {}).get("parent"))


def _route_topology(kind: str, event: str, obj: Obj, old: Obj | None) -> list[Work]:
    """Nodes and HyperNodes feed the HyperNode tree: joins, leaves and label changes of a Node; any change of a
    HyperNode but its status (the controller's own status writes would otherwise come back to it)."""
    if event == MODIFIED:
        before, after = _meta(old), _meta(obj)
        if before.get("labels") == after.get("labels") and (
                kind == "Node" or before.get("generation") == after.get("generation")):
            return []
    return [Work(HYPERNODE_TREE)]


def _route_configmap(event: str, cm: Obj, old: Obj | None) -> list[Work]:
    """A discovery ConfigMap (Volcano's controller ConfigMap, any namespace) created, deleted or with changed data
    re-runs discovery; every other ConfigMap, and a discovery ConfigMap's metadata-only update, routes nowhere."""
    if _meta(cm).get("name") not in _hypernode_tree.CONFIGMAP_NAMES:
        return []
    if event == MODIFIED and (old or {}).get("data") == cm.get("data"):
        return []
    return [Work(HYPERNODE_TREE)]


def route(kind: str, event: str, obj: Obj, old: Obj | None = None, *, siblings: Sequence[Obj] = (),
          job: Obj | None = None, scheduler_names: Iterable[str] = ("volcano",)) -> list[Work]:
    """Keys to reconcile for one event (`ADDED`, `MODIFIED` with `old`, `DELETED`, or `RESYNC`) on `obj` of `kind`.

    For a Pod: `siblings` are the cached pods of the same Job (any state) and `job` the cached Job, used only to
    tell when a Succeeded transition completes its task (TaskCompleted).
    """
    if kind == "Pod":
        return _route_pod(event, obj, old, siblings=siblings, job=job, scheduler_names=scheduler_names)
    if kind == "PodGroup":
        return _route_podgroup(event, obj, old)
    if kind == "Job":
        return _route_job(event, obj, old)
    if kind == "Queue":
        return _route_queue(event, obj, old)
    if kind in ("Node", "HyperNode"):
        return _route_topology(kind, event, obj, old)
    if kind == "ConfigMap":
        return _route_configmap(event, obj, old)
    meta = _meta(obj)
    if kind == "CronJob":
        return [Work(Key("CronJob", meta.get("namespace") or "default", meta.get("name")))]
    if kind == "Command":
        return [] if event == DELETED else [Work(Key("Command", meta.get("namespace") or "default", meta.get("name")))]
    if kind == "JobFlow":
        if event == DELETED or (event == MODIFIED and _flow_signature(old) == _flow_signature(obj)):
            return []
        return [Work(Key("JobFlow", meta.get("namespace") or "default", meta.get("name")))]
    if kind == "JobTemplate":
        return [] if event == DELETED else [Work(Key("JobTemplate", meta.get("namespace") or "default",
                                                     meta.get("name")))]
    raise ValueError(f"no routing for kind {kind!r}")
