"""deviceshare in a session: link-aware whole GPUs, GPU + VF pairing under one PCIe switch (SamePCIe), devices as
NUMA hint providers (GPU, VF and CPUs on one NUMA node under single-numa-node), vGPU and MIG through
`scheduler.devices`, binpack packing, reservations undone on discard, and the annotations carried by the bind."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lahar.devcluster import nodes as dnodes
from lahar.devcluster import profiles
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.statement import Statement
from lahar.scheduler.placement import placement
from lahar.scheduler.plugins.deviceshare import DevicePlan, DeviceShare
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.topology import hints
from tests.builders import pod, podgroup, queue, tiers_conf

JOINT = json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"})
CONF = tiers_conf("allocate", ["gang"], ["predicates", "proportion", "nodeorder", "numa-aware", "deviceshare"])


def _objs(profile: str, count: int) -> dict[str, list[dict[str, Any]]]:
    objs = dnodes.build(profiles.load(profile), count=count)
    return {"nodes": [o for o in objs if o["kind"] == "Node"],
            "numatopologies": [o for o in objs if o["kind"] == "Numatopology"],
            "devices": [o for o in objs if o["kind"] == "Device"]}


def dpod(name: str, *, gpus: int = 0, vfs: int = 0, cpu: str = "2", policy: str | None = None, joint: bool = False,
         extra: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    p = pod(name).req(cpu=cpu, memory="4Gi").group("pg1")
    r = p.obj["spec"]["containers"][0]["resources"]
    if gpus:
        r["requests"]["nvidia.com/gpu"] = str(gpus)
    if vfs:
        r["requests"]["nvidia.com/rdma_vf"] = str(vfs)
    r["requests"].update(extra or {})
    r["limits"] = dict(r["requests"])
    if policy:
        p.annotate(**{"volcano.sh/numa-topology-policy": policy})
    if joint:
        p.annotate(**{"scheduling.koordinator.sh/device-joint-allocate": JOINT})
    p.annotate(**(annotations or {}))
    return p.build()


def session(pods: list[dict[str, Any]], objs: dict[str, list[dict[str, Any]]], *, min_member: int,
            conf: str = CONF) -> tuple[Session, Any]:
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=pods, podgroups=[podgroup("pg1").min(min_member).build()],
                           queues=[queue("c1").build()], **objs)
    ssn = Session(snap, c, registry, uid="ssn-1")
    for name in c.actions:
        registry.action(name, c.action_arguments(name)).execute(ssn)
    return ssn, ssn.close()


def _pairs(d: Any, uid: str) -> list[dict[str, Any]]:
    return json.loads(d.annotations[uid]["lahar.sh/gpu-rdma-pairs"])


def test_eight_gpus_and_vfs_pair_under_each_switch() -> None:
    _, d = session([dpod("p1", gpus=8, vfs=8, joint=True)], _objs("dgx-h100", 1), min_member=1)
    (b,) = d.binds
    pairs = _pairs(d, b.uid)
    # dgx-h100: NICs 2k, 2k+1 sit under the switch of GPUs 2k, 2k+1
    assert [(p["gpu"], p["nic"] // 2) for p in pairs] == [(g, g // 2) for g in range(8)]
    assert all(p["scope"] == "PCIe" for p in pairs) and len({p["vf"] for p in pairs}) == 8
    allocated = json.loads(d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])
    assert [g["minor"] for g in allocated["gpu"]] == list(range(8))


def test_same_pcie_violation_rejects_the_node() -> None:
    objs = _objs("dgx-h100", 1)
    dev = objs["devices"][0]
    dev["spec"]["devices"] = [x for x in dev["spec"]["devices"] if x["type"] == "gpu" or x["minor"] < 2]
    _, d = session([dpod("p1", gpus=4, vfs=4, joint=True)], objs, min_member=1)
    assert not d.binds
    assert "Joint-Allocate rules violation" in d.pod_conditions[0].message


def test_without_same_pcie_vfs_fall_back_to_other_nics() -> None:
    objs = _objs("dgx-h100", 1)
    dev = objs["devices"][0]
    dev["spec"]["devices"] = [x for x in dev["spec"]["devices"] if x["type"] == "gpu" or x["minor"] < 2]
    _, d = session([dpod("p1", gpus=4, vfs=4)], objs, min_member=1)
    (b,) = d.binds
    allocated = json.loads(d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])
    assert sum(len(r["extension"]["vfs"]) for r in allocated["rdma"]) == 4


def test_single_numa_node_puts_gpu_vf_and_cpus_together_away_from_a_full_numa_node() -> None:
    objs = _objs("dgx-h100", 1)
    busy = dpod("busy", gpus=4, annotations={"scheduling.koordinator.sh/device-allocated": json.dumps(
        {"gpu": [{"minor": i} for i in range(4)]})})
    busy["spec"]["nodeName"] = "dgx-h100-0"
    busy["status"]["phase"] = "Running"
    _, d = session([dpod("p1", gpus=1, vfs=1, cpu="4", policy="single-numa-node", joint=True), busy], objs,
                   min_member=1)
    (b,) = d.binds
    decision = json.loads(d.annotations[b.uid]["volcano.sh/topology-decision"])
    # memory too: devcluster publishes it per NUMA node (lahar.sh/numa-memory)
    assert decision == {"numa": {"1": {"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1", "nvidia.com/rdma_vf": "1"}}}
    (pair,) = _pairs(d, b.uid)
    assert pair["gpu"] == 4 and pair["nic"] in (4, 5)


def test_link_aware_gpus_follow_nvlinks() -> None:
    objs = _objs("dgx-h100", 1)
    n = objs["nodes"][0]
    topo = json.loads(n["metadata"]["annotations"]["lahar.sh/gpu-topology"])
    links = [["X" if a == b else ("NV4" if {a, b} in ({0, 5}, {1, 6}, {2, 7}, {3, 4}) else "SYS")
              for b in range(8)] for a in range(8)]
    topo["links"] = links
    n["metadata"]["annotations"]["lahar.sh/gpu-topology"] = json.dumps(topo)
    objs["numatopologies"] = []  # no Topology Manager: links alone decide
    _, d = session([dpod("p1", gpus=2)], objs, min_member=1,
                   conf=tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]))
    (b,) = d.binds
    allocated = json.loads(d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])
    assert sorted(g["minor"] for g in allocated["gpu"]) == [0, 5]


def test_binpack_packs_single_gpu_pods() -> None:
    pods = [dpod(f"p{i}", gpus=1) for i in range(4)]
    _, d = session(pods, _objs("dgx-h100", 3), min_member=4)
    assert len(d.binds) == 4 and len({b.node for b in d.binds}) == 1


def test_discard_releases_devices() -> None:
    pods = [dpod(f"p{i}", gpus=4, vfs=4, joint=True) for i in range(3)]  # 3 x 4 GPUs on one 8-GPU node
    ssn, d = session(pods, _objs("dgx-h100", 1), min_member=3)
    assert not d.binds
    ds = ssn.plugins["deviceshare"]
    assert isinstance(ds, DeviceShare)
    nd = ds.node(0)
    assert nd is not None and not nd.taken_gpus and not nd.taken_vfs
    assert not placement(ssn).reserved


def test_devices_held_by_running_pods_are_not_given_again() -> None:
    objs = _objs("dgx-h100", 1)
    busy = dpod("busy", gpus=2, annotations={"scheduling.koordinator.sh/device-allocated": json.dumps(
        {"gpu": [{"minor": 0}, {"minor": 1}]})})
    busy["spec"]["nodeName"] = "dgx-h100-0"
    busy["status"]["phase"] = "Running"
    _, d = session([dpod("p1", gpus=6), busy], objs, min_member=1)
    (b,) = d.binds
    allocated = json.loads(d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])
    assert sorted(g["minor"] for g in allocated["gpu"]) == [2, 3, 4, 5, 6, 7]


def test_a_node_first_seen_after_a_placement_counts_that_pod_once() -> None:
    """The node's device view is built lazily; built right after this session placed a pod there, the pod is
    counted once (as this session's reservation), not also as a pod already on the node."""
    objs = _objs("mixed", 1)  # mixed-a100: MIG GPUs with nvidia.com/mig-* resources
    cap = {k: v for k, v in objs["nodes"][0]["status"]["allocatable"].items() if k.startswith("nvidia.com/mig-")}
    resource = sorted(cap)[0]
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=[dpod("p1", extra={resource: "1"})], podgroups=[podgroup("pg1").min(1).build()],
                           queues=[queue("c1").build()], **objs)
    ssn = Session(snap, c, registry, uid="ssn-1")
    ds = ssn.plugins["deviceshare"]
    assert isinstance(ds, DeviceShare)
    (task,) = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    Statement(ssn).allocate(task, 0)  # no predicate asked first: the node's view is built by the reservation
    nd = ds.node(0)
    assert nd is not None and nd.usage().mig == {resource.removeprefix("nvidia.com/mig-"): 1}


