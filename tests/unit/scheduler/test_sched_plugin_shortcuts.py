"""The plugins' per-session shortcuts keep their answers: binpack's and resource-strategy-fit's few-rows float path
equals the numpy path to the bit, their cached scores follow an allocation on the node, numa-aware plans nothing
for a task without a policy when no node publishes a Numatopology, a pod shape is shared only by pods that read
the same, and network-topology-aware scores once per HyperNode path (a few HyperNodes in float arithmetic, to the bit)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.statement import Statement
from lahar.scheduler.placement import placement, plans
from lahar.scheduler.placement.plans import pod_shape
from lahar.scheduler.plugins import binpack as bp
from lahar.scheduler.plugins import resource_strategy_fit as rsf
from lahar.scheduler.registry import in_tree_registry
from tests.builders import guaranteed_pod as gpod
from tests.builders import node, pod, podgroup, queue, tiers_conf

NAMES = ("cpu", "memory", "pods", "nvidia.com/gpu")
ALLOC = np.array([[64000.0, 256e9, 110, 8], [8000.0, 16e9, 110, 0], [0.0, 0.0, 0, 0], [3000.0, 7e9, 10, 1]])
USED = np.array([[12345.0, 77e9, 3, 2], [7999.0, 9e9, 9, 0], [0.0, 0.0, 0, 0], [100.0, 6.9e9, 1, 1]])

REQUESTS = [
    ("cpu-memory", [4000.0, 8e9, 1, 0]),
    ("cpu-only", [333.0, 0, 1, 0]),
    ("overflows-some", [2950.0, 1e9, 1, 0]),
    ("with-gpu", [8000.0, 32e9, 1, 1]),
    ("nothing", [0.0, 0.0, 0, 0]),
]


@pytest.mark.parametrize("request_", [r[1] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
@pytest.mark.parametrize("weights", [{}, {"binpack.cpu": 3, "binpack.memory": 0},
                                     {"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 5}],
                         ids=["default", "cpu-weighted", "gpu-listed"])
def test_binpack_few_rows_equal_the_numpy_path(request_: list[float], weights: dict[str, Any]) -> None:
    w = bp.parse_weights(weights)
    vector = np.array([float(w.resources.get(n, -1)) for n in NAMES])
    prep = bp.Prepared(np.array(request_), vector, w.weight)
    full = prep.scores(ALLOC, USED)
    rows = np.array([3, 0, 2])
    assert prep.scores(ALLOC, USED, rows).tolist() == full[rows].tolist()
    assert full.tolist() == bp.binpack_scores(np.array(request_), ALLOC, USED, vector, w.weight).tolist()


@pytest.mark.parametrize("request_", [r[1] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
@pytest.mark.parametrize(("args", "pod_strategy"), [
    ({}, None),
    ({"resources": {"cpu": {"type": "MostAllocated", "weight": 2}, "memory": {"type": "LeastAllocated"}}}, None),
    ({"resources": {"nvidia.com/*": {"type": "MostAllocated", "weight": 3}, "cpu": {"weight": 1}}}, None),
    ({}, ("MostAllocated", {"cpu": 2, "memory": 0})),
    ({}, False),
], ids=["default", "most-and-least", "three-resources", "pod-annotations", "bad-pod-annotations"])
def test_strategy_few_rows_equal_the_numpy_path(request_: list[float], args: dict[str, Any],
                                                pod_strategy: Any) -> None:
    scoring = rsf.Scoring(np.array(request_), NAMES, rsf.parse_strategy(args), pod_strategy)
    full = scoring.scores(ALLOC, USED)
    rows = np.array([1, 3])
    assert scoring.scores(ALLOC, USED, rows).tolist() == full[rows].tolist()


def _session(conf: str, pods: list[Any], nodes: list[Any], *, groups: tuple[str, ...] = ("pg1",),
             **extras: Any) -> Session:
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in nodes],
                           podgroups=[podgroup(g).min(1).build() for g in groups], queues=[queue("c1").build()],
                           **extras)
    return Session(snap, c, registry, uid="ssn-1")


@pytest.mark.parametrize("plugin", ["binpack", "resource-strategy-fit"])
def test_cached_scores_follow_an_allocation_on_the_node(plugin: str) -> None:
    """The second task asks after the first is placed on n1: n1's score is recomputed (the cache is keyed by the
    request, invalidated per node by the allocation), n2's is kept, and both equal a fresh computation."""
    ssn = _session(tiers_conf("allocate", ["gang"], ["predicates", plugin]),
                   [pod(f"p{i}").req(cpu="2", memory="4Gi").group("pg1") for i in (1, 2)],
                   [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi")])
    p = ssn.plugins[plugin]
    t1, t2 = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=lambda t: t.name)
    everywhere = np.arange(2)
    before = p.node_order(t1, ssn.arrays, everywhere).tolist()
    assert before[0] == before[1]
    Statement(ssn).allocate(t1, 0)
    after = p.node_order(t2, ssn.arrays, everywhere).tolist()
    assert after[0] != before[0] and after[1] == before[1]
    fresh = _session(tiers_conf("allocate", ["gang"], ["predicates", plugin]),
                     [pod("p1").req(cpu="2", memory="4Gi").group("pg1").on("n1"),
                      pod("p2").req(cpu="2", memory="4Gi").group("pg1")],
                     [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi")])
    (t2_fresh,) = [t for j in fresh.jobs.values() for t in j.tasks.values() if t.name == t2.name]
    assert after == fresh.plugins[plugin].node_order(t2_fresh, fresh.arrays, everywhere).tolist()


NUMA_CONF = tiers_conf("allocate", ["gang"], ["predicates", "proportion", "numa-aware"])
TOPO = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": "n1"},
        "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "best-effort"},
                 "numares": {"cpu": {"allocatable": "0-3", "capacity": 4}},
                 "cpuDetail": {"0": {}, "1": {"core": 1}, "2": {"numa": 1, "core": 2}, "3": {"numa": 1, "core": 3}}}}

RELEVANT = [
    ("no-topology-no-policy", None, [], False),
    ("no-topology-policy-none", "none", [], False),
    ("no-topology-with-policy", "single-numa-node", [], True),
    ("no-topology-unknown-policy", "bogus", [], True),
    ("a-node-with-topology", None, [TOPO], True),
]


@pytest.mark.parametrize(("policy", "topos", "want"), [r[1:] for r in RELEVANT], ids=[r[0] for r in RELEVANT])
def test_numa_planning_only_when_a_node_or_the_task_has_numa(policy: str | None, topos: list[Any],
                                                             want: bool) -> None:
    ssn = _session(NUMA_CONF, [gpod("p1", "2", policy=policy).group("pg1")],
                   [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi")], numatopologies=topos)
    (task,) = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    pl = placement(ssn)
    assert pl.task_info(task)[0] is want
    Statement(ssn).allocate(task, 0)
    # planned and admitted only where n1 has a Numatopology; not planned: nothing reserved, n1 keeps its class
    assert (task.uid in pl.reserved) is bool(topos)


def _pod(**changes: Any) -> dict[str, Any]:
    obj = pod("p").req(cpu="2", memory="4Gi").group("pg1").build()
    for path, value in changes.items():
        target = obj
        keys = path.split("__")
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target.setdefault(k, {})
        target[keys[-1]] = value
    return obj


SHAPES = [
    ("same-content", _pod(), True),
    ("other-name-and-uid", {**_pod(), "metadata": {**_pod()["metadata"], "name": "q", "uid": "other"}}, True),
    ("other-annotation", _pod(metadata__annotations__x="1"), False),
    ("other-podgroup", _pod(**{"metadata__annotations__scheduling.k8s.io/group-name": "pg2"}), True),
    ("other-request", _pod(spec__containers__0__resources__requests__cpu="3"), False),
    ("int-not-string", _pod(spec__containers__0__resources__requests__cpu=2), False),
    ("float-not-int", _pod(spec__containers__0__resources__requests__cpu=2.0), False),
    ("other-container-name", _pod(spec__containers__0__name="d"), False),
    ("init-container", _pod(spec__initContainers=[{"name": "i", "resources": {}}]), False),
    ("bool-not-string", _pod(spec__containers__0__resources__requests__cpu=True), False),
    ("a-limit-as-well", _pod(spec__containers__0__resources__limits__cpu="2"), False),
    ("nested-not-string", _pod(spec__containers__0__resources__requests={"cpu": {"n": "2"}}), False),
]


@pytest.mark.parametrize(("other", "same"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_pod_shape_is_shared_only_by_pods_that_read_the_same(other: dict[str, Any], same: bool) -> None:
    assert (pod_shape(_pod()) == pod_shape(other)) is same
    assert (pod_shape(copy.deepcopy(other)) == pod_shape(other))


@pytest.mark.parametrize("value", [{}, {"a": "1", "b": "2"}, {"a": "1", "b": 2}, {"a": {"b": "c"}, "d": "e"},
                                   {"a": ["x", {"y": "z"}]}])
def test_frozen_string_maps_take_the_short_way_to_the_same_form(value: dict[str, Any]) -> None:
    def slow(v: Any) -> Any:  # the definition, without the short way for maps of strings
        if isinstance(v, str):
            return v
        if isinstance(v, dict):
            return ("{", tuple((k, slow(x)) for k, x in v.items()))
        if isinstance(v, list):
            return ("[", tuple(slow(x) for x in v))
        return (type(v).__name__, v)

    assert plans._frozen(value) == slow(value)


def test_pod_shape_of_an_unhashable_value_is_none() -> None:
    assert pod_shape(_pod(spec__containers__0__resources__requests__cpu={1, 2})) is None


def test_tasks_of_one_shape_share_the_device_request_and_signature() -> None:
    ssn = _session(tiers_conf("allocate", ["gang"], ["predicates", "numa-aware", "deviceshare"]),
                   [pod(f"p{i}").req(cpu="2", memory="4Gi").group("pg1") for i in (1, 2)],
                   [node("n1").alloc("8", "16Gi")], numatopologies=[TOPO])
    pl = placement(ssn)
    t1, t2 = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=lambda t: t.name)
    assert pl.task_info(t1)[0] is True and pl.task_info(t2)[0] is True
    assert pl.signature(t1) == pl.signature(t2)
    assert len(pl._by_shape) == 1


def test_vgpu_pods_of_two_jobs_keep_their_own_podgroup_in_the_device_request() -> None:
    """The shape leaves the PodGroup out; a vGPU request, which records it on the card, is parsed per pod."""
    pods = [pod(f"p{i}").req(cpu="2", memory="4Gi").group(f"pg{i}") for i in (1, 2)]
    for p in pods:
        p.obj["spec"]["containers"][0]["resources"]["limits"] = {"volcano.sh/vgpu-number": "1"}
    ssn = _session(tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]), pods,
                   [node("n1").alloc("8", "16Gi")], groups=("pg1", "pg2"))
    pl = placement(ssn)
    t1, t2 = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=lambda t: t.name)
    groups = [pl.task_info(t)[1].volcano.group for t in (t1, t2)]
    assert groups == ["pg1", "pg2"]


HN = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode"}


def _hypernode(name: str, tier: int, members: list[tuple[str, str]]) -> dict[str, Any]:
    return {**HN, "metadata": {"name": name}, "spec": {"tier": tier, "members": [
        {"type": kind, "selector": {"exactMatch": {"name": m}}} for kind, m in members]}}


def test_network_topology_normal_pod_scores_once_per_path() -> None:
    """Nodes under the same HyperNodes score the same, and as the per-node formula gives."""
    hns = [_hypernode("s0", 1, [("Node", "n1"), ("Node", "n2")]), _hypernode("s1", 1, [("Node", "n3")]),
           _hypernode("top", 2, [("HyperNode", "s0"), ("HyperNode", "s1")])]
    ssn = _session(tiers_conf("allocate", ["gang"], ["predicates", "network-topology-aware"]),
                   [pod("p1").req(cpu="2", memory="4Gi").group("pg1"),
                    pod("busy").req(cpu="6", memory="4Gi").on("n3")],
                   [node(f"n{i}").alloc("8", "16Gi") for i in (1, 2, 3, 4)], hypernodes=hns)
    p = ssn.plugins["network-topology-aware"]
    (task,) = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "p1"]
    got = p.node_order(task, ssn.arrays, np.arange(4)).tolist()
    tm = p.tier_matrix
    hn = np.append(p._binpack(task.resreq), 1.0)
    want = ((hn[tm] @ p.tier_weights) / p.tier_weights.sum() * 100.0 * p.options.weight).tolist()
    assert got == want
    assert got[0] == got[1] != got[2]
    # a few HyperNodes: the float path (every HyperNode) equals the numpy path (by index) to the bit
    every = np.arange(len(p.names))
    for request in (task.resreq, task.resreq * 3, task.resreq * 0):
        assert p._binpack(request).tolist() == p._binpack(request, every).tolist()
