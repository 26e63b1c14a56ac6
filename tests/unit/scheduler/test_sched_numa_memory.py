"""numa-aware with memory and hugepages as hint providers: the static memory manager's hints and Allocate over the
per-NUMA memory a Numatopology publishes (`lahar.sh/numa-memory`), merged with the CPU hints; running pods' and this
session's memory subtracted; devcluster publishing the annotation. Tables as data, sessions on a 2-NUMA machine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.devcluster import nodes as dnodes
from lahar.devcluster import profiles
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.placement import Placement, explain, placement
from lahar.scheduler.placement.numatopology import NUMA_MEMORY_ANNOTATION, decision_annotation, node_topology
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.topology import hints
from lahar.scheduler.topology.memory import container_memory_requests, take_memory
from tests.builders import guaranteed_pod as gpod
from tests.builders import node, pod, podgroup, queue, tiers_conf

GI = 1 << 30

# 8 CPUs, 2 NUMA nodes (Volcano's cpu_mng_test.go machine): cpu -> (numa, core, socket)
CPU_DETAIL = {0: (0, 0, 0), 1: (0, 0, 0), 2: (0, 1, 0), 3: (0, 1, 0),
              4: (1, 2, 1), 5: (1, 2, 1), 6: (1, 3, 1), 7: (1, 3, 1)}


def numatopo(name: str, memory: Any = None, *, policy: str = "best-effort") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if memory is not None:
        meta["annotations"] = {NUMA_MEMORY_ANNOTATION: memory if isinstance(memory, str) else json.dumps(memory)}
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": meta,
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
                     "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
                     "cpuDetail": {str(c): {k: v for k, v in (("numa", n), ("core", k_), ("socket", s)) if v}
                                   for c, (n, k_, s) in CPU_DETAIL.items()}}}


def mem(n0: str, n1: str, **hugepages: tuple[str, str]) -> dict[str, dict[str, str]]:
    """Per-NUMA allocatable: memory on NUMA 0 and 1, hugepages_1Gi=("0", "4Gi")."""
    out = {"0": {"memory": n0}, "1": {"memory": n1}}
    for size, (h0, h1) in hugepages.items():
        key = "hugepages-" + size.removeprefix("hugepages_")
        out["0"][key], out["1"][key] = h0, h1
    return out


CONF = tiers_conf("allocate", ["gang"], ["predicates", "proportion", "numa-aware"])


def session(pods: list[Any], topos: list[dict[str, Any]], *, min_member: int = 1,
            nodes: list[Any] | None = None, run: bool = True) -> tuple[Session, Any]:
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    nodes = nodes or [node(t["metadata"]["name"]).alloc("8", "64Gi", hugepages_1Gi="8Gi") for t in topos]
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in nodes],
                           podgroups=[podgroup("pg1").min(min_member).build()], queues=[queue("c1").build()],
                           numatopologies=topos)
    ssn = Session(snap, c, registry, uid="ssn-mem")
    if not run:  # as `lahar explain` opens it: no action runs
        return ssn, None
    for name in c.actions:
        registry.action(name, c.action_arguments(name)).execute(ssn)
    return ssn, ssn.close()


def decision(d: Any, uid: str) -> dict[str, Any]:
    return json.loads(d.annotations[uid]["volcano.sh/topology-decision"])["numa"]


# --- pure cores ----------------------------------------------------------------------------------------------------

def _machine(free0: int, free1: int, alloc0: int | None = None, alloc1: int | None = None) -> dict:
    return {0: hints.NUMAMemory({"memory": alloc0 or free0}, {"memory": free0}),
            1: hints.NUMAMemory({"memory": alloc1 or free1}, {"memory": free1})}


TAKE = [
    # (id, request GiB, free GiB per NUMA, allocatable GiB per NUMA, merged hint affinity, expected GiB per NUMA)
    ("in-the-hint", 2, (4, 4), (4, 4), (1,), {1: 2}),
    ("no-preference-takes-the-default-hint", 2, (4, 4), (4, 4), None, {0: 2}),
    ("default-hint-skips-a-full-node", 3, (1, 4), (4, 4), None, {1: 3}),
    ("extended-to-both-filled-in-order", 6, (4, 4), (4, 4), (1,), {0: 4, 1: 2}),
    ("wide-hint-fills-lowest-first", 3, (4, 4), (4, 4), (0, 1), {0: 3}),
    ("wide-hint-skips-empty-node", 3, (0, 4), (4, 4), (0, 1), {1: 3}),
    ("nothing-fits", 9, (4, 4), (4, 4), (0,), None),
    ("free-too-small-anywhere", 5, (2, 2), (4, 4), None, None),
]


@pytest.mark.parametrize(("req", "free", "alloc", "affinity", "want"), [t[1:] for t in TAKE], ids=[t[0] for t in TAKE])
def test_take_memory_like_the_static_memory_manager(req: int, free: tuple[int, int], alloc: tuple[int, int],
                                                    affinity: tuple[int, ...] | None, want: dict | None) -> None:
    machine = _machine(free[0] * GI, free[1] * GI, alloc[0] * GI, alloc[1] * GI)
    got = take_memory({"memory": req * GI}, machine, affinity)
    assert got == (None if want is None else {n: {"memory": v * GI} for n, v in want.items()})


def _containers(*resources: dict[str, str], init: tuple[tuple[dict[str, str], bool], ...] = ()) -> dict[str, Any]:
    def c(name: str, r: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "resources": {"requests": r, "limits": r}}
        if sidecar:
            out["restartPolicy"] = "Always"
        return out
    return {"spec": {"containers": [c(f"c{i}", r) for i, r in enumerate(resources)],
                     "initContainers": [c(f"i{i}", r, s) for i, (r, s) in enumerate(init)]}}


G1 = {"cpu": "1", "memory": "1Gi"}
G2H = {"cpu": "1", "memory": "2Gi", "hugepages-1Gi": "2Gi"}
REQUESTS = [
    ("container-scope", _containers(G1, G2H), "container", [{"memory": GI}, {"memory": 2 * GI, "hugepages-1Gi": 2 * GI}]),
    ("pod-scope-sums", _containers(G1, G2H), "pod", [{"memory": 3 * GI, "hugepages-1Gi": 2 * GI}]),
    ("pod-scope-init-peak", _containers(G1, init=(({"cpu": "1", "memory": "5Gi"}, False),)), "pod",
     [{"memory": 5 * GI}]),
    ("pod-scope-sidecar-adds", _containers(G1, init=(({"cpu": "1", "memory": "2Gi"}, True),)), "pod",
     [{"memory": 3 * GI}]),
    ("burstable-pins-nothing", {"spec": {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}}, "container", []),
]


@pytest.mark.parametrize(("pod_", "scope", "want"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_container_memory_requests(pod_: dict[str, Any], scope: str, want: list[dict[str, int]]) -> None:
    assert container_memory_requests(pod_, scope) == want


def test_decision_annotation_renders_memory_as_binary_quantities() -> None:
    got = decision_annotation({0: {"cpu": 2, "memory": 4 * GI, "hugepages-2Mi": 2 << 20}, 1: {"memory": 0}})
    assert json.loads(got) == {"numa": {"0": {"cpu": "2", "hugepages-2Mi": "2Mi", "memory": "4Gi"}}}


MALFORMED = [
    ("not-json", "lots of memory"),
    ("a-list", "[]"),
    ("empty", "{}"),
    ("numa-not-an-object", '{"0": "1Gi"}'),
    ("bad-quantity", '{"0": {"memory": "lots"}}'),
    ("negative", '{"0": {"memory": "-1Gi"}}'),
    ("bad-numa-id", '{"zero": {"memory": "1Gi"}}'),
    ("not-memory", '{"0": {"cpu": "4"}}'),
    ("number-as-bool", '{"0": {"memory": true}}'),
]


@pytest.mark.parametrize("raw", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_annotation_is_ignored(raw: str) -> None:
    assert node_topology(numatopo("n1", raw)).memory is None
    # memory then gives no preference: a pod bigger than any claimed NUMA memory still binds, as before
    _, d = session([gpod("p1", "2", "6Gi", policy="single-numa-node")], [numatopo("n1", raw)])
    (b,) = d.binds
    assert "memory" not in json.dumps(decision(d, b.uid))


def test_node_topology_reads_the_annotation() -> None:
    t = node_topology(numatopo("n1", mem("4Gi", "8Gi", hugepages_1Gi=("0", "2Gi"))))
    assert t.memory == {0: {"memory": 4 * GI, "hugepages-1Gi": 0}, 1: {"memory": 8 * GI, "hugepages-1Gi": 2 * GI}}
    assert t.numa_nodes == (0, 1)


# --- the plugin in a session -------------------------------------------------------------------------------------

PLACE = [
    # (id, per-NUMA memory, node policy, pod (cpu, memory, extra), binds, expected decision or reason fragment)
    ("fits-only-numa-1", mem("2Gi", "8Gi"), "single-numa-node", ("2", "4Gi", {}), True,
     {"1": {"cpu": "2", "memory": "4Gi"}}),
    ("fits-both-cpu-order-wins", mem("8Gi", "8Gi"), "single-numa-node", ("2", "4Gi", {}), True,
     {"0": {"cpu": "2", "memory": "4Gi"}}),
    ("needs-two-numa-single-refused", mem("4Gi", "4Gi"), "single-numa-node", ("2", "6Gi", {}), False,
     "not enough free memory on NUMA nodes"),
    ("needs-two-numa-best-effort-both", mem("4Gi", "4Gi"), "best-effort", ("2", "6Gi", {}), True,
     {"0": {"cpu": "2", "memory": "4Gi"}, "1": {"memory": "2Gi"}}),
    # the kubelet's merge: CPUs' narrowest {0} and memory's narrowest {0,1} differ, so no preferred hint exists
    ("needs-two-numa-restricted-refused", mem("4Gi", "4Gi"), "restricted", ("2", "6Gi", {}), False,
     "(restricted: Resources cannot be allocated with Topology locality)"),
    ("more-than-all-numa-nodes", mem("1Gi", "1Gi"), "best-effort", ("2", "3Gi", {}), False,
     "cannot be assigned by numa: not enough free memory on NUMA nodes"),
    ("hugepages-1gi-only-on-numa-1", mem("8Gi", "8Gi", hugepages_1Gi=("0", "4Gi")), "single-numa-node",
     ("2", "1Gi", {"hugepages_1Gi": "2Gi"}), True, {"1": {"cpu": "2", "hugepages-1Gi": "2Gi", "memory": "1Gi"}}),
    ("hugepages-1gi-split-refused", mem("8Gi", "8Gi", hugepages_1Gi=("2Gi", "2Gi")), "single-numa-node",
     ("2", "1Gi", {"hugepages_1Gi": "3Gi"}), False, "not enough free hugepages-1Gi on NUMA nodes"),
    ("whole-numa-cpus-follow-memory", mem("1Gi", "8Gi"), "single-numa-node", ("4", "4Gi", {}), True,
     {"1": {"cpu": "4", "memory": "4Gi"}}),
]


@pytest.mark.parametrize(("memory", "policy", "request_", "binds", "want"), [p[1:] for p in PLACE],
                         ids=[p[0] for p in PLACE])
def test_memory_takes_part_in_the_merge(memory: dict, policy: str, request_: tuple[str, str, dict[str, str]],
                                       binds: bool, want: Any) -> None:
    cpu, size, extra = request_
    _, d = session([gpod("p1", cpu, size, **extra)], [numatopo("n1", memory, policy=policy)])
    if binds:
        (b,) = d.binds
        assert decision(d, b.uid) == want
    else:
        assert not d.binds
        (cond,) = d.pod_conditions
        assert want in cond.message and "cannot be assigned by numa" in cond.message


RUNNING = [
    # (id, running pod's topology-decision, where the new 4Gi single-numa-node pod lands)
    ("nothing-running", None, "0"),
    ("running-holds-numa-0", {"numa": {"0": {"cpu": "1", "memory": "6Gi"}}}, "1"),
    ("running-holds-little", {"numa": {"0": {"cpu": "1", "memory": "2Gi"}}}, "0"),
    ("running-holds-hugepages-only", {"numa": {"0": {"hugepages-1Gi": "4Gi"}}}, "0"),
    ("garbage-decision-ignored", "not json", "0"),
]


@pytest.mark.parametrize(("held", "lands"), [r[1:] for r in RUNNING], ids=[r[0] for r in RUNNING])
def test_running_pods_memory_is_subtracted(held: Any, lands: str) -> None:
    pods = [gpod("p1", "1", "4Gi", policy="single-numa-node")]
    if held is not None:
        old = gpod("old", "1", "1Gi").on("n1")
        old.annotate(**{"volcano.sh/topology-decision": held if isinstance(held, str) else json.dumps(held)})
        pods.append(old)
    _, d = session(pods, [numatopo("n1", mem("8Gi", "8Gi"))])
    (b,) = d.binds
    assert list(decision(d, b.uid)) == [lands]
    assert decision(d, b.uid)[lands]["memory"] == "4Gi"


SESSION = [
    # (id, pods of 3Gi single-numa-node, bound)
    ("two-fit-one-per-numa", 2, 2),
    ("third-would-over-commit", 3, 0),  # gang of 3: all or nothing
]


@pytest.mark.parametrize(("count", "bound"), [s[1:] for s in SESSION], ids=[s[0] for s in SESSION])
def test_session_reservations_do_not_over_commit_numa_memory(count: int, bound: int) -> None:
    pods = [gpod(f"p{i}", "1", "3Gi", policy="single-numa-node") for i in range(count)]
    ssn, d = session(pods, [numatopo("n1", mem("4Gi", "4Gi"))], min_member=count)
    assert len(d.binds) == bound
    if bound:
        assert sorted(next(iter(decision(d, b.uid))) for b in d.binds) == ["0", "1"]
    else:
        p = placement(ssn)
        assert not p.reserved and p.free_memory(0) == {0: {"memory": 4 * GI}, 1: {"memory": 4 * GI}}  # undone


def test_pod_scope_sums_the_containers() -> None:
    def two_containers(name: str) -> pod:
        p = gpod(name, "1", "3Gi", policy="single-numa-node")
        c = p.obj["spec"]["containers"]
        c.append({**json.loads(json.dumps(c[0])), "name": "d"})
        return p

    topo = numatopo("n1", mem("4Gi", "4Gi"))
    _, d = session([two_containers("p1")], [topo])  # container scope: one container per NUMA node
    (b,) = d.binds
    assert decision(d, b.uid) == {"0": {"cpu": "1", "memory": "3Gi"}, "1": {"cpu": "1", "memory": "3Gi"}}
    scoped = node("n1").alloc("8", "64Gi").annotate(**{"lahar.sh/topology-manager-scope": "pod"})
    _, d = session([two_containers("p1")], [topo], nodes=[scoped])  # pod scope: 6Gi on one NUMA node
    assert not d.binds and "not enough free memory" in d.pod_conditions[0].message


def test_node_without_the_annotation_behaves_as_before() -> None:
    _, d = session([gpod("p1", "2", "48Gi", policy="single-numa-node")], [numatopo("n1")])
    (b,) = d.binds
    assert decision(d, b.uid) == {"0": {"cpu": "2"}}
    assert not placement(_session_only([numatopo("n1")])).free_memory(0)


def _session_only(topos: list[dict[str, Any]]) -> Session:
    ssn, _ = session([], topos, run=False)
    return ssn


def test_memory_annotation_is_part_of_the_node_class() -> None:
    topos = [numatopo("a", mem("4Gi", "4Gi")), numatopo("b", mem("4Gi", "4Gi")), numatopo("c", mem("8Gi", "4Gi")),
             numatopo("d")]
    p = Placement(_session_only(topos))
    a, b, c, none = (int(x) for x in p.class_of)
    assert a == b and len({a, c, none}) == 3


def test_explain_lists_the_memory_hints() -> None:
    from lahar.commands.explain import render

    ssn, _ = session([gpod("p1", "2", "6Gi", policy="single-numa-node")], [numatopo("n1", mem("4Gi", "8Gi"))],
                     run=False)
    task = next(iter(ssn.snapshot.tasks.values()))
    entries = explain(ssn, task)
    (entry,) = entries
    (merge,) = entry["merges"]
    assert merge["providers"]["memory"] == [{"affinity": [1], "preferred": True},
                                           {"affinity": [0, 1], "preferred": False}]
    assert merge["hint"] == {"affinity": [1], "preferred": True} and merge["admit"] is True
    assert entry["memory"] == {"1": {"memory": "6Gi"}}
    assert "memory: {1}, {0,1} (not preferred)" in render("c1/p1", entries)


def test_explain_names_memory_when_it_refuses() -> None:
    ssn, _ = session([gpod("p1", "2", "6Gi", policy="single-numa-node")], [numatopo("n1", mem("4Gi", "4Gi"))],
                     run=False)
    task = next(iter(ssn.snapshot.tasks.values()))
    (entry,) = placement(ssn).explain(task)
    assert entry["admit"] is False and "not enough free memory" in entry["reason"]
    assert entry["merges"][0]["providers"]["memory"] == [{"affinity": [0, 1], "preferred": True}]


# --- devcluster publishes it --------------------------------------------------------------------------------------

def test_devcluster_dgx_publishes_memory_per_numa_node() -> None:
    objs = dnodes.build(profiles.load("dgx-h100"), count=1)
    (topo,) = [o for o in objs if o["kind"] == "Numatopology"]
    got = json.loads(topo["metadata"]["annotations"][NUMA_MEMORY_ANNOTATION])
    per_numa = {"hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "1Ti"}
    assert got == {"0": per_numa, "1": per_numa}
    (n,) = [o for o in objs if o["kind"] == "Node"]
    assert n["status"]["allocatable"]["memory"] == "2147483648Ki"  # the Node is unchanged
    assert node_topology(topo).memory == {i: {"memory": 1 << 40, "hugepages-1Gi": 0, "hugepages-2Mi": 0}
                                          for i in (0, 1)}


SPLITS = [
    # (id, group fields, expected per NUMA node)
    ("even", {"numaNodes": 2, "memory": "8Gi", "hugepages": {"1Gi": "2Gi", "2Mi": "0"}},
     [{"memory": "4Gi", "hugepages-1Gi": "1Gi", "hugepages-2Mi": "0"}] * 2),
    ("odd-pages-to-lowest-numa", {"numaNodes": 2, "memory": "9Gi", "hugepages": {"1Gi": "3Gi"}},
     [{"memory": "4608Mi", "hugepages-1Gi": "2Gi"}, {"memory": "4608Mi", "hugepages-1Gi": "1Gi"}]),
    ("reserved-memory-subtracted", {"numaNodes": 2, "memory": "10Gi", "hugepages": {},
                                    "reserved": {"memory": "2Gi"}},
     [{"memory": "4Gi"}] * 2),
    ("one-numa-node", {"numaNodes": 1, "memory": "8Gi", "hugepages": {"2Mi": "512Mi"}},
     [{"memory": "8Gi", "hugepages-2Mi": "512Mi"}]),
]


@pytest.mark.parametrize(("fields", "want"), [s[1:] for s in SPLITS], ids=[s[0] for s in SPLITS])
def test_devcluster_splits_memory_and_hugepages_evenly(fields: dict[str, Any], want: list[dict[str, str]]) -> None:
    group = {"name": "g", "instanceType": "sim.g", "cpu": {"sockets": 2, "coresPerSocket": 2, "threadsPerCore": 1},
             **fields}
    profile = profiles.Profile.model_validate({"name": "p", "groups": [group]})
    objs = dnodes.build(profile)
    (topo,) = [o for o in objs if o["kind"] == "Numatopology"]
    assert json.loads(topo["metadata"]["annotations"][NUMA_MEMORY_ANNOTATION]) == {
        str(i): w for i, w in enumerate(want)}


def test_devcluster_hugepages_steer_the_placement() -> None:
    group = {"name": "hp", "instanceType": "sim.hp", "numaNodes": 2, "memory": "16Gi",
             "hugepages": {"1Gi": "4Gi"}, "cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
             "cpu": {"sockets": 2, "coresPerSocket": 2, "threadsPerCore": 1}}
    objs = dnodes.build(profiles.Profile.model_validate({"name": "p", "groups": [group]}))
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    pods = [gpod(f"p{i}", "1", "1Gi", hugepages_1Gi="2Gi") for i in range(3)]  # 2Gi hugepages per NUMA node
    snap = snapshots.build(pods=[p.build() for p in pods], podgroups=[podgroup("pg1").min(2).build()],
                           queues=[queue("c1").build()], nodes=[o for o in objs if o["kind"] == "Node"],
                           numatopologies=[o for o in objs if o["kind"] == "Numatopology"])
    ssn = Session(snap, c, registry, uid="ssn-hp")
    for name in c.actions:
        registry.action(name, c.action_arguments(name)).execute(ssn)
    d = ssn.close()
    assert len(d.binds) == 2  # the node has 4Gi of 1Gi pages: two pods, one per NUMA node
    assert sorted(next(iter(decision(d, b.uid))) for b in d.binds) == ["0", "1"]