@pytest.mark.parametrize("foreign", [True, False], ids=["pod-of-another-scheduler", "pod-of-a-volcano-job"])
def test_devices_and_cpus_held_by_any_pod_on_the_node_are_not_given_again(foreign: bool) -> None:
    """Pods bound by another scheduler (no PodGroup) hold devices and CPUs too: the placement sees them."""
    objs = _objs("dgx-h100", 1)
    busy = dpod("busy", gpus=4, cpu="8", annotations={
        "scheduling.koordinator.sh/device-allocated": json.dumps({"gpu": [{"minor": i} for i in range(4)]}),
        "lahar.sh/numa-allocation": json.dumps({"cpus": {"main": "0-7"}, "numa": [0], "policy": "best-effort"})})
    if foreign:
        busy["metadata"]["annotations"].pop("scheduling.k8s.io/group-name", None)
        busy["spec"]["schedulerName"] = "default-scheduler"
    busy["spec"]["nodeName"] = "dgx-h100-0"
    busy["status"]["phase"] = "Running"
    ssn, d = session([dpod("p1", gpus=4, cpu="8", policy="single-numa-node"), busy], objs, min_member=1)
    (b,) = d.binds
    allocated = json.loads(d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])
    assert sorted(g["minor"] for g in allocated["gpu"]) == [4, 5, 6, 7]
    cpus = json.loads(d.annotations[b.uid]["lahar.sh/numa-allocation"])["cpus"]
    assert not set(range(8)) & {c for v in cpus.values() for c in hints.parse_cpuset(v)}


