"""drf: dominant-share job order and preemption votes; hDRF queue order and reclaim over the
`volcano.sh/hierarchy` tree (shapes of Volcano's plugins/drf/hdrf_test.go and the drf cases of
actions/{allocate,preempt}_test.go, as data)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.kube import quantity
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.plugins import drf
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

HDRF = tiers_conf("allocate", [{"name": "drf", "enableHierarchy": True}])
# Upstream's hdrf_test puts proportion next to hierarchical drf, which the conf parser refuses
# ("proportion and drf with hierarchy enabled conflicts"); build that tier list directly, as the Go test does.
HDRF_PROPORTION = confs.SchedulerConf.model_validate({"actions": ["allocate"], "tiers": [{"plugins": [
    {"name": "drf", "switches": {"enableHierarchy": True}}, {"name": "proportion"}]}]})


def hq(name: str, hierarchy: str, weights: str) -> queue:
    return queue(name).annotate(**{"volcano.sh/hierarchy": hierarchy, "volcano.sh/hierarchy-weights": weights})


def gang_of(n: int, cpu: str, mem: str, pg: str) -> list[pod]:
    return [pod(f"{pg}-p{i}", "default").req(cpu, mem).group(pg) for i in range(n)]


def allocated(d: Any, pods: list[pod]) -> dict[str, tuple[float, float]]:
    """Per PodGroup: (cpu cores, memory bytes) bound this session."""
    req = {f"{p.obj['metadata']['namespace']}/{p.obj['metadata']['name']}": p.obj for p in pods}
    out: dict[str, tuple[float, float]] = {}
    for b in d.binds:
        r = req[f"{b.namespace}/{b.name}"]["spec"]["containers"][0]["resources"]["requests"]
        group = b.job.split("/", 1)[1]
        cpu, mem = out.get(group, (0.0, 0.0))
        out[group] = (cpu + quantity.parse(r.get("cpu", "0")).milli_value() / 1000,
                      mem + float(quantity.parse(r.get("memory", "0")).value()))
    return out


HDRF_CASES: list[dict[str, Any]] = [
    dict(id="rescaling",
         nodes=[node("n").alloc("10", "10G")],
         queues=[hq("root-sci", "root/sci", "100/50"), hq("root-eng-dev", "root/eng/dev", "100/50/50"),
                 hq("root-eng-prod", "root/eng/prod", "100/50/50")],
         groups=[(10, "1", "1G", "pg1", "root-sci"), (10, "1", "0G", "pg21", "root-eng-dev"),
                 (10, "0", "1G", "pg22", "root-eng-prod")],
         expected={"pg1": (5, 5e9), "pg21": (5, 0), "pg22": (0, 5e9)}),
    dict(id="blocking-nodes",
         nodes=[node("n").alloc("30", "30G")],
         queues=[hq("root-pg1", "root/pg1", "100/25"), hq("root-pg2", "root/pg2", "100/25"),
                 hq("root-pg3-pg31", "root/pg3/pg31", "100/25/50"), hq("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
                 hq("root-pg4", "root/pg4", "100/25")],
         groups=[(30, "1", "0G", "pg1", "root-pg1"), (30, "1", "0G", "pg2", "root-pg2"),
                 (30, "1", "0G", "pg31", "root-pg3-pg31"), (30, "0", "1G", "pg32", "root-pg3-pg32"),
                 (30, "0", "1G", "pg4", "root-pg4")],
         expected={"pg1": (10, 0), "pg2": (10, 0), "pg31": (10, 0), "pg32": (0, 15e9), "pg4": (0, 15e9)}),
]


@pytest.mark.parametrize("case", HDRF_CASES, ids=[c["id"] for c in HDRF_CASES])
def test_hdrf_allocate(case: dict[str, Any]) -> None:
    pods = [p for n, cpu, mem, pg, _ in case["groups"] for p in gang_of(n, cpu, mem, pg)]
    pgs = [podgroup(pg, "default").queue(q).phase("Inqueue") for _, _, _, pg, q in case["groups"]]
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in case["nodes"]],
                           podgroups=[g.build() for g in pgs], queues=[q.build() for q in case["queues"]])
    d = run_session(snap, HDRF_PROPORTION, uid="ssn-1")
    got = allocated(d, pods)
    for pg, (cpu, mem) in case["expected"].items():
        assert got.get(pg, (0.0, 0.0)) == pytest.approx((cpu, mem)), pg


def test_hdrf_alone_gives_the_same_blocking_nodes_split() -> None:
    """Without proportion (the combination a conf file may not hold), hDRF's queue order alone finds the split."""
    case = HDRF_CASES[1]
    pods = [p for n, cpu, mem, pg, _ in case["groups"] for p in gang_of(n, cpu, mem, pg)]
    pgs = [podgroup(pg, "default").queue(q).phase("Inqueue") for _, _, _, pg, q in case["groups"]]
    got = allocated(run(pods=pods, nodes=case["nodes"], podgroups=pgs, queues=case["queues"], conf=HDRF), pods)
    for pg, (cpu, mem) in case["expected"].items():
        assert got.get(pg, (0.0, 0.0)) == pytest.approx((cpu, mem)), pg


