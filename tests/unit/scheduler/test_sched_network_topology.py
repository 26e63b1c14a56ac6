"""allocate with HyperNodes: Volcano's allocate_test.go network-topology cases as data (hard and soft mode,
highestTierAllowed, rescheduled jobs that keep their HyperNode), the pending reason of a hard-mode gang, the
allocated-HyperNode annotation, and Hypothesis invariants (a hard gang never spans two HyperNodes of its tier)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import hypernodes as hn
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, priority_class, queue, tiers_conf
from tests.builders import objs as _objs

CONF = tiers_conf("allocate", ["gang", "proportion", "predicates", "nodeorder", "network-topology-aware"])
CONF_WITHOUT_PLUGIN = tiers_conf("allocate", ["gang", "proportion", "predicates", "nodeorder"])


def hypernode(name: str, tier: int, *members: str, children: tuple[str, ...] = ()) -> dict[str, Any]:
    ms = [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]
    ms += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": ms}}


def topo(pg: podgroup, mode: str, tier: int | None = None, allocated: str = "") -> podgroup:
    nt: dict[str, Any] = {"mode": mode}
    if tier is not None:
        nt["highestTierAllowed"] = tier
    pg.obj["spec"]["networkTopology"] = nt
    if allocated:
        pg.annotate(**{hn.ALLOCATED_HYPERNODE_ANNOTATION: allocated})
    return pg


def run(*, pods: list[Any], nodes: list[Any], podgroups: list[Any], hypernodes: list[dict[str, Any]],
        queues: list[Any] = (), conf: str = CONF, priority_classes: list[Any] = ()) -> Decisions:  # type: ignore[assignment]
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=_objs(list(pods)), nodes=_objs(list(nodes)), podgroups=_objs(list(podgroups)),
                           queues=_objs(list(queues or [queue("q1")])), hypernodes=hypernodes,
                           priority_classes=_objs(list(priority_classes)))
    return run_session(snap, c, registry=registry, uid="ssn-1")


def n(name: str, cpu: str = "2") -> node:
    return node(name).alloc(cpu, "4Gi", 10)


# Volcano's two-tier fixture: s0 = {s0-n1, s0-n2}, s1 = {s1-n3, s1-n4} at tier 1 under s2 at tier 2
TWO_TIER = [hypernode("s0", 1, "s0-n1", "s0-n2"), hypernode("s1", 1, "s1-n3", "s1-n4"),
            hypernode("s2", 2, children=("s0", "s1"))]
FOUR_NODES = [n("s0-n1"), n("s0-n2"), n("s1-n3"), n("s1-n4")]
# three tiers: s3..s6 (tier 1, two nodes each) under s1 = {s3, s4}, s2 = {s5, s6} (tier 2) under s0 (tier 3)
THREE_TIER = [hypernode(f"s{i}", 1, f"s{i}-n1", f"s{i}-n2") for i in (3, 4, 5, 6)] + [
    hypernode("s1", 2, children=("s3", "s4")), hypernode("s2", 2, children=("s5", "s6")),
    hypernode("s0", 3, children=("s1", "s2"))]
EIGHT_NODES = [n(f"s{i}-n{k}") for i in (3, 4, 5, 6) for k in (1, 2)]


def gang(count: int, *, running: dict[int, str] | None = None, cpu: str = "2") -> list[pod]:
    """`count` pods of pg1 (roles master, worker, worker..., as Volcano's cases, so the role cache does not skip);
    `running` maps a pod index to the node it already runs on."""
    out = []
    for i in range(count):
        p = pod(f"p{i + 1}").req(cpu, "4G").group("pg1").role("master" if i == 0 else "worker")
        if running and i in running:
            p.on(running[i]).phase("Running")
        out.append(p)
    return out


CASES: list[Any] = [
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "soft")], pods=gang(3),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 3, None, id="soft-enough-resources"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "soft")], pods=gang(3),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 3, None, id="soft-min-available-below-replicas"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(1), "soft", 1)],
                      pods=[pod("p1").req("2", "4G").group("pg1").selector(nodeRole="master")],
                      nodes=[n("s0-n1"), n("s1-n2").label(nodeRole="master")],
                      hypernodes=[hypernode("s0", 0, "s0-n1"), hypernode("s1", 0, "s1-n2")]),
                 1, {"c1/p1": "s1-n2"}, id="soft-two-hypernodes-affinity"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "soft", 1, allocated="s0")],
                      pods=gang(3, running={0: "s0-n1", 1: "s0-n2"}), nodes=FOUR_NODES, hypernodes=TWO_TIER),
                 1, None, id="soft-rescheduled-crosses-tier-when-needed"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "soft", 1, allocated="s3")],
                      pods=gang(3, running={0: "s3-n1", 1: "s3-n2"}), nodes=EIGHT_NODES, hypernodes=THREE_TIER),
                 1, None, id="soft-rescheduled-three-tiers"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 1)], pods=gang(3),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 0, None, id="hard-cannot-cross-highest-tier"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 2)], pods=gang(3),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 3, None, id="hard-highest-tier-not-reached"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1)], pods=gang(2),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 2, None, id="hard-multi-hypernodes-available"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1)], pods=gang(3),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 2, None, id="hard-min-available-below-replicas"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(1), "hard", 1)],
                      pods=[pod("p1").req("2", "4G").group("pg1").selector(nodeRole="master")],
                      nodes=[n("s0-n1"), n("s1-n2").label(nodeRole="master")],
                      hypernodes=[hypernode("s0", 0, "s0-n1"), hypernode("s1", 0, "s1-n2")]),
                 1, {"c1/p1": "s1-n2"}, id="hard-two-hypernodes-affinity"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 2, allocated="s0")],
                      pods=gang(3, running={0: "s0-n1", 1: "s0-n2"}), nodes=FOUR_NODES, hypernodes=TWO_TIER),
                 1, None, id="hard-rescheduled-within-highest-tier"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 2, allocated="s0")],
                      pods=gang(3, running={0: "s0-n1", 1: "s0-n2"}), nodes=FOUR_NODES, hypernodes=TWO_TIER),
                 1, None, id="hard-rescheduled-min-equals-replicas"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 2, allocated="s3")],
                      pods=gang(3, running={0: "s3-n1", 1: "s3-n2"}), nodes=EIGHT_NODES, hypernodes=THREE_TIER),
                 1, {"c1/p3": ("s4-n1", "s4-n2")}, id="hard-rescheduled-three-tiers-stays-under-tier-2"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1, allocated="s0")],
                      pods=gang(3, running={0: "s0-n1", 1: "s0-n2"}), nodes=FOUR_NODES, hypernodes=TWO_TIER),
                 0, None, id="hard-rescheduled-cannot-cross-highest-tier"),
    pytest.param(dict(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 1, allocated="s3")],
                      pods=gang(3, running={0: "s3-n1", 1: "s3-n2"}), nodes=EIGHT_NODES, hypernodes=THREE_TIER),
                 0, None, id="hard-rescheduled-three-tiers-cannot-cross"),
]


@pytest.mark.parametrize(("world", "binds", "where"), CASES)
def test_volcano_allocate_network_topology_cases(world: dict[str, Any], binds: int,
                                                 where: dict[str, Any] | None) -> None:
    d = run(**world)
    got = d.bind_map()
    assert len(got) == binds, got
    for key, want in (where or {}).items():
        assert got[key] in (want if isinstance(want, tuple) else (want,)), got


def test_hard_gang_lands_in_one_rack_even_when_the_cluster_has_room_elsewhere() -> None:
    # three 2-cpu nodes free in s0 and s1 each, but one node of s0 busy: the gang of 2 goes to one rack
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1)], pods=gang(2),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    racks = {name.split("-")[0] for name in d.bind_map().values()}
    assert len(racks) == 1


def test_without_the_plugin_the_constraint_is_not_enforced_as_in_volcano() -> None:
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 1)], pods=gang(3),
            nodes=FOUR_NODES, hypernodes=TWO_TIER, conf=CONF_WITHOUT_PLUGIN)
    assert len(d.bind_map()) == 3


def test_hard_pending_reason_names_the_tier_and_why() -> None:
    # tier 1: s0 has 4 free cpu but one node is taken by another pod; s1 has 2 free cpu; the gang wants 3 × 2 cpu
    other = pod("busy", "other").req("2", "1G").on("s0-n1").phase("Running")
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "hard", 1)], pods=[*gang(3), other],
            nodes=[n("s0-n1"), n("s0-n2"), n("s0-n5"), n("s1-n3"), n("s1-n4")],
            hypernodes=[hypernode("s0", 1, "s0-n1", "s0-n2", "s0-n5"), hypernode("s1", 1, "s1-n3", "s1-n4"),
                        hypernode("s2", 2, children=("s0", "s1"))])
    assert d.binds == []
    events = d.podgroups["c1/pg1"].events
    msg = next(m for _, reason, m in events if reason == "Unschedulable")
    assert "hard network topology, highestTierAllowed 1: 0/2 tier-1 hypernodes fit: 2 have too few free cpu" in msg
    conditions = {c.name: c.message for c in d.pod_conditions}
    assert "0/2 tier-1 hypernodes fit" in conditions["p1"]


def test_hard_pending_reason_counts_each_cause() -> None:
    gpu = "nvidia.com/gpu"
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1)],
            pods=[pod("p1").req("2", "4G", **{gpu: "4"}).group("pg1").role("a"),
                  pod("p2").req("2", "4G", **{gpu: "4"}).group("pg1").role("b")],
            nodes=[node("a1").alloc("2", "4Gi", 10, **{gpu: "4"}), n("a2"),
                   node("b1").alloc("3", "8Gi", 10, **{gpu: "8"}), node("b2").alloc("3", "8Gi", 10),
                   n("c1"), n("c2")],
            hypernodes=[hypernode("ra", 1, "a1", "a2"), hypernode("rb", 1, "b1", "b2"),
                        hypernode("rc", 1, "c1", "c2")])
    msg = d.pod_conditions[0].message
    assert "0/3 tier-1 hypernodes fit: 2 have too few free nvidia.com/gpu, " in msg  # ra (4 of 8), rc (none)
    assert "1 has too few nodes with room for a task" in msg  # rb: 8 GPUs and 6 cpu, but one node has the GPUs


def test_allocated_hypernode_is_recorded_on_the_podgroup() -> None:
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 2)], pods=gang(2),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    assert len(d.binds) == 2
    ann = d.podgroup_annotations["c1/pg1"][hn.ALLOCATED_HYPERNODE_ANNOTATION]
    assert ann in ("s0", "s1")  # the lowest tier that fits, not the tier-2 s2
    assert {b.node.split("-")[0] for b in d.binds} == {ann}


def test_restarted_tasks_go_back_to_the_recorded_domain() -> None:
    # the PodGroup says s1; both racks have room; the restarted pods go back to s1
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", 1, allocated="s1")], pods=gang(2),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    assert sorted(d.bind_map().values()) == ["s1-n3", "s1-n4"]
    assert "c1/pg1" not in d.podgroup_annotations  # unchanged: nothing to write


def test_soft_falls_back_to_any_nodes() -> None:
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(3), "soft", 1)], pods=gang(3),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    assert len(d.binds) == 3


def test_soft_prefers_the_lowest_tier_that_fits() -> None:
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "soft")], pods=gang(2),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    assert len({b.node.split("-")[0] for b in d.binds}) == 1


# --- invariants ------------------------------------------------------------------------------------------------

@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    racks = draw(st.integers(2, 4))
    per_rack = draw(st.integers(1, 3))
    nodes, hns = [], []
    for r in range(racks):
        names = [f"r{r}-n{k}" for k in range(per_rack)]
        nodes += [node(x).alloc(str(draw(st.integers(1, 4))), "8Gi", 10) for x in names]
        hns.append(hypernode(f"r{r}", 1, *names))
    hns.append(hypernode("spine", 2, children=tuple(f"r{r}" for r in range(racks))))
    pgs, pods = [], []
    for j in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 4))
        mode = draw(st.sampled_from(["hard", "soft", "none"]))
        pg = podgroup(f"pg{j}").queue("q1").min(size)
        if mode != "none":
            topo(pg, mode, draw(st.sampled_from([1, 2])) if mode == "hard" else None)
        pgs.append(pg)
        pods += [pod(f"pg{j}-p{i}").req(str(draw(st.integers(1, 2))), "1G").group(f"pg{j}").role(f"r{i}")
                 for i in range(size)]
    return dict(podgroups=pgs, pods=pods, nodes=nodes, hypernodes=hns)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_hard_gang_never_spans_two_hypernodes_of_its_tier_and_nodes_are_not_overcommitted(
        world: dict[str, Any]) -> None:
    d = run(**world)
    by_job: dict[str, list[str]] = {}
    for b in d.binds:
        by_job.setdefault(b.job, []).append(b.node)
    cpu: Counter[str] = Counter()
    for p in world["pods"]:
        name = f"c1/{p.obj['metadata']['name']}"
        if name in d.bind_map():
            cpu[d.bind_map()[name]] += int(p.obj["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    capacity = {x.obj["metadata"]["name"]: int(x.obj["status"]["allocatable"]["cpu"]) for x in world["nodes"]}
    assert all(cpu[k] <= capacity[k] for k in cpu)  # no node double-counted
    for pg in world["podgroups"]:
        uid = f"c1/{pg.obj['metadata']['name']}"
        placed = by_job.get(uid, [])
        assert len(placed) in (0, pg.obj["spec"]["minMember"])  # whole gang or nothing
        nt = pg.obj["spec"].get("networkTopology")
        if placed and nt and nt["mode"] == "hard" and nt["highestTierAllowed"] == 1:
            assert len({x.split("-")[0] for x in placed}) == 1, placed


def test_committed_hypernode_lands_on_the_podgroup_and_restarted_pods_return_to_it() -> None:
    """Through the cluster client: the session writes the annotation; a pod recreated later (RestartPod keeps the
    PodGroup) goes back under the recorded HyperNode although the other rack has more room."""
    from lahar.kube.apiserver.memory import MemoryClient
    from lahar.scheduler.session import run_once

    client = MemoryClient.with_crds()
    reg = client.registry
    rt = {k: reg.get(*v) for k, v in {
        "nodes": ("", "v1", "nodes"), "pods": ("", "v1", "pods"),
        "podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
        "queues": ("scheduling.volcano.sh", "v1beta1", "queues"),
        "hypernodes": ("topology.volcano.sh", "v1alpha1", "hypernodes")}.items()}
    client.create(reg.get("", "v1", "namespaces"), {"metadata": {"name": "c1"}})
    for x in FOUR_NODES:
        client.create(rt["nodes"], x.build())
    for h in TWO_TIER:
        client.create(rt["hypernodes"], h)
    client.create(rt["queues"], queue("q1").build())
    client.create(rt["podgroups"], topo(podgroup("pg1").queue("q1").min(2), "hard", 1).build(), namespace="c1")
    for p in gang(2, cpu="1"):
        client.create(rt["pods"], p.build(), namespace="c1")
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    decisions, result = run_once(client, c, registry=registry)
    assert len(result.bound) == 2
    pg = client.get(rt["podgroups"], "pg1", namespace="c1")
    where = pg["metadata"]["annotations"][hn.ALLOCATED_HYPERNODE_ANNOTATION]
    assert {b.node.split("-")[0] for b in decisions.binds} == {where}
    # p2 fails and is recreated pending; the other rack is empty, the recorded one has room for it
    client.delete(rt["pods"], "p2", namespace="c1", grace_period_seconds=0)
    client.create(rt["pods"], gang(2, cpu="1")[1].build(), namespace="c1")
    decisions, _ = run_once(client, c, registry=registry)
    assert [b.node.split("-")[0] for b in decisions.binds] == [where]


@pytest.mark.parametrize(("hypernodes", "tier", "binds", "reason"), [
    pytest.param(TWO_TIER, 0, 0, "hard network topology, highestTierAllowed 0: no hypernode of an allowed tier",
                 id="no-hypernode-at-or-below-the-tier"),
    pytest.param([], 1, 2, "", id="no-hypernodes-the-cluster-top-holds-every-node"),
])
def test_hard_mode_edges(hypernodes: list[dict[str, Any]], tier: int, binds: int, reason: str) -> None:
    d = run(podgroups=[topo(podgroup("pg1").queue("q1").min(2), "hard", tier)], pods=gang(2),
            nodes=FOUR_NODES, hypernodes=hypernodes)
    assert len(d.binds) == binds
    if reason:
        assert reason in d.pod_conditions[0].message


@pytest.mark.parametrize(("constrained", "evictions"), [
    pytest.param(False, 1, id="plain-job-preempts"),
    pytest.param(True, 0, id="networktopology-job-does-not-preempt"),
])
def test_preempt_skips_jobs_with_a_network_topology(constrained: bool, evictions: int) -> None:
    # a running low-priority pod fills the only node; a high-priority starving job of the same queue wants it
    low = [pod(f"low{i}").req("1", "1G").group("pglow").on("s0-n1") for i in (1, 2)]
    high = pod("high").req("1", "1G").group("pghigh")
    pghigh = podgroup("pghigh").queue("q1").min(1).priority_class("high")
    if constrained:
        topo(pghigh, "hard", 1)
    conf = tiers_conf("allocate, preempt", ["priority", "gang", "conformance"],
                      ["predicates", "proportion", "nodeorder", "network-topology-aware"])
    d = run(podgroups=[podgroup("pglow").queue("q1").min(1).phase("Running").priority_class("low"), pghigh],
            pods=[*low, high], nodes=[n("s0-n1")], hypernodes=[hypernode("s0", 1, "s0-n1")], conf=conf,
            priority_classes=[priority_class("low", 10), priority_class("high", 1000)])
    assert len(d.evictions) == evictions


PRE_FILTERED = [
    pytest.param({"cpu": "6", "memory": "12G"}, 3, "0/2 tier-1 hypernodes fit: 2 have too few free cpu",
                 id="gang-too-big-for-every-rack"),
    pytest.param({"cpu": "6", "memory": "12G"}, 2,
                 "0/2 tier-1 hypernodes fit: 2 have too few free resources for the job's minResources",
                 id="min-resources-above-the-missing-tasks"),
    pytest.param(None, 3, "0/2 tier-1 hypernodes fit: 2 have too few free cpu", id="no-min-resources"),
]


@pytest.mark.parametrize(("min_resources", "min_member", "want"), PRE_FILTERED)
def test_hard_pending_reason_counts_hypernodes_the_min_resources_prefilter_dropped(
        min_resources: dict[str, str] | None, min_member: int, want: str) -> None:
    # racks of 2 × 2 cpu; the gang of 3 × 2 cpu fits none: the gradient's minResources pre-filter drops both racks,
    # the event must still say per tier why (it said "no hypernode of an allowed tier")
    pg = topo(podgroup("pg1").queue("q1").min(min_member), "hard", 1)
    if min_resources:
        pg.obj["spec"]["minResources"] = min_resources
    d = run(podgroups=[pg], pods=gang(3), nodes=FOUR_NODES, hypernodes=TWO_TIER)
    assert d.binds == []
    msg = d.pod_conditions[0].message
    assert f"hard network topology, highestTierAllowed 1: {want}" in msg, msg
