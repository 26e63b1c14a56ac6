"""nodegroup: the per-group decision tables, and Volcano's plugins/nodegroup/nodegroup_test.go cases as data (scores
and predicate per node, strict and non-strict, hierarchy, preferred order), and that allocate follows the groups."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import nodegroup as ng
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

REQ, PREF = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"


def _affinity(req: list[str] = (), pref: list[str] = (), anti_req: list[str] = (),  # type: ignore[assignment]
              anti_pref: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    out: dict[str, Any] = {}
    if req or pref:
        out["nodeGroupAffinity"] = {REQ: list(req), PREF: list(pref)}
    if anti_req or anti_pref:
        out["nodeGroupAntiAffinity"] = {REQ: list(anti_req), PREF: list(anti_pref)}
    return out


def _queue(name: str, affinity: dict[str, Any] | None = None, parent: str = "") -> queue:
    q = queue(name)
    if affinity is not None:
        q.obj["spec"]["affinity"] = affinity
    if parent:
        q.parent(parent)
    return q


BOTH = ng.GroupAffinity(("group1", "group3"), ("group3",), ("group2", "group4"), ("group4",))


@pytest.mark.parametrize(("affinity", "group", "strict", "want"), [
    (BOTH, "group1", True, None),
    (BOTH, "group2", True, ng.UNSATISFIED),
    (BOTH, "group4", True, None),  # anti-preferred readmits an anti-required group (upstream's order)
    (BOTH, "group9", True, ng.UNSATISFIED),
    (BOTH, None, True, ng.NO_LABEL),
    (BOTH, None, False, ng.NO_LABEL),  # non-strict helps only queues without rules
    (None, None, True, ng.NO_LABEL),
    (None, None, False, None),
    (ng.GroupAffinity(), None, False, None),  # an empty affinity is no rules
    (None, "group1", False, ng.NO_AFFINITY),
    (ng.GroupAffinity(), "group1", True, ng.NO_AFFINITY),
], ids=["required", "anti-required", "anti-preferred-wins", "unlisted", "unlabelled-strict",
        "unlabelled-with-rules-non-strict", "no-rules-unlabelled-strict", "no-rules-unlabelled-non-strict",
        "empty-rules-unlabelled-non-strict", "no-rules-labelled", "empty-rules-labelled"])
def test_admits(affinity: ng.GroupAffinity | None, group: str | None, strict: bool, want: str | None) -> None:
    assert ng.admits(affinity, group, strict) == want


@pytest.mark.parametrize(("affinity", "group", "order", "want"), [
    (BOTH, "group1", False, 100),
    (BOTH, "group3", False, 150),
    (BOTH, "group4", False, -1),
    (BOTH, "group2", False, 0),
    (BOTH, None, False, 0),
    (None, "group1", False, 0),
    (ng.GroupAffinity((), ("a", "b", "c", "d")), "a", True, 50),
    (ng.GroupAffinity((), ("a", "b", "c", "d")), "c", True, 25),
    (ng.GroupAffinity((), ("a", "b", "c", "d")), "c", False, 50),
], ids=["required", "required-and-preferred", "anti-preferred", "anti-required", "unlabelled", "no-affinity",
        "order-first", "order-third-of-four", "no-order-flat"])
def test_score(affinity: ng.GroupAffinity | None, group: str | None, order: bool, want: float) -> None:
    assert ng.score(affinity, group, order) == want


@pytest.mark.parametrize("spec", [
    {}, {"affinity": None}, {"affinity": "group1"},
], ids=["absent", "null", "not-a-mapping"])
def test_no_affinity(spec: dict[str, Any]) -> None:
    assert ng.parse_affinity(spec) is None


def test_malformed_lists_count_as_no_names() -> None:
    a = ng.parse_affinity({"affinity": {"nodeGroupAffinity": {REQ: "group1", PREF: ["g2", 3, None, ""]},
                                        "nodeGroupAntiAffinity": ["x"]}})
    assert a is not None
    assert (a.required, a.preferred, a.anti_required, a.anti_preferred) == (frozenset(), ("g2",), frozenset(),
                                                                            frozenset())


def test_hierarchy_walk_stops_at_a_cycle_or_a_missing_parent() -> None:
    qs = [_queue("a", parent="b"), _queue("b", parent="a"), _queue("c", parent="nowhere"),
          _queue("root", _affinity(["g"]))]
    snap = snapshots.build(queues=[q.build() for q in qs])
    got = ng.queue_affinities(snap.queues, hierarchy=True)
    assert got["a"] is None and got["b"] is None and got["c"] is None
    assert got["root"] is not None and got["root"].required == {"g"}


LABEL = ng.NODE_GROUP_LABEL
NODES = [node("n1").alloc("2", "4Gi").label(**{LABEL: "group1"}),
         node("n2").alloc("4", "16Gi").label(**{LABEL: "group2"}),
         node("n3").alloc("4", "16Gi").label(**{LABEL: "group3"}),
         node("n4").alloc("4", "16Gi").label(**{LABEL: "group4"}),
         node("n5").alloc("4", "16Gi")]
Q1 = _affinity(["group1", "group3"], ["group3"], ["group2", "group4"], ["group4"])
Q2 = _affinity(["group1"], ["group3"], ["group2"], ["group4"])
OK, NO = True, False

UPSTREAM: list[dict[str, Any]] = [
    dict(id="soft-subset-of-hard", queues=[_queue("q1", Q1)], queue="q1", arguments={},
         scores=[100, 0, 150, -1, 0], fits=[OK, NO, OK, OK, NO]),
    dict(id="soft-not-subset-of-hard", queues=[_queue("q2", Q2)], queue="q2", arguments={},
         scores=[100, 0, 50, -1, 0], fits=[OK, NO, OK, OK, NO]),
    dict(id="no-affinity-non-strict", queues=[_queue("root-no-affinity")], queue="root-no-affinity",
         arguments={"strict": False}, scores=[0, 0, 0, 0, 0], fits=[NO, NO, NO, NO, OK]),
    dict(id="inherits-from-parent", queues=[_queue("root", Q1), _queue("q1", Q1, "root"),
                                            _queue("q1-child", None, "q1")],
         queue="q1-child", arguments={}, hierarchy=True, scores=[100, 0, 150, -1, 0], fits=[OK, NO, OK, OK, NO]),
    dict(id="inherits-from-ancestor", queues=[_queue("root", Q1), _queue("q-none", None, "root"),
                                              _queue("q-none-child", None, "q-none")],
         queue="q-none-child", arguments={}, hierarchy=True, scores=[100, 0, 150, -1, 0],
         fits=[OK, NO, OK, OK, NO]),
    dict(id="no-inheritance-without-hierarchy", queues=[_queue("root", Q1), _queue("q-none", None, "root"),
                                                        _queue("q-none-child", None, "q-none")],
         queue="q-none-child", arguments={}, scores=[0, 0, 0, 0, 0], fits=[NO, NO, NO, NO, NO]),
    dict(id="queue-without-affinity", queues=[_queue("q-none", None, "root")], queue="q-none", arguments={},
         scores=[0, 0, 0, 0, 0], fits=[NO, NO, NO, NO, NO]),
    dict(id="preferred-order", queues=[_queue("q3", _affinity([], ["group1", "group3"]))], queue="q3",
         arguments={"enablePreferredOrder": True}, scores=[50, 0, 25, 0, 0], fits=[OK, NO, OK, NO, NO]),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_upstream_cases(case: dict[str, Any]) -> None:
    snap = snapshots.build(pods=[pod("p1").req("2", "4Gi").group("pg1").build()], nodes=[n.build() for n in NODES],
                           podgroups=[podgroup("pg1").queue(case["queue"]).build()],
                           queues=[q.build() for q in case["queues"]])
    option: dict[str, Any] = {"name": "nodegroup", "arguments": case["arguments"]}
    if case.get("hierarchy"):
        option["enableHierarchy"] = True
    registry = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [option]}]}),
                      actions=registry.action_names, plugins=registry.plugin_names)
    ssn = Session(snap, conf, registry)
    task = next(iter(snap.tasks.values()))
    every = np.arange(len(snap.arrays))
    assert ssn.node_scores(task, every).tolist() == case["scores"]
    f = ssn.predicate(task)
    assert f.feasible.tolist() == case["fits"]
    assert f.unresolvable is not None and (f.unresolvable == ~f.feasible).all()  # all UnschedulableAndUnresolvable


def test_allocate_follows_the_required_group_and_explains_the_rest() -> None:
    conf = tiers_conf("allocate", ["gang"], ["predicates", "nodegroup"])
    d = run(nodes=[node("a").alloc("8", "8Gi").label(**{LABEL: "cpu"}),
                   node("b").alloc("8", "8Gi").label(**{LABEL: "gpu"})],
            queues=[_queue("train", _affinity(["gpu"])), _queue("web", _affinity(["cpu"], anti_req=["gpu"]))],
            podgroups=[podgroup("pg1").queue("train"), podgroup("pg2").queue("web")],
            pods=[pod("t").req("1", "1Gi").group("pg1"), pod("w").req("1", "1Gi").group("pg2")], conf=conf)
    assert d.bind_map() == {"c1/t": "b", "c1/w": "a"}


def test_conf_accepts_the_arguments() -> None:
    registry = in_tree_registry()
    c = confs.load("actions: allocate\ntiers:\n- plugins:\n  - name: nodegroup\n    enableHierarchy: true\n"
                   "    arguments: {strict: false, enablePreferredOrder: true}\n",
                   actions=registry.action_names, plugins=registry.plugin_names)
    p = ng.NodeGroup(c.tiers[0].plugins[0].arguments)
    assert (p.strict, p.preferred_order) == (False, True)


# Volcano's TestNodeGroupResourceLimits: two groups, the queue requires both and prefers group1.
LIMIT_NODES = [node("n1").alloc("16", "64Gi", pods=32).label(**{LABEL: "group1"}),
               node("n2").alloc("16", "64Gi", pods=32).label(**{LABEL: "group2"})]
BOTH_GROUPS = _affinity(["group1", "group2"], ["group1"])

LIMIT_CASES: list[dict[str, Any]] = [
    dict(id="no-annotation", limits=None, running=False, fits=[OK, OK]),
    dict(id="under-the-limit", limits='{"group1":{"cpu":"3","memory":"8Gi"}}', running=False, fits=[OK, OK]),
    dict(id="omitted-resource-is-unlimited", limits='{"group1":{"cpu":"3"}}', running=False, fits=[OK, OK]),
    dict(id="named-resource-is-enforced", limits='{"group1":{"cpu":"1"}}', running=False, fits=[NO, OK]),
    dict(id="over-the-limit-falls-back", limits='{"group1":{"cpu":"3","memory":"8Gi"}}', running=True,
         fits=[NO, OK]),
    dict(id="invalid-annotation-refuses-all", limits='{"group1":{"cpu":', running=False, fits=[NO, NO]),
]


def _limit_session(limits: str | None, pods: list[pod], podgroups: list[podgroup]) -> tuple[Session, Any]:
    q = _queue("q", BOTH_GROUPS)
    if limits is not None:
        q.annotate(**{ng.LIMITS_ANNOTATION: limits})
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in LIMIT_NODES],
                           podgroups=[g.build() for g in podgroups], queues=[q.build()])
    registry = in_tree_registry()
    conf = confs.load("actions: allocate\ntiers:\n- plugins:\n  - name: nodegroup\n",
                      actions=registry.action_names, plugins=registry.plugin_names)
    return Session(snap, conf, registry), snap


@pytest.mark.parametrize("case", LIMIT_CASES, ids=[c["id"] for c in LIMIT_CASES])
def test_resource_limits_upstream(case: dict[str, Any]) -> None:
    pods = [pod("pending").req("2", "4Gi").group("pg-pending")]
    groups = [podgroup("pg-pending").queue("q")]
    if case["running"]:
        pods.append(pod("used").req("2", "4Gi").group("pg-used").on("n1"))
        groups.append(podgroup("pg-used").queue("q").phase("Running"))
    ssn, snap = _limit_session(case["limits"], pods, groups)
    task = next(t for t in snap.tasks.values() if t.name == "pending")
    f = ssn.predicate(task)
    assert f.feasible.tolist() == case["fits"]
    if not all(case["fits"]):
        want = ng.LIMIT_INVALID if "invalid" in case["id"] else ng.LIMIT_EXCEEDED
        assert f.reasons is not None and f.reasons[0] == want
        assert f.unresolvable is not None and f.unresolvable[0]


def test_resource_limit_follows_allocations_in_the_session() -> None:
    pods = [pod("pending-1").req("2", "4Gi").group("pg-1"), pod("pending-2").req("2", "4Gi").group("pg-2")]
    ssn, snap = _limit_session('{"group1":{"cpu":"3","memory":"8Gi"}}', pods,
                               [podgroup("pg-1").queue("q"), podgroup("pg-2").queue("q")])
    t1, t2 = (next(t for t in snap.tasks.values() if t.name == n) for n in ("pending-1", "pending-2"))
    assert ssn.predicate(t2).feasible.tolist() == [OK, OK]
    stmt = ssn.statement()
    stmt.allocate(t1, snap.arrays.index["n1"])
    assert ssn.predicate(t2).feasible.tolist() == [NO, OK]
    stmt.discard()
    assert ssn.predicate(t2).feasible.tolist() == [OK, OK]


@pytest.mark.parametrize(("raw", "fragment"), [
    ("[1]", "want {group: {resource: quantity}}"),
    ('{"g": 3}', "want {group: {resource: quantity}}"),
    ('{"g": {"cpu": "lots"}}', "g:"),
    ('{"g": {"cpu": true}}', "g.cpu: not a quantity"),
    ("{", "parse annotation volcano.sh/nodegroup-resource-limits"),
], ids=["not-an-object", "group-not-a-resource-list", "bad-quantity", "bool-quantity", "bad-json"])
def test_invalid_limits_name_the_annotation_and_the_reason(raw: str, fragment: str) -> None:
    snap = snapshots.build(queues=[queue("q").annotate(**{ng.LIMITS_ANNOTATION: raw}).build()])
    with pytest.raises(ValueError, match="volcano.sh/nodegroup-resource-limits") as e:
        ng.parse_limits(snap.queues["q"].queue, snap.resources)
    assert fragment in str(e.value)
