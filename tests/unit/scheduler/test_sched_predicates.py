"""predicates plugin: shapes of kube-scheduler's nodeaffinity / tainttoleration / nodeports / nodeunschedulable /
interpodaffinity / podtopologyspread filter tables and Volcano's predicates tests, as data: pods, nodes → binds
and the per-node reasons of the FailedScheduling message."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Node
from lahar.scheduler.plugins import predicates
from lahar.scheduler.plugins._ports import port_conflict
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

CONF = tiers_conf("allocate", ["gang"], ["predicates", "nodeorder"])


# --- builders for the pod rules (plain dict edits on the shared builders) ---------------------------------------

def term(selector: dict[str, str] | None, key: str = "kubernetes.io/hostname", **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": key, **extra}
    if selector is not None:
        t["labelSelector"] = {"matchLabels": selector}
    return t


def with_spec(p: pod, **fields: Any) -> pod:
    p.obj["spec"].update(copy.deepcopy(fields))
    return p


def pod_affinity(p: pod, *, required: list[dict[str, Any]] = (), anti: list[dict[str, Any]] = ()) -> pod:  # type: ignore[assignment]
    aff = p.obj["spec"].setdefault("affinity", {})
    if required:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(required)}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return p


def host_port(p: pod, port: int, protocol: str = "TCP", ip: str = "") -> pod:
    entry: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
    if ip:
        entry["hostIP"] = ip
    p.obj["spec"]["containers"][0].setdefault("ports", []).append(entry)
    return p


def spread(p: pod, key: str, max_skew: int = 1, **extra: Any) -> pod:
    p.obj["spec"].setdefault("topologySpreadConstraints", []).append(
        {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": extra.pop("when", "DoNotSchedule"),
         "labelSelector": {"matchLabels": extra.pop("selector", {"app": "web"})}, **extra})
    return p


def zoned(name: str, zone: str, cpu: str = "8", pods: int = 110) -> node:
    return node(name).alloc(cpu, "16Gi", pods=pods).label(**{"kubernetes.io/hostname": name,  # type: ignore[return-value]
                                                             "topology.kubernetes.io/zone": zone})


def gang(name: str, n: int, *, min_member: int | None = None, labels: dict[str, str] | None = None,
         edit: Any = None) -> tuple[list[Any], Any]:
    pods = []
    for i in range(n):
        p = pod(f"{name}-{i}").req("1", "1Gi").group(name)
        if labels:
            p.label(**labels)
        if edit is not None:
            edit(p)
        pods.append(p)
    return pods, podgroup(name).min(n if min_member is None else min_member)


def existing(name: str, on: str, labels: dict[str, str] | None = None, namespace: str = "c1") -> pod:
    p = pod(name, namespace).req("1", "1Gi").group("running").on(on)
    if labels:
        p.label(**labels)
    return p


def schedule(pods: list[Any], nodes: list[Any], pgs: list[Any], conf: str = CONF) -> tuple[dict[str, str], dict[str, str]]:
    """binds, and the PodScheduled message per pending pod name."""
    d = run(pods=pods, nodes=nodes, podgroups=[*pgs, podgroup("running").min(0).phase("Running")],
            queues=[queue("c1")], conf=conf)
    return d.bind_map(), {c.name: c.event_message for c in d.pod_conditions}  # the FailedScheduling text, per node


# --- node selector / required node affinity (nodeaffinity filter table shapes) ----------------------------------

LABELS = {"zone": "a", "cores": "16", "gpu": "true"}

NODE_AFFINITY = [
    ("selector-match", {"nodeSelector": {"zone": "a"}}, True),
    ("selector-mismatch", {"nodeSelector": {"zone": "b"}}, False),
    ("selector-missing-label", {"nodeSelector": {"rack": "1"}}, False),
    ("in", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]}], True),
    ("notin-absent-label", [{"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["1"]}]}], True),
    ("notin", [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}], False),
    ("exists", [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}], True),
    ("does-not-exist", [{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}], False),
    ("gt", [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}], True),
    ("gt-equal", [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["16"]}]}], False),
    ("lt", [{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["32"]}]}], True),
    ("gt-not-integer-value", [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["x"]}]}], False),
    ("gt-non-numeric-label", [{"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}], False),
    ("in-empty-values-voids-term", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]}], False),
    ("expressions-anded", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                                 {"key": "gpu", "operator": "DoesNotExist"}]}], False),
    ("terms-ored", [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                    {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}], True),
    ("match-fields-name", [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], True),
    ("match-fields-notin", [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}],
     False),
    ("match-fields-other-key", [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]}],
     False),
    ("empty-term-matches-nothing", [{}], False),
    ("no-terms", [], False),
]


@pytest.mark.parametrize(("rule", "ok"), [c[1:] for c in NODE_AFFINITY], ids=[c[0] for c in NODE_AFFINITY])
def test_node_affinity_filter(rule: Any, ok: bool) -> None:
    p = pod("p").req("1", "1Gi").group("pg")
    if isinstance(rule, dict):
        with_spec(p, **rule)
    else:
        p.affinity(rule)
    binds, msgs = schedule([p], [node("n1").alloc("4", "8Gi").label(**LABELS)], [podgroup("pg").min(1)])
    assert binds == ({"c1/p": "n1"} if ok else {})
    if not ok:
        assert msgs["p"] == "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    if not isinstance(rule, dict):  # the scalar helper agrees with the vectorised masks
        assert predicates.match_node_selector_terms(rule, Node(node("n1").label(**LABELS).build(), 0)) is ok


def test_vectorised_terms_agree_with_scalar_on_many_nodes() -> None:
    rng = np.random.default_rng(3)
    nodes = [node(f"n{i}").alloc("4", "8Gi").label(zone=str(rng.choice(["a", "b", "c"])), cores=str(rng.integers(1, 64)))
             for i in range(60)]
    snap = snapshots.build(nodes=[n.build() for n in nodes])
    reg = in_tree_registry()
    ssn = Session(snap, confs.load(CONF, actions=reg.action_names, plugins=reg.plugin_names), reg)
    view = ssn.plugins["predicates"].view
    for terms in [c[1] for c in NODE_AFFINITY if isinstance(c[1], list)]:
        want = [predicates.match_node_selector_terms(terms, n) for n in ssn.nodes]
        assert list(predicates.node_selector_terms_mask(view, terms)) == want


# --- taints, unschedulable nodes, max pods ------------------------------------------------------------------------

TAINTS = [
    ("no-schedule-untolerated", [("k", "v", "NoSchedule")], [], "node(s) had untolerated taint {k: v}"),
    ("no-execute-untolerated", [("k", "", "NoExecute")], [], "node(s) had untolerated taint {k: }"),
    ("prefer-no-schedule-is-not-a-filter", [("k", "v", "PreferNoSchedule")], [], None),
    ("tolerated-equal", [("k", "v", "NoSchedule")], [{"key": "k", "value": "v", "effect": "NoSchedule"}], None),
    ("tolerated-exists-any-effect", [("k", "v", "NoExecute")], [{"key": "k", "operator": "Exists"}], None),
    ("second-taint-untolerated", [("a", "1", "NoSchedule"), ("b", "2", "NoSchedule")],
     [{"key": "a", "operator": "Exists"}], "node(s) had untolerated taint {b: 2}"),
]


@pytest.mark.parametrize(("taints", "tolerations", "reason"), [c[1:] for c in TAINTS], ids=[c[0] for c in TAINTS])
def test_taint_toleration_filter(taints: list[tuple[str, str, str]], tolerations: list[dict[str, Any]],
                                 reason: str | None) -> None:
    n = node("n1").alloc("4", "8Gi")
    for k, v, e in taints:
        n.taint(k, v, e)
    p = with_spec(pod("p").req("1", "1Gi").group("pg"), tolerations=tolerations)
    binds, msgs = schedule([p], [n], [podgroup("pg").min(1)])
    assert binds == ({} if reason else {"c1/p": "n1"})
    if reason:
        assert msgs["p"] == f"0/1 nodes are available: 1 {reason}."


def test_unschedulable_node_and_its_toleration() -> None:
    nodes = [node("n1").alloc("4", "8Gi").unschedulable()]
    binds, msgs = schedule([pod("p").req("1", "1Gi").group("pg")], nodes, [podgroup("pg").min(1)])
    assert binds == {} and msgs["p"] == "0/1 nodes are available: 1 node(s) were unschedulable."
    p = pod("p").req("1", "1Gi").group("pg").tolerate("node.kubernetes.io/unschedulable", operator="Exists")
    assert schedule([p], nodes, [podgroup("pg").min(1)])[0] == {"c1/p": "n1"}


def test_max_pods_counts_pods_placed_in_the_session() -> None:
    pods, pg = gang("g", 3, min_member=1)
    binds, msgs = schedule(pods, [node("n1").alloc("8", "16Gi", pods=2)], [pg])
    assert len(binds) == 2
    assert msgs["g-2"] == "0/1 nodes are available: 1 Too many pods."


def test_failed_scheduling_summarises_reasons_per_node_class() -> None:
    nodes = [node("n1").alloc("4", "8Gi").label(zone="a").taint("dedicated", "infra"),
             node("n2").alloc("4", "8Gi").unschedulable(),
             node("n3").alloc("4", "8Gi").label(zone="b"), node("n4").alloc("1", "8Gi").label(zone="a")]
    p = pod("p").req("2", "1Gi").group("pg").selector(zone="a")
    _, msgs = schedule([p], nodes, [podgroup("pg").min(1)])
    assert msgs["p"] == ("0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node "
                         "affinity/selector, 1 node(s) had untolerated taint {dedicated: infra}, "
                         "1 node(s) were unschedulable.")


@pytest.mark.parametrize(("arg", "value", "binds"), [
    ("predicate.NodeAffinityEnable", False, 1), ("predicate.NodeAffinityEnable", "false", 1),
    ("predicate.NodeAffinityEnable", True, 0), ("predicate.TaintTolerationEnable", False, 0),
], ids=["affinity-off", "affinity-off-string", "affinity-on", "taints-off-affinity-still-on"])
def test_predicate_switch_arguments(arg: str, value: Any, binds: int) -> None:
    conf = tiers_conf("allocate", ["gang"], [{"name": "predicates", "arguments": {arg: value}}, "nodeorder"])
    p = pod("p").req("1", "1Gi").group("pg").selector(zone="x")
    assert len(schedule([p], [node("n1").alloc("4", "8Gi")], [podgroup("pg").min(1)], conf)[0]) == binds


# --- host ports (nodeports filter table shapes) -------------------------------------------------------------------

PORTS = [
    ("same-port-tcp", ("0.0.0.0", "TCP", 8080), {("0.0.0.0", "TCP", 8080)}, True),
    ("other-protocol", ("0.0.0.0", "UDP", 8080), {("0.0.0.0", "TCP", 8080)}, False),
    ("other-port", ("0.0.0.0", "TCP", 8081), {("0.0.0.0", "TCP", 8080)}, False),
    ("specific-ip-vs-all", ("10.0.0.1", "TCP", 8080), {("0.0.0.0", "TCP", 8080)}, True),
    ("all-vs-specific-ip", ("0.0.0.0", "TCP", 8080), {("10.0.0.1", "TCP", 8080)}, True),
    ("different-specific-ips", ("10.0.0.2", "TCP", 8080), {("10.0.0.1", "TCP", 8080)}, False),
    ("same-specific-ip", ("10.0.0.1", "TCP", 8080), {("10.0.0.1", "TCP", 8080)}, True),
]


@pytest.mark.parametrize(("want", "used", "conflict"), [c[1:] for c in PORTS], ids=[c[0] for c in PORTS])
def test_host_port_conflicts(want: tuple[str, str, int], used: set[tuple[str, str, int]], conflict: bool) -> None:
    assert port_conflict(want, used) is conflict


def test_host_ports_against_pods_on_nodes_and_placed_in_session() -> None:
    nodes = [node("n1").alloc("8", "16Gi"), node("n2").alloc("8", "16Gi"), node("n3").alloc("8", "16Gi")]
    busy = host_port(existing("web-old", "n1"), 80)
    pods, pg = gang("web", 2, edit=lambda p: host_port(p, 80))
    binds, _ = schedule([busy, *pods], nodes, [pg])
    assert sorted(binds.values()) == ["n2", "n3"]  # n1's port is taken; the gang's two pods cannot share a node
    pods, pg = gang("web", 3, edit=lambda p: host_port(p, 80))
    binds, msgs = schedule([busy, *pods], nodes, [pg])
    assert binds == {}  # the gang needs three nodes with port 80 free; only two have it
    assert any("node(s) didn't have free ports for the requested pod ports" in m for m in msgs.values())
    pods, pg = gang("dns", 2, edit=lambda p: host_port(p, 80, protocol="UDP"))
    assert len(schedule([busy, *pods], nodes[:1], [pg])[0]) == 0  # both on n1 would collide with each other
    pods, pg = gang("dns", 1, edit=lambda p: host_port(p, 80, protocol="UDP"))
    assert schedule([busy, *pods], nodes[:1], [pg])[0] == {"c1/dns-0": "n1"}  # UDP 80 is free next to TCP 80


# --- inter-pod affinity (interpodaffinity filter table shapes) -----------------------------------------------------

ZONES = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b")]
ZONE = "topology.kubernetes.io/zone"

AFFINITY = [
    ("affinity-to-zone-of-existing", [existing("db", "b1", {"app": "db"})],
     dict(required=[term({"app": "db"}, ZONE)]), {"b1", "b2"}, "node(s) didn't match pod affinity rules"),
    ("affinity-to-host-of-existing", [existing("db", "a2", {"app": "db"})],
     dict(required=[term({"app": "db"})]), {"a2"}, "node(s) didn't match pod affinity rules"),
    ("affinity-nothing-matches-not-self", [], dict(required=[term({"app": "db"}, ZONE)]), set(),
     "node(s) didn't match pod affinity rules"),
    ("affinity-other-namespace-ignored", [existing("db", "b1", {"app": "db"}, namespace="c2")],
     dict(required=[term({"app": "db"}, ZONE)]), set(), "node(s) didn't match pod affinity rules"),
    ("affinity-listed-namespace", [existing("db", "b1", {"app": "db"}, namespace="c2")],
     dict(required=[term({"app": "db"}, ZONE, namespaces=["c2"])]), {"b1", "b2"}, ""),
    ("affinity-empty-namespace-selector-all", [existing("db", "b1", {"app": "db"}, namespace="c2")],
     dict(required=[term({"app": "db"}, ZONE, namespaceSelector={})]), {"b1", "b2"}, ""),
    ("affinity-namespace-selector-by-name", [existing("db", "b1", {"app": "db"}, namespace="c2")],
     dict(required=[term({"app": "db"}, ZONE, namespaceSelector={
         "matchLabels": {"kubernetes.io/metadata.name": "c2"}})]), {"b1", "b2"}, ""),
    ("affinity-all-terms-same-pod", [existing("db", "b1", {"app": "db"}), existing("cache", "a1", {"tier": "c"})],
     dict(required=[term({"app": "db"}, ZONE), term({"tier": "c"}, ZONE)]), set(), ""),
    ("anti-affinity-zone", [existing("db", "b1", {"app": "db"})], dict(anti=[term({"app": "db"}, ZONE)]),
     {"a1", "a2"}, "node(s) didn't match pod anti-affinity rules"),
    ("anti-affinity-host", [existing("db", "b1", {"app": "db"})], dict(anti=[term({"app": "db"})]),
     {"a1", "a2", "b2"}, "node(s) didn't match pod anti-affinity rules"),
    ("anti-affinity-unknown-key-ignored", [existing("db", "b1", {"app": "db"})],
     dict(anti=[term({"app": "db"}, "rack")]), {"a1", "a2", "b1", "b2"}, ""),
    ("anti-affinity-terminating-pod-counts", [existing("db", "b1", {"app": "db"}).deleting()],
     dict(anti=[term({"app": "db"}, ZONE)]), {"a1", "a2"}, ""),
]


@pytest.mark.parametrize(("others", "rules", "allowed", "reason"), [c[1:] for c in AFFINITY],
                         ids=[c[0] for c in AFFINITY])
def test_inter_pod_affinity_filter(others: list[Any], rules: dict[str, Any], allowed: set[str], reason: str) -> None:
    p = pod_affinity(pod("p", "c1").req("1", "1Gi").group("pg").label(app="web"), **rules)
    nodes = [copy.deepcopy(n) for n in ZONES]
    d = run(pods=[*others, p], nodes=nodes, queues=[queue("c1")], conf=CONF,
            podgroups=[podgroup("pg").min(1), podgroup("running").min(0).phase("Running"),
                       podgroup("running", "c2").min(0).phase("Running")])
    got = d.bind_map().get("c1/p")
    if allowed:
        assert got in allowed
    else:
        assert got is None
    if reason and len(allowed) < 4:
        # which nodes were refused and why: run the predicate on every node
        snap = snapshots.build(pods=[o.build() for o in [*others, p]], nodes=[n.build() for n in nodes],
                               podgroups=[podgroup("pg").min(1).build(), podgroup("running").min(0).build(),
                                          podgroup("running", "c2").min(0).build()], queues=[queue("c1").build()])
        reg = in_tree_registry()
        ssn = Session(snap, confs.load(CONF, actions=reg.action_names, plugins=reg.plugin_names), reg)
        task = next(t for t in snap.tasks.values() if t.name == "p")
        f = ssn.predicate(task)
        refused = {ssn.arrays.names[i]: f.reasons[i] for i in np.flatnonzero(~f.feasible)}
        assert set(refused) == {"a1", "a2", "b1", "b2"} - allowed
        assert set(refused.values()) == {reason}
        assert bool(f.unresolvable[np.flatnonzero(~f.feasible)].all()) is (reason == predicates._affinity.AFFINITY_MISMATCH)


def test_first_pod_with_affinity_to_itself_is_not_stuck() -> None:
    pods, pg = gang("web", 3, labels={"app": "web"},
                    edit=lambda p: pod_affinity(p, required=[term({"app": "web"}, ZONE)]))
    binds, _ = schedule(pods, [copy.deepcopy(n) for n in ZONES], [pg])
    zones = {n[:1] for n in binds.values()}
    assert len(binds) == 3 and len(zones) == 1  # the first lands anywhere; the rest follow it to its zone


def test_gang_with_self_anti_affinity_spreads_one_per_node_in_session() -> None:
    pods, pg = gang("ps", 4, labels={"app": "ps"}, edit=lambda p: pod_affinity(p, anti=[term({"app": "ps"})]))
    binds, _ = schedule(pods, [copy.deepcopy(n) for n in ZONES], [pg])
    assert sorted(binds.values()) == ["a1", "a2", "b1", "b2"]
    pods, pg = gang("ps", 5, labels={"app": "ps"}, edit=lambda p: pod_affinity(p, anti=[term({"app": "ps"})]))
    binds, msgs = schedule(pods, [copy.deepcopy(n) for n in ZONES], [pg])
    assert binds == {}  # 5 pods, one per node, 4 nodes: the gang is not placed at all
    assert "4 node(s) didn't match pod anti-affinity rules" in msgs["ps-4"]


def test_existing_pods_anti_affinity_rejects_the_incoming_pod() -> None:
    loner = pod_affinity(existing("loner", "a1", {"app": "loner"}), anti=[term({"app": "web"}, ZONE)])
    p = pod("p").req("1", "1Gi").group("pg").label(app="web")
    d = run(pods=[loner, p], nodes=[copy.deepcopy(n) for n in ZONES], queues=[queue("c1")], conf=CONF,
            podgroups=[podgroup("pg").min(1), podgroup("running").min(0).phase("Running")])
    assert d.bind_map()["c1/p"] in {"b1", "b2"}
    # and placed in the session: a gang member with anti-affinity keeps later members of other gangs away
    a_pods, a_pg = gang("a", 1, labels={"app": "a"}, edit=lambda p: pod_affinity(p, anti=[term({"app": "b"}, ZONE)]))
    b_pods, b_pg = gang("b", 2, labels={"app": "b"})
    a_pg.created(1)
    b_pg.created(2)
    binds, _ = schedule([*a_pods, *b_pods], [zoned("a1", "a"), zoned("b1", "b")], [a_pg, b_pg])
    zone_of = {"a1": "a", "b1": "b"}
    assert zone_of[binds["c1/a-0"]] not in {zone_of[binds["c1/b-0"]], zone_of[binds["c1/b-1"]]}


def test_existing_anti_affinity_with_namespace_selector_uses_namespace_labels() -> None:
    loner = pod_affinity(existing("loner", "a1", {"app": "loner"}), anti=[
        term({"app": "web"}, ZONE, namespaceSelector={"matchLabels": {"team": "x"}})])
    p = pod("p", "c2").req("1", "1Gi").group("pg").label(app="web")
    objs = dict(pods=[loner.build(), p.build()], nodes=[n.build() for n in ZONES],
                podgroups=[podgroup("pg", "c2").min(1).build(), podgroup("running").min(0).phase("Running").build()],
                queues=[queue("c1").build()])
    reg = in_tree_registry()
    c = confs.load(CONF, actions=reg.action_names, plugins=reg.plugin_names)
    from lahar.scheduler.session import run_session
    labelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c2", "labels": {"team": "x"}}}
    for namespaces, zones in (([], {"a", "b"}), ([labelled], {"b"})):
        d = run_session(snapshots.build(**objs, namespaces=namespaces), c, registry=reg)
        assert d.bind_map()["c2/p"][:1] in zones
        if namespaces:
            assert d.bind_map()["c2/p"][:1] == "b"


def test_pod_affinity_switch_off() -> None:
    conf = tiers_conf("allocate", ["gang"], [{"name": "predicates", "arguments": {
        "predicate.PodAffinityEnable": False}}, "nodeorder"])
    p = pod_affinity(pod("p").req("1", "1Gi").group("pg").label(app="web"), required=[term({"app": "db"})])
    assert len(schedule([p], [zoned("a1", "a")], [podgroup("pg").min(1)], conf)[0]) == 1


# --- pod topology spread (podtopologyspread filter table shapes) ---------------------------------------------------

def web(name: str, on: str) -> pod:
    return existing(name, on, {"app": "web"})


SPREAD = [
    # (id, existing web pods by node, constraint extras, nodes allowed for the new pod)
    ("skew-1-zone", {"a1": 2, "b1": 1}, dict(key=ZONE), {"b1", "b2"}),
    ("skew-1-balanced", {"a1": 1, "b1": 1}, dict(key=ZONE), {"a1", "a2", "b1", "b2"}),
    ("skew-2-allows-more", {"a1": 2, "b1": 1}, dict(key=ZONE, max_skew=2), {"a1", "a2", "b1", "b2"}),
    ("hostname-skew", {"a1": 1, "a2": 1, "b1": 1}, dict(key="kubernetes.io/hostname"), {"b2"}),
    ("selector-not-matching-self", {"a1": 2}, dict(key=ZONE, selector={"app": "other"}), {"a1", "a2", "b1", "b2"}),
    ("min-domains-above-domains", {"a1": 1, "b1": 1}, dict(key=ZONE, minDomains=3), set()),
    ("min-domains-met", {"a1": 1}, dict(key=ZONE, minDomains=2), {"b1", "b2"}),
    ("terminating-pods-not-counted", {"a1": -2, "b1": 1}, dict(key=ZONE), {"a1", "a2"}),
]


@pytest.mark.parametrize(("placed", "constraint", "allowed"), [c[1:] for c in SPREAD], ids=[c[0] for c in SPREAD])
def test_topology_spread_filter(placed: dict[str, int], constraint: dict[str, Any], allowed: set[str]) -> None:
    others = []
    for n, count in placed.items():
        for k in range(abs(count)):
            w = web(f"w-{n}-{k}", n)
            others.append(w.deleting() if count < 0 else w)
    key = constraint.pop("key")
    p = spread(pod("p").req("1", "1Gi").group("pg").label(app="web"), key, **constraint)
    reg = in_tree_registry()
    snap = snapshots.build(pods=[o.build() for o in [*others, p]], nodes=[n.build() for n in ZONES],
                           podgroups=[podgroup("pg").min(1).build(), podgroup("running").min(0).build()],
                           queues=[queue("c1").build()])
    ssn = Session(snap, confs.load(CONF, actions=reg.action_names, plugins=reg.plugin_names), reg)
    task = next(t for t in snap.tasks.values() if t.name == "p")
    f = ssn.predicate(task)
    assert {ssn.arrays.names[i] for i in np.flatnonzero(f.feasible)} == allowed
    for i in np.flatnonzero(~f.feasible):
        assert f.reasons[i] == "node(s) didn't match pod topology spread constraints"
        assert not f.unresolvable[i]


def test_spread_missing_label_is_unresolvable_and_policies_pick_domains() -> None:
    nodes = [*[copy.deepcopy(n) for n in ZONES], node("bare").alloc("8", "16Gi"),
             zoned("c1", "c").taint("maint", "x")]
    p = spread(pod("p").req("1", "1Gi").group("pg").label(app="web"), ZONE)
    reg = in_tree_registry()
    others = [web("w1", "a1"), web("w2", "b1")]
    for policy in (None, "Honor"):
        q = copy.deepcopy(p)
        if policy:
            q.obj["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = policy
        q.obj["spec"]["tolerations"] = [{"key": "maint", "operator": "Exists"}] if policy is None else []
        snap = snapshots.build(pods=[o.build() for o in [*others, q]], nodes=[n.build() for n in nodes],
                               podgroups=[podgroup("pg").min(1).build(), podgroup("running").min(0).build()],
                               queues=[queue("c1").build()])
        ssn = Session(snap, confs.load(CONF, actions=reg.action_names, plugins=reg.plugin_names), reg)
        task = next(t for t in snap.tasks.values() if t.name == "p")
        f = ssn.predicate(task)
        names = ssn.arrays.names
        bare = names.index("bare")
        assert f.reasons[bare] == "node(s) didn't match pod topology spread constraints (missing required label)"
        assert f.unresolvable[bare]
        feasible = {names[i] for i in np.flatnonzero(f.feasible)}
        if policy is None:
            # tolerated taint, zone c counts as an empty domain: min is 0, so only zone c (skew 0+1-0) fits
            assert feasible == {"c1"}
        else:
            # taints honoured: zone c is not a domain (and c1 is refused for its taint); a and b are level
            assert feasible == {"a1", "a2", "b1", "b2"} - {"c1"}


def test_spread_counts_pods_placed_earlier_in_the_session() -> None:
    pods, pg = gang("web", 4, labels={"app": "web"}, edit=lambda p: spread(p, ZONE))
    binds, _ = schedule(pods, [copy.deepcopy(n) for n in ZONES], [pg])
    zones = [b[:1] for b in binds.values()]
    assert len(binds) == 4 and zones.count("a") == 2 and zones.count("b") == 2


def test_node_affinity_policy_limits_domains() -> None:
    # the pod may only go to zone a; with Honor (default), zone b is no domain so a's count is the minimum
    others = [web("w1", "a1"), web("w2", "a1")]
    nodes = [copy.deepcopy(n) for n in ZONES]
    for policy, bound in ((None, True), ("Ignore", False)):
        p = spread(pod("p").req("1", "1Gi").group("pg").label(app="web").selector(**{ZONE: "a"}), ZONE)
        if policy:
            p.obj["spec"]["topologySpreadConstraints"][0]["nodeAffinityPolicy"] = policy
        binds, msgs = schedule([*others, p], nodes, [podgroup("pg").min(1)])
        assert ("c1/p" in binds) is bound, msgs


# --- upstream predicates_test.go, the cases that run a session (TestEventHandler, TestNodeNum, TestPodAntiAffinity);
# the rest test Go-side wiring (annotation maps, DRA/volume-binding argument parsing, kube framework plugin lists,
# pre-score plumbing, failure-reason aggregation order, skip sets, reserve rollback) and are not ported -------------

def _worker_anti_affinity(p: pod) -> pod:
    """Required anti-affinity to every `role=worker` pod, per hostname."""
    p.obj["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]},
         "topologyKey": "kubernetes.io/hostname"}]}}
    return p


def _only(name: str, *on: str) -> dict[str, Any]:
    from lahar.scheduler.framework.conf import SWITCHES
    return {"name": name, **{s: s in on for s in SWITCHES if s != "enableHierarchy"}}


def test_pod_deallocate_upstream() -> None:
    """TestEventHandler: pg1's two anti-affine workers cannot both get a node (node2 is too small), so pg1 is
    discarded and its allocation undone; pg2's worker then takes node1."""
    from tests.builders import priority_class
    workers = [_worker_anti_affinity(pod("worker-1", "ns1").req("3", "3k").group("pg1").label(role="worker")
                                     .selector(selector="worker")),
               _worker_anti_affinity(pod("worker-2", "ns1").req("5", "5k").group("pg1").label(role="worker")),
               _worker_anti_affinity(pod("worker-3", "ns1").req("4", "4k").group("pg2").label(role="worker"))]
    d = run(pods=workers,
            nodes=[node("node1").alloc("14", "14k", 10).label(selector="worker", **{"kubernetes.io/hostname": "node1"}),
                   node("node2").alloc("3", "3k", 10).label(**{"kubernetes.io/hostname": "node2"})],
            podgroups=[podgroup("pg1", "ns1").queue("q1").min(2).priority_class("p2"),
                       podgroup("pg2", "ns1").queue("q1").min(1).priority_class("p1")],
            queues=[queue("q1").weight(0)], priority_classes=[priority_class("p1", 1), priority_class("p2", 2)],
            conf=tiers_conf("allocate", [_only("predicates", "enablePredicate"),
                                         _only("gang", "enableJobReady", "enableJobPipelined"),
                                         _only("priority", "enableJobOrder")]))
    assert d.bind_map() == {"ns1/worker-3": "node1"}


