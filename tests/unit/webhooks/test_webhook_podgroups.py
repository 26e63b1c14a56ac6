"""/podgroups/mutate and /podgroups/validate: Volcano's tables (`podgroups/{mutate,validate}/*_test.go`) and
lahar's minMember / minResources checks (issue 3 item 2)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import podgroups
from lahar.webhooks.lookups import StaticLookups
from tests.builders import create, delete, update, vcjob

CFG = AdmissionConfig()


def podgroup(name: str = "pg", *, ns: str = "test-ns", queue: str | None = "default", min_member: Any = None,
             min_task: dict | None = None, min_resources: dict | None = None, owner: str | None = None,
             topology: dict | None = None, subgroups: list | None = None) -> dict:
    spec: dict[str, Any] = {}
    if queue is not None:
        spec["queue"] = queue
    if min_member is not None:
        spec["minMember"] = min_member
    if min_task is not None:
        spec["minTaskMember"] = min_task
    if min_resources is not None:
        spec["minResources"] = min_resources
    if topology is not None:
        spec["networkTopology"] = topology
    if subgroups is not None:
        spec["subGroupPolicy"] = subgroups
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": owner,
                                    "uid": "u-1", "controller": True}]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def queue(name: str, state: str | None = "Open", *, cap: dict | None = None, parent: str | None = None) -> dict:
    spec: dict[str, Any] = {"weight": 1}
    if cap:
        spec["capability"] = cap
    if parent:
        spec["parent"] = parent
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    if state:
        q["status"] = {"state": state}
    return q


def namespace(name: str, annotations: dict | None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def job(name: str, tasks: dict[str, int], ns: str = "test-ns") -> dict:
    return vcjob(name, ns).tasks(**tasks).build()


# --- mutate (Test_createPodGroupPatch) -----------------------------------------------------------------------------

MUTATE_CASES = [
    ("non-default queue untouched", podgroup(queue="custom-queue"), None, []),
    ("default queue, namespace names a queue", podgroup(), {"scheduling.volcano.sh/queue-name": "ns-queue"},
     [{"op": "add", "path": "/spec/queue", "value": "ns-queue"}]),
    ("default queue, namespace without the annotation", podgroup(), {}, []),
    ("default queue, namespace unknown", podgroup(), None, []),
    ("empty queue, namespace names a queue", podgroup(queue=None), {"scheduling.volcano.sh/queue-name": "ns-queue"},
     [{"op": "add", "path": "/spec/queue", "value": "ns-queue"}]),
    ("empty queue, nothing named: the default queue", podgroup(queue=None), {},
     [{"op": "add", "path": "/spec/queue", "value": "default"}]),
]


@pytest.mark.parametrize(("pg", "ns_annotations", "patch"), [c[1:] for c in MUTATE_CASES],
                         ids=[c[0] for c in MUTATE_CASES])
def test_mutate(pg: dict, ns_annotations: dict | None, patch: list[dict]) -> None:
    objects = [] if ns_annotations is None else [namespace("test-ns", ns_annotations)]
    verdict = podgroups.mutate(create(pg), StaticLookups(objects), CFG)
    assert verdict.allowed
    assert list(verdict.patch) == patch


def test_mutate_only_on_create() -> None:
    req = update(podgroup(), podgroup())
    verdict = podgroups.mutate(req, StaticLookups(), CFG)
    assert not verdict.allowed
    assert verdict.message == "invalid operation `UPDATE`, expect operation to be `CREATE`"


# --- validate (TestValidatePodGroup + lahar's checks) ---------------------------------------------------------------

STATE = [
    queue("test-queue"),
    queue("closed-queue", "Closed"),
    queue("new-queue", None),
    queue("new-under-closed", None, parent="closed-queue"),
    queue("capped", cap={"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}),
    queue("team", cap={"cpu": "100"}),
    queue("team-dev", parent="team"),
    job("train", {"master": 1, "worker": 4}),
]
BOTH = {"highestTierAllowed": 1, "highestTierName": "spine"}
NT = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."

VALIDATE_CASES = [
    ("open queue", podgroup(queue="test-queue"), None),
    ("closed queue", podgroup(queue="closed-queue"),
     "can only submit PodGroup to queue with state `Open`, queue `closed-queue` status is `Closed`."),
    ("empty queue", podgroup(queue=""), None),
    ("queue without a state yet counts as open", podgroup(queue="new-queue"), None),
    ("queue without a state under a closed parent", podgroup(queue="new-under-closed"),
     "can only submit PodGroup to queue with state `Open`, queue `new-under-closed` status is ``."),
    ("missing queue", podgroup(queue="nope"), 'unable to find queue: queue.scheduling.volcano.sh "nope" not found'),
    ("both tier fields", podgroup(topology=BOTH), NT),
    ("both tier fields in a subgroup", podgroup(subgroups=[{"name": "a", "networkTopology": BOTH},
                                                           {"name": "b", "networkTopology": BOTH}]),
     f"in subGroupPolicy 'a': {NT}"),
    ("closed queue and both tier fields", podgroup(queue="closed-queue", topology=BOTH),
     f"can only submit PodGroup to queue with state `Open`, queue `closed-queue` status is `Closed`.; {NT}"),
    ("negative minMember", podgroup(min_member=-1), "minMember must be >= 0, got -1"),
    ("negative minTaskMember", podgroup(min_task={"worker": -2, "ps": 1}), "minTaskMember[worker] must be >= 0, got -2"),
    ("minMember within the job's replicas", podgroup(min_member=5, owner="train",
                                                     min_task={"master": 1, "worker": 4}), None),
    ("minMember above the job's replicas", podgroup(min_member=6, owner="train"),
     "minMember 6 is more than the 5 replicas of job test-ns/train; the PodGroup could never be scheduled"),
    ("minTaskMember names an unknown task", podgroup(min_member=1, owner="train", min_task={"ps": 1}),
     'minTaskMember names task "ps" which job test-ns/train does not have (its tasks: master, worker)'),
    ("minTaskMember above a task's replicas", podgroup(min_member=5, owner="train", min_task={"worker": 5}),
     "minTaskMember[worker]=5 is more than the 4 replicas of task worker of job test-ns/train"),
    ("owner job not known: no job checks", podgroup(min_member=50, owner="elsewhere"), None),
    ("no owner: no job checks", podgroup(min_member=50, min_task={"ghost": 1}), None),
    ("minResources within the capability", podgroup(queue="capped", min_resources={"cpu": "8", "memory": "8Gi"}),
     None),
    ("minResources above the capability", podgroup(queue="capped", min_resources={"cpu": "10", "memory": "32Gi",
                                                                                 "nvidia.com/gpu": "2"}),
     "minResources cpu=10 is more than the capability cpu=8 of queue capped; the PodGroup could never be enqueued; "
     "minResources memory=32Gi is more than the capability memory=16Gi of queue capped; the PodGroup could never be "
     "enqueued"),
    ("minResources in a resource the queue does not cap", podgroup(queue="capped", min_resources={"pods": "100"}),
     None),
    ("minResources above an ancestor's capability", podgroup(queue="team-dev", min_resources={"cpu": "200"}),
     "minResources cpu=200 is more than the capability cpu=100 of queue team (an ancestor of queue team-dev); the "
     "PodGroup could never be enqueued"),
]


@pytest.mark.parametrize(("pg", "message"), [c[1:] for c in VALIDATE_CASES], ids=[c[0] for c in VALIDATE_CASES])
def test_validate(pg: dict, message: str | None) -> None:
    verdict = podgroups.validate(create(pg), StaticLookups(STATE), CFG)
    if message is None:
        assert verdict.allowed, verdict.message
    else:
        assert not verdict.allowed
        assert verdict.message == message


UPDATE_CASES = [
    ("metadata-only update in a closed queue", podgroup(queue="closed-queue", min_member=1),
     {**podgroup(queue="closed-queue", min_member=1), "metadata": {"name": "pg", "namespace": "test-ns",
                                                                  "finalizers": ["x"]}}, None),
    ("minMember raised above the job's replicas", podgroup(owner="train", min_member=5),
     podgroup(owner="train", min_member=7),
     "minMember 7 is more than the 5 replicas of job test-ns/train; the PodGroup could never be scheduled"),
    ("minMember lowered", podgroup(owner="train", min_member=5), podgroup(owner="train", min_member=2), None),
    ("minResources raised above the capability", podgroup(queue="capped"),
     podgroup(queue="capped", min_resources={"nvidia.com/gpu": "8"}),
     "minResources nvidia.com/gpu=8 is more than the capability nvidia.com/gpu=4 of queue capped; the PodGroup "
     "could never be enqueued"),
    ("unchanged minResources not re-checked", podgroup(queue="capped", min_resources={"cpu": "99"}),
     podgroup(queue="capped", min_resources={"cpu": "99"}, min_member=1), None),
]


@pytest.mark.parametrize(("old", "new", "message"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES])
def test_validate_update_checks_what_changed(old: dict, new: dict, message: str | None) -> None:
    verdict = podgroups.validate(update(old, new), StaticLookups(STATE), CFG)
    assert (verdict.allowed, verdict.message) == (message is None, message or "")


def test_validate_other_operations() -> None:
    req = delete(podgroup())
    verdict = podgroups.validate(req, StaticLookups(), CFG)
    assert (verdict.allowed, verdict.message) == (False, "unsupported operation DELETE")


def test_owner_job() -> None:
    assert podgroups.owner_job(podgroup(owner="train")) == ("test-ns", "train")
    assert podgroups.owner_job(podgroup()) is None


# validatepodgroup.volcano.sh's matchConditions as shipped (deploy/ and the chart), evaluated as devcluster's admission
# chain evaluates them: the scheduler's status-only writes are not sent, a spec change is
_STATUS = {"phase": "Running", "running": 8}
SPEC_CHANGE_CASES = [
    ("create", "CREATE", None, {"spec": {"minMember": 2}}, True),
    ("status-only update", "UPDATE", {"spec": {"minMember": 2}}, {"spec": {"minMember": 2}, "status": _STATUS}, False),
    ("label-only update", "UPDATE", {"spec": {"minMember": 2}},
     {"metadata": {"labels": {"a": "b"}}, "spec": {"minMember": 2}}, False),
    ("minMember changed", "UPDATE", {"spec": {"minMember": 2}}, {"spec": {"minMember": 3}}, True),
    ("queue changed", "UPDATE", {"spec": {"queue": "a"}}, {"spec": {"queue": "b"}}, True),
    ("spec added", "UPDATE", {}, {"spec": {"minMember": 1}}, True),
]


@pytest.mark.parametrize("manifest", ["deploy/webhooks/validating.yaml",
                                      "deploy/helm/lahar/templates/webhookconfigurations.yaml"])
@pytest.mark.parametrize(("operation", "old", "new", "sent"), [c[1:] for c in SPEC_CHANGE_CASES],
                         ids=[c[0] for c in SPEC_CHANGE_CASES])
def test_only_spec_changes_are_sent(manifest: str, operation: str, old: dict | None, new: dict, sent: bool) -> None:
    from pathlib import Path

    from lahar.devcluster.admission.conditions import match_conditions
    from lahar.devcluster.admission.matching import AdmissionCall

    text = (Path(__file__).resolve().parents[3] / manifest).read_text()
    start = text.index("- name: validatepodgroup.volcano.sh")
    block = text[start:text.index("- name: validatecronjob.volcano.sh", start)]
    expression = " ".join(block.split("expression: >-", 1)[1].split())
    hook = {"name": "validatepodgroup.volcano.sh", "matchConditions": [{"name": "c", "expression": expression}]}
    base = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}

    def obj(body: dict) -> dict:
        return {**base, **body, "metadata": {"name": "pg", "namespace": "ns", **body.get("metadata", {})}}

    call = AdmissionCall(operation=operation, group="scheduling.volcano.sh", version="v1beta1", resource="podgroups",
                         namespace="ns", name="pg", obj=obj(new), old_obj=obj(old) if old is not None else None)
    assert match_conditions(hook, call, {"operation": operation}) is sent
