"""The JobFlow reconciler (Volcano's jobflow-controller): run a DAG of JobTemplates as Volcano Jobs.

One pass re-reads the JobFlow, the Jobs labelled `volcano.sh/createdByJobFlow=<ns>.<flow>` and, for steps with a
probe, the pods of their targets; `plan(...)` (pure) decides which steps' Jobs to create, which Jobs to delete and
the next `status.state.phase`; the shell creates `<jobflow>-<step>` Jobs from the JobTemplate named by the step
(`patch.jobSpec` merged over it), with a controller reference to the JobFlow, and writes the status once.

Phases (Volcano's state/ package): Pending → Running once a Job runs or completes; Running → Succeed when every
step's Job completed; a Failed or Terminated Job fails the flow from Pending or Running; Failed and Terminating do
nothing more. `jobRetainPolicy: delete` removes the Jobs once the flow Succeeded. A step without targets starts at
once; with targets it waits for each target's Job to complete, or — when it has a probe — for the targets' Jobs to
exist and the probe (`_flow_probes`) to hold, re-checked every `PROBE_PERIOD` seconds.

Idempotent under at-least-once delivery: Job names are deterministic and AlreadyExists counts as created, so a
retried pass or a second worker never makes a step's Job twice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.controllers import _flow_probes, _meta, events
from lahar.controllers.context import Context, Result, TemporaryError
from lahar.kube import durations, errors
from lahar.kube.models import labels

__all__ = [
    "PROBE_PERIOD",
    "Plan",
    "flow_status",
    "job_from_template",
    "job_name",
    "next_phase",
    "object_string",
    "plan",
    "reconcile",
    "steps",
]

Obj = dict[str, Any]
PROBE_PERIOD = 2.0  # seconds between two checks of a step waiting on its probe
_JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
_FLOW_API_VERSION = "flow.volcano.sh/v1alpha1"
# the Job phases with a list of their own in the status (getAllJobStatus); any other phase is "unKnow"
_LISTED = ("Pending", "Running", "Completing", "Completed", "Terminating", "Terminated", "Failed")
_STATUS_LISTS = (("pendingJobs", "Pending"), ("runningJobs", "Running"), ("failedJobs", "Failed"),
                 ("completedJobs", "Completed"), ("terminatedJobs", "Terminated"))


# --- pure decisions ------------------------------------------------------------------------------------------------


def job_name(flow: str, step: str) -> str:
    """getJobName: `<jobflow>-<template>`."""
    return f"{flow}-{step}"


def object_string(namespace: str, name: str) -> str:
    """GenerateObjectString: the `<namespace>.<name>` value of the createdBy labels."""
    return f"{namespace}.{name}"


def steps(spec: Mapping[str, Any] | None) -> list[Obj]:
    """The flows of a JobFlow spec, the first of any duplicate name kept (they would share one Job)."""
    seen: set[str] = set()
    out: list[Obj] = []
    for step in (spec or {}).get("flows") or ():
        name = step.get("name")
        if name and name not in seen:
            seen.add(name)
            out.append(step)
    return out


def next_phase(phase: str, *, flows: int, running: int, completed: int, failed: int, terminated: int) -> str:
    """The phase after one sync, from the current phase and the counts of the flow's Jobs (Volcano's state/)."""
    if phase in ("", "Pending"):
        if (running or completed) and not failed:
            return "Running"
        if failed or terminated:
            return "Failed"
        return "Pending"
    if phase == "Running":
        if completed == flows:
            return "Succeed"
        if failed or terminated:
            return "Failed"
        return "Running"
    return phase  # Succeed, Terminating, Failed: final as far as the controller goes


@dataclass(frozen=True)
class Plan:
    """What one pass does: `phase` None leaves the status alone; `waiting` asks for a re-check of a probe."""

    phase: str | None
    create: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    waiting: bool = False


def _targets(step: Mapping[str, Any]) -> list[str]:
    return list((step.get("dependsOn") or {}).get("targets") or ())


def _probe(step: Mapping[str, Any]) -> Obj | None:
    probe = (step.get("dependsOn") or {}).get("probe") or None
    return probe if probe and any(probe.get(k) for k in ("httpGetList", "tcpSocketList", "taskStatusList")) else None


def plan(*, name: str, spec: Mapping[str, Any] | None, phase: str, jobs: Mapping[str, str],
         probe_ok: Callable[[Obj], bool]) -> Plan:
    """The pass over a JobFlow `name` in `phase` whose Jobs are `jobs` (Job name → its phase).

    `probe_ok(step)` says whether a step's probe holds; it is asked only for a step whose targets' Jobs exist."""
    if phase in ("Failed", "Terminating"):
        return Plan(phase=None)
    if phase == "Succeed":
        if ((spec or {}).get("jobRetainPolicy") or "retain") == "delete":
            return Plan(phase=None, delete=tuple(sorted(jobs)))
        return Plan(phase="Succeed")
    flows = steps(spec)
    create: list[str] = []
    waiting = False
    for step in flows:
        if job_name(name, step["name"]) in jobs:
            continue
        targets = [job_name(name, t) for t in _targets(step)]
        if not targets:
            create.append(step["name"])
        elif _probe(step) is None:
            if all(jobs.get(t) == "Completed" for t in targets):
                create.append(step["name"])
        elif all(t in jobs for t in targets):
            if probe_ok(step):
                create.append(step["name"])
            else:
                waiting = True
    phases = list(jobs.values())
    nxt = next_phase(phase, flows=len(flows), running=phases.count("Running"), completed=phases.count("Completed"),
                     failed=phases.count("Failed"), terminated=phases.count("Terminated"))
    if nxt == "Failed":
        return Plan(phase=nxt)  # a failed step fails the flow: nothing more starts
    return Plan(phase=nxt, create=tuple(create), waiting=waiting)


def _merge(base: Any, patch: Any) -> Any:
    """patch.jobSpec over the template's spec: maps merge key by key, lists of named items merge by name (tasks,
    containers), any other value is replaced."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    if (isinstance(base, list) and isinstance(patch, list) and all(isinstance(i, Mapping) and "name" in i
                                                                   for i in [*base, *patch])):
        merged = [dict(i) for i in base]
        index = {i["name"]: n for n, i in enumerate(merged)}
        for item in patch:
            if item["name"] in index:
                merged[index[item["name"]]] = _merge(merged[index[item["name"]]], item)
            else:
                merged.append(dict(item))
        return merged
    return patch


