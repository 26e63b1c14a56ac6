"""resource-strategy-fit: argument parsing, per-node scores, sra and proportional (Volcano's
plugins/resource-strategy-fit/*_test.go, as data), and that allocate keeps a CPU pod off the GPU node."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import resource_strategy_fit as rsf
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

LEAST, MOST = rsf.LEAST, rsf.MOST
CM = ("cpu", "memory")


WEIGHT_CASES: list[dict[str, Any]] = [
    dict(id="both-given", args={"resourceStrategyFitWeight": 10, "resources": {
        "cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}}},
         weight=10, resources={"cpu": (MOST, 1), "memory": (LEAST, 2)}),
    dict(id="weight-defaults-to-10", args={"resources": {"cpu": {"type": MOST, "weight": 1}}},
         weight=10, resources={"cpu": (MOST, 1)}),
    dict(id="resources-default-to-least-cpu-memory", args={"resourceStrategyFitWeight": 10},
         weight=10, resources={"cpu": (LEAST, 1), "memory": (LEAST, 1)}),
    dict(id="bare-star-dropped", args={"resources": {"cpu": {"type": LEAST, "weight": 1},
                                                     "*": {"type": MOST, "weight": 2}}},
         weight=10, resources={"cpu": (LEAST, 1)}),
    dict(id="double-star-dropped", args={"resources": {"nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                                                       "cloudml.gpu**": {"type": LEAST, "weight": 2}}},
         weight=10, resources={"nvidia.com/gpu/*": (MOST, 3)}),
    dict(id="star-not-at-end-dropped", args={"resources": {"memory": {"type": LEAST, "weight": 1},
                                                           "cloudml.*.gpu": {"type": MOST, "weight": 2},
                                                           "*.com/gpu": {"type": MOST, "weight": 3}}},
         weight=10, resources={"memory": (LEAST, 1)}),
    dict(id="several-prefixes", args={"resources": {"nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                                                    "example.com/foo/*": {"type": LEAST, "weight": 2},
                                                    "*test*resource*": {"type": MOST, "weight": 4},
                                                    "*": {"type": LEAST, "weight": 1}}},
         weight=10, resources={"nvidia.com/gpu/*": (MOST, 3), "example.com/foo/*": (LEAST, 2)}),
    dict(id="bad-weight-and-type-fall-back", args={"resourceStrategyFitWeight": -3, "resources": {
        "cpu": {"type": "Balanced", "weight": 0}, "memory": "MostAllocated"}},
         weight=10, resources={"cpu": (LEAST, 1)}),
    dict(id="zero-weight-kept", args={"resourceStrategyFitWeight": 0}, weight=0,
         resources={"cpu": (LEAST, 1), "memory": (LEAST, 1)}),
]


@pytest.mark.parametrize("case", WEIGHT_CASES, ids=[c["id"] for c in WEIGHT_CASES])
def test_parse_strategy(case: dict[str, Any]) -> None:
    s = rsf.parse_strategy(case["args"])
    assert (s.weight, s.resources) == (case["weight"], case["resources"])


def _strategy(weight: int, **kinds: tuple[str, int]) -> rsf.Strategy:
    return rsf.Strategy(weight, dict(kinds))


def _ann(kind: str, weights: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {rsf.TYPE_ANNOTATION: kind, rsf.WEIGHT_ANNOTATION: weights}}}


# Upstream TestScore: task (milli-cpu, memory), node (used cpu, used memory, alloc cpu, alloc memory).
SCORE_CASES: list[dict[str, Any]] = [
    dict(id="least", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=400),
    dict(id="least-smaller-node", task=(100, 100), node=(200, 200, 400, 400),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=250),
    dict(id="most", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(MOST, 1), memory=(MOST, 1)), want=600),
    dict(id="most-smaller-node", task=(100, 100), node=(200, 200, 400, 400),
         s=_strategy(10, cpu=(MOST, 1), memory=(MOST, 1)), want=750),
    dict(id="mixed-2-1", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 2), memory=(MOST, 1)), want=466.66666667),
    dict(id="mixed-1-2", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 1), memory=(MOST, 2)), want=533.33333333),
    dict(id="no-cpu-request", task=(0, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 1), memory=(MOST, 2)), want=600),
    dict(id="zero-cpu-allocatable-keeps-its-weight", task=(100, 100), node=(200, 200, 0, 400),
         s=_strategy(10, cpu=(LEAST, 1), memory=(MOST, 2)), want=500),
    dict(id="memory-only", task=(100, 100), node=(200, 200, 500, 500), s=_strategy(10, memory=(MOST, 2)), want=600),
    dict(id="pod-least", task=(100, 100), node=(200, 200, 500, 500), pod=_ann(LEAST, '{"cpu": 2, "memory": 1}'),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=400),
    dict(id="pod-most", task=(100, 100), node=(200, 200, 500, 500), pod=_ann(MOST, '{"cpu": 1, "memory": 2}'),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=600),
    dict(id="pod-invalid-json", task=(100, 100), node=(200, 200, 500, 500), pod=_ann(LEAST, "invalid-json"),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=0),
    dict(id="pod-weights-missing", task=(100, 100), node=(200, 200, 500, 500), pod=_ann(LEAST, ""),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=0),
    dict(id="pod-cpu-weight-only", task=(100, 100), node=(200, 200, 500, 500), pod=_ann(LEAST, '{"cpu": 2}'),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=400),
    dict(id="nothing-requested", task=(0, 0), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=0),
    dict(id="node-full", task=(100, 100), node=(500, 500, 500, 500),
         s=_strategy(10, cpu=(LEAST, 1), memory=(LEAST, 1)), want=0),
    dict(id="mixed-3-1", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(10, cpu=(LEAST, 3), memory=(MOST, 1)), want=450),
    dict(id="high-weight", task=(100, 100), node=(200, 200, 500, 500),
         s=_strategy(20, cpu=(LEAST, 5), memory=(LEAST, 5)), want=800),
]


@pytest.mark.parametrize("case", SCORE_CASES, ids=[c["id"] for c in SCORE_CASES])
def test_strategy_score(case: dict[str, Any]) -> None:
    uc, um, ac, am = case["node"]
    got = rsf.strategy_score(np.array(case["task"], dtype=float), np.array([[ac, am]], dtype=float),
                             np.array([[uc, um]], dtype=float), CM, case["s"],
                             rsf.pod_strategy(case.get("pod", {})))
    assert got[0] == pytest.approx(case["want"], abs=1e-6)


@pytest.mark.parametrize(("name", "want"), [
    ("nvidia.com/gpu", (MOST, 1)), ("nvidia.com/gpu-a100", (LEAST, 2)), ("nvidia.com/mig-1g", (LEAST, 3)),
    ("example.com/foo", None),
], ids=["exact-beats-prefix", "longest-prefix", "shorter-prefix", "unmatched"])
def test_find_strategy(name: str, want: tuple[str, int] | None) -> None:
    table = {"nvidia.com/gpu": (MOST, 1), "nvidia.com/gpu*": (LEAST, 2), "nvidia.com/*": (LEAST, 3)}
    assert rsf.find_strategy(name, table) == want


def test_sra_and_proportional_arguments() -> None:
    args = {"sra": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "weight": 3,
                    "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2}},
            "proportional": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10",
                             "resourceProportion": {"nvidia.com/t4.cpu": 3, "nvidia.com/t4.memory": 6,
                                                    "nvidia.com/a10.cpu": 4, "nvidia.com/a10.memory": -8}}}
    sra = rsf.parse_sra(args)
    assert sra is not None and (sra.weight, sra.weight_sum, sra.resources) == (
        3, 3, {"nvidia.com/t4": 1, "nvidia.com/a10": 2})
    prop = rsf.parse_proportional(args)
    assert prop is not None
    assert {k: (v.cpu, v.memory) for k, v in prop.items()} == {"nvidia.com/t4": (3, 6), "nvidia.com/a10": (4, 1)}
    assert rsf.parse_sra({"sra": {"enable": False, "resources": "x"}}) is None
    assert rsf.parse_proportional({"proportional": "yes"}) is None


T4, A10 = "nvidia.com/t4", "nvidia.com/a10"
SRA_PODS = [pod("p1").req("1", "1Gi").group("pg1"), pod("p2").req("1.5", "0Gi", **{T4: "2"}).group("pg1"),
            pod("p3").req("2", "4Gi", **{A10: "2"}).group("pg1"),
            pod("p4").req("3", "4Gi", **{T4: "1", A10: "3"}).group("pg1")]
SRA_NODES = [node("n1").alloc("32", "64Gi", pods=10), node("n2").alloc("8", "16Gi", pods=10, **{T4: "16"}),
             node("n3").alloc("8", "16Gi", pods=10, **{A10: "16"}),
             node("n4").alloc("8", "16Gi", pods=10, **{T4: "8", A10: "16"})]
T4_MOST = {"nvidia.com/t4": {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}}

SESSION_CASES: list[dict[str, Any]] = [
    dict(id="sra-two-gpu-kinds", pods=SRA_PODS, nodes=SRA_NODES, args={
        "resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": f"{T4}, {A10}", "weight": 5,
                                                "resourceWeight": {T4: 2, A10: 3}}},
         expected={"c1/p1": [500, 300, 200, 0], "c1/p2": [0, 300, 0, 0], "c1/p3": [0, 0, 200, 0],
                   "c1/p4": [0, 0, 0, 0]}),
    dict(id="sra-one-gpu-kind", pods=SRA_PODS, nodes=SRA_NODES, args={
        "resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": T4, "weight": 5,
                                                "resourceWeight": {T4: 2}}},
         expected={"c1/p1": [500, 0, 500, 0], "c1/p2": [0, 0, 0, 0], "c1/p3": [0, 0, 500, 0],
                   "c1/p4": [0, 0, 0, 0]}),
    dict(id="strategy-with-sra-weight-0", pods=SRA_PODS, nodes=SRA_NODES, args={
        "resourceStrategyFitWeight": 8, "resources": T4_MOST,
        "sra": {"enable": True, "resources": T4, "weight": 0, "resourceWeight": {T4: 2}}},
         expected={"c1/p1": [775, 700, 700, 700], "c1/p2": [190.625, 237.5, 162.5, 312.5],
                   "c1/p3": [750, 600, 600, 600], "c1/p4": [181.25, 162.5, 125, 200]}),
    dict(id="strategy-with-sra", pods=SRA_PODS, nodes=SRA_NODES, args={
        "resourceStrategyFitWeight": 8, "resources": T4_MOST,
        "sra": {"enable": True, "resources": T4, "weight": 5, "resourceWeight": {T4: 2}}},
         expected={"c1/p1": [1275, 700, 1200, 700], "c1/p2": [190.625, 237.5, 162.5, 312.5],
                   "c1/p3": [750, 600, 1100, 600], "c1/p4": [181.25, 162.5, 125, 200]}),
]


def _session(pods: list[pod], nodes: list[node], args: dict[str, Any]) -> tuple[Session, Any]:
    snap = snapshots.build(pods=[p.build() for p in pods], nodes=[n.build() for n in nodes],
                           podgroups=[podgroup("pg1").build()], queues=[queue("c1").build()])
    registry = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [
        {"plugins": [{"name": "resource-strategy-fit", "arguments": args}]}]}),
        actions=registry.action_names, plugins=registry.plugin_names)
    return Session(snap, conf, registry), snap


@pytest.mark.parametrize("case", SESSION_CASES, ids=[c["id"] for c in SESSION_CASES])
def test_session_scores(case: dict[str, Any]) -> None:
    ssn, snap = _session(case["pods"], case["nodes"], case["args"])
    every = np.arange(len(snap.arrays))
    tasks = {t.key: t for t in snap.tasks.values()}
    for key, want in case["expected"].items():
        assert ssn.node_scores(tasks[key], every).tolist() == pytest.approx(want, abs=1e-6), key


PROP_ARGS = {"resourceStrategyFitWeight": 0, "proportional": {
    "enable": True, "resources": "nvidia.com/gpu", "resourceProportion": {"nvidia.com/gpu.cpu": 4,
                                                                          "nvidia.com/gpu.memory": 8}}}


@pytest.mark.parametrize(("request_", "fits"), [
    ({"cpu": "5", "memory": "8Gi"}, [True, False, True]),
    ({"cpu": "1", "memory": "9Gi"}, [True, False, True]),
    ({"cpu": "1", "memory": "1Gi"}, [True, True, True]),
    ({"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}, [True, True, True]),
], ids=["cpu-would-eat-the-gpu-reserve", "memory-would-eat-the-gpu-reserve", "small-cpu-pod-fits-beside-it", "gpu-pod-is-not-held-back"])
def test_proportional_predicate(request_: dict[str, str], fits: list[bool]) -> None:
    cpu, mem = request_.pop("cpu"), request_.pop("memory")
    ssn, snap = _session([pod("p").req(cpu, mem, **request_).group("pg1")],
                         [node("cpu-only").alloc("8", "16Gi"), node("gpu").alloc("8", "16Gi", **{"nvidia.com/gpu": "1"}),
                          node("roomy").alloc("16", "32Gi", **{"nvidia.com/gpu": "1"})], PROP_ARGS)
    f = ssn.predicate(next(iter(snap.tasks.values())))
    assert f.feasible.tolist() == fits
    if not all(fits):
        assert f.reasons is not None and f.reasons[1] == "proportional of resource nvidia.com/gpu check failed"


def test_allocate_keeps_cpu_pods_off_the_gpu_node() -> None:
    conf = tiers_conf("allocate", ["gang"], ["predicates", {"name": "resource-strategy-fit", "arguments": {
        "sra": {"enable": True, "resources": "nvidia.com/gpu", "weight": 10}}}])
    d = run(nodes=[node("a-gpu").alloc("8", "16Gi", **{"nvidia.com/gpu": "8"}), node("b-cpu").alloc("8", "16Gi")],
            queues=[queue("c1")], podgroups=[podgroup("pg1").min(1), podgroup("pg2").min(1)],
            pods=[pod("cpu").req("1", "1Gi").group("pg1"), pod("gpu").req("1", "1Gi", **{"nvidia.com/gpu": "1"})
                  .group("pg2")], conf=conf)
    assert d.bind_map() == {"c1/cpu": "b-cpu", "c1/gpu": "a-gpu"}


def test_pod_annotation_weights_must_be_whole_numbers() -> None:
    assert rsf.pod_strategy(_ann(MOST, json.dumps({"cpu": "2"}))) is False
    assert rsf.pod_strategy(_ann(MOST, "[1]")) is False
    assert rsf.pod_strategy({}) is None


def test_cached_scores_follow_an_allocation() -> None:
    args = {"resources": {"cpu": {"type": MOST, "weight": 1}}, "sra": {"enable": True, "resources": T4, "weight": 1}}
    ssn, snap = _session([pod("a").req("2", "1Gi").group("pg1"), pod("b").req("2", "1Gi").group("pg1")],
                         SRA_NODES, args)
    a, b = (next(t for t in snap.tasks.values() if t.name == n) for n in ("a", "b"))
    every = np.arange(len(snap.arrays))
    before = ssn.node_scores(b, every).tolist()
    ssn.statement().allocate(a, snap.arrays.index["n2"])
    after = ssn.node_scores(b, every).tolist()
    fresh = rsf.ResourceStrategyFit(args)
    fresh.on_session_open(ssn)
    assert after == pytest.approx(fresh.node_order(b, snap.arrays, every).tolist())
    assert after[1] > before[1] and after[0] == before[0]  # MostAllocated: n2 is fuller now, n1 untouched
