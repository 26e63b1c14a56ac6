"""The hypernode controller: Volcano's label-discovery cases (label_test.go) and config format (api/example.yaml) as
data, nodeCount and the cross-object checks as tables, the dispatch routing, and the reconciler over MemoryClient."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import _hypernode_tree as tree
from lahar.controllers import dispatch, hypernodes, reconcilers
from lahar.controllers.context import Context, Result
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
SRC = tree.SOURCE_LABEL


def node(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


# Volcano's getCfg(): three topology types, each two label tiers above the hostname
VOLCANO_CFG = {"networkTopologyTypes": {
    "topologyA2": [{"nodeLabel": "volcano.sh/torA2-2"}, {"nodeLabel": "volcano.sh_torA2-1"},
                   {"nodeLabel": "kubernetes.io/hostname"}],
    "topologyA3": [{"nodeLabel": "volcano.sh/torA3-2"}, {"nodeLabel": "volcano.sh/torA3-1"},
                   {"nodeLabel": "kubernetes.io/hostname"}],
    "topologyA5": [{"nodeLabel": "volcano.sh/torA5-2"}, {"nodeLabel": "volcano.sh/torA5-1"},
                   {"nodeLabel": "kubernetes.io/hostname"}],
}}
A2_1, A2_2, A3_1 = "volcano.sh_torA2-1", "volcano.sh/torA2-2", "volcano.sh/torA3-1"


def labelled(name: str, **labels: str) -> dict:
    return node(name, **{k.replace("A2_1", A2_1).replace("A2_2", A2_2).replace("A3_1", A3_1): v
                         for k, v in labels.items()})


def hn(name: str, tier: int, *members: str, member_type: str = "Node", labels: dict | None = None,
       regex: str | None = None) -> dict:
    ms = [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members]
    if regex is not None:
        ms.append({"type": member_type, "selector": {"regexMatch": {"pattern": regex}}})
    return {"apiVersion": tree.API_VERSION, "kind": "HyperNode",
            "metadata": {"name": name, "labels": dict(labels or {})}, "spec": {"tier": tier, "members": ms}}


def summary(built: list[dict]) -> list[tuple[str, int, str, list[str]]]:
    return [(h["metadata"]["name"], h["spec"]["tier"], h["spec"]["tierName"],
             [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]]) for h in built]


# --- the ConfigMap format -----------------------------------------------------------------------------------------

EXAMPLE = """
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
    credentials:
      secretRef: {name: ufm-credentials, namespace: volcano-system}
    config: {endpoint: "https://ufm-server:8080", insecureSkipVerify: true}
  - source: roce
    enabled: false
    interval: 15m
    config: {endpoint: "https://roce-server:9090", token: token}
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""


def test_volcanos_example_config() -> None:
    config, problems = tree.parse_config(EXAMPLE)
    assert problems == []
    assert [(d.source, d.enabled, d.interval) for d in config.discovery] == [
        ("ufm", True, "10m"), ("roce", False, "15m"), ("label", True, None)]
    assert config.enabled("roce") is None
    label = config.enabled("label")
    assert label is not None
    chains, errs = tree.label_chains(label.config)
    assert errs == []
    assert chains == {"topologyA2": ("volcano.sh/tor",),
                      "topologyA3": ("volcano.sh/hypernode", "volcano.sh/hypercluster")}


