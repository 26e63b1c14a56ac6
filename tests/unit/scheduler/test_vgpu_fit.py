"""scheduler.devices.vgpu: HAMi and Volcano vGPU fit, ordering, scores and annotations.

Table shapes follow HAMi `pkg/scheduler/score_test.go` (node score before the pod; spread picks) and Volcano
`pkg/scheduler/api/devices/nvidia/vgpu/*_test.go` (per-card checks, binpack/spread scores), in our own data.
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.devcluster import nodes, profiles
from lahar.scheduler.devices import inventory as inv
from lahar.scheduler.devices import requests, vgpu
from lahar.scheduler.devices.inventory import CardUsage, Usage, VGPUCard
from lahar.scheduler.devices.requests import GPUFilters, VGPUPodRequest, VGPURequest


def card(uuid: str, index: int = 0, *, vendor: str = "hami", count: int = 10, memory: int = 8000, numa: int | None = 0,
         type_: str = "NVIDIA", mode: str = "hami-core", healthy: bool = True) -> VGPUCard:
    return VGPUCard(vendor, uuid, index, count, memory, 100, type_, numa, mode, healthy)


def req(vendor: str, *containers: tuple[int, int, int | None, int], filters: GPUFilters | None = None,
        **kw: Any) -> VGPUPodRequest:
    """containers: (count, memory MiB, percentage, cores)."""
    cs = tuple(VGPURequest(i, f"c{i}", vendor, n, m, p, cores) for i, (n, m, p, cores) in enumerate(containers))
    return VGPUPodRequest(vendor, cs, filters or GPUFilters(vendor=vendor), container_count=len(cs), **kw)


HALF = CardUsage(5, 4000, 50)

# HAMi score_test shapes: (id, cards, usage, request, expected uuids, expected node score)
HAMI_SCORE = [
    ("one-device-idle", [card("uuid1")], {}, ((1, 1000, None, 30),), ["uuid1"], 0.0),
    ("one-device-half-used", [card("uuid1")], {"uuid1": HALF}, ((1, 1000, None, 30),), ["uuid1"], 15.0),
    ("two-idle-spread-takes-the-last", [card("uuid1"), card("uuid2", 1)], {}, ((1, 1000, None, 30),), ["uuid2"], 0.0),
    ("two-one-half-used-spread-takes-idle", [card("uuid1"), card("uuid2", 1)], {"uuid2": HALF},
     ((1, 1000, None, 30),), ["uuid1"], 7.5),
    ("two-devices-both", [card("uuid1"), card("uuid2", 1)], {}, ((2, 1000, None, 30),), ["uuid2", "uuid1"], 0.0),
    ("two-devices-both-half-used", [card("uuid1"), card("uuid2", 1)], {"uuid1": HALF, "uuid2": HALF},
     ((2, 1000, None, 30),), ["uuid2", "uuid1"], 15.0),
]


@pytest.mark.parametrize(("cards", "used", "containers", "uuids", "score"), [x[1:] for x in HAMI_SCORE],
                         ids=[x[0] for x in HAMI_SCORE])
def test_hami_fit_and_node_score(cards: list[VGPUCard], used: dict[str, CardUsage], containers: tuple,
                                 uuids: list[str], score: float) -> None:
    got = vgpu.fit(req("hami", *containers), cards, Usage(cards=used))
    assert isinstance(got, vgpu.Allocation), got
    assert got.uuids() == uuids and got.raw_score == pytest.approx(score)
    assert all(d.memory_mib == 1000 and d.cores == 30 for d in got.devices())


def test_hami_binpack_takes_the_fullest_card() -> None:
    cards = [card("a"), card("b", 1), card("c", 2)]
    used = Usage(cards={"b": CardUsage(2, 2000, 20), "c": CardUsage(1, 1000, 10)})
    got = vgpu.fit(req("hami", (1, 1000, None, 10)), cards, used, policy=vgpu.BINPACK)
    assert isinstance(got, vgpu.Allocation) and got.uuids() == ["b"]
    spread = vgpu.fit(req("hami", (1, 1000, None, 10)), cards, used, policy=vgpu.SPREAD)
    assert isinstance(spread, vgpu.Allocation) and spread.uuids() == ["a"]
    pod_wins = vgpu.fit(req("hami", (1, 1000, None, 10), gpu_policy="binpack,numa"), cards, used, policy=vgpu.SPREAD)
    assert isinstance(pod_wins, vgpu.Allocation) and pod_wins.uuids() == ["b"]


def test_hami_node_policy_orients_the_score() -> None:
    cards = [card("a")]
    used = Usage(cards={"a": CardUsage(2, 2000, 20)})  # 10 × (2/10 + 20/100 + 2000/8000) = 6.5
    binpack = vgpu.fit(req("hami", (1, 10, None, 0)), cards, used)
    spread = vgpu.fit(req("hami", (1, 10, None, 0), node_policy="spread"), cards, used)
    assert isinstance(binpack, vgpu.Allocation) and isinstance(spread, vgpu.Allocation)
    assert binpack.raw_score == spread.raw_score == pytest.approx(6.5)
    assert (binpack.score, spread.score) == (pytest.approx(6.5), pytest.approx(23.5))


def test_hami_mutex_takes_idle_cards_only() -> None:
    cards = [card("a"), card("b", 1)]
    got = vgpu.fit(req("hami", (1, 10, None, 0)), cards, Usage(cards={"b": CardUsage(1, 10, 0)}), policy="mutex")
    assert isinstance(got, vgpu.Allocation) and got.uuids() == ["a"]
    full = vgpu.fit(req("hami", (1, 10, None, 0)), cards, Usage(cards={"a": CardUsage(1, 10, 0),
                                                                        "b": CardUsage(1, 10, 0)}), policy="mutex")
    assert isinstance(full, str) and "mutex" in full


def test_hami_numa_bind_keeps_a_container_on_one_numa_node() -> None:
    cards = [card("a", 0, numa=0), card("b", 1, numa=1), card("c", 2, numa=1)]
    free = vgpu.fit(req("hami", (2, 10, None, 0)), cards, Usage(), policy=vgpu.BINPACK)
    bound = vgpu.fit(req("hami", (2, 10, None, 0), numa_bind=True), cards, Usage(), policy=vgpu.BINPACK)
    assert isinstance(free, vgpu.Allocation) and isinstance(bound, vgpu.Allocation)
    assert {d.numa for d in free.devices()} == {0, 1}
    assert {d.numa for d in bound.devices()} == {1} and sorted(bound.uuids()) == ["b", "c"]


# per-card checks, both vendors: (id, vendor, card, usage, container, fits)
CHECKS = [
    ("fits", card("a"), CardUsage(), (1, 1000, None, 30), True),
    ("unhealthy", card("a", healthy=False), CardUsage(), (1, 1000, None, 30), False),
    ("slots-exhausted", card("a", count=2), CardUsage(2, 0, 0), (1, 10, None, 0), False),
    ("memory-exact", card("a"), CardUsage(1, 7000, 0), (1, 1000, None, 0), True),
    ("memory-short", card("a"), CardUsage(1, 7001, 0), (1, 1000, None, 0), False),
    ("percentage-of-card-memory", card("a"), CardUsage(1, 4000, 0), (1, 0, 50, 0), True),
    ("percentage-short", card("a"), CardUsage(1, 4001, 0), (1, 0, 50, 0), False),
    ("cores-exact", card("a"), CardUsage(1, 0, 70), (1, 10, None, 30), True),
    ("cores-over", card("a"), CardUsage(1, 0, 71), (1, 10, None, 30), False),
    ("exclusive-needs-unused-card", card("a"), CardUsage(1, 10, 0), (1, 10, None, 100), False),
    ("exclusive-on-idle-card", card("a"), CardUsage(), (1, 0, 100, 100), True),
    ("zero-cores-not-on-full-card", card("a"), CardUsage(1, 10, 100), (1, 10, None, 0), False),
    ("cores-over-100-never-fit", card("a"), CardUsage(), (1, 10, None, 101), False),
]


@pytest.mark.parametrize("vendor", ["hami", "volcano"])
@pytest.mark.parametrize(("the_card", "used", "container", "fits"), [x[1:] for x in CHECKS],
                         ids=[x[0] for x in CHECKS])
def test_card_checks(vendor: str, the_card: VGPUCard, used: CardUsage, container: tuple, fits: bool) -> None:
    got = vgpu.fit(req(vendor, container), [the_card], Usage(cards={"a": used}), node="n1")
    assert isinstance(got, vgpu.Allocation) is fits, got


@pytest.mark.parametrize(("vendor", "reason"), [("volcano", "no enough gpu cards on node n1"),
                                                ("hami", "NodeInsufficientDevice")], ids=["volcano", "hami"])
def test_more_gpus_than_cards(vendor: str, reason: str) -> None:
    assert vgpu.fit(req(vendor, (3, 10, None, 0)), [card("a"), card("b", 1)], Usage(), node="n1") == reason


def test_count_units_are_distinct_cards() -> None:
    got = vgpu.fit(req("volcano", (2, 10, None, 0)), [card("a"), card("b", 1, count=0)], Usage())
    assert got == "not enough gpu fitted on this node"


def test_hami_reason_lists_what_failed() -> None:
    got = vgpu.fit(req("hami", (1, 9000, None, 0)), [card("a"), card("b", 1)], Usage())
    assert got == "CardInsufficient: container c0 needs 1 card(s) (2 memory)"


# Volcano orders: (id, policy, usage, expected uuid, expected score)
VOLCANO_ORDER = [
    ("default-reverse-index", None, {}, "c", 0.0),
    ("binpack-most-memory", "binpack", {"a": CardUsage(1, 3000, 0), "b": CardUsage(1, 1000, 0)}, "a", 50.0),
    ("spread-fewest-users", "spread", {"a": CardUsage(1, 10, 0), "c": CardUsage(2, 10, 0)}, "b", 100.0),
    ("spread-all-used-scores-0", "spread", {"a": CardUsage(1, 10, 0), "b": CardUsage(1, 10, 0),
                                            "c": CardUsage(1, 10, 0)}, "c", 0.0),
]


@pytest.mark.parametrize(("policy", "used", "uuid", "score"), [x[1:] for x in VOLCANO_ORDER],
                         ids=[x[0] for x in VOLCANO_ORDER])
def test_volcano_policy_order_and_score(policy: str | None, used: dict[str, CardUsage], uuid: str,
                                        score: float) -> None:
    cards = [card("a", 0, vendor="volcano"), card("b", 1, vendor="volcano"), card("c", 2, vendor="volcano")]
    got = vgpu.fit(req("volcano", (1, 1000, None, 0)), cards, Usage(cards=used), policy=policy)
    assert isinstance(got, vgpu.Allocation) and got.uuids() == [uuid]
    assert got.score == pytest.approx(score)


def test_filters_and_modes() -> None:
    cards = [card("a", 0, type_="NVIDIA-Tesla T4"), card("b", 1, type_="NVIDIA A100")]
    only_t4 = vgpu.fit(req("hami", (1, 10, None, 0), filters=GPUFilters(use_types=("t4",))), cards, Usage())
    assert isinstance(only_t4, vgpu.Allocation) and only_t4.uuids() == ["a"]
    assert vgpu.fit(req("hami", (2, 10, None, 0), filters=GPUFilters(use_types=("t4",))), cards, Usage()) == \
        "NodeInsufficientDevice"
    not_b = vgpu.fit(req("volcano", (1, 10, None, 0), filters=GPUFilters(nouse_uuids=("b",), vendor="volcano")),
                     cards, Usage())
    assert isinstance(not_b, vgpu.Allocation) and not_b.uuids() == ["a"]
    assert vgpu.fit(req("volcano", (1, 10, None, 0), mode="mig"), cards, Usage()) == vgpu.MIG_REQUIRED
    assert isinstance(vgpu.fit(req("hami", (1, 10, None, 0), mode="hami-core,mps"), cards, Usage()), vgpu.Allocation)
    assert isinstance(vgpu.fit(req("hami", (1, 10, None, 0), mode="mps"), cards, Usage()), str)


def test_volcano_podgroup_spread() -> None:
    cards = [card("a", 0, vendor="volcano"), card("b", 1, vendor="volcano")]
    used = Usage(cards={"b": CardUsage(1, 10, 0, frozenset({"pg"}))})
    got = vgpu.fit(req("volcano", (1, 10, None, 0), podgroup_spread=True, group="pg"), cards, used)
    assert isinstance(got, vgpu.Allocation) and got.uuids() == ["a"]


def test_containers_see_earlier_containers_charges() -> None:
    """Two containers each wanting 5000 MiB of one 8000 MiB card must land on different cards."""
    cards = [card("a"), card("b", 1)]
    got = vgpu.fit(req("volcano", (1, 5000, None, 0), (1, 5000, None, 0)), cards, Usage())
    assert isinstance(got, vgpu.Allocation) and sorted(got.uuids()) == ["a", "b"]
    assert vgpu.fit(req("volcano", (1, 5000, None, 0), (1, 5000, None, 0)), [card("a")], Usage()) == \
        "not enough gpu fitted on this node"


def test_init_container_does_not_add_to_app_usage() -> None:
    r = VGPUPodRequest("hami", (VGPURequest(0, "init", "hami", 1, 6000, None, 0, init=True),
                                VGPURequest(1, "app", "hami", 1, 6000, None, 0)), container_count=2)
    got = vgpu.fit(r, [card("a")], Usage())
    assert isinstance(got, vgpu.Allocation) and got.uuids() == ["a", "a"]


def test_annotations_hami() -> None:
    alloc = vgpu.Allocation("hami", ((0, (vgpu.ContainerDevice("GPU-aaa", 0, 3000, 0),)),
                                     (1, (vgpu.ContainerDevice("GPU-aaa", 0, 5000, 0),))), 2)
    ann = vgpu.annotations(alloc, node="n1", now=1700000000)
    assert ann["hami.io/vgpu-devices-allocated"] == "GPU-aaa,NVIDIA,3000,0:;GPU-aaa,NVIDIA,5000,0:;"
    assert ann["hami.io/vgpu-devices-to-allocate"] == ann["hami.io/vgpu-devices-allocated"]
    assert (ann["hami.io/vgpu-node"], ann["hami.io/vgpu-time"], ann["hami.io/bind-phase"]) == (
        "n1", "1700000000", "allocating")
    gap = vgpu.Allocation("hami", ((2, (vgpu.ContainerDevice("GPU-b", 1, 10, 5),)),), 3)
    assert vgpu.device_list(gap) == ";;GPU-b,NVIDIA,10,5:;"


def test_annotations_volcano() -> None:
    alloc = vgpu.Allocation("volcano", ((0, (vgpu.ContainerDevice("GPU-a", 0, 3000, 10),
                                             vgpu.ContainerDevice("GPU-b", 1, 3000, 10))),
                                        (2, (vgpu.ContainerDevice("GPU-a", 0, 1000, 0),))), 3)
    ann = vgpu.annotations(alloc, node="n1", now=5)
    assert ann["volcano.sh/vgpu-ids-new"] == "GPU-a,NVIDIA,3000,10:GPU-b,NVIDIA,3000,10:;GPU-a,NVIDIA,1000,0:"
    assert ann["volcano.sh/devices-to-allocate"] == ann["volcano.sh/vgpu-ids-new"]
    assert set(ann) == {"volcano.sh/vgpu-node", "volcano.sh/vgpu-time", "volcano.sh/vgpu-ids-new",
                        "volcano.sh/devices-to-allocate", "volcano.sh/bind-phase", "volcano.sh/bind-time"}


def test_round_trip_on_devcluster_t4_node() -> None:
    """Fit a Volcano pod on a devcluster T4 node, write its annotations, read them back as usage, fit again."""
    objects = nodes.build(profiles.load("mixed"), 2)
    t4_node = next(o for o in objects if o["metadata"]["name"] == "mixed-t4-0" and o["kind"] == "Node")
    node = inv.inventory(t4_node)
    pod = {"metadata": {"name": "p", "annotations": {}},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"volcano.sh/vgpu-number": 1,
                                                                          "volcano.sh/vgpu-memory": 8000}}}]}}
    r = requests.vgpu_request(pod, "volcano")
    assert r is not None
    placed: list[dict[str, Any]] = []
    for _ in range(4):
        got = vgpu.fit(r, node.volcano, inv.usage(placed), policy="binpack")
        assert isinstance(got, vgpu.Allocation)
        placed.append({"metadata": {"annotations": vgpu.annotations(got, node=node.name, now=0)}, "spec": {}})
    assert len({p["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"].split(",")[0] for p in placed}) == 4
    assert vgpu.fit(r, node.volcano, inv.usage(placed)) == "not enough gpu fitted on this node"
    # the HAMi registration names the same cards: a HAMi pod sees the Volcano pods' memory
    h = requests.vgpu_request({"metadata": {}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000}}}]}}, "hami")
    assert h is not None and isinstance(vgpu.fit(h, node.hami, inv.usage(placed)), str)
