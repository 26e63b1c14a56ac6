"""Network-topology-aware gang scheduling on `lahar up --profile dgx-h100-superpod --nodes 32`, through the real kubectl.

With `network-topology-aware` in `lahar-scheduler-configmap`, a Volcano Job of 8 pods × 8 GPUs with
`networkTopology: {mode: hard, highestTierAllowed: 1}` lands whole in one rack (its nodes share the `volcano.sh/tor`
label) and its PodGroup carries `volcano.sh/job-allocated-hypernode`; a second identical Job lands whole in another
rack; a Job of 9 × 8 GPUs (more than a rack holds) stays Pending with the per-tier reason in its Events. A
tensor-parallel Job of 4 partitions (subGroupPolicy) × 6 pods × 8 GPUs lands one partition per rack. With numa-aware
and deviceshare too, a hard tier-1 Job of 2 pods × 8 GPUs + 8 RDMA VFs (GPU ↔ VF joint allocation) lands in one rack
and each pod's topology decision holds as many VFs as GPUs on each NUMA node, every GPU paired under its PCIe switch.

Uses `Up` of `test_lahar_up` (the whole stack in its own process on a temporary data dir): 4 racks of 8 DGX nodes
under leaf-0..3, two leaves a spine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.scheduler.framework.conf import DEFAULT_CONF
from tests.builders import container, pod_template, vcjob
from tests.e2e import test_lahar_up as base
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark

LEAF = "hypernode-superpod-tier1-leaf-"
ALLOCATED = "volcano.sh/job-allocated-hypernode"
CONF = DEFAULT_CONF + "  - name: network-topology-aware\n"
NUMA_CONF = CONF + "  - name: numa-aware\n  - name: deviceshare\n"
JOINT = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    u = Up(tmp_path / "lahar", args=("--profile", "dgx-h100-superpod", "--nodes", "32"))
    try:
        yield u
    finally:
        u.kill()


def job(name: str, replicas: int, *, vfs: int = 0) -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"}
    annotations = None
    if vfs:
        resources["nvidia.com/rdma_vf"] = str(vfs)
        annotations = {"scheduling.koordinator.sh/device-joint-allocate": JOINT}
    template = pod_template(container("worker", "nvcr.io/nvidia/pytorch:24.05-py3", requests=resources,
                                      limits=resources), restart_policy="Never", annotations=annotations)
    return (vcjob(name, namespace=None)
            .spec(minAvailable=replicas, schedulerName="volcano", queue="default",
                  networkTopology={"mode": "hard", "highestTierAllowed": 1})
            .task("worker", replicas, template=template).build())


def apply(up: Up, tmp_path: Path, obj: dict[str, Any]) -> None:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    up.kubectl("apply", "-f", str(path))


def placement(up: Up, name: str) -> dict[str, str]:
    """The job's pods → their node ("" while unbound)."""
    items = json.loads(up.kubectl("get", "pods", "-l", f"volcano.sh/job-name={name}", "-o", "json").stdout)["items"]
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in items}


def racks(up: Up, nodes: set[str]) -> set[str]:
    """The `volcano.sh/tor` labels of `nodes`."""
    items = json.loads(up.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["labels"].get("volcano.sh/tor", "") for n in items if n["metadata"]["name"] in nodes}


def bound(up: Up, name: str, count: int) -> dict[str, str]:
    return wait_for(f"{count} pods of {name} bound", lambda: (
        p if len(p := placement(up, name)) == count and all(p.values()) else None), 60)


def start_with_topology(up: Up, tmp_path: Path, conf: str = CONF) -> None:
    """`lahar up` on the superpod, its HyperNode tree discovered, and the scheduler on `conf`."""
    up.start()
    wait_for("the four racks", lambda: len(json.loads(up.kubectl("get", "hypernodes", "-o", "json").stdout)
                                          ["items"]) == 6, 60)
    apply(up, tmp_path, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "lahar-scheduler-configmap", "namespace": "default"},
                         "data": {"volcano-scheduler.conf": conf}})
    log = up.data_dir / "logs" / "scheduler.log"
    wait_for("the scheduler to load the conf", lambda: "configuration default/lahar-scheduler-configmap@" in
             log.read_text(errors="replace"), 30)