def _t4() -> dict[str, list[dict[str, Any]]]:
    objs = _objs("mixed", 6)
    keep = {n["metadata"]["name"] for n in objs["nodes"] if n["metadata"]["name"].startswith("mixed-t4")}
    return {k: [o for o in v if o["metadata"]["name"] in keep] for k, v in objs.items()}


def test_volcano_vgpu_slices_and_annotations() -> None:
    objs = _t4()
    p = dpod("p1", extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "2000"})
    _, d = session([p], objs, min_member=1,
                   conf=tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]))
    (b,) = d.binds
    ann = d.annotations[b.uid]
    assert ann["volcano.sh/vgpu-node"] == b.node and ann["volcano.sh/bind-phase"] == "allocating"
    uuid, kind, mem, cores = ann["volcano.sh/vgpu-ids-new"].rstrip(":").split(",")
    assert uuid.startswith("GPU-") and kind == "NVIDIA" and mem == "2000" and cores == "0"


def test_vgpu_slices_of_one_session_share_cards_without_overcommit() -> None:
    objs = _t4()
    objs = {k: v[:1] for k, v in objs.items()}
    pods = [dpod(f"p{i}", extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "8000"})
            for i in range(8)]
    ssn, d = session(pods, objs, min_member=1,
                     conf=tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]))
    per_card: dict[str, int] = {}
    for b in d.binds:
        uuid, _, mem, _ = d.annotations[b.uid]["volcano.sh/vgpu-ids-new"].rstrip(":").split(",")
        per_card[uuid] = per_card.get(uuid, 0) + int(mem)
    ds = ssn.plugins["deviceshare"]
    nd = ds.node(0)
    assert nd is not None
    card_mem = {c.uuid: c.memory_mib for c in nd.inv.volcano}
    assert per_card and all(used <= card_mem[u] for u, used in per_card.items())


def test_mig_mixed_devices_are_counted_in_the_session() -> None:
    objs = _objs("mixed", 1)  # mixed-a100: MIG GPUs with nvidia.com/mig-* resources
    cap = {k: v for k, v in objs["nodes"][0]["status"]["allocatable"].items() if k.startswith("nvidia.com/mig-")}
    assert cap
    resource, count = sorted(cap.items())[0]
    pods = [dpod(f"p{i}", extra={resource: "1"}) for i in range(int(count))]
    _, d = session(pods, objs, min_member=1,
                   conf=tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]))
    assert len(d.binds) == int(count)


