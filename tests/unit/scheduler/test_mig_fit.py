"""scheduler.devices.mig: "mixed" MIG resources and HAMi dynamic MIG (profile choice, placements, annotations).

Shapes follow HAMi's dynamic-MIG tests and Volcano `vgpu/mig_test.go` (smallest fitting instance, a GPU filling
up until the next request fails), with the NVML MiB tables of spec/devices.md §2.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.devcluster import nodes, profiles
from lahar.scheduler.devices import inventory as inv
from lahar.scheduler.devices import mig
from lahar.scheduler.devices.inventory import MIGPlacement, Usage, VGPUCard
from lahar.scheduler.devices.requests import GPUFilters, MIGRequest, VGPUPodRequest, VGPURequest

A100_40 = "NVIDIA A100-SXM4-40GB"


def test_profiles_for_a100_40gb() -> None:
    got = mig.profiles_for(A100_40)
    assert [(p.name, p.memory_mib, p.core, p.slices, p.placements) for p in got] == [
        ("1g.5gb", 4864, 15, 1, tuple((s, 1) for s in range(7))),
        ("2g.10gb", 9856, 29, 2, ((0, 2), (2, 2), (4, 2))),
        ("3g.20gb", 19968, 43, 3, ((0, 4), (4, 4))),
        ("7g.40gb", 40192, 100, 7, ((0, 8),)),
    ]
    assert mig.profiles_for("Tesla T4") == ()
    assert [p.name for p in mig.profiles_for("NVIDIA H100 80GB HBM3")] == ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
    assert len(mig.profiles_for(A100_40, allowed_only=False)) == 7


# (id, product, memory MiB, expected profile) — NVML MiB, the request == profile memory boundary (HAMi #1074)
CHOOSE = [
    ("tiny", A100_40, 1, "1g.5gb"),
    ("exactly-1g", A100_40, 4864, "1g.5gb"),
    ("one-over-1g", A100_40, 4865, "2g.10gb"),
    ("name-gb-is-not-nvml-mib", A100_40, 5120, "2g.10gb"),
    ("exactly-3g", A100_40, 19968, "3g.20gb"),
    ("whole", A100_40, 40192, "7g.40gb"),
    ("too-big", A100_40, 40193, None),
    ("a100-80-2g", "NVIDIA A100-SXM4-80GB", 10000, "2g.20gb"),
    ("h100-3g", "NVIDIA H100 80GB HBM3", 40960, "3g.40gb"),
    ("h200-1g", "NVIDIA H200 141GB", 18432, "1g.18gb"),
]


@pytest.mark.parametrize(("product", "memory", "expected"), [x[1:] for x in CHOOSE], ids=[x[0] for x in CHOOSE])
def test_choose_profile(product: str, memory: int, expected: str | None) -> None:
    got = mig.choose_profile(memory, mig.profiles_for(product))
    assert (got.name if got else None) == expected


def _profile(name: str) -> inv.MIGProfileInfo:
    return next(p for p in mig.profiles_for(A100_40, allowed_only=False) if p.name == name)


def _r(profile: str, start: int, size: int) -> MIGPlacement:
    return MIGPlacement("GPU-x", profile, start, size)


# (id, profile, reserved, expected placement)
PLACE = [
    ("1g-highest-start-first", "1g.5gb", [], (6, 1)),
    ("2g-lowest-start-first", "2g.10gb", [], (0, 2)),
    ("3g-highest-start-first", "3g.20gb", [], (4, 4)),
    ("7g-whole", "7g.40gb", [], (0, 8)),
    ("1g-beside-a-3g", "1g.5gb", [_r("3g.20gb", 4, 4)], (3, 1)),
    ("2g-after-a-2g", "2g.10gb", [_r("2g.10gb", 0, 2)], (2, 2)),
    ("3g-after-a-3g", "3g.20gb", [_r("3g.20gb", 4, 4)], (0, 4)),
    ("7g-blocked-by-any", "7g.40gb", [_r("1g.5gb", 6, 1)], None),
    ("half-open-intervals-touching", "2g.10gb", [_r("2g.10gb", 0, 2), _r("2g.10gb", 4, 2)], (2, 2)),
    ("full", "1g.5gb", [_r("1g.5gb", s, 1) for s in range(7)], None),
    ("max-instances", "1g.5gb+me", [_r("1g.5gb+me", 6, 1)], None),
]


@pytest.mark.parametrize(("profile", "reserved", "expected"), [x[1:] for x in PLACE], ids=[x[0] for x in PLACE])
def test_free_placement(profile: str, reserved: list[MIGPlacement], expected: tuple[int, int] | None) -> None:
    assert mig.free_placement(_profile(profile), reserved) == expected


def mig_card(uuid: str, index: int = 0, *, product: str = A100_40, memory: int = 40960) -> VGPUCard:
    return VGPUCard("hami", uuid, index, 7, memory, 100, product, 0, "mig", True)


def dyn(*containers: tuple[int, int, int | None], cores: int = 0, filters: GPUFilters | None = None,
        ) -> VGPUPodRequest:
    """containers: (count, memory MiB, percentage)."""
    cs = tuple(VGPURequest(i, f"c{i}", "hami", n, m, p, cores) for i, (n, m, p) in enumerate(containers))
    return VGPUPodRequest("hami", cs, filters or GPUFilters(), mode="mig", container_count=len(cs))


def test_a_gpu_fills_with_1g_instances_then_refuses() -> None:
    cards = [mig_card("GPU-x")]
    placements: list[MIGPlacement] = []
    for k in range(7):
        got = mig.fit_dynamic(dyn((1, 3000, None)), cards, Usage(mig_placements=tuple(placements)))
        assert isinstance(got, mig.MIGAllocation), got
        (i,) = got.instances
        assert (i.profile, i.start, i.size, i.memory_mib, i.core) == ("1g.5gb", 6 - k, 1, 4864, 15)
        placements.append(MIGPlacement(i.gpu_uuid, i.profile, i.start, i.size))
    got = mig.fit_dynamic(dyn((1, 3000, None)), cards, Usage(mig_placements=tuple(placements)))
    assert isinstance(got, str) and got.startswith(mig.CARD_MIG_TOPOLOGY_INFEASIBLE)


DYNAMIC = [
    ("memory-picks-smallest", ((1, 9000, None),), [("2g.10gb", 0, 2)]),
    ("percentage-of-card", ((1, 0, 50),), [("7g.40gb", 0, 8)]),  # 50 % of 40960 = 20480 > 3g's 19968
    ("count-only-is-largest", ((1, 0, 100),), [("7g.40gb", 0, 8)]),
    ("two-instances-one-container-same-gpu", ((2, 19000, None),), [("3g.20gb", 4, 4), ("3g.20gb", 0, 4)]),
    ("two-containers", ((1, 4000, None), (1, 19000, None)), [("1g.5gb", 6, 1), ("3g.20gb", 0, 4)]),
]


@pytest.mark.parametrize(("containers", "expected"), [x[1:] for x in DYNAMIC], ids=[x[0] for x in DYNAMIC])
def test_fit_dynamic_on_one_gpu(containers: tuple, expected: list[tuple[str, int, int]]) -> None:
    got = mig.fit_dynamic(dyn(*containers), [mig_card("GPU-x")], Usage())
    assert isinstance(got, mig.MIGAllocation), got
    assert [(i.profile, i.start, i.size) for i in got.instances] == expected


def test_fit_dynamic_too_big_and_no_mig_card() -> None:
    assert isinstance(mig.fit_dynamic(dyn((1, 50000, None)), [mig_card("GPU-x")], Usage()), str)
    plain = VGPUCard("hami", "GPU-y", 0, 10, 40960, 100, A100_40, 0, "hami-core", True)
    got = mig.fit_dynamic(dyn((1, 1000, None)), [plain], Usage())
    assert isinstance(got, str) and "no healthy GPU in MIG mode" in got
    got = mig.fit_dynamic(dyn((1, 1000, None), filters=GPUFilters(use_types=("H100",))), [mig_card("GPU-x")], Usage())
    assert isinstance(got, str)


@pytest.mark.parametrize(("policy", "expected"), [("binpack", ["GPU-a", "GPU-a"]), ("spread", ["GPU-a", "GPU-b"])],
                         ids=["binpack", "spread"])
def test_fit_dynamic_policy(policy: str, expected: list[str]) -> None:
    cards = [mig_card("GPU-a", 0), mig_card("GPU-b", 1)]
    got = mig.fit_dynamic(dyn((2, 4000, None)), cards, Usage(), policy=policy)
    assert isinstance(got, mig.MIGAllocation) and [i.gpu_uuid for i in got.instances] == expected


def test_fit_dynamic_uses_registered_profiles() -> None:
    only_3g = inv.MIGProfileInfo("3g.20gb", 19968, 43, 3, ((0, 4), (4, 4)), 2)
    card = VGPUCard("hami", "GPU-r", 0, 2, 40960, 100, A100_40, 0, "mig", True, (only_3g,))
    got = mig.fit_dynamic(dyn((1, 1000, None)), [card], Usage())
    assert isinstance(got, mig.MIGAllocation) and got.instances[0].profile == "3g.20gb"


def test_fit_dynamic_cores_budget() -> None:
    used = Usage(cards={"GPU-x": inv.CardUsage(1, 19968, 90)})
    assert isinstance(mig.fit_dynamic(dyn((1, 1000, None), cores=20), [mig_card("GPU-x")], used), str)


def test_annotations() -> None:
    got = mig.fit_dynamic(dyn((1, 4000, None), (1, 9000, None)), [mig_card("GPU-x")], Usage())
    assert isinstance(got, mig.MIGAllocation)
    ann = mig.annotations(got, node="n", now=7)
    assert json.loads(ann["hami.io/vgpu-mig-allocations"]) == [
        {"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "GPU-x", "profile": "1g.5gb",
         "placement": {"start": 6, "size": 1}},
        {"containerIndex": 1, "deviceIndex": 0, "gpuUUID": "GPU-x", "profile": "2g.10gb",
         "placement": {"start": 0, "size": 2}}]
    assert ann["hami.io/vgpu-devices-allocated"] == "GPU-x,NVIDIA,4864,15:;GPU-x,NVIDIA,9856,29:;"
    # and it reads back as usage: the next fit avoids both placements
    u = inv.usage([{"metadata": {"annotations": ann}, "spec": {}}])
    assert {(p.start, p.size) for p in u.mig_placements} == {(6, 1), (0, 2)} and u.card("GPU-x").cores == 44


# --- mixed strategy on devcluster's A100 node -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def a100() -> inv.NodeInventory:
    objects = [o for o in nodes.build(profiles.load("mixed"), 1)]
    by = {o["kind"]: o for o in objects}
    return inv.inventory(by["Node"], by.get("Device"), by.get("Numatopology"))


def _m(profile: str, count: int, container: int = 0, init: bool = False) -> MIGRequest:
    return MIGRequest(container, "c", "nvidia.com/mig-" + profile.replace("+", "."), profile, count, init)


MIXED = [
    ("fits", [_m("1g.10gb", 1)], {}, None),
    ("all-of-a-profile", [_m("3g.40gb", 4)], {}, None),
    ("one-too-many", [_m("3g.40gb", 5)], {}, "Insufficient nvidia.com/mig-3g.40gb"),
    ("used-by-others", [_m("1g.10gb", 2)], {"1g.10gb": 7}, "Insufficient nvidia.com/mig-1g.10gb"),
    ("profile-not-offered", [_m("7g.80gb", 1)], {}, "Insufficient nvidia.com/mig-7g.80gb"),
    ("app-containers-add-up", [_m("2g.20gb", 2), _m("2g.20gb", 3, 1)], {}, "Insufficient nvidia.com/mig-2g.20gb"),
    ("init-is-a-peak", [_m("2g.20gb", 4, 0, True), _m("2g.20gb", 3, 1)], {}, None),
]


@pytest.mark.parametrize(("reqs", "used", "reason"), [x[1:] for x in MIXED], ids=[x[0] for x in MIXED])
def test_fit_mixed(a100: inv.NodeInventory, reqs: list[MIGRequest], used: dict[str, int], reason: str | None) -> None:
    assert mig.fit_mixed(reqs, a100, Usage(mig=used)) == reason


def test_mixed_instances_and_pod_usage(a100: inv.NodeInventory) -> None:
    got = mig.mixed_instances(a100)
    assert {p: [numa for _, numa in v] for p, v in got.items()} == {"1g.10gb": [0] * 8, "2g.20gb": [0] * 4,
                                                                    "3g.40gb": [0] * 4}
    assert [i for i, _ in got["1g.10gb"]][:3] == ["0/0", "0/1", "1/0"]  # "<GPU index>/<ordinal on that GPU>"
    pods: list[dict[str, Any]] = [{"metadata": {}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 8}}}]}}]
    assert mig.fit_mixed([_m("1g.10gb", 1)], a100, inv.usage(pods)) == "Insufficient nvidia.com/mig-1g.10gb"


# --- which "mixed" MIG instances are free: recorded, unrecorded and this session's -------------------------------

_INSTANCES = [("0/0", 0), ("0/1", 0), ("1/0", 1), ("1/1", 1)]


@pytest.mark.parametrize(("recorded", "used", "taken", "free"), [
    pytest.param(set(), 0, set(), ["0/0", "0/1", "1/0", "1/1"], id="nothing-used"),
    pytest.param({"0/0"}, 1, set(), ["0/1", "1/0", "1/1"], id="a-recorded-pod-holds-its-instance"),
    pytest.param(set(), 1, set(), ["0/0", "0/1", "1/0"], id="an-unrecorded-pod-is-assumed-on-the-last-free-one"),
    pytest.param({"1/1"}, 2, set(), ["0/0", "0/1"], id="recorded-and-unrecorded-together"),
    pytest.param(set(), 0, {"0/1"}, ["0/0", "1/0", "1/1"], id="this-session-took-one"),
    pytest.param(set(), 9, set(), [], id="more-used-than-exist"),
])
def test_free_instances_table(recorded: set[str], used: int, taken: set[str], free: list[str]) -> None:
    assert [i for i, _ in mig.free_instances(_INSTANCES, recorded, used, taken)] == free


@pytest.mark.parametrize(("count", "numa", "chosen"), [
    pytest.param(1, None, ["0/0"], id="no-hint-first-free"),
    pytest.param(1, {1}, ["1/0"], id="the-hinted-numa-node-first"),
    pytest.param(3, {1}, ["1/0", "1/1", "0/0"], id="best-effort-spills-outside-the-hint"),
    pytest.param(5, None, None, id="short"),
])
def test_choose_instances_table(count: int, numa: set[int] | None, chosen: list[str] | None) -> None:
    assert mig.choose_instances(_INSTANCES, count, numa) == chosen


def test_instances_annotation_round_trips_and_ignores_garbage() -> None:
    raw = mig.instances_annotation({"1g.10gb": ["0/1", "1/0"]})
    assert raw == '{"1g.10gb":["0/1","1/0"]}'
    assert inv.parse_instances_annotation(raw) == {"1g.10gb": frozenset({"0/1", "1/0"})}
    for bad in ("", "{nope", "[1]", '{"1g.10gb": 3}'):
        assert inv.parse_instances_annotation(bad) == {}
    pod = {"metadata": {"annotations": {inv.MIG_INSTANCES_ANNOTATION: raw}}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 2}}}]}}
    used = inv.usage([pod])
    assert used.mig == {"1g.10gb": 2} and used.mig_instances == {"1g.10gb": frozenset({"0/1", "1/0"})}