def test_hard_gangs_land_one_rack_each_and_too_big_stays_pending_with_the_tier_reason(up: Up, tmp_path: Path) -> None:
    start_with_topology(up, tmp_path)

    apply(up, tmp_path, job("tp-a", 8))
    first = bound(up, "tp-a", 8)
    rack_a = racks(up, set(first.values()))
    assert len(rack_a) == 1 and len(set(first.values())) == 8, first  # one pod per node, all in one rack
    pg_a = wait_for("tp-a's allocated hypernode", lambda: json.loads(up.kubectl(
        "get", "podgroups", "-o", "json").stdout)["items"] and next(
        (pg for pg in json.loads(up.kubectl("get", "podgroups", "-o", "json").stdout)["items"]
         if pg["metadata"]["name"].startswith("tp-a") and ALLOCATED in (pg["metadata"].get("annotations") or {})),
        None), 30)
    assert pg_a["metadata"]["annotations"][ALLOCATED] == LEAF + rack_a.pop().split("-")[-1], pg_a["metadata"]

    apply(up, tmp_path, job("tp-b", 8))
    second = bound(up, "tp-b", 8)
    rack_b = racks(up, set(second.values()))
    assert len(rack_b) == 1 and not set(second.values()) & set(first.values()), (first, second)
    assert rack_b != racks(up, set(first.values())), (first, second)

    apply(up, tmp_path, job("tp-big", 9))

    def reason() -> str | None:
        items = json.loads(up.kubectl("get", "events", "-o", "json").stdout)["items"]
        return next((e["message"] for e in items if e["involvedObject"]["name"].startswith("tp-big")
                     and "tier-1 hypernodes fit" in e["message"]), None)

    message = wait_for("tp-big's pending reason", reason, 60)
    assert "hard network topology, highestTierAllowed 1: 0/4 tier-1 hypernodes fit: 4 have too few free " \
           "nvidia.com/gpu" in message, message
    assert not any(placement(up, "tp-big").values()), placement(up, "tp-big")
    assert up.interrupt() == 0, up.output()


def partitioned_job(name: str, partitions: int, size: int) -> dict[str, Any]:
    """Volcano's tensor-parallel example: one task whose `partitionPolicy` splits it into `partitions` subgroups of
    `size` pods × 8 GPUs, each subgroup hard within one leaf (tier 1); the job itself spans both spines, so it has
    no networkTopology of its own."""
    obj = job(name, partitions * size)
    task = obj["spec"]["tasks"][0]
    task["partitionPolicy"] = {"totalPartitions": partitions, "partitionSize": size, "minPartitions": partitions,
                               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    del obj["spec"]["networkTopology"]
    return obj


def test_tensor_parallel_subgroups_land_one_per_rack(up: Up, tmp_path: Path) -> None:
    start_with_topology(up, tmp_path)
    # 6 pods a partition, 8 nodes a rack: placed pod by pod, partition 1 would take rack 0's last 2 nodes
    apply(up, tmp_path, partitioned_job("tp", 4, 6))
    got = bound(up, "tp", 24)
    items = json.loads(up.kubectl("get", "pods", "-l", "volcano.sh/job-name=tp", "-o", "json").stdout)["items"]
    by_partition: dict[str, set[str]] = {}
    for p in items:
        part = p["metadata"]["labels"].get("volcano.sh/partition-id", "")
        by_partition.setdefault(part, set()).add(p["spec"]["nodeName"])
    assert len(by_partition) == 4, by_partition
    per_rack = [racks(up, nodes) for nodes in by_partition.values()]
    assert all(len(r) == 1 for r in per_rack), per_rack  # each subgroup whole in one rack
    assert len(set().union(*per_rack)) == 4, per_rack  # one subgroup per rack
    assert len(set(got.values())) == 24, got
    assert up.interrupt() == 0, up.output()


def test_hard_gang_in_one_rack_with_gpus_and_vfs_numa_aligned(up: Up, tmp_path: Path) -> None:
    start_with_topology(up, tmp_path, NUMA_CONF)
    apply(up, tmp_path, job("tp-numa", 2, vfs=8))
    got = bound(up, "tp-numa", 2)
    assert len(racks(up, set(got.values()))) == 1 and len(set(got.values())) == 2, got
    items = json.loads(up.kubectl("get", "pods", "-l", "volcano.sh/job-name=tp-numa", "-o", "json").stdout)["items"]
    for p in items:
        ann = p["metadata"].get("annotations") or {}
        decision = json.loads(ann["volcano.sh/topology-decision"])["numa"]
        # dgx-h100: GPUs 0-3 and NICs 0-3 on NUMA node 0, the rest on NUMA node 1; 8 GPUs need both
        assert sorted(decision) == ["0", "1"], decision
        assert all(r["nvidia.com/gpu"] == r["nvidia.com/rdma_vf"] == "4" for r in decision.values()), decision
        pairs = json.loads(ann["lahar.sh/gpu-rdma-pairs"])
        assert sorted(x["gpu"] for x in pairs) == list(range(8)) and len({x["vf"] for x in pairs}) == 8, pairs
        assert all(x["scope"] == "PCIe" and x["gpu"] // 4 == x["nic"] // 4 for x in pairs), pairs
    assert up.interrupt() == 0, up.output()
