"""The CronJob reconciler (Volcano's cronjob-controller, spec/volcano.md §1.2, §3): Volcano Jobs on a cron schedule.

One pass: drop finished jobs from `status.active` (and stale references), track `lastSuccessfulTime`, prune the
oldest finished jobs beyond the history limits, then — unless suspended — create the job of the most recent unmet
schedule time (honouring `startingDeadlineSeconds` and `concurrencyPolicy` Allow / Forbid / Replace) as
`<cronjob>-<scheduledTimeUnixMinutes>` with annotation `volcano.sh/cronjob-scheduled-timestamp`. The status is
written once, with the read's resourceVersion. `Result.requeue_after` = seconds to the next schedule time (+100 ms).

Deterministic job names make it safe under at-least-once delivery: a job created by a run that crashed before
writing the status is found by name and adopted instead of created twice.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lahar.controllers import _meta, events
from lahar.controllers.context import Context, PermanentError, Result
from lahar.kube import cron as _cron
from lahar.kube import errors
from lahar.kube.models import labels

__all__ = [
    "FINISHED_PHASES",
    "Missed",
    "job_from_template",
    "job_name",
    "most_recent_schedule_time",
    "next_schedule_delay",
    "reconcile",
    "scheduled_timestamp",
]

FINISHED_PHASES = ("Completed", "Failed", "Terminated")
NEXT_SCHEDULE_DELTA = 0.1  # seconds of padding on the requeue, as Volcano's nextScheduleDelta
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
_JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
_TOO_MANY = 100


class Missed(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


# --- pure decisions ------------------------------------------------------------------------------------------------


def most_recent_schedule_time(*, created: dt.datetime, last_scheduled: dt.datetime | None, now: dt.datetime,
                              schedule: _cron.Schedule, starting_deadline: int | None = None,
                              ) -> tuple[dt.datetime, dt.datetime | None, Missed]:
    """mostRecentScheduleTime: (earliest time considered, the latest activation ≤ now after it or None, missed).

    Raises CronError when two consecutive activations are less than a second apart (an impossible schedule)."""
    earliest = last_scheduled or created
    if starting_deadline is not None:
        deadline = now - dt.timedelta(seconds=starting_deadline)
        if deadline > earliest:
            earliest = deadline
    t1 = schedule.next(earliest)
    if t1 is None or now < t1:
        return earliest, None, Missed.NONE
    t2 = schedule.next(t1)
    if t2 is None or now < t2:
        return earliest, t1, Missed.NONE
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise _cron.CronError("time difference between two schedules is less than 1 second")
    missed_count = int((now - t1).total_seconds()) // between + 1
    most_recent: dt.datetime | None = None
    t: dt.datetime | None = schedule.next(t1 + dt.timedelta(seconds=(missed_count - 2) * between))
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    missed = Missed.MANY if missed_count > _TOO_MANY else Missed.FEW
    return earliest, most_recent, missed


def next_schedule_delay(*, created: dt.datetime, last_scheduled: dt.datetime | None, now: dt.datetime,
                        schedule: _cron.Schedule) -> float | None:
    """nextScheduleTimeDuration: seconds from now to the next activation, plus 100 ms; None if there is none."""
    try:
        earliest, most_recent, missed = most_recent_schedule_time(
            created=created, last_scheduled=last_scheduled, now=now, schedule=schedule)
    except _cron.CronError:
        most_recent, earliest, missed = now, now, Missed.NONE
    if most_recent is None:
        most_recent = earliest if missed is Missed.NONE else now
    upcoming = schedule.next(most_recent)
    if upcoming is None:
        return None
    return max(0.0, (upcoming - now).total_seconds() + NEXT_SCHEDULE_DELTA)


def job_name(cronjob_name: str, scheduled: dt.datetime) -> str:
    """getJobName: `<cronjob>-<Unix minutes of the scheduled time>`."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def scheduled_timestamp(scheduled: dt.datetime, zone: dt.tzinfo) -> str:
    """RFC 3339 in the CronJob's time zone, as Go's `time.RFC3339` prints it (`Z` for UTC)."""
    local = scheduled.astimezone(zone).replace(microsecond=0)
    text = local.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") and zone is dt.UTC else text


