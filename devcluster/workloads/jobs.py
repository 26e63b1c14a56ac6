"""The batch/v1 Job controller's decision: `job_plan` (NonIndexed and Indexed completions, backoffLimit,
activeDeadlineSeconds, suspend) and the defaults kube-apiserver gives a Job.

Part of `devcluster.workloads` (pure, over `_objects`); `WorkloadControllers` (in `workloads.controllers`) applies the plan.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from lahar.devcluster.workloads._objects import (
    BURST,
    CONTROLLER_UID_LABEL,
    JOB_INDEX_ANNOTATION,
    JOB_INDEX_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    Plan,
    _compact,
    _condition,
    _deletion_rank,
    _int,
    _meta,
    _name,
    _owned,
    _parse_ts,
    _pod_from_template,
    _spec,
    _status,
    _ts,
    is_active,
    is_ready,
)
from lahar.kube.client import Obj


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