CONFIG_CASES = [
    ("empty", "", []),
    ("not-yaml", "a: [", ["volcano-controller.conf: not valid YAML"]),
    ("not-a-mapping", "- a", ["volcano-controller.conf: must be a mapping"]),
    ("discovery-not-list", "networkTopologyDiscovery: {a: 1}",
     ["volcano-controller.conf: networkTopologyDiscovery: must be a list"]),
    ("source-missing", "networkTopologyDiscovery: [{enabled: true}]",
     ["volcano-controller.conf: networkTopologyDiscovery[0].source: required"]),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_parse_config_problems(text: str, want: list[str]) -> None:
    _, problems = tree.parse_config(text)
    assert [p[:len(w)] for p, w in zip(problems, want, strict=True)] == want


CHAIN_CASES = [
    ("volcano-cfg", VOLCANO_CFG, {"topologyA2": (A2_1, A2_2), "topologyA3": (A3_1, "volcano.sh/torA3-2"),
                                  "topologyA5": ("volcano.sh/torA5-1", "volcano.sh/torA5-2")}, []),
    ("type-name-too-long", {"networkTopologyTypes": {"t" * 21: [{"nodeLabel": "a"}, {"nodeLabel": "h"}]}}, {},
     [f"networkTopologyTypes.{'t' * 21}: the topology type name is longer than 20 characters"]),
    ("duplicate-labels", {"networkTopologyTypes": {"t": [{"nodeLabel": "a"}, {"nodeLabel": "a"}]}}, {},
     ["networkTopologyTypes.t: there are duplicate labels"]),
    ("not-a-list", {"networkTopologyTypes": {"t": "a"}}, {},
     ["networkTopologyTypes.t: must be a list of {nodeLabel: <label key>}"]),
    ("hostname-only", {"networkTopologyTypes": {"t": [{"nodeLabel": "kubernetes.io/hostname"}]}}, {"t": ()}, []),
]


@pytest.mark.parametrize(("config", "chains", "problems"), [c[1:] for c in CHAIN_CASES],
                         ids=[c[0] for c in CHAIN_CASES])
def test_label_chains(config: dict, chains: dict, problems: list[str]) -> None:
    assert tree.label_chains(config) == (chains, problems)


# --- the tree builder: Volcano's TestNewLabelDiscoverer_start --------------------------------------------------------

def _chains() -> dict[str, tuple[str, ...]]:
    return tree.label_chains(VOLCANO_CFG)[0]


T1 = "hypernode-topologya2-tier1-"
T2 = "hypernode-topologya2-tier2-"
BUILD_CASES = [
    ("test1-two-tiers", [labelled(f"node{i}", A2_1=f"s{i // 2}", A2_2=f"s{4 + i // 4}") for i in range(8)], [], [
        (T1 + "s0", 1, A2_1, ["node0", "node1"]), (T1 + "s1", 1, A2_1, ["node2", "node3"]),
        (T1 + "s2", 1, A2_1, ["node4", "node5"]), (T1 + "s3", 1, A2_1, ["node6", "node7"]),
        (T2 + "s4", 2, A2_2, [T1 + "s0", T1 + "s1"]), (T2 + "s5", 2, A2_2, [T1 + "s2", T1 + "s3"])]),
    ("test2-some-without-tier2",
     [labelled("node0", A2_1="s0"), labelled("node1", A2_1="s0", A2_2="s2"), labelled("node2", A2_1="s1"),
      labelled("node3", A2_1="s1")],
     [], [(T1 + "s0", 1, A2_1, ["node0", "node1"]), (T1 + "s1", 1, A2_1, ["node2", "node3"]),
          (T2 + "s2", 2, A2_2, [T1 + "s0"])]),
    ("test3-some-without-tier1",
     [labelled("node0", A2_2="s2"), labelled("node1", A2_1="s0"), labelled("node2", A2_2="s2"),
      labelled("node3", A2_2="s2")],
     [], [(T1 + "s0", 1, A2_1, ["node1"])]),
    ("test4-existing-of-another-type-not-adopted", [labelled("node0", A3_1="s0")],
     [hn("hypernode-topologya2-tier1-mnsx6", 1, "node0", labels={SRC: "label", A3_1: "s0"})],
     [("hypernode-topologya3-tier1-s0", 1, A3_1, ["node0"])]),
    ("existing-of-this-type-adopted", [labelled("node0", A3_1="s0")],
     [hn("hypernode-topologya3-tier1-mnsx6", 1, "node9", labels={SRC: "label", A3_1: "s0"})],
     [("hypernode-topologya3-tier1-mnsx6", 1, A3_1, ["node0"])]),
    ("users-hypernode-not-adopted", [labelled("node0", A3_1="s0")],
     [hn("hypernode-topologya3-tier1-mine", 1, "node0", labels={A3_1: "s0"})],
     [("hypernode-topologya3-tier1-s0", 1, A3_1, ["node0"])]),
    ("value-cleaned-or-hashed", [labelled("node0", A2_1="Rack_0"), labelled("node1", A2_1="")], [], [
        (T1 + "5f4e3f10a6", 1, A2_1, ["node1"]), (T1 + "rack-0", 1, A2_1, ["node0"])]),
    ("no-labels", [node("node0")], [], []),
]


@pytest.mark.parametrize(("nodes", "existing", "want"), [c[1:] for c in BUILD_CASES], ids=[c[0] for c in BUILD_CASES])
def test_build_label_tree(nodes: list[dict], existing: list[dict], want: list[tuple]) -> None:
    built = tree.build_label_tree(nodes, _chains(), existing)
    assert summary(built) == sorted(want)
    for h in built:
        assert tree._DNS_SUBDOMAIN.match(h["metadata"]["name"]), h["metadata"]["name"]
        assert h["metadata"]["labels"][SRC] == "label"
        assert h["spec"]["members"][0]["type"] == ("Node" if h["spec"]["tier"] == 1 else "HyperNode")


def test_names_are_deterministic_and_hash_when_unnameable() -> None:
    assert tree.hypernode_name("superPod", 1, "volcano.sh/tor", "leaf-0") == "hypernode-superpod-tier1-leaf-0"
    hashed = tree.hypernode_name("t", 1, "k", "")
    assert hashed.startswith("hypernode-t-tier1-") and len(hashed) == len("hypernode-t-tier1-") + 10
    assert hashed == tree.hypernode_name("t", 1, "k", "")
    assert tree.hypernode_name("t", 1, "k", "a", taken={"hypernode-t-tier1-a"}) != "hypernode-t-tier1-a"


PLAN_CASES = [
    ("create-new", [hn("a", 1, "n0", labels={SRC: "label"})], [], (["a"], [], [])),
    ("unchanged", [hn("a", 1, "n0", labels={SRC: "label"})], [hn("a", 1, "n0", labels={SRC: "label"})], ([], [], [])),
    ("members-changed", [hn("a", 1, "n0", "n1", labels={SRC: "label"})], [hn("a", 1, "n0", labels={SRC: "label"})],
     ([], ["a"], [])),
    ("no-node-feeds-it", [], [hn("a", 1, "n0", labels={SRC: "label"})], ([], [], ["a"])),
    ("users-own-left-alone", [], [hn("mine", 1, "n0")], ([], [], [])),
    ("other-source-left-alone", [], [hn("u", 1, "n0", labels={SRC: "ufm"})], ([], [], [])),
    ("name-taken-by-user", [hn("a", 1, "n0", labels={SRC: "label"})], [hn("a", 1, "n9")], ([], [], [])),
]


@pytest.mark.parametrize(("desired", "existing", "want"), [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES])
def test_plan(desired: list[dict], existing: list[dict], want: tuple) -> None:
    got = tree.plan(desired, existing, "label")
    names = ([o["metadata"]["name"] for o in got.create], [o["metadata"]["name"] for o in got.update],
             list(got.delete))
    assert names == want


# --- status: nodeCount and the checks across HyperNodes ---------------------------------------------------------------

NODES = {f"n{i}": {"rack": f"r{i // 2}"} for i in range(4)}
COUNT_CASES = [
    ("exact-nodes", [hn("a", 1, "n0", "n1")], {"a": 2}),
    ("missing-node-not-counted", [hn("a", 1, "n0", "gone")], {"a": 1}),
    ("regex-nodes", [hn("a", 1, regex="^n[0-2]$")], {"a": 3}),
    ("label-match", [{**hn("a", 1), "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}]}}], {"a": 2}),
    ("subtree-total", [hn("a", 1, "n0", "n1"), hn("b", 1, "n2"), hn("top", 2, "a", "b", member_type="HyperNode")],
     {"a": 2, "b": 1, "top": 3}),
    ("overlap-counted-once", [hn("a", 1, "n0", "n1"), hn("b", 1, "n1"), hn("top", 2, "a", "b", member_type="HyperNode")],
     {"a": 2, "b": 1, "top": 2}),
    ("cycle-cut", [hn("x", 2, "y", member_type="HyperNode"), {**hn("y", 2, "x", member_type="HyperNode"),
                                                               "spec": {"tier": 2, "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "x"}}},
        {"type": "Node", "selector": {"exactMatch": {"name": "n3"}}}]}}], {"x": 1, "y": 1}),
    ("bad-regex-selects-nothing", [hn("a", 1, regex="a(")], {"a": 0}),
    ("exponential-regex-selects-nothing", [hn("a", 1, regex="^(n[0-9]*)+$")], {"a": 0}),
    ("lookahead-regex-selects-nothing", [hn("a", 1, regex="^n(?=1)")], {"a": 0}),
]


@pytest.mark.parametrize(("pattern", "bounded"), [
    ("^n[0-9]+$", True), ("^(a+)+$", False), ("(a|b)*c", True), ("((ab)*)*", False), ("x(?!y)", False),
    ("a" * 1025, False), ("", False),
], ids=["plain", "nested-plus", "repeat-of-alternatives", "nested-star", "lookahead", "too-long", "empty"])
def test_patterns_matched_only_when_bounded(pattern: str, bounded: bool) -> None:
    """A HyperNode stored without the webhook (before it was registered, or its failurePolicy) must not hang a worker
    on a pattern Python's backtracking matcher takes exponential time on."""
    from lahar.kube import regexes

    assert (regexes.compile_bounded(pattern) is not None) is bounded


@pytest.mark.parametrize(("hypernodes", "want"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES])
def test_node_counts(hypernodes: list[dict], want: dict[str, int]) -> None:
    assert tree.node_counts(hypernodes, NODES) == want


PROBLEM_CASES = [
    ("consistent", [hn("a", 1, "n0"), hn("b", 1, "n1"), hn("top", 2, "a", "b", member_type="HyperNode")],
     {"a": [], "b": [], "top": []}),
    ("member-tier-not-below", [hn("a", 2, "n0"), hn("top", 2, "a", member_type="HyperNode")],
     {"a": ["1 node(s) also in tier-2 HyperNode top: n0"],
      "top": ["1 node(s) also in tier-2 HyperNode a: n0",
              "member HyperNode a has tier 2, which is not below this HyperNode's tier 2"]}),
    ("cycle", [hn("x", 3, "y", member_type="HyperNode"), hn("y", 2, "x", member_type="HyperNode")],
     {"x": ["HyperNode members form a cycle: x -> y -> x"],
      "y": ["HyperNode members form a cycle: y -> x -> y",
            "member HyperNode x has tier 3, which is not below this HyperNode's tier 2"]}),
    ("node-in-two-of-a-tier", [hn("a", 1, "n0", "n1"), hn("b", 1, "n1")],
     {"a": ["1 node(s) also in tier-1 HyperNode b: n1"], "b": ["1 node(s) also in tier-1 HyperNode a: n1"]}),
    ("leaf-under-two-spines", [hn("a", 1, "n0", "n1"), hn("s0", 2, "a", member_type="HyperNode"),
                               hn("s1", 2, "a", member_type="HyperNode")],
     {"a": [], "s0": ["2 node(s) also in tier-2 HyperNode s1: n0, n1"],
      "s1": ["2 node(s) also in tier-2 HyperNode s0: n0, n1"]}),
    ("long-overlap-truncated", [hn("a", 1, regex="^n"), hn("b", 1, regex="^n[0-3]$")],
     {"a": ["4 node(s) also in tier-1 HyperNode b: n0, n1, n2, n3"],
      "b": ["4 node(s) also in tier-1 HyperNode a: n0, n1, n2, n3"]}),
    ("node-in-two-tiers-is-fine", [hn("a", 1, "n0"), hn("b", 2, "n0")], {"a": [], "b": []}),
    ("missing-member-hypernode-ignored", [hn("top", 2, "later", member_type="HyperNode")], {"top": []}),
]


@pytest.mark.parametrize(("hypernodes", "want"), [c[1:] for c in PROBLEM_CASES], ids=[c[0] for c in PROBLEM_CASES])
def test_problems(hypernodes: list[dict], want: dict[str, list[str]]) -> None:
    assert tree.problems(hypernodes, NODES) == want


def test_desired_status_keeps_transition_time() -> None:
    first = hypernodes.desired_status(None, node_count=2, problems=[], now="t0")
    assert first["nodeCount"] == 2 and first["conditions"][0]["status"] == "True"
    assert hypernodes.desired_status(first, node_count=3, problems=[], now="t1")["conditions"][0][
        "lastTransitionTime"] == "t0"
    bad = hypernodes.desired_status(first, node_count=3, problems=["x"], now="t2")["conditions"][0]
    assert (bad["status"], bad["reason"], bad["message"], bad["lastTransitionTime"]) == (
        "False", "InvalidTopology", "x", "t2")


# --- routing ---------------------------------------------------------------------------------------------------------

def _hn_obj(generation: int, labels: dict | None = None, node_count: int = 0) -> dict:
    return {"metadata": {"name": "a", "generation": generation, "labels": labels or {}},
            "status": {"nodeCount": node_count}}


def _cm(name: str, conf: str) -> dict:
    return {"metadata": {"name": name, "namespace": "volcano-system"}, "data": {"volcano-controller.conf": conf}}


ROUTE_CASES = [
    ("node-added", "Node", "ADDED", node("n0"), None, True),
    ("node-deleted", "Node", "DELETED", node("n0"), None, True),
    ("node-relabelled", "Node", "MODIFIED", node("n0", rack="r1"), node("n0", rack="r0"), True),
    ("node-heartbeat", "Node", "MODIFIED", {**node("n0"), "status": {"x": 2}}, {**node("n0"), "status": {"x": 1}},
     False),
    ("node-resync", "Node", "RESYNC", node("n0"), None, True),
    ("hypernode-spec-changed", "HyperNode", "MODIFIED", _hn_obj(2), _hn_obj(1), True),
    ("hypernode-status-only", "HyperNode", "MODIFIED", _hn_obj(1, node_count=3), _hn_obj(1), False),
    ("hypernode-labels-changed", "HyperNode", "MODIFIED", _hn_obj(1, {"a": "b"}), _hn_obj(1), True),
    ("hypernode-deleted", "HyperNode", "DELETED", _hn_obj(1), None, True),
    ("discovery-configmap-added", "ConfigMap", "ADDED", _cm("volcano-controller-configmap", "a"), None, True),
    ("discovery-configmap-changed", "ConfigMap", "MODIFIED", _cm("volcano-controller-configmap", "b"),
     _cm("volcano-controller-configmap", "a"), True),
    ("discovery-configmap-relabelled-only", "ConfigMap", "MODIFIED",
     {**_cm("volcano-controller-configmap", "a"), "metadata": {"name": "volcano-controller-configmap",
                                                               "labels": {"x": "y"}}},
     _cm("volcano-controller-configmap", "a"), False),
    ("discovery-configmap-deleted", "ConfigMap", "DELETED", _cm("lahar-controller-configmap", "a"), None, True),
    ("other-configmap", "ConfigMap", "ADDED", _cm("kube-root-ca.crt", "a"), None, False),
]


@pytest.mark.parametrize(("kind", "event", "obj", "old", "routed"), [c[1:] for c in ROUTE_CASES],
                         ids=[c[0] for c in ROUTE_CASES])
def test_route(kind: str, event: str, obj: dict, old: dict | None, routed: bool) -> None:
    works = dispatch.route(kind, event, obj, old)
    assert works == ([dispatch.Work(dispatch.HYPERNODE_TREE)] if routed else [])


def test_tables_know_the_tree() -> None:
    assert dispatch.HYPERNODE_TREE in dispatch.ALWAYS
    assert reconcilers.RECONCILERS[dispatch.HYPERNODE_TREE.kind] is hypernodes.reconcile
    assert dispatch.RESOURCES["HyperNode"] == ("topology.volcano.sh", "v1alpha1", "hypernodes")
    assert dispatch.RESOURCES["ConfigMap"] == ("", "v1", "configmaps")


# --- the reconciler over MemoryClient --------------------------------------------------------------------------------

SUPERPOD = """
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        superpod:
          - nodeLabel: volcano.sh/hypercluster
          - nodeLabel: volcano.sh/tor
          - nodeLabel: kubernetes.io/hostname
  - source: ufm
    enabled: true
"""


def make_ctx(config: str | None = SUPERPOD) -> Context:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    ctx = Context(client=MemoryClient.with_crds(store), clock=lambda: T0)
    if config is not None:
        cm_rt = ctx.client.registry.get("", "v1", "configmaps")
        ctx.client.create(cm_rt, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "volcano-controller-configmap", "namespace": "kube-system"},
                                  "data": {tree.CONFIG_KEY: config}}, namespace="kube-system")
    return ctx


def _rt(ctx: Context, plural: str) -> Any:
    group, version = ("topology.volcano.sh", "v1alpha1") if plural == "hypernodes" else ("", "v1")
    return ctx.client.registry.get(group, version, plural)


def add_node(ctx: Context, name: str, leaf: str, spine: str) -> None:
    ctx.client.create(_rt(ctx, "nodes"), node(name, **{"volcano.sh/tor": leaf, "volcano.sh/hypercluster": spine,
                                                       "kubernetes.io/hostname": name}))


def relabel(ctx: Context, name: str, leaf: str) -> None:
    ctx.client.patch(_rt(ctx, "nodes"), name, {"metadata": {"labels": {"volcano.sh/tor": leaf}}}, patch_type="merge")


def world(ctx: Context) -> dict[str, tuple[int, list[str], int]]:
    out = {}
    for h in ctx.client.list(_rt(ctx, "hypernodes"))["items"]:
        out[h["metadata"]["name"]] = (h["spec"]["tier"],
                                      [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]
                                       if "exactMatch" in m["selector"]],
                                      (h.get("status") or {}).get("nodeCount"))
    return out


