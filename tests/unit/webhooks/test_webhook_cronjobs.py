"""`/cronjobs/validate`: the shapes of Volcano's admit_cronjob_test.go, the cron grammar, and lahar's job-template
check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.kube import cron
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import cronjobs, review
from lahar.webhooks.lookups import StaticLookups

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"


def job_template() -> dict:
    """Volcano's `getJobTemplate()`."""
    return {"minAvailable": 1, "queue": "default",
            "tasks": [{"name": "task-1", "replicas": 1, "template": {
                "metadata": {"labels": {"name": "test"}},
                "spec": {"containers": [{"name": "fake-name", "image": "busybox:1.24"}]}}}],
            "policies": [{"event": "PodEvicted", "action": "RestartTask"}]}


def cronjob(schedule: str = "* * * * *", *, name: str = "cronvcjob", time_zone: str | None = None,
            template: dict | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"schedule": schedule, "concurrencyPolicy": "Allow",
                            "jobTemplate": {"spec": template if template is not None else job_template()}}
    if time_zone is not None:
        body["timeZone"] = time_zone
    body.update(spec)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "default", "uid": "1a2b3c"}, "spec": body}


def validate(obj: dict, operation: str = "CREATE") -> review.Verdict:
    req = review.request_for(obj, resource="cronjobs", operation=operation,
                             old_object=obj if operation != "CREATE" else None)
    return cronjobs.validate(req, StaticLookups(), AdmissionConfig())


# TestValidateCronjobSpec, in its order
SPEC_CASES: list[tuple[str, dict, str | None]] = [
    ("valid-cronjob", cronjob("* * * * *"), None),
    ("non-standard-schedule", cronjob("@every 1m"), None),
    ("correct-time-zone", cronjob("*/5 * * * *", time_zone="Pacific/Honolulu"), None),
    ("schedule-contains-tz", cronjob("TZ=UTC 0 20 * * *", time_zone="Pacific/Honolulu"),
     " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"),
    ("error-schedule", cronjob("error schedule", time_zone="Pacific/Honolulu"), "schedule is not a valid cron expression"),
    ("empty-schedule", cronjob("", time_zone="Pacific/Honolulu"), " schedule is required, but got empty"),
    ("unknown-dot-time-zone", cronjob("*/5 * * * *", time_zone="Asia/./Shanghai"), " unknown timeZone"),
    ("unknown-dash-time-zone", cronjob("*/5 * * * *", time_zone="America/-NewYork"), " unknown timeZone invalid timeZone"),
    ("unknown-space-time-zone", cronjob("*/5 * * * *", time_zone="New York"), " unknown timeZone invalid timeZone"),
    ("unknown-bang-time-zone", cronjob("*/5 * * * *", time_zone="UTC!"), " unknown timeZone invalid timeZone"),
    ("local-time-zone", cronjob("*/5 * * * *", time_zone="Local"),
     " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"),
    ("empty-time-zone", cronjob("", time_zone=""),
     " schedule is required, but got empty timeZone must be nil or non-empty string, got empty string"),
    ("error-time-zone", cronjob("", time_zone="Amerrica/New_York"),
     " schedule is required, but got empty invalid timeZone"),
    # beyond the upstream table, from the same source
    ("cron-tz-prefix", cronjob("CRON_TZ=UTC 0 * * * *"),
     " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"),
    ("six-fields", cronjob("0 0 * * * *"), "schedule is not a valid cron expression"),
    ("lowercase-local", cronjob(time_zone="local"),
     " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"),
    ("utc", cronjob(time_zone="UTC"), None),
    ("dot-dot-segment", cronjob(time_zone="../etc"), " unknown timeZone invalid timeZone"),
    ("zone-directory-is-not-a-zone", cronjob(time_zone="America"), " invalid timeZone"),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_cronjob_spec_upstream_table(obj: dict, expected: str | None) -> None:
    assert cronjobs.check(obj, config=AdmissionConfig()) == (expected or "")
    verdict = validate(obj)
    assert verdict.allowed is (expected is None)
    assert verdict.message == (expected or "").strip()


# TestValidateCronJobName
QNAME_REGEX = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
               "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("name", "expected"), [
    ("my-cronjob", ""),
    ("a" * 52, ""),
    ("a" * 53, "cronJob name must be no more than 52 characters to accommodate job name suffix (max 63 total)"),
    ("a" * 65, "cronJob name must be no more than 52 characters to accommodate job name suffix (max 63 total)"),
    ("-UPPERCASE", f'invalid cronJob name "-UPPERCASE": {QNAME_REGEX}'),
    ("", f'invalid cronJob name "": name part must be non-empty; {QNAME_REGEX}'),
], ids=["valid", "exactly-max-length", "one-too-long", "too-long", "invalid-chars", "empty"])
def test_cronjob_name(name: str, expected: str) -> None:
    assert cronjobs.check_name(name) == expected


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_update_is_checked_like_create(operation: str) -> None:
    verdict = validate(cronjob("bad", name="a" * 60), operation)
    assert verdict.message == ("schedule is not a valid cron expressioncronJob name must be no more than 52 "
                               "characters to accommodate job name suffix (max 63 total)")


