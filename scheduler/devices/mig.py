"""MIG placement on one node: NVIDIA's "mixed" strategy (`nvidia.com/mig-<profile>` counted from the node's
allocatable minus what pods hold) and HAMi's dynamic MIG (the smallest allowed profile whose memory covers the
request, on a free, non-overlapping placement of a GPU in MIG mode).

Called by the deviceshare plugin per (task, node): `fit_mixed(requests.mig_requests(pod), inventory, usage)` and,
for a pod with `nvidia.com/vgpu-mode: mig`, `fit_dynamic(request, gpus, usage)` then `annotations(allocation)`.
Semantics and tables: spec/devices.md §2.1 (profiles, NVML MiB, placements), §2.2 (mixed), §2.3 (dynamic MIG and
`hami.io/vgpu-mig-allocations`); profile tables and allowlists from `policies.admission.AdmissionConfig().devices`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from lahar.policies.admission import AdmissionConfig, MIGConfig
from lahar.scheduler.devices import vgpu
from lahar.scheduler.devices.inventory import MIGPlacement, MIGProfileInfo, NodeInventory, Usage, VGPUCard
from lahar.scheduler.devices.requests import MIGRequest, VGPUPodRequest

__all__ = [
    "CARD_MIG_TOPOLOGY_INFEASIBLE",
    "MIG_ALLOCATIONS_ANNOTATION",
    "MIGAllocation",
    "MIGInstance",
    "annotations",
    "choose_profile",
    "fit_dynamic",
    "fit_mixed",
    "free_mixed",
    "free_placement",
    "choose_instances",
    "free_instances",
    "instances_annotation",
    "mixed_instances",
    "mixed_request",
    "profiles_for",
]

MIG_ALLOCATIONS_ANNOTATION = "hami.io/vgpu-mig-allocations"
CARD_MIG_TOPOLOGY_INFEASIBLE = "CardMigTopologyInfeasible"

# Legal placements (start, size) per profile, in the order of the profile tables of policies.admission
# (1g, 1g+me, 1g (double memory), 2g, 3g, 4g, 7g): spec/devices.md §2.1, go-nvml mocks.
_A100 = ((tuple(range(7)), 1), (tuple(range(7)), 1), ((0, 2, 4, 6), 2), ((0, 2, 4), 2), ((0, 4), 4), ((0,), 4),
         ((0,), 8))
_HOPPER = ((tuple(range(7)), 1), (tuple(range(7)), 1), (tuple(range(7)), 1), ((0, 2, 4), 2), ((0, 4), 3), ((0,), 4),
           ((0,), 7))
PLACEMENTS: dict[str, tuple[tuple[tuple[int, ...], int], ...]] = {
    "A100-40GB": _A100, "A100-80GB": _A100, "H100-80GB": _HOPPER, "H200": _HOPPER,
}


# --- mixed strategy -------------------------------------------------------------------------------------------------


def mixed_request(requests: Sequence[MIGRequest]) -> dict[str, int]:
    """{profile: devices} the pod holds: max(largest init container, sum of app containers) per profile."""
    out: dict[str, int] = {}
    init: dict[str, int] = {}
    for r in requests:
        if r.init:
            init[r.profile] = max(init.get(r.profile, 0), r.count)
        else:
            out[r.profile] = out.get(r.profile, 0) + r.count
    for p, n in init.items():
        out[p] = max(out.get(p, 0), n)
    return out


def free_mixed(capacity: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    return {p: max(n - used.get(p, 0), 0) for p, n in capacity.items()}


def fit_mixed(requests: Sequence[MIGRequest], inventory: NodeInventory, usage: Usage, *,
              prefix: str = "nvidia.com/mig-") -> str | None:
    """None when every `nvidia.com/mig-<profile>` the pod asks for is free on the node, else the kube-scheduler
    style reason naming the first short resource ("Insufficient nvidia.com/mig-1g.10gb")."""
    free = free_mixed(inventory.mig_capacity, usage.mig)
    for profile, n in sorted(mixed_request(requests).items()):
        if free.get(profile, 0) < n:
            return f"Insufficient {prefix}{profile.replace('+', '.')}"
    return None


def mixed_instances(inventory: NodeInventory) -> dict[str, list[tuple[str, int | None]]]:
    """{profile: [(instance id, NUMA node)]} of the static MIG devices in the GPUs' geometries (for NUMA hints and
    the record of which instance a pod was counted on). An instance id is "<GPU index>/<ordinal of the profile on
    that GPU>": node-agnostic and stable while the geometry is."""
    out: dict[str, list[tuple[str, int | None]]] = {}
    for g in inventory.gpus:
        for profile, n in g.mig_devices:
            out.setdefault(profile, []).extend((f"{g.index}/{k}", g.numa) for k in range(n))
    return out


