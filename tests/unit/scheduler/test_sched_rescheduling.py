"""rescheduling: the lowNodeUtilization decision over plain data (Volcano's low_node_utilization.go and
node_utilization_util.go, which have no tests upstream, as cases written from their code), argument parsing, the
interval clock, and the plugin with the shuffle action in sessions kept across ticks."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions, Session
from lahar.scheduler.plugins import rescheduling as rs
from lahar.scheduler.registry import in_tree_registry
from tests.builders import guaranteed_pod, node, objs, pod, podgroup, queue

T0 = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _load(name: str, cpu: float, mem: float = 0.0, pods: float = 0.0, *, unschedulable: bool = False) -> rs.NodeLoad:
    """A node of 10 cpu, 100 memory units and 100 pods, used to the given amounts."""
    return rs.NodeLoad(name, {"cpu": 10.0, "memory": 100.0, "pods": 100.0},
                       {"cpu": cpu, "memory": mem, "pods": pods}, unschedulable)


def _c(uid: str, on: str, *, cpu: float = 2.0, mem: float = 0.0, prio: int = 0, qos: str = "Burstable") -> rs.Candidate:
    return rs.Candidate(uid, on, prio, qos, {"cpu": cpu, "memory": mem, "pods": 1.0})


def _conf(low: float, target: float) -> rs.LowNodeUtilization:
    return rs.LowNodeUtilization(dict.fromkeys(rs.RESOURCES, low), dict.fromkeys(rs.RESOURCES, target))


HOT = [_c("a", "hot", prio=10), _c("b", "hot", prio=100), _c("c", "hot", prio=10, qos="Guaranteed")]

LNU = [
    dict(id="all-nodes-under-thresholds", nodes=[_load("n1", 1), _load("n2", 1)], cands=[_c("a", "n1")],
         conf=_conf(20, 50), want=[]),
    dict(id="no-node-under-thresholds", nodes=[_load("n1", 9), _load("n2", 6)], cands=[_c("a", "n1")],
         conf=_conf(20, 50), want=[]),
    dict(id="no-node-over-targets", nodes=[_load("n1", 1), _load("n2", 4)], cands=[_c("a", "n2")],
         conf=_conf(20, 50), want=[]),
    dict(id="defaults-move-nothing", nodes=[_load("n1", 1), _load("hot", 10)], cands=HOT, conf=rs.LowNodeUtilization(),
         want=[]),
    # hot at 90%: the target room on cold is (50 - 10)% of 10 cpu = 4 cpu, two 2-cpu pods, lowest priority first,
    # then Burstable before Guaranteed
    dict(id="room-on-cold-nodes-limits", nodes=[_load("cold", 1), _load("hot", 9)], cands=HOT, conf=_conf(20, 50),
         want=["a", "c"]),
    dict(id="stops-when-the-node-is-under-its-targets", nodes=[_load("cold", 0), _load("hot", 6)], cands=HOT,
         conf=_conf(20, 50), want=["a"]),
    dict(id="at-target-still-evicts", nodes=[_load("cold", 0), _load("hot", 7)],
         cands=[_c("a", "hot"), _c("b", "hot"), _c("c", "hot")], conf=_conf(20, 50), want=["a", "b"]),
    dict(id="best-effort-first-at-equal-priority", nodes=[_load("cold", 0), _load("hot", 6)],
         cands=[_c("g", "hot", qos="Guaranteed"), _c("u", "hot", qos="Burstable"), _c("e", "hot", qos="BestEffort")],
         conf=_conf(20, 50), want=["e"]),
    dict(id="most-used-node-first", nodes=[_load("cold", 0), _load("warm", 6), _load("hot", 9)],
         cands=[_c("w", "warm", cpu=4), _c("h", "hot", cpu=4)], conf=_conf(20, 50), want=["h", "w"]),
    dict(id="unschedulable-node-is-no-target", nodes=[_load("cold", 0, unschedulable=True), _load("hot", 9)],
         cands=HOT, conf=_conf(20, 50), want=[]),
    dict(id="pods-threshold", nodes=[_load("cold", 0, pods=1), _load("busy", 0, pods=80)],
         cands=[_c("p", "busy", cpu=0)], conf=_conf(20, 50), want=["p"]),
    dict(id="memory-over-target", nodes=[_load("cold", 0, mem=5), _load("hot", 1, mem=90)],
         cands=[_c("m", "hot", cpu=0.5, mem=30), _c("n", "hot", cpu=0.5, mem=30)], conf=_conf(20, 50), want=["m", "n"]),
    dict(id="no-candidates-on-the-node", nodes=[_load("cold", 0), _load("hot", 9)], cands=[_c("x", "cold")],
         conf=_conf(20, 50), want=[]),
]


@pytest.mark.parametrize("case", LNU, ids=[c["id"] for c in LNU])
def test_low_node_utilization(case: dict[str, Any]) -> None:
    got = rs.low_node_utilization(case["nodes"], case["cands"], case["conf"])
    assert [v.uid for v in got] == case["want"]


def test_victims_say_why() -> None:
    (v, _) = rs.low_node_utilization([_load("cold", 1), _load("hot", 9)], HOT, _conf(20, 50))
    assert v.reason == "rescheduling lowNodeUtilization: node hot over targetThresholds (cpu 90% >= 50%)"


@pytest.mark.parametrize(("params", "low", "target"), [
    (None, {"cpu": 100.0, "memory": 100.0, "pods": 100.0}, {"cpu": 100.0, "memory": 100.0, "pods": 100.0}),
    ({"thresholds": {"cpu": 20, "memory": 30, "pods": 40}, "targetThresholds": {"cpu": 50}},
     {"cpu": 20.0, "memory": 30.0, "pods": 40.0}, {"cpu": 50.0, "memory": 100.0, "pods": 100.0}),
    ({"thresholds": {"pod": 10}}, {"cpu": 100.0, "memory": 100.0, "pods": 10.0}, dict.fromkeys(rs.RESOURCES, 100.0)),
    ({"thresholds": {"cpu": "20", "memory": True, "gpu": 5}, "targetThresholds": [1]},
     dict.fromkeys(rs.RESOURCES, 100.0), dict.fromkeys(rs.RESOURCES, 100.0)),
    ({"thresholds": {"cpu": 12.5}, "nodeFit": True, "thresholdPriorityClassName": "x"},
     {"cpu": 12.5, "memory": 100.0, "pods": 100.0}, dict.fromkeys(rs.RESOURCES, 100.0)),
], ids=["defaults", "given", "upstream-pod-key", "not-numbers-keep-defaults", "float-and-unused-keys"])
def test_parse_low_node_utilization(params: Any, low: dict[str, float], target: dict[str, float]) -> None:
    c = rs.parse_low_node_utilization(params)
    assert (dict(c.thresholds), dict(c.target_thresholds)) == (low, target)


@pytest.mark.parametrize(("value", "seconds"), [
    ("5m", 300.0), ("30s", 30.0), ("1h30m", 5400.0), ("soon", 300.0), ("0s", 300.0), ("-1m", 300.0), (None, 300.0),
    (90, 300.0),
], ids=["5m", "30s", "compound", "not-a-duration", "zero", "negative", "null", "bare-number"])
def test_parse_interval(value: Any, seconds: float) -> None:
    assert rs.parse_interval(value) == seconds


@pytest.mark.parametrize(("last", "now", "want"), [
    (None, T0, (False, T0)),
    (T0, T0 + dt.timedelta(seconds=299), (False, T0)),
    (T0, T0 + dt.timedelta(seconds=300), (False, T0)),  # upstream's Before(): strictly after the interval
    (T0, T0 + dt.timedelta(seconds=301), (True, T0 + dt.timedelta(seconds=301))),
], ids=["first-session-starts-the-clock", "too-soon", "exactly-the-interval", "due"])
def test_due(last: dt.datetime | None, now: dt.datetime, want: tuple[bool, dt.datetime]) -> None:
    assert rs.due(last, now, 300.0) == want


# --- the plugin with shuffle, over sessions that keep the clock ----------------------------------------------------

def _conf_text(args: dict[str, Any], *, extra: Sequence[Any] = ()) -> str:
    return yaml.safe_dump({"actions": "shuffle", "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "rescheduling", "arguments": args}, *extra]}]})


ARGS = {"interval": "1m", "strategies": [{"name": "lowNodeUtilization", "params": {
    "thresholds": {"cpu": 20, "memory": 20, "pods": 20}, "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}}]}


def _hot_pods(n: int = 4, **labels: str) -> list[Any]:
    return [pod(f"p{i}", "c1").req("2", "1Gi").group("pg1").on("hot").priority(i).label(**labels) for i in range(n)]


def _session(conf_text: str, pods: list[Any], nodes: list[Any], now: dt.datetime,
             shared: dict[Any, Any]) -> Decisions:
    registry = in_tree_registry()
    conf = confs.load(conf_text, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(pods), nodes=objs(nodes), queues=objs([queue("c1")]),
                           podgroups=objs([podgroup("pg1", "c1").queue("c1").min(0).phase("Running")]))
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    ssn = Session(snap, conf, registry, uid="ssn", now=lambda: stamp, shared=shared)
    for name in conf.actions:
        registry.action(name, conf.action_arguments(name)).execute(ssn)
    return ssn.close()


NODES = [node("cold").alloc("10", "64Gi"), node("hot").alloc("10", "64Gi")]


def _names(d: Decisions) -> list[str]:
    return [e.name for e in d.evictions]


def test_runs_once_per_interval_after_the_first_session() -> None:
    shared: dict[Any, Any] = {}
    pods = _hot_pods()  # hot: 8 of 10 cpu; cold: empty, room up to 50% = 5 cpu
    assert _names(_session(_conf_text(ARGS), pods, NODES, T0, shared)) == []  # the clock starts
    d = _session(_conf_text(ARGS), pods, NODES, T0 + dt.timedelta(seconds=61), shared)
    assert _names(d) == ["p0", "p1"]  # lowest priority first; 80% → 60% → 40%
    (upd,) = d.podgroups.values()
    assert ("Normal", "Evict", "shuffle: pod c1/p0 evicted from node hot: rescheduling lowNodeUtilization: node hot "
            "over targetThresholds (cpu 80% >= 50%)") in upd.events
    assert _names(_session(_conf_text(ARGS), pods, NODES, T0 + dt.timedelta(seconds=90), shared)) == []
    assert _names(_session(_conf_text(ARGS), pods, NODES, T0 + dt.timedelta(seconds=122), shared)) == ["p0", "p1"]


def _shared_due() -> dict[Any, Any]:
    return {("rescheduling", "last-run"): {"at": T0 - dt.timedelta(hours=1)}}


def test_pods_that_are_not_preemptable_stay() -> None:
    pods = _hot_pods(**{"volcano.sh/preemptable": "false"})
    assert _names(_session(_conf_text(ARGS), pods, NODES, T0, _shared_due())) == []


def test_measured_load_wins_over_requests() -> None:
    usage = json.dumps({"cpu": 10, "memory": 10, "time": T0.strftime("%Y-%m-%dT%H:%M:%SZ")})
    hot = node("hot").alloc("10", "64Gi").annotate(**{rs.USAGE_ANNOTATION: usage})  # requests say 80%, load 10%
    assert _names(_session(_conf_text(ARGS), _hot_pods(), [NODES[0], hot], T0, _shared_due())) == []
    stale = json.dumps({"cpu": 10, "memory": 10, "time": "2023-01-01T00:00:00Z"})
    hot = node("hot").alloc("10", "64Gi").annotate(**{rs.USAGE_ANNOTATION: stale})
    assert _names(_session(_conf_text(ARGS), _hot_pods(), [NODES[0], hot], T0, _shared_due())) == ["p0", "p1"]


def test_unknown_strategies_are_skipped_and_the_default_is_lenient() -> None:
    args = {"strategies": [{"name": "offlineOnly"}, {"name": "lowPriorityFirst"}]}
    assert _names(_session(_conf_text(args), _hot_pods(), NODES, T0, _shared_due())) == []
    assert _names(_session(_conf_text({"interval": "whenever"}), _hot_pods(), NODES, T0, _shared_due())) == []


def test_pdb_and_gang_hold_rescheduling_victims() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "c1"},
           "spec": {"selector": {"matchLabels": {"app": "x"}}}, "status": {"disruptionsAllowed": 1}}
    registry = in_tree_registry()
    conf = confs.load(_conf_text(ARGS, extra=[{"name": "pdb"}]), actions=registry.action_names,
                      plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(_hot_pods(app="x")), nodes=objs(NODES), queues=objs([queue("c1")]),
                           podgroups=objs([podgroup("pg1", "c1").queue("c1").min(0).phase("Running")]),
                           poddisruptionbudgets=[pdb])
    stamp = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    ssn = Session(snap, conf, registry, uid="ssn", now=lambda: stamp, shared=_shared_due())
    registry.action("shuffle").execute(ssn)
    assert _names(ssn.close()) == ["p0"]


def test_qos_orders_victims_at_equal_priority() -> None:
    """hot at 60% (three 2-cpu pods): one eviction brings it under 50%; the Guaranteed pods, whose QoS is read once
    for both (same resources), stay."""
    pods = [guaranteed_pod("g0", "2", "1Gi").on("hot"), pod("b", "c1").req("2", "1Gi").group("pg1").on("hot"),
            guaranteed_pod("g1", "2", "1Gi").on("hot")]
    assert _names(_session(_conf_text(ARGS), pods, NODES, T0, _shared_due())) == ["b"]