def test_mixed_mig_instances_are_recorded_and_never_given_twice() -> None:
    """Each "mixed" MIG device the scheduler counts a pod on is recorded (`lahar.sh/mig-instances`, "<GPU>/<k>");
    a running pod's record keeps its instance out, and pods of one session get distinct instances."""
    objs = _objs("mixed", 1)
    cap = {k: v for k, v in objs["nodes"][0]["status"]["allocatable"].items() if k.startswith("nvidia.com/mig-")}
    resource = sorted(cap)[0]
    profile = resource.removeprefix("nvidia.com/mig-")
    busy = dpod("busy", extra={resource: "1"},
                annotations={"lahar.sh/mig-instances": json.dumps({profile: ["0/0"]})})
    busy["spec"]["nodeName"] = objs["nodes"][0]["metadata"]["name"]
    busy["status"]["phase"] = "Running"
    pods = [dpod(f"p{i}", extra={resource: "1"}) for i in range(3)]
    _, d = session([*pods, busy], objs, min_member=3,
                   conf=tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"]))
    assert len(d.binds) == 3
    got = [json.loads(d.annotations[b.uid]["lahar.sh/mig-instances"])[profile] for b in d.binds]
    ids = [i for one in got for i in one]
    assert all(len(one) == 1 for one in got) and len(set(ids)) == 3 and "0/0" not in ids


def test_malformed_joint_annotation_is_unschedulable_with_its_message() -> None:
    p = dpod("p1", gpus=1, vfs=1, annotations={"scheduling.koordinator.sh/device-joint-allocate": "{nope"})
    _, d = session([p], _objs("dgx-h100", 1), min_member=1)
    assert not d.binds and "device-joint-allocate" in d.pod_conditions[0].message


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_plugin_arguments(policy: str) -> None:
    p = in_tree_registry().plugin("deviceshare", {"deviceshare.SchedulePolicy": policy,
                                                  "deviceshare.ScheduleWeight": 3})
    assert isinstance(p, DeviceShare) and p.policy == policy and p.weight == 3


def test_plan_is_plain_data() -> None:
    plan = DevicePlan(gpus=(0, 1))
    assert plan.vfs() == [] and copy.deepcopy(plan) == plan


def test_simulate_reports_explain_for_pending_pods() -> None:
    from lahar.scheduler.simulate import simulate

    objs = _objs("dgx-h100", 1)
    pg = podgroup("pg1").min(2).build()
    pods = [dpod(f"p{i}", gpus=1, cpu="60", policy="single-numa-node") for i in range(3)]  # NUMA fits 2
    for p in pods:
        p["metadata"].pop("uid", None)
    conf_text = tiers_conf("allocate", ["gang"], ["predicates", "proportion", "numa-aware", "deviceshare"])
    registry = in_tree_registry()
    c = confs.load(conf_text, actions=registry.action_names, plugins=registry.plugin_names)
    out = simulate([queue("c1").build(), pg, *objs["nodes"], *objs["numatopologies"], *objs["devices"], *pods], c,
                   registry=registry)
    assert len(out["bindings"]) == 2
    (pending,) = out["explain"]
    (entry,) = out["explain"][pending]
    assert entry["node"] == "dgx-h100-0" and entry["admit"] is False
    assert "cannot be assigned by numa" in entry["rejected"]
    assert {m["container"] for m in entry["merges"]} == {"c"}


# --- vGPU and dynamic-MIG cards as NUMA hint providers (vgpu_hints) --------------------------------------------------

def _card(uuid: str, numa: int | None, *, mode: str = "hami-core", count: int = 4, memory: int = 16000,
          typ: str = "A100", healthy: bool = True) -> Any:
    from lahar.scheduler.devices.inventory import VGPUCard
    return VGPUCard("volcano", uuid, int(uuid[1:]), count, memory, 100, typ, numa, mode, healthy)


def _vreq(count: int, memory: int = 1000, cores: int = 0, *, use_types: tuple[str, ...] = ()) -> Any:
    from lahar.scheduler.devices.requests import GPUFilters, VGPUPodRequest, VGPURequest
    return VGPUPodRequest("volcano", (VGPURequest(0, "main", "volcano", count, memory, None, cores),),
                          GPUFilters(use_types=use_types, vendor="volcano"))


def _hints_txt(hs: Any) -> Any:
    if hs is None:
        return None
    return [(sorted(h.affinity), h.preferred) for h in hs]


VGPU_HINT_CASES = [
    # (id, cards, used {uuid: (num, memory, cores)}, request, expected hints)
    ("one-card-both-numa", [("g0", 0), ("g1", 1)], {}, (1, 1000, 0),
     [([0], True), ([1], True), ([0, 1], False)]),
    ("two-cards-need-both-numa", [("g0", 0), ("g1", 1)], {}, (2, 1000, 0), [([0, 1], True)]),
    ("two-cards-one-numa-preferred", [("g0", 0), ("g1", 0), ("g2", 1)], {}, (2, 1000, 0),
     [([0], True), ([0, 1], False)]),
    ("full-card-excluded", [("g0", 0), ("g1", 1)], {"g0": (1, 15500, 0)}, (1, 1000, 0),
     [([1], True), ([0, 1], False)]),
    ("cores-exhausted-everywhere", [("g0", 0), ("g1", 1)], {"g0": (1, 0, 100), "g1": (1, 0, 100)}, (1, 1000, 10),
     []),
    ("no-numa-no-preference", [("g0", None), ("g1", None)], {}, (1, 1000, 0), None),
    ("too-few-cards", [("g0", 0)], {}, (2, 1000, 0), []),
]


@pytest.mark.parametrize(("cards", "used", "request_", "expected"), [c[1:] for c in VGPU_HINT_CASES],
                         ids=[c[0] for c in VGPU_HINT_CASES])
def test_vgpu_hints_table(cards: list[tuple[str, int | None]], used: dict[str, tuple[int, int, int]],
                          request_: tuple[int, int, int], expected: Any) -> None:
    from lahar.scheduler.devices.inventory import CardUsage, Usage
    from lahar.scheduler.plugins.deviceshare import vgpu_hints
    usage = Usage(cards={u: CardUsage(n, m, c) for u, (n, m, c) in used.items()})
    got = vgpu_hints(_vreq(*request_), [_card(u, n) for u, n in cards], usage, [0, 1])
    assert list(got) == ["volcano/vgpu/main"]
    assert _hints_txt(got["volcano/vgpu/main"]) == expected


def test_vgpu_hints_respect_type_filters_and_health() -> None:
    from lahar.scheduler.devices.inventory import Usage
    from lahar.scheduler.plugins.deviceshare import vgpu_hints
    cards = [_card("g0", 0, typ="T4"), _card("g1", 1), _card("g2", 0, healthy=False)]
    got = vgpu_hints(_vreq(1, use_types=("A100",)), cards, Usage(), [0, 1])
    assert _hints_txt(got["volcano/vgpu/main"]) == [([1], True), ([0, 1], False)]


def test_dynamic_mig_hints_offer_the_numa_nodes_of_mig_cards() -> None:
    import dataclasses

    from lahar.scheduler.devices.inventory import Usage
    from lahar.scheduler.plugins.deviceshare import vgpu_hints
    cards = [dataclasses.replace(_card("g0", 0, mode="mig", memory=81920, typ="NVIDIA-H100-80GB-HBM3"),
                                 vendor="hami"),
             dataclasses.replace(_card("g1", 1, memory=81920), vendor="hami")]  # not in MIG mode
    req = dataclasses.replace(_vreq(1, memory=10000), vendor="hami", mode="mig")
    got = vgpu_hints(req, cards, Usage(), [0, 1], mig=True)
    assert _hints_txt(got["hami/vgpu/main"]) == [([0], True), ([0, 1], False)]


def _plain_gpu_node(gpus: int) -> dict[str, Any]:
    """A node of the plain NVIDIA device plugin: `nvidia.com/gpu` allocatable, no Device, no GPU annotations."""
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "plain-0", "labels": {}},
            "status": {"allocatable": alloc, "capacity": alloc}}


def test_a_node_without_gpu_identities_takes_whole_gpus_by_count() -> None:
    """Volcano's deviceshare does not judge `nvidia.com/gpu`; a node that names no card is left to the
    allocatable check (it was refused as 'Insufficient nvidia.com/gpu devices'), and no card is recorded."""
    _, d = session([dpod(f"p{i}", gpus=2) for i in range(4)], {"nodes": [_plain_gpu_node(8)]}, min_member=4)
    assert len(d.binds) == 4
    assert not any("scheduling.koordinator.sh/device-allocated" in a for a in d.annotations.values())
    _, d = session([dpod(f"p{i}", gpus=3) for i in range(3)], {"nodes": [_plain_gpu_node(8)]}, min_member=3)
    assert not d.binds  # the count still holds: 9 GPUs do not fit in 8
