"""Beyond Volcano (volcano#2238, #1706): re-applying a Job manifest. `/jobs/validate` UPDATE compares the stored Job
and the applied one with the `/jobs/mutate` defaults applied to both, and a Queue with no state yet takes Jobs."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import _jobs_rules as rules
from lahar.webhooks import jobs, review
from lahar.webhooks.lookups import StaticLookups
from tests.builders import pod_template, vcjob


def manifest(replicas: int = 2, **spec: Any) -> dict:
    """A Job as a user writes it: no queue, schedulerName, maxRetry, task name or minAvailable."""
    template = pod_template(restart_policy="Never", **spec.pop("pod", {}))
    job = vcjob("j", "ns").task(replicas=replicas, template=template).spec(**spec).build()
    del job["spec"]["tasks"][0]["name"]
    return job


def stored(job: dict) -> dict:
    """What the API server keeps after CREATE: the manifest with `/jobs/mutate`'s patch applied, plus server fields."""
    req = review.request_for(job, resource="jobs", operation="CREATE")
    patch = jobs.mutate(req, StaticLookups(), AdmissionConfig()).patch or []
    out = jsonpatch.apply_patch(copy.deepcopy(job), patch)
    out["metadata"] |= {"uid": "u1", "resourceVersion": "7", "generation": 1}
    out["status"] = {"state": {"phase": "Running"}}
    return out


