"""scheduler.devices.inventory: node inventories from devcluster's published objects, registrations, usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.devcluster import nodes, profiles
from lahar.scheduler.devices import inventory as inv
from lahar.scheduler.devices.inventory import MIGPlacement


def _by_node(objects: list[dict[str, Any]]) -> dict[str, inv.NodeInventory]:
    grouped: dict[str, dict[str, Any]] = {}
    for o in objects:
        grouped.setdefault(o["metadata"]["name"], {})[o["kind"]] = o
    return {name: inv.inventory(g["Node"], g.get("Device"), g.get("Numatopology")) for name, g in grouped.items()}


@pytest.fixture(scope="module")
def dgx() -> inv.NodeInventory:
    return _by_node(nodes.build(profiles.load("dgx-h100"), 1))["dgx-h100-0"]


@pytest.fixture(scope="module")
def mixed() -> dict[str, inv.NodeInventory]:
    return _by_node(nodes.build(profiles.load("mixed"), 3))


def test_dgx_gpus(dgx: inv.NodeInventory) -> None:
    assert [g.index for g in dgx.gpus] == list(range(8))
    assert [g.numa for g in dgx.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g.pcie_switch for g in dgx.gpus] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len({g.pcie_id for g in dgx.gpus}) == 4 and dgx.gpus[0].pcie_id == dgx.gpus[1].pcie_id
    assert all(g.uuid.startswith("GPU-") and g.memory_mib == 81559 and g.healthy for g in dgx.gpus)
    assert not any(g.mig_enabled for g in dgx.gpus)
    assert "H100" in dgx.gpus[0].model
    assert dgx.whole_gpu_capacity == 8 and dgx.mig_capacity == {}


def test_dgx_nics_sit_under_their_gpu_pairs(dgx: inv.NodeInventory) -> None:
    assert [n.minor for n in dgx.nics] == list(range(8))
    for n in dgx.nics:
        pair = [g.index for g in dgx.gpus if g.pcie_id == n.pcie_id]
        assert pair == [2 * (n.minor // 2), 2 * (n.minor // 2) + 1]
        assert n.numa == dgx.gpus[pair[0]].numa and n.pcie_switch == dgx.gpus[pair[0]].pcie_switch
        assert len(n.vfs) == 8 and [v.bus_id for v in n.vfs] == sorted(v.bus_id for v in n.vfs)
        assert n.id == n.bus_id and all(v.minor == -1 for v in n.vfs)


def test_dgx_cpus_and_policies(dgx: inv.NodeInventory) -> None:
    assert dgx.numa_nodes == (0, 1)
    assert dgx.free_cpus() == {0: 112, 1: 112} and dict(dgx.cpu_capacity) == {0: 112, 1: 112}
    assert dgx.cpus[0][:3] == (0, 1, 2) and 112 in dgx.cpus[0] and 56 in dgx.cpus[1]
    assert (dgx.topology_policy, dgx.cpu_manager_policy) == ("best-effort", "static")
    assert dgx.gpu_numa()["3"] == [0] and dgx.gpu_numa()["4"] == [1]


def test_mixed_a100_mig_gpus(mixed: dict[str, inv.NodeInventory]) -> None:
    a100 = mixed["mixed-a100-0"]
    assert [g.mig_enabled for g in a100.gpus] == [True] * 4 + [False] * 4
    assert dict(a100.gpus[0].mig_devices) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert a100.mig_capacity == {"1g.10gb": 8, "2g.20gb": 4, "3g.40gb": 4}
    assert a100.mig_strategy == "mixed" and a100.whole_gpu_capacity == 4
    assert a100.free_gpus(inv.Usage()) == [4, 5, 6, 7]
    assert len(a100.nics) == 4 and all(len(n.vfs) == 4 for n in a100.nics)


def test_mixed_mig_without_lahar_annotation_reads_lowest_indices() -> None:
    objects = nodes.build(profiles.load("mixed"), 1)
    node = json.loads(json.dumps(objects[0]))
    del node["metadata"]["annotations"][inv.GPU_TOPOLOGY_ANNOTATION]
    got = inv.inventory(node, objects[2], objects[1])
    assert [g.mig_enabled for g in got.gpus] == [True] * 4 + [False] * 4


def test_mixed_t4_registrations(mixed: dict[str, inv.NodeInventory]) -> None:
    t4 = mixed["mixed-t4-0"]
    assert [c.index for c in t4.hami] == [0, 1, 2, 3] and [c.index for c in t4.volcano] == [0, 1, 2, 3]
    assert [c.uuid for c in t4.hami] == [c.uuid for c in t4.volcano] == [g.uuid for g in t4.gpus]
    h, v = t4.hami[0], t4.volcano[0]
    assert (h.count, h.memory_mib, h.cores, h.type, h.numa, h.mode, h.healthy) == (
        10, 15360, 100, "NVIDIA-Tesla T4", 0, "hami-core", True)
    assert (v.count, v.memory_mib, v.cores, v.type, v.numa, v.mode) == (10, 15360, 100, "NVIDIA-Tesla T4", None,
                                                                          "hami-core")
    assert t4.volcano_mode == "hami-core" and t4.nics == ()


def test_cpu_node_has_no_devices(mixed: dict[str, inv.NodeInventory]) -> None:
    cpu = mixed["mixed-cpu-0"]
    assert cpu.gpus == () and cpu.nics == () and cpu.numa_nodes == (0, 1)
    assert cpu.topology_policy == "single-numa-node" and cpu.free_cpus() == {0: 8, 1: 8}


HAMI_REGISTRATIONS = [
    ("json-omitempty", '[{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA A100","mode":"hami-core",'
                       '"health":true},{"id":"GPU-b","index":1,"count":10,"devmem":32768,"devcore":100,'
                       '"type":"NVIDIA A100","numa":1,"mode":"hami-core"}]',
     [("GPU-a", 0, 10, 32768, 100, "NVIDIA A100", 0, "hami-core", True),
      ("GPU-b", 1, 10, 32768, 100, "NVIDIA A100", 1, "hami-core", False)]),
    ("csv-7-fields", "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-b,10,32768,100,NVIDIA-Tesla V100,1,"
                     "false:",
     [("GPU-a", 0, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, "hami-core", True),
      ("GPU-b", 1, 10, 32768, 100, "NVIDIA-Tesla V100", 1, "hami-core", False)]),
    ("csv-9-fields", "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,3,mig:",
     [("GPU-a", 3, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, "mig", True)]),
    ("csv-short-is-malformed", "GPU-a,10,32768:", []),
    ("empty", "", []),
]


@pytest.mark.parametrize(("text", "expected"), [x[1:] for x in HAMI_REGISTRATIONS], ids=[x[0] for x in HAMI_REGISTRATIONS])
def test_parse_hami_register(text: str, expected: list[tuple]) -> None:
    got = inv.parse_hami_register(text)
    assert [(c.uuid, c.index, c.count, c.memory_mib, c.cores, c.type, c.numa, c.mode, c.healthy) for c in got] == expected


def test_parse_hami_register_mig_profiles() -> None:
    text = json.dumps([{"id": "GPU-m", "count": 7, "devmem": 40960, "devcore": 100, "type": "NVIDIA A100-SXM4-40GB",
                        "mode": "mig", "health": True,
                        "migProfiles": [{"name": "1g.5gb", "memoryMB": 4864, "core": 15, "sliceCount": 1,
                                         "placements": [{"start": s, "size": 1} for s in range(7)]}]}])
    (card,) = inv.parse_hami_register(text)
    assert card.mode == "mig" and card.mig_profiles[0].name == "1g.5gb"
    assert card.mig_profiles[0].placements[-1] == (6, 1) and card.mig_profiles[0].memory_mib == 4864


def test_parse_volcano_register() -> None:
    got = inv.parse_volcano_register("GPU-a,10,7680,NVIDIA-Tesla T4,true,hami-core:GPU-b,4,40960,NVIDIA-A100,false,mig:")
    assert [(c.uuid, c.index, c.count, c.memory_mib, c.cores, c.type, c.healthy, c.mode) for c in got] == [
        ("GPU-a", 0, 10, 7680, 100, "NVIDIA-Tesla T4", True, "hami-core"),
        ("GPU-b", 1, 4, 40960, 100, "NVIDIA-A100", False, "mig")]
    assert inv.parse_volcano_register("GPU-a,10,7680:") == ()


def _pod(annotations: dict[str, str] | None = None, limits: dict[str, Any] | None = None, phase: str = "Running",
         ) -> dict[str, Any]:
    return {"metadata": {"name": "p", "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits or {}}}]},
            "status": {"phase": phase}}


def test_usage_from_allocation_annotations() -> None:
    pods = [
        _pod({"volcano.sh/vgpu-ids-new": "GPU-a,NVIDIA,3000,30:;GPU-a,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:",
              "scheduling.k8s.io/group-name": "pg1"}),
        _pod({"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,2000,10:;;", "hami.io/vgpu-devices-to-allocate": "x"}),
        _pod({"scheduling.koordinator.sh/device-allocated": json.dumps({
            "gpu": [{"minor": 0}, {"minor": 1}],
            "rdma": [{"minor": 0, "resources": {"koordinator.sh/rdma": "1"},
                      "extension": {"vfs": [{"minor": -1, "busID": "0000:13:00.1"}]}},
                     {"minor": 3, "resources": {"koordinator.sh/rdma": "100"}}]})}),
        _pod({"hami.io/vgpu-mig-allocations": json.dumps([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "GPU-m",
                                                           "profile": "3g.20gb", "placement": {"start": 4, "size": 4}}])}),
        _pod(limits={"nvidia.com/mig-1g.10gb": 2}),
        _pod(limits={"nvidia.com/gpu": 2}),
        _pod({"volcano.sh/vgpu-ids-new": "GPU-b,NVIDIA,9999,0:"}, phase="Succeeded"),
    ]
    u = inv.usage(pods)
    assert u.card("GPU-a") == inv.CardUsage(3, 6000, 40, frozenset({"pg1"}))
    assert u.card("GPU-b") == inv.CardUsage(1, 1000, 0, frozenset({"pg1"}))
    assert u.card("GPU-zzz") == inv.CardUsage()
    assert u.gpus == frozenset({0, 1}) and u.unplaced_gpus == 2
    assert u.vfs == frozenset({"0000:13:00.1"}) and dict(u.pfs) == {3: 100}
    assert u.mig_placements == (MIGPlacement("GPU-m", "3g.20gb", 4, 4),) and dict(u.mig) == {"1g.10gb": 2}


def test_usage_volcano_mig_ids_strip_their_suffix() -> None:
    u = inv.usage([_pod({"volcano.sh/vgpu-ids-new": "GPU-a[group0-1],NVIDIA,5120,0:"})])
    assert u.card("GPU-a").memory_mib == 5120


def test_free_gpus_and_vfs(dgx: inv.NodeInventory) -> None:
    u = inv.Usage(gpus=frozenset({0, 5}), vfs=frozenset({dgx.nics[0].vfs[0].bus_id}), pfs={1: 100})
    assert dgx.free_gpus(u) == [1, 2, 3, 4, 6, 7]
    free = dgx.free_vfs(u)
    assert 1 not in free and len(free[0]) == 7 and len(free[2]) == 8


@pytest.mark.parametrize(("text", "expected"), [
    ("GPU-a,NVIDIA,1,2:;", [[("GPU-a", "NVIDIA", 1, 2)]]),
    ("GPU-a,NVIDIA,1,2:;;GPU-b,NVIDIA,3,4:;", [[("GPU-a", "NVIDIA", 1, 2)], [], [("GPU-b", "NVIDIA", 3, 4)]]),
    ("GPU-a,NVIDIA,1,2:;GPU-b,NVIDIA,3,4:", [[("GPU-a", "NVIDIA", 1, 2)], [("GPU-b", "NVIDIA", 3, 4)]]),
    ("", []),
], ids=["hami-one", "hami-empty-segment", "volcano-joined", "empty"])
def test_decode_pod_devices(text: str, expected: list) -> None:
    assert inv.decode_pod_devices(text) == expected


def test_free_gpu_count_subtracts_unplaced(dgx: inv.NodeInventory) -> None:
    assert dgx.free_gpu_count(inv.Usage(gpus=frozenset({0}), unplaced_gpus=2)) == 5
    assert dgx.free_gpu_count(inv.Usage(unplaced_gpus=20)) == 0
