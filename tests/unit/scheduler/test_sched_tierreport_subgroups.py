"""`lahar simulate` with subgroups: each subgroup's HyperNode in the placement by tier (scheduler/tierreport.py),
a snapshot PodGroup with a subGroupPolicy (scheduler/simulate.py), and a trace job with a partitionPolicy placed
per subgroup (scheduler/workload.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lahar.scheduler import tierreport
from lahar.scheduler.framework import hypernodes
from lahar.scheduler.framework.conf import default_conf
from lahar.scheduler.simulate import simulate
from lahar.scheduler.workload import TraceError, leaf_spine, load_trace, replay

NODES = [f"n{i}" for i in range(8)]
RACKS = {"n0": "leaf-0", "n1": "leaf-0", "n2": "leaf-1", "n3": "leaf-1",
         "n4": "leaf-2", "n5": "leaf-2", "n6": "leaf-3", "n7": "leaf-3"}


def _tree() -> hypernodes.Tree:
    return hypernodes.build(leaf_spine(NODES, 2, 2), [{"metadata": {"name": n, "labels": {}}} for n in NODES])


@pytest.mark.parametrize(("bindings", "subgroup", "want"), [
    pytest.param({"a/0": "n0", "a/1": "n1", "a/2": "n2", "a/3": "n3"},
                 {"a/0": "tp-0", "a/1": "tp-0", "a/2": "tp-1", "a/3": "tp-1"},
                 {"a": {"tp-0": {"hypernode": "leaf-0", "tier": 1, "nodes": 2},
                        "tp-1": {"hypernode": "leaf-1", "tier": 1, "nodes": 2}}}, id="one-rack-each"),
    pytest.param({"a/0": "n0", "a/1": "n2"}, {"a/0": "tp-0", "a/1": "tp-0"},
                 {"a": {"tp-0": {"hypernode": "spine-0", "tier": 2, "nodes": 2}}}, id="split-subgroup-shows-spine"),
    pytest.param({"a/0": "n0", "a/1": "n1"}, {"a/0": "tp-0"},
                 {"a": {"tp-0": {"hypernode": "leaf-0", "tier": 1, "nodes": 1}}}, id="pod-of-no-subgroup-left-out"),
    pytest.param({"b/0": "n0"}, {}, {}, id="job-without-subgroups-absent"),
    pytest.param({}, {"a/0": "tp-0"}, {}, id="unbound-subgroup-absent"),
])
def test_subgroup_placements(bindings: dict[str, str], subgroup: dict[str, str], want: dict[str, Any]) -> None:
    job = {p: p.split("/")[0] for p in ["a/0", "a/1", "a/2", "a/3", "b/0"]}
    assert tierreport.subgroup_placements(_tree(), bindings, job, subgroup) == want


def _snapshot(subgroups: int = 2, size: int = 2) -> list[dict[str, Any]]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
              "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True"}]}} for n in NODES]
    policy = {"name": "tp", "subGroupSize": size, "minSubGroups": subgroups, "matchLabelKeys": ["rank"],
              "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "tp", "namespace": "default"},
          "spec": {"minMember": subgroups * size, "queue": "default", "subGroupPolicy": [policy],
                   "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}}
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"tp-{k}", "namespace": "default", "labels": {"rank": str(k // size)},
                          "annotations": {"scheduling.k8s.io/group-name": "tp"}},
             "spec": {"schedulerName": "volcano", "containers": [
                 {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
            for k in range(subgroups * size)]
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}, "status": {"state": "Open"}}
    return [*nodes, *leaf_spine(NODES, 2, 2), queue, pg, *pods]


def test_snapshot_simulate_shows_each_subgroups_hypernode() -> None:
    r = simulate(_snapshot(), tierreport.with_topology(default_conf(), True))
    got = r["topology"]["placements"]["default/tp"]
    assert (got["hypernode"], got["tier"]) == ("spine-0", 2)  # the job under one spine ...
    subs = got["subgroups"]
    assert set(subs) == {"tp-0", "tp-1"}
    assert all(s["tier"] == 1 and s["nodes"] == 2 for s in subs.values())  # ... each subgroup in a rack of it
    assert subs["tp-0"]["hypernode"] != subs["tp-1"]["hypernode"]


def test_snapshot_job_without_subgroups_has_no_subgroup_field() -> None:
    objs = _snapshot()
    pg = next(o for o in objs if o["kind"] == "PodGroup")
    del pg["spec"]["subGroupPolicy"]
    r = simulate(objs, tierreport.with_topology(default_conf(), True))
    assert "subgroups" not in r["topology"]["placements"]["default/tp"]


TRACE = """\
tick: 1s
cluster:
  nodes:
  - {name: gpu, count: 8, allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8"}}
  network: {nodesPerLeaf: 2, leavesPerSpine: 2}
jobs:
- {name: small, arrival: 0s, gang: 1, requests: {nvidia.com/gpu: "8"}, duration: 60s}
- {name: tp, arrival: 1s, gang: 6, requests: {nvidia.com/gpu: "8"}, duration: 30s,
   networkTopology: {mode: hard, highestTierAllowed: 3},
   partitionPolicy: {partitionSize: 2, minPartitions: 3, networkTopology: {mode: hard, highestTierAllowed: 1}}}
"""


def test_trace_job_with_a_partition_policy_is_placed_per_subgroup() -> None:
    r = replay(load_trace(TRACE), topology=True)
    job = next(j for j in r["jobs"] if j["name"] == "tp")
    assert job["bound_at"] is not None
    subs = job["subgroups"]
    assert set(subs) == {"main-0", "main-1", "main-2"}
    assert all(s["tier"] == 1 and s["nodes"] == 2 for s in subs.values())  # a subgroup is never split
    assert len({s["hypernode"] for s in subs.values()}) == 3
    small = next(j for j in r["jobs"] if j["name"] == "small")
    assert "subgroups" not in small
    assert small["hypernode"] not in {s["hypernode"] for s in subs.values()}  # its rack is not whole


@pytest.mark.parametrize(("policy", "message"), [
    pytest.param("{partitionSize: 4}", "partitionSize: must be at least 1 and divide replicas", id="not-a-divisor"),
    pytest.param("{partitionSize: 0}", "partitionSize", id="zero"),
    pytest.param("{partitionSize: 2, minPartitions: 4}", "minPartitions", id="too-many-partitions"),
    pytest.param("{partitionSize: x}", "must be integers", id="not-an-integer"),
    pytest.param("{partitionSize: 2, bogus: 1}", "unknown field", id="unknown-field"),
    pytest.param("{partitionSize: 2, networkTopology: {mode: x}}", "partitionPolicy.networkTopology.mode",
                 id="bad-mode"),
    pytest.param("[2]", "partitionPolicy", id="not-a-mapping"),
])
def test_trace_partition_policy_errors_name_the_field(policy: str, message: str) -> None:
    text = ("cluster: {nodes: [{name: a, allocatable: {cpu: 1}}]}\n"
            f"jobs: [{{name: j, gang: 6, partitionPolicy: {policy}}}]")
    with pytest.raises(TraceError, match=message):
        load_trace(text)


CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: network-topology-aware}]
"""


def test_cli_table_shows_each_subgroups_hypernode(tmp_path: Path) -> None:
    from lahar.cli import app

    (tmp_path / "trace.yaml").write_text(TRACE)
    (tmp_path / "conf.yaml").write_text(CONF)
    r = CliRunner().invoke(app, ["simulate", "--workload", str(tmp_path / "trace.yaml"), "--conf",
                                 str(tmp_path / "conf.yaml"), "-q", "-o", "table"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("tp "))
    assert all(f"main-{k} leaf-" in line for k in range(3)), line
