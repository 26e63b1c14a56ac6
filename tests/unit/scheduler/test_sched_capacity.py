"""capacity: deserved/capability/guarantee per queue, flat and hierarchical (shapes of Volcano's
plugins/capacity/capacity_test.go and its enqueue/allocate/reclaim cases, as data)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.scheduler.plugins import capacity
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

# As upstream's tiers: gang only says who is starving (its reclaim vote is off).
GANG = {"name": "gang", "enableReclaimable": False, "enablePreemptable": False}
FLAT = tiers_conf("allocate, reclaim", ["capacity", "predicates", GANG])
ENQUEUE = tiers_conf("enqueue, allocate", ["capacity"])
HIER = tiers_conf("enqueue, reclaim, allocate", [{"name": "capacity", "enableHierarchy": True}, "predicates", GANG])
A100 = "nvidia.com/A100"


def q(name: str, *, parent: str | None = None, deserved: dict[str, str] | None = None,
      cap: dict[str, str] | None = None, guarantee: dict[str, str] | None = None, prio: int = 0) -> queue:
    b = queue(name)
    if parent is not None:
        b.parent(parent)
    if deserved is not None:
        b.obj["spec"]["deserved"] = dict(deserved)
    if cap is not None:
        b.capability(**cap)
    if guarantee is not None:
        b.guarantee(**guarantee)
    if prio:
        b.priority(prio)
    return b


def res(cpu: str = "", mem: str = "", **scalars: str) -> dict[str, str]:
    out = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    out.update(scalars)
    return out


def p(name: str, pg: str, cpu: str = "0", mem: str = "0", *, on: str = "", keep: bool = False,
      **scalars: str) -> pod:
    b = pod(name, "ns1").req(cpu or None, mem or None, **scalars).group(pg)
    if on:
        b.on(on)
    if keep:
        b.preemptable(False)
    return b


def pg(name: str, queue_: str, phase: str, minimum: int = 1, **min_res: str) -> podgroup:
    b = podgroup(name, "ns1").queue(queue_).phase(phase).min(minimum)
    if min_res:
        b.min_resources(**min_res)
    return b


def n(name: str, cpu: str, mem: str, **scalars: str) -> node:
    return node(name).alloc(cpu, mem, pods=10, **scalars)


# --- flat: allocate then reclaim -------------------------------------------------------------------------------

FLAT_CASES: list[dict[str, Any]] = [
    dict(id="allocatable-under-capability",
         nodes=[n("n1", "2", "4Gi").label(selector="worker"), n("n2", "2", "4Gi")],
         queues=[q("q1", cap=res("2", "2Gi"))],
         podgroups=[pg("pg1", "q1", "Running"), pg("pg2", "q1", "Inqueue")],
         pods=[p("p1", "pg1", "1", "1Gi", on="n1"), p("p2", "pg2", "1", "1Gi").selector(selector="worker")],
         binds={"ns1/p2": "n1"}),
    dict(id="not-allocatable-over-capability",
         nodes=[n("n1", "2", "4Gi"), n("n2", "2", "4Gi")],
         queues=[q("q2", cap=res("1.5", "1.5Gi"))],
         podgroups=[pg("pg3", "q2", "Running"), pg("pg4", "q2", "Inqueue")],
         pods=[p("p3", "pg3", "1", "1Gi", on="n1"), p("p4", "pg4", "1", "1Gi")],
         binds={}),
    dict(id="reclaim-when-allocated-below-deserved",
         nodes=[n("n1", "2", "4Gi"), n("n2", "2", "4Gi")],
         queues=[q("q3", deserved=res("2", "4Gi")), q("q4", deserved=res("2", "4Gi"))],
         podgroups=[pg("pg5", "q3", "Running"), pg("pg6", "q4", "Inqueue")],
         pods=[p("p5", "pg5", "2", "4Gi", on="n1", keep=True), p("p6", "pg5", "2", "4Gi", on="n2"),
               p("p7", "pg6", "2", "4Gi")],
         evicted=["ns1/p6"], pipelined={"ns1/p7": "n2"}),
    dict(id="reclaim-on-scalar-when-cpu-memory-overused",
         nodes=[n("n3", "2", "4Gi", **{A100: "10"}), n("n4", "2", "4Gi", **{A100: "10"})],
         queues=[q("q5", deserved=res("2", "4Gi", **{A100: "10"})), q("q6", deserved=res("2", "4Gi", **{A100: "10"}))],
         podgroups=[pg("pg7", "q5", "Running"), pg("pg8", "q6", "Running"), pg("pg9", "q6", "Inqueue")],
         pods=[p("p8", "pg7", on="n3", keep=True, **{A100: "10"}), p("p9", "pg7", on="n4", **{A100: "10"}),
               p("p10", "pg8", "2", "4Gi", on="n3"), p("p11", "pg8", "2", "4Gi", on="n4"),
               p("p12", "pg9", **{A100: "10"})],
         evicted=["ns1/p9"], pipelined={"ns1/p12": "n4"}),
    dict(id="queue-priority-orders-allocation",
         nodes=[n("n5", "2", "4Gi"), n("n6", "2", "4Gi")],
         queues=[q("q7", cap=res("2", "4Gi"), prio=5), q("q8", cap=res("2", "4Gi"), prio=1),
                 q("q9", cap=res("2", "4Gi"), prio=10)],
         podgroups=[pg("pg10", "q7", "Running"), pg("pg11", "q8", "Inqueue"), pg("pg12", "q9", "Inqueue")],
         pods=[p("p13", "pg10", "2", "4Gi", on="n5"), p("p14", "pg11", "2", "4Gi"), p("p15", "pg12", "2", "4Gi")],
         binds={"ns1/p15": "n6"}),
    dict(id="reclaim-when-under-deserved-on-one-dimension",
         nodes=[n("n1", "2", "4Gi")],
         queues=[q("q10", deserved=res("2", "2Gi"), cap=res("4", "4Gi")),
                 q("q11", deserved=res("0", "0Gi"), cap=res("2", "2Gi"))],
         podgroups=[pg("pg16", "q10", "Running"), pg("pg17", "q10", "Inqueue"), pg("pg18", "q11", "Running")],
         pods=[p("p16", "pg16", "1", "3Gi", on="n1"), p("p17", "pg17", "1", "1Gi"),
               p("p18", "pg18", "1", "1Gi", on="n1")],
         evicted=["ns1/p18"], pipelined={"ns1/p17": "n1"}),
    dict(id="no-reclaim-when-request-exceeds-deserved",
         nodes=[n("n1", "2", "4Gi")],
         queues=[q("q12", deserved=res("1", "2Gi"), cap=res("4", "4Gi")),
                 q("q13", deserved=res("0", "0Gi"), cap=res("2", "2Gi"))],
         podgroups=[pg("pg19", "q12", "Running"), pg("pg20", "q12", "Inqueue"), pg("pg21", "q13", "Running")],
         pods=[p("p19", "pg19", "1", "1Gi", on="n1"), p("p20", "pg20", "1", "2Gi"),
               p("p21", "pg21", "1", "1Gi", on="n1")],
         evicted=[], pipelined={}),
    dict(id="guarantee-protects-victims",
         nodes=[n("n1", "2", "4Gi"), n("n2", "2", "4Gi")],
         queues=[q("q3", deserved=res("2", "4Gi"), guarantee=res("4", "8Gi")), q("q4", deserved=res("2", "4Gi"))],
         podgroups=[pg("pg5", "q3", "Running"), pg("pg6", "q4", "Inqueue")],
         pods=[p("p5", "pg5", "2", "4Gi", on="n1"), p("p6", "pg5", "2", "4Gi", on="n2"),
               p("p7", "pg6", "2", "4Gi")],
         evicted=[], pipelined={}),
]


# upstream's current flat cases 7-10 (issues #4918 and #5048), in the same tier
_GPU = "nvidia.com/gpu"
FLAT_CASES += [
    dict(id="gpu-in-deserved-not-in-allocated-not-reclaimed",
         nodes=[n("n7", "4", "8Gi", **{_GPU: "4"})],
         queues=[q("queue14", deserved=res("2", "4Gi", **{_GPU: "2"})), q("queue15"),
                 q("queue16", deserved=res("2", "4Gi", **{_GPU: "2"}))],
         podgroups=[pg("pg22", "queue14", "Running"), pg("pg23", "queue15", "Running"),
                    pg("pg24", "queue16", "Running"), pg("pg25", "queue16", "Inqueue")],
         pods=[p("p22", "pg22", "2", "4Gi", on="n7"), p("p23", "pg23", "0", "0Gi", on="n7", **{_GPU: "1"}),
               p("p24", "pg24", "2", "1Gi", on="n7", **{_GPU: "1"}), p("p25", "pg25", "2", "3Gi", **{_GPU: "1"})],
         evicted=[], pipelined={}),
    dict(id="reclaimer-dimensions-pick-the-gpu-victim-only",
         nodes=[n("n8", "4", "8Gi", **{_GPU: "1"})],
         queues=[q("queue17", deserved=res("2", "2Gi")), q("queue18", deserved=res("2", "4Gi", **{_GPU: "1"}))],
         podgroups=[pg("pg26", "queue17", "Running"), pg("pg27", "queue17", "Running"), pg("pg28", "queue17", "Running"),
                    pg("pg29", "queue18", "Running"), pg("pg30", "queue18", "Inqueue")],
         pods=[p("p26", "pg26", "0", "4Gi", on="n8"), p("p27", "pg27", "1", "0Gi", on="n8"),
               p("p28", "pg28", "0", "0Gi", on="n8", **{_GPU: "1"}), p("p29", "pg29", "2", "4Gi", on="n8"),
               p("p30", "pg30", "1", "0Gi", **{_GPU: "1"})],
         evicted=["ns1/p28"], pipelined={"ns1/p30": "n8"}),
    dict(id="gpu-only-deserved-victim-below-it-not-reclaimed-on-cpu",
         nodes=[n("n8", "4", "8Gi", **{_GPU: "1"})],
         queues=[q("queue19", deserved={_GPU: "1"}), q("queue20", deserved=res("2", "2Gi"))],
         podgroups=[pg("pg31", "queue19", "Running"), pg("pg32", "queue20", "Inqueue")],
         pods=[p("p31", "pg31", "4", "4Gi", on="n8", **{_GPU: "1"}), p("p32", "pg32", "1", "1Gi")],
         evicted=[], pipelined={}),
    dict(id="no-reclaim-past-capability",
         nodes=[n("n9", "8", "100Gi"), n("n10", "8", "100Gi")],
         queues=[q("queue21", deserved=res("8", "100Gi"), cap=res("8", "100Gi")), q("queue22", cap=res("2", "5Gi"))],
         podgroups=[pg("pg33", "queue21", "Running"), pg("pg34", "queue21", "Inqueue"), pg("pg35", "queue22", "Running")],
         pods=[p("p33", "pg33", "7", "90Gi", on="n9"), p("p34", "pg34", "2", "5Gi"), p("p35", "pg35", "2", "5Gi", on="n10")],
         evicted=[], pipelined={}),
]


def _check(d: Any, case: dict[str, Any]) -> None:
    if "binds" in case:
        assert d.bind_map() == case["binds"]
    if "evicted" in case:
        assert sorted(f"{e.namespace}/{e.name}" for e in d.evictions) == case["evicted"]
        assert d.pipelined == case["pipelined"]
    for key, phase in case.get("phases", {}).items():
        assert d.podgroups[key].status.get("phase") == phase, key


@pytest.mark.parametrize("case", FLAT_CASES, ids=[c["id"] for c in FLAT_CASES])
def test_capacity_flat(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"], conf=FLAT)
    _check(d, case)


# --- flat: enqueue then allocate ---------------------------------------------------------------------------------

_EQ_BASE = dict(
    nodes=[n("n1", "3", "3G"), n("n2", "3", "3G")],
    queues=[q("q1", deserved=res("2", "2G"), cap=res("2", "2G")), q("q2", deserved=res("2", "2G"), cap=res("3", "3G")),
            q("q3", cap=res("3", "3G")).state("Closed")],
    base_pgs=[pg("pg1", "q1", "Running", cpu="1", memory="3G"), pg("pg2", "q2", "Running", cpu="3", memory="1G")],
    base_pods=[p("pod1", "pg1", "1", "3G", on="n1"), p("pod2", "pg2", "3", "1G", on="n2")],
)

ENQUEUE_CASES: list[dict[str, Any]] = [
    dict(id="memory-over-deserved-cpu-only-job-enqueued-and-allocated",
         pgs=[pg("pg3", "q1", "Pending", cpu="1", memory="0")], pods=[p("pod3", "pg3", "1", "0")],
         binds={"ns1/pod3": "n1"}, phases={"ns1/pg3": "Running"}),
    dict(id="cpu-over-deserved-memory-only-job-enqueued-and-allocated",
         pgs=[pg("pg4", "q2", "Pending", cpu="0", memory="1G")], pods=[p("pod4", "pg4", "0", "1G")],
         binds={"ns1/pod4": "n2"}),
    dict(id="over-capability-not-enqueued",
         pgs=[pg("pg5", "q1", "Pending", cpu="1", memory="1G")], pods=[p("pod5", "pg5", "1", "1G")],
         binds={}, phases={"ns1/pg5": "Pending"}),
    dict(id="closed-queue-not-enqueued",
         pgs=[pg("pg6", "q3", "Pending", cpu="1", memory="1G")], pods=[p("pod6", "pg6", "1", "1G")],
         binds={}, phases={"ns1/pg6": "Pending"}),
]


@pytest.mark.parametrize("case", ENQUEUE_CASES, ids=[c["id"] for c in ENQUEUE_CASES])
def test_capacity_enqueue_and_allocatable(case: dict[str, Any]) -> None:
    d = run(pods=[*_EQ_BASE["base_pods"], *case["pods"]], nodes=_EQ_BASE["nodes"],
            podgroups=[*_EQ_BASE["base_pgs"], *case["pgs"]], queues=_EQ_BASE["queues"], conf=ENQUEUE)
    _check(d, case)


def test_enqueue_rejection_names_the_short_resources() -> None:
    case = ENQUEUE_CASES[2]
    d = run(pods=[*_EQ_BASE["base_pods"], *case["pods"]], nodes=_EQ_BASE["nodes"],
            podgroups=[*_EQ_BASE["base_pgs"], *case["pgs"]], queues=_EQ_BASE["queues"], conf=ENQUEUE)
    assert ("Normal", "Unschedulable", "queue resource quota insufficient: insufficient memory") in \
        d.podgroups["ns1/pg5"].events


# --- hierarchical ------------------------------------------------------------------------------------------------

ROOT = q("root")
H1 = [ROOT, q("q1", parent="root", cap=res("4", "4Gi")), q("q2", parent="root", cap=res("4", "4Gi")),
      q("q11", parent="q1", cap=res("1", "1Gi")), q("q12", parent="q1", cap=res("3", "3Gi"))]
Q3 = q("q3", parent="root", deserved=res("4", "4Gi"), cap=res("4", "4Gi"))
Q4 = q("q4", parent="root", deserved=res("2", "2Gi"), cap=res("4", "4Gi"))
Q31 = q("q31", parent="q3", deserved=res("2", "2Gi"), cap=res("4", "4Gi"))
Q32 = q("q32", parent="q3", deserved=res("2", "2Gi"), cap=res("4", "4Gi"))
Q33 = q("q33", parent="q3", deserved=res("0", "0Gi"), cap=res("4", "4Gi"))
N1 = n("n1", "8", "8Gi")
N2 = n("n2", "8", "8Gi", **{"nvidia.com/gpu": "8", "hugepages-1Gi": "0"})
N3 = n("n3", "16", "16Gi", **{"nvidia.com/a100": "5", "rdma/hca": "1001"})
BIG = dict(cpu="16", memory="16Gi", **{"nvidia.com/a100": "5", "rdma/hca": "1"})
BIGP = dict(cpu="16", mem="16Gi", **{"nvidia.com/a100": "5", "rdma/hca": "1"})
ROOT3 = q("root", deserved=res("32", "32Gi", **{"nvidia.com/a100": "10"}))
ROOT3_CAPPED = q("root", deserved=res("32", "32Gi", **{"nvidia.com/a100": "10"}),
                 cap=res("16", "16Gi", **{"nvidia.com/a100": "5", "rdma/hca": "1001"}))
C13 = [q("case13_queue1", parent="root", guarantee=res("32", "32Gi", **{"nvidia.com/a100": "10"})),
       q("case13_queue11", parent="case13_queue1", guarantee=res("16", "16Gi", **{"nvidia.com/a100": "5"})),
       q("case13_queue12", parent="case13_queue1", guarantee=res("16", "16Gi", **{"nvidia.com/a100": "5"}))]
C14 = q("case14_queue", parent="case13_queue1", guarantee=res(**{"nvidia.com/a100": "4"}))
C15 = [q("case15_queue1", parent="root", deserved=res("32", "32Gi", **{"nvidia.com/a100": "10"})),
       q("case15_queue11", parent="case15_queue1", deserved=res("16", "16Gi", **{"nvidia.com/a100": "5"})),
       q("case15_queue12", parent="case15_queue1", deserved=res("16", "16Gi", **{"nvidia.com/a100": "5"}))]
C16 = q("case16_queue", parent="case15_queue1", deserved=res(**{"nvidia.com/a100": "4"}))

HIER_CASES: list[dict[str, Any]] = [
    dict(id="leaf-queue-allocates", nodes=[N1], queues=H1,
         podgroups=[pg("pg1", "q11", "Inqueue")], pods=[p("p1", "pg1", "1", "1Gi")], binds={"ns1/p1": "n1"}),
    dict(id="non-leaf-queue-does-not-allocate", nodes=[N1], queues=H1,
         podgroups=[pg("pg2", "q1", "Pending")], pods=[p("p2", "pg2", "1", "1Gi")], binds={}),
    dict(id="gang-within-capability", nodes=[N1], queues=[ROOT, Q3, Q4, Q31, Q32],
         podgroups=[pg("pg3", "q31", "Inqueue", 2)],
         pods=[p("p3", "pg3", "2", "2Gi"), p("p4", "pg3", "2", "2Gi")], binds={"ns1/p3": "n1", "ns1/p4": "n1"}),
    dict(id="reclaim-from-sibling-over-deserved", nodes=[N1], queues=[ROOT, Q3, Q31, Q32, Q4],
         podgroups=[pg("pg4", "q4", "Running"), pg("pg5", "q31", "Running"), pg("pg6", "q32", "Inqueue")],
         pods=[p("p5", "pg4", "4", "4Gi", on="n1"), p("p6", "pg5", "2", "2Gi", on="n1", keep=True),
               p("p7", "pg5", "2", "2Gi", on="n1"), p("p8", "pg6", "2", "2Gi")],
         evicted=["ns1/p7"], pipelined={"ns1/p8": "n1"}),
    dict(id="ancestor-real-capability-blocks", nodes=[N1], queues=[ROOT, Q3, Q31, Q32, Q33],
         podgroups=[pg("pg5", "q31", "Running"), pg("pg7", "q32", "Running"), pg("pg8", "q33", "Inqueue")],
         pods=[p("p6", "pg5", "2", "2Gi", on="n1", keep=True), p("p9", "pg7", "2", "2Gi", on="n1"),
               p("p10", "pg8", "3", "3Gi")], binds={}),
    dict(id="unset-cpu-capability-inherited", nodes=[N1],
         queues=[ROOT, q("q5", parent="root", cap=res("", "4Gi")), q("q51", parent="q5", cap=res("", "2Gi"))],
         podgroups=[pg("pg9", "q51", "Running")], pods=[p("p11", "pg9", "1", "")], binds={"ns1/p11": "n1"}),
    dict(id="ancestor-capability-limits-enqueue", nodes=[N1],
         queues=[ROOT, q("q6", parent="root", cap=res("2", "4Gi")), q("q61", parent="q6"), q("q62", parent="q6")],
         podgroups=[pg("pg10", "q61", "Pending", cpu="2", memory="4Gi"),
                    pg("pg11", "q62", "Pending", cpu="2", memory="4Gi")],
         pods=[], phases={"ns1/pg10": "Inqueue", "ns1/pg11": "Pending"}),
    dict(id="children-guarantees-over-parent-do-not-crash", nodes=[N1],
         queues=[ROOT, q("q7", parent="root", cap=res("6", "4Gi")),
                 q("q71", parent="q7", cap=res("6", "4Gi"), guarantee=res("4", "3Gi")),
                 q("q72", parent="q7", cap=res("6", "4Gi"), guarantee=res("4", "3Gi"))],
         podgroups=[], pods=[], binds={}),
    dict(id="scalar-in-deserved", nodes=[n("n-gpu", "8", "8Gi", **{"nvidia.com/gpu": "8"})],
         queues=[ROOT, q("q8", parent="root", deserved=res("4", "4Gi", **{"nvidia.com/gpu": "8"})),
                 q("q81", parent="q8", deserved=res("2", "2Gi", **{"nvidia.com/gpu": "4"})),
                 q("q82", parent="q8", deserved=res("2", "2Gi", **{"nvidia.com/gpu": "4"}))],
         podgroups=[pg("pg12", "q81", "Inqueue")],
         pods=[p("p12", "pg12", "2", "2Gi", **{"nvidia.com/gpu": "1"})], binds={"ns1/p12": "n-gpu"}),
    dict(id="zero-scalar-in-deserved", nodes=[N2],
         queues=[ROOT, q("q9", parent="root", deserved=res("2", "2Gi", **{"nvidia.com/gpu": "8", "hugepages-1Gi": "0"})),
                 q("q91", parent="q9", deserved=res("2", "2Gi", **{"nvidia.com/gpu": "4", "hugepages-1Gi": "0"}))],
         podgroups=[pg("pg13", "q91", "Inqueue")],
         pods=[p("p13", "pg13", "2", "2Gi", **{"nvidia.com/gpu": "1"})], binds={"ns1/p13": "n2"}),
    dict(id="root-capability-above-cluster-does-not-crash", nodes=[N1],
         queues=[q("root", cap=res("16", "16Gi")), q("q10", parent="root", cap=res("10", "4Gi"))],
         podgroups=[], pods=[], binds={}),
    dict(id="unset-scalar-capability-inherited", nodes=[N2],
         queues=[ROOT, q("c11", parent="root"),
                 q("c111", parent="c11", cap=res("4", "4Gi", **{"nvidia.com/gpu": "4"})),
                 q("c112", parent="c11", cap=res("4", "4Gi", **{"nvidia.com/gpu": "4"}))],
         podgroups=[pg("pg14", "c111", "Inqueue"), pg("pg15", "c112", "Inqueue")],
         pods=[p("p14", "pg14", "1", "1Gi", **{"nvidia.com/gpu": "4"}),
               p("p15", "pg15", "1", "1Gi", **{"nvidia.com/gpu": "4"})],
         binds={"ns1/p14": "n2", "ns1/p15": "n2"}),
    dict(id="reclaim-on-single-scalar-dimension", nodes=[N3],
         queues=[q("root", deserved=res("16", "16Gi", **{"nvidia.com/a100": "4"})),
                 q("c12", parent="root", deserved=res(**{"nvidia.com/a100": "2"})),
                 q("c121", parent="c12", deserved=res(**{"nvidia.com/a100": "2"})), q("c122", parent="c12")],
         podgroups=[pg("pg16", "c121", "Inqueue"), pg("pg17", "c122", "Running"), pg("pg18", "c122", "Running")],
         pods=[p("p16", "pg16", "1", "1Gi", **{"nvidia.com/a100": "2", "rdma/hca": "1"}),
               p("p17", "pg17", "1", "1Gi", on="n3", **{"nvidia.com/a100": "2", "rdma/hca": "1"}),
               p("p18", "pg18", "1", "1Gi", on="n3", keep=True, **{"nvidia.com/a100": "2", "rdma/hca": "1"})],
         evicted=["ns1/p17"], pipelined={"ns1/p16": "n3"}),
    dict(id="enqueue-below-guarantee", nodes=[N3], queues=[ROOT3, *C13],
         podgroups=[pg("pg19", "case13_queue11", "Pending", **BIG), pg("pg20", "case13_queue12", "Running", **BIG)],
         pods=[p("p19", "pg19", **BIGP), p("p20", "pg20", on="n3", **BIGP)],
         phases={"ns1/pg19": "Inqueue", "ns1/pg20": "Running"}),
    dict(id="no-enqueue-above-guarantee-when-root-is-full", nodes=[N3], queues=[ROOT3_CAPPED, C13[0], C14, C13[2]],
         podgroups=[pg("pg20", "case13_queue12", "Running", **BIG), pg("pg21", "case14_queue", "Pending", **BIG)],
         pods=[p("p20", "pg20", on="n3", **BIGP), p("p21", "pg21", **BIGP)],
         phases={"ns1/pg20": "Running", "ns1/pg21": "Pending"}),
    dict(id="enqueue-below-deserved-without-guarantee", nodes=[N3], queues=[ROOT3, *C15],
         podgroups=[pg("pg22", "case15_queue11", "Pending", **BIG), pg("pg23", "case15_queue12", "Running", **BIG)],
         pods=[p("p22", "pg22", **BIGP), p("p23", "pg23", on="n3", **BIGP)],
         phases={"ns1/pg22": "Inqueue", "ns1/pg23": "Running"}),
    dict(id="no-enqueue-above-deserved-when-root-is-full", nodes=[N3], queues=[ROOT3_CAPPED, C15[0], C16, C15[2]],
         podgroups=[pg("pg23", "case15_queue12", "Running", **BIG), pg("pg24", "case16_queue", "Pending", **BIG)],
         pods=[p("p23", "pg23", on="n3", **BIGP), p("p24", "pg24", **BIGP)],
         phases={"ns1/pg23": "Running", "ns1/pg24": "Pending"}),
    dict(id="job-in-non-leaf-queue-stops-the-plugin", nodes=[N1], queues=H1,
         podgroups=[pg("pg1", "q11", "Inqueue"), pg("pg2", "q1", "Inqueue")],
         pods=[p("p1", "pg1", "1", "1Gi"), p("p2", "pg2", "1", "1Gi")], binds={}),
    dict(id="missing-root-stops-the-plugin", nodes=[N1], queues=[q("qa", cap=res("4", "4Gi"))],
         podgroups=[pg("pga", "qa", "Inqueue")], pods=[p("pa", "pga", "1", "1Gi")], binds={}),
]


@pytest.mark.parametrize("case", HIER_CASES, ids=[c["id"] for c in HIER_CASES])
def test_capacity_hierarchical(case: dict[str, Any]) -> None:
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"], conf=HIER)
    _check(d, case)


def test_queue_status_allocated_rolls_up_the_tree() -> None:
    case = HIER_CASES[2]
    d = run(pods=case["pods"], nodes=case["nodes"], podgroups=case["podgroups"], queues=case["queues"], conf=HIER)
    assert d.queues["q31"]["cpu"] == "4" and d.queues["q3"]["cpu"] == "4" and d.queues["root"]["cpu"] == "4"


# --- pure helpers ------------------------------------------------------------------------------------------------

NAMES = ("cpu", "memory", "gpu")
HELPERS = [
    ("le-dims-ignores-unrequested", capacity.le_dims(np.array([3.0, 9.0, 0]), np.array([3.0, 1.0, 0]),
                                                     np.array([1.0, 0, 0]), NAMES), (True, [])),
    ("le-dims-names-over", capacity.le_dims(np.array([4.0, 9.0, 0]), np.array([3.0, 1.0, 0]),
                                            np.array([1.0, 1.0, 0]), NAMES), (False, ["cpu", "memory"])),
    ("greater-relevant-skips-undeclared-scalar",
     capacity.greater_partly_relevant(np.array([0, 0, 5.0]), np.array([1.0, 1.0, 0]), np.array([1, 1, 0], bool),
                                      np.array([0, 0, 1.0])), False),
    ("greater-relevant-declared-zero-scalar",
     capacity.greater_partly_relevant(np.array([0, 0, 5.0]), np.array([1.0, 1.0, 0]), np.array([1, 1, 1], bool),
                                      np.array([0, 0, 1.0])), True),
    ("le-partly-zero-filtered", capacity.le_partly_zero_filtered(np.array([2.0, 9.0, 0]), np.array([2.0, 1.0, 0]),
                                                                 np.array([1.0, 1.0, 1.0])), True),
    ("share-best-effort-is-one", capacity.queue_share(np.array([5.0, 5.0, 0]), np.zeros(3)), 1.0),
    ("share-max-over-deserved", capacity.queue_share(np.array([1.0, 3.0, 0]), np.array([2.0, 4.0, 0])), 0.75),
]


@pytest.mark.parametrize(("got", "want"), [h[1:] for h in HELPERS], ids=[h[0] for h in HELPERS])
def test_helpers(got: Any, want: Any) -> None:
    assert got == want


# --- upstream capacity_test.go Test_updateQueueAttrShare: a queue's share over [cpu, memory]; a queue without deserved
# is best effort (share 1 whatever it holds or asks for); pending requests never count ---------------------------------

_GI = 1024.0 ** 3
_NONE = (0.0, 0.0)
SHARES: list[tuple[str, tuple[float, float], tuple[float, float], float]] = [
    ("best-effort-with-allocated", _NONE, (1, _GI), 1.0),
    ("best-effort-with-pending-requests-only", _NONE, _NONE, 1.0),
    ("best-effort-with-allocated-and-request", _NONE, (1, _GI), 1.0),
    ("best-effort-idle", _NONE, _NONE, 1.0),
    ("deserved-nothing-allocated", (2, 2 * _GI), _NONE, 0.0),
    ("allocated-below-deserved", (2, 2 * _GI), (1, _GI), 0.5),
    ("allocated-equals-deserved", (2, 2 * _GI), (2, 2 * _GI), 1.0),
    ("allocated-above-deserved-on-cpu", (2, 2 * _GI), (3, 2 * _GI), 1.5),
    ("memory-dominant", (2, 4 * _GI), (1, 3 * _GI), 0.75),
    ("cpu-dominant", (2, 4 * _GI), (1.5, 2 * _GI), 0.75),
    ("above-deserved-on-both", (2, 2 * _GI), (3, 3 * _GI), 1.5),
    ("request-does-not-count", (2, 2 * _GI), (1, _GI), 0.5),
    ("zero-deserved-is-best-effort", _NONE, (1, _GI), 1.0),
    ("deserved-zero-allocated", (2, 2 * _GI), _NONE, 0.0),
    ("best-effort-cpu-only", _NONE, (1, 0), 1.0),
    ("best-effort-memory-only", _NONE, (0, _GI), 1.0),
    ("best-effort-cpu-request-only", _NONE, _NONE, 1.0),
]


@pytest.mark.parametrize(("deserved", "allocated", "share"), [s[1:] for s in SHARES], ids=[s[0] for s in SHARES])
def test_queue_share_upstream(deserved: tuple[float, float], allocated: tuple[float, float], share: float) -> None:
    assert capacity.queue_share(np.array(allocated, dtype=float), np.array(deserved, dtype=float)) == pytest.approx(share)


def test_no_double_counting_for_inqueue_job_with_bound_tasks_upstream() -> None:
    """TestNoDoubleCountingForInqueueJobWithBindingTasks: pgA (minResources 3 CPU) is still Inqueue though its three
    1-CPU pods are bound; they count once, so pgB (1 CPU) fits q1's 4 CPU and is enqueued and bound."""
    d = run(pods=[*(p(f"pA{i}", "pgA", "1", "1Gi").on("n1", "Pending") for i in (1, 2, 3)), p("pB1", "pgB", "1", "1Gi")],
            podgroups=[pg("pgA", "q1", "Inqueue", 3, cpu="3", memory="3Gi"), pg("pgB", "q1", "Pending", cpu="1", memory="1Gi")],
            nodes=[n("n1", "4", "8Gi")], queues=[q("q1", cap=res("4", "8Gi"))], conf=ENQUEUE)
    assert d.bind_map() == {"ns1/pB1": "n1"}