def job_from_template(cronjob: Mapping[str, Any], scheduled: dt.datetime, zone: dt.tzinfo) -> dict[str, Any]:
    """getJobFromTemplate: template labels and annotations, the scheduled-timestamp annotation, a controller ref."""
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    meta = cronjob.get("metadata") or {}
    annotations = dict(tmeta.get("annotations") or {})
    annotations[labels.CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] = scheduled_timestamp(scheduled, zone)
    job_meta: dict[str, Any] = {
        "name": job_name(meta.get("name") or "", scheduled),
        "namespace": meta.get("namespace"),
        "annotations": annotations,
        "ownerReferences": [_meta.controller_ref(dict(cronjob), api_version=_JOB_API_VERSION, kind="CronJob")],
    }
    if tmeta.get("labels"):
        job_meta["labels"] = dict(tmeta["labels"])
    return {"apiVersion": _JOB_API_VERSION, "kind": "Job", "metadata": job_meta,
            "spec": dict(template.get("spec") or {})}


def _phase(job: Mapping[str, Any]) -> str:
    return (((job.get("status") or {}).get("state") or {}).get("phase")) or ""


def _created_key(job: Mapping[str, Any]) -> tuple[bool, str, str]:
    """byJobCreationTimestamp: oldest first, missing timestamps last, ties by name."""
    meta = job.get("metadata") or {}
    ts = meta.get("creationTimestamp") or ""
    return (not ts, ts, meta.get("name") or "")


