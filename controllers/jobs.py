"""The Volcano Job reconciler: `reconcile(ctx, namespace, name)` drives one batch.volcano.sh Job a step forward.

Each call re-reads the Job, its PodGroup `<job>-<uid>` and its pods, takes at most one user action from the inbox
(or a due delayed action), runs the phase's state (`_job_state`) — SyncJob, KillJob or KillTarget — and writes the
status once (a phase-changing kill twice: intent, then outcome), with the read resourceVersion as precondition (a
Conflict propagates: the runtime retries). Children have deterministic names, so a replay after a crash creates
nothing twice (AlreadyExists counts as done).

Flow per call: read → plan (inbox items → policies → delayed/now) → durable delayed actions (annotation) → a
kill's intent (new phase, retryCount, version: first, so a crash mid-kill leaves the phase that finishes it) →
operation (a job's pod creates, then deletes, go out side by side through `_fanout`, `ctx.pod_concurrency` per
process) → status → remove the executed delayed action → ack the inbox → arm timers.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from lahar.controllers import _fanout, _job_pods, _job_policies, _job_reads, _job_state, events, jobplugins
from lahar.controllers.context import Context, PermanentError, Result, TemporaryError
from lahar.kube import durations, errors
from lahar.kube.models import labels as keys
from lahar.kube.resources import ResourceType

__all__ = ["PENDING_ACTIONS_ANNOTATION", "TIMER_TOKEN", "reconcile", "unfinished_kill"]

PENDING_ACTIONS_ANNOTATION = "lahar.sh/pending-actions"
TIMER_TOKEN = "job-delayed-action"
KIND = "Job"
_PVC_RETRY = 5.0


def _rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class _Types:
    job: ResourceType
    pod: ResourceType
    podgroup: ResourceType
    queue: ResourceType | None
    pvc: ResourceType | None
    priorityclass: ResourceType | None

    @classmethod
    def of(cls, ctx: Context) -> _Types:
        reg = ctx.client.registry
        job = reg.get("batch.volcano.sh", "v1alpha1", "jobs")
        pod = reg.get("", "v1", "pods")
        pg = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        if job is None or pod is None or pg is None:
            raise PermanentError("the cluster does not serve Volcano Jobs, PodGroups or Pods")
        return cls(job, pod, pg, reg.get("scheduling.volcano.sh", "v1beta1", "queues"),
                   reg.get("", "v1", "persistentvolumeclaims"), reg.get("scheduling.k8s.io", "v1", "priorityclasses"))


@dataclass
class _World:
    """What one reconcile reads."""

    raw: dict[str, Any]
    job: dict[str, Any]
    pods: list[dict[str, Any]]
    podgroup: dict[str, Any] | None


@dataclass
class _Outcome:
    """What the operation did, for the status."""

    deleted: set[str] = field(default_factory=set)
    created: list[dict[str, Any]] = field(default_factory=list)
    existing: list[dict[str, Any]] = field(default_factory=list)  # built pods whose create found AlreadyExists
    requeue: float | None = None


# --- reading --------------------------------------------------------------------------------------------------------

def _priorities(ctx: Context, t: _Types, job: dict[str, Any]) -> dict[str, int]:
    if t.priorityclass is None:
        return {}
    out: dict[str, int] = {}
    for task in job["spec"]["tasks"]:
        name = ((task.get("template") or {}).get("spec") or {}).get("priorityClassName")
        if name and name not in out:
            pc = _job_reads.read_named(ctx, "PriorityClass", t.priorityclass, name)
            out[name] = int((pc or {}).get("value") or 0)
    return out


def _forwarding(ctx: Context, t: _Types, job: dict[str, Any]) -> bool:
    if t.queue is None:
        return False
    queue = _job_reads.read_named(ctx, "Queue", t.queue, job["spec"]["queue"])
    return bool(((queue or {}).get("spec") or {}).get("extendClusters"))


# --- planning (pure) ------------------------------------------------------------------------------------------------

def _pending_entries(raw: dict[str, Any]) -> list[dict[str, Any]]:
    text = ((raw.get("metadata") or {}).get("annotations") or {}).get(PENDING_ACTIONS_ANNOTATION)
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    return [e for e in data if isinstance(e, dict) and e.get("id") and e.get("action")] if isinstance(data, list) else []


def _task_failed_items(job: dict[str, Any], pods: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """TaskFailed, read from the pods: Σ container restarts of a task's Running/Pending pods reached its maxRetry."""
    out = []
    for task in job["spec"]["tasks"]:
        limit = _job_policies.task_max_retry(task)
        if limit < 0:
            continue
        restarts = 0
        for pod in pods:
            if _job_pods.task_of(pod) != task["name"] or (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            status = pod.get("status") or {}
            if status.get("phase", "Pending") in ("Running", "Pending"):
                restarts += sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or ())
        if restarts >= limit and restarts > 0:
            out.append({"event": "TaskFailed", "task": task["name"], "jobVersion": version})
    return out