def job_from_template(jobflow: Mapping[str, Any], step: Mapping[str, Any], template: Mapping[str, Any]) -> Obj:
    """loadJobTemplateAndSetJob: the step's Job, labelled and annotated with its template and flow."""
    meta = jobflow.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    created_by = {labels.CREATED_BY_JOB_TEMPLATE_KEY: object_string(ns, step["name"]),
                  labels.CREATED_BY_JOB_FLOW_KEY: object_string(ns, meta.get("name") or "")}
    spec = dict(template.get("spec") or {})
    patch = (step.get("patch") or {}).get("jobSpec")
    if patch:
        spec = _merge(spec, patch)
    return {
        "apiVersion": _JOB_API_VERSION, "kind": "Job",
        "metadata": {"name": job_name(meta.get("name") or "", step["name"]), "namespace": ns,
                     "labels": dict(created_by), "annotations": dict(created_by),
                     "ownerReferences": [_meta.controller_ref(dict(jobflow), api_version=_FLOW_API_VERSION,
                                                              kind="JobFlow")]},
        "spec": spec,
    }


def _job_phase(job: Mapping[str, Any]) -> str:
    return (((job.get("status") or {}).get("state") or {}).get("phase")) or ""


def _created_key(job: Mapping[str, Any]) -> tuple[str, str]:
    meta = job.get("metadata") or {}
    return meta.get("creationTimestamp") or "", meta.get("name") or ""


def _histories(previous: Sequence[Mapping[str, Any]], name: str, phase: str, now: str) -> list[Obj]:
    """getRunningHistories: one entry per phase the Job went through, the open one closed on a change."""
    for entry in previous:
        if entry.get("name") == name and entry.get("runningHistories"):
            out = [dict(h) for h in entry["runningHistories"]]
            if out[-1].get("state") != phase:
                out[-1]["endTimestamp"] = now
                out.append({"startTimestamp": now, "state": phase})
            return out
    return [{"startTimestamp": now, "state": phase}] if phase else []


def flow_status(jobs: Sequence[Mapping[str, Any]], previous: Mapping[str, Any] | None, now: str) -> Obj:
    """getAllJobStatus: the Jobs by phase, each Job's condition and history; `state` kept from `previous`."""
    previous = previous or {}
    ordered = sorted(jobs, key=_created_key)
    status: Obj = {}
    for key, phase in _STATUS_LISTS:
        names = [j["metadata"]["name"] for j in ordered if _job_phase(j) == phase]
        if names:
            status[key] = names
    unknown = [j["metadata"]["name"] for j in ordered if _job_phase(j) not in _LISTED]
    if unknown:
        status["unKnowJobs"] = unknown
    conditions: Obj = {}
    job_statuses = [dict(s) for s in previous.get("jobStatusList") or ()]
    for job in ordered:
        meta, jstatus = job["metadata"], job.get("status") or {}
        cond: Obj = {"phase": _job_phase(job), "createTime": meta.get("creationTimestamp")}
        if jstatus.get("runningDuration"):
            cond["runningDuration"] = jstatus["runningDuration"]
        if jstatus.get("taskStatusCount"):
            cond["taskStatusCount"] = jstatus["taskStatusCount"]
        conditions[meta["name"]] = {k: v for k, v in cond.items() if v is not None}
        entry: Obj = {"name": meta["name"], "state": _job_phase(job), "startTimestamp": meta.get("creationTimestamp")}
        end = _end_time(meta.get("creationTimestamp"), jstatus.get("runningDuration"))
        if end:
            entry["endTimestamp"] = end
        if jstatus.get("retryCount"):
            entry["restartCount"] = int(jstatus["retryCount"])
        histories = _histories(job_statuses, meta["name"], _job_phase(job), now)
        if histories:
            entry["runningHistories"] = histories
        entry = {k: v for k, v in entry.items() if v not in (None, "")}
        at = next((n for n, s in enumerate(job_statuses) if s.get("name") == meta["name"]), None)
        if at is None:
            job_statuses.append(entry)
        else:
            job_statuses[at] = entry
    if job_statuses:
        status["jobStatusList"] = job_statuses
    if conditions:
        status["conditions"] = conditions
    if previous.get("state"):
        status["state"] = dict(previous["state"])
    return status


