"""Network topology together with numa-aware and deviceshare in one session: a gang kept inside one rack (tier-1
HyperNode) whose pods each get their GPUs, paired RDMA VFs and CPUs on one NUMA node. The nodes are devcluster's
dgx-h100 (2 NUMA nodes, GPUs 0-3 and NICs 0-3 on NUMA 0, the rest on NUMA 1, 8 VFs per NIC), two racks of two
under a spine. Cases: fits aligned; a rack whose free GPUs are split across NUMA nodes is skipped for the other;
no rack with room for two aligned pods leaves a hard gang pending (reason names the tier) and spreads a soft one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.devcluster import nodes as dnodes
from lahar.devcluster import profiles
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import hypernodes as hn
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import pod, podgroup, queue, tiers_conf

CONF = tiers_conf("allocate", ["gang"],
                  ["predicates", "proportion", "nodeorder", "numa-aware", "deviceshare", "network-topology-aware"])
JOINT = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})
DECISION = "volcano.sh/topology-decision"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
PAIRS = "lahar.sh/gpu-rdma-pairs"
NODES = [f"dgx-h100-{i}" for i in range(4)]
RACK = {"dgx-h100-0": "r0", "dgx-h100-1": "r0", "dgx-h100-2": "r1", "dgx-h100-3": "r1"}


def hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                               for m in members]}}


HYPERNODES = [hypernode("r0", 1, NODES[:2]), hypernode("r1", 1, NODES[2:]), hypernode("spine", 2, ["r0", "r1"],
                                                                                      "HyperNode")]


def cluster() -> dict[str, list[dict[str, Any]]]:
    objs = dnodes.build(profiles.load("dgx-h100"), count=4)
    return {"nodes": [o for o in objs if o["kind"] == "Node"],
            "numatopologies": [o for o in objs if o["kind"] == "Numatopology"],
            "devices": [o for o in objs if o["kind"] == "Device"]}


def gpod(name: str, group: str, *, gpus: int = 4, vfs: int = 4, role: str = "worker") -> Any:
    p = pod(name).req(cpu="4", memory="8Gi").group(group).role(role)
    r = p.obj["spec"]["containers"][0]["resources"]
    r["requests"].update({"nvidia.com/gpu": str(gpus), "nvidia.com/rdma_vf": str(vfs)})
    r["limits"] = dict(r["requests"])
    return p.annotate(**{"volcano.sh/numa-topology-policy": "single-numa-node",
                         "scheduling.koordinator.sh/device-joint-allocate": JOINT})


def busy(node_name: str, gpus: tuple[int, ...]) -> dict[str, Any]:
    """A running pod outside any gang holding whole GPUs `gpus` of `node_name` (by the allocation annotation)."""
    p = pod(f"busy-{node_name}", "other").req(cpu="1", memory="1Gi").on(node_name)
    r = p.obj["spec"]["containers"][0]["resources"]
    r["requests"]["nvidia.com/gpu"] = str(len(gpus))
    r["limits"] = dict(r["requests"])
    return p.annotate(**{ALLOCATED: json.dumps({"gpu": [{"minor": i} for i in gpus]})}).build()


def run(pods: list[dict[str, Any]], podgroups: list[Any]) -> Decisions:
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=pods, podgroups=[g.build() for g in podgroups], queues=[queue("q1").build()],
                           hypernodes=HYPERNODES, **cluster())
    return run_session(snap, c, registry=registry, uid="ssn-1")


def job(name: str, mode: str, tier: int = 1) -> tuple[list[dict[str, Any]], Any]:
    pg = podgroup(name).queue("q1").min(2)
    pg.obj["spec"]["networkTopology"] = {"mode": mode, "highestTierAllowed": tier}
    return [gpod(f"{name}-a", name, role="master").build(), gpod(f"{name}-b", name).build()], pg


def assert_numa_aligned(d: Decisions, uid: str) -> int:
    """The pod's decision names one NUMA node holding its 4 GPUs and 4 VFs; the allocated GPUs and the VFs' NICs
    (dgx-h100: index // 4 is the NUMA node) are on it, and each GPU pairs with a VF under its own PCIe switch."""
    ann = d.annotations[uid]
    decision = json.loads(ann[DECISION])["numa"]
    assert len(decision) == 1, decision
    ((numa, res),) = decision.items()
    assert res["nvidia.com/gpu"] == "4" and res["nvidia.com/rdma_vf"] == "4", res
    gpus = [g["minor"] for g in json.loads(ann[ALLOCATED])["gpu"]]
    pairs = json.loads(ann[PAIRS])
    assert len(gpus) == 4 and {g // 4 for g in gpus} == {int(numa)}, (gpus, numa)
    assert sorted(p["gpu"] for p in pairs) == sorted(gpus)
    assert {p["nic"] // 4 for p in pairs} == {int(numa)} and all(p["scope"] == "PCIe" for p in pairs), pairs
    assert len({p["vf"] for p in pairs}) == 4
    return int(numa)


# busy GPUs per node; (0, 1, 4, 5) leaves 4 free GPUs split 2 + 2 across the NUMA nodes: no aligned 4-GPU pod fits
SPLIT = (0, 1, 4, 5)
CASES = [
    pytest.param({}, "hard", {"r0", "r1"}, 1, id="fits-aligned"),
    pytest.param({"dgx-h100-0": SPLIT, "dgx-h100-1": SPLIT}, "hard", {"r1"}, 1, id="rack-full-other-rack"),
    # each rack: one node split (no aligned slot), one with NUMA 1 free only (one aligned slot): 8 free GPUs per
    # rack, enough by count, but the gang fits only across racks
    pytest.param({"dgx-h100-0": SPLIT, "dgx-h100-1": (0, 1, 2, 3), "dgx-h100-2": SPLIT, "dgx-h100-3": (0, 1, 2, 3)},
                 "hard", set(), 0, id="no-rack-with-two-aligned-slots-hard-pending"),
    pytest.param({"dgx-h100-0": SPLIT, "dgx-h100-1": (0, 1, 2, 3), "dgx-h100-2": SPLIT, "dgx-h100-3": (0, 1, 2, 3)},
                 "soft", {"r0", "r1"}, 2, id="no-rack-with-two-aligned-slots-soft-spreads"),
]


@pytest.mark.parametrize(("held", "mode", "racks", "rack_count"), CASES)
def test_gang_in_one_rack_and_numa_aligned(held: dict[str, tuple[int, ...]], mode: str, racks: set[str],
                                          rack_count: int) -> None:
    pods, pg = job("pg1", mode)
    d = run([*pods, *(busy(n, g) for n, g in held.items())], [pg])
    placed = {b.uid: b.node for b in d.binds if b.job == "c1/pg1"}
    if not rack_count:
        assert placed == {}
        msg = next(m for _, reason, m in d.podgroups["c1/pg1"].events if reason == "Unschedulable")
        assert "hard network topology, highestTierAllowed 1: 0/2 tier-1 hypernodes fit: 2 have no node for a task" \
            in msg and "single-numa-node" in msg, msg
        return
    assert len(placed) == 2
    landed = {RACK[x] for x in placed.values()}
    assert len(landed) == rack_count and landed <= racks, placed
    for uid, node_name in placed.items():
        numa = assert_numa_aligned(d, uid)
        if node_name in held:  # only NUMA 1 of a (0, 1, 2, 3)-held node is free
            assert numa == 1
    if mode == "hard":
        assert d.podgroup_annotations["c1/pg1"][hn.ALLOCATED_HYPERNODE_ANNOTATION] in landed
    # two pods on one node never share a GPU or a VF
    for node_name in set(placed.values()):
        uids = [u for u, x in placed.items() if x == node_name]
        gpus = [g["minor"] for u in uids for g in json.loads(d.annotations[u][ALLOCATED])["gpu"]]
        vfs = [p["vf"] for u in uids for p in json.loads(d.annotations[u][PAIRS])]
        assert len(gpus) == len(set(gpus)) and len(vfs) == len(set(vfs))


def test_second_job_that_fits_only_by_splitting_stays_pending_with_the_tier_in_its_reason() -> None:
    # r0 is fragmented (its free GPUs split 2 + 2 across NUMA nodes on both nodes); r1 has 4 aligned slots (2 nodes
    # × 2 NUMA nodes): two gangs of 2 fit there, the third could fit only by splitting NUMA nodes in r0
    first, pg1 = job("pg1", "hard")
    second, pg2 = job("pg2", "hard")
    third, pg3 = job("pg3", "hard")
    held = {"dgx-h100-0": SPLIT, "dgx-h100-1": SPLIT}
    d = run([*first, *second, *third, *(busy(n, g) for n, g in held.items())], [pg1, pg2, pg3])
    by_job: dict[str, set[str]] = {}
    for b in d.binds:
        by_job.setdefault(b.job, set()).add(b.node)
        assert_numa_aligned(d, b.uid)
    assert len(by_job) == 2 and all({RACK[x] for x in nodes} == {"r1"} for nodes in by_job.values()), by_job
    (pending,) = {"c1/pg1", "c1/pg2", "c1/pg3"} - set(by_job)
    msg = next(m for _, reason, m in d.podgroups[pending].events if reason == "Unschedulable")
    assert "hard network topology, highestTierAllowed 1: 0/2 tier-1 hypernodes fit: 1 has no node for a task" in msg
    assert "single-numa-node" in msg and "1 has too few free nvidia.com/gpu" in msg, msg
