"""Koordinator GPU shares on one node: which card a pod asking for part of a card (`koordinator.sh/gpu-memory-ratio`
below 100, `koordinator.sh/gpu-memory`, `koordinator.sh/gpu-core`) gets, and the `device-allocated` entry it writes.

Called by the deviceshare plugin per (task, node): `fit(request, inventory.gpus, usage, policy=...)` with the pod's
`requests.GPUShareRequest`; occupancy is `inventory.card_usage` — the same model HAMi's and Volcano's vGPU slices are
counted in, so a share never lands on a card another vocabulary filled, and a card is never overcommitted.
Semantics: koordinator `pkg/scheduler/plugins/deviceshare` (per-card fit of gpu-core / gpu-memory-ratio /
gpu-memory, `fillGPUTotalMem`), spec/devices.md §3.1–3.2 (annotation format).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from lahar.scheduler.devices.inventory import GPU, Usage, card_usage
from lahar.scheduler.devices.requests import GPUShareRequest

__all__ = ["INSUFFICIENT_GPU_DEVICES", "CardGrant", "allocated_entry", "candidates", "fit", "free_on"]

INSUFFICIENT_GPU_DEVICES = "Insufficient GPU Devices"   # Koordinator's ErrInsufficientGPUDevices
FULL = 100


@dataclass(frozen=True)
class CardGrant:
    """The card a share got: its minor and UUID, and what is charged on it (cores %, memory % and MiB)."""

    minor: int
    uuid: str
    core: int
    ratio: int
    memory_mib: int
    numa: int | None = None
    score: float = 0.0


def free_on(gpu: GPU, usage: Usage) -> tuple[int, int, int]:
    """(free cores %, free memory %, free MiB) of `gpu`; all 0 when it is held whole or in MIG mode."""
    if gpu.index in usage.gpus or gpu.mig_enabled or not gpu.healthy:
        return 0, 0, 0
    used = card_usage(gpu, usage)
    if gpu.memory_mib:
        used_mib = used.memory_on(gpu.memory_mib)
        free_mib = max(gpu.memory_mib - used_mib, 0)
        free_ratio = max(FULL - -(-used_mib * FULL // gpu.memory_mib), 0)   # memory % taken, rounded up
    else:
        free_mib, free_ratio = 0, max(FULL - used.ratio, 0)
    return max(FULL - used.cores, 0), free_ratio, free_mib


def _why(request: GPUShareRequest, gpu: GPU, usage: Usage) -> str:
    """Why `gpu` cannot take the share ("" when it can)."""
    if not gpu.healthy:
        return "unhealthy"
    if gpu.mig_enabled:
        return "mig"
    if gpu.index in usage.gpus:
        return "held whole"
    free_core, free_ratio, free_mib = free_on(gpu, usage)
    if request.core > free_core or (free_core == 0 and card_usage(gpu, usage).num):
        return "gpu-core"   # HAMi's rule too: a card whose cores are all held (an exclusive slice) takes no share
    if gpu.memory_mib:
        if request.memory_on(gpu.memory_mib) > free_mib:
            return "gpu-memory"
    elif request.ratio is None or request.ratio > free_ratio:
        return "gpu-memory-ratio"
    return ""


def candidates(request: GPUShareRequest, gpus: Sequence[GPU], usage: Usage) -> list[int]:
    """The minors of the cards that can take the share now (the NUMA hint's available devices)."""
    return [g.index for g in gpus if not _why(request, g, usage)]


def fit(request: GPUShareRequest, gpus: Sequence[GPU], usage: Usage, *, policy: str = "binpack",
        numa_nodes: Collection[int] | None = None) -> CardGrant | str:
    """The card for `request` among `gpus`, or why none can take it (a str).

    binpack (lahar's deviceshare default, Volcano's `deviceshare.SchedulePolicy`): the fullest card that still fits,
    so shares fill one card before opening another; spread (Koordinator's default LeastAllocated): the emptiest.
    Ties go to the lowest minor. `numa_nodes`: cards on those NUMA nodes first (the merged topology hint), any card
    when none of them fits. `score` is the card's memory use after the share, in percent (spread: 100 minus it).
    """
    reasons: dict[str, int] = {}
    fitting: list[GPU] = []
    for g in sorted(gpus, key=lambda g: g.index):
        why = _why(request, g, usage)
        if why:
            reasons[why] = reasons.get(why, 0) + 1
        else:
            fitting.append(g)
    if not fitting:
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        return f"{INSUFFICIENT_GPU_DEVICES}: no card has the share free" + (f" ({detail})" if detail else "")
    if numa_nodes is not None:
        aligned = [g for g in fitting if g.numa is None or g.numa in numa_nodes]
        fitting = aligned or fitting

    def used_pct(g: GPU) -> int:
        return FULL - free_on(g, usage)[1]

    spread = policy == "spread"
    best = min(fitting, key=lambda g: (used_pct(g) if spread else -used_pct(g), g.index))
    memory = request.memory_on(best.memory_mib) if best.memory_mib else 0
    ratio = request.ratio_on(best.memory_mib)
    after = min(used_pct(best) + ratio, FULL)
    return CardGrant(best.index, best.uuid, request.core, ratio, memory, best.numa,
                     float(FULL - after if spread else after))


def allocated_entry(grant: CardGrant) -> dict[str, object]:
    """The grant as one `scheduling.koordinator.sh/device-allocated` GPU entry (Koordinator's shape; memory in
    bytes and the ratio both filled, as `fillGPUTotalMem` leaves them)."""
    resources: dict[str, str] = {"koordinator.sh/gpu-core": str(grant.core)}
    if grant.memory_mib:
        resources["koordinator.sh/gpu-memory"] = f"{grant.memory_mib}Mi"
    resources["koordinator.sh/gpu-memory-ratio"] = str(grant.ratio)
    entry: dict[str, object] = {"minor": grant.minor, "resources": resources}
    if grant.uuid:
        entry["id"] = grant.uuid
    return entry