def _end_time(created: str | None, running: str | None) -> str | None:
    start = _meta.parse_time(created)
    if start is None or not running:
        return None
    try:
        seconds = durations.parse(running)
    except ValueError:
        return None
    return _meta.format_time(start + dt.timedelta(seconds=seconds))


# --- the I/O shell -------------------------------------------------------------------------------------------------


def _probe_checker(ctx: Context, namespace: str, name: str, check: _flow_probes.Checker) -> Callable[[Obj], bool]:
    pods_rt = _meta.rt(ctx, "pods")

    def probe_ok(step: Obj) -> bool:
        pods: list[Obj] = []
        for target in _targets(step):
            selector = f"{labels.JOB_NAME_KEY}={job_name(name, target)}"
            pods.extend(ctx.client.list(pods_rt, namespace=namespace, label_selector=selector)["items"])
        return _flow_probes.satisfied(_probe(step), pods, check)

    return probe_ok


def _create_steps(ctx: Context, jobflow: Obj, jobs_rt: Any, names: Sequence[str]) -> list[str]:
    """Create the Jobs of `names`; returns the steps that could not be created (their template missing, or refused)."""
    meta = jobflow["metadata"]
    namespace = meta.get("namespace") or "default"
    by_name = {s["name"]: s for s in steps(jobflow.get("spec"))}
    failed: list[str] = []
    for step_name in names:
        try:
            template = ctx.client.get(_meta.rt(ctx, "jobtemplates"), step_name, namespace=namespace)
        except errors.NotFound:
            events.record(ctx, jobflow, "Warning", "FailedCreate",
                          f'jobtemplates.flow.volcano.sh "{step_name}" not found')
            failed.append(step_name)
            continue
        body = job_from_template(jobflow, by_name[step_name], template)
        try:
            ctx.client.create(jobs_rt, body, namespace=namespace)
        except errors.AlreadyExists:
            continue  # created by an earlier pass or another worker
        except errors.ApiError as exc:
            events.record(ctx, jobflow, "Warning", "FailedCreate", f"create job {body['metadata']['name']}: {exc}")
            failed.append(step_name)
            continue
        events.record(ctx, jobflow, "Normal", "Created", f"create a job named {body['metadata']['name']}!")
    return failed


def reconcile(ctx: Context, namespace: str, name: str, *,
              check: _flow_probes.Checker = _flow_probes.network_checker) -> Result:
    flows_rt, jobs_rt = _meta.rt(ctx, "jobflows"), _meta.rt(ctx, "vcjobs")
    try:
        jobflow = ctx.client.get(flows_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    if (jobflow.get("metadata") or {}).get("deletionTimestamp"):
        return Result()  # its Jobs go with it (ownerReference cascading deletion)
    original = jobflow.get("status") or {}
    phase = (original.get("state") or {}).get("phase") or ""
    selector = f"{labels.CREATED_BY_JOB_FLOW_KEY}={object_string(namespace, name)}"
    jobs = ctx.client.list(jobs_rt, namespace=namespace, label_selector=selector)["items"]
    decided = plan(name=name, spec=jobflow.get("spec"), phase=phase,
                   jobs={j["metadata"]["name"]: _job_phase(j) for j in jobs},
                   probe_ok=_probe_checker(ctx, namespace, name, check))
    for job in decided.delete:
        with contextlib.suppress(errors.NotFound):
            ctx.client.delete(jobs_rt, job, namespace=namespace, propagation_policy="Background")
    failed = _create_steps(ctx, jobflow, jobs_rt, decided.create)
    if decided.phase is not None:
        status = flow_status(jobs, original, _meta.format_time(ctx.clock()))
        status["state"] = {"phase": decided.phase}
        if status != original:
            ctx.client.update_status(flows_rt, {**jobflow, "status": status})  # 409 if written since the read
    if failed:
        raise TemporaryError(f"jobflow {namespace}/{name}: could not create the jobs of {', '.join(failed)}",
                             delay=5.0)
    return Result(requeue_after=PROBE_PERIOD if decided.waiting else None)
