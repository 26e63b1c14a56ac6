"""/queues/mutate and /queues/validate against the shapes of Volcano's own tables.

Ported from volcano-sh/volcano `pkg/webhooks/admission/queues/validate/validate_queue_test.go` (TestAdmitQueues,
TestAdmitHierarchicalQueues, TestValidateQueueDepthDynamic, TestValidateChildAgainstAncestorForCapability,
TestValidateChildrenConstraintsForCapability) and `queues/mutate/mutate_queue_test.go`, with the expected messages
Volcano produces, plus lahar's own cases (root protection, CONNECT, deserved <= capability edge cases).
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import queues, review
from lahar.webhooks.lookups import StaticLookups
from tests.builders import create, delete, update

CFG = AdmissionConfig()


def queue(name: str, *, parent: str | None = None, weight: int | None = 1, cap: dict | None = None,
          des: dict | None = None, gar: dict | None = None, state: str | None = None, pods: str | None = None,
          hierarchy: tuple[str, str] | None = None, reclaimable: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if weight is not None:
        spec["weight"] = weight
    if parent is not None:
        spec["parent"] = parent
    if cap is not None:
        spec["capability"] = cap
    if des is not None:
        spec["deserved"] = des
    if gar is not None:
        spec["guarantee"] = {"resource": gar}
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    meta: dict[str, Any] = {"name": name}
    if hierarchy:
        meta["annotations"] = {"volcano.sh/hierarchy": hierarchy[0], "volcano.sh/hierarchy-weights": hierarchy[1]}
    q: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta,
                         "spec": spec}
    status: dict[str, Any] = {}
    if state is not None:
        status["state"] = state
    if pods is not None:
        status["allocated"] = {"pods": pods}
    if status:
        q["status"] = status
    return q


def check(verdict: review.Verdict, message: str | None) -> None:
    if message is None:
        assert verdict.allowed, verdict.message
    else:
        assert not verdict.allowed
        assert verdict.message == message


# --- TestAdmitQueues ---------------------------------------------------------------------------------------------

BASIC_STATE = [
    queue("open-state-for-delete", state="Open"),
    queue("closed-state-for-delete", state="Closed"),
    queue("ordinary-hierarchical-queue", hierarchy=("root/node1/node2", "1/2/3")),
    queue("positive-weight-for-update"),
]
WRONG_STATE = 'requestBody.spec.state: Invalid value: "wrong": queue state must be in [Open Closed]'
ANN = "requestBody.metadata.annotations"

BASIC_CASES = [
    ("state not set on create", create(queue("normal-case-not-set")), None),
    ("state Open on create", create(queue("normal-case-set-open", state="Open")), None),
    ("state Closed on create", create(queue("normal-case-set-closed", state="Closed")), None),
    ("wrong state on create", create(queue("abnormal-case", state="wrong")), WRONG_STATE),
    ("Open to Closed on update", update(queue("q", state="Open"), queue("q", state="Closed")), None),
    ("Closed to Open on update", update(queue("q", state="Closed"), queue("q", state="Open")), None),
    ("Open to wrong on update", update(queue("q", state="Open"), queue("q", state="wrong")), WRONG_STATE),
    ("Closed queue can be deleted", delete(queue("closed-state-for-delete", state="Closed")), None),
    ("Open queue can be deleted", delete(queue("open-state-for-delete", state="Open")), None),
    ("hierarchy that is a string prefix of another queue's",
     create(queue("default", hierarchy=("root/node", "1/4"))), None),
    ("default queue cannot be deleted", delete(queue("default")), "`default` queue can not be deleted"),
    ("root queue cannot be deleted", delete(queue("root")), "`root` queue can not be deleted"),
    ("no resources", create(queue("resource-not-set")), None),
    ("only deserved", create(queue("only-deserved-set", des={"cpu": "1", "memory": "1Gi"})), None),
    ("guarantee without deserved", create(queue("only-guarantee-set", gar={"cpu": "1"})),
     'requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=1'),
    ("deserved above capability",
     create(queue("capability-less-deserved", cap={"cpu": "1", "memory": "1Gi"}, des={"cpu": "2", "memory": "1Gi"})),
     'requestBody.spec.deserved.cpu: Invalid value: "2": deserved[cpu]=2 must be <= capability[cpu]=1'),
    ("deserved below guarantee",
     create(queue("deserved-less-guarantee", des={"cpu": "2", "memory": "1Gi"}, gar={"cpu": "2", "memory": "3Gi"})),
     'requestBody.spec.deserved.memory: Invalid value: "1Gi": deserved[memory]=1Gi must be >= guarantee[memory]=3Gi'),
    ("hierarchy and weights of different lengths",
     create(queue("hierarchy-weights-dont-match", hierarchy=("root/a/b", "1/2/3/4"))),
     f'{ANN}: Invalid value: "root/a/b": volcano.sh/hierarchy must have the same length with '
     "volcano.sh/hierarchy-weights"),
    ("negative hierarchy weight", create(queue("h", hierarchy=("root/a/b", "1/-1/3"))),
     f'{ANN}: Invalid value: "1/-1/3": -1 in the 1/-1/3 must be larger than 0'),
    ("hierarchy weight not a number", create(queue("h", hierarchy=("root/a/b", "1/a/3"))),
     f'{ANN}: Invalid value: "1/a/3": a in the 1/a/3 is invalid number: strconv.ParseFloat: parsing "a": '
     "invalid syntax"),
    ("hierarchy in the sub path of another queue",
     create(queue("hierarchical-queue-in-sub-path-of-another-queue", hierarchy=("root/node1", "1/4"))),
     f'{ANN}: Invalid value: "root/node1": root/node1 is not allowed to be in the sub path of root/node1/node2 of '
     "queue ordinary-hierarchical-queue"),
]


@pytest.mark.parametrize(("req", "message"), [c[1:] for c in BASIC_CASES], ids=[c[0] for c in BASIC_CASES])
def test_admit_queues(req: review.Request, message: str | None) -> None:
    check(queues.validate(req, StaticLookups(BASIC_STATE), CFG), message)


def test_invalid_operation() -> None:
    req = review.request_for(queue("default"), resource="queues", operation="CONNECT")
    check(queues.validate(req, StaticLookups(), CFG),
          "invalid operation `CONNECT`, expect operation to be `CREATE`, `UPDATE` or `DELETE`")


# --- TestAdmitHierarchicalQueues -----------------------------------------------------------------------------------

HIER_STATE = [
    queue("queue-with-jobs", parent="root", weight=None, pods="1"),
    queue("queue-without-jobs", parent="root", weight=None, pods="0"),
    queue("child-queue", parent="queue-with-child-queues", weight=None),
    queue("queue-with-child-queues", parent="root", weight=None),
    queue("parent-queue-has-child-with-jobs", parent="root", weight=None, pods="1"),
    queue("child-queue-a-with-jobs", parent="parent-queue-has-child-with-jobs", pods="1"),
    queue("queue-without-child-queues", parent="root", weight=None),
    queue("parent-queue-resource-test", parent="root", cap={"cpu": "10", "memory": "20Gi"},
          gar={"cpu": "8", "memory": "16Gi"}),
    queue("sibling-queue-resource-test", parent="parent-queue-resource-test", cap={"cpu": "3", "memory": "6Gi"},
          gar={"cpu": "2", "memory": "4Gi"}),
    queue("parent-queue-small-capability", parent="root", cap={"cpu": "5", "memory": "10Gi"}),
    queue("child-queue-larger-capability", parent="parent-queue-small-capability",
          cap={"cpu": "10", "memory": "20Gi"}),
    queue("parent-queue-to-update", parent="root", cap={"cpu": "20", "memory": "40Gi"},
          gar={"cpu": "15", "memory": "30Gi"}),
    queue("child-queue-a", parent="parent-queue-to-update", cap={"cpu": "12", "memory": "24Gi"},
          gar={"cpu": "8", "memory": "16Gi"}),
    queue("child-queue-b-for-update", parent="parent-queue-to-update", cap={"cpu": "8", "memory": "16Gi"},
          gar={"cpu": "5", "memory": "10Gi"}),
    queue("parent-queue-empty-parent", parent="", cap={"cpu": "100", "memory": "100Gi"}),
    queue("child-of-empty-parent", parent="parent-queue-empty-parent", cap={"cpu": "50", "memory": "50Gi"}),
]
PARENT_TO_UPDATE = HIER_STATE[11]
EMPTY_PARENT = HIER_STATE[14]
NEG = "must be greater than or equal to 0"

HIER_CASES = [
    ("queue cannot use itself as parent", create(queue("self-referencing-queue", parent="self-referencing-queue")),
     "queue self-referencing-queue cannot use itself as parent"),
    ("parent queue has allocated pods", create(queue("parent-queue-with-jobs", parent="queue-with-jobs")),
     "queue queue-with-jobs cannot be the parent queue of queue parent-queue-with-jobs because it has allocated "
     "Pods: 1"),
    ("parent queue has no allocated pods", create(queue("parent-queue-without-jobs", parent="queue-without-jobs")),
     None),
    ("parent queue already has a child with jobs",
     create(queue("child-queue-b", parent="parent-queue-has-child-with-jobs")), None),
    ("delete queue with child queues", delete(HIER_STATE[3]),
     "queue queue-with-child-queues can not be deleted because it has 1 child queues: child-queue"),
    ("delete queue with allocated pods", delete(HIER_STATE[0]),
     "queue queue-with-jobs cannot be deleted because it has allocated Pods: 1"),
    ("delete queue without child queues", delete(HIER_STATE[6]), None),
    ("child capability above the parent's",
     create(queue("child-capability-exceeds-parent", parent="parent-queue-resource-test",
                  cap={"cpu": "20", "memory": "40Gi"})),
     "queue child-capability-exceeds-parent capability[cpu]=20 exceeds its ancestor's capability=10"),
    ("siblings' guarantee above the parent's",
     create(queue("siblings-guarantee-exceeds", parent="parent-queue-resource-test",
                  cap={"cpu": "7", "memory": "14Gi"}, des={"cpu": "7", "memory": "14Gi"},
                  gar={"cpu": "7", "memory": "14Gi"})),
     "parent queue parent-queue-resource-test validation failed: sum of children's guarantee (cpu 9000.00, memory "
     "19327352832.00) exceeds parent's guarantee limit (cpu 8000.00, memory 17179869184.00)"),
    ("update parent capability below a child's",
     update(PARENT_TO_UPDATE, queue("parent-queue-to-update", parent="root", cap={"cpu": "10", "memory": "20Gi"},
                                    des={"cpu": "10", "memory": "20Gi"}, gar={"cpu": "8", "memory": "16Gi"})),
     "queue parent-queue-to-update capability[cpu]=10 is smaller than its descendants' max capability=12"),
    ("update parent guarantee below the children's sum",
     update(PARENT_TO_UPDATE, queue("parent-queue-to-update", parent="root", cap={"cpu": "20", "memory": "40Gi"},
                                    des={"cpu": "20", "memory": "40Gi"}, gar={"cpu": "10", "memory": "20Gi"})),
     "queue parent-queue-to-update validation failed: sum of children's guarantee (cpu 13000.00, memory "
     "27917287424.00) exceeds parent's guarantee limit (cpu 10000.00, memory 21474836480.00)"),
    ("update queue with empty parent still checks its children",
     update(EMPTY_PARENT, queue("parent-queue-empty-parent", parent="", cap={"cpu": "30", "memory": "30Gi"})),
     "queue parent-queue-empty-parent capability[cpu]=30 is smaller than its descendants' max capability=50"),
    ("negative capability", create(queue("queue-negative-capability", parent="root", cap={"cpu": "-10"})),
     f'requestBody.spec.capability.cpu: Invalid value: "-10": {NEG}'),
    ("negative deserved", create(queue("queue-negative-deserved", parent="root", des={"cpu": "-5"})),
     f'requestBody.spec.deserved.cpu: Invalid value: "-5": {NEG}'),
    ("negative guarantee", create(queue("queue-negative-guarantee", parent="root", gar={"cpu": "-2"})),
     f'[requestBody.spec.guarantee.resource.cpu: Invalid value: "-2": {NEG}, requestBody.spec.deserved.cpu: '
     'Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=-2]'),
    ("fractional extended resource", create(queue("q-frac", cap={"nvidia.com/gpu": "1500m"})),
     'requestBody.spec.capability.nvidia.com/gpu: Invalid value: "1500m": must be an integer'),
    ("missing parent", create(queue("orphan", parent="nowhere")),
     'failed to get parent queue nowhere of queue orphan: queue.scheduling.volcano.sh "nowhere" not found'),
    ("update that does not move the queue or change resources skips hierarchy checks",
     update(HIER_STATE[10], {**HIER_STATE[10], "spec": {**HIER_STATE[10]["spec"], "weight": 3}}), None),
]


@pytest.mark.parametrize(("req", "message"), [c[1:] for c in HIER_CASES], ids=[c[0] for c in HIER_CASES])
def test_admit_hierarchical_queues(req: review.Request, message: str | None) -> None:
    cfg = AdmissionConfig(enable_queue_allocated_pods_check=True)
    check(queues.validate(req, StaticLookups(HIER_STATE), cfg), message)


def test_allocated_pods_check_is_off_by_default() -> None:
    check(queues.validate(delete(HIER_STATE[0]), StaticLookups(HIER_STATE), CFG), None)


# --- TestValidateQueueDepthDynamic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_depth", "message"), [
    (5, None), (3, None), (2, "queue q3 exceeds the maximum allowed depth of 2"),
], ids=["depth 3 of 5", "depth 3 of 3", "depth 3 of 2"])
def test_queue_depth(max_depth: int, message: str | None) -> None:
    state = StaticLookups([queue("q1", parent="root"), queue("q2", parent="q1")])
    check(queues.validate(create(queue("q3", parent="q2")), state, AdmissionConfig(max_queue_depth=max_depth)),
          message)


# --- TestValidateChildAgainstAncestorForCapability ----------------------------------------------------------------

ANCESTORS = [
    queue("ancestor-gp", parent="root", cap={"cpu": "100", "memory": "100Gi", "nvidia.com/gpu": "8"}),
    queue("ancestor-p", parent="ancestor-gp", cap={"cpu": "50", "memory": "50Gi"}),
    queue("ancestor-p-nocap", parent="ancestor-gp"),
]
ANCESTOR_CASES = [
    ("cpu above the direct parent", queue("child-exceed-cpu", parent="ancestor-p", cap={"cpu": "60"}),
     "queue child-exceed-cpu capability[cpu]=60 exceeds its ancestor's capability=50"),
    ("memory above the direct parent", queue("child-exceed-mem", parent="ancestor-p", cap={"memory": "55Gi"}),
     "queue child-exceed-mem capability[memory]=55Gi exceeds its ancestor's capability=50Gi"),
    ("gpu above the grandparent (parent sets none)",
     queue("child-exceed-gpu", parent="ancestor-p", cap={"nvidia.com/gpu": "10"}),
     "queue child-exceed-gpu capability[nvidia.com/gpu]=10000.00 exceeds its ancestor's capability=8000.00"),
    ("within every ancestor", queue("child-within-limits", parent="ancestor-p",
                                    cap={"cpu": "40", "memory": "40Gi", "nvidia.com/gpu": "4"}), None),
    ("no capability", queue("child-no-cap", parent="ancestor-p"), None),
    ("parent without capability: grandparent decides",
     queue("child-under-nocap", parent="ancestor-p-nocap", cap={"cpu": "200"}),
     "queue child-under-nocap capability[cpu]=200 exceeds its ancestor's capability=100"),
    ("parent without capability, within the grandparent",
     queue("child-under-nocap-ok", parent="ancestor-p-nocap", cap={"cpu": "80"}), None),
]


@pytest.mark.parametrize(("child", "message"), [c[1:] for c in ANCESTOR_CASES], ids=[c[0] for c in ANCESTOR_CASES])
def test_child_against_ancestors(child: dict, message: str | None) -> None:
    check(queues.validate(create(child), StaticLookups(ANCESTORS), CFG), message)


# --- TestValidateChildrenConstraintsForCapability -----------------------------------------------------------------

R20 = {"cpu": "20", "memory": "20Gi"}
R50 = {"cpu": "50", "memory": "50Gi"}
SUBTREES = [
    queue("vc-parent-a", parent="root", cap={**R20, "nvidia.com/gpu": "4"}, gar=R20, des=R20),
    queue("vc-child-a1", parent="vc-parent-a", cap={"memory": "15Gi"}),
    queue("vc-grandchild-a1-1", parent="vc-child-a1", cap={"cpu": "25"}),
    queue("vc-child-a2", parent="vc-parent-a", cap={"cpu": "10", "memory": "10Gi", "nvidia.com/gpu": "3"}),
    queue("vc-parent-b", parent="root", cap=R50, gar=R50, des=R50),
    queue("vc-child-b1", parent="vc-parent-b", cap={"cpu": "30"}),
    queue("vc-child-b2", parent="vc-parent-b", cap={"cpu": "20"}),
    queue("vc-parent-c", parent="root"),
    queue("vc-child-c1", parent="vc-parent-c", cap={"cpu": "100"}),
    queue("vc-parent-d", parent="root", cap={"nvidia.com/gpu": "4"}),
    queue("child-gpu-exceed", parent="vc-parent-d", cap={"nvidia.com/gpu": "5"}),
    queue("vc-parent-e", parent="root", cap={"nvidia.com/gpu": "4"}),
    queue("child-gpu-ok", parent="vc-parent-e", cap={"nvidia.com/gpu": "3"}),
]


def _touch(q: dict) -> review.Request:
    """An UPDATE that changes the queue's resources (so hierarchy resources are re-checked) to what `q` has."""
    old = {**q, "spec": {**q["spec"], "capability": {"cpu": "999999"}}}
    return update(old, q)


