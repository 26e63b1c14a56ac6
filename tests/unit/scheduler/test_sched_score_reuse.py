"""The session's reuse of node-order scores (`NodeOrderReuse`, `Session.node_scores`) changes nothing: sessions run
with and without it over varied clusters and workloads (every in-tree plugin but the extender, a few confs) bind,
pipeline and report the same, and every node scoring asked returns the same totals, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.session import Session
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, queue, tiers_conf
from tests.builders._base import objs

EVERY = [n for n in in_tree_registry().plugin_names
         if n not in ("priority", "gang", "conformance", "extender", "capacity")]
CONFS = {
    "every-plugin": tiers_conf("enqueue, allocate, backfill", ["priority", "gang", "conformance"],
                               [p if p != "nodegroup" else {"name": p, "arguments": {"strict": False}}
                                for p in EVERY]),
    "binpack-nodeorder-weighted": tiers_conf(
        "allocate, backfill", ["priority", "gang"],
        ["predicates", "proportion", {"name": "binpack", "arguments": {"binpack.weight": 3, "binpack.cpu": 2}},
         {"name": "nodeorder", "arguments": {"tainttoleration.weight": 2, "nodeaffinity.weight": 3,
                                             "podaffinity.weight": 1, "podtopologyspread.weight": 1}},
         "resource-strategy-fit", "usage"]),
    "nodeorder-then-others": tiers_conf(
        "allocate", ["gang"], ["predicates", "nodeorder", "network-topology-aware", "numa-aware", "binpack"]),
    "binpack-weight-zero": tiers_conf(
        "allocate", ["gang"], ["predicates", {"name": "binpack", "arguments": {"binpack.weight": 0}}, "nodeorder",
                               "tdm"]),
}


def _registry(reuse: bool) -> Registry:
    """The in-tree registry; without reuse every plugin's `node_order_reuse` is shadowed by None."""
    base = in_tree_registry()
    if reuse:
        return base
    reg = Registry()
    for name in base.action_names:
        reg.add_action(name, lambda args, _n=name: base.action(_n, args))

    def build(name: str, args: Any) -> Any:
        plugin = base.plugin(name, args)
        if hasattr(plugin, "node_order_reuse"):
            plugin.node_order_reuse = None
        return plugin

    for name in base.plugin_names:
        reg.add_plugin(name, lambda args, _n=name: build(_n, args))
    return reg


def _run(objects: dict[str, list[Any]], conf: str, reuse: bool,
         monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[tuple[str, list[int], list[float]]]]:
    registry = _registry(reuse)
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(**{kind: objs(list(items)) for kind, items in objects.items()})
    asked: list[tuple[str, list[int], list[float]]] = []
    scores = Session.node_scores

    def recorded(self: Session, task: Any, candidates: np.ndarray) -> np.ndarray:
        got = scores(self, task, candidates)
        asked.append((task.uid, candidates.tolist(), got.tolist()))
        return got

    with monkeypatch.context() as m:
        m.setattr(Session, "node_scores", recorded)
        d = run_session(snap, c, registry=registry, uid="ssn-1", shared={})
    return d, asked


def _same(objects: dict[str, list[Any]], conf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, plain_scores = _run(objects, conf, False, monkeypatch)
    reused, reused_scores = _run(objects, conf, True, monkeypatch)
    assert [(b.name, b.node) for b in reused.binds] == [(b.name, b.node) for b in plain.binds]
    assert reused.pipelined == plain.pipelined
    assert reused.annotations == plain.annotations
    assert [(c.name, c.message) for c in reused.pod_conditions] == [(c.name, c.message) for c in plain.pod_conditions]
    assert reused_scores == plain_scores  # float lists: == compares every total exactly


REQUESTS = [{"cpu": "1", "memory": "2Gi"}, {"cpu": "2", "memory": "1Gi"}, {"cpu": "500m", "memory": "3Gi"},
            {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": "1"}, {"cpu": "1", "memory": "1Gi"}]


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, list[Any]]:
    n_nodes = draw(st.integers(1, 12))
    nodes = []
    for i in range(n_nodes):
        gpu = {"nvidia.com/gpu": str(draw(st.sampled_from([1, 2, 4])))} if draw(st.booleans()) else {}
        b = node(f"n{i}").alloc(str(draw(st.sampled_from([2, 4, 8]))), f"{draw(st.sampled_from([4, 8, 16]))}Gi",
                                pods=draw(st.sampled_from([3, 8, 110])), **gpu)
        b = b.label(zone=f"z{i % 3}", **({"disk": "ssd"} if draw(st.booleans()) else {}))
        if draw(st.integers(0, 5)) == 0:
            b = b.taint("soft", "x", effect="PreferNoSchedule")
        nodes.append(b)
    queues = [queue("q0").weight(1), queue("q1").weight(3)]
    pods: list[Any] = []
    podgroups: list[Any] = []
    for g in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 5))
        req = draw(st.sampled_from(REQUESTS))
        mins = draw(st.integers(1, size))
        podgroups.append(podgroup(f"pg{g}").min(mins).queue(f"q{g % 2}").phase("Inqueue"))
        tolerate = draw(st.booleans())
        prefer = draw(st.booleans())
        for k in range(size):
            b = pod(f"pg{g}-{k}").req(**req).group(f"pg{g}")
            if tolerate:
                b = b.tolerate("soft", "x", effect="PreferNoSchedule")
            if prefer:
                b.obj["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [
                        {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
            if draw(st.integers(0, 3)) == 0:
                b = b.on(f"n{draw(st.integers(0, n_nodes - 1))}")
            pods.append(b)
    return {"nodes": nodes, "queues": queues, "podgroups": podgroups, "pods": pods}


@pytest.mark.parametrize("conf", list(CONFS), ids=list(CONFS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects=workloads())
def test_reused_scores_place_and_score_as_asking_every_time(conf: str, objects: dict[str, list[Any]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _same(objects, CONFS[conf], monkeypatch)


def test_gangs_of_one_shape_on_many_nodes_place_as_asking_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's shape: gangs of identical pods, more placements than the kept scores' full-refresh bound."""
    nodes = [node(f"n{i:02d}").alloc("16", "64Gi", **({"nvidia.com/gpu": "4"} if i % 4 == 0 else {}))
             for i in range(40)]
    pods, pgs = [], []
    for g in range(30):
        req = REQUESTS[g % len(REQUESTS)]
        pgs.append(podgroup(f"pg{g}").min(8).queue(f"q{g % 2}").phase("Inqueue"))
        pods += [pod(f"pg{g}-{k}").req(**req).group(f"pg{g}") for k in range(8)]
    objects = {"nodes": nodes, "queues": [queue("q0"), queue("q1")], "podgroups": pgs, "pods": pods}
    for conf in CONFS.values():
        _same(objects, conf, monkeypatch)
