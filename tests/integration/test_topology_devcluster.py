"""Gang + topology on devcluster `dgx-h100` nodes over HTTPS (issue 6, item 5): 4 pods × 8 GPUs + 8 VFs get one
whole node each with every GPU paired to a VF under its PCIe switch; 16 pods × 1 GPU + 1 VF under a task policy of
`single-numa-node` (stricter than the nodes' `best-effort`) pack 8 per node with GPU, VF and CPUs on one NUMA node;
a gang that cannot be placed that way binds nothing and its pods say why."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.kube import errors, kubeconfig
from lahar.kube.resources import in_tree
from lahar.kube.rest import RestClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import podgroup
from tests.support import create_queue

pytestmark = pytest.mark.integration

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: numa-aware}, {name: deviceshare}]
"""
JOINT = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})


def _wait(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
            if got:
                return got
        except errors.ApiError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestClient]:
    from lahar.devcluster.runtime import Cluster

    c = Cluster(data_dir=tmp_path_factory.mktemp("topo") / "data", port=0, profile="dgx-h100", nodes=4,
                republish_interval=0.2).start()
    client = RestClient(kubeconfig.load(str(c.kubeconfig)), registry=in_tree())
    client.kubeconfig_path = c.kubeconfig  # type: ignore[attr-defined]
    try:
        crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for name in ("scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml",
                     "nodeinfo.volcano.sh_numatopologies.yaml", "scheduling.koordinator.sh_devices.yaml"):
            client.create(crd_rt, yaml.safe_load((CRDS / name).read_text()))
        numa_rt = client.registry.get("nodeinfo.volcano.sh", "v1alpha1", "numatopologies")
        device_rt = client.registry.get("scheduling.koordinator.sh", "v1alpha1", "devices")
        _wait(lambda: len(client.list(numa_rt)["items"]) == 4 and len(client.list(device_rt)["items"]) == 4)
        create_queue(client)
        yield client
    finally:
        client.close()
        c.stop()


def _pod(name: str, group: str, *, gpus: int, vfs: int, cpu: str, policy: str | None = None,
         joint: bool = True) -> dict[str, Any]:
    res: dict[str, str] = {"cpu": cpu, "memory": "16Gi", "nvidia.com/gpu": str(gpus)}
    if vfs:
        res["nvidia.com/rdma_vf"] = str(vfs)
    ann = {"scheduling.k8s.io/group-name": group}
    if joint:
        ann["scheduling.koordinator.sh/device-joint-allocate"] = JOINT
    if policy:
        ann["volcano.sh/numa-topology-policy"] = policy
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": res, "limits": dict(res)}}]}}


def _gang(client: RestClient, name: str, pods: list[dict[str, Any]]) -> None:
    pg_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    pods_rt = client.registry.get("", "v1", "pods")
    client.create(pg_rt, podgroup(name, "default").min(len(pods)).queue("q1").bare(status=True), namespace="default")
    for p in pods:
        client.create(pods_rt, p, namespace="default")


def _session(client: RestClient) -> tuple[Any, Any]:
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    return run_once(client, conf, registry=registry)


def _pods(client: RestClient, prefix: str) -> dict[str, dict[str, Any]]:
    pods_rt = client.registry.get("", "v1", "pods")
    return {p["metadata"]["name"]: p for p in client.list(pods_rt, namespace="default")["items"]
            if p["metadata"]["name"].startswith(prefix)}


def _topology(client: RestClient, node: str) -> dict[str, Any]:
    nodes_rt = client.registry.get("", "v1", "nodes")
    return json.loads(client.get(nodes_rt, node)["metadata"]["annotations"]["lahar.sh/gpu-topology"])


def _delete(client: RestClient, names: list[str]) -> None:
    pods_rt = client.registry.get("", "v1", "pods")
    for n in names:
        client.delete(pods_rt, n, namespace="default", grace_period_seconds=0)
    _wait(lambda: not any(n in _pods(client, "") for n in names))


