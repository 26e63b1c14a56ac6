"""numa-aware: Volcano's numa-aware test shapes as data (cpumanager GetTopologyHints / Allocate, NUMA-count
scoring, OnSessionClose accumulation), the kubelet policy admit per node, the stricter task policy, and session
reservations that hold across a session and are undone on discard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.placement import placement
from lahar.scheduler.placement.numatopology import (
    NodeTopology,
    decision_annotation,
    effective_policy,
    node_topology,
    normalize_reverse,
)
from lahar.scheduler.plugins import numaaware
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from lahar.scheduler.topology import TopologyHint, hints
from lahar.scheduler.topology.cpus import container_cpu_requests, is_guaranteed, take_cpus
from tests.builders import guaranteed_pod as gpod
from tests.builders import node, podgroup, queue, tiers_conf

# Volcano's cpu_mng_test.go machine: 8 CPUs, 2 sockets = 2 NUMA nodes, 2 threads per core
CPU_DETAIL = {0: (0, 0, 0), 1: (0, 0, 0), 2: (0, 1, 0), 3: (0, 1, 0),
              4: (1, 2, 1), 5: (1, 2, 1), 6: (1, 3, 1), 7: (1, 3, 1)}  # cpu: (numa, core, socket)


def numatopo(name: str, *, policy: str = "best-effort", cpu_policy: str = "static", allocatable: str = "0-7",
             detail: dict[int, tuple[int, int, int]] = CPU_DETAIL) -> dict[str, Any]:
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
            "spec": {"policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": policy},
                     "numares": {"cpu": {"allocatable": allocatable, "capacity": len(detail)}},
                     "cpuDetail": {str(c): {k: v for k, v in (("numa", n), ("core", k_), ("socket", s)) if v}
                                   for c, (n, k_, s) in detail.items()}}}


TOPO = node_topology(numatopo("n1"))


CONF = tiers_conf("allocate", ["gang"], ["predicates", "proportion", "numa-aware"])


def session(pods: list[Any], nodes: list[Any], topos: list[dict[str, Any]], *, min_member: int,
            conf: str = CONF) -> tuple[Session, Any]:
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in nodes],
                           podgroups=[podgroup("pg1").min(min_member).build()], queues=[queue("c1").build()],
                           numatopologies=topos)
    ssn = Session(snap, c, registry, uid="ssn-1")
    for name in c.actions:
        registry.action(name, c.action_arguments(name)).execute(ssn)
    return ssn, ssn.close()


# --- pure cores ----------------------------------------------------------------------------------------------------

POLICIES = [
    ("none-none", "none", "", "none"),
    ("task-stricter", "best-effort", "single-numa-node", "single-numa-node"),
    ("task-weaker-node-wins", "restricted", "best-effort", "restricted"),
    ("equal", "restricted", "restricted", "restricted"),
    ("unknown-task-ignored", "best-effort", "bogus", "best-effort"),
    ("task-on-none-node", "none", "restricted", "restricted"),
]


@pytest.mark.parametrize(("node_policy", "task_policy", "want"), [p[1:] for p in POLICIES],
                         ids=[p[0] for p in POLICIES])
def test_effective_policy(node_policy: str, task_policy: str, want: str) -> None:
    assert effective_policy(node_policy, task_policy) == want


def _h(nodes: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(frozenset(nodes), preferred)


# Volcano cpu_mng_test.go Test_GetTopologyHints
CPU_HINTS = [
    ("test-1", 4, "0-7", [_h((0,), True), _h((1,), True), _h((0, 1), False)]),
    ("test-2", 4, "1-7", [_h((1,), True), _h((0, 1), False)]),
    ("test-3", 5, "0-7", [_h((0, 1), True)]),
    ("test-4", 8, "0-7", [_h((0, 1), True)]),
    ("test-5", 9, "0-7", []),
    ("test-6", 4, "2-5", [_h((0, 1), False)]),
]


@pytest.mark.parametrize(("request_", "available", "want"), [c[1:] for c in CPU_HINTS], ids=[c[0] for c in CPU_HINTS])
def test_cpu_hints_volcano_table(request_: int, available: str, want: list[TopologyHint]) -> None:
    free = hints.parse_cpuset(available)
    got = hints.cpu_provider(request_, TOPO.capacity(), TOPO.per_numa(free))
    assert got == {"cpu": want}


# Volcano cpu_mng_test.go Test_Allocate
CPU_ALLOCATE = [
    ("test-1", 4, "0-7", (0,), [0, 1, 2, 3]),
    ("test-2", 4, "1-7", (1,), [4, 5, 6, 7]),
    ("test-3", 5, "0-7", (0, 1), [0, 1, 2, 3, 4]),
    ("test-4", 5, "1-7", (0, 1), [1, 4, 5, 6, 7]),
    ("test-5", 8, "1-7", (0, 1), None),
]


@pytest.mark.parametrize(("count", "available", "affinity", "want"), [c[1:] for c in CPU_ALLOCATE],
                         ids=[c[0] for c in CPU_ALLOCATE])
def test_take_cpus_volcano_table(count: int, available: str, affinity: tuple[int, ...], want: list[int] | None) -> None:
    assert take_cpus(hints.parse_cpuset(available), count, TOPO, affinity) == want


def test_take_cpus_spills_outside_the_hint_like_the_cpu_manager() -> None:
    # 3 CPUs wanted with hint {0} but only 2 free there: aligned first, the rest from anywhere
    assert take_cpus([2, 3, 4, 5, 6, 7], 3, TOPO, (0,)) == [2, 3, 4]


def test_node_topology_reads_numatopology_with_omitempty_zeros() -> None:
    t = node_topology(numatopo("n1", policy="single-numa-node", allocatable="1-7"))
    assert isinstance(t, NodeTopology)
    assert t.numa_nodes == (0, 1) and t.policy == "single-numa-node" and t.static
    assert t.cpu_numa[0] == 0 and t.cpu_numa[7] == 1 and t.cpu_socket[4] == 1
    assert t.allocatable == frozenset(range(1, 8)) and t.capacity() == {0: 4, 1: 4}


QOS = [
    ("guaranteed", {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}, True, 2),
    ("limits-only", {"limits": {"cpu": "2", "memory": "1Gi"}}, True, 2),
    ("burstable", {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}, False, 0),
    ("fractional", {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "1500m", "memory": "1Gi"}},
     True, 0),
    ("no-memory-limit", {"limits": {"cpu": "2"}}, False, 0),
]


@pytest.mark.parametrize(("resources", "guaranteed", "cpus"), [q[1:] for q in QOS], ids=[q[0] for q in QOS])
def test_guaranteed_and_exclusive_cpus(resources: dict[str, Any], guaranteed: bool, cpus: int) -> None:
    p = {"spec": {"containers": [{"name": "c", "resources": resources}]}}
    assert is_guaranteed(p) is guaranteed
    assert container_cpu_requests(p) == [("c", cpus)]


def test_decision_annotation_is_volcanos_pod_resource_decision() -> None:
    got = decision_annotation({0: {"cpu": 2, "nvidia.com/gpu": 1}, 1: {"cpu": 0}})
    assert json.loads(got) == {"numa": {"0": {"cpu": "2", "nvidia.com/gpu": "1"}}}


# numaaware_gpu_test.go TestGetNodeNumaNumForTask_GPUScoring: all on NUMA 0 scores above split over 0 and 1
def test_fewer_numa_nodes_score_higher() -> None:
    scores = normalize_reverse(__import__("numpy").array([1.0, 2.0]))
    assert scores[0] > scores[1] and list(scores) == [50.0, 0.0]


# --- the plugin in a session -----------------------------------------------------------------------------------------

ADMIT = [
    # (id, node policy, task policy, cpus per pod, expected to bind)
    ("single-numa-fits-one-node", "single-numa-node", None, "4", True),
    ("single-numa-too-wide", "single-numa-node", None, "5", False),
    ("restricted-too-wide-but-minimal", "restricted", None, "5", True),  # {0,1} is the minimal width: preferred
    ("best-effort-always", "best-effort", None, "8", True),
    ("task-stricter-honoured", "best-effort", "single-numa-node", "5", False),
    ("task-stricter-fits", "best-effort", "single-numa-node", "4", True),
    ("task-weaker-node-enforces", "single-numa-node", "best-effort", "5", False),
]


@pytest.mark.parametrize(("node_policy", "task_policy", "cpu", "binds"), [a[1:] for a in ADMIT],
                         ids=[a[0] for a in ADMIT])
def test_predicate_admits_like_the_kubelet(node_policy: str, task_policy: str | None, cpu: str, binds: bool) -> None:
    _, d = session([gpod("p1", cpu, policy=task_policy)], [node("n1").alloc("8", "16Gi")],
                   [numatopo("n1", policy=node_policy)], min_member=1)
    assert bool(d.binds) is binds
    if not binds:
        (cond,) = d.pod_conditions
        assert "cannot be assigned by numa" in cond.message


FILTER = [
    ("no-numatopology", None, "numa info is empty"),
    ("cpu-manager-none", numatopo("n1", cpu_policy="none"), "cpu manager policy isn't static"),
    ("empty-allocatable", numatopo("n1", allocatable=""), "cpu allocatable map is empty"),
]


@pytest.mark.parametrize(("topo", "reason"), [f[1:] for f in FILTER], ids=[f[0] for f in FILTER])
def test_task_policy_needs_numa_information(topo: dict[str, Any] | None, reason: str) -> None:
    _, d = session([gpod("p1", "2", policy="single-numa-node")], [node("n1").alloc("8", "16Gi")],
                   [topo] if topo else [], min_member=1)
    assert not d.binds
    assert reason in d.pod_conditions[0].message


def test_no_task_policy_and_no_numa_information_passes() -> None:
    _, d = session([gpod("p1", "2")], [node("n1").alloc("8", "16Gi")], [], min_member=1)
    assert [b.node for b in d.binds] == ["n1"]


def test_reservations_hold_across_the_session_and_annotations_follow() -> None:
    pods = [gpod(f"p{i}", "3", policy="single-numa-node") for i in range(2)]
    _, d = session(pods, [node("n1").alloc("8", "16Gi")], [numatopo("n1")], min_member=2)
    assert len(d.binds) == 2
    numas = sorted(json.loads(d.annotations[b.uid]["lahar.sh/numa-allocation"])["numa"][0] for b in d.binds)
    assert numas == [0, 1]  # the second pod saw the first one's CPUs taken
    for b in d.binds:
        decision = json.loads(d.annotations[b.uid]["volcano.sh/topology-decision"])
        assert list(decision["numa"].values()) == [{"cpu": "3"}]


def test_discard_restores_the_numa_state() -> None:
    pods = [gpod(f"p{i}", "3", policy="single-numa-node") for i in range(3)]  # only 2 fit one per NUMA node
    ssn, d = session(pods, [node("n1").alloc("16", "16Gi")], [numatopo("n1")], min_member=3)
    assert not d.binds and not d.annotations
    p = placement(ssn)
    assert p.free_cpus(0) == set(range(8)) and not p.reserved


def test_running_pods_hold_their_cpus_from_their_annotations() -> None:
    running = gpod("old", "4").on("n1")
    running.annotate(**{"volcano.sh/topology-decision": json.dumps({"numa": {"0": {"cpu": "4"}}})})
    _, d = session([gpod("p1", "4", policy="single-numa-node"), running], [node("n1").alloc("8", "16Gi")],
                   [numatopo("n1")], min_member=1)
    (b,) = d.binds
    assert json.loads(d.annotations[b.uid]["lahar.sh/numa-allocation"])["numa"] == [1]


# OnSessionClose shapes: only tasks bound this session get a decision, each on its own node with its own CPUs
def test_session_close_writes_each_bound_task_on_its_node() -> None:
    pods = [gpod("p1", "4", policy="single-numa-node"), gpod("p2", "4", policy="single-numa-node"),
            gpod("p3", "4", policy="single-numa-node")]
    _, d = session(pods, [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi")],
                   [numatopo("n1"), numatopo("n2")], min_member=3)
    assert len(d.binds) == 3
    seen = {}
    for b in d.binds:
        body = json.loads(d.annotations[b.uid]["lahar.sh/numa-allocation"])
        seen.setdefault(b.node, []).append(body["cpus"]["c"])
    assert sorted(len(v) for v in seen.values()) == [1, 2]
    for cpusets in seen.values():
        assert len(set(cpusets)) == len(cpusets)  # never the same CPUs twice on one node


def test_score_prefers_the_node_where_the_pod_fits_one_numa_node() -> None:
    # n1 has only 2 free CPUs per NUMA node, n2 is empty: a best-effort pod of 4 spans 2 NUMA nodes on n1
    _, d = session([gpod("p1", "4")], [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi")],
                   [numatopo("n1", allocatable="2-3,6-7"), numatopo("n2")], min_member=1,
                   conf=tiers_conf("allocate", ["gang"], ["predicates", "numa-aware"]))
    assert [b.node for b in d.binds] == ["n2"]


def test_explain_lists_providers_merged_hint_and_reason() -> None:
    ssn, _ = session([gpod("p1", "5", policy="single-numa-node")], [node("n1").alloc("8", "16Gi")],
                     [numatopo("n1")], min_member=1)
    task = next(iter(ssn.snapshot.tasks.values()))
    (entry,) = placement(ssn).explain(task)
    assert entry["node"] == "n1" and entry["admit"] is False
    assert "cannot be assigned by numa" in entry["reason"]
    (merge,) = entry["merges"]
    assert merge["providers"]["cpu"] == [{"affinity": [0, 1], "preferred": True}]
    assert merge["hint"] == {"affinity": None, "preferred": False} and merge["admit"] is False


def test_plugin_registered_and_satisfies_its_hooks() -> None:
    from lahar.scheduler.framework import hooks

    p = in_tree_registry().plugin("numa-aware", {"weight": 2})
    assert isinstance(p, numaaware.NumaAware) and p.weight == 2
    for proto in (hooks.Predicate, hooks.NodeOrder, hooks.EventHandler, hooks.SessionOpen, hooks.SessionClose):
        assert isinstance(p, proto)


def test_run_session_without_numa_plugin_is_unchanged() -> None:
    registry = in_tree_registry()
    c = confs.load(tiers_conf("allocate", ["gang"], ["predicates"]), actions=registry.action_names,
                   plugins=registry.plugin_names)
    snap = snapshots.build(pods=[gpod("p1", "5", policy="single-numa-node").build()],
                           nodes=[node("n1").alloc("8", "16Gi").build()],
                           podgroups=[podgroup("pg1").min(1).build()], queues=[queue("c1").build()],
                           numatopologies=[numatopo("n1", policy="single-numa-node")])
    d = run_session(snap, c, registry=registry)
    assert [b.node for b in d.binds] == ["n1"] and not d.annotations


# --- session speed: class grouping and the cross-session caches ---------------------------------------------------

GROUP_CASES = [
    ("one-class", [3, 3, 3]),
    ("two-classes", [0, 2, 0, 2, 2]),
    ("many", [5, 1, 4, 1, 5, 9, 2, 6]),
    ("empty", []),
]


@pytest.mark.parametrize("values", [c[1] for c in GROUP_CASES], ids=[c[0] for c in GROUP_CASES])
def test_group_is_np_unique_without_the_sort(values: list[int]) -> None:
    import numpy as np

    from lahar.scheduler.placement.placement import _group
    arr = np.array(values, dtype=np.int64)
    first, inverse = _group(arr)
    classes = np.unique(arr)
    assert len(first) == len(classes)
    assert list(arr[first]) == list(classes)  # one representative per class, in class order
    assert list(arr[first][inverse]) == values  # every position maps to its class


def test_cached_reuses_by_resource_version_and_recomputes_without_one() -> None:
    from lahar.scheduler.placement import DerivedCache
    cached = DerivedCache().get
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    with_rv = {"metadata": {"name": "n", "resourceVersion": "7"}}
    assert cached("test-kind", "n", (with_rv, None), compute) == 1
    assert cached("test-kind", "n", (with_rv, None), compute) == 1  # same resourceVersion: reused
    bumped = {"metadata": {"name": "n", "resourceVersion": "8"}}
    assert cached("test-kind", "n", (bumped, None), compute) == 2  # changed: recomputed
    no_rv = {"metadata": {"name": "n"}}
    assert cached("test-kind", "n", (no_rv,), compute) == 3
    assert cached("test-kind", "n", (no_rv,), compute) == 4  # no way to tell a change: never cached


@pytest.mark.parametrize(("annotations", "classes"), [
    pytest.param({}, 1, id="a-pod-holding-nothing-visible-leaves-its-node-in-the-class"),
    pytest.param({"lahar.sh/numa-allocation": '{"cpus":{"c":"0-1"},"numa":[0],"policy":"best-effort"}'}, 2,
                 id="a-pod-holding-cpus-makes-its-node-its-own-class"),
])
def test_nodes_of_one_shape_share_a_class_across_sessions_with_resource_versions(annotations: dict[str, str],
                                                                                 classes: int) -> None:
    from lahar.scheduler.placement import Placement
    nodes = [node(f"n{i}").alloc("8", "16Gi") for i in range(3)]
    topos = [numatopo(f"n{i}") for i in range(3)]
    for i, o in enumerate([*(n.obj for n in nodes), *topos]):
        o["metadata"]["resourceVersion"] = str(i + 1)
    seen = []
    for _ in range(2):
        ssn, _ = session([gpod("p1", "2").annotate(**annotations)], nodes, topos, min_member=1)
        seen.append(list(Placement(ssn).class_of))
    # the node p1 went to is its own class when p1 holds resources a plan can see there; the two others share one
    assert seen[0] == seen[1]
    assert len(set(seen[0])) == classes


# --- init containers: admitted before the app containers, their CPUs reused unless they are sidecars --------------


def _with_init(name: str, app: str, init: str, *, sidecar: bool = False, policy: str | None = None) -> Any:
    p = gpod(name, app, policy=policy)
    res = {"cpu": init, "memory": "1Gi"}
    c: dict[str, Any] = {"name": "setup", "resources": {"requests": dict(res), "limits": dict(res)}}
    if sidecar:
        c["restartPolicy"] = "Always"
    p.obj["spec"]["initContainers"] = [c]
    return p


@pytest.mark.parametrize(("scope", "init", "app", "sidecar", "held"), [
    pytest.param("container", "2", "2", False, 2, id="container-scope-app-reuses-the-init-cpus"),
    pytest.param("container", "4", "2", False, 4, id="container-scope-app-takes-part-of-a-bigger-init"),
    pytest.param("container", "2", "2", True, 4, id="container-scope-sidecar-cpus-are-not-reused"),
    pytest.param("pod", "4", "2", False, 4, id="pod-scope-the-largest-init-sizes-the-pod"),
    pytest.param("pod", "2", "2", True, 4, id="pod-scope-sidecar-adds-to-the-apps"),
])
def test_init_containers_take_part_in_the_placement(scope: str, init: str, app: str, sidecar: bool,
                                                      held: int) -> None:
    n = node("n1").alloc("8", "16Gi")
    n.obj["metadata"].setdefault("annotations", {})["lahar.sh/topology-manager-scope"] = scope
    _, d = session([_with_init("p1", app, init, sidecar=sidecar)], [n], [numatopo("n1", policy="single-numa-node")],
                   min_member=1)
    (b,) = d.binds
    alloc = json.loads(d.annotations[b.uid]["lahar.sh/numa-allocation"])
    cpus = {c: hints.parse_cpuset(v) for c, v in alloc["cpus"].items()}
    assert len({c for v in cpus.values() for c in v}) == held and len(alloc["numa"]) == 1
    decision = json.loads(d.annotations[b.uid]["volcano.sh/topology-decision"])["numa"]
    assert decision[str(alloc["numa"][0])]["cpu"] == str(held)
    if scope == "container" and not sidecar:
        (app_name,) = set(cpus) - {"setup"}
        assert set(cpus[app_name]) <= set(cpus["setup"])  # the app container runs on the exited init's CPUs


def test_an_init_container_that_fits_no_numa_node_refuses_the_node() -> None:
    """6 exclusive CPUs for the init container: no NUMA node of 4 holds them under single-numa-node."""
    n = node("n1").alloc("8", "16Gi")
    _, d = session([_with_init("p1", "2", "6")], [n], [numatopo("n1", policy="single-numa-node")], min_member=1)
    assert not d.binds
