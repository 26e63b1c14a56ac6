"""framework/hypernodes: HyperNode objects → the session's tree (members by exactMatch / regexMatch / labelMatch,
parents, ancestors, LCA), networkTopology constraints and the gradient of HyperNodes a job may land in."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import hypernodes as hn


def hypernode(name: str, tier: int, *members: dict[str, Any], tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": list(members)}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def nodes_exact(*names: str) -> list[dict[str, Any]]:
    return [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]


def child(name: str) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def label(**kv: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"labelMatch": {"matchLabels": kv}}}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


NODES = [node("n0", rack="a"), node("n1", rack="a"), node("n2", rack="b"), node("n3", rack="b"),
         node("gpu-0"), node("gpu-1")]

# the two-level tree of Volcano's design doc: s0, s1 at tier 1 under s2 at tier 2
TREE = [hypernode("s0", 1, *nodes_exact("n0", "n1")), hypernode("s1", 1, *nodes_exact("n2", "n3")),
        hypernode("s2", 2, child("s0"), child("s1"))]

MEMBERS = [
    pytest.param([hypernode("h", 1, *nodes_exact("n0", "n9"))], {"h": {"n0", "n9"}}, id="exact-match-by-name"),
    pytest.param([hypernode("h", 1, regex("^gpu-"))], {"h": {"gpu-0", "gpu-1"}}, id="regex-match"),
    pytest.param([hypernode("h", 1, regex("1"))], {"h": {"n1", "gpu-1"}}, id="regex-searches-unanchored"),
    pytest.param([hypernode("h", 1, label(rack="b"))], {"h": {"n2", "n3"}}, id="label-match"),
    pytest.param([hypernode("h", 1, {"type": "Node", "selector": {"labelMatch": {}}})], {"h": set()},
                 id="empty-label-match-matches-nothing"),
    pytest.param(TREE, {"s0": {"n0", "n1"}, "s1": {"n2", "n3"}, "s2": {"n0", "n1", "n2", "n3"}},
                 id="parent-holds-members-of-members"),
    pytest.param([hypernode("h", 1, regex("(")), hypernode("k", 1, *nodes_exact("n0"))],
                 {"h": set(), "k": {"n0"}}, id="bad-regex-matches-nothing"),
]


@pytest.mark.parametrize(("objs", "want"), MEMBERS)
def test_members_resolve_to_node_names(objs: list[dict[str, Any]], want: dict[str, set[str]]) -> None:
    tree = hn.build(objs, NODES)
    assert {name: set(h.nodes) for name, h in tree.hypernodes.items() if name != hn.CLUSTER_TOP} == want


ERRORS = [
    pytest.param([hypernode("h", 1, regex("("))], "hypernode h: spec.members[0].selector.regexMatch.pattern",
                 id="bad-regex"),
    pytest.param([hypernode("h", 2, child("x"))], "spec.members[0].selector.exactMatch.name: hypernode x not found",
                 id="unknown-child"),
    pytest.param([hypernode("a", 2, child("c")), hypernode("b", 2, child("c")), hypernode("c", 1)],
                 "hypernode b: spec.members[0].selector.exactMatch.name: hypernode c already has parent a",
                 id="second-parent"),
    pytest.param([hypernode("a", 2, child("b")), hypernode("b", 3, child("a"))], "makes a cycle, cut", id="cycle"),
]


@pytest.mark.parametrize(("objs", "error"), ERRORS)
def test_bad_members_are_reported_with_the_field(objs: list[dict[str, Any]], error: str) -> None:
    tree = hn.build(objs, NODES)
    assert any(error in e for e in tree.errors), tree.errors


def test_cycle_is_cut_and_the_walk_ends() -> None:
    tree = hn.build([hypernode("a", 2, child("b")), hypernode("b", 3, child("a"))], NODES)
    assert tree.ancestors("a")[-1] == tree.ancestors("b")[-1] == hn.CLUSTER_TOP


@pytest.mark.parametrize(("a", "b", "want"), [
    pytest.param("s0", "s0", "s0", id="same"),
    pytest.param("s0", "s1", "s2", id="siblings-meet-at-parent"),
    pytest.param("s0", "s2", "s2", id="ancestor"),
    pytest.param("", "s1", "s1", id="empty-left"),
    pytest.param("s1", "", "s1", id="empty-right"),
    pytest.param("s0", "zz", "", id="unknown"),
    pytest.param("s0", "lone", hn.CLUSTER_TOP, id="roots-meet-at-cluster-top"),
])
def test_lowest_common_ancestor(a: str, b: str, want: str) -> None:
    assert hn.build([*TREE, hypernode("lone", 1)], NODES).lca(a, b) == want


def test_no_hypernodes_leaves_cluster_top_at_tier_1() -> None:
    tree = hn.build([], NODES)
    assert tree.tiers == (1,) and tree.leaf_of("n0") == hn.CLUSTER_TOP


def test_tree_shape() -> None:
    tree = hn.build(TREE, NODES)
    assert tree.tiers == (1, 2, 3)
    assert tree.by_tier == {1: ["s0", "s1"], 2: ["s2"], 3: [hn.CLUSTER_TOP]}
    assert tree.ancestors("s1") == ("s1", "s2", hn.CLUSTER_TOP)
    assert tree.leaf_of("n2") == "s1" and tree.leaf_of("gpu-0") == hn.CLUSTER_TOP and tree.leaf_of("zz") == ""
    assert tree.hypernodes_of("n0") == ["s0", "s2", hn.CLUSTER_TOP]
    assert tree.hypernodes[hn.CLUSTER_TOP].nodes == {n["metadata"]["name"] for n in NODES}
    assert tree.descendants("s2") == ["s2", "s0", "s1"]
    index = {"n0": 0, "n1": 1, "n3": 2}  # n2 is not in the session (NotReady)
    assert tree.rows("s1", index).tolist() == [2]
    assert tree.rows("s2", index).tolist() == [0, 1, 2]


CONSTRAINTS = [
    pytest.param(None, None, id="none"),
    pytest.param({}, None, id="empty"),
    pytest.param({"mode": "hard", "highestTierAllowed": 1}, hn.Constraint(hn.Mode.HARD, 1), id="hard-tier-1"),
    pytest.param({"highestTierAllowed": 2}, hn.Constraint(hn.Mode.HARD, 2), id="mode-defaults-to-hard"),
    pytest.param({"mode": "soft"}, hn.Constraint(hn.Mode.SOFT, None), id="soft-any-tier"),
    pytest.param({"mode": "hard", "highestTierName": "spine"}, hn.Constraint(hn.Mode.HARD, 2),
                 id="tier-name-resolved"),
    pytest.param({"mode": "hard", "highestTierName": "nope"}, hn.Constraint(hn.Mode.HARD, None),
                 id="unknown-tier-name-any-tier"),
    pytest.param({"mode": "hard", "highestTierAllowed": "two"}, hn.Constraint(hn.Mode.HARD, None),
                 id="tier-not-a-number-does-not-crash"),
    pytest.param({"mode": "Soft", "highestTierAllowed": "1"}, hn.Constraint(hn.Mode.SOFT, 1), id="tier-as-string"),
]


@pytest.mark.parametrize(("spec", "want"), CONSTRAINTS)
def test_constraint_from_network_topology(spec: dict[str, Any] | None, want: hn.Constraint | None) -> None:
    tree = hn.build([hypernode("s0", 1, tier_name="leaf"), hypernode("s2", 2, child("s0"), tier_name="spine")], [])
    assert hn.constraint(spec, tree) == want


# Volcano network_topology_aware_test hyperNodeGradientFn cases, in a tree of s0..s3 (tier 1) under s4, s5
# (tier 2) under s6 (tier 3)
GTREE = [hypernode(f"s{i}", 1, *nodes_exact(f"n{i}")) for i in range(4)] + [
    hypernode("s4", 2, child("s0"), child("s1")), hypernode("s5", 2, child("s2"), child("s3")),
    hypernode("s6", 3, child("s4"), child("s5"))]

GRADIENTS = [
    pytest.param(1, "", None, [["s0", "s1", "s2", "s3"]], id="tier-1-only"),
    pytest.param(2, "", None, [["s0", "s1", "s2", "s3"], ["s4", "s5"]], id="up-to-tier-2-lowest-first"),
    pytest.param(None, "", None, [["s0", "s1", "s2", "s3"], ["s4", "s5"], ["s6"], [hn.CLUSTER_TOP]],
                 id="no-limit-whole-tree-and-cluster-top"),
    pytest.param(3, "", None, [["s0", "s1", "s2", "s3"], ["s4", "s5"], ["s6"]], id="top-above-highest-tier"),
    pytest.param(2, "", {"s1", "s5"}, [["s0", "s2", "s3"], ["s4"]], id="resource-prefilter"),
    pytest.param(2, "s0", None, [["s0", "s1"], ["s4"]], id="allocated-stays-under-its-tier-2-ancestor"),
    pytest.param(2, "s0", {"s0", "s1", "s4"}, [["s0", "s1"], ["s4"]], id="allocated-skips-prefilter"),
    pytest.param(1, "s4", None, [], id="allocated-above-highest-tier"),
    pytest.param(3, "zz", None, [], id="allocated-unknown"),
]


@pytest.mark.parametrize(("highest", "allocated", "full", "want"), GRADIENTS)
def test_gradient(highest: int | None, allocated: str, full: set[str] | None, want: list[list[str]]) -> None:
    tree = hn.build(GTREE, [])
    eligible = None if full is None else (lambda name: name not in full)
    assert hn.gradient(tree, highest_tier=highest, allocated=allocated, eligible=eligible) == want


def test_tree_of_reuses_the_tree_for_the_same_objects() -> None:
    objs = {o["metadata"]["name"]: o for o in TREE}
    first = hn.tree_of(objs, NODES)
    assert hn.tree_of(dict(objs), NODES) is first
    objs2 = dict(objs)
    objs2["s0"] = hypernode("s0", 1, *nodes_exact("n0"))
    assert hn.tree_of(objs2, NODES).hypernodes["s0"].nodes == {"n0"}


def test_snapshot_keeps_hypernodes_as_extras() -> None:
    from lahar.scheduler.framework import snapshot as snapshots
    snap = snapshots.build(hypernodes=TREE)
    assert set(snap.extras["hypernodes"]) == {"s0", "s1", "s2"}


def test_incremental_snapshot_follows_hypernode_events() -> None:
    from lahar.scheduler.incremental import SnapshotInputs
    inputs = SnapshotInputs()
    inputs.replace("nodes", [{"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "1"}}}])
    snap = inputs.snapshot()
    assert snap.extras["hypernodes"] == {}
    inputs.upsert("hypernodes", TREE[0])
    assert set(inputs.snapshot().extras["hypernodes"]) == {"s0"}
    inputs.delete("hypernodes", TREE[0])
    assert inputs.snapshot().extras["hypernodes"] == {}


ROW_SUMS = [
    pytest.param(["r1", "r2"], [[6.0, 9.0], [10.0, 12.0]], id="two-racks"),
    pytest.param(["empty", "r1"], [[0.0, 0.0], [6.0, 9.0]], id="empty-first"),
    pytest.param(["r1", "empty"], [[6.0, 9.0], [0.0, 0.0]], id="empty-last-keeps-the-rack-whole"),
    pytest.param(["r1", "empty", "r2"], [[6.0, 9.0], [0.0, 0.0], [10.0, 12.0]], id="empty-between"),
    pytest.param(["spine"], [[12.0, 16.0]], id="node-under-both-racks-counts-once-in-the-spine"),
    pytest.param(["empty"], [[0.0, 0.0]], id="only-empty"),
    pytest.param([], [], id="none"),
]


@pytest.mark.parametrize(("names", "want"), ROW_SUMS)
def test_row_sums_per_hypernode(names: list[str], want: list[list[float]]) -> None:
    """Per-HyperNode sums over node rows, as the HyperNode × node product they replace (n2 is in both racks)."""
    objs = [hypernode("r1", 1, *nodes_exact("n0", "n1", "n2")), hypernode("r2", 1, *nodes_exact("n2", "n3")),
            hypernode("empty", 1), hypernode("spine", 2, child("r1"))]
    tree = hn.build(objs, [node(f"n{i}") for i in range(4)])
    tree.hypernodes["spine"].nodes = frozenset({"n0", "n1", "n2", "n3"})
    values = np.arange(8.0).reshape(4, 2)  # row i: (2i, 2i + 1)
    sums = hn.RowSums(tree, names, {f"n{i}": i for i in range(4)})
    got = sums(values)
    assert got.shape == (len(names), 2)
    assert got.tolist() == want
    assert sums(values[:, 0]).tolist() == [w[0] for w in want]
