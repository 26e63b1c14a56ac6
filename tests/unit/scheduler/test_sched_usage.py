"""usage: Volcano's plugins/usage tests as data (argument parsing, predicate and node score by real load, the
shadow-cache rules and estimator arithmetic), read from the static `lahar.sh/node-usage` source on a fixed clock."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import TaskStatus
from lahar.scheduler.plugins import usage as us
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, queue

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
MI = 1024 * 1024


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# Volcano's TestUsageEstimatorConfig, TestUsageConfigKeepsDefaultForGenericStringValues,
# TestUsageConfigParsesBestEffortResourceValues, TestUsageThresholdsKeepDefaultWhenOutOfRange and
# TestUsageWeightsKeepDefaultWhenNegative.
FIELDS = ("usage_weight", "cpu_weight", "memory_weight", "cpu_threshold", "memory_threshold", "request_ratio",
          "burst_ratio", "risk_threshold", "risk_factor", "be_cpu", "be_memory")
DEFAULTS = (5, 1, 1, 80.0, 80.0, 0.7, 0.0, 0.6, 1.2, 250.0, 200.0 * MI)


def _with(**changes: float) -> tuple[float, ...]:
    return tuple(changes.get(f, d) for f, d in zip(FIELDS, DEFAULTS, strict=True))


@pytest.mark.parametrize(("arguments", "want"), [
    ({}, DEFAULTS),
    ({"estimator": {"request_ratio": 0.8, "burst_ratio": 0.3, "risk_threshold": 0.75, "risk_factor": 1.5,
                    "be_cpu": "500m", "be_mem": "300Mi"}},
     _with(request_ratio=0.8, burst_ratio=0.3, risk_threshold=0.75, risk_factor=1.5, be_cpu=500, be_memory=300 * MI)),
    ({"estimator": {"request_ratio": 1.5, "burst_ratio": -0.1, "risk_threshold": 2.0, "risk_factor": 0.5,
                    "be_cpu": "-1", "be_mem": "bad"}}, DEFAULTS),
    ({"usage.weight": "7", "cpu.weight": "2", "memory.weight": "3", "thresholds": {"cpu": "85", "mem": "75"},
      "estimator": {"request_ratio": "0.8", "burst_ratio": "0.3", "risk_threshold": "0.75", "risk_factor": "1.5",
                    "be_cpu": "500m", "be_mem": "300Mi"}}, _with(be_cpu=500, be_memory=300 * MI)),
    ({"estimator": {"be_cpu": 500, "be_mem": 200}}, _with(be_cpu=500, be_memory=200 * MI)),
    ({"thresholds": {"cpu": -1, "mem": 101}}, DEFAULTS),
    ({"usage.weight": -1, "cpu.weight": -1, "memory.weight": -1}, DEFAULTS),
    ({"usage.weight": 2, "memory.weight": 4, "thresholds": {"cpu": 90, "mem": 0}, "estimator": {"risk_factor": 2}},
     _with(usage_weight=2, memory_weight=4, cpu_threshold=90, memory_threshold=0, risk_factor=2.0)),
], ids=["defaults", "estimator", "estimator-out-of-range", "strings-keep-defaults", "numeric-best-effort",
        "thresholds-out-of-range", "negative-weights", "integers-taken"])
def test_upstream_arguments(arguments: dict[str, Any], want: tuple[float, ...]) -> None:
    p = us.Usage(arguments)
    assert tuple(getattr(p, f) for f in FIELDS) == pytest.approx(want)


def _node(name: str, cpu: float | None = None, mem: float | None = None, ago: float | None = 0.0) -> Any:
    n = node(name).alloc("4", "8Gi", pods=10)
    if cpu is not None:
        data: dict[str, Any] = {"cpu": cpu, "memory": mem}
        if ago is not None:
            data["time"] = _stamp(NOW - dt.timedelta(seconds=ago))
        n.annotate(**{us.USAGE_ANNOTATION: json.dumps(data)})
    return n


def _session(nodes: list[Any], arguments: dict[str, Any] | None = None, pods: list[Any] | None = None,
             metrics: dict[str, Any] | None = None, shared: dict[Any, Any] | None = None) -> Session:
    registry = in_tree_registry()
    doc: dict[str, Any] = {"actions": "allocate", "tiers": [{"plugins": [{"name": "usage",
                                                                           "arguments": arguments or {}}]}]}
    if metrics:
        doc["metrics"] = metrics
    conf = confs.load(yaml.safe_dump(doc), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(pods or [pod("p1").req("1", "1Gi").group("pg1")]), nodes=objs(nodes),
                           podgroups=objs([podgroup("pg1")]), queues=objs([queue("c1")]))
    return Session(snap, conf, registry, uid="ssn-1", now=lambda: _stamp(NOW), shared=shared)


def _task(ssn: Session, name: str = "p1") -> Any:
    return next(t for t in ssn.snapshot.tasks.values() if t.name == name)


# Volcano's TestUsage_predicateFn: thresholds 80/80.
PREDICATE = [
    dict(id="cpu-over", node=_node("n1", 81, 60), reason=us.CPU_OVER),
    dict(id="memory-over", node=_node("n2", 60, 81), reason=us.MEMORY_OVER),
    dict(id="at-the-threshold", node=_node("n3", 80, 79), reason=None),
    dict(id="stale-metrics", node=_node("n4", 90, 81, ago=6 * 60), reason=None),
    dict(id="no-metrics-time", node=_node("n5", 90, 81, ago=None), reason=None),
    dict(id="no-annotation", node=_node("n6"), reason=None),
]


@pytest.mark.parametrize("case", PREDICATE, ids=[c["id"] for c in PREDICATE])
def test_upstream_predicate(case: dict[str, Any]) -> None:
    ssn = _session([case["node"]], {"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1,
                                    "thresholds": {"cpu": 80, "mem": 80}})
    f = ssn.predicate(_task(ssn))
    assert f.feasible.tolist() == [case["reason"] is None]
    if case["reason"] is not None:
        assert f.reasons is not None and f.reasons.tolist() == [case["reason"]]
        assert f.unresolvable is not None and f.unresolvable.tolist() == [True]


SCORE_NODES = [_node("n1", 30, 50), _node("n2", 60, 50), _node("n3", 60, 80), _node("n4", 10, 20, ago=6 * 60),
               _node("n5", 0, 0, ago=None)]


# Volcano's TestUsage_nodeOrderFn (and TestUsage_prioritizeNodesDoesNotDoubleCountNodeOrder's first two nodes).
@pytest.mark.parametrize(("arguments", "want"), [
    ({"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1}, [300, 225, 150, 0, 0]),
    ({"usage.weight": 5, "cpu.weight": 1, "memory.weight": 4}, [270, 240, 120, 0, 0]),
], ids=["default-weights", "memory-first"])
def test_upstream_node_order(arguments: dict[str, Any], want: list[float]) -> None:
    ssn = _session(SCORE_NODES, {**arguments, "thresholds": {"cpu": 80, "mem": 80}})
    assert ssn.node_scores(_task(ssn), np.arange(5)).tolist() == pytest.approx(want)


START_RECENT, START_OLD = NOW - dt.timedelta(minutes=1), NOW - dt.timedelta(minutes=10)


# Volcano's TestShouldAddToShadowCache (5-minute delay).
@pytest.mark.parametrize(("status", "node_name", "start", "want"), [
    (TaskStatus.PENDING, "", None, False),
    (TaskStatus.PENDING, "node1", None, False),
    (TaskStatus.ALLOCATED, "node1", None, True),
    (TaskStatus.BINDING, "node1", None, True),
    (TaskStatus.BOUND, "node1", None, True),
    (TaskStatus.RUNNING, "node1", START_RECENT, True),
    (TaskStatus.RUNNING, "node1", START_OLD, False),
    (TaskStatus.RUNNING, "node1", None, True),
    (TaskStatus.SUCCEEDED, "node1", None, False),
], ids=["pending-no-node", "pending-with-node", "allocated", "binding", "bound", "recent-running", "old-running",
        "running-no-start", "completed"])
def test_upstream_tracked(status: TaskStatus, node_name: str, start: dt.datetime | None, want: bool) -> None:
    assert us.tracked(status, node_name, start, NOW, 5 * 60) is want


# Volcano's estimator_test.go shapes.
@pytest.mark.parametrize(("args", "want"), [
    ((1000, 2000, 0.7, 0.0, 1.0), 700),
    ((1000, 2000, 0.7, 0.5, 1.0), 1200),
    ((1000, 2000, 0.7, 0.5, 2.0), 2000),  # clamped at the limit
    ((1000, 0, 0.7, 0.5, 1.0), 700),  # no limit: the request is the limit
    ((1000, 500, 0.7, 0.5, 1.0), 700),  # limit below request: the request
    ((-5, 0, 0.7, 0.0, 1.0), 0),
], ids=["request-only", "with-burst", "clamped", "no-limit", "limit-below-request", "negative-request"])
def test_estimate_pod(args: tuple[float, ...], want: float) -> None:
    assert us.estimate_pod(*args) == pytest.approx(want)


@pytest.mark.parametrize(("real", "shadow", "capacity", "want"), [
    (50, 0, 4000, 0.5), (50, 1000, 4000, 0.75), (90, 1000, 4000, 1.0), (50, 1000, 0, 0.0),
], ids=["real-only", "with-shadow", "capped", "no-capacity"])
def test_composite(real: float, shadow: float, capacity: float, want: float) -> None:
    assert us.composite(real, shadow, capacity) == pytest.approx(want)


@pytest.mark.parametrize(("load", "want"), [(0.59, 1.0), (0.6, 1.2), (0.9, 1.2)], ids=["below", "at", "above"])
def test_applied_risk_factor(load: float, want: float) -> None:
    assert us.applied_risk_factor(load, 0.6, 1.2) == want


def test_shadow_cache_takes_back_exactly_what_it_added() -> None:
    c = us.ShadowCache()
    c.add("n1", "a", 700, 100)
    c.add("n1", "b", 300, 50)
    c.add("n2", "a", 10, 1)  # a moved: its n1 share is taken back first
    assert c.node("n1") == (300, 50) and c.node("n2") == (10, 1)
    c.sub("a")
    c.sub("missing")
    assert c.node("n2") == (0, 0)


def test_a_session_placement_lowers_the_node_score() -> None:
    ssn = _session([_node("n1", 30, 50)], pods=[pod("p1").req("2", "4Gi").group("pg1"),
                                               pod("p2").req("1", "1Gi").group("pg1")])
    p2 = _task(ssn, "p2")
    before = ssn.node_scores(p2, np.arange(1))[0]
    stmt = ssn.statement()
    stmt.allocate(_task(ssn, "p1"), 0)
    # p1 adds 0.7·2000m of 4000m cpu (0.3 → 0.65) and 0.7·4Gi of 8Gi memory (0.5 → 0.85): (0.35 + 0.15)/2·500
    assert ssn.node_scores(p2, np.arange(1))[0] == pytest.approx(125.0) and before == pytest.approx(300.0)
    stmt.discard()
    assert ssn.node_scores(p2, np.arange(1))[0] == pytest.approx(300.0)


def test_bound_pods_are_in_the_shadow_at_open_with_the_risk_factor() -> None:
    bound = pod("b1").req("1", "1Gi").group("pg1").on("n1", phase="Pending")  # bound, not running: metrics blind
    old = pod("r1").req("1", "1Gi").group("pg1").on("n1")
    old.obj["status"]["startTime"] = _stamp(START_OLD)
    ssn = _session([_node("n1", 70, 70)], pods=[bound, old, pod("p1").req("1", "1Gi").group("pg1")])
    cpu, mem = ssn.plugins["usage"].shadow.node("n1")
    assert cpu == pytest.approx(700 * 1.2) and mem == pytest.approx(0.7 * 1024**3 * 1.2)  # load 0.7 ≥ 0.6


def test_metrics_interval_comes_from_the_conf() -> None:
    ssn = _session([_node("n1", 10, 10)], metrics={"interval": "2m"})
    assert ssn.plugins["usage"].interval == 120.0


@pytest.mark.parametrize(("cpu", "mem", "weights", "want"), [
    (0.3, 0.5, (1, 1, 5), 300.0), (0.6, 0.8, (1, 4, 5), 120.0), (0.5, 0.5, (0, 0, 5), 0.0), (1.0, 1.0, (1, 1, 5), 0.0),
], ids=["default", "memory-first", "no-weights", "full"])
def test_node_score(cpu: float, mem: float, weights: tuple[int, int, int], want: float) -> None:
    assert us.node_score(cpu, mem, *weights) == pytest.approx(want)


def test_a_changed_annotation_is_read_again_in_the_next_session() -> None:
    shared: dict[Any, Any] = {}
    first = _session([_node("n1", 90, 10)], shared=shared)
    assert first.predicate(_task(first)).feasible.tolist() == [False]
    again = _session([_node("n1", 90, 10)], shared=shared)
    assert again.plugins["usage"].usage[0] is first.plugins["usage"].usage[0]  # parsed once
    cooled = _session([_node("n1", 10, 10)], shared=shared)
    assert cooled.predicate(_task(cooled)).feasible.tolist() == [True]


def test_no_estimates_are_gathered_for_an_unmeasured_node() -> None:
    """An unmeasured (or stale) node scores 0 whatever its shadow holds, so placements there add nothing to it;
    the measured node beside it still gets its estimate."""
    ssn = _session([_node("n1", 30, 50), _node("n2"), _node("n3", 30, 50, ago=3600)],
                   pods=[pod(f"p{i}").req("1", "1Gi").group("pg1") for i in (1, 2, 3, 4)])
    stmt = ssn.statement()
    for name, row in (("p1", 0), ("p2", 1), ("p3", 2)):
        stmt.allocate(_task(ssn, name), row)
    shadow = ssn.plugins["usage"].shadow
    assert shadow.node("n2") == (0, 0) and shadow.node("n3") == (0, 0)
    assert shadow.node("n1")[0] == pytest.approx(700)
    assert ssn.node_scores(_task(ssn, "p4"), np.array([1, 2])).tolist() == [0.0, 0.0]