def run(ctx: Context) -> None:
    reconcilers.reconcile(ctx, dispatch.HYPERNODE_TREE.kind, "", dispatch.HYPERNODE_TREE.name)


L, S = "hypernode-superpod-tier1-", "hypernode-superpod-tier2-"


def test_reconcile_builds_moves_and_prunes_the_tree() -> None:
    ctx = make_ctx()
    for i in range(4):
        add_node(ctx, f"n{i}", f"leaf-{i // 2}", "spine-0")
    run(ctx)
    assert world(ctx) == {L + "leaf-0": (1, ["n0", "n1"], 2), L + "leaf-1": (1, ["n2", "n3"], 2),
                          S + "spine-0": (2, [L + "leaf-0", L + "leaf-1"], 4)}
    relabel(ctx, "n1", "leaf-1")
    run(ctx)
    assert world(ctx)[L + "leaf-0"] == (1, ["n0"], 1) and world(ctx)[L + "leaf-1"] == (1, ["n1", "n2", "n3"], 3)
    ctx.client.delete(_rt(ctx, "nodes"), "n0")
    run(ctx)
    assert world(ctx) == {L + "leaf-1": (1, ["n1", "n2", "n3"], 3), S + "spine-0": (2, [L + "leaf-1"], 3)}
    run(ctx)  # idempotent: nothing left to write
    assert world(ctx)[S + "spine-0"] == (2, [L + "leaf-1"], 3)


