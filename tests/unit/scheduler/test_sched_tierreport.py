"""`lahar simulate` by network tier: where jobs landed, fragmentation per tier, the plugin on / off, and the
HyperNode tree plot (scheduler/tierreport.py, scheduler/workload.py, scheduler/plot.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lahar.scheduler import tierreport
from lahar.scheduler.framework import hypernodes
from lahar.scheduler.framework.conf import default_conf
from lahar.scheduler.workload import TraceError, compare_topology, leaf_spine, load_trace, replay

NODES = [f"n{i}" for i in range(8)]


def _node(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {}}}


def _tree() -> hypernodes.Tree:
    # leaf-0 {n0,n1} leaf-1 {n2,n3} under spine-0; leaf-2 {n4,n5} leaf-3 {n6,n7} under spine-1
    return hypernodes.build(leaf_spine(NODES, 2, 2), [_node(n) for n in NODES])


@pytest.mark.parametrize(("nodes", "want"), [
    pytest.param([], ("", None), id="no-pods"),
    pytest.param(["n0"], ("leaf-0", 1), id="one-node"),
    pytest.param(["n0", "n1"], ("leaf-0", 1), id="one-rack"),
    pytest.param(["n1", "n2"], ("spine-0", 2), id="two-racks-one-spine"),
    pytest.param(["n0", "n7"], (hypernodes.CLUSTER_TOP, 3), id="two-spines"),
    pytest.param(["n0", "elsewhere"], ("", None), id="node-under-no-hypernode"),
])
def test_landed(nodes: list[str], want: tuple) -> None:
    assert tierreport.landed(_tree(), nodes) == want


def test_placements_group_pods_by_job() -> None:
    got = tierreport.placements(_tree(), {"a-0": "n0", "a-1": "n1", "b-0": "n3", "b-1": "n4", "x": "n5"},
                                {"a-0": "a", "a-1": "a", "b-0": "b", "b-1": "b"})
    assert got == {"a": {"hypernode": "leaf-0", "tier": 1, "nodes": 2},
                   "b": {"hypernode": hypernodes.CLUSTER_TOP, "tier": 3, "nodes": 2}}


CAP = dict.fromkeys(NODES, 8.0)


@pytest.mark.parametrize(("used", "tier1", "tier2"), [
    pytest.param({}, (4, 4, 1.0, 64, 64), (2, 2, 1.0, 64, 64), id="idle"),
    pytest.param({"n0": 4}, (4, 3, 0.75, 60, 48), (2, 1, 0.5, 60, 32), id="one-pod-breaks-a-rack-and-a-spine"),
    pytest.param({"n0": 8, "n1": 8}, (4, 3, 0.75, 48, 48), (2, 1, 0.5, 48, 32), id="one-full-rack"),
    pytest.param({"n0": 4, "n2": 4}, (4, 2, 0.5, 56, 32), (2, 1, 0.5, 56, 32), id="spread-over-two-racks"),
    pytest.param({"n0": 20}, (4, 3, 0.75, 56, 48), (2, 1, 0.5, 56, 32), id="use-above-capacity-is-capped"),
])
def test_fragmentation(used: dict, tier1: tuple, tier2: tuple) -> None:
    got = tierreport.fragmentation(_tree(), used, CAP)
    keys = ("hypernodes", "whole", "whole_share", "free", "free_in_whole")
    assert set(got) == {"1", "2"}  # the virtual top HyperNode is not a tier
    assert tuple(got["1"][k] for k in keys) == tier1
    assert tuple(got["2"][k] for k in keys) == tier2


def test_fragmentation_skips_hypernodes_without_the_resource() -> None:
    got = tierreport.fragmentation(_tree(), {}, {"n0": 8.0, "n1": 8.0})
    assert got["1"]["hypernodes"] == 1 and got["2"]["hypernodes"] == 1


def test_occupancy_rows() -> None:
    occ = tierreport.occupancy(_tree(), {"n0": 8, "n2": 2}, CAP)
    assert hypernodes.CLUSTER_TOP not in occ
    assert occ["spine-0"] == {"tier": 2, "parent": "", "used": 10, "capacity": 32, "free": 22, "busy_nodes": 2,
                              "nodes": 4}
    assert occ["leaf-1"]["parent"] == "spine-0" and occ["leaf-1"]["used"] == 2


@pytest.mark.parametrize(("capacity", "want"), [
    pytest.param({"a": {"cpu": 8.0}}, "cpu", id="cpu-only"),
    pytest.param({"a": {"cpu": 8.0, "nvidia.com/gpu": 0.0}, "b": {"nvidia.com/gpu": 8.0}}, "nvidia.com/gpu",
                 id="any-gpu"),
])
def test_resource_of(capacity: dict, want: str) -> None:
    assert tierreport.resource_of(capacity) == want


def _names(conf) -> list[list[str]]:
    return [[p.name for p in t.plugins] for t in conf.tiers]


@pytest.mark.parametrize("on", [pytest.param(True, id="on"), pytest.param(False, id="off")])
def test_with_topology(on: bool) -> None:
    base = default_conf()
    got = _names(tierreport.with_topology(base, on))
    assert (tierreport.PLUGIN in got[-1]) is on
    assert sum(n.count(tierreport.PLUGIN) for n in got) == int(on)
    again = _names(tierreport.with_topology(tierreport.with_topology(base, on), on))
    assert again == got  # idempotent
    assert _names(tierreport.with_topology(tierreport.with_topology(base, True), False)) == _names(base)


TRACE = """\
tick: 1s
cluster:
  nodes:
  - {name: gpu, count: 8, allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8"}}
  network: {nodesPerLeaf: 2, leavesPerSpine: 2}
jobs:
- {name: small, arrival: 0s, gang: 1, requests: {nvidia.com/gpu: "4"}, duration: 60s, repeat: 4, every: 1s}
- {name: big, arrival: 5s, gang: 2, requests: {nvidia.com/gpu: "8"}, duration: 30s, repeat: 3, every: 1s,
   networkTopology: {mode: hard, highestTierAllowed: 1}}
"""


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("cluster: {nodes: [{name: a, allocatable: {cpu: 1}}], network: {nodesPerLeaf: 0}}",
                 "cluster.network", id="network-zero"),
    pytest.param("cluster: {nodes: [{name: a, allocatable: {cpu: 1}}], hypernodes: [{name: r}]}",
                 "cluster.hypernodes[0]: needs name and tier", id="hypernode-no-tier"),
    pytest.param("cluster: {nodes: [{name: a, allocatable: {cpu: 1}}], hypernodes: [{name: r, tier: 1}]}",
                 "cluster.hypernodes[0]: needs nodes or hypernodes", id="hypernode-no-members"),
    pytest.param("cluster: {nodes: [{name: a, allocatable: {cpu: 1}}]}\njobs: [{networkTopology: {mode: x}}]",
                 "jobs[0].networkTopology.mode", id="bad-mode"),
])
def test_trace_topology_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_trace(text)


def test_replay_reports_hypernode_tier_and_fragmentation() -> None:
    r = replay(load_trace(TRACE))
    jobs = {j["name"]: j for j in r["jobs"]}
    assert all(j["tier"] == 1 and j["hypernode"].startswith("leaf-") for j in jobs.values())
    big = [jobs[f"big-{k}"]["hypernode"] for k in range(3)]
    assert not set(big) & {jobs[f"small-{k}"]["hypernode"] for k in range(4)}  # the big gangs need a whole rack
    tl = r["timeline"]
    assert set(tl["tiers"]) == {"1", "2"} and len(tl["tiers"]["1"]["whole_share"]) == len(tl["t"])
    assert tl["tiers"]["1"]["whole_share"][-1] == 1.0  # all done: every rack whole again
    assert min(tl["tiers"]["1"]["whole"]) == 0
    assert r["summary"]["tiers"]["resource"] == "nvidia.com/gpu"
    assert 0 < r["summary"]["tiers"]["mean_whole_share"]["1"] < 1
    occ = r["occupancy"]["hypernodes"]
    assert set(occ) == {"leaf-0", "leaf-1", "leaf-2", "leaf-3", "spine-0", "spine-1"}
    assert occ["spine-0"]["capacity"] == 32 and max(o["used"] for o in occ.values()) > 0


def test_replay_without_hypernodes_has_no_tier_fields() -> None:
    r = replay(load_trace("cluster: {nodes: [{name: a, allocatable: {cpu: 2}}]}\njobs: [{name: j}]"))
    assert "hypernode" not in r["jobs"][0] and "tiers" not in r["timeline"] and "occupancy" not in r


def test_compare_topology_runs_both_and_drops_the_constraint_without() -> None:
    both = compare_topology(load_trace(TRACE))
    assert set(both["waits"]) == {f"small-{k}" for k in range(4)} | {f"big-{k}" for k in range(3)}
    assert set(both["summary"]["wait_s"]) == {"with", "without"}
    assert set(both["summary"]["mean_whole_share"]["with"]) == {"1", "2"}
    assert both["with"]["jobs"][0]["hypernode"] and both["without"]["jobs"][0]["hypernode"]


def test_cli_compare_topology_table_and_tree_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from lahar.cli import app

    trace = tmp_path / "trace.yaml"
    trace.write_text(TRACE)
    svg = tmp_path / "out.svg"
    r = CliRunner().invoke(app, ["simulate", "--workload", str(trace), "--compare-topology", "-o", "table",
                                 "--plot", str(svg), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "with topology:" in r.stdout and "without topology:" in r.stdout and "tier 1: whole" in r.stdout
    tree = (tmp_path / "out-tree.svg").read_text()
    for name in ("leaf-0", "leaf-1", "leaf-2", "leaf-3", "spine-0", "spine-1"):
        assert name in tree
    r = CliRunner().invoke(app, ["simulate", "--workload", str(trace), "--compare-topology", "-o", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)) == {"with", "without", "waits", "summary"}


def test_cli_compare_topology_needs_a_workload(tmp_path: Path) -> None:
    from lahar.cli import app

    snap = tmp_path / "s.yaml"
    snap.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n")
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(snap), "--compare-topology"])
    assert r.exit_code == 2 and "--compare-topology go with --workload" in r.output


def test_documented_topology_trace_keeps_gangs_in_one_rack_only_with_the_plugin() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "scheduler" / "trace-topology.yaml"
    both = compare_topology(load_trace(example.read_text()))
    on = {j["name"]: j for j in both["with"]["jobs"]}
    off = {j["name"]: j for j in both["without"]["jobs"]}
    assert all(on[f"train-{k}"]["tier"] == 1 for k in range(3))
    assert all(off[f"train-{k}"]["tier"] == 2 for k in range(3))
    assert len({on[f"notebook-{k}"]["hypernode"] for k in range(6)}) == 3  # packed into three racks
    assert len({off[f"notebook-{k}"]["hypernode"] for k in range(6)}) == 4  # spread over all four
    ws = both["summary"]["mean_whole_share"]
    assert ws["with"]["1"] > ws["without"]["1"]


def _snapshot_objects() -> list[dict]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
              "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True"}]}} for n in NODES[:4]]
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "tp", "namespace": "default"},
          "spec": {"minMember": 2, "queue": "default", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"tp-{k}", "namespace": "default",
                          "annotations": {"scheduling.k8s.io/group-name": "tp"}},
             "spec": {"schedulerName": "volcano", "containers": [
                 {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}
            for k in range(2)]
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}, "status": {"state": "Open"}}
    return [*nodes, *leaf_spine(NODES[:4], 2, 2), queue, pg, *pods]


def test_snapshot_simulate_reports_where_the_gang_landed() -> None:
    from lahar.scheduler.simulate import simulate

    r = simulate(_snapshot_objects(), tierreport.with_topology(default_conf(), True))
    topo = r["topology"]
    assert topo["resource"] == "nvidia.com/gpu"
    assert topo["placements"]["default/tp"]["tier"] == 1  # the hard tier-1 gang sits in one rack
    assert topo["tiers"]["1"] == {"hypernodes": 2, "whole": 1, "whole_share": 0.5, "free": 16.0,
                                  "free_in_whole": 16.0}
    assert set(topo["occupancy"]["hypernodes"]) == {"leaf-0", "leaf-1", "spine-0"}


def test_snapshot_without_hypernodes_has_no_topology() -> None:
    from lahar.scheduler.simulate import simulate

    objs = [o for o in _snapshot_objects() if o["kind"] != "HyperNode"]
    assert "topology" not in simulate(objs)


def test_cli_snapshot_plot_draws_the_tree(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import yaml

    from lahar.cli import app

    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(_snapshot_objects()))
    svg = tmp_path / "tree.svg"
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(snap), "--plot", str(svg)])
    assert r.exit_code == 0, r.output
    text = svg.read_text()
    assert all(name in text for name in ("leaf-0", "leaf-1", "spine-0"))
    snap.write_text(yaml.safe_dump_all([o for o in _snapshot_objects() if o["kind"] != "HyperNode"]))
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(snap), "--plot", str(svg)])
    assert r.exit_code == 2 and "has no HyperNodes" in r.output