def free_instances(instances: Sequence[tuple[str, int | None]], recorded: Collection[str], used: int,
                   taken: Collection[str] = ()) -> list[tuple[str, int | None]]:
    """The instances of one profile still free: minus those pods were recorded on (`lahar.sh/mig-instances`) and
    this session's `taken`; the `used` devices no record places (pods bound by others) are assumed to be the last
    remaining ones, as the device plugin hands out instances in order."""
    free = [i for i in instances if i[0] not in recorded and i[0] not in taken]
    unrecorded = max(used - sum(1 for i in instances if i[0] in recorded), 0)
    return free[:max(len(free) - unrecorded, 0)]


def choose_instances(free: Sequence[tuple[str, int | None]], count: int,
                     numa_nodes: Collection[int] | None) -> list[str] | None:
    """`count` instance ids from `free`, those on `numa_nodes` (the merged hint) first, in order; None if short."""
    if len(free) < count:
        return None
    inside = [i for i, numa in free if numa_nodes is None or (numa is not None and numa in numa_nodes)]
    chosen = set(inside)
    return (inside + [i for i, _ in free if i not in chosen])[:count]


def instances_annotation(chosen: Mapping[str, Sequence[str]]) -> str:
    """`lahar.sh/mig-instances` (`inventory.MIG_INSTANCES_ANNOTATION`): {"<profile>": ["<GPU>/<ordinal>", ...]}."""
    return json.dumps({p: list(ids) for p, ids in sorted(chosen.items())}, separators=(",", ":"))


# --- dynamic MIG ----------------------------------------------------------------------------------------------------


def profiles_for(product: str, *, config: MIGConfig | None = None, allowed_only: bool = True) -> tuple[
        MIGProfileInfo, ...]:
    """The MIG profiles of the GPU model `product` names (e.g. "NVIDIA A100-SXM4-80GB"), smallest first (memory,
    then slices), with core = ceil(SMs × 100 / largest SMs) as HAMi computes it; () for an unknown model."""
    config = config or AdmissionConfig().devices.mig
    model = config.model_for(product)
    if model is None:
        return ()
    shapes = PLACEMENTS.get(model.name, ())
    largest = max((p.sms for p in model.profiles), default=0)
    out = []
    for k, p in enumerate(model.profiles):
        if allowed_only and p.name not in model.allowed:
            continue
        starts, size = shapes[k] if k < len(shapes) else ((0,), p.slices)
        core = math.ceil(p.sms * 100 / largest) if largest else 0
        out.append(MIGProfileInfo(p.name, p.memory_mib, core, p.slices, tuple((s, size) for s in starts),
                                  p.max_instances))
    return tuple(sorted(out, key=lambda p: (p.memory_mib, p.slices)))


def choose_profile(memory_mib: int, profiles: Sequence[MIGProfileInfo]) -> MIGProfileInfo | None:
    """The smallest profile (memory, then slices) whose memory covers the request (`>=`: HAMi issue #1074)."""
    for p in sorted(profiles, key=lambda p: (p.memory_mib, p.slices)):
        if p.memory_mib >= memory_mib:
            return p
    return None


def free_placement(profile: MIGProfileInfo, reserved: Sequence[MIGPlacement]) -> tuple[int, int] | None:
    """A legal placement of `profile` overlapping no reserved one: `1g.*` and `3g.*` from the highest start down,
    the others from the lowest start up (HAMi `selectMigCandidate`); None when none is free or the GPU already
    holds the profile's maximum instance count."""
    if profile.max_instances and sum(1 for r in reserved if r.profile == profile.name) >= profile.max_instances:
        return None
    placements = sorted(profile.placements, reverse=profile.name.startswith(("1g.", "3g.")))
    for start, size in placements:
        if not any(r.overlaps(start, size) for r in reserved):
            return start, size
    return None


@dataclass(frozen=True)
class MIGInstance:
    """One MIG instance reserved for a container: `device_index` is its position in the container's devices."""

    container: int
    device_index: int
    gpu_uuid: str
    gpu_index: int
    profile: str
    start: int
    size: int
    memory_mib: int
    core: int


@dataclass(frozen=True)
class MIGAllocation:
    instances: tuple[MIGInstance, ...]
    container_count: int