def test_delete_is_refused() -> None:
    obj = cronjob()
    req = review.request_for(obj, resource="cronjobs", operation="DELETE", old_object=obj)
    verdict = cronjobs.validate(req, StaticLookups(), AdmissionConfig())
    assert (verdict.allowed, verdict.message) == (False, "expect operation to be 'CREATE' or 'UPDATE'")


# robfig/cron ParseStandard
@pytest.mark.parametrize(("schedule", "valid"), [
    ("* * * * *", True), ("*/5 * * * *", True), ("0 0 1 1 *", True), ("0-59/15 0-23 1-31 1-12 0-6", True),
    ("0 9 * JAN-DEC MON-FRI", True), ("0 9 ? * sun", True), ("5/10 * * * *", True), ("1,2,3 * * * *", True),
    ("@yearly", True), ("@annually", True), ("@monthly", True), ("@weekly", True), ("@daily", True),
    ("@midnight", True), ("@hourly", True), ("@every 1h30m", True), ("@every 1.5s", True), ("@every 0", True),
    ("@every 5", False), ("@every", False), ("@sometimes", False), ("60 * * * *", False), ("* 24 * * *", False),
    ("* * 0 * *", False), ("* * * 13 *", False), ("* * * * 7", False), ("*/0 * * * *", False),
    ("5-1 * * * *", False), ("1-2-3 * * * *", False), ("1/2/3 * * * *", False), ("-1 * * * *", False),
    ("1,,2 * * * *", False), ("* * * *", False), ("x * * * *", False), ("* * * FOO *", False),
], ids=lambda v: repr(v) if isinstance(v, str) else None)
def test_cron_grammar(schedule: str, valid: bool) -> None:
    assert (cron.validate(schedule) is None) is valid, cron.validate(schedule)


# lahar beyond Volcano: the job template is checked like a Job (after defaults, no name or queue checks)
@pytest.mark.parametrize(("template", "expected"), [
    ({"tasks": []}, " jobTemplate: No task specified in job spec"),
    ({"minAvailable": 3, "tasks": [{"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}]},
     " jobTemplate: job 'minAvailable' should not be greater than total replicas in tasks;"),
    ({"queue": "does-not-exist-yet", "tasks": [{"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
                                                {"replicas": 1, "template": {"spec": {"containers": [{"name": "d"}]}}}]},
     ""),
    ({"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
      "policies": [{"event": "PodFailed", "action": "Explode"}]},
     ' jobTemplate: 1 error occurred:\n\t* spec.policies: Invalid value: "Explode": invalid policy action\n\n'
     " valid events are [* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated], valid "
     "actions are [AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob ResumeJob];"),
], ids=["no-tasks", "min-available-over-replicas", "defaults-applied-queue-not-checked", "bad-policy"])
def test_job_template_checked_like_a_job(template: dict, expected: str) -> None:
    assert cronjobs.check(cronjob(template=template), config=AdmissionConfig()) == expected


def test_volcano_cronjob_example_is_allowed() -> None:
    path = EXAMPLES / "cronjob" / "cronjob.yaml"
    if not path.is_file():
        pytest.skip("../shared/volcano-examples is not present")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "CronJob"]
    assert docs
    for doc in docs:
        verdict = validate({**doc, "metadata": {"namespace": "default", **doc["metadata"]}})
        assert verdict.allowed, verdict.message
