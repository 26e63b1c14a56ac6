"""vGPU placement on one node: which cards (and how much memory and how many cores of each) a pod's containers get,
with HAMi's and Volcano's fit rules, their binpack / spread orders and scores, and the pod annotations they write.

Called by the deviceshare plugin per (task, node): `fit(request, cards, usage, policy=...)` with the pod's
`requests.VGPUPodRequest`, the node's `inventory.VGPUCard`s and `inventory.Usage`; on success it binds
`annotations(allocation, node=..., now=...)`. Semantics: spec/devices.md §1.5 (annotations), §1.6 (filters),
§1.7 (fit), §1.8 (scoring). Cards in `mig` mode are left to `scheduler.devices.mig` (dynamic MIG).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lahar.scheduler.devices.inventory import CardUsage, Usage, VGPUCard, slice_usage
from lahar.scheduler.devices.requests import VGPUPodRequest, VGPURequest

__all__ = [
    "BINPACK",
    "MUTEX",
    "SPREAD",
    "Allocation",
    "ContainerDevice",
    "annotations",
    "device_list",
    "device_score",
    "fit",
    "node_score",
]

BINPACK = "binpack"
SPREAD = "spread"
MUTEX = "mutex"
DEVICE_TYPE = "NVIDIA"
_HAMI_POLICIES = (BINPACK, SPREAD, MUTEX)

# reasons (upstream's words where they exist)
NO_ENOUGH_CARDS = "no enough gpu cards on node {node}"            # Volcano
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"               # HAMi
NOT_ENOUGH_FITTED = "not enough gpu fitted on this node"          # Volcano
CARD_INSUFFICIENT = "CardInsufficient"                            # HAMi (no card passed every check)
MIG_REQUIRED = "pod required MIG but the node is not in MIG mode"  # Volcano
MODE_MISMATCH = "vgpu-mode {mode!r} does not match the node's mode {node_mode!r}"
DYNAMIC_MIG = "vgpu-mode mig is placed by dynamic MIG (scheduler.devices.mig.fit_dynamic), not by vGPU slicing"
NO_SHARED_CARDS = "no vGPU card in hami-core mode on the node"


@dataclass(frozen=True)
class ContainerDevice:
    """One card given to one container: the card's UUID and index, the MiB and cores charged on it."""

    uuid: str
    index: int
    memory_mib: int
    cores: int
    numa: int | None = None
    type: str = DEVICE_TYPE


@dataclass(frozen=True)
class Allocation:
    """A pod's vGPU allocation on a node. `containers`: (container index, devices) for containers with devices;
    `score`: higher is better under the node policy (Volcano: the sum of GPUScore; HAMi: its node score for
    binpack, 30 minus it for spread); `raw_score`: upstream's number."""

    vendor: str
    containers: tuple[tuple[int, tuple[ContainerDevice, ...]], ...]
    container_count: int
    score: float = 0.0
    raw_score: float = 0.0

    def devices(self) -> list[ContainerDevice]:
        return [d for _, devs in self.containers for d in devs]

    def uuids(self) -> list[str]:
        return [d.uuid for d in self.devices()]


# --- scores -------------------------------------------------------------------------------------------------------


def device_score(card: VGPUCard, used: CardUsage, *, count: int, cores: int, memory_mib: int,
                 weights: tuple[float, float, float] = (1, 1, 1)) -> float:
    """HAMi `ComputeScore`: 10 × (wSlot·(count+used)/slots + wCore·(cores+usedCores)/totalCores
    + wMem·(memory+usedMem)/totalMem)."""
    w_slot, w_core, w_mem = weights
    slot = (count + used.num) / card.count if card.count else 0.0
    core = (cores + used.cores) / card.cores if card.cores else 0.0
    mem = (memory_mib + used.memory_mib) / card.memory_mib if card.memory_mib else 0.0
    return 10 * (w_slot * slot + w_core * core + w_mem * mem)


def node_score(cards: Sequence[VGPUCard], usage: Usage) -> float:
    """HAMi `ComputeDefaultScore` on the node's usage before the pod: 10 × (used/slots + usedCores/cores +
    usedMem/mem) summed over the node's cards (binpack prefers the highest, spread the lowest)."""
    slots = sum(c.count for c in cards)
    cores = sum(c.cores for c in cards)
    mem = sum(c.memory_mib for c in cards)
    used = [usage.card(c.uuid) for c in cards]
    total = 0.0
    if slots:
        total += sum(u.num for u in used) / slots
    if cores:
        total += sum(u.cores for u in used) / cores
    if mem:
        total += sum(u.memory_mib for u in used) / mem
    return 10 * total


