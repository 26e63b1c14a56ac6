"""CronJob schedules, concurrency, deadlines and history (Volcano cronjob controller + k8s cronjob util test shapes)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import cronjobs
from lahar.controllers.context import Context, PermanentError
from lahar.kube import cron as _cron
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry

T0 = dt.datetime(2025, 3, 3, 10, 0, 0, tzinfo=dt.UTC)  # a Monday
NS = "default"
SCHEDULED_KEY = "volcano.sh/cronjob-scheduled-timestamp"


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def at(self, **delta: float) -> None:
        self.now = T0 + dt.timedelta(**delta)


def make_ctx() -> tuple[Context, Clock]:
    clock = Clock(T0)
    store = Store(registry=Registry.of(resources.core()), clock=clock)
    return Context(client=MemoryClient.with_crds(store), clock=clock), clock


def cj_rt(ctx: Context) -> Any:
    return ctx.client.registry.get("batch.volcano.sh", "v1alpha1", "cronjobs")


def job_rt(ctx: Context) -> Any:
    return ctx.client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")


def add_cronjob(ctx: Context, name: str = "cj", schedule: str = "*/5 * * * *", **spec: Any) -> dict:
    body = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedule": schedule, "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "n"}},
                "spec": {"minAvailable": 1, "queue": "default",
                         "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [
                             {"name": "c", "image": "busybox"}]}}}]}}, **spec}}
    return ctx.client.create(cj_rt(ctx), body, namespace=NS)


def jobs(ctx: Context) -> list[dict]:
    return sorted(ctx.client.list(job_rt(ctx), namespace=NS)["items"], key=lambda j: j["metadata"]["name"])


def job_names(ctx: Context) -> list[str]:
    return [j["metadata"]["name"] for j in jobs(ctx)]


def status(ctx: Context, name: str = "cj") -> dict:
    return ctx.client.get(cj_rt(ctx), name, namespace=NS).get("status") or {}


def finish(ctx: Context, name: str, phase: str, at: dt.datetime) -> None:
    job = ctx.client.get(job_rt(ctx), name, namespace=NS)
    job["status"] = {"state": {"phase": phase, "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}
    ctx.client.update_status(job_rt(ctx), job, namespace=NS)


def event_reasons(ctx: Context) -> list[str]:
    evs = ctx.client.list(ctx.client.registry.get("", "v1", "events"), namespace=NS)["items"]
    return sorted(e["reason"] for e in evs)


def minutes(t: dt.datetime) -> int:
    return int(t.timestamp()) // 60


# --- the cron parser ---------------------------------------------------------------------------------------------

NEXT_TABLE = [
    ("*/15 * * * *", None, "2025-03-03T10:07:00+00:00", "2025-03-03T10:15:00+00:00"),
    ("0 9 * * MON-FRI", None, "2025-03-07T09:00:00+00:00", "2025-03-10T09:00:00+00:00"),
    ("0 0 1,15 * *", None, "2025-03-02T00:00:00+00:00", "2025-03-15T00:00:00+00:00"),
    ("0 0 13 * 5", None, "2025-03-08T00:00:00+00:00", "2025-03-13T00:00:00+00:00"),  # dom OR dow
    ("@hourly", None, "2025-03-03T10:00:00+00:00", "2025-03-03T11:00:00+00:00"),
    ("@every 90m", None, "2025-03-03T10:00:30.5+00:00", "2025-03-03T11:30:30+00:00"),
    ("0 9 * * *", "Asia/Shanghai", "2025-03-03T10:00:00+00:00", "2025-03-04T01:00:00+00:00"),
    ("TZ=Europe/Berlin 30 8 * * *", None, "2025-03-03T10:00:00+00:00", "2025-03-04T07:30:00+00:00"),
    ("30 2 * * *", "America/New_York", "2025-03-09T05:00:00+00:00", "2025-03-10T06:30:00+00:00"),  # DST gap
    ("0 0 30 2 *", None, "2025-03-03T10:00:00+00:00", None),
]


@pytest.mark.parametrize(("spec", "zone", "after", "expected"), NEXT_TABLE,
                         ids=["step", "weekdays", "list", "dom-or-dow", "hourly", "every", "zone", "tz-prefix",
                              "dst-gap-skipped", "never"])
def test_schedule_next(spec: str, zone: str | None, after: str, expected: str | None) -> None:
    got = _cron.parse(spec, zone=zone).next(dt.datetime.fromisoformat(after))
    assert (got.astimezone(dt.UTC).isoformat() if got else None) == (
        dt.datetime.fromisoformat(expected).astimezone(dt.UTC).isoformat() if expected else None)


@pytest.mark.parametrize(("spec", "message"), [
    ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("@often", "unrecognized descriptor: @often"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("", "empty spec string"),
], ids=["fields", "minute-range", "reversed", "descriptor", "dow-7", "empty"])
def test_schedule_errors(spec: str, message: str) -> None:
    with pytest.raises(_cron.CronError) as info:
        _cron.parse(spec)
    assert str(info.value) == message


# --- mostRecentScheduleTime (k8s cronjob utils_test shapes) ------------------------------------------------------

HOURLY = _cron.parse("0 * * * *")
RECENT_TABLE = [
    # created, last, now, deadline, expected most recent, missed
    ("09:30", None, "09:50", None, None, "none"),
    ("09:30", None, "10:00", None, "10:00", "none"),
    ("09:30", None, "10:30", None, "10:00", "none"),
    ("09:30", "10:00", "10:30", None, None, "none"),
    ("04:30", None, "09:30", None, "09:00", "few"),
    ("04:30", None, "09:30", 600, None, "none"),
    ("04:30", None, "09:05", 600, "09:00", "none"),
]


def _t(hm: str | None) -> dt.datetime | None:
    if hm is None:
        return None
    h, m = hm.split(":")
    return T0.replace(hour=int(h), minute=int(m))


@pytest.mark.parametrize(("created", "last", "now", "deadline", "expected", "missed"), RECENT_TABLE,
                         ids=["not-yet", "exactly-due", "due", "already-done", "missed-five", "deadline-passed",
                              "within-deadline"])
def test_most_recent_schedule_time(created: str, last: str | None, now: str, deadline: int | None,
                                   expected: str | None, missed: str) -> None:
    _, got, got_missed = cronjobs.most_recent_schedule_time(
        created=_t(created), last_scheduled=_t(last), now=_t(now), schedule=HOURLY, starting_deadline=deadline)
    assert (got, got_missed.value) == (_t(expected), missed)


def test_many_missed_schedules() -> None:
    created = T0 - dt.timedelta(days=30)
    _, got, missed = cronjobs.most_recent_schedule_time(created=created, last_scheduled=None, now=T0,
                                                        schedule=HOURLY)
    assert (got, missed) == (T0, cronjobs.Missed.MANY)


def test_next_schedule_delay_pads_100ms() -> None:
    delay = cronjobs.next_schedule_delay(created=T0, last_scheduled=None, now=T0 + dt.timedelta(minutes=20),
                                         schedule=HOURLY)
    assert delay == pytest.approx(40 * 60 + 0.1)


@pytest.mark.parametrize(("zone", "expected"), [
    ("", "2025-03-03T10:00:00Z"), ("Asia/Shanghai", "2025-03-03T18:00:00+08:00"),
], ids=["utc", "shanghai"])
def test_scheduled_timestamp_annotation(zone: str, expected: str) -> None:
    assert cronjobs.scheduled_timestamp(T0, _cron.load_zone(zone)) == expected


# --- reconcile ----------------------------------------------------------------------------------------------------


def test_creates_the_due_job_once_and_requeues_for_the_next() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx)
    result = cronjobs.reconcile(ctx, NS, "cj")
    assert jobs(ctx) == [] and result.requeue_after == pytest.approx(300.1)

    clock.at(minutes=5, seconds=2)
    result = cronjobs.reconcile(ctx, NS, "cj")
    due = T0 + dt.timedelta(minutes=5)
    [job] = jobs(ctx)
    assert job["metadata"]["name"] == f"cj-{minutes(due)}"
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {"note": "n", SCHEDULED_KEY: "2025-03-03T10:05:00Z"}
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["spec"]["tasks"][0]["name"] == "t"
    st = status(ctx)
    assert st["lastScheduleTime"] == "2025-03-03T10:05:00Z"
    assert [a["name"] for a in st["active"]] == [job["metadata"]["name"]]
    assert result.requeue_after == pytest.approx(300 - 2 + 0.1)
    assert "SuccessfulCreate" in event_reasons(ctx)

    rv = ctx.client.get(cj_rt(ctx), "cj", namespace=NS)["metadata"]["resourceVersion"]
    cronjobs.reconcile(ctx, NS, "cj")  # at-least-once: the same delivery again
    assert len(jobs(ctx)) == 1
    assert ctx.client.get(cj_rt(ctx), "cj", namespace=NS)["metadata"]["resourceVersion"] == rv


def test_lost_status_write_adopts_the_job_instead_of_creating_twice() -> None:
    ctx, clock = make_ctx()
    cj = add_cronjob(ctx)
    clock.at(minutes=5)
    due = T0 + dt.timedelta(minutes=5)
    ctx.client.create(job_rt(ctx), cronjobs.job_from_template(cj, due, dt.UTC), namespace=NS)  # status never written
    cronjobs.reconcile(ctx, NS, "cj")
    assert len(jobs(ctx)) == 1
    st = status(ctx)
    assert st["lastScheduleTime"] == "2025-03-03T10:05:00Z" and len(st["active"]) == 1


@pytest.mark.parametrize(("policy", "expected_jobs", "reason"), [
    ("Allow", 2, "SuccessfulCreate"),
    ("Forbid", 1, "ForbidConcurrent"),
    ("Replace", 1, "ReplaceConcurrent"),
], ids=["allow", "forbid", "replace"])
def test_concurrency_policy(policy: str, expected_jobs: int, reason: str) -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx, concurrencyPolicy=policy)
    clock.at(minutes=5)
    cronjobs.reconcile(ctx, NS, "cj")
    first = job_names(ctx)
    clock.at(minutes=10)
    cronjobs.reconcile(ctx, NS, "cj")
    assert len(jobs(ctx)) == expected_jobs
    assert reason in event_reasons(ctx)
    active = [a["name"] for a in status(ctx)["active"]]
    if policy == "Forbid":
        assert active == first
    if policy == "Replace":
        assert job_names(ctx) == active == [f"cj-{minutes(T0 + dt.timedelta(minutes=10))}"]


def test_suspended_cronjob_creates_nothing() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx, suspend=True)
    clock.at(minutes=30)
    assert cronjobs.reconcile(ctx, NS, "cj").requeue_after is None
    assert jobs(ctx) == []


def test_starting_deadline_skips_a_late_start() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx, schedule="0 * * * *", startingDeadlineSeconds=60)
    clock.at(hours=1, minutes=5)  # 11:00 was due five minutes ago, past the 60 s deadline
    result = cronjobs.reconcile(ctx, NS, "cj")
    assert jobs(ctx) == []
    assert result.requeue_after == pytest.approx(55 * 60 + 0.1)
    clock.at(hours=2, seconds=30)
    cronjobs.reconcile(ctx, NS, "cj")
    assert job_names(ctx) == [f"cj-{minutes(T0 + dt.timedelta(hours=2))}"]


def test_finished_jobs_leave_active_and_history_is_pruned() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx, schedule="* * * * *", successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1)
    made = []
    for i in range(1, 6):
        clock.at(minutes=i)
        cronjobs.reconcile(ctx, NS, "cj")
        made.append(f"cj-{minutes(T0 + dt.timedelta(minutes=i))}")
    assert job_names(ctx) == made
    for name in made[:3]:
        finish(ctx, name, "Completed", clock.now)
    for name in made[3:]:
        finish(ctx, name, "Failed", clock.now)
    clock.at(minutes=5, seconds=30)
    cronjobs.reconcile(ctx, NS, "cj")
    assert job_names(ctx) == [made[1], made[2], made[4]]  # 2 newest successful, 1 newest failed
    st = status(ctx)
    assert "active" not in st
    assert st["lastSuccessfulTime"] == "2025-03-03T10:05:00Z"
    reasons = event_reasons(ctx)
    assert reasons.count("SawCompletedJob") == 5 and reasons.count("SuccessfulDelete") == 2


def test_stale_active_reference_is_dropped() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx)
    clock.at(minutes=5)
    cronjobs.reconcile(ctx, NS, "cj")
    ctx.client.delete(job_rt(ctx), job_names(ctx)[0], namespace=NS)
    cronjobs.reconcile(ctx, NS, "cj")
    assert "active" not in status(ctx)
    assert "StaleReference" in event_reasons(ctx)


def test_time_zone_shifts_the_schedule() -> None:
    ctx, clock = make_ctx()
    add_cronjob(ctx, schedule="0 19 * * *", timeZone="Asia/Shanghai")  # 11:00 UTC
    assert cronjobs.reconcile(ctx, NS, "cj").requeue_after == pytest.approx(3600.1)
    clock.at(hours=1)
    cronjobs.reconcile(ctx, NS, "cj")
    [job] = jobs(ctx)
    assert job["metadata"]["annotations"][SCHEDULED_KEY] == "2025-03-03T19:00:00+08:00"


@pytest.mark.parametrize(("spec", "reason"), [
    ({"schedule": "not a cron"}, "UnParseableCronJobSchedule"),
    ({"timeZone": "Mars/Olympus"}, "InvalidTimeZone"),
], ids=["bad-schedule", "bad-zone"])
def test_invalid_schedule_is_permanent_with_an_event(spec: dict, reason: str) -> None:
    ctx, _ = make_ctx()
    add_cronjob(ctx, **spec)
    with pytest.raises(PermanentError):
        cronjobs.reconcile(ctx, NS, "cj")
    assert reason in event_reasons(ctx)


def test_missing_cronjob_is_done() -> None:
    ctx, _ = make_ctx()
    assert cronjobs.reconcile(ctx, NS, "gone").requeue_after is None
