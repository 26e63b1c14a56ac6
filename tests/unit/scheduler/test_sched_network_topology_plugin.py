"""The network-topology-aware plugin: its arguments (Volcano's names and defaults), fading tier weights, the
bin-pack of unconstrained pods into HyperNodes tier by tier, LCA-tier node scores for a constrained job, and
HyperNode scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import hypernodes as hn
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import networktopology as nta
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, tiers_conf
from tests.builders import objs as _objs

OPTIONS = [
    pytest.param({}, (1, {"cpu": 1, "memory": 1}, True, 0.8), id="defaults"),
    pytest.param({"weight": 10, "hypernode.binpack.cpu": 5, "hypernode.binpack.memory": 2,
                  "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
                  "hypernode.binpack.resources.nvidia.com/gpu": 3,
                  "hypernode.binpack.normal-pod.enable": False, "hypernode.binpack.normal-pod.fading": 0.5},
                 (10, {"cpu": 5, "memory": 2, "nvidia.com/gpu": 3, "example.com/foo": 1}, False, 0.5),
                 id="customized"),
    pytest.param({"weight": -1, "hypernode.binpack.cpu": -2, "hypernode.binpack.memory": "x",
                  "hypernode.binpack.normal-pod.fading": -0.1, "hypernode.binpack.normal-pod.enable": "maybe"},
                 (1, {"cpu": 1, "memory": 1}, True, 0.8), id="invalid-fall-back-to-defaults"),
    pytest.param({"weight": "3", "hypernode.binpack.normal-pod.fading": 0, "hypernode.binpack.cpu": 1.5},
                 (3, {"cpu": 1, "memory": 1}, True, 0.0), id="strings-and-zero-fading"),
]


@pytest.mark.parametrize(("args", "want"), OPTIONS)
def test_arguments(args: dict[str, Any], want: tuple[Any, ...]) -> None:
    o = nta.parse_options(args)
    assert (o.weight, o.resources, o.normal_pod_enable, o.fading) == want


@pytest.mark.parametrize(("tiers", "fading", "want"), [
    pytest.param((1, 2, 3), 0.8, {1: 1.0, 2: 0.8, 3: 0.8 ** 2}, id="fading-0.8"),
    pytest.param((1, 3), 0.5, {1: 1.0, 2: 0.5, 3: 0.25}, id="every-tier-between"),
    pytest.param((1, 2), 0.0, {1: 1.0, 2: 0.0}, id="zero-fading-only-tier-1"),
    pytest.param((), 0.8, {}, id="no-tiers"),
])
def test_fading_weights(tiers: tuple[int, ...], fading: float, want: dict[int, float]) -> None:
    assert nta.fading_weights(tiers, fading) == pytest.approx(want)


def hypernode(name: str, tier: int, *members: str, children: tuple[str, ...] = ()) -> dict[str, Any]:
    ms = [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]
    ms += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    return {"metadata": {"name": name}, "spec": {"tier": tier, "members": ms}}


# Volcano's TestBatchNodeOrderFn fixture: s3..s6 (tier 1) under s1, s2 (tier 2) under s0 (tier 3)
TREE = [hypernode(f"s{i}", 1, f"s{i}-n1", f"s{i}-n2") for i in (3, 4, 5, 6)] + [
    hypernode("s1", 2, children=("s3", "s4")), hypernode("s2", 2, children=("s5", "s6")),
    hypernode("s0", 3, children=("s1", "s2"))]
NODES = [node(f"s3-n{k}").alloc("2", "4G", 10) for k in (1, 2)] + [
    node(f"s4-n{k}").alloc("4", "4G", 10) for k in (1, 2)] + [
    node(f"s5-n{k}").alloc("2", "8G", 10) for k in (1, 2)] + [
    node(f"s6-n{k}").alloc("4", "8G", 10) for k in (1, 2)]


def session(pods: list[Any], podgroups: list[Any], args: dict[str, Any] | None = None,
            nodes: list[Any] = NODES) -> Session:  # type: ignore[assignment]
    registry = in_tree_registry()
    conf = tiers_conf("allocate", [{"name": "network-topology-aware", "arguments": args or {}}])
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=_objs(pods), nodes=_objs(nodes), podgroups=_objs(podgroups),
                           queues=_objs([queue("q1")]), hypernodes=TREE)
    return Session(snap, c, registry, uid="s")


def scores(ssn: Session, task_name: str) -> dict[str, float]:
    plugin = ssn.plugins["network-topology-aware"]
    task = next(t for t in ssn.snapshot.tasks.values() if t.name == task_name)
    cands = np.arange(len(ssn.arrays))
    got = plugin.node_order(task, ssn.arrays, cands)
    return {ssn.arrays.names[i]: round(float(got[i]), 1) for i in cands}


def _expected_normal(request: tuple[float, float], weights: dict[str, int]) -> dict[str, float]:
    """The formula in plain Python: per tier, Σ w·(used+req)/alloc / Σ w of the HyperNode holding the node."""
    alloc = {"s3": (4, 8), "s4": (8, 8), "s5": (4, 16), "s6": (8, 16), "s1": (12, 16), "s2": (12, 32),
             "s0": (24, 48), "top": (24, 48)}
    parent = {"s3": "s1", "s4": "s1", "s5": "s2", "s6": "s2"}
    tw = {1: 1.0, 2: 0.8, 3: 0.64, 4: 0.512}  # tier 4: the virtual cluster-top HyperNode
    out = {}
    for rack in ("s3", "s4", "s5", "s6"):
        total = 0.0
        for tier, h in ((1, rack), (2, parent[rack]), (3, "s0"), (4, "top")):
            cpu, mem = alloc[h]
            s = (weights["cpu"] * request[0] / cpu + weights["memory"] * request[1] / mem) / (
                weights["cpu"] + weights["memory"])
            total += tw[tier] * s
        for k in (1, 2):
            out[f"{rack}-n{k}"] = round(100 * total / sum(tw.values()), 1)
    return out


def test_unconstrained_pod_packs_into_the_fullest_hypernodes_tier_by_tier() -> None:
    ssn = session([pod("p1", "ns1").req("2", "4G").group("pg1")], [podgroup("pg1", "ns1").queue("q1").min(1)])
    got = scores(ssn, "p1")
    assert got == _expected_normal((2, 4), {"cpu": 1, "memory": 1})
    # Volcano's TestBatchNodeOrderFn numbers for this fixture
    assert [got[k] for k in ("s3-n1", "s4-n1", "s5-n1", "s6-n1")] == [25.8, 21.6, 19.9, 15.7]
    assert got["s3-n1"] > got["s4-n1"] > got["s5-n1"] > got["s6-n1"]  # the smallest rack first


def test_customized_weights_scale_the_score() -> None:
    ssn = session([pod("p1", "ns1").req("2", "4G").group("pg1")], [podgroup("pg1", "ns1").queue("q1").min(1)],
                  {"weight": 2, "hypernode.binpack.cpu": 3})
    base = _expected_normal((2, 4), {"cpu": 3, "memory": 1})
    assert scores(ssn, "p1") == {k: pytest.approx(2 * v, abs=0.2) for k, v in base.items()}


def test_normal_pod_binpacking_can_be_switched_off() -> None:
    ssn = session([pod("p1", "ns1").req("2", "4G").group("pg1")], [podgroup("pg1", "ns1").queue("q1").min(1)],
                  {"hypernode.binpack.normal-pod.enable": False})
    assert set(scores(ssn, "p1").values()) == {0.0}


def test_a_full_hypernode_scores_zero_for_its_tier() -> None:
    # s3 is full (both nodes run a 2-cpu pod): its tier-1 score is 0, the pod prefers racks with room
    busy = [pod(f"b{k}", "ns1").req("2", "1G").on(f"s3-n{k}") for k in (1, 2)]
    ssn = session([pod("p1", "ns1").req("2", "4G").group("pg1"), *busy],
                  [podgroup("pg1", "ns1").queue("q1").min(1)])
    got = scores(ssn, "p1")
    assert got["s3-n1"] < got["s4-n1"]


def _constrained(allocated: str = "", running: dict[str, str] | None = None) -> Session:
    pg = podgroup("pg1", "ns1").queue("q1").min(3)
    pg.obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 3}
    if allocated:
        pg.annotate(**{hn.ALLOCATED_HYPERNODE_ANNOTATION: allocated})
    pods = [pod("p0", "ns1").req("1", "1G").group("pg1")]
    for name, where in (running or {}).items():
        pods.append(pod(name, "ns1").req("1", "1G").group("pg1").on(where))
    return session(pods, [pg])


# Volcano TestNetworkTopologyAwareNodeScore_Hard: (maxTier - LCA tier) / (maxTier - minTier) with the cluster top
# (tier 4) as maxTier, 1 inside the job's HyperNode, + the share of the job's tasks under the node's HyperNode for
# ties at the top
LCA_CASES = [
    pytest.param("", {}, {"s3-n1": 0.0, "s6-n1": 0.0}, id="first-scheduling-all-zero"),
    pytest.param("s3", {"p1": "s3-n1"}, {"s3-n1": 100 * (1 + 0.5), "s3-n2": 150.0, "s4-n1": 100 * 2 / 3,
                                         "s5-n1": 100 / 3, "s6-n2": 100 / 3}, id="rescheduled-lca-tier"),
    pytest.param("s1", {"p1": "s3-n1", "p2": "s4-n1"}, {"s3-n1": 100 * (2 / 3 + 1 / 3), "s4-n2": 100.0,
                                                         "s5-n1": 100 / 3},
                 id="rescheduled-spread-job-tier-2"),
]


@pytest.mark.parametrize(("allocated", "running", "want"), LCA_CASES)
def test_constrained_job_scores_by_lca_tier(allocated: str, running: dict[str, str],
                                            want: dict[str, float]) -> None:
    got = scores(_constrained(allocated, running), "p0")
    for k, v in want.items():
        assert got[k] == pytest.approx(round(v, 1), abs=0.1), (k, got)


def test_hypernode_order_prefers_the_fullest_that_fits() -> None:
    busy = [pod("b1", "ns1").req("2", "1G").on("s4-n1")]
    ssn = session([pod("p1", "ns1").req("2", "4G").group("pg1"), *busy], [podgroup("pg1", "ns1").queue("q1").min(1)])
    plugin = ssn.plugins["network-topology-aware"]
    job = ssn.jobs["ns1/pg1"]
    got = plugin.hypernode_order(job, ["s3", "s4", "s5", "s6"])
    # s3: cpu 2/4, mem 4/8 → 0.5; s4: cpu (2+2)/8, mem 5/8 → 0.5625 (the busy pod counts); s5: .5, .25
    assert got.tolist() == pytest.approx([50.0, 56.25, 37.5, 25.0])


def test_hypernode_gradient_prefilters_by_min_resources() -> None:
    pg = podgroup("pg1", "ns1").queue("q1").min(1).min_resources(cpu="5")
    pg.obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    ssn = session([pod("p1", "ns1").req("1", "1G").group("pg1")], [pg])
    plugin = ssn.plugins["network-topology-aware"]
    assert plugin.hypernode_gradient(ssn.jobs["ns1/pg1"]) == [["s4", "s6"], ["s1", "s2"]]  # s3, s5: 4 cpu


def test_unconstrained_job_has_no_gradient() -> None:
    ssn = session([pod("p1", "ns1").req("1", "1G").group("pg1")], [podgroup("pg1", "ns1").queue("q1").min(1)])
    assert ssn.plugins["network-topology-aware"].hypernode_gradient(ssn.jobs["ns1/pg1"]) is None


def test_plugin_implements_its_hooks() -> None:
    from lahar.scheduler.framework import hooks
    p = nta.NetworkTopologyAware({})
    for proto in (hooks.SessionOpen, hooks.EventHandler, hooks.NodeOrder, hooks.HyperNodeGradient,
                  hooks.HyperNodeOrder):
        assert isinstance(p, proto)


@pytest.mark.parametrize(("hypernodes", "shortcut"), [
    pytest.param([], True, id="no-hypernodes-cluster-top-alone"),
    pytest.param([hypernode("r1", 1, *(f"n{k}" for k in range(6)))], False, id="one-rack-two-tiers-general-path")])
@pytest.mark.parametrize("request_", [("1", "1G"), ("3", "7G"), ("250m", "100M"), ("9", "1G")])
def test_one_path_shortcut_scores_to_the_bit_as_the_general_path(hypernodes: list[dict[str, Any]], shortcut: bool,
                                                                 request_: tuple[str, str]) -> None:
    # every node under the same HyperNodes: the score is worked out once for that HyperNode, not per HyperNode
    # and path; it must equal the general path's to the bit, with the nodes partly used
    nodes = [node(f"n{k}").alloc(str(2 + k), f"{4 + k}G", 10) for k in range(6)]
    busy = [pod(f"b{k}", "ns1").req(f"{k}", f"{k}G").on(f"n{k}") for k in range(1, 5)]
    registry = in_tree_registry()
    conf = tiers_conf("allocate", [{"name": "network-topology-aware"}])
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=_objs([pod("p1", "ns1").req(*request_).group("pg1"), *busy]), nodes=_objs(nodes),
                           podgroups=_objs([podgroup("pg1", "ns1").queue("q1").min(1)]),
                           queues=_objs([queue("q1")]), hypernodes=hypernodes)
    ssn = Session(snap, c, registry, uid="s")
    plugin = ssn.plugins["network-topology-aware"]
    assert (plugin.one_path >= 0) is shortcut
    task = next(t for t in ssn.snapshot.tasks.values() if t.name == "p1")
    cands = np.arange(len(ssn.arrays))
    fast = plugin.node_order(task, ssn.arrays, cands)
    plugin.one_path = -1  # the general path
    slow = plugin.node_order(task, ssn.arrays, cands)
    assert fast.tobytes() == slow.tobytes()
    assert len(set(fast.tolist())) == 1