# --- plain DRF in actions ------------------------------------------------------------------------------------------

ALLOC = tiers_conf("allocate", ["gang"], ["drf", "predicates", "nodeorder"])
PREEMPT = tiers_conf("preempt", ["conformance", {"name": "gang", "enablePreemptable": True}],
                     ["drf", "predicates", "nodeorder"])
# gang and drf in one tier: victims are intersected within a tier, and the first tier that answers decides.
RECLAIM_H = tiers_conf("reclaim", ["gang", {"name": "drf", "enableHierarchy": True}, "predicates"])

ACTION_CASES: list[dict[str, Any]] = [
    dict(id="lower-share-job-allocates-first", conf=ALLOC,
         nodes=[node("n1").alloc("3", "3G")], queues=[queue("q1")],
         podgroups=[podgroup("pg1").queue("q1").min(1).phase("Running"), podgroup("pg2").queue("q1").min(1),
                    podgroup("pg3").queue("q1").min(1)],
         pods=[pod("a1").req("1", "1G").group("pg1").on("n1"), pod("a2").req("1", "1G").group("pg1").on("n1"),
               pod("a3").req("1", "1G").group("pg1"),
               pod("b1").req("1", "1G").group("pg2").created(5)],
         binds={"c1/b1": "n1"}),
    dict(id="preempt-one-task-of-the-higher-share-job", conf=PREEMPT,
         nodes=[node("n1").alloc("2", "2G")], queues=[queue("q1")],
         podgroups=[podgroup("pg1").queue("q1").min(1).phase("Running"),
                    podgroup("pg2").queue("q1").min(1).phase("Inqueue")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1"),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1"),
               pod("preemptor1").req("1", "1G").group("pg2")],
         evicted=1, pipelined=["c1/preemptor1"]),
    dict(id="no-preemption-when-shares-would-invert", conf=PREEMPT,
         nodes=[node("n1").alloc("2", "2G")], queues=[queue("q1")],
         podgroups=[podgroup("pg1").queue("q1").min(1).phase("Running"),
                    podgroup("pg2").queue("q1").min(1).phase("Inqueue")],
         pods=[pod("preemptee1").req("1", "1G").group("pg1").on("n1"),
               pod("preemptee2").req("1", "1G").group("pg1").on("n1"),
               pod("preemptor1").req("2", "2G").group("pg2")],
         evicted=0, pipelined=[]),
    dict(id="hdrf-reclaims-from-the-heavier-queue", conf=RECLAIM_H,
         nodes=[node("n1").alloc("3", "3G")], queues=[hq("qa", "root/a", "1/1"), hq("qb", "root/b", "1/1")],
         podgroups=[podgroup("pga").queue("qa").min(1).phase("Running"),
                    podgroup("pgb").queue("qb").min(1).phase("Inqueue")],
         pods=[pod("a1").req("1", "1G").group("pga").on("n1"), pod("a2").req("1", "1G").group("pga").on("n1"),
               pod("a3").req("1", "1G").group("pga").on("n1"), pod("b1").req("1", "1G").group("pgb")],
         evicted=1, pipelined=["c1/b1"]),
    dict(id="hdrf-no-reclaim-between-equal-shares", conf=RECLAIM_H,
         nodes=[node("n1").alloc("2", "2G")], queues=[hq("qa", "root/a", "1/1"), hq("qb", "root/b", "1/1")],
         podgroups=[podgroup("pga").queue("qa").min(1).phase("Running"),
                    podgroup("pgb").queue("qb").min(1).phase("Inqueue")],
         pods=[pod("a1").req("1", "1G").group("pga").on("n1"), pod("a2").req("1", "1G").group("pga").on("n1"),
               pod("b1").req("1", "1G").group("pgb")],
         evicted=0, pipelined=[]),
]