@dataclass
class _Plan:
    decision: _job_policies.Decision
    consumed: int
    entries: list[dict[str, Any]]
    fired: dict[str, Any] | None = None
    delayed: list[_job_policies.Decision] = field(default_factory=list)


def plan(job: dict[str, Any], items: list[dict[str, Any]], entries: list[dict[str, Any]],
         pods: list[dict[str, Any]], now: float) -> _Plan:
    """Which action this reconcile runs. Inbox items are taken in order up to and including the first user action
    (the rest wait for the next reconcile, so each action sees the status its predecessor wrote); delayed ones are
    registered; then a due delayed action; else TaskFailed derived from the pods; else SyncJob."""
    version = int((job.get("status") or {}).get("version") or 0)
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    chosen: _job_policies.Decision | None = None
    delayed: list[_job_policies.Decision] = []
    consumed = 0
    for item in items:
        consumed += 1
        entries = _job_policies.cancel_for_item(entries, item)
        item = _with_partition(job, item, by_name)
        decision = _job_policies.resolve(job, item)
        if decision.internal:
            continue
        if decision.delay > 0:
            before = len(entries)
            entries = _job_policies.register(entries, decision, item, now=now, version=version)
            if len(entries) > before:
                delayed.append(decision)
            continue
        chosen = decision
        break
    entries = _job_policies.drop_stale(_job_policies.cancel_for_pods(entries, pods), version)
    fired = None
    if chosen is None:
        fired = _job_policies.due(entries, now)
        if fired is not None:
            chosen = _job_policies.as_decision(fired)
    if chosen is None:
        for item in _task_failed_items(job, pods, version):
            decision = _job_policies.resolve(job, item)
            if decision.internal:
                continue
            if decision.delay > 0:
                before = len(entries)
                entries = _job_policies.register(entries, decision, item, now=now, version=version)
                if len(entries) > before:
                    delayed.append(decision)
                continue
            chosen = decision
            break
    return _Plan(chosen or _job_policies.Decision(), consumed, entries, fired, delayed)


def _with_partition(job: dict[str, Any], item: dict[str, Any], by_name: dict[str, Any]) -> dict[str, Any]:
    if item.get("partition") or not item.get("pod"):
        return item
    pod = by_name.get(item["pod"])
    part = ((pod or {}).get("metadata") or {}).get("labels", {}).get(keys.PARTITION_ID_KEY) if pod else None
    return {**item, "partition": part} if part is not None else item


# --- operations -----------------------------------------------------------------------------------------------------

def _plugins(ctx: Context, job: dict[str, Any], raw: dict[str, Any]) -> list[jobplugins.JobPlugin]:
    try:
        return jobplugins.build(job["spec"].get("plugins"))
    except jobplugins.UnknownPlugin as exc:
        message = f"Execute plugin when job add failed, err: failed to get plugin {exc.args[0]}"
        events.record(ctx, raw, "Warning", "PluginError", message)
        raise PermanentError(message) from exc