SUBTREE_CASES = [
    ("grandchild cpu above the parent via a child without cpu", SUBTREES[0],
     "queue vc-parent-a capability[cpu]=20 is smaller than its descendants' max capability=25"),
    ("every child within the parent", SUBTREES[4], None),
    ("parent without capability skips the capability check", SUBTREES[7], None),
    ("child gpu above the parent's", SUBTREES[9],
     "queue vc-parent-d capability[nvidia.com/gpu]=4000.00 is smaller than its descendants' max "
     "capability=5000.00"),
    ("child gpu within the parent's", SUBTREES[11], None),
]


@pytest.mark.parametrize(("parent", "message"), [c[1:] for c in SUBTREE_CASES], ids=[c[0] for c in SUBTREE_CASES])
def test_children_constraints(parent: dict, message: str | None) -> None:
    check(queues.validate(_touch(parent), StaticLookups(SUBTREES), CFG), message)


def test_parent_without_children_passes() -> None:
    lone = queue("lone", parent="root", cap=R50, gar=R50, des=R50)
    check(queues.validate(_touch(lone), StaticLookups([lone]), CFG), None)


def test_child_guarantee_under_parent_without_guarantee_is_refused_like_volcano() -> None:
    parent = queue("p", parent="root", cap=R50)
    child = queue("c", parent="p", des={"cpu": "1"}, gar={"cpu": "1"})
    check(queues.validate(create(child), StaticLookups([parent]), CFG),
          "parent queue p validation failed: sum of children's guarantee (cpu 1000.00, memory 0.00) exceeds parent's "
          "guarantee limit (cpu 0.00, memory 0.00)")