@pytest.mark.parametrize("case", ACTION_CASES, ids=[c["id"] for c in ACTION_CASES])
def test_drf_in_actions(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"],
            conf=case["conf"])
    if "binds" in case:
        assert d.bind_map() == case["binds"]
    if "evicted" in case:
        assert len(d.evictions) == case["evicted"]
        assert sorted(d.pipelined) == case["pipelined"]


# --- pure pieces ------------------------------------------------------------------------------------------------

SHARES = [
    ("dominant-is-max", np.array([1000.0, 5e8]), np.array([4000.0, 1e9]), 0.5),
    ("ignores-absent-cluster-resources", np.array([1000.0, 0, 7]), np.array([2000.0, 1e9, 0]), 0.5),
    ("empty", np.zeros(2), np.array([1000.0, 1e9]), 0.0),
]


@pytest.mark.parametrize(("alloc", "total", "share"), [s[1:] for s in SHARES], ids=[s[0] for s in SHARES])
def test_calculate_share(alloc: np.ndarray, total: np.ndarray, share: float) -> None:
    assert drf.calculate_share(alloc, total) == pytest.approx(share)


def test_hierarchy_from_annotations_else_parents() -> None:
    snap = snapshots.build(queues=[hq("a", "root/x/a", "1/2/3").build(), queue("b").parent("p").weight(4).build(),
                                   queue("p").weight(2).build(), queue("root").build()])
    h = drf.queue_hierarchies(snap.queues)
    assert h["a"] == ("root/x/a", "1/2/3")
    assert h["b"] == ("root/p/b", "1/2/4")
    assert h["root"] == ("root", "1")


def test_preemptable_is_cumulative_per_job() -> None:
    nodes = [node("n1").alloc("4", "4G").build()]
    pods = [pod(f"r{i}").req("1", "1G").group("pg1").on("n1").build() for i in range(3)]
    pods.append(pod("l1").req("1", "1G").group("pg2").build())
    snap = snapshots.build(pods=pods, nodes=nodes, queues=[queue("c1").build()],
                           podgroups=[podgroup("pg1").phase("Running").build(), podgroup("pg2").build()])
    from lahar.scheduler.framework.session import Session
    from lahar.scheduler.registry import in_tree_registry
    reg = in_tree_registry()
    ssn = Session(snap, confs.load(tiers_conf("allocate", ["drf"])), reg)
    plugin = ssn.plugins["drf"]
    preemptor = snap.jobs["c1/pg2"].tasks["c1-l1"]
    victims = plugin.preemptable(preemptor, [snap.tasks[f"c1-r{i}"] for i in range(3)])
    # preemptor after: 1/4; victim job after losing 1, 2, 3 tasks: 2/4, 1/4, 0 → the first two qualify
    assert [v.name for v in victims] == ["r0", "r1"]


def test_the_booked_share_is_calculate_share_bit_for_bit() -> None:
    """drf's per-allocation share (float arithmetic over the dimensions ≥ 0.1) against `calculate_share`."""
    import numpy as np

    from lahar.scheduler.plugins import drf as drf_

    rng = np.random.default_rng(7)
    for _ in range(2000):
        total = rng.choice([0.0, 0.05, 1.0, 3.0, 1e9, 7.5], size=5) * rng.random(5)
        allocated = rng.random(5) * rng.choice([0.0, 1.0, 1e9], size=5)
        assert drf_._dominant_share(allocated, drf_._share_dims(total)) == drf_.calculate_share(allocated, total)