def _volcano_gpu_score(policy: str, card: VGPUCard, after: CardUsage) -> float:
    """Volcano `GPUScore`, evaluated after the tentative add."""
    if policy == BINPACK:
        return 100 * after.memory_mib / card.memory_mib if card.memory_mib else 0.0
    if policy == SPREAD:
        return 100.0 if after.num == 1 else 0.0
    return 0.0


# --- ordering -----------------------------------------------------------------------------------------------------


def _hami_order(cards: list[VGPUCard], usage: Mapping[str, CardUsage], request: VGPUPodRequest, policy: str,
                weights: tuple[float, float, float]) -> list[VGPUCard]:
    """Cards in the order HAMi's Fit visits them: sorted by `DeviceUsageList.Less`, walked from the end.

    binpack: NUMA descending, then score ascending; spread: NUMA ascending, then score descending; mutex: idle
    cards at the tail (so taken first). Walking from the end: binpack takes the fullest card of the lowest NUMA
    node, spread the emptiest card of the highest NUMA node (upstream's orientation, kept)."""
    count = sum(c.count for c in request.containers)
    cores = sum(c.cores for c in request.containers)

    def score(card: VGPUCard) -> float:
        mem = sum(c.memory_on(card.memory_mib) for c in request.containers)
        return device_score(card, usage.get(card.uuid, CardUsage()), count=count, cores=cores, memory_mib=mem,
                            weights=weights)

    numa = {c.uuid: c.numa or 0 for c in cards}
    if policy == MUTEX:
        ordered = sorted(cards, key=lambda c: usage.get(c.uuid, CardUsage()).num == 0)
    elif policy == BINPACK:
        ordered = sorted(cards, key=lambda c: (-numa[c.uuid], score(c)))
    else:
        ordered = sorted(cards, key=lambda c: (numa[c.uuid], -score(c)))
    return ordered[::-1]


def _volcano_order(cards: list[VGPUCard], usage: Mapping[str, CardUsage], policy: str) -> list[VGPUCard]:
    """Volcano: reverse index order; binpack: most used memory first; spread: fewest users first (stable)."""
    ordered = sorted(cards, key=lambda c: c.index, reverse=True)
    if policy == BINPACK:
        return sorted(ordered, key=lambda c: -usage.get(c.uuid, CardUsage()).memory_mib)
    if policy == SPREAD:
        return sorted(ordered, key=lambda c: usage.get(c.uuid, CardUsage()).num)
    return ordered


# --- fit ----------------------------------------------------------------------------------------------------------


def _mode_ok(request: VGPUPodRequest, card: VGPUCard) -> bool:
    if not request.mode:
        return True
    if request.vendor == "hami":
        return card.mode in request.mode  # HAMi: the node device's mode is a substring of the annotation
    return card.mode == request.mode


def _card_check(req: VGPURequest, request: VGPUPodRequest, card: VGPUCard, used: CardUsage) -> str:
    """Why `card` cannot take one device of `req` ("" when it can), in the vendor's order of checks."""
    if not card.healthy:
        return "unhealthy"
    if not _mode_ok(request, card):
        return "mode"
    if not request.filters.type_ok(card.type):
        return "type"
    if not request.filters.uuid_ok(card.uuid):
        return "uuid"
    if card.count <= used.num:
        return "slots"
    if request.podgroup_spread and request.group and request.group in used.groups:
        return "podgroup"
    if card.memory_mib - used.memory_mib < req.memory_on(card.memory_mib):
        return "memory"
    if used.cores + req.cores > card.cores:
        return "cores"
    if req.cores >= 100 and used.num > 0:
        return "exclusive"
    if used.cores >= card.cores and req.cores == 0:
        return "cores-full"
    return ""


def _policy(request: VGPUPodRequest, policy: str | None) -> str:
    if request.vendor == "hami":
        chain = [p.strip() for p in (request.gpu_policy or policy or SPREAD).split(",")]
        return next((p for p in chain if p in _HAMI_POLICIES), SPREAD)
    return policy or ""


