"""Koordinator GPU shares: reading `koordinator.sh/gpu-memory-ratio` / `gpu-memory` / `gpu-core` below a card
(`requests.gpu_share`), the per-card fit (`gpushares.fit`), and the one occupancy model shared with HAMi's and
Volcano's vGPU slices (`inventory.card_usage`, `inventory.usage`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.scheduler.devices import gpushares, inventory, requests
from lahar.scheduler.devices.inventory import GPU, CardUsage, Usage
from lahar.scheduler.devices.requests import GPUShareRequest

MiB80 = 81920


def _pod(limits: dict[str, Any], *, annotations: dict[str, str] | None = None,
         phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits, "requests": {}}}]},
            "status": {"phase": phase}}


PARSE = [
    ("ratio-50", {"koordinator.sh/gpu-memory-ratio": 50}, GPUShareRequest(0, 50, 0), 0, ""),
    ("ratio-and-core", {"koordinator.sh/gpu-memory-ratio": 30, "koordinator.sh/gpu-core": 20},
     GPUShareRequest(20, 30, 0), 0, ""),
    ("memory-bytes", {"koordinator.sh/gpu-memory": "8Gi"}, GPUShareRequest(0, None, 8192), 0, ""),
    ("ratio-wins-over-bytes", {"koordinator.sh/gpu-memory-ratio": 25, "koordinator.sh/gpu-memory": "8Gi"},
     GPUShareRequest(0, 25, 0), 0, ""),
    ("koordinator-gpu-50", {"koordinator.sh/gpu": 50}, GPUShareRequest(50, 50, 0), 0, ""),
    ("ratio-100-is-a-whole-card", {"koordinator.sh/gpu-memory-ratio": 100}, None, 1, ""),
    ("ratio-200-is-two-cards", {"koordinator.sh/gpu-memory-ratio": 200, "koordinator.sh/gpu-core": 200}, None, 2,
     ""),
    ("ratio-150-is-refused", {"koordinator.sh/gpu-memory-ratio": 150}, None, 0, "must be a multiple of 100"),
    ("core-alone-is-refused", {"koordinator.sh/gpu-core": 50}, None, 0, "needs koordinator.sh/gpu-memory"),
    ("nothing", {"cpu": "1"}, None, 0, ""),
]


@pytest.mark.parametrize(("limits", "share", "whole", "error"), [x[1:] for x in PARSE], ids=[x[0] for x in PARSE])
def test_gpu_share_reads_koordinator_names(limits: dict[str, Any], share: GPUShareRequest | None, whole: int,
                                           error: str) -> None:
    got, got_whole, got_error = requests.gpu_share(_pod(limits))
    assert (got, got_whole) == (share, whole)
    assert (error in got_error) if error else not got_error


def test_parse_counts_ratio_multiples_as_whole_gpus_and_lists_errors() -> None:
    assert requests.parse(_pod({"koordinator.sh/gpu-memory-ratio": 200})).gpus == 2
    req = requests.parse(_pod({"koordinator.sh/gpu-memory-ratio": 50}))
    assert (req.gpus, req.share, req.empty) == (0, GPUShareRequest(0, 50, 0), False)
    assert "koordinator.sh/gpu-memory-ratio: 150" in requests.parse(_pod({"koordinator.sh/gpu-memory-ratio": 150}
                                                                          )).errors[0]


def _gpus(n: int = 2, *, memory: int = MiB80) -> list[GPU]:
    return [GPU(i, uuid=f"GPU-{i}", memory_mib=memory, numa=i % 2) for i in range(n)]


def _usage(**cards: CardUsage) -> Usage:
    return Usage(cards={k.replace("_", "-"): v for k, v in cards.items()})


HALF = CardUsage(1, MiB80 // 2, 0)
FIT = [
    # (id, request, usage, policy, numa, expected minor | reason substring)
    ("empty-node-lowest-minor", GPUShareRequest(0, 50), Usage(), "binpack", None, 0),
    ("binpack-fills-the-half-card", GPUShareRequest(0, 50), _usage(GPU_1=HALF), "binpack", None, 1),
    ("spread-takes-the-empty-card", GPUShareRequest(0, 50), _usage(GPU_0=HALF), "spread", None, 1),
    ("60-does-not-fit-beside-50", GPUShareRequest(0, 60), _usage(GPU_0=HALF), "binpack", None, 1),
    ("full-card-skipped", GPUShareRequest(0, 50), _usage(GPU_0=HALF.add(HALF)), "binpack", None, 1),
    ("cores-count", GPUShareRequest(60, 10), _usage(GPU_0=CardUsage(1, 1024, 50)), "binpack", None, 1),
    ("whole-held-card-skipped", GPUShareRequest(0, 10), Usage(gpus=frozenset({0})), "binpack", None, 1),
    ("bytes-request", GPUShareRequest(0, None, 40960), _usage(GPU_0=CardUsage(1, 40961, 0)), "binpack", None, 1),
    ("share-recorded-by-minor", GPUShareRequest(0, 60), Usage(cards={"minor:0": CardUsage(1, 0, 0, ratio=50)}),
     "binpack", None, 1),
    ("numa-hint-first", GPUShareRequest(0, 10), Usage(), "binpack", {1}, 1),
    ("numa-hint-falls-back", GPUShareRequest(0, 60), _usage(GPU_1=HALF), "binpack", {1}, 0),
    ("nothing-fits", GPUShareRequest(0, 60), _usage(GPU_0=HALF, GPU_1=HALF), "binpack", None,
     "Insufficient GPU Devices: no card has the share free (2 gpu-memory)"),
    ("hami-exclusive-slice-blocks-the-card", GPUShareRequest(10, 10), _usage(GPU_0=CardUsage(1, 1024, 100)),
     "binpack", None, 1),
    ("all-cores-held-blocks-a-memory-only-share", GPUShareRequest(0, 10), _usage(GPU_0=CardUsage(1, 1024, 100)),
     "binpack", None, 1),
]


@pytest.mark.parametrize(("request_", "usage", "policy", "numa", "expected"), [x[1:] for x in FIT],
                         ids=[x[0] for x in FIT])
def test_fit_table(request_: GPUShareRequest, usage: Usage, policy: str, numa: set[int] | None,
                   expected: int | str) -> None:
    got = gpushares.fit(request_, _gpus(), usage, policy=policy, numa_nodes=numa)
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert not isinstance(got, str) and got.minor == expected


def test_grant_entry_has_koordinators_shape() -> None:
    got = gpushares.fit(GPUShareRequest(20, 50), _gpus(1), Usage())
    assert not isinstance(got, str)
    assert gpushares.allocated_entry(got) == {"minor": 0, "id": "GPU-0", "resources": {
        "koordinator.sh/gpu-core": "20", "koordinator.sh/gpu-memory": "40960Mi",
        "koordinator.sh/gpu-memory-ratio": "50"}}


def _allocated(*entries: dict[str, Any]) -> dict[str, str]:
    return {"scheduling.koordinator.sh/device-allocated": json.dumps({"gpu": list(entries)})}


def test_usage_counts_shares_by_uuid_or_minor_and_whole_cards_apart() -> None:
    pods = [
        _pod({}, annotations=_allocated({"minor": 0, "id": "GPU-0", "resources": {
            "koordinator.sh/gpu-core": "0", "koordinator.sh/gpu-memory": "40960Mi",
            "koordinator.sh/gpu-memory-ratio": "50"}})),
        _pod({}, annotations=_allocated({"minor": 1, "resources": {"koordinator.sh/gpu-memory-ratio": "30"}})),
        _pod({}, annotations=_allocated({"minor": 2, "resources": {"koordinator.sh/gpu-memory-ratio": "100"}})),
        _pod({}, annotations=_allocated({"minor": 3})),
        _pod({}, annotations=_allocated({"minor": 1, "resources": {"koordinator.sh/gpu-memory-ratio": "30"}}),
             phase="Succeeded"),
    ]
    u = inventory.usage(pods)
    assert u.gpus == {2, 3}
    gpus = _gpus(4)
    assert inventory.card_usage(gpus[0], u) == CardUsage(1, 40960, 0)
    assert inventory.card_usage(gpus[1], u) == CardUsage(1, 0, 0, ratio=30)
    assert inventory.card_usage(gpus[1], u).memory_on(MiB80) == MiB80 * 30 // 100


def test_one_occupancy_model_for_hami_slices_and_koordinator_shares() -> None:
    """A HAMi slice on a card counts against a Koordinator share there, the share against the next HAMi slice,
    and neither card is then free for a whole GPU."""
    hami = _pod({}, annotations={"hami.io/vgpu-devices-allocated": f"GPU-0,NVIDIA,{MiB80 // 2},0:;"})
    koord = _pod({}, annotations=_allocated({"minor": 1, "id": "GPU-1", "resources": {
        "koordinator.sh/gpu-memory": f"{MiB80 * 7 // 10}Mi", "koordinator.sh/gpu-memory-ratio": "70"}}))
    u = inventory.usage([hami, koord])
    got = gpushares.fit(GPUShareRequest(0, 60), _gpus(), u)
    assert isinstance(got, str)
    assert u.card("GPU-1") == CardUsage(1, MiB80 * 7 // 10, 0)   # what HAMi's and Volcano's fit read
    inv = inventory.NodeInventory("n", gpus=tuple(_gpus()))
    assert inv.free_gpus(u) == []


def test_a_card_held_whole_through_koordinator_takes_no_vgpu_slice() -> None:
    from lahar.scheduler.devices import vgpu
    from lahar.scheduler.devices.inventory import VGPUCard

    cards = [VGPUCard("hami", f"GPU-{i}", i, 10, MiB80) for i in range(2)]
    whole = _pod({}, annotations=_allocated({"minor": 0, "resources": {"koordinator.sh/gpu-memory-ratio": "100"}}))
    pod = _pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024})
    request = requests.vgpu_request(pod, "hami")
    assert request is not None
    got = vgpu.fit(request, cards, inventory.usage([whole]))
    assert not isinstance(got, str) and got.uuids() == ["GPU-1"]
    assert isinstance(vgpu.fit(request, cards[:1], inventory.usage([whole])), str)