def test_reconcile_leaves_users_hypernodes_and_checks_them() -> None:
    ctx = make_ctx()
    add_node(ctx, "n0", "leaf-0", "spine-0")
    ctx.client.create(_rt(ctx, "hypernodes"), hn("mine", 1, "n0"))
    run(ctx)
    mine = ctx.client.get(_rt(ctx, "hypernodes"), "mine")
    assert mine["spec"]["members"] == hn("mine", 1, "n0")["spec"]["members"]
    [cond] = mine["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["message"]) == (
        "Valid", "False", f"1 node(s) also in tier-1 HyperNode {L}leaf-0: n0")
    events = ctx.client.list(_rt(ctx, "events"), namespace="default")["items"]
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
    assert ("mine", "InvalidTopology") in reasons
    cm_events = ctx.client.list(_rt(ctx, "events"), namespace="kube-system")["items"]
    assert any("source 'ufm' is not supported by lahar" in e["message"] for e in cm_events)


def test_reconcile_without_config_only_writes_status() -> None:
    ctx = make_ctx(config=None)
    add_node(ctx, "n0", "leaf-0", "spine-0")
    ctx.client.create(_rt(ctx, "hypernodes"), hn("mine", 1, regex="^n"))
    run(ctx)
    assert world(ctx) == {"mine": (1, [], 1)}