def _ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {"apiVersion": _JOB_API_VERSION, "kind": "Job", "namespace": meta.get("namespace"),
            "name": meta.get("name"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}


# --- the I/O shell -------------------------------------------------------------------------------------------------


@dataclass
class _Pass:
    ctx: Context
    cronjob: dict[str, Any]
    status: dict[str, Any]
    jobs_rt: Any

    def event(self, type_: str, reason: str, message: str) -> None:
        events.record(self.ctx, self.cronjob, type_, reason, message)

    @property
    def active(self) -> list[dict[str, Any]]:
        return self.status.setdefault("active", [])

    def drop_active(self, uid: str | None) -> None:
        self.status["active"] = [r for r in self.active if r.get("uid") != uid]

    def delete_job(self, job: Mapping[str, Any]) -> bool:
        name = job["metadata"]["name"]
        try:
            self.ctx.client.delete(self.jobs_rt, name, namespace=job["metadata"]["namespace"],
                                   propagation_policy="Background")
        except errors.NotFound:
            pass
        except errors.ApiError as exc:
            self.event("Warning", "FailedDelete", f'Error deleting job "{name}": {exc}')
            return False
        self.drop_active(job["metadata"].get("uid"))
        self.event("Normal", "SuccessfulDelete", f'Deleted job "{name}"')
        return True


def _process_finished(p: _Pass, jobs: list[dict[str, Any]]) -> None:
    """processFinishedJobs: finished jobs leave `active`; lastSuccessfulTime; history limits."""
    successful, failed = [], []
    active_uids = {r.get("uid") for r in p.active}
    for job in jobs:
        phase = _phase(job)
        if phase not in FINISHED_PHASES:
            continue
        if job["metadata"].get("uid") in active_uids:
            p.drop_active(job["metadata"].get("uid"))
            p.event("Normal", "SawCompletedJob", f"Saw completed job: {job['metadata']['name']} in active, remove")
        if phase == "Completed":
            finished = _meta.parse_time(((job.get("status") or {}).get("state") or {}).get("lastTransitionTime"))
            last = _meta.parse_time(p.status.get("lastSuccessfulTime"))
            if finished is not None and (last is None or finished > last):
                p.status["lastSuccessfulTime"] = _meta.format_time(finished)
            successful.append(job)
        elif phase == "Failed":
            failed.append(job)
    spec = p.cronjob.get("spec") or {}
    limits = ((successful, spec.get("successfulJobsHistoryLimit"), DEFAULT_SUCCESSFUL_HISTORY),
              (failed, spec.get("failedJobsHistoryLimit"), DEFAULT_FAILED_HISTORY))
    for finished_jobs, limit, default in limits:
        keep = default if limit is None else int(limit)
        for job in sorted(finished_jobs, key=_created_key)[:max(0, len(finished_jobs) - keep)]:
            p.delete_job(job)


def _process_active(p: _Pass, jobs: list[dict[str, Any]]) -> None:
    """processCtlJobAndActiveJob: adopt our unfinished jobs missing from `active`; drop stale references."""
    by_uid = {j["metadata"].get("uid"): j for j in jobs}
    active_uids = {r.get("uid") for r in p.active}
    for job in sorted(jobs, key=_created_key):
        if job["metadata"].get("uid") not in active_uids and _phase(job) not in FINISHED_PHASES:
            p.active.append(_ref(job))  # e.g. created by a run that died before writing the status
    for ref in list(p.active):
        if ref.get("uid") in by_uid:
            continue
        try:
            job = p.ctx.client.get(p.jobs_rt, ref.get("name") or "", namespace=ref.get("namespace"))
        except errors.NotFound:
            p.event("Warning", "StaleReference", f'Active job "{ref.get("name")}" no longer exists (UID: '
                                                 f'{ref.get("uid")})')
            p.drop_active(ref.get("uid"))
            continue
        if job["metadata"].get("uid") != ref.get("uid"):
            p.event("Warning", "StaleReference",
                    f'Active job reference "{ref.get("name")}" points to a different UID (expected: {ref.get("uid")}, '
                    f'actual: {job["metadata"].get("uid")})')
            p.drop_active(ref.get("uid"))


def _schedule(p: _Pass) -> tuple[_cron.Schedule, dt.tzinfo]:
    """validateTZandSchedule + formatSchedule; a bad zone or schedule is permanent (an Event, no retry)."""
    spec = p.cronjob.get("spec") or {}
    text = spec.get("schedule") or ""
    zone_name = spec.get("timeZone")
    if "TZ" in text:
        p.event("Warning", "UnsupportedSchedule",
                f'CRON_TZ or TZ in the schedule "{text}" is not officially supported. If set, the TimeZone field '
                f"will be ignored during execution.")
        zone_name = None
    try:
        zone = _cron.load_zone(zone_name)
    except _cron.CronError as exc:
        p.event("Warning", "InvalidTimeZone", f'Invalid time zone "{zone_name}": {exc}')
        raise PermanentError(str(exc)) from exc
    try:
        return _cron.parse(text, zone=zone_name), zone
    except _cron.CronError as exc:
        p.event("Warning", "UnParseableCronJobSchedule", f"unparseable schedule for cronjob: {text}")
        raise PermanentError(f"unparseable schedule {text!r}: {exc}") from exc


def _write_status(p: _Pass, cj_rt: Any, original: Mapping[str, Any]) -> None:
    if not p.status.get("active"):
        p.status.pop("active", None)
    if p.status == (original or {}):
        return
    body = dict(p.cronjob)
    body["status"] = p.status
    p.ctx.client.update_status(cj_rt, body)  # resourceVersion of the read: 409 if someone wrote in between


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    cj_rt = _meta.rt(ctx, "cronjobs")
    jobs_rt = _meta.rt(ctx, "vcjobs")
    try:
        cronjob = ctx.client.get(cj_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    meta = cronjob.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Result()
    original = dict(cronjob.get("status") or {})
    p = _Pass(ctx=ctx, cronjob=cronjob, jobs_rt=jobs_rt,
              status={**original, "active": [dict(r) for r in original.get("active") or ()]})
    jobs = [j for j in ctx.client.list(jobs_rt, namespace=namespace)["items"]
            if (ref := _meta.controller_of(j)) and ref.get("kind") == "CronJob" and ref.get("name") == name
            and ref.get("uid") == meta.get("uid")]
    now = ctx.clock()

    _process_finished(p, jobs)
    _process_active(p, jobs)
    spec = cronjob.get("spec") or {}
    if spec.get("suspend"):
        _write_status(p, cj_rt, original)
        return Result()
    try:
        schedule, zone = _schedule(p)
    except PermanentError:
        _write_status(p, cj_rt, original)
        raise

    created = _meta.parse_time(meta.get("creationTimestamp")) or now
    last = _meta.parse_time(p.status.get("lastScheduleTime"))
    deadline = spec.get("startingDeadlineSeconds")
    try:
        _, scheduled, missed = most_recent_schedule_time(
            created=created, last_scheduled=last, now=now, schedule=schedule,
            starting_deadline=None if deadline is None else int(deadline))
    except _cron.CronError as exc:
        p.event("Warning", "InvalidSchedule", f"Error getting schedule time: {exc}")
        _write_status(p, cj_rt, original)
        raise PermanentError(str(exc)) from exc
    if scheduled is not None and missed is Missed.MANY:
        p.event("Warning", "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")

    def done(last_scheduled: dt.datetime | None) -> Result:
        _write_status(p, cj_rt, original)
        delay = next_schedule_delay(created=created, last_scheduled=last_scheduled, now=now, schedule=schedule)
        return Result(requeue_after=delay)

    if scheduled is None:
        return done(last)
    wanted = job_name(name, scheduled)
    existing = {j["metadata"]["name"]: j for j in jobs}
    if any(r.get("name") == wanted for r in p.active) or (last is not None and last == scheduled) \
            or wanted in existing:
        if wanted in existing and (last is None or scheduled > last):
            p.status["lastScheduleTime"] = _meta.format_time(scheduled)  # the creation's status write was lost
            last = scheduled
        return done(last)

    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy == "Forbid" and p.active:
        p.event("Warning", "ForbidConcurrent", "Skipping job creation because another job is already running")
        return done(last)
    if policy == "Replace" and p.active:
        p.event("Warning", "ReplaceConcurrent", "Replacing active job for CronJob")
        for ref in list(p.active):
            try:
                job = ctx.client.get(jobs_rt, ref.get("name") or "", namespace=ref.get("namespace"))
            except errors.NotFound:
                p.drop_active(ref.get("uid"))
                continue
            if not p.delete_job(job):
                _write_status(p, cj_rt, original)
                raise errors.Conflict(f"could not replace job {namespace}/{job['metadata']['name']}")

    body = job_from_template(cronjob, scheduled, zone)
    try:
        job = ctx.client.create(jobs_rt, body, namespace=namespace)
        p.event("Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']} for CronJob {namespace}/{name}")
    except errors.AlreadyExists:
        job = ctx.client.get(jobs_rt, body["metadata"]["name"], namespace=namespace)
        owner = _meta.controller_of(job)
        if not owner or owner.get("uid") != meta.get("uid"):
            p.event("Warning", "ForeignJob", f"Job {wanted} exists but is not owned by this CronJob (current owner: "
                                             f"{(owner or {}).get('name') or 'none'})")
            return done(last)
        if _phase(job) in FINISHED_PHASES:
            return done(last)
    except errors.ApiError as exc:
        p.event("Warning", "FailedCreate", f"Failed to create job: {exc}")
        _write_status(p, cj_rt, original)
        raise
    if all(r.get("uid") != job["metadata"].get("uid") for r in p.active):
        p.active.append(_ref(job))
    p.status["lastScheduleTime"] = _meta.format_time(scheduled)
    return done(scheduled)