def test_node_pod_count_upstream() -> None:
    """TestNodeNum: three BestEffort pods, a node with two pod slots: allocate then backfill bind two."""
    from tests.builders import priority_class
    d = run(pods=[pod("worker-1", "ns1").group("pg1").label(role="worker").selector(selector="worker"),
                  pod("worker-2", "ns1").group("pg1").label(role="worker"),
                  pod("worker-3", "ns1").group("pg2").label(role="worker")],
            nodes=[node("node1").alloc("4", "4k", 2).label(selector="worker")],
            podgroups=[podgroup("pg1", "ns1").queue("q1").min(2).priority_class("p2"),
                       podgroup("pg2", "ns1").queue("q1").min(1).priority_class("p1")],
            queues=[queue("q1").weight(0)], priority_classes=[priority_class("p1", 1), priority_class("p2", 2)],
            conf=tiers_conf("allocate, backfill", [_only("predicates", "enablePredicate")]))
    assert d.bind_map() == {"ns1/worker-1": "node1", "ns1/worker-2": "node1"}


def test_anti_affinity_blocks_preemption_upstream() -> None:
    """TestPodAntiAffinity: the high-priority worker-3 is anti-affine to worker-1 (same priority, not a victim), so
    evicting the low-priority worker-2 would not help: nothing is evicted or pipelined. (lahar's preempt still checks
    only resources once the node is a candidate, and finds worker-3 fits n1's idle CPU without evicting; a statement
    that evicts nothing is not committed, so the outcome is upstream's.)"""
    from tests.builders import priority_class
    d = run(pods=[_worker_anti_affinity(pod("worker-1", "ns1").req("3", "3G").group("pg1").label(role="worker")
                                        .priority(100000).on("n1")),
                  pod("worker-2", "ns1").req("3", "3G").group("pg1").priority(10).on("n1"),
                  _worker_anti_affinity(pod("worker-3", "ns1").req("3", "3G").group("pg2").label(role="worker")
                                        .priority(100000))],
            nodes=[node("n1").alloc("12", "12G", 2).label(**{"kubernetes.io/hostname": "node1"})],
            podgroups=[podgroup("pg1", "ns1").queue("q1").min(0).phase("Running").priority_class("low-priority"),
                       podgroup("pg2", "ns1").queue("q1").min(1).priority_class("high-priority")],
            queues=[queue("q1").weight(0).capability(cpu="9", memory="9G")],
            priority_classes=[priority_class("low-priority", 10), priority_class("high-priority", 100000)],
            conf=tiers_conf("allocate, preempt", [_only("predicates", "enablePredicate"),
                                                  _only("priority", "enablePreemptable", "enableJobStarving")]))
    assert (d.evictions, d.pipelined) == ([], {})