def edited(job: dict, **spec: Any) -> dict:
    out = copy.deepcopy(job)
    for key, value in spec.items():
        if key == "replicas":
            out["spec"]["tasks"][0]["replicas"] = value
        elif key == "image":
            out["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = value
        else:
            out["spec"][key] = value
    return out


def reviewed(old: dict, new: dict) -> review.Verdict:
    req = review.request_for(new, resource="jobs", operation="UPDATE", old_object=old)
    return jobs.validate(req, StaticLookups(), AdmissionConfig())


OTHER = rules.UPDATE_OTHER_FIELDS
# (id, the manifest applied first, the manifest applied again, the expected denial or None)
REAPPLY_CASES: list[tuple[str, dict, dict, str | None]] = [
    ("same-manifest", manifest(), manifest(), None),
    ("same-manifest-host-network", manifest(pod={"hostNetwork": True}), manifest(pod={"hostNetwork": True}), None),
    ("same-manifest-mpi-plugin", manifest(plugins={"mpi": []}), manifest(plugins={"mpi": []}), None),
    ("scale-replicas", manifest(2), manifest(3), None),
    ("scale-down", manifest(3, minAvailable=1), manifest(1, minAvailable=1), None),
    ("scale-below-the-defaulted-min-available", manifest(3), manifest(1),
     "job 'minAvailable' must not be greater than total replicas"),
    ("min-available", manifest(3), manifest(3, minAvailable=2), None),
    ("priority-class", manifest(), manifest(priorityClassName="high"), None),
    ("explicit-default-queue", manifest(), manifest(queue="default"), None),
    ("explicit-default-max-retry", manifest(), manifest(maxRetry=3), None),
    ("queue-changed", manifest(), manifest(queue="other"), f"{OTHER}: spec.queue changed"),
    ("max-retry-changed", manifest(), manifest(maxRetry=5), f"{OTHER}: spec.maxRetry changed"),
    ("image-changed", manifest(), edited(manifest(), image="busybox:2"),
     f"{OTHER}: spec.tasks[0].template.spec.containers[0].image changed"),
    ("scheduler-changed", manifest(), manifest(schedulerName="other"), f"{OTHER}: spec.schedulerName changed"),
    ("plugin-added", manifest(), manifest(plugins={"env": ["--x"]}), f"{OTHER}: spec.plugins changed"),
]


@pytest.mark.parametrize(("first", "again", "expected"), [c[1:] for c in REAPPLY_CASES],
                         ids=[c[0] for c in REAPPLY_CASES])
def test_reapplying_a_manifest_compares_defaulted_specs(first: dict, again: dict, expected: str | None) -> None:
    # kubectl apply sends a merge patch: a CRD's list (`tasks`) comes whole from the manifest, other fields stay
    old = stored(first)
    new = copy.deepcopy(old)
    new["spec"] = {**old["spec"], **again["spec"]}
    verdict = reviewed(old, new)
    assert (verdict.allowed, verdict.message) == (expected is None, expected or "")


@pytest.mark.parametrize(("old_spec", "new_spec", "changed"), [
    ({"tasks": [{"replicas": 1}]}, {"tasks": [{"replicas": 1, "name": "default0", "maxRetry": 3}]}, None),
    ({"tasks": [{"replicas": 1}]}, {"tasks": [{"replicas": 1, "name": "w"}]}, "spec.tasks[0].name"),
    ({"tasks": [{"replicas": 1}], "queue": ""}, {"tasks": [{"replicas": 1}], "queue": "default"}, None),
    ({"tasks": [{"replicas": 1}], "maxRetry": 0}, {"tasks": [{"replicas": 1}]}, None),
    ({"tasks": [{"replicas": 1}], "ttlSecondsAfterFinished": 5}, {"tasks": [{"replicas": 1}]},
     "spec.ttlSecondsAfterFinished"),
    ({"tasks": [{"replicas": 1, "template": {"spec": {"hostNetwork": True}}}]},
     {"tasks": [{"replicas": 1, "template": {"spec": {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}}}]},
     None),
], ids=["task-defaults-filled", "task-renamed", "queue-defaulted", "max-retry-defaulted", "ttl-removed",
        "dns-policy-defaulted"])
def test_update_difference(old_spec: dict, new_spec: dict, changed: str | None) -> None:
    assert rules.update_difference(old_spec, new_spec) == changed
    assert rules.update_difference(new_spec, old_spec) == changed


def test_update_difference_uses_the_configured_defaults() -> None:
    spec = {"tasks": [{"replicas": 1}]}
    assert rules.update_difference(spec, {**spec, "queue": "team"}, default_queue="team") is None
    assert rules.update_difference(spec, {**spec, "schedulerName": "lahar"}, scheduler_name="lahar") is None
    assert rules.update_difference(spec, {**spec, "queue": "team"}) == "spec.queue"


def queue(state: str = "", *, parent: str = "", deleting: bool = False) -> dict:
    q: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {"weight": 1}}
    if parent:
        q["spec"]["parent"] = parent
    if state:
        q["status"] = {"state": state}
    if deleting:
        q["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return q


@pytest.mark.parametrize(("q", "parent", "state"), [
    (queue("Open"), None, "Open"),
    (queue("Closed"), None, "Closed"),
    (queue("Closing"), None, "Closing"),
    (queue("Unknown"), None, "Unknown"),
    (queue(""), None, "Open"),
    (queue("", parent="p"), queue("Open"), "Open"),
    (queue("", parent="p"), queue(""), "Open"),
    (queue("", parent="p"), queue("Closed"), ""),
    (queue("", parent="p"), queue("Closing"), ""),
    (queue("Open", parent="p"), queue("Closed"), "Open"),
    (queue("", deleting=True), None, ""),
], ids=["open", "closed", "closing", "unknown", "new-counts-as-open", "new-under-open-parent",
        "new-under-new-parent", "new-under-closed-parent", "new-under-closing-parent",
        "open-under-closed-parent-is-the-controllers-business", "new-being-deleted"])
def test_job_queue_state(q: dict, parent: dict | None, state: str) -> None:
    assert rules.job_queue_state(q, parent) == state


@pytest.mark.parametrize(("first", "again"), [(c[1], c[2]) for c in REAPPLY_CASES if c[3] is None],
                         ids=[c[0] for c in REAPPLY_CASES if c[3] is None])
def test_mutate_on_update_restores_the_defaults_a_reapply_drops(first: dict, again: dict) -> None:
    """The merge patch of a re-apply sends `tasks` whole, without the task defaults; `/jobs/mutate` on UPDATE puts
    them back, so an unchanged manifest stores exactly what was stored."""
    old = stored(first)
    new = copy.deepcopy(old)
    new["spec"] = {**old["spec"], **again["spec"]}
    req = review.request_for(new, resource="jobs", operation="UPDATE", old_object=old)
    verdict = jobs.mutate(req, StaticLookups(), AdmissionConfig())
    assert verdict.allowed
    result = jsonpatch.apply_patch(copy.deepcopy(new), verdict.patch or [])
    if again == first:
        assert result == old
    assert all(t.get("maxRetry") == 3 and t.get("minAvailable") is not None for t in result["spec"]["tasks"])


@pytest.mark.parametrize(("spec", "expected"), [
    ({"minAvailable": 1, "tasks": [{"name": "w", "replicas": 2}]}, None),
    ({"tasks": [{"name": "w", "replicas": 2147483647}]}, None),
    ({"tasks": [{"name": "w", "replicas": 1e15}]},
     "json: cannot unmarshal number 1e+15 into Go struct field TaskSpec.spec.tasks.replicas of type int32"),
    ({"tasks": [{"name": "w", "replicas": 2147483648}]},
     "json: cannot unmarshal number 2147483648 into Go struct field TaskSpec.spec.tasks.replicas of type int32"),
    ({"minAvailable": 1.5, "tasks": [{"name": "w", "replicas": 2}]},
     "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.minAvailable of type int32"),
    ({"maxRetry": -3000000000, "tasks": [{"name": "w", "replicas": 1}]},
     "json: cannot unmarshal number -3000000000 into Go struct field JobSpec.spec.maxRetry of type int32"),
    ({"tasks": [{"name": "w", "replicas": 2.0}]}, None),
], ids=["fits", "int32-max", "1e15", "int32-max-plus-one", "fraction", "negative-overflow", "integral-float"])
def test_counts_past_int32_are_refused_as_volcano_decodes_them(spec: dict, expected: str | None) -> None:
    assert rules.int32_error({"spec": spec}) == expected