def _gpu_profiles(card: VGPUCard, config: MIGConfig | None) -> tuple[MIGProfileInfo, ...]:
    if card.mig_profiles:
        return tuple(sorted(card.mig_profiles, key=lambda p: (p.memory_mib, p.slices)))
    return profiles_for(card.type, config=config)


def fit_dynamic(request: VGPUPodRequest, cards: Sequence[VGPUCard], usage: Usage, *, policy: str = vgpu.BINPACK,
                config: MIGConfig | None = None) -> MIGAllocation | str:
    """HAMi dynamic MIG: per container and unit of its count, the first card (in `policy` order) on which the
    smallest allowed profile covering the container's memory (gpumem, or percentage of the card's memory;
    count-only → 100%) has a free placement; several instances may come from one card. Cards must be healthy,
    in `mig` mode, pass the pod's type/UUID filters and have the cores left. Profiles come from the card's
    registration (`migProfiles`) or, when it has none, from the tables for its model.

    `policy` binpack visits the cards with the most reserved slices first (keeps whole GPUs free), spread the
    fewest; ties by index. The reason on failure is HAMi's "CardMigTopologyInfeasible" with details."""
    mig_cards = [c for c in cards if c.mode == "mig" and c.healthy and request.filters.allows(c.type, c.uuid)]
    if not mig_cards:
        return f"{CARD_MIG_TOPOLOGY_INFEASIBLE}: no healthy GPU in MIG mode matches the pod"
    reserved: dict[str, list[MIGPlacement]] = {c.uuid: [p for p in usage.mig_placements if p.gpu_uuid == c.uuid]
                                              for c in mig_cards}
    cores_used = {c.uuid: usage.card(c.uuid).cores for c in mig_cards}
    instances: list[MIGInstance] = []
    for req in request.containers:
        for k in range(req.count):
            def slices(c: VGPUCard) -> int:
                return sum(p.size for p in reserved[c.uuid])
            order = sorted(mig_cards, key=lambda c: (-slices(c) if policy == vgpu.BINPACK else slices(c), c.index))
            found = None
            for card in order:
                profiles = _gpu_profiles(card, config)
                largest = max((p.memory_mib for p in profiles), default=0)
                if req.memory_percentage == 100 and not req.memory_mib:
                    memory = largest  # a whole-card request (count-only, or 100%) takes the largest profile
                else:
                    memory = req.memory_on(card.memory_mib or largest)
                if req.cores and cores_used[card.uuid] + min(req.cores, 100) > card.cores:
                    continue
                for profile in profiles:
                    if profile.memory_mib < memory:
                        continue
                    slot = free_placement(profile, reserved[card.uuid])
                    if slot is not None:
                        found = (card, profile, slot)
                        break
                if found:
                    break
            if found is None:
                return (f"{CARD_MIG_TOPOLOGY_INFEASIBLE}: no free MIG placement for container "
                        f"{req.name or req.container} ({k + 1} of {req.count})")
            card, profile, (start, size) = found
            reserved[card.uuid].append(MIGPlacement(card.uuid, profile.name, start, size))
            cores_used[card.uuid] += profile.core
            instances.append(MIGInstance(req.container, k, card.uuid, card.index, profile.name, start, size,
                                         profile.memory_mib, profile.core))
    return MIGAllocation(tuple(instances), request.container_count or
                         (max((i.container for i in instances), default=-1) + 1))


def annotations(allocation: MIGAllocation, *, node: str, now: int) -> dict[str, str]:
    """HAMi's annotations for a dynamic MIG allocation: `hami.io/vgpu-mig-allocations` (JSON list of
    {containerIndex, deviceIndex, gpuUUID, profile, placement{start,size}}) and the usual device list, which keeps
    the parent GPU UUID with the profile's memory and cores (devices.md §2.3)."""
    entries = [{"containerIndex": i.container, "deviceIndex": i.device_index, "gpuUUID": i.gpu_uuid,
                "profile": i.profile, "placement": {"start": i.start, "size": i.size}} for i in allocation.instances]
    by_container: dict[int, list[vgpu.ContainerDevice]] = {}
    for i in allocation.instances:
        by_container.setdefault(i.container, []).append(vgpu.ContainerDevice(i.gpu_uuid, i.gpu_index, i.memory_mib,
                                                                              i.core))
    alloc = vgpu.Allocation("hami", tuple((c, tuple(d)) for c, d in sorted(by_container.items())),
                            allocation.container_count)
    out = vgpu.annotations(alloc, node=node, now=now)
    out[MIG_ALLOCATIONS_ANNOTATION] = json.dumps(entries, separators=(",", ":"))
    return out
