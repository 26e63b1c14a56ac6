"""gangpreempt / gangreclaim: whole-gang eviction. The victim-set choice as a table (Volcano bundle_test.go and
gangpreempt_test.go cases in our words), then sessions: fewest victims, minAvailable, PDBs, HyperNodes,
all-or-nothing, PodGroup events and the preemption metrics."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from lahar.scheduler.actions import _gang
from lahar.scheduler.actions.gangpreempt import GangPreempt, budget_for, disruptions_allowed, pdb_budgets
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.incremental import KINDS, SnapshotInputs
from lahar.scheduler.metrics import SchedulerMetrics
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, priority_class, queue, tiers_conf
from tests.builders import objs as _objs

PCS = [priority_class("low", 10), priority_class("mid", 100), priority_class("high", 1000)]
PLUGINS = (["priority", "gang", "conformance"], ["predicates", "proportion", "nodeorder", "network-topology-aware"])
CONF = tiers_conf("enqueue, allocate, gangpreempt", *PLUGINS)
RECLAIM_CONF = tiers_conf("enqueue, allocate, gangreclaim", *PLUGINS)


def cpu(*v: float) -> np.ndarray:
    return np.array(v, dtype=float)


def b(job: str, whole: bool, tasks: str, freed: float, *, priority: int = 0, rank: int = 0) -> _gang.Bundle:
    return _gang.Bundle(job, whole, tuple(tasks.split()), cpu(freed), priority, rank)


# ---- the pure choice --------------------------------------------------------------------------------------------

CHOOSE = [
    dict(id="idle-covers-need-empty-plan-first", need=2, idle=2, bundles=[b("j1", True, "a", 2)], want=[]),
    dict(id="nothing-frees-enough", need=5, idle=1, bundles=[b("j1", True, "a b", 2), b("j2", True, "c", 1)],
         want=None),
    dict(id="one-whole-gang-beats-two", need=4, idle=0,
         bundles=[b("j1", True, "a", 2, rank=0), b("j2", True, "b", 2, rank=1), b("j3", True, "c d", 4, rank=2)],
         want=["c", "d"]),
    dict(id="safe-bundle-before-breaking-a-gang", need=1, idle=0,
         bundles=[b("j1", False, "a", 1), b("j1", True, "a b c", 3), b("j2", True, "d", 1)], want=["a"]),
    dict(id="fewest-pods-when-gangs-tie", need=2, idle=0,
         bundles=[b("j1", True, "a b", 2, rank=0), b("j2", True, "c", 2, rank=1)], want=["c"]),
    dict(id="lower-priority-victim-when-pods-tie", need=2, idle=0,
         bundles=[b("j1", True, "a", 2, priority=100, rank=1), b("j2", True, "b", 2, priority=10, rank=0)],
         want=["b"]),
    dict(id="job-order-rank-breaks-the-last-tie", need=2, idle=0,
         bundles=[b("j1", True, "a", 2, rank=1), b("j2", True, "b", 2, rank=0)], want=["b"]),
    dict(id="idle-plus-safe-is-enough", need=3, idle=2, bundles=[b("j1", False, "a", 1), b("j1", True, "a b", 2)],
         want=["a"]),
    dict(id="safe-and-whole-of-one-job-never-both", need=3, idle=0,
         bundles=[b("j1", False, "a", 1), b("j1", True, "a b", 2)], want=None),
]


@pytest.mark.parametrize("case", CHOOSE, ids=[c["id"] for c in CHOOSE])
def test_choose(case: dict[str, Any]) -> None:
    plans = _gang.choose(cpu(case["need"]), cpu(case["idle"]), case["bundles"])
    if case["want"] is None:
        assert plans == []
    else:
        assert plans and plans[0].tasks == case["want"]


R = cpu(1)
BUNDLES = [
    # Volcano TestCreateJobBundles_SafeAndWhole: 5 running, minAvailable 3 → 2 safe, the rest only as the whole gang
    dict(id="surplus-two-of-five", local=5, running=5, min=3, allow_whole=True, budget=None,
         want=[(False, 2), (True, 5)]),
    # Volcano JobNotReadyShortCircuitsAllSafe: already below minAvailable → every local task is safe
    dict(id="below-min-all-safe", local=2, running=2, min=10, allow_whole=True, budget=None, want=[(False, 2)]),
    # Volcano TestSelectDomainVictims_RespectAllowWholeBundle: one task at minAvailable, whole bundles off → none
    dict(id="at-min-whole-off", local=1, running=1, min=1, allow_whole=False, budget=None, want=[]),
    dict(id="at-min-whole-on", local=1, running=1, min=1, allow_whole=True, budget=None, want=[(True, 1)]),
    dict(id="pdb-allows-the-safe-part-only", local=4, running=4, min=3, allow_whole=True, budget=1,
         want=[(False, 1)]),
    dict(id="pdb-allows-nothing", local=4, running=4, min=3, allow_whole=True, budget=0, want=[]),
    dict(id="no-local-tasks", local=0, running=3, min=1, allow_whole=True, budget=None, want=[]),
]


@pytest.mark.parametrize("case", BUNDLES, ids=[c["id"] for c in BUNDLES])
def test_bundles_of(case: dict[str, Any]) -> None:
    local = [(f"t{i}", R) for i in range(case["local"])]
    got = _gang.bundles_of("j", local=local, running=case["running"], min_available=case["min"],
                           everywhere=[f"t{i}" for i in range(case["running"])], allow_whole=case["allow_whole"],
                           budget=case["budget"])
    assert [(x.whole, len(x.tasks)) for x in got] == case["want"]


GANGS = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 6), st.integers(1, 5), st.booleans()), min_size=1,
                 max_size=5)


@settings(max_examples=200, deadline=None)
@given(gangs=GANGS, need=st.integers(1, 20))
def test_no_victim_gang_is_left_below_min_available_unless_all_of_it_goes(
        gangs: list[tuple[int, int, int, bool]], need: int) -> None:
    """A chosen plan evicts from each gang either pods above its minAvailable or every running pod (a gang already
    below its minAvailable may lose any of them: it is broken already)."""
    bundles, sizes = [], {}
    for i, (run_, min_, local, whole) in enumerate(gangs):
        local = min(local, run_)
        sizes[f"j{i}"] = (run_, min_)
        bundles += _gang.bundles_of(f"j{i}", local=[(f"j{i}-t{k}", cpu(1)) for k in range(local)], running=run_,
                                    min_available=min_, everywhere=[f"j{i}-t{k}" for k in range(run_)],
                                    allow_whole=whole, rank=i)
    plans = _gang.choose(cpu(need), cpu(0), bundles)
    for plan in plans[:3]:
        for bundle in plan.bundles:
            run_, min_ = sizes[bundle.job]
            left = run_ - len(bundle.tasks)
            assert left >= min_ or left == 0 or run_ < min_, (bundle, run_, min_)
    if plans:
        assert len({b.job for b in plans[0].bundles}) == len(plans[0].bundles)


@settings(max_examples=150, deadline=None)
@given(gangs=GANGS, need=st.integers(0, 20), idle=st.integers(0, 4))
def test_choose_finds_the_cheapest_set_as_a_brute_force_search_does(
        gangs: list[tuple[int, int, int, bool]], need: int, idle: int) -> None:
    bundles = []
    for i, (run_, min_, local, whole) in enumerate(gangs):
        bundles += _gang.bundles_of(f"j{i}", local=[(f"j{i}-t{k}", cpu(1 + k % 2)) for k in range(min(local, run_))],
                                    running=run_, min_available=min_, everywhere=[f"j{i}-t{k}" for k in range(run_)],
                                    allow_whole=whole, priority=i % 3, rank=i)
    by_job: dict[str, list[_gang.Bundle]] = {}
    for x in bundles:
        by_job.setdefault(x.job, []).append(x)
    best = None
    for combo in itertools.product(*[[None, *v] for v in by_job.values()]):
        plan = _gang.Plan(tuple(x for x in combo if x is not None))
        freed = idle + sum(float(x.freed[0]) for x in plan.bundles)
        if need <= freed and (best is None or plan.cost < best):
            best = plan.cost
    plans = _gang.choose(cpu(need), cpu(idle), bundles)
    assert (plans[0].cost if plans else None) == best
    assert [p.cost for p in plans] == sorted(p.cost for p in plans)


@pytest.mark.parametrize(("value", "want"), [(3, 3), (0, 8), (-1, 8), ("x", 8)], ids=["set", "zero", "negative", "junk"])
def test_max_domains_falls_back_to_the_default(value: object, want: int) -> None:
    assert GangPreempt({"maxDomains": value}).max_domains == want


def test_pdb_budget_is_the_smallest_matching() -> None:
    pdbs = {"ns/a": pdb("a", {"app": "x"}, 2), "ns/b": pdb("b", {"app": "x"}, 1), "ns/c": pdb("c", {"app": "y"}, 0)}
    task = SimpleNamespace(namespace="c1", pod={"metadata": {"labels": {"app": "x"}}})
    assert budget_for(pdb_budgets(pdbs), [task]) == 1  # type: ignore[list-item]
    assert budget_for(pdb_budgets(pdbs), []) is None


DISRUPTIONS = [
    dict(id="min-available-int", spec={"minAvailable": 2}, healthy=3, want=1),
    dict(id="min-available-above-healthy", spec={"minAvailable": 5}, healthy=3, want=0),
    dict(id="min-available-percent-rounds-up", spec={"minAvailable": "50%"}, healthy=3, want=1),
    dict(id="max-unavailable-int", spec={"maxUnavailable": 1}, healthy=3, want=1),
    dict(id="max-unavailable-all", spec={"maxUnavailable": "100%"}, healthy=3, want=3),
    dict(id="neither-field", spec={}, healthy=3, want=0),
    dict(id="junk-value", spec={"minAvailable": "x"}, healthy=3, want=3),
]


@pytest.mark.parametrize("case", DISRUPTIONS, ids=[c["id"] for c in DISRUPTIONS])
def test_disruptions_allowed_without_a_current_status(case: dict[str, Any]) -> None:
    assert disruptions_allowed(case["spec"], case["healthy"]) == case["want"]


def test_a_stale_pdb_status_is_recomputed_from_the_spec() -> None:
    stale = pdb("a", {"app": "x"}, 5)
    stale["metadata"]["generation"] = 2
    stale["status"]["observedGeneration"] = 1
    stale["spec"]["minAvailable"] = 1
    assert pdb_budgets({"c1/a": stale}, lambda ns, sel: 3)[0][2] == 2
    assert pdb_budgets({"c1/a": pdb("a", {"app": "x"}, 5)}, lambda ns, sel: 3)[0][2] == 5


# ---- sessions ---------------------------------------------------------------------------------------------------

def pdb(name: str, labels: dict[str, str], allowed: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "c1"},
            "spec": {"selector": {"matchLabels": labels}}, "status": {"disruptionsAllowed": allowed}}


def hypernode(name: str, tier: int, *members: str, children: tuple[str, ...] = ()) -> dict[str, Any]:
    ms = [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]
    ms += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": ms}}


def run(*, pods: list[Any], nodes: list[Any], podgroups: list[Any], conf: str = CONF, queues: list[Any] = (),
        hypernodes: list[Any] = (), pdbs: list[Any] = ()) -> Decisions:
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=_objs(list(pods)), nodes=_objs(list(nodes)), podgroups=_objs(list(podgroups)),
                           queues=_objs(list(queues or [queue("c1")])), hypernodes=list(hypernodes),
                           priority_classes=_objs(PCS), poddisruptionbudgets=list(pdbs))
    return run_session(snap, c, registry=registry, uid="ssn-1")


def n(name: str, c: str = "2") -> node:
    return node(name).alloc(c, "8Gi", 10)


def running(pg: str, prio: str = "low", min_: int = 1, q: str = "c1") -> podgroup:
    return podgroup(pg).min(min_).phase("Running").priority_class(prio).queue(q)


def wanting(pg: str, min_: int, prio: str = "high", q: str = "c1") -> podgroup:
    return podgroup(pg).min(min_).phase("Inqueue").priority_class(prio).queue(q)


def evicted(d: Decisions) -> list[str]:
    return sorted(e.name for e in d.evictions)


def test_a_whole_lower_priority_gang_is_evicted_and_the_preemptor_pipelined() -> None:
    d = run(nodes=[n("n1"), n("n2")],
            podgroups=[running("lo", min_=2), wanting("hi", 2)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2"),
                  pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])
    assert evicted(d) == ["a1", "a2"]
    assert {e.reason for e in d.evictions} == {"gangpreempt"}
    assert sorted(d.pipelined) == ["c1/b1", "c1/b2"]
    events = d.podgroups["c1/lo"].events
    assert any(r == "Evict" and "gangpreempt" in m and "c1/hi" in m for _, r, m in events), events


def test_the_gang_with_fewer_pods_goes_and_the_other_is_untouched() -> None:
    d = run(nodes=[n("n1"), n("n2")],
            podgroups=[running("big", min_=2), running("one"), wanting("hi", 1)],
            pods=[pod("a1").req("1", "1G").group("big").on("n1"), pod("a2").req("1", "1G").group("big").on("n1"),
                  pod("c1").req("2", "1G").group("one").on("n2"), pod("b1").req("2", "1G").group("hi")])
    assert evicted(d) == ["c1"]


def test_surplus_above_min_available_goes_before_a_whole_gang() -> None:
    d = run(nodes=[n("n1", "3")],
            podgroups=[running("lo", min_=2), wanting("hi", 1)],
            pods=[pod(f"a{i}").req("1", "1G").group("lo").on("n1") for i in (1, 2, 3)]
            + [pod("b1").req("1", "1G").group("hi")])
    assert len(d.evictions) == 1  # lo keeps 2 = its minAvailable


def test_all_or_nothing_when_the_gang_cannot_fit_even_after_evicting() -> None:
    d = run(nodes=[n("n1"), n("n2")],
            podgroups=[running("lo", min_=2), wanting("hi", 3)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2")]
            + [pod(f"b{i}").req("2", "1G").group("hi") for i in (1, 2, 3)])
    assert d.evictions == [] and d.pipelined == {}


def test_aggregate_fits_but_no_pod_fits_on_a_node_then_nothing_is_evicted() -> None:
    d = run(nodes=[n("n1"), n("n2")],
            podgroups=[running("lo", min_=2), wanting("hi", 1)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2"),
                  pod("b1").req("3", "1G").group("hi")])
    assert d.evictions == [] and d.pipelined == {}


@pytest.mark.parametrize(("victim", "preemptor_queue"), [
    (running("lo", prio="high"), "c1"),  # equal priority
    (running("lo").annotate(**{"volcano.sh/preemptable": "false"}), "c1"),
    (running("lo"), "c2"),  # another queue: gangreclaim's business
], ids=["equal-priority", "podgroup-not-preemptable", "other-queue"])
def test_spared_victims(victim: podgroup, preemptor_queue: str) -> None:
    d = run(nodes=[n("n1")], queues=[queue("c1"), queue("c2")],
            podgroups=[victim, wanting("hi", 1, q=preemptor_queue)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("b1").req("2", "1G").group("hi")])
    assert d.evictions == []


def test_allow_whole_bundle_false_only_takes_safe_bundles() -> None:
    conf = CONF + "configurations:\n- name: gangpreempt\n  arguments: {allowWholeBundle: false}\n"
    d = run(nodes=[n("n1")], conf=conf, podgroups=[running("lo"), wanting("hi", 1)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("b1").req("2", "1G").group("hi")])
    assert d.evictions == []


@pytest.mark.parametrize(("allowed", "want"), [(0, []), (1, []), (2, ["a1", "a2"])], ids=["zero", "one", "two"])
def test_pod_disruption_budget_limits_the_gang_evicted(allowed: int, want: list[str]) -> None:
    d = run(nodes=[n("n1"), n("n2")], pdbs=[pdb("lo", {"app": "lo"}, allowed)],
            podgroups=[running("lo", min_=2), wanting("hi", 2)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1").label(app="lo"),
                  pod("a2").req("2", "1G").group("lo").on("n2").label(app="lo"),
                  pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])
    assert evicted(d) == want


@pytest.mark.parametrize(("spec", "want"), [({"minAvailable": 1}, []), ({"maxUnavailable": "100%"}, ["a1", "a2"])],
                         ids=["min-available-1-of-2", "max-unavailable-all"])
def test_pod_disruption_budget_without_status_is_computed(spec: dict[str, Any], want: list[str]) -> None:
    budget = pdb("lo", {"app": "lo"}, 0)
    budget.pop("status")
    budget["spec"].update(spec)
    d = run(nodes=[n("n1"), n("n2")], pdbs=[budget],
            podgroups=[running("lo", min_=2), wanting("hi", 2)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1").label(app="lo"),
                  pod("a2").req("2", "1G").group("lo").on("n2").label(app="lo"),
                  pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])
    assert evicted(d) == want


TWO_RACKS = [hypernode("s0", 1, "n1", "n2"), hypernode("s1", 1, "n3", "n4"),
             hypernode("s2", 2, children=("s0", "s1"))]


def test_hard_topology_frees_the_rack_with_the_fewest_victims() -> None:
    hi = wanting("hi", 2)
    hi.obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    d = run(nodes=[n("n1"), n("n2"), n("n3"), n("n4")], hypernodes=TWO_RACKS,
            podgroups=[running("x"), running("y"), running("z", min_=2), hi],
            pods=[pod("x1").req("2", "1G").group("x").on("n1"), pod("y1").req("2", "1G").group("y").on("n2"),
                  pod("z1").req("2", "1G").group("z").on("n3"), pod("z2").req("2", "1G").group("z").on("n4"),
                  pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])
    assert evicted(d) == ["z1", "z2"]  # one gang broken in s1, not two in s0
    assert sorted(d.pipelined.values()) == ["n3", "n4"]


def test_gangreclaim_takes_a_whole_gang_of_an_overused_queue() -> None:
    d = run(nodes=[n("n1"), n("n2")], conf=RECLAIM_CONF, queues=[queue("q1"), queue("q2")],
            podgroups=[running("lo", min_=2, q="q1"), wanting("hi", 1, prio="low", q="q2")],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2"),
                  pod("b1").req("2", "1G").group("hi")])
    assert evicted(d) == ["a1", "a2"]
    assert {e.reason for e in d.evictions} == {"gangreclaim"}


def test_gangreclaim_spares_a_non_reclaimable_queue() -> None:
    d = run(nodes=[n("n1"), n("n2")], conf=RECLAIM_CONF, queues=[queue("q1").reclaimable(False), queue("q2")],
            podgroups=[running("lo", min_=2, q="q1"), wanting("hi", 1, prio="low", q="q2")],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2"),
                  pod("b1").req("2", "1G").group("hi")])
    assert d.evictions == []


def test_preemption_metrics_count_gang_victims() -> None:
    d = run(nodes=[n("n1"), n("n2")],
            podgroups=[running("lo", min_=2), wanting("hi", 2)],
            pods=[pod("a1").req("2", "1G").group("lo").on("n1"), pod("a2").req("2", "1G").group("lo").on("n2"),
                  pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])
    m = SchedulerMetrics()
    m.observe(d, commit=SimpleNamespace(bind_failures={}, bind_seconds=[], seconds=0.01, workers=1))
    text = generate_latest(m.registry).decode()
    assert "volcano_pod_preemption_victims 2.0" in text
    assert "volcano_total_preemption_attempts 1.0" in text


def test_pdbs_reach_the_snapshot_incrementally_by_namespace_and_name() -> None:
    inputs = SnapshotInputs()
    for kind in KINDS:
        inputs.replace(kind, [])
    inputs.snapshot()
    inputs.upsert("poddisruptionbudgets", pdb("a", {"app": "x"}, 1))
    assert set(inputs.snapshot().extras["poddisruptionbudgets"]) == {"c1/a"}
    inputs.delete("poddisruptionbudgets", pdb("a", {"app": "x"}, 1))
    assert inputs.snapshot().extras["poddisruptionbudgets"] == {}
