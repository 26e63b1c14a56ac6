"""/pods/mutate and /pods/validate: Volcano's tables (`pods/mutate/mutate_pod_test.go`, `pods/validate/
admit_pod_test.go`), the disruption-budget annotations, the queue-allocation gate and the device hooks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import pods, review
from lahar.webhooks.lookups import StaticLookups
from tests import builders
from tests.builders import create

CFG = AdmissionConfig()
GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
MIN_AV = "volcano.sh/jdb-min-available"
MAX_UN = "volcano.sh/jdb-max-unavailable"


def pod(name: str = "p", *, ns: str = "test", scheduler: str | None = "volcano", annotations: dict | None = None,
        spec: dict | None = None, resources: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    if annotations is not None:
        meta["annotations"] = annotations
    body: dict[str, Any] = dict(spec or {})
    if scheduler is not None:
        body["schedulerName"] = scheduler
    body.setdefault("containers", [{"name": "main", "image": "busybox",
                                    **({"resources": resources} if resources is not None else {})}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def podgroup(queue_name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "podgroup-p1", "namespace": "test"},
            "spec": {"minMember": 1, "queue": queue_name}, "status": {"phase": "Pending"}}


def queue(name: str, state: str) -> dict:
    return builders.queue(name).state(state).bare(status=True)


# --- validate (TestValidatePod) ------------------------------------------------------------------------------------

CLOSED = "can only submit job to queue with state `Open`, queue `queue-closed` status is `Closed`"
VALIDATE_CASES = [
    ("pod of the default scheduler", pod("normal-pod-1", scheduler="default-scheduler"), [], None),
    ("job pod whose podgroup is missing", pod("volcano-pod-2", annotations={GROUP: "podgroup-p1"}), [],
     'failed to get PodGroup for pod <test/volcano-pod-2>: podgroups.scheduling.volcano.sh "podgroup-p1" not found'),
    ("pod naming a closed queue", pod("volcano-pod-3", annotations={QUEUE: "queue-closed"}),
     [podgroup("queue-closed"), queue("queue-closed", "Closed")], CLOSED + ";"),
    ("pod naming an open queue", pod("volcano-pod-4", annotations={QUEUE: "queue-open"}),
     [podgroup("queue-open"), queue("queue-open", "Open")], None),
    ("job pod, group in an open queue", pod("volcano-pod-5", annotations={GROUP: "podgroup-p1"}),
     [podgroup("queue-open"), queue("queue-open", "Open")], None),
    ("job pod, group in a closed queue", pod("volcano-pod-6", annotations={GROUP: "podgroup-p1"}),
     [podgroup("queue-closed"), queue("queue-closed", "Closed")], f"failed :  {CLOSED};;"),
    ("plain pod, no queue, no group", pod("volcano-pod-7"), [], None),
    ("job pod, group without a queue", pod("volcano-pod-8", annotations={GROUP: "podgroup-p1"}), [podgroup("")],
     None),
    ("pod naming a missing queue", pod("volcano-pod-9", annotations={QUEUE: "gone"}), [],
     'unable to find job queue: queues.scheduling.volcano.sh "gone" not found;'),
]


@pytest.mark.parametrize(("p", "state", "message"), [c[1:] for c in VALIDATE_CASES], ids=[c[0] for c in VALIDATE_CASES])
def test_validate(p: dict, state: list[dict], message: str | None) -> None:
    verdict = pods.validate(create(p), StaticLookups(state), CFG)
    if message is None:
        assert verdict.allowed, verdict.message
    else:
        assert not verdict.allowed
        assert verdict.message == message


# --- disruption-budget annotations (validateAnnotation) ------------------------------------------------------------

JDB_CASES = [
    ("positive integer", {MIN_AV: "2"}, None),
    ("percentage", {MAX_UN: "30%"}, None),
    ("zero", {MIN_AV: "0"}, f'invalid value <"0"> for {MIN_AV}, it must be a positive integer'),
    ("negative", {MAX_UN: "-1"}, f'invalid value <"-1"> for {MAX_UN}, it must be a positive integer'),
    ("100%", {MIN_AV: "100%"},
     f'invalid value <"100%"> for {MIN_AV}, it must be a valid percentage which between 1% ~ 99%'),
    ("0%", {MAX_UN: "0%"},
     f'invalid value <"0%"> for {MAX_UN}, it must be a valid percentage which between 1% ~ 99%'),
    ("not a number", {MIN_AV: "abc"}, f'invalid value strconv.Atoi: parsing "abc": invalid syntax for {MIN_AV}'),
    ("both set", {MIN_AV: "1", MAX_UN: "1"},
     f"not allow configure multiple annotations <[{MIN_AV} {MAX_UN}]> at same time"),
    ("both set, the first invalid", {MIN_AV: "0", MAX_UN: "1"},
     f'invalid value <"0"> for {MIN_AV}, it must be a positive integer'),
]


@pytest.mark.parametrize(("annotations", "message"), [c[1:] for c in JDB_CASES], ids=[c[0] for c in JDB_CASES])
def test_disruption_budget_annotations(annotations: dict, message: str | None) -> None:
    verdict = pods.validate(create(pod(annotations=annotations)), StaticLookups(), CFG)
    assert (verdict.allowed, verdict.message) == (message is None, message or "")


def test_job_pods_skip_the_budget_check_like_volcano() -> None:
    p = pod(annotations={GROUP: "podgroup-p1", MIN_AV: "0"})
    assert pods.validate(create(p), StaticLookups([podgroup("default")]), CFG).allowed


def test_validate_only_on_create() -> None:
    req = review.request_for(pod(), resource="pods", operation="UPDATE", old_object=pod())
    verdict = pods.validate(req, StaticLookups(), CFG)
    assert (verdict.allowed, verdict.message) == (False, "expect operation to be 'CREATE'")


def test_validate_adds_device_checks_after_volcano_message() -> None:
    p = pod(annotations={QUEUE: "gone"}, resources={"limits": {"volcano.sh/vgpu-cores": "150"}})
    verdict = pods.validate(create(p), StaticLookups(), CFG)
    assert verdict.message == (
        'unable to find job queue: queues.scheduling.volcano.sh "gone" not found;; container "main": '
        "volcano.sh/vgpu-cores is a percentage of GPU cores and must be an integer between 0 and 100, got 150")


def test_other_schedulers_pods_are_not_checked() -> None:
    p = pod(scheduler="default-scheduler", resources={"limits": {"volcano.sh/vgpu-cores": "150"}})
    assert pods.validate(create(p), StaticLookups(), CFG).allowed


# --- mutate (TestMutatePods) ---------------------------------------------------------------------------------------

AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}
GROUPS_CFG = AdmissionConfig.load({"resourceGroups": [
    {"resourceGroup": "management", "object": {"key": "namespace", "value": ["mng-ns-1", "mng-ns-2"]},
     "schedulerName": "default-scheduler",
     "tolerations": [{"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}],
     "affinity": json.dumps(AFFINITY), "labels": {"volcano.sh/nodetype": "management"}},
    {"resourceGroup": "cpu", "object": {"key": "annotation", "value": ["volcano.sh/resource-group: cpu"]},
     "schedulerName": "volcano", "labels": {"volcano.sh/nodetype": "cpu"}},
    {"resourceGroup": "gpu", "schedulerName": "volcano", "labels": {"volcano.sh/nodetype": "gpu"}},
]})
MUTATE_CASES = [
    ("namespace group", pod("mng-pod", ns="mng-ns-1", scheduler="default-scheduler"), [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "management"}},
        {"op": "add", "path": "/spec/affinity", "value": AFFINITY},
        {"op": "add", "path": "/spec/tolerations",
         "value": [{"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}]},
        {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"}]),
    ("annotation group", pod("cpu-pod", ns="", scheduler=None, annotations={"volcano.sh/resource-group": "cpu"}), [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "cpu"}},
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"}]),
    ("group named by the default annotation", pod("gpu-pod", ns="", scheduler=None,
                                                  annotations={"volcano.sh/resource-group": "gpu"}), [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "gpu"}},
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"}]),
    ("no group", pod("normal-pod", ns="", scheduler=None), []),
    ("existing affinity, selector and tolerations kept",
     pod("mng-pod", ns="mng-ns-2", scheduler="default-scheduler", spec={
         "affinity": {"podAffinity": {}}, "nodeSelector": {"zone": "a"},
         "tolerations": [{"key": "t", "operator": "Exists"}]}), [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "a", "volcano.sh/nodetype": "management"}},
        {"op": "add", "path": "/spec/tolerations", "value": [
            {"key": "t", "operator": "Exists"}, {"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}]},
        {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"}]),
]


@pytest.mark.parametrize(("p", "patch"), [c[1:] for c in MUTATE_CASES], ids=[c[0] for c in MUTATE_CASES])
def test_mutate_resource_groups(p: dict, patch: list[dict]) -> None:
    verdict = pods.mutate(create(p), StaticLookups(), GROUPS_CFG)
    assert verdict.allowed
    assert list(verdict.patch) == patch


def test_mutate_without_resource_groups_is_a_no_op() -> None:
    verdict = pods.mutate(create(pod(annotations={"volcano.sh/resource-group": "cpu"})), StaticLookups(), CFG)
    assert verdict.allowed and verdict.patch == ()


def test_mutate_only_on_create() -> None:
    req = review.request_for(pod(), resource="pods", operation="UPDATE", old_object=pod())
    assert not pods.mutate(req, StaticLookups(), CFG).allowed


GATE = "scheduling.volcano.sh/queue-allocation-gate"


@pytest.mark.parametrize(("gates", "patch"), [
    (None, [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]),
    ([{"name": "other"}], [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]),
    ([{"name": GATE}], []),
], ids=["no gates yet", "other gates", "already gated"])
def test_queue_allocation_gate(gates: list | None, patch: list[dict]) -> None:
    spec = {"schedulingGates": gates} if gates is not None else {}
    p = pod(annotations={GATE: "true"}, spec=spec)
    cfg = AdmissionConfig(scheduling_gates_queue_admission=True)
    assert list(pods.mutate(create(p), StaticLookups(), cfg).patch) == patch
    assert pods.mutate(create(p), StaticLookups(), CFG).patch == ()


def test_mutate_normalizes_devices_of_our_pods_only() -> None:
    res = {"limits": {"volcano.sh/vgpu-memory": "1024"}}
    ours = pods.mutate(create(pod(resources=res)), StaticLookups(), CFG)
    assert list(ours.patch) == [{"op": "add", "path": "/spec/containers/0/resources/limits/volcano.sh~1vgpu-number",
                                 "value": "1"}]
    theirs = pods.mutate(create(pod(scheduler="default-scheduler", resources=res)), StaticLookups(), CFG)
    assert theirs.patch == ()


def test_resource_group_moving_a_pod_to_volcano_gets_device_normalization() -> None:
    p = pod(ns="", scheduler="default-scheduler", annotations={"volcano.sh/resource-group": "gpu"},
            resources={"limits": {"volcano.sh/vgpu-memory": "1024"}})
    ops = list(pods.mutate(create(p), StaticLookups(), GROUPS_CFG).patch)
    assert ops[-1] == {"op": "add", "path": "/spec/containers/0/resources/limits/volcano.sh~1vgpu-number", "value": "1"}


def test_matching_resource_group_first_wins() -> None:
    p = pod(ns="mng-ns-1", annotations={"volcano.sh/resource-group": "cpu"})
    group = pods.matching_resource_group(p, "mng-ns-1", GROUPS_CFG)
    assert group is not None and group.resource_group == "management"


# --- kube-apiserver's own pod checks, refused by /pods/validate too (hardening issue, item 8) ---------------------

_QTY_RE = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
KUBE_CASES = [
    ("cpu-lots", pod(resources={"requests": {"cpu": "lots"}}),
     'Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: "lots": quantities must match '
     f"the regular expression {_QTY_RE}"),
    ("containers-string", {**pod(), "spec": {"schedulerName": "volcano", "containers": "x"}},
     'Pod "p" is invalid: spec.containers: cannot unmarshal string into a field of type array'),
    ("label-key", {**pod(), "metadata": {"name": "p", "labels": {"bad key": "v"}}},
     'Pod "p" is invalid: metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric '
     "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
     "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("label-int", {**pod(), "metadata": {"name": "p", "labels": {"k": 1}}},
     'Pod "p" is invalid: metadata.labels[k]: cannot unmarshal number into a field of type string'),
    ("annotation-list", pod(annotations={"k": ["v"]}),
     'Pod "p" is invalid: metadata.annotations[k]: cannot unmarshal array into a field of type string'),
    ("other-scheduler-too", pod(scheduler="default-scheduler", resources={"limits": {"cpu": "lots"}}),
     'Pod "p" is invalid: spec.containers[0].resources.limits[cpu]: Invalid value: "lots": quantities must match '
     f"the regular expression {_QTY_RE}"),
    ("numbers-are-quantities", pod(resources={"requests": {"cpu": 2, "memory": "1Gi"}}), None),
]


@pytest.mark.parametrize(("p", "message"), [c[1:] for c in KUBE_CASES], ids=[c[0] for c in KUBE_CASES])
def test_validate_refuses_what_kube_apiserver_refuses(p: dict, message: str | None) -> None:
    verdict = pods.validate(create(p), StaticLookups(), CFG)
    assert (verdict.allowed, verdict.message or None) == (message is None, message)
