"""binpack: argument parsing and per-node scores (Volcano's plugins/binpack/binpack_test.go, as data), and that
allocate packs onto the fullest node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import binpack
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

GPU, FOO = "nvidia.com/gpu", "example.com/foo"


def test_arguments() -> None:
    w = binpack.parse_weights({"binpack.weight": 10, "binpack.cpu": 5, "binpack.memory": 2,
                               "binpack.resources": "nvidia.com/gpu, example.com/foo",
                               "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": -3})
    assert w.weight == 10
    assert w.resources == {GPU: 7, FOO: 1, "cpu": 5, "memory": 2}


def test_argument_defaults() -> None:
    w = binpack.parse_weights({"binpack.cpu": -1, "binpack.memory": "3"})
    assert (w.weight, w.resources) == (1, {"cpu": 1, "memory": 3})


PODS = [pod("p1").req("1", "1Gi").group("pg1").on("n1", "Pending"),
        pod("p2").req("1.5", "0Gi").group("pg1").on("n3", "Pending"),
        pod("p3").req("2", "10Gi", **{GPU: "2"}).group("pg1"),
        pod("p4").req("3", "4Gi", **{FOO: "3"}).group("pg1")]
NODES = [node("n1").alloc("2", "4Gi"), node("n2").alloc("4", "16Gi", **{GPU: "4"}),
         node("n3").alloc("2", "4Gi", **{FOO: "16"})]

SCORE_CASES: list[dict[str, Any]] = [
    dict(id="weighted",
         arguments={"binpack.weight": 10, "binpack.cpu": 2, "binpack.memory": 3,
                    "binpack.resources": "nvidia.com/gpu, example.com/foo",
                    "binpack.resources.nvidia.com/gpu": 7, "binpack.resources.example.com/foo": 8},
         expected={"c1/p1": {"n1": 700, "n2": 137.5, "n3": 150}, "c1/p2": {"n1": 0, "n2": 375, "n3": 0},
                   "c1/p3": {"n1": 0, "n2": 531.25, "n3": 0},
                   "c1/p4": {"n1": 0, "n2": 173.076923076, "n3": 346.153846153}}),
    dict(id="unit-weights-and-gpu-only",
         arguments={"binpack.weight": 1, "binpack.cpu": 1, "binpack.memory": 1, "binpack.resources": "nvidia.com/gpu",
                    "binpack.resources.nvidia.com/gpu": 23},
         expected={"c1/p1": {"n1": 75, "n2": 15.625, "n3": 12.5}, "c1/p2": {"n1": 0, "n2": 37.5, "n3": 0},
                   "c1/p3": {"n1": 0, "n2": 50.5, "n3": 0}, "c1/p4": {"n1": 0, "n2": 50, "n3": 50}}),
    dict(id="zero-weight-scores-nothing", arguments={"binpack.weight": 0},
         expected={"c1/p1": {"n1": 0, "n2": 0, "n3": 0}}),
]


@pytest.mark.parametrize("case", SCORE_CASES, ids=[c["id"] for c in SCORE_CASES])
def test_scores(case: dict[str, Any]) -> None:
    snap = snapshots.build(pods=[p.build() for p in PODS], nodes=[n.build() for n in NODES],
                           podgroups=[podgroup("pg1").build()], queues=[queue("c1").build()])
    conf = confs.SchedulerConf.model_validate({"actions": ["allocate"], "tiers": [
        {"plugins": [{"name": "binpack", "arguments": case["arguments"]}]}]})
    ssn = Session(snap, conf, in_tree_registry())
    every = np.arange(len(snap.arrays))
    tasks = {t.key: t for t in snap.tasks.values()}
    for key, want in case["expected"].items():
        got = ssn.node_scores(tasks[key], every)
        assert dict(zip(snap.arrays.names, got.tolist(), strict=True)) == pytest.approx(want, abs=1e-6), key


def test_allocate_packs_onto_the_fuller_node() -> None:
    conf = tiers_conf("allocate", ["gang"], ["predicates", {"name": "binpack", "arguments": {"binpack.weight": 10}}])
    d = run(nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")], queues=[queue("c1")],
            podgroups=[podgroup("pg0").phase("Running"), podgroup("pg1").min(1)],
            pods=[pod("busy").req("2", "4Gi").group("pg0").on("n2"), pod("new").req("1", "1Gi").group("pg1")],
            conf=conf)
    assert d.bind_map() == {"c1/new": "n2"}


def test_volcano_example_confs_run() -> None:
    """Volcano's shipped scheduler confs (helm default, agent, CI) parse and run a session; plugins this
    registry lacks (e.g. network-topology-aware) make a conf be skipped with the reason."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples" / "scheduler-conf"
    paths = sorted(p for p in root.glob("*.conf") if "actions:" in p.read_text()) if root.exists() else []
    if not paths:
        pytest.skip("volcano example scheduler confs absent")
    reg = in_tree_registry()
    ran = 0
    for path in paths:
        conf = confs.load(path.read_text())
        if missing := set(conf.plugin_names()) - set(reg.plugin_names):
            print(f"{path.name}: skipped, plugins not registered: {sorted(missing)}")
            continue
        d = run(nodes=[node("n1").alloc("4", "8Gi"), node("n2").alloc("4", "8Gi")], queues=[queue("c1")],
                podgroups=[podgroup("pg1").phase("Pending").min(2).min_resources(cpu="2", memory="2Gi")],
                pods=[pod("p0").req("1", "1Gi").group("pg1"), pod("p1").req("1", "1Gi").group("pg1")],
                conf=path.read_text())
        assert sorted(d.bind_map()) == ["c1/p0", "c1/p1"], path.name
        ran += 1
    assert ran >= 1
