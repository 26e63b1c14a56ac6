"""scheduler.devices.rdma: Koordinator's GPU + RDMA joint allocation (SamePCIe) and lahar's explicit pairs.

Shapes follow Koordinator `pkg/scheduler/plugins/deviceshare/*joint*_test.go` and its allocator tests (preferred
PCIe round-robin, PR #2646's 8 GPUs / 8 PCIes with 3 NICs on PCIe 0, VF choice by busID, the rules violation),
plus devcluster's dgx-h100 and mixed A100 nodes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.devcluster import nodes, profiles
from lahar.scheduler.devices import inventory as inv
from lahar.scheduler.devices import rdma
from lahar.scheduler.devices.inventory import GPU, VF, RDMANic, Usage
from lahar.scheduler.devices.requests import RDMARequest

VFS8 = RDMARequest(vfs=8, vf_resource="nvidia.com/rdma_vf")


def _node(profile: str, name: str) -> inv.NodeInventory:
    objects = [o for o in nodes.build(profiles.load(profile), 3) if o["metadata"]["name"] == name]
    by = {o["kind"]: o for o in objects}
    return inv.inventory(by["Node"], by.get("Device"), by.get("Numatopology"))


@pytest.fixture(scope="module")
def dgx() -> inv.NodeInventory:
    return _node("dgx-h100", "dgx-h100-0")


@pytest.fixture(scope="module")
def a100() -> inv.NodeInventory:
    return _node("mixed", "mixed-a100-0")


def _gpus(node: inv.NodeInventory, *indices: int) -> list[GPU]:
    return [g for i in indices for g in node.gpus if g.index == i]


def test_dgx_eight_gpus_eight_vfs_pair_one_to_one(dgx: inv.NodeInventory) -> None:
    got = rdma.allocate(_gpus(dgx, *range(8)), dgx.nics, Usage(), request=VFS8)
    assert isinstance(got, rdma.RDMAAllocation), got
    assert [(p.gpu, p.nic, p.scope) for p in got.pairs] == [(i, i, "PCIe") for i in range(8)]
    assert all(p.vf == dgx.nics[p.nic].vfs[0].bus_id for p in got.pairs)
    assert [n.minor for n in got.nics] == list(range(8)) and len(got.vfs()) == 8


@pytest.mark.parametrize(("request_", "must_vf"), [
    (RDMARequest(devices=8, units=100), True), (VFS8, True), (RDMARequest(devices=8, units=100), False)],
    ids=["koordinator-800-vf", "sriov-vfs", "koordinator-800-pf"])
def test_dgx_joint_allocation_every_gpu_on_its_pcie(dgx: inv.NodeInventory, request_: RDMARequest,
                                                     must_vf: bool) -> None:
    gpus = _gpus(dgx, *range(8))
    got = rdma.allocate(gpus, dgx.nics, Usage(), request=request_, must_vf=must_vf)
    assert isinstance(got, rdma.RDMAAllocation), got
    assert all(p.pcie_id == dgx.nics[p.nic].pcie_id == dgx.gpus[p.gpu].pcie_id for p in got.pairs)
    assert len({p.nic for p in got.pairs}) == 8 and all(bool(p.vf) is must_vf for p in got.pairs)


@pytest.mark.parametrize(("indices", "count", "nics"), [
    ((0,), 1, [0]), ((0, 1), 2, [0, 1]), ((2, 3), 2, [2, 3]), ((1, 6), 2, [0, 6]), ((4, 5, 6, 7), 4, [4, 5, 6, 7])],
    ids=["one", "pair", "second-switch", "two-switches", "numa-1-half"])
def test_dgx_subsets(dgx: inv.NodeInventory, indices: tuple[int, ...], count: int, nics: list[int]) -> None:
    got = rdma.allocate(_gpus(dgx, *indices), dgx.nics, Usage(), request=RDMARequest(vfs=count))
    assert isinstance(got, rdma.RDMAAllocation) and [n.minor for n in got.nics] == nics


def test_one_rdma_unit_is_raised_to_one_device_per_pcie(dgx: inv.NodeInventory) -> None:
    """Koordinator: `koordinator.sh/rdma: 1` with SamePCIe on 8 GPUs over 4 PCIes → 4 NICs, round-robin round 1."""
    got = rdma.allocate(_gpus(dgx, *range(8)), dgx.nics, Usage(), request=RDMARequest(devices=1, units=1))
    assert isinstance(got, rdma.RDMAAllocation), got
    assert [n.minor for n in got.nics] == [0, 2, 4, 6] and all(n.units == 1 for n in got.nics)
    assert [(p.gpu, p.nic) for p in got.pairs] == [(0, 0), (1, 0), (2, 2), (3, 2), (4, 4), (5, 4), (6, 6), (7, 6)]


def _pcie_gpus(n: int) -> list[GPU]:
    return [GPU(i, f"GPU-{i}", numa=i * 2 // n, pcie_id=f"pci{i}") for i in range(n)]


def _nic(minor: int, pcie: str, numa: int = 0, vfs: int = 2) -> RDMANic:
    bus = f"0000:{0x80 + minor:02x}:00"
    return RDMANic(minor, f"{bus}.0", numa, pcie, None, f"{bus}.0", True,
                   tuple(VF(f"{bus}.{k + 1}", -1, (("type", "general"),)) for k in range(vfs)))


def test_pr2646_three_nics_on_pcie0() -> None:
    """8 GPUs on 8 PCIes, PCIe 0 carries NICs 0-2, PCIe k>0 carries NIC k+2: 8 + 8 → NICs 0, 3..9."""
    gpus = _pcie_gpus(8)
    nics = [_nic(0, "pci0"), _nic(1, "pci0"), _nic(2, "pci0")] + [_nic(k + 2, f"pci{k}") for k in range(1, 8)]
    for same_pcie in (True, False):
        got = rdma.allocate(gpus, nics, Usage(), request=RDMARequest(devices=8, units=100), same_pcie=same_pcie)
        assert isinstance(got, rdma.RDMAAllocation), got
        assert [n.minor for n in got.nics] == [0, 3, 4, 5, 6, 7, 8, 9]


def test_round_robin_order() -> None:
    nics = [_nic(0, "a"), _nic(1, "a"), _nic(2, "b"), _nic(3, "c"), _nic(4, "b"), _nic(5, "z")]
    assert [n.minor for n in rdma._round_robin(nics, ["b", "a"])] == [0, 2, 1, 4, 3, 5]


def test_same_pcie_violation_and_fallback() -> None:
    gpus = _pcie_gpus(2)   # pci0 (numa 0), pci1 (numa 1)
    nics = [_nic(0, "pci0", 0), _nic(1, "pciX", 1)]
    got = rdma.allocate(gpus, nics, Usage(), request=RDMARequest(vfs=2))
    assert isinstance(got, str) and got.startswith(rdma.JOINT_ALLOCATE_VIOLATION) and "pci1" in got
    fallback = rdma.allocate(gpus, nics, Usage(), request=RDMARequest(vfs=2), same_pcie=False)
    assert isinstance(fallback, rdma.RDMAAllocation), fallback
    assert [(p.gpu, p.nic, p.scope) for p in fallback.pairs] == [(0, 0, "PCIe"), (1, 1, "NUMA")]


def test_koordinator_count_below_pcies_is_a_violation_when_a_pcie_has_no_nic() -> None:
    gpus = _pcie_gpus(2)
    got = rdma.allocate(gpus, [_nic(0, "pci0")], Usage(), request=RDMARequest(devices=1, units=100))
    assert isinstance(got, str) and got.startswith(rdma.JOINT_ALLOCATE_VIOLATION) and "pci1" in got
    short = rdma.allocate(gpus, [_nic(0, "pci0"), _nic(1, "pci1")], Usage(), request=RDMARequest(devices=3, units=100),
                          same_pcie=False)
    assert isinstance(short, str) and short.startswith(rdma.INSUFFICIENT_RDMA)


def test_vfs_required_but_none_on_the_node() -> None:
    gpus = _pcie_gpus(1)
    got = rdma.allocate(gpus, [_nic(0, "pci0", vfs=0)], Usage(), request=RDMARequest(devices=1, units=100))
    assert isinstance(got, str) and got.startswith(rdma.INSUFFICIENT_VFS)
    whole = rdma.allocate(gpus, [_nic(0, "pci0", vfs=0)], Usage(), request=RDMARequest(devices=1, units=100),
                          must_vf=False)
    assert isinstance(whole, rdma.RDMAAllocation) and whole.nics[0].vfs == () and whole.pairs[0].vf == ""


def test_used_vfs_and_pfs_are_skipped(dgx: inv.NodeInventory) -> None:
    nic0 = dgx.nics[0]
    all_of_nic0 = frozenset(v.bus_id for v in nic0.vfs)
    got = rdma.allocate(_gpus(dgx, 0, 1), dgx.nics, Usage(vfs=all_of_nic0), request=RDMARequest(vfs=2))
    assert isinstance(got, rdma.RDMAAllocation) and [n.minor for n in got.nics] == [1]
    assert len(got.nics[0].vfs) == 2 and got.pairs[0].vf != got.pairs[1].vf
    distinct = rdma.allocate(_gpus(dgx, 0, 1), dgx.nics, Usage(vfs=all_of_nic0),
                             request=RDMARequest(devices=2, units=100))
    assert isinstance(distinct, str)
    some = rdma.allocate(_gpus(dgx, 0), dgx.nics, Usage(vfs=frozenset({nic0.vfs[0].bus_id})),
                         request=RDMARequest(vfs=1))
    assert isinstance(some, rdma.RDMAAllocation) and some.pairs[0].vf == nic0.vfs[1].bus_id
    pf_taken = rdma.allocate(_gpus(dgx, 0), dgx.nics, Usage(pfs={0: 100}), request=RDMARequest(devices=1, units=100),
                             must_vf=False)
    assert isinstance(pf_taken, rdma.RDMAAllocation) and pf_taken.nics[0].minor == 1


def test_numa_restriction(dgx: inv.NodeInventory) -> None:
    got = rdma.allocate(_gpus(dgx, 0), dgx.nics, Usage(), request=RDMARequest(vfs=1), same_pcie=False,
                        numa_nodes={1})
    assert isinstance(got, rdma.RDMAAllocation) and got.pairs[0].nic == 4 and got.pairs[0].scope == "Node"
    assert isinstance(rdma.allocate(_gpus(dgx, 0), dgx.nics, Usage(), request=RDMARequest(vfs=1), numa_nodes={1}),
                      str)


def test_vf_selector_match_labels() -> None:
    nic = RDMANic(0, "0000:80:00.0", 0, "pci0", None, "0000:80:00.0", True,
                  (VF("0000:80:00.1", -1, (("type", "general"),)), VF("0000:80:00.2", -1, (("type", "fast"),))))
    got = rdma.allocate(_pcie_gpus(1), [nic], Usage(), request=RDMARequest(vfs=1),
                        vf_selector={"matchLabels": {"type": "fast"}})
    assert isinstance(got, rdma.RDMAAllocation) and got.vfs() == ["0000:80:00.2"]


def test_mixed_a100_shares_nics_between_gpu_pairs(a100: inv.NodeInventory) -> None:
    gpus = [g for g in a100.gpus if not g.mig_enabled]   # 4..7: two PCIe switches, one NIC each
    got = rdma.allocate(gpus, a100.nics, Usage(), request=RDMARequest(vfs=4))
    assert isinstance(got, rdma.RDMAAllocation), got
    assert [(p.gpu, p.nic) for p in got.pairs] == [(4, 2), (5, 2), (6, 3), (7, 3)]
    assert len({p.vf for p in got.pairs}) == 4
    assert isinstance(rdma.allocate(gpus, a100.nics, Usage(), request=RDMARequest(devices=4, units=100)), str)


def test_annotations_round_trip(dgx: inv.NodeInventory) -> None:
    gpus = _gpus(dgx, 0, 1)
    got = rdma.allocate(gpus, dgx.nics, Usage(), request=RDMARequest(devices=2, units=100))
    assert isinstance(got, rdma.RDMAAllocation)
    ann = rdma.annotations(gpus, got)
    allocated = json.loads(ann[rdma.DEVICE_ALLOCATED_ANNOTATION])
    assert allocated["gpu"] == [
        {"minor": g.index, "id": g.uuid, "resources": {"koordinator.sh/gpu-core": "100",
                                                       "koordinator.sh/gpu-memory": "81559Mi",
                                                       "koordinator.sh/gpu-memory-ratio": "100"}} for g in gpus]
    assert allocated["rdma"] == [
        {"minor": n.minor, "id": n.id, "resources": {"koordinator.sh/rdma": "100"},
         "extension": {"vfs": [{"minor": -1, "busID": n.vfs[0].bus_id}]}} for n in dgx.nics[:2]]
    pairs = json.loads(ann[rdma.PAIRS_ANNOTATION])
    assert pairs[1] == {"gpu": 1, "gpuUUID": gpus[1].uuid, "nic": 1, "pf": dgx.nics[1].id,
                        "vf": dgx.nics[1].vfs[0].bus_id, "pcieID": gpus[1].pcie_id, "scope": "PCIe"}
    pod: dict[str, Any] = {"metadata": {"annotations": ann}, "spec": {}}
    u = inv.usage([pod])
    assert u.gpus == frozenset({0, 1}) and u.vfs == {dgx.nics[0].vfs[0].bus_id, dgx.nics[1].vfs[0].bus_id}
    assert dgx.free_gpus(u) == [2, 3, 4, 5, 6, 7]
    assert rdma.annotations(gpus, None) == {rdma.DEVICE_ALLOCATED_ANNOTATION: json.dumps(
        {"gpu": allocated["gpu"]}, separators=(",", ":"))}


def test_nothing_requested() -> None:
    assert rdma.allocate(_pcie_gpus(1), [], Usage(), request=RDMARequest(), same_pcie=False) == \
        rdma.RDMAAllocation((), ())