# --- root protection -----------------------------------------------------------------------------------------------

ROOT_OLD = queue("root", weight=1, reclaimable=False, state="Open")
ROOT_CAPPED = queue("root", weight=1, reclaimable=False, state="Open", cap={"cpu": "10"})
ROOT_MSG = "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"


@pytest.mark.parametrize(("new", "protect", "message"), [
    (ROOT_CAPPED, True, ROOT_MSG),
    (ROOT_CAPPED, False, None),
    (queue("root", weight=2, reclaimable=False, state="Open"), True, None),
], ids=["capability change refused", "protection off", "weight change allowed"])
def test_root_protection(new: dict, protect: bool, message: str | None) -> None:
    cfg = AdmissionConfig(enable_root_queue_protection=protect)
    check(queues.validate(update(ROOT_OLD, new), StaticLookups(), cfg), message)


# --- mutate (mutate_queue_test.go) ---------------------------------------------------------------------------------

H = "/metadata/annotations/volcano.sh~1hierarchy"
HW = "/metadata/annotations/volcano.sh~1hierarchy-weights"
MUTATE_CASES = [
    ("default reclaimable", queue("normal-case-refresh-default-state"),
     [{"op": "add", "path": "/spec/reclaimable", "value": True}]),
    ("root prepended to an hDRF hierarchy",
     queue("queue-without-root", reclaimable=True, hierarchy=("a/b/c", "2/3/4")),
     [{"op": "add", "path": H, "value": "root/a/b/c"}, {"op": "add", "path": HW, "value": "1/2/3/4"}]),
    ("hierarchy already at root", queue("q", reclaimable=True, hierarchy=("root/a", "1/2")), []),
    ("weight defaulted", queue("q", weight=None, reclaimable=False),
     [{"op": "add", "path": "/spec/weight", "value": 1}]),
    ("weight 0 defaulted", queue("q", weight=0, reclaimable=True), [{"op": "add", "path": "/spec/weight", "value": 1}]),
    ("no spec at all", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}},
     [{"op": "add", "path": "/spec", "value": {}}, {"op": "add", "path": "/spec/reclaimable", "value": True},
      {"op": "add", "path": "/spec/weight", "value": 1}]),
]


@pytest.mark.parametrize(("obj", "patch"), [c[1:] for c in MUTATE_CASES], ids=[c[0] for c in MUTATE_CASES])
def test_mutate(obj: dict, patch: list[dict]) -> None:
    verdict = queues.mutate(create(obj), StaticLookups(), CFG)
    assert verdict.allowed
    assert list(verdict.patch) == patch


def test_mutate_invalid_operation() -> None:
    verdict = queues.mutate(update(queue("q"), queue("q")), StaticLookups(), CFG)
    check(verdict, "invalid operation `UPDATE`, expect operation to be `CREATE`")