def _delete_pod(ctx: Context, t: _Types, pod: dict[str, Any]) -> bool:
    """Mark the pod out of sync (so its deletion is not read as an eviction), then delete this very pod (UID)."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        return True
    try:
        job = {"metadata": {"namespace": meta["namespace"], "name": (meta.get("labels") or {}).get(keys.JOB_NAME_KEY)}}
        if (meta.get("annotations") or {}).get(keys.CONTROLLER_OUT_OF_SYNC_KEY) is None:
            _job_reads.wrote(ctx, "Pod", job, ctx.client.patch(
                t.pod, meta["name"], {"metadata": {"annotations": {keys.CONTROLLER_OUT_OF_SYNC_KEY: "true"}}},
                namespace=meta["namespace"]))
        _job_reads.wrote(ctx, "Pod", job, ctx.client.delete(
            t.pod, meta["name"], namespace=meta["namespace"], preconditions={"uid": meta["uid"]}))
    except errors.NotFound:
        pass
    except errors.Conflict:
        return False  # a newer pod took the name: not ours to delete
    return True


def _delete_all(ctx: Context, t: _Types, raw: dict[str, Any], pods: list[dict[str, Any]], out: _Outcome) -> None:
    """Delete the pods side by side (Volcano's waitDeletionGroup); failures are collected, then reported at once."""
    failures = []
    for done in _fanout.run(lambda pod: _delete_pod(ctx, t, pod), pods, ctx.pod_concurrency):
        if done.error is None:
            if done.value:
                out.deleted.add(done.item["metadata"]["uid"])
        elif isinstance(done.error, errors.ApiError):
            failures.append(f"failed to delete pod {done.item['metadata']['name']}, err {done.error}")
        else:
            raise done.error
    if failures:
        events.record(ctx, raw, "Warning", "FailedDelete", f"Error deleting pods: {failures}")
        raise TemporaryError(f"failed to delete {len(failures)} pods of {len(pods)}")


def _ensure_pvcs(ctx: Context, t: _Types, w: _World, status: dict[str, Any]) -> str | None:
    """createJobIOIfNotExist: lahar-named PVCs created, user-named ones must exist. Returns an error text."""
    if t.pvc is None:
        return None
    resources = status.setdefault("controlledResources", {})
    ns = w.job["metadata"]["namespace"]
    for claim, volume, create in _job_pods.volume_claims(w.job):
        if create:
            with contextlib.suppress(errors.AlreadyExists):
                ctx.client.create(t.pvc, _job_pods.build_pvc(w.job, claim, volume["volumeClaim"]), namespace=ns)
        else:
            try:
                ctx.client.get(t.pvc, claim, namespace=ns)
            except errors.NotFound:
                return f"pvc {claim} is not found, the job will be in the Pending state until the PVC is created"
        resources[f"volume-pvc-{claim}"] = claim
    return None


def _ensure_podgroup(ctx: Context, t: _Types, w: _World) -> dict[str, Any] | None:
    want = _job_pods.build_podgroup(w.job, _priorities(ctx, t, w.job))
    ns = w.job["metadata"]["namespace"]
    try:
        if w.podgroup is None:
            try:
                return _job_reads.wrote(ctx, "PodGroup", w.job, ctx.client.create(t.podgroup, want, namespace=ns))
            except errors.AlreadyExists:
                return ctx.client.get(t.podgroup, want["metadata"]["name"], namespace=ns)
        have = w.podgroup.get("spec") or {}
        patch = {k: v for k, v in want["spec"].items() if have.get(k) != v}
        if have.get("priorityClassName") and not want["spec"].get("priorityClassName"):
            patch["priorityClassName"] = None
        if have.get("subGroupPolicy") and not want["spec"].get("subGroupPolicy"):
            patch["subGroupPolicy"] = None
        if "minResources" in patch:
            patch["minResources"] = {**{k: None for k in have.get("minResources") or {}}, **want["spec"]["minResources"]}
        if not patch:
            return w.podgroup
        return _job_reads.wrote(ctx, "PodGroup", w.job, ctx.client.patch(
            t.podgroup, w.podgroup["metadata"]["name"], {"spec": patch}, namespace=ns))
    except errors.ApiError as exc:
        if isinstance(exc, errors.Conflict):
            raise
        events.record(ctx, w.raw, "Warning", "PodGroupError", f"Failed to create PodGroup, err: {exc}")
        raise TemporaryError(f"PodGroup of {ns}/{w.job['metadata']['name']}: {exc}") from exc


def _pod_phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def _dependency_ready(job: dict[str, Any], task_name: str, pods_by_name: dict[str, dict[str, Any]]) -> bool:
    """isDependsOnPodsReady: enough pods of `task_name` Running with every container ready, or Succeeded."""
    task = next((t for t in job["spec"]["tasks"] if t["name"] == task_name), None)
    if task is None:
        return True
    ready = 0
    for i in range(int(task.get("replicas") or 0)):
        pod = pods_by_name.get(_job_pods.pod_name(job["metadata"]["name"], task_name, i))
        if pod is None:
            continue
        phase = _pod_phase(pod)
        statuses = (pod.get("status") or {}).get("containerStatuses") or ()
        if phase == "Succeeded" or (phase == "Running" and all(cs.get("ready") for cs in statuses)):
            ready += 1
    need = task.get("minAvailable")
    return need is None or ready >= int(need)


def _depends_met(job: dict[str, Any], task: dict[str, Any], pods_by_name: dict[str, dict[str, Any]]) -> bool:
    depends = task.get("dependsOn") or {}
    names = list(depends.get("name") or ())
    if not names:
        return True
    if len(names) > 1 and depends.get("iteration") == "any":
        return any(_dependency_ready(job, n, pods_by_name) for n in names)
    return all(_dependency_ready(job, n, pods_by_name) for n in names)


def _sync_pods(ctx: Context, t: _Types, w: _World, plugins: list[jobplugins.JobPlugin], out: _Outcome) -> None:
    """Create the missing pods `0..replicas-1` of each task whose dependencies are ready; delete out-of-sync pods and
    pods beyond the spec (scale down)."""
    job, raw = w.job, w.raw
    name = job["metadata"]["name"]
    by_name = {p["metadata"]["name"]: p for p in w.pods}
    wanted: set[str] = set()
    to_create: list[dict[str, Any]] = []
    to_delete: list[dict[str, Any]] = []
    forwarding: bool | None = None  # read the Queue only when a pod is to be built (a no-op sync reads 3 objects)
    for task in job["spec"]["tasks"]:
        missing = []
        for i in range(int(task.get("replicas") or 0)):
            pname = _job_pods.pod_name(name, task["name"], i)
            wanted.add(pname)
            pod = by_name.get(pname)
            if pod is None:
                missing.append(i)
            elif (not pod["metadata"].get("deletionTimestamp")
                  and keys.CONTROLLER_OUT_OF_SYNC_KEY in (pod["metadata"].get("annotations") or {})):
                to_delete.append(pod)
        if missing and _depends_met(job, task, by_name):
            if forwarding is None:
                forwarding = _forwarding(ctx, t, job)
            for i in missing:
                pod = _job_pods.build_pod(job, task, i, forwarding=forwarding)
                for plugin in plugins:
                    plugin.on_pod_create(pod, job)
                to_create.append(pod)
    to_delete += [p for p in w.pods if p["metadata"]["name"] not in wanted]
    _create_all(ctx, t, raw, to_create, out)
    _delete_all(ctx, t, raw, to_delete, out)


def _create_all(ctx: Context, t: _Types, raw: dict[str, Any], pods: list[dict[str, Any]], out: _Outcome) -> None:
    """Create the pods side by side (Volcano's waitCreationGroup). AlreadyExists is a success (a replay, or another
    worker got there first) and counts as Pending like Volcano's `pending++`; the other failures are collected and
    reported at once, and the next reconcile creates only what is still missing."""
    ns = raw["metadata"]["namespace"]
    failures = []
    for done in _fanout.run(lambda pod: ctx.client.create(t.pod, pod, namespace=ns), pods, ctx.pod_concurrency):
        if done.error is None:
            _job_reads.wrote(ctx, "Pod", raw, done.value)
            out.created.append(done.value)
        elif isinstance(done.error, errors.AlreadyExists):
            out.existing.append(done.item)
        elif isinstance(done.error, errors.ApiError):
            failures.append(f"failed to create pod {done.item['metadata']['name']}, err: {done.error}")
        else:
            raise done.error
    if failures:
        events.record(ctx, raw, "Warning", "FailedCreate", f"Error creating pods: {failures}")
        raise TemporaryError(f"failed to create {len(failures)} pods of {len(pods)}")


def _record_podgroup_pending(ctx: Context, w: _World, pg: dict[str, Any] | None) -> None:
    latest = None
    for cond in ((pg or {}).get("status") or {}).get("conditions") or ():
        if cond.get("status") == "True" and (latest is None or str(cond.get("lastTransitionTime") or "")
                                              > str(latest.get("lastTransitionTime") or "")):
            latest = cond
    if latest is not None and latest.get("type") != "Scheduled":
        meta = w.job["metadata"]
        events.record(ctx, w.raw, "Warning", "PodGroupPending",
                      f"PodGroup {meta['namespace']}:{meta['name']} {str(latest.get('type')).lower()}, "
                      f"reason: {latest.get('message') or ''}")


def _sync_job(ctx: Context, t: _Types, w: _World, status: dict[str, Any], out: _Outcome) -> None:
    initiated = (status.get("state") or {}).get("phase") not in (None, "", "Pending")
    plugins = _plugins(ctx, w.job, w.raw)
    children = jobplugins.Children(ctx.client)
    try:
        for plugin in plugins:
            if initiated:
                plugin.on_job_update(w.job, status, children)
            else:
                plugin.on_job_add(w.job, status, children)
    except errors.Conflict:
        raise
    except (errors.ApiError, LookupError) as exc:
        events.record(ctx, w.raw, "Warning", "PluginError", f"Execute plugin when job add failed, err: {exc}")
        raise TemporaryError(f"plugins of {w.job['metadata']['name']}: {exc}") from exc
    if not initiated:
        problem = _ensure_pvcs(ctx, t, w, status)
        if problem is not None:
            events.record(ctx, w.raw, "Warning", "PVCError", f"Failed to create PVC, err: {problem}")
            out.requeue = _PVC_RETRY
            return
    pg = _ensure_podgroup(ctx, t, w)
    _record_podgroup_pending(ctx, w, pg)
    phase = ((pg or {}).get("status") or {}).get("phase") or ""
    if phase not in ("", "Pending"):
        _sync_pods(ctx, t, w, plugins, out)


def _kill_job(ctx: Context, t: _Types, w: _World, retain: frozenset[str], status: dict[str, Any],
              out: _Outcome, *, retry_count: int, victims: list[dict[str, Any]] | None = None) -> None:
    """killJob: delete the pods not retained (`victims` when given), the plugins' objects and the PodGroup.
    `retry_count` is the count before this kill's own restart (the last retry keeps Succeeded and Failed pods)."""
    if victims is None:
        if retry_count >= int(w.job["spec"].get("maxRetry", 3)) - 1:
            retain = _job_state.RETAIN_SOFT
        victims = [p for p in w.pods if not p["metadata"].get("deletionTimestamp") and _pod_phase(p) not in retain]
    _delete_all(ctx, t, w.raw, victims, out)
    children = jobplugins.Children(ctx.client)
    for plugin in _plugins(ctx, w.job, w.raw):
        plugin.on_job_delete(w.job, status, children)
    if w.podgroup is not None:
        with contextlib.suppress(errors.NotFound):
            _job_reads.wrote(ctx, "PodGroup", w.job, ctx.client.delete(t.podgroup, w.podgroup["metadata"]["name"],
                                                              namespace=w.job["metadata"]["namespace"]))


def unfinished_kill(pods: list[dict[str, Any]], *, version: int, retry_count: int,
                    max_retry: int) -> list[dict[str, Any]]:
    """In Restarting: the pods a kill left behind (a process died mid-kill; its intent, the new status.version, was
    stored first) — older than `version`, not being deleted, not retained. A restart that consumed a retry keeps
    nothing (the last one keeps Succeeded and Failed pods); one that did not (ResumeJob) keeps them. Pure."""
    soft = retry_count == 0 or retry_count >= max_retry
    retain = _job_state.RETAIN_SOFT if soft else _job_state.RETAIN_NONE
    out = []
    for pod in pods:
        meta = pod["metadata"]
        try:
            pod_version = int((meta.get("annotations") or {}).get(keys.JOB_VERSION_KEY, version))
        except ValueError:
            pod_version = version
        if pod_version < version and not meta.get("deletionTimestamp") and _pod_phase(pod) not in retain:
            out.append(pod)
    return out


def _kill_target(ctx: Context, t: _Types, w: _World, d: _job_policies.Decision, out: _Outcome) -> None:
    if d.action == "RestartTask":
        victims = [p for p in w.pods if _job_pods.task_of(p) == d.task]
    elif d.action == "RestartPod":
        victims = [p for p in w.pods if p["metadata"]["name"] == d.pod]
    else:
        victims = [p for p in w.pods if _job_pods.task_of(p) == d.task
                   and (p["metadata"].get("labels") or {}).get(keys.PARTITION_ID_KEY) == d.partition and d.partition]
    _delete_all(ctx, t, w.raw, [p for p in victims if not p["metadata"].get("deletionTimestamp")], out)


# --- status ---------------------------------------------------------------------------------------------------------

def _count(w: _World, out: _Outcome) -> tuple[_job_state.Counts, dict[str, Any]]:
    tally = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Unknown": 0}
    terminating = 0
    tasks: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for pod in [*w.pods, *out.created]:
        meta = pod["metadata"]
        if meta["uid"] in seen:
            continue
        seen.add(meta["uid"])
        if meta.get("deletionTimestamp") or meta["uid"] in out.deleted:
            terminating += 1
            continue
        phase = _pod_phase(pod)
        phase = phase if phase in tally else "Unknown"
        tally[phase] += 1
        per = tasks.setdefault(_job_pods.task_of(pod), {})
        per[phase] = per.get(phase, 0) + 1
    for pod in out.existing:  # created by someone else meanwhile: Pending, as Volcano counts it
        tally["Pending"] += 1
        per = tasks.setdefault(_job_pods.task_of(pod), {})
        per["Pending"] = per.get("Pending", 0) + 1
    counts = _job_state.Counts(pending=tally["Pending"], running=tally["Running"], succeeded=tally["Succeeded"],
                               failed=tally["Failed"], terminating=terminating, unknown=tally["Unknown"],
                               task_succeeded={k: v.get("Succeeded", 0) for k, v in tasks.items()})
    return counts, {k: {"phase": v} for k, v in sorted(tasks.items())}


def _facts(job: dict[str, Any], status: dict[str, Any]) -> _job_state.Facts:
    spec = job["spec"]
    return _job_state.Facts(
        total_replicas=sum(int(t.get("replicas") or 0) for t in spec["tasks"]),
        min_available=int(spec.get("minAvailable") or 0),
        max_retry=int(spec.get("maxRetry", 3)),
        status_min_available=status.get("minAvailable"),
        min_success=int(spec["minSuccess"]) if spec.get("minSuccess") is not None else None,
        task_min_available=tuple((t["name"], int(t["minAvailable"]) if t.get("minAvailable") is not None else None)
                                 for t in spec["tasks"]),
    )


def _transition(status: dict[str, Any], phase: str, now: dt.datetime) -> None:
    """New phase: state.phase and lastTransitionTime; the phase's condition moves to the end with the new time."""
    stamp = _rfc3339(now)
    state = status.setdefault("state", {})
    state["phase"] = phase
    state["lastTransitionTime"] = stamp
    conditions = [c for c in status.get("conditions") or () if c.get("status") != phase]
    conditions.append({"status": phase, "lastTransitionTime": stamp})
    status["conditions"] = conditions


# --- the reconcile --------------------------------------------------------------------------------------------------

def _write_pending(ctx: Context, t: _Types, raw: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    value = json.dumps(entries, sort_keys=True, separators=(",", ":")) if entries else None
    meta = raw["metadata"]
    patch = {"metadata": {"resourceVersion": meta["resourceVersion"],
                          "annotations": {PENDING_ACTIONS_ANNOTATION: value}}}
    return _job_reads.wrote(ctx, "Job", raw, ctx.client.patch(t.job, meta["name"], patch, namespace=meta["namespace"]))


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    """One step of the Job `namespace/name` toward what its spec, its pods and its inbox say."""
    if ctx.cache is None:
        return _reconcile(ctx, namespace, name)
    ctx.cache.begin(namespace, name)
    try:
        return _reconcile(ctx, namespace, name)
    except errors.Conflict:
        ctx.cache.forget(namespace, name)  # someone wrote first: the retry reads the API
        raise
    finally:
        ctx.cache.end(namespace, name)


def _reconcile(ctx: Context, namespace: str, name: str) -> Result:
    t = _Types.of(ctx)
    raw = _job_reads.read_job(ctx, t, namespace, name)
    if raw is None:
        return Result()
    if raw["metadata"].get("deletionTimestamp"):
        return Result()
    job = _job_pods.normalize(raw, default_queue=ctx.default_queue,
                              scheduler_name=ctx.scheduler_names[0] if ctx.scheduler_names else "volcano")
    now = ctx.clock()
    epoch = now.timestamp()
    items = ctx.inbox.peek(KIND, namespace, name)
    pods, podgroup = _job_reads.read_children(ctx, t, job)
    w = _World(raw=raw, job=job, pods=pods, podgroup=podgroup)
    before = _pending_entries(raw)
    p = plan(job, items, before, w.pods, epoch)
    decision = p.decision

    status = copy.deepcopy(raw.get("status") or {})
    phase0 = (status.get("state") or {}).get("phase") or ""
    step = _job_state.state_for(phase0).execute(decision.action)
    final = _job_policies.cancel_after(p.entries, decision)
    if p.fired is not None:
        final = [e for e in final if e["id"] != p.fired["id"]]
    # Durable first: newly delayed actions (and cancelled ones) reach the Job before the inbox is acked; a due
    # action stays recorded until its effect is in the status (a crash in between replays it, and the replay is
    # stale once the kill bumped status.version).
    pre = [*final, p.fired] if p.fired is not None else final
    if pre != before:
        raw = w.raw = _write_pending(ctx, t, raw, pre)
    for d in p.delayed:
        events.record(ctx, raw, "Normal", "ExecuteAction",
                      f"Execute action {d.action} after {durations.format(d.delay)}")
    if not decision.internal:
        events.record(ctx, raw, "Normal", "ExecuteAction", f"Start to execute action {decision.action} ")

    if phase0 == "" and step.op is _job_state.Op.SYNC:
        status["minAvailable"] = job["spec"]["minAvailable"]
        _transition(status, "Pending", now)
    out = _Outcome()
    version = int(status.get("version") or 0)
    retry0 = int(status.get("retryCount") or 0)
    counted = False  # this kill's version bump is in the stored status already
    leftovers: list[dict[str, Any]] | None = None
    if _job_state.stores_intent(step, phase0):
        # Intent first (write-ahead): the new phase, retryCount and version reach the Job before any pod goes, so a
        # crash mid-kill leaves it Restarting/Aborting/..., whose state finishes the kill; a reconcile that read the
        # old status (pods still alive) conflicts on its write instead of deciding from a half-killed job.
        if step.op is _job_state.Op.KILL_JOB:
            version += 1  # status.version counts the kills that changed something (docs/compatibility.md)
            counted = True
        status.update({"version": version, "retryCount": retry0 + step.retry})
        _transition(status, step.phase, now)  # type: ignore[arg-type]
        body = copy.deepcopy(raw)
        body["status"] = status
        raw = w.raw = _job_reads.wrote(ctx, "Job", raw, ctx.client.update_status(t.job, body, namespace=namespace))
        status = copy.deepcopy(raw.get("status") or {})
        step = dataclasses.replace(step, phase=None, retry=0)
    elif phase0 == "Restarting" and step.op is _job_state.Op.SYNC:
        leftovers = unfinished_kill(w.pods, version=version, retry_count=retry0,
                                    max_retry=int(job["spec"].get("maxRetry", 3)))
        if leftovers:  # a kill interrupted after its intent was stored: finish it (its version is counted)
            step = _job_state.Step(_job_state.Op.KILL_JOB, rule=_job_state.Rule.RESTARTING)
            counted = True
        else:
            leftovers = None
    if step.op is _job_state.Op.SYNC:
        _sync_job(ctx, t, w, status, out)
    elif step.op is _job_state.Op.KILL_JOB:
        _kill_job(ctx, t, w, step.retain, status, out, retry_count=retry0, victims=leftovers)
        if not counted and (out.deleted or (step.phase is not None and step.phase != phase0)):
            version += 1
    else:
        _kill_target(ctx, t, w, decision, out)

    counts, task_counts = _count(w, out)
    new_phase, retry = _job_state.next_status(step, phase=(status.get("state") or {}).get("phase") or "",
                                              retry_count=int(status.get("retryCount") or 0), counts=counts,
                                              facts=_facts(job, status))
    status.update({"pending": counts.pending, "running": counts.running, "succeeded": counts.succeeded,
                   "failed": counts.failed, "terminating": counts.terminating, "unknown": counts.unknown,
                   "taskStatusCount": task_counts, "version": version, "retryCount": retry,
                   "minAvailable": job["spec"]["minAvailable"]})
    if not status.get("controlledResources"):
        status.pop("controlledResources", None)
    if new_phase != ((status.get("state") or {}).get("phase") or ""):
        _transition(status, new_phase, now)
    created = _parse_time(raw["metadata"].get("creationTimestamp"))
    last = _parse_time((status.get("state") or {}).get("lastTransitionTime"))
    if created is not None and last is not None:
        status["runningDuration"] = durations.format(max(0.0, (last - created).total_seconds()))
    if status != (raw.get("status") or {}):
        body = copy.deepcopy(raw)
        body["status"] = status
        raw = _job_reads.wrote(ctx, "Job", raw, ctx.client.update_status(t.job, body, namespace=namespace))

    if final != pre:
        raw = _write_pending(ctx, t, raw, final)
    if p.consumed:
        ctx.inbox.ack(KIND, namespace, name, p.consumed)
    _arm_timers(ctx, namespace, name, before, final, epoch)
    if p.consumed < len(items):
        return Result(requeue_after=0.0)
    return Result(requeue_after=out.requeue)


def _arm_timers(ctx: Context, namespace: str, name: str, before: list[dict[str, Any]],
                after: list[dict[str, Any]], now: float) -> None:
    live = {e["id"] for e in after}
    for e in before:
        if e["id"] not in live:
            ctx.timers.cancel(KIND, namespace, name, token=f"{TIMER_TOKEN}:{e['id']}")
    for e in after:
        ctx.timers.after(max(0.0, float(e["due"]) - now), KIND, namespace, name, token=f"{TIMER_TOKEN}:{e['id']}")
