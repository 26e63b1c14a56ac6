"""PodGroup subGroupPolicy: the grouping rules as tables (labelSelector, matchLabelKeys, minSubGroups), Volcano's
allocate_test.go subgroup cases (TestAllocateWithPartitionPolicyNetworkTopology) as data, and Hypothesis
invariants: a subgroup never spans two HyperNodes of its allowed tier, and no node holds more than it has."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.actions import _subgroups
from lahar.scheduler.framework import hypernodes as hn
from lahar.scheduler.framework import subgroups as sg
from tests.builders import pod, podgroup
from tests.unit.scheduler.test_sched_network_topology import (
    EIGHT_NODES,
    FOUR_NODES,
    THREE_TIER,
    TWO_TIER,
    hypernode,
    n,
    run,
    topo,
)

SPEC, INSTANCE = "volcano.sh/task-spec", "volcano.sh/task-instance"

# --- grouping rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "labels", "want"), [
    pytest.param({"matchLabelKeys": [SPEC]}, {SPEC: "worker"}, ("worker",), id="key-present"),
    pytest.param({"matchLabelKeys": [SPEC]}, {}, None, id="key-missing"),
    pytest.param({"matchLabelKeys": [SPEC]}, {SPEC: ""}, None, id="key-empty-value"),
    pytest.param({"matchLabelKeys": [SPEC]}, None, None, id="pod-without-labels"),
    pytest.param({"matchLabelKeys": ["a", "b"]}, {"a": "1", "b": "2"}, ("1", "2"), id="two-keys-in-order"),
    pytest.param({"matchLabelKeys": ["a", "b"]}, {"a": "1"}, None, id="one-of-two-keys-missing"),
    pytest.param({}, {"a": "1"}, (), id="no-keys-default-group"),
    pytest.param({"labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["a"]},
                 {"app": "y", "a": "1"}, None, id="selector-does-not-match"),
    pytest.param({"labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["a"]},
                 {"app": "x", "a": "1"}, ("1",), id="selector-matches"),
    pytest.param({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
                 {"app": "x"}, (), id="selector-expression-no-keys"),
    pytest.param({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}},
                 {"app": "x"}, None, id="invalid-selector-matches-nothing"),
])
def test_match_values(policy: dict[str, Any], labels: dict[str, str] | None, want: tuple[str, ...] | None) -> None:
    assert sg.match_values(policy, labels) == want


@pytest.mark.parametrize(("policies", "pods", "want"), [
    pytest.param([{"name": "tp", "matchLabelKeys": ["rank"], "subGroupSize": 2}],
                 [("a", {"rank": "0"}), ("b", {"rank": "0"}), ("c", {"rank": "1"}), ("d", {})],
                 {"tp-0": (2, ["a", "b"]), "tp-1": (2, ["c"])}, id="equal-values-one-subgroup"),
    pytest.param([{"name": "p1", "matchLabelKeys": [SPEC]}, {"name": "p2", "matchLabelKeys": [INSTANCE]}],
                 [("a", {SPEC: "m", INSTANCE: "w"}), ("b", {INSTANCE: "w"})],
                 {"p1-m": (1, ["a"]), "p2-w": (1, ["b"])}, id="first-matching-policy-wins"),
    pytest.param([{"name": "all"}], [("a", {"x": "1"})], {}, id="policy-without-keys-takes-no-pod"),
    pytest.param([{"name": "tp", "matchLabelKeys": ["r"], "subGroupSize": 0}], [("a", {"r": "0"})],
                 {"tp-0": (1, ["a"])}, id="size-below-one-is-one"),
])
def test_partition(policies: list[dict[str, Any]], pods: list[tuple[str, dict[str, str]]],
                   want: dict[str, tuple[int, list[str]]]) -> None:
    got = sg.partition(policies, pods)
    assert {k: (g.size, g.members) for k, g in got.items()} == want


@pytest.mark.parametrize(("policy", "want"), [
    pytest.param({"name": "a", "matchLabelKeys": ["r"], "subGroupSize": "six"}, (1, None), id="size-not-a-number"),
    pytest.param({"name": "a", "matchLabelKeys": ["r"], "networkTopology": "hard"}, (1, None),
                 id="topology-not-an-object"),
    pytest.param({"name": "a", "matchLabelKeys": "r"}, None, id="keys-not-a-list"),
    pytest.param({"name": "a", "matchLabelKeys": ["r"], "labelSelector": "app=x"}, None, id="selector-not-an-object"),
])
def test_malformed_policy_reads_as_defaults_never_crashes(policy: dict[str, Any],
                                                          want: tuple[int, Any] | None) -> None:
    got = sg.partition([policy], [("p", {"r": "0", "app": "x"})])
    assert ((got["a-0"].size, got["a-0"].network_topology) if got else None) == want
    assert sg.minimums([{"name": "a", "minSubGroups": "two"}]) == {"a": 0}


@pytest.mark.parametrize(("counts", "mins", "want"), [
    pytest.param({}, {"a": 0}, True, id="no-minimum"),
    pytest.param({"a": 1}, {"a": 2}, False, id="below-minimum"),
    pytest.param({"a": 2, "b": 0}, {"a": 2, "b": 1}, False, id="one-policy-short"),
    pytest.param({"a": 2, "b": 1}, {"a": 2, "b": 1}, True, id="all-met"),
])
def test_ready(counts: dict[str, int], mins: dict[str, int], want: bool) -> None:
    assert sg.ready(counts, mins) is want


def test_order_puts_the_smallest_set_meeting_min_subgroups_first_largest_first() -> None:
    groups = sg.partition([{"name": "t1", "matchLabelKeys": [SPEC], "minSubGroups": 1},
                           {"name": "t2", "matchLabelKeys": [INSTANCE], "subGroupSize": 2, "minSubGroups": 1}],
                          [("p1", {SPEC: "m"}), ("p2", {SPEC: "m2"}), ("p3", {INSTANCE: "w"}),
                           ("p4", {INSTANCE: "w"}), ("p5", {INSTANCE: "w2"}), ("p6", {INSTANCE: "w2"})])
    pending = {u: None for u in ("p1", "p2", "p3", "p4", "p5", "p6")}
    assert _subgroups.order(groups, pending, {"t1": 1, "t2": 1}) == ["t2-w", "t1-m", "t2-w2", "t1-m2"]


def test_subgroup_domains_within_the_job_scope_lowest_tier_first() -> None:
    tree = hn.build(THREE_TIER, [{"metadata": {"name": node.obj["metadata"]["name"]}} for node in EIGHT_NODES])
    assert _subgroups.subgroup_domains(tree, "s1", {"mode": "hard", "highestTierAllowed": 1}) == [["s3", "s4"]]
    assert _subgroups.subgroup_domains(tree, None, {"mode": "hard", "highestTierAllowed": 2}) == [
        ["s3", "s4", "s5", "s6"], ["s1", "s2"]]
    assert _subgroups.subgroup_domains(tree, "s2", {"mode": "soft", "highestTierAllowed": 1}) == [
        ["s5", "s6"], ["s2"]]
    assert _subgroups.subgroup_domains(tree, "s2", None) == [["s2"]]


# --- Volcano's allocate cases --------------------------------------------------------------------------------


def policy(name: str, key: str, mode: str = "", tier: int = 0, size: int = 1, min_groups: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "matchLabelKeys": [key], "subGroupSize": size, "minSubGroups": min_groups}
    if mode:
        out["networkTopology"] = {"mode": mode, "highestTierAllowed": tier}
    return out


def pg(min_member: int, mode: str, tier: int, *policies: dict[str, Any], allocated: str = "") -> podgroup:
    g = topo(podgroup("pg1").queue("q1").min(min_member), mode, tier, allocated=allocated)
    g.obj["spec"]["subGroupPolicy"] = list(policies)
    return g


def pods(*labels: tuple[str, str], running: dict[int, str] | None = None, mem: str = "4G") -> list[pod]:
    out = []
    for i, (key, value) in enumerate(labels):
        p = pod(f"p{i + 1}").req("2", mem).group("pg1").label(**{key: value})
        if running and i in running:
            p.on(running[i]).phase("Running")
        out.append(p)
    return out


M, W, W2 = (SPEC, "master"), (SPEC, "worker"), (INSTANCE, "worker")
# tiers 1 and 2: s0 = {s0-n1, s0-n2}, s1 = {s1-n3}, s2 = {s0, s1}
THREE_NODES_HN = [hypernode("s0", 1, "s0-n1", "s0-n2"), hypernode("s1", 1, "s1-n3"),
                  hypernode("s2", 2, children=("s0", "s1"))]
THREE_NODES = [n("s0-n1"), n("s0-n2"), n("s1-n3")]
FIVE_NODES_HN = [hypernode("s0", 1, "s0-n1", "s0-n2"), hypernode("s1", 1, "s1-n3", "s1-n4"),
                 hypernode("s2", 1, "s2-n5"), hypernode("s3", 2, children=("s0", "s1", "s2"))]
FIVE_NODES = [*FOUR_NODES, n("s2-n5")]
TIER_1_2 = [hypernode("s0", 1, "s0-n1", "s0-n2"), hypernode("s1", 1, "s1-n3", "s1-n4"),
            hypernode("s2", 2, children=("s0", "s1"))]
WORKERS = ((INSTANCE, "worker"), (INSTANCE, "worker"), (INSTANCE, "worker2"), (INSTANCE, "worker2"))

CASES: list[Any] = [
    pytest.param(dict(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "soft"))], pods=pods(M, W, W),
                      nodes=FOUR_NODES, hypernodes=TWO_TIER), 3, {}, id="job-hard-subgroup-soft-enough"),
    pytest.param(dict(podgroups=[pg(1, "hard", 1, policy("task1", SPEC, "soft"))], pods=pods(M, W),
                      nodes=FOUR_NODES, hypernodes=TIER_1_2), 2, {}, id="job-hard-subgroup-soft-min-below-replicas"),
    pytest.param(dict(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "soft"), allocated="s2")],
                      pods=pods(M, W, W, running={0: "s0-n1", 1: "s0-n2"}), nodes=FOUR_NODES, hypernodes=TWO_TIER),
                 1, {}, id="job-hard-subgroup-soft-rescheduled-min-equals-replicas"),
    pytest.param(dict(podgroups=[pg(3, "soft", 0, policy("task1", SPEC, "hard", 1, size=2),
                                    policy("task2", INSTANCE, "hard", 1))],
                      pods=pods(M, M, W2), nodes=THREE_NODES, hypernodes=THREE_NODES_HN),
                 3, {"c1/p3": "s1-n3"}, id="job-soft-subgroups-hard-enough"),
    pytest.param(dict(podgroups=[pg(1, "soft", 0, policy("task1", SPEC, "hard", 1))], pods=pods(M, W),
                      nodes=FOUR_NODES, hypernodes=TIER_1_2), 2, {}, id="job-soft-subgroup-hard-min-below-replicas"),
    pytest.param(dict(podgroups=[pg(3, "soft", 0, policy("task1", SPEC, "hard", 1))], pods=pods(M, W, W, W),
                      nodes=FOUR_NODES, hypernodes=TIER_1_2), 0, {}, id="job-soft-subgroup-hard-cannot-cross-tier"),
    pytest.param(dict(podgroups=[pg(5, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 1),
                                    policy("task2", INSTANCE, "hard", 1, 2, 2))],
                      pods=pods(M, *WORKERS, mem="4Gi"), nodes=FIVE_NODES, hypernodes=FIVE_NODES_HN),
                 5, {"c1/p1": "s2-n5"}, id="min-subgroups-met"),
    pytest.param(dict(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 1),
                                    policy("task2", INSTANCE, "hard", 1, 2, 1))],
                      pods=pods(M, *WORKERS, mem="4Gi"), nodes=THREE_NODES, hypernodes=THREE_NODES_HN),
                 3, {"c1/p1": "s1-n3"}, id="min-subgroups-met-min-member-equals-placed"),
    pytest.param(dict(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 2),
                                    policy("task2", INSTANCE, "hard", 1, 2, 1))],
                      pods=pods(M, (SPEC, "master2"), (SPEC, "master3"), (SPEC, "master4"), *WORKERS, mem="4Gi"),
                      nodes=FOUR_NODES, hypernodes=TIER_1_2), 4, {}, id="min-subgroups-met-by-part-of-the-job"),
    pytest.param(dict(podgroups=[pg(5, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 1),
                                    policy("task2", INSTANCE, "hard", 1, 2, 1))],
                      pods=pods(M, *WORKERS, mem="4Gi"), nodes=FOUR_NODES, hypernodes=TIER_1_2),
                 0, {}, id="min-member-not-met"),
    pytest.param(dict(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 1),
                                    policy("task2", INSTANCE, "hard", 1, 2, 2))],
                      pods=pods(M, *WORKERS, mem="4Gi"), nodes=FOUR_NODES, hypernodes=TIER_1_2),
                 0, {}, id="min-subgroups-not-met"),
]


@pytest.mark.parametrize(("world", "binds", "where"), CASES)
def test_volcano_allocate_subgroup_cases(world: dict[str, Any], binds: int, where: dict[str, str]) -> None:
    d = run(**world)
    got = d.bind_map()
    assert len(got) == binds, got
    for key, want in where.items():
        assert got[key] == want, got


def test_each_subgroup_lands_whole_in_one_rack() -> None:
    # 2 subgroups × 2 pods, hard tier 1 each, the job hard tier 2: one subgroup per rack, never mixed
    d = run(podgroups=[pg(4, "hard", 2, policy("tp", "rank", "hard", 1, size=2, min_groups=2))],
            pods=pods(("rank", "0"), ("rank", "0"), ("rank", "1"), ("rank", "1")),
            nodes=FOUR_NODES, hypernodes=TWO_TIER)
    got = d.bind_map()
    assert len(got) == 4
    rack = {k: v.split("-")[0] for k, v in got.items()}
    assert rack["c1/p1"] == rack["c1/p2"] != rack["c1/p3"] == rack["c1/p4"]


def test_restarted_pod_of_a_subgroup_goes_back_to_its_peers_rack() -> None:
    # rank 0 runs one pod on s0-n1; its restarted peer goes to s0 (2 free nodes), not to s1's tighter single node
    group = podgroup("pg1").queue("q1").min(2)  # no job-level networkTopology: the scope is the whole cluster
    group.obj["spec"]["subGroupPolicy"] = [policy("tp", "rank", "hard", 1, size=2, min_groups=1)]
    d = run(podgroups=[group],
            pods=pods(("rank", "0"), ("rank", "0"), running={0: "s0-n1"}),
            nodes=[n("s0-n1"), n("s0-n2"), n("s0-n5"), n("s1-n3")],
            hypernodes=[hypernode("s0", 1, "s0-n1", "s0-n2", "s0-n5"), hypernode("s1", 1, "s1-n3"),
                        hypernode("s2", 2, children=("s0", "s1"))])
    assert d.bind_map() in ({"c1/p2": "s0-n2"}, {"c1/p2": "s0-n5"})


def test_pending_reason_names_min_subgroups() -> None:
    d = run(podgroups=[pg(3, "hard", 2, policy("task1", SPEC, "hard", 1, 1, 1),
                          policy("task2", INSTANCE, "hard", 1, 2, 2))],
            pods=pods(M, *WORKERS, mem="4Gi"), nodes=FOUR_NODES, hypernodes=TIER_1_2)
    msg = d.pod_conditions[0].message
    assert "subGroupPolicy (minSubGroups: task1 1, task2 2) not satisfied" in msg
    assert "fits under no allowed hypernode" in msg


# --- invariants ----------------------------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    racks = draw(st.integers(2, 4))
    per_rack = draw(st.integers(1, 3))
    cpus = [draw(st.sampled_from(["2", "4"])) for _ in range(racks * per_rack)]
    nodes = [n(f"r{r}-n{k}", cpus[r * per_rack + k]) for r in range(racks) for k in range(per_rack)]
    tree = [hypernode(f"r{r}", 1, *(f"r{r}-n{k}" for k in range(per_rack))) for r in range(racks)]
    tree.append(hypernode("top", 2, children=tuple(f"r{r}" for r in range(racks))))
    groups = draw(st.integers(1, 4))
    size = draw(st.integers(1, 4))
    min_groups = draw(st.integers(0, groups))
    min_member = draw(st.integers(1, groups * size))
    labels = [("rank", str(g)) for g in range(groups) for _ in range(size)]
    job_mode = draw(st.sampled_from(["hard", "soft"]))
    g = pg(min_member, job_mode, 2, policy("tp", "rank", "hard", 1, size=size, min_groups=min_groups))
    caps = {nd.obj["metadata"]["name"]: int(c) for nd, c in zip(nodes, cpus, strict=True)}
    return dict(podgroups=[g], pods=pods(*labels), nodes=nodes, hypernodes=tree, size=size, min_member=min_member,
                min_groups=min_groups, cpus=caps)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_subgroup_never_split_and_no_node_double_counted(world: dict[str, Any]) -> None:
    size, min_member, min_groups, cpus = (world.pop(k) for k in ("size", "min_member", "min_groups", "cpus"))
    d = run(**world)
    got = d.bind_map()
    racks: dict[str, set[str]] = {}
    for key, node_name in got.items():
        rank = (int(key.split("/p")[1]) - 1) // size
        racks.setdefault(str(rank), set()).add(node_name.split("-")[0])
    assert all(len(r) == 1 for r in racks.values()), got  # a subgroup is never split across racks
    per_node = Counter(got.values())
    assert all(per_node[name] * 2 <= cpus[name] for name in per_node), got  # no node holds more than it has
    if got:  # the gang: all-or-nothing at minMember, and at least minSubGroups whole subgroups
        assert len(got) >= min_member
        whole = Counter((int(k.split("/p")[1]) - 1) // size for k in got)
        assert sum(1 for c in whole.values() if c == size) >= min_groups


def test_racks_too_small_for_a_subgroup_are_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 racks of one 2-cpu node, a subgroup of 2 × 2 cpu: no rack can hold it, so no placement is even tried (a
    # 256-node cluster with 12 such jobs went from 4.9 s to 1.3 s a session)
    from lahar.scheduler.actions.allocate import Allocate

    calls = Counter[str]()
    original = Allocate.place_tasks

    def counting(self: Allocate, *args: Any, **kwargs: Any) -> Any:
        calls["place"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Allocate, "place_tasks", counting)
    group = podgroup("pg1").queue("q1").min(2)
    group.obj["spec"]["subGroupPolicy"] = [policy("tp", "rank", "hard", 1, size=2, min_groups=1)]
    d = run(podgroups=[group], pods=pods(("rank", "0"), ("rank", "0")),
            nodes=[n(f"r{r}-n1") for r in range(4)], hypernodes=[hypernode(f"r{r}", 1, f"r{r}-n1") for r in range(4)])
    assert d.binds == []
    assert calls["place"] == 0
