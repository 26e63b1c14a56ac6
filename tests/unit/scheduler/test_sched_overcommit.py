"""overcommit: enqueue admits PodGroups while Σ minResources fits in total × factor − used (Volcano's
plugins/overcommit/overcommit_test.go, as data, plus enqueue-action cases)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.plugins import overcommit
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

NODES = [node("n1").alloc("2", "4Gi", **{"ephemeral-storage": "32Gi", "nvidia.com/gpu": "8"}),
         node("n2").alloc("4", "16Gi")]

FACTORS = [
    ("floats", {"overcommit-factor.cpu": 1.3, "overcommit-factor.memory": 1.4,
                "overcommit-factor.ephemeral-storage": 1.4, "overcommit-factor.nvidia.com/gpu": 1.3},
     {"overcommit-factor": 1.2, "cpu": 1.3, "memory": 1.4, "ephemeral-storage": 1.4, "nvidia.com/gpu": 1.3}),
    ("ints", {"overcommit-factor.cpu": 2, "overcommit-factor.memory": 2},
     {"overcommit-factor": 1.2, "cpu": 2.0, "memory": 2.0}),
    ("below-one-reset", {"overcommit-factor": 0.8, "overcommit-factor.cpu": 0.5},
     {"overcommit-factor": 1.2, "cpu": 1.2}),
    ("strings-ignored", {"overcommit-factor": "3"}, {"overcommit-factor": 1.2}),
]


@pytest.mark.parametrize(("args", "want"), [f[1:] for f in FACTORS], ids=[f[0] for f in FACTORS])
def test_parse_factors(args: dict[str, Any], want: dict[str, float]) -> None:
    assert overcommit.parse_factors(args) == want


def conf(args: dict[str, Any]) -> str:
    return tiers_conf("enqueue", [{"name": "overcommit", "arguments": args}])


CASES: list[dict[str, Any]] = [
    dict(id="factor-above-one", args={"overcommit-factor": 1.2},
         pgs=[podgroup("pg1", "ns").queue("c1").phase("Pending").min(2).min_resources(cpu="2000m", memory="2G")],
         phases={"ns/pg1": "Inqueue"}),
    dict(id="factor-below-one-uses-default", args={"overcommit-factor": 0.8},
         pgs=[podgroup("pg1", "ns").queue("c1").phase("Pending").min(2).min_resources(cpu="2000m", memory="2G")],
         phases={"ns/pg1": "Inqueue"}),
    dict(id="too-large", args={"overcommit-factor": 1.2},
         pgs=[podgroup("pg2", "ns").queue("c1").phase("Pending").min(2).min_resources(cpu="20000m", memory="20G")],
         phases={"ns/pg2": "Pending"}, event=("ns/pg2", "resource in cluster is overused")),
    dict(id="no-min-resources", args={},
         pgs=[podgroup("pg3", "ns").queue("c1").phase("Pending").min(2)], phases={"ns/pg3": "Inqueue"}),
    dict(id="per-resource-factors", args={"overcommit-factor.cpu": 1.3, "overcommit-factor.memory": 1.4},
         pgs=[podgroup("pg1", "ns").queue("c1").phase("Pending").min(2).min_resources(cpu="2000m", memory="2G")],
         phases={"ns/pg1": "Inqueue"}),
    # total cpu 6 × 1.2 = 7.2: 4 + 4 > 7.2, so the second waits (what enqueue admitted counts)
    dict(id="admitted-groups-count", args={},
         pgs=[podgroup("a", "ns").queue("c1").phase("Pending").min(1).min_resources(cpu="4").created(1),
              podgroup("b", "ns").queue("c1").phase("Pending").min(1).min_resources(cpu="4").created(2)],
         phases={"ns/a": "Inqueue", "ns/b": "Pending"}),
    dict(id="inqueue-groups-reserve", args={},
         pgs=[podgroup("a", "ns").queue("c1").phase("Inqueue").min(1).min_resources(cpu="6"),
              podgroup("b", "ns").queue("c1").phase("Pending").min(1).min_resources(cpu="2")],
         phases={"ns/b": "Pending"}),
    dict(id="used-resources-count", args={},
         pgs=[podgroup("r", "ns").queue("c1").phase("Running").min(1),
              podgroup("b", "ns").queue("c1").phase("Pending").min(1).min_resources(cpu="3")],
         pods=[pod("busy", "ns").req("5", "1Gi").group("r").on("n2")],
         phases={"ns/b": "Pending"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_enqueue(case: dict[str, Any]) -> None:
    d = run(nodes=NODES, queues=[queue("c1")], podgroups=case["pgs"], pods=case.get("pods", []),
            conf=conf(case["args"]))
    for key, phase in case["phases"].items():
        assert d.podgroups[key].status["phase"] == phase, key
    if "event" in case:
        key, msg = case["event"]
        assert ("Normal", "Unschedulable", msg) in d.podgroups[key].events


def test_volcano_default_conf_runs_with_every_plugin() -> None:
    """DefaultSchedulerConf lists overcommit and drf: with them registered, nothing is filtered out."""
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.registry import in_tree_registry

    reg = in_tree_registry()
    full = confs.default_conf()
    assert confs.default_conf(reg.plugin_names).plugin_names() == full.plugin_names()
    d = run(nodes=[node("n1").alloc("4", "8Gi")], queues=[queue("c1")],
            podgroups=[podgroup("pg1").queue("c1").phase("Pending").min(2).min_resources(cpu="2", memory="2Gi")],
            pods=[pod("p0").req("1", "1Gi").group("pg1"), pod("p1").req("1", "1Gi").group("pg1")],
            conf=confs.DEFAULT_CONF)
    # enqueue admits the group (overcommit permits), allocate places the gang in the same session
    assert d.podgroups["c1/pg1"].status["phase"] == "Running"
    assert d.bind_map() == {"c1/p0": "n1", "c1/p1": "n1"}