def test_reconcile_before_the_crd_is_installed_is_a_no_op() -> None:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    ctx = Context(client=MemoryClient(store=store), clock=lambda: T0)
    assert ctx.client.registry.get("topology.volcano.sh", "v1alpha1", "hypernodes") is None
    assert hypernodes.reconcile(ctx, "", "discovery") == Result()


class _NoRedis:
    def register_script(self, script: str) -> Any:
        return lambda **_: None


def test_dispatcher_reconciles_the_tree_once_hypernodes_are_served() -> None:
    """The HyperNode CRD applied after the nodes: the first list is empty and no event names the tree, so the tree
    waited for the next resync (up to 30 s) before lahar up showed it."""
    from lahar.dispatcher import Dispatcher

    ctx = make_ctx(config=None)
    d = Dispatcher(client=ctx.client, redis=_NoRedis(), send=lambda key: True)
    d._start_informer("HyperNode", _rt(ctx, "hypernodes"))
    try:
        assert d._outbox.get(timeout=5) == dispatch.Work(dispatch.HYPERNODE_TREE)
    finally:
        d.informers["HyperNode"].stop()


def test_dispatcher_rediscovers_when_the_discovery_configmap_changes() -> None:
    """The tiers are edited in the ConfigMap: the tree follows at once, not at the next resync."""
    from lahar.dispatcher import Dispatcher

    ctx = make_ctx(config=None)
    d = Dispatcher(client=ctx.client, redis=_NoRedis(), send=lambda key: True)
    d._start_informer("ConfigMap", _rt(ctx, "configmaps"))
    try:
        cm_rt = _rt(ctx, "configmaps")
        ctx.client.create(cm_rt, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "unrelated", "namespace": "kube-system"}, "data": {"a": "b"}},
                          namespace="kube-system")
        ctx.client.create(cm_rt, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "volcano-controller-configmap", "namespace": "kube-system"},
                                  "data": {tree.CONFIG_KEY: SUPERPOD}}, namespace="kube-system")
        assert d._outbox.get(timeout=5) == dispatch.Work(dispatch.HYPERNODE_TREE)
    finally:
        d.informers["ConfigMap"].stop()