def fit(request: VGPUPodRequest, cards: Sequence[VGPUCard], usage: Usage, *, policy: str | None = None,
        node_policy: str | None = None, weights: tuple[float, float, float] = (1, 1, 1),
        node: str = "") -> Allocation | str:
    """Place every container of `request` on `cards` (one vendor's registration), or say why not (a str).

    Each unit of a container's count is a distinct card. App containers are placed one after another, each
    seeing the earlier ones' charges; init containers are placed against the node's usage alone (they run
    before the app containers). `policy` is the GPU policy (HAMi: `hami.io/gpu-scheduler-policy` of the pod wins;
    default spread; Volcano: `deviceshare.SchedulePolicy`, default none = reverse index order); `node_policy`
    HAMi's node policy (pod annotation wins; default binpack) for the score.
    """
    gpu_policy = _policy(request, policy)
    vendor = request.vendor
    usable = [c for c in cards if c.mode != "mig"]
    if request.mode == "mig":
        return MIG_REQUIRED if not any(c.mode == "mig" for c in cards) else DYNAMIC_MIG
    if vendor == "volcano" and request.mode and cards and cards[-1].mode != request.mode:
        return MODE_MISMATCH.format(mode=request.mode, node_mode=cards[-1].mode)
    if not usable:
        return NO_SHARED_CARDS
    base = {c.uuid: slice_usage(c, usage) for c in usable}
    for req in request.containers:
        typed = [c for c in usable if request.filters.type_ok(c.type)] if vendor == "hami" else usable
        if req.count > len(typed):
            return NODE_INSUFFICIENT_DEVICE if vendor == "hami" else NO_ENOUGH_CARDS.format(node=node)

    current = dict(base)
    placed: list[tuple[int, tuple[ContainerDevice, ...]]] = []
    raw = 0.0
    for req in request.containers:
        view = dict(base) if req.init else current
        order = (_hami_order(usable, view, request, gpu_policy, weights) if vendor == "hami"
                 else _volcano_order(usable, view, gpu_policy))
        picked: list[tuple[VGPUCard, int]] = []
        reasons: dict[str, int] = {}
        for card in order:
            used = view.get(card.uuid, CardUsage())
            why = _card_check(req, request, card, used)
            if not why and gpu_policy == MUTEX and used.num:
                why = "mutex"
            if why:
                reasons[why] = reasons.get(why, 0) + 1
                continue
            if request.numa_bind and picked and picked[-1][0].numa != card.numa:
                picked = []  # HAMi numa-bind: start over on a new NUMA node
            picked.append((card, req.memory_on(card.memory_mib)))
            if len(picked) == req.count:
                break
        if len(picked) < req.count:
            if vendor == "volcano":
                return NOT_ENOUGH_FITTED
            detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
            return f"{CARD_INSUFFICIENT}: container {req.name or req.container} needs {req.count} card(s)" + (
                f" ({detail})" if detail else "")
        devices = []
        for card, mem in picked:
            after = view.get(card.uuid, CardUsage()).plus(mem, req.cores, request.group)
            if not req.init:
                current[card.uuid] = after
            if vendor == "volcano":
                raw += _volcano_gpu_score(gpu_policy, card, after)
            devices.append(ContainerDevice(card.uuid, card.index, mem, req.cores, card.numa))
        placed.append((req.container, tuple(devices)))
    if vendor == "hami":
        raw = node_score(usable, usage)
        npol = request.node_policy or node_policy or BINPACK
        score = raw if npol != SPREAD else 30.0 - raw
    else:
        score = raw
    return Allocation(vendor, tuple(placed), request.container_count or (max((c for c, _ in placed), default=-1) + 1),
                      score=score, raw_score=raw)


# --- annotations --------------------------------------------------------------------------------------------------


def _encode(devices: Sequence[ContainerDevice]) -> str:
    return "".join(f"{d.uuid},{d.type},{d.memory_mib},{d.cores}:" for d in devices)


def device_list(allocation: Allocation) -> str:
    """The device-list string: HAMi — one `;`-terminated segment per container (empty ones kept, init
    containers first); Volcano — only containers with devices, joined by `;`."""
    if allocation.vendor == "hami":
        by = dict(allocation.containers)
        return "".join(_encode(by.get(i, ())) + ";" for i in range(allocation.container_count))
    return ";".join(_encode(devs) for _, devs in allocation.containers)


def annotations(allocation: Allocation, *, node: str, now: int) -> dict[str, str]:
    """The pod annotations the vendor's scheduler writes for this allocation (`now`: unix seconds), devices.md §1.5."""
    devices = device_list(allocation)
    if allocation.vendor == "hami":
        return {"hami.io/vgpu-node": node, "hami.io/vgpu-time": str(now),
                "hami.io/vgpu-devices-to-allocate": devices, "hami.io/vgpu-devices-allocated": devices,
                "hami.io/bind-phase": "allocating", "hami.io/bind-time": str(now)}
    return {"volcano.sh/vgpu-node": node, "volcano.sh/vgpu-time": str(now), "volcano.sh/vgpu-ids-new": devices,
            "volcano.sh/devices-to-allocate": devices, "volcano.sh/bind-phase": "allocating",
            "volcano.sh/bind-time": str(now)}