def test_gang_topology_placements(cluster: RestClient) -> None:
    client = cluster

    # 1. four pods x (8 GPUs + 8 VFs), best-effort nodes: one whole node each, GPU i paired with a VF on its switch
    _gang(client, "big", [_pod(f"big-{i}", "big", gpus=8, vfs=8, cpu="16") for i in range(4)])
    _, result = _session(client)
    assert len(result.bound) == 4 and not result.bind_failures
    big = _pods(client, "big-")
    assert len({p["spec"]["nodeName"] for p in big.values()}) == 4
    for p in big.values():
        ann = p["metadata"]["annotations"]
        topo = _topology(client, p["spec"]["nodeName"])
        switch_of_gpu = {g["index"]: g["pcieSwitch"] for g in topo["gpus"]}
        switch_of_nic = {n["index"]: n["pcieSwitch"] for n in topo["nics"]}
        pairs = json.loads(ann["lahar.sh/gpu-rdma-pairs"])
        assert sorted(x["gpu"] for x in pairs) == list(range(8))
        assert len({x["vf"] for x in pairs}) == 8
        assert all(switch_of_gpu[x["gpu"]] == switch_of_nic[x["nic"]] and x["scope"] == "PCIe" for x in pairs)
        allocated = json.loads(ann["scheduling.koordinator.sh/device-allocated"])
        assert sorted(g["minor"] for g in allocated["gpu"]) == list(range(8))
        assert sum(len(r["extension"]["vfs"]) for r in allocated["rdma"]) == 8
        assert "volcano.sh/topology-decision" in ann
    _delete(client, list(big))

    # 2. sixteen pods x (1 GPU + 1 VF) with single-numa-node on best-effort nodes: 8 per node, one NUMA node each
    _gang(client, "small", [_pod(f"small-{i}", "small", gpus=1, vfs=1, cpu="4", policy="single-numa-node")
                            for i in range(16)])
    _, result = _session(client)
    assert len(result.bound) == 16 and not result.bind_failures
    small = _pods(client, "small-")
    assert sorted(Counter(p["spec"]["nodeName"] for p in small.values()).values()) == [8, 8]
    per_node_gpus: dict[str, list[int]] = {}
    for p in small.values():
        ann = p["metadata"]["annotations"]
        decision = json.loads(ann["volcano.sh/topology-decision"])["numa"]
        assert len(decision) == 1
        (numa, res), = decision.items()
        # memory too: devcluster's Numatopology publishes it per NUMA node (lahar.sh/numa-memory)
        assert res == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1", "nvidia.com/rdma_vf": "1"}
        topo = _topology(client, p["spec"]["nodeName"])
        (pair,) = json.loads(ann["lahar.sh/gpu-rdma-pairs"])
        gpu_numa = {g["index"]: g["numa"] for g in topo["gpus"]}
        nic_numa = {n["index"]: n["numa"] for n in topo["nics"]}
        assert gpu_numa[pair["gpu"]] == nic_numa[pair["nic"]] == int(numa)
        assert json.loads(ann["lahar.sh/numa-allocation"])["numa"] == [int(numa)]
        per_node_gpus.setdefault(p["spec"]["nodeName"], []).append(pair["gpu"])
    assert all(sorted(v) == list(range(8)) for v in per_node_gpus.values())

    # 3. five pods x (1 GPU + 60 CPUs) with single-numa-node: resources fit 6 on the two free nodes, NUMA only 4
    _gang(client, "wide", [_pod(f"wide-{i}", "wide", gpus=1, vfs=0, cpu="60", policy="single-numa-node",
                                joint=False) for i in range(5)])
    decisions, result = _session(client)
    assert result.bound == [] and not [b for b in decisions.binds if b.name.startswith("wide-")]
    wide = _pods(client, "wide-")
    assert all(not p["spec"].get("nodeName") for p in wide.values())
    for p in wide.values():
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
        assert cond["reason"] == "Unschedulable"
        assert "cannot be assigned by numa (single-numa-node" in cond["message"]

    # `lahar explain pod`: per node the providers' hints, the merged hint, admit and the first rejection
    from typer.testing import CliRunner

    from lahar.cli import app

    kubeconfig_path = cluster.kubeconfig_path  # type: ignore[attr-defined]
    r = CliRunner().invoke(app, ["explain", "pod", "default/wide-0", "--kubeconfig", str(kubeconfig_path),
                                 "-o", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["pod"] == "default/wide-0" and len(out["nodes"]) == 4
    by_node = {e["node"]: e for e in out["nodes"]}
    full = [e for e in by_node.values() if e["rejected"].startswith("Insufficient")]
    free = [e for e in by_node.values() if not e["rejected"].startswith("Insufficient")]
    assert len(full) == 2 and len(free) == 2
    for e in free:  # nothing of the gang is placed now: a single pod fits one NUMA node of an empty node
        assert e["admit"] is True and e["policy"] == "single-numa-node" and len(e["numa"]) == 1
        (merge,) = e["merges"]
        # memory is a provider too (devcluster publishes lahar.sh/numa-memory): 16Gi fits either NUMA node
        assert set(merge["providers"]) == {"cpu", "memory", "nvidia.com/gpu"} and merge["hint"]["preferred"] is True
        assert [h["affinity"] for h in merge["providers"]["memory"]] == [[0], [1], [0, 1]]
    r = CliRunner().invoke(app, ["explain", "pod", "default/wide-0", "--kubeconfig", str(kubeconfig_path)])
    assert r.exit_code == 0 and "merge main: hint {" in r.output
