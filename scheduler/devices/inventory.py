"""A node's devices and what is in use, as plain frozen data: parsed from the Node (capacity, labels, HAMi/Volcano
vGPU registrations, `lahar.sh/gpu-topology`), its Koordinator `Device` and its Volcano `Numatopology`.

Read by the deviceshare and numa-aware plugins once per node and session (`inventory(...)`), and for the pods
already on the node (`usage(...)`); the fit functions of `vgpu`, `mig`, `gpu` and `rdma` take these. Formats:
spec/devices.md §1.4 (registrations), §1.5/§2.3/§3.2 (allocation annotations), volcano.md §1.0 (Numatopology).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lahar.kube import quantity
from lahar.scheduler.devices import requests
from lahar.scheduler.topology.hints import parse_cpuset

__all__ = [
    "DEVICE_ALLOCATED_ANNOTATION",
    "GPU_TOPOLOGY_ANNOTATION",
    "HAMI_ALLOCATED_ANNOTATIONS",
    "HAMI_MIG_ALLOCATIONS_ANNOTATION",
    "MIG_INSTANCES_ANNOTATION",
    "HAMI_REGISTER_ANNOTATION",
    "VOLCANO_ALLOCATED_ANNOTATIONS",
    "VOLCANO_REGISTER_ANNOTATION",
    "GPU",
    "VF",
    "CardUsage",
    "MIGPlacement",
    "MIGProfileInfo",
    "NodeInventory",
    "RDMANic",
    "Usage",
    "VGPUCard",
    "card_usage",
    "decode_pod_devices",
    "inventory",
    "parse_hami_register",
    "parse_instances_annotation",
    "parse_volcano_register",
    "share_key",
    "slice_usage",
    "usage",
]

HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
VOLCANO_REGISTER_ANNOTATION = "volcano.sh/node-vgpu-register"
GPU_TOPOLOGY_ANNOTATION = "lahar.sh/gpu-topology"
DEVICE_ALLOCATED_ANNOTATION = "scheduling.koordinator.sh/device-allocated"
HAMI_MIG_ALLOCATIONS_ANNOTATION = "hami.io/vgpu-mig-allocations"
# lahar's record of the "mixed" MIG devices the scheduler counted a pod on (per-NUMA usage of static MIG devices)
MIG_INSTANCES_ANNOTATION = "lahar.sh/mig-instances"
# first present wins; the scheduler writes both with the same value
HAMI_ALLOCATED_ANNOTATIONS = ("hami.io/vgpu-devices-allocated", "hami.io/vgpu-devices-to-allocate")
VOLCANO_ALLOCATED_ANNOTATIONS = ("volcano.sh/vgpu-ids-new", "volcano.sh/devices-to-allocate")
_MIG_PREFIX = "nvidia.com/mig-"
_TERMINAL = ("Succeeded", "Failed")


# --- inventory ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MIGProfileInfo:
    """A MIG profile a GPU offers (HAMi v2.10 registration `migProfiles`, or the tables of spec/devices.md §2.1)."""

    name: str
    memory_mib: int
    core: int = 0
    slices: int = 0
    placements: tuple[tuple[int, int], ...] = ()   # (start, size)
    max_instances: int = 0


@dataclass(frozen=True)
class GPU:
    """A physical GPU. `pcie_id` is Koordinator's `topology.pcieID` (root complex `pci0000:BB`), `pcie_switch`
    devcluster's switch number (None when unknown). `mig_devices`: the static MIG geometry of a GPU in MIG mode
    ("mixed" strategy) as (profile, count) pairs; `mig_enabled` such GPUs are not whole-GPU allocatable."""

    index: int
    uuid: str = ""
    model: str = ""
    memory_mib: int = 0
    numa: int | None = None
    pcie_id: str = ""
    pcie_switch: int | None = None
    bus_id: str = ""
    healthy: bool = True
    mig_enabled: bool = False
    mig_devices: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class VGPUCard:
    """A vGPU-shareable card as registered by HAMi (`hami.io/node-nvidia-register`) or Volcano
    (`volcano.sh/node-vgpu-register`): `count` slots, `memory_mib`, `cores` (100 per card), `type`, `mode`."""

    vendor: str
    uuid: str
    index: int
    count: int
    memory_mib: int
    cores: int = 100
    type: str = ""
    numa: int | None = None
    mode: str = "hami-core"
    healthy: bool = True
    mig_profiles: tuple[MIGProfileInfo, ...] = ()


@dataclass(frozen=True)
class VF:
    bus_id: str
    minor: int = -1
    labels: tuple[tuple[str, str], ...] = ()   # of its VF group


@dataclass(frozen=True)
class RDMANic:
    """An RDMA NIC (a PF): Koordinator Device `type: rdma`; `id` is the PF PCI address; `vfs` sorted by busID."""

    minor: int
    id: str = ""
    numa: int | None = None
    pcie_id: str = ""
    pcie_switch: int | None = None
    bus_id: str = ""
    healthy: bool = True
    vfs: tuple[VF, ...] = ()


@dataclass(frozen=True)
class NodeInventory:
    """Everything device- and NUMA-related about one node. `cpus` are the allocatable CPU ids per NUMA node,
    `cpu_capacity` every CPU per NUMA node; `mig_capacity` the node's `nvidia.com/mig-*` allocatable."""

    name: str
    gpus: tuple[GPU, ...] = ()
    hami: tuple[VGPUCard, ...] = ()
    volcano: tuple[VGPUCard, ...] = ()
    nics: tuple[RDMANic, ...] = ()
    numa_nodes: tuple[int, ...] = ()
    cpus: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    cpu_capacity: Mapping[int, int] = field(default_factory=dict)
    topology_policy: str = "none"
    cpu_manager_policy: str = "none"
    mig_strategy: str = "none"
    mig_capacity: Mapping[str, int] = field(default_factory=dict)
    gpu_product: str = ""
    whole_gpu_capacity: int = 0

    @property
    def volcano_mode(self) -> str:
        """Volcano: the node's sharing mode is the mode of its last registered card."""
        return self.volcano[-1].mode if self.volcano else ""

    def gpu(self, index: int) -> GPU | None:
        return next((g for g in self.gpus if g.index == index), None)

    def whole_gpus(self) -> list[GPU]:
        """Healthy GPUs not in MIG mode — what whole-GPU requests can take."""
        return [g for g in self.gpus if g.healthy and not g.mig_enabled]

    def free_gpus(self, used: Usage) -> list[int]:
        """Indices of whole-allocatable GPUs no pod holds (whole, or as vGPU slices of the same UUID)."""
        busy = set(used.gpus) | {g.index for g in self.gpus if card_usage(g, used).num}
        return [g.index for g in self.whole_gpus() if g.index not in busy]

    def free_gpu_count(self, used: Usage) -> int:
        """Free whole GPUs, less those held by pods that do not say which (`Usage.unplaced_gpus`)."""
        return max(len(self.free_gpus(used)) - used.unplaced_gpus, 0)

    def gpu_numa(self) -> dict[str, list[int] | None]:
        """{str(index): [NUMA node]} for `topology.hints.device_hints` (None where the NUMA node is unknown)."""
        return {str(g.index): None if g.numa is None else [g.numa] for g in self.whole_gpus()}

    def free_vfs(self, used: Usage) -> dict[int, list[VF]]:
        """Free VFs per NIC minor (healthy NICs; a PF taken whole has no free VF)."""
        return {n.minor: [v for v in n.vfs if v.bus_id not in used.vfs]
                for n in self.nics if n.healthy and n.minor not in used.pfs}

    def free_cpus(self) -> dict[int, int]:
        return {n: len(c) for n, c in self.cpus.items()}


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _bool(v: Any) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() == "true"


def _mig_profiles(raw: Any) -> tuple[MIGProfileInfo, ...]:
    out = []
    for p in raw or ():
        if isinstance(p, dict) and p.get("name"):
            placements = tuple((_int(x.get("start")), _int(x.get("size"))) for x in p.get("placements") or ()
                               if isinstance(x, dict))
            out.append(MIGProfileInfo(str(p["name"]), _int(p.get("memoryMB")), _int(p.get("core")),
                                      _int(p.get("sliceCount")), placements, _int(p.get("instanceCount"))))
    return tuple(out)


def parse_hami_register(text: str) -> tuple[VGPUCard, ...]:
    """`hami.io/node-nvidia-register`: a JSON array (v2.8+; Go omitempty — a missing field is its zero value) or the
    legacy CSV (`UUID,count,devmem,devcore,type,numa,health[,index,mode]` joined by `:`). Malformed → ()."""
    text = (text or "").strip()
    if not text:
        return ()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            return ()
        return tuple(VGPUCard("hami", str(d.get("id") or ""), _int(d.get("index")), _int(d.get("count")),
                              _int(d.get("devmem")), _int(d.get("devcore")), str(d.get("type") or ""),
                              _int(d.get("numa")), str(d.get("mode") or "hami-core"), bool(d.get("health", False)),
                              _mig_profiles(d.get("migProfiles")))
                     for d in items if isinstance(d, dict))
    out = []
    for pos, item in enumerate(x for x in text.split(":") if "," in x):
        f = item.split(",")
        if len(f) < 7:
            return ()
        index = _int(f[7], pos) if len(f) >= 9 else pos
        mode = f[8] if len(f) >= 9 else "hami-core"
        out.append(VGPUCard("hami", f[0], index, _int(f[1]), _int(f[2]), _int(f[3]), f[4], _int(f[5]), mode,
                            _bool(f[6])))
    return tuple(out)


def parse_volcano_register(text: str) -> tuple[VGPUCard, ...]:
    """`volcano.sh/node-vgpu-register`: `UUID,count,devmem,type,health,mode` per card, joined by `:` (trailing `:`),
    sorted by minor number (index = position). No cores (100 each) and no NUMA. Malformed → ()."""
    out = []
    for pos, item in enumerate(x for x in (text or "").split(":") if "," in x):
        f = item.split(",")
        if len(f) < 6:
            return ()
        mode = "mig" if f[5] == "mig" else "hami-core"
        out.append(VGPUCard("volcano", f[0], pos, _int(f[1]), _int(f[2]), 100, f[3], None, mode, _bool(f[4])))
    return tuple(out)


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _mib(value: Any) -> int:
    try:
        return int(quantity.parse(value).value() // (1024 * 1024))
    except (quantity.QuantityError, TypeError, ValueError):
        return 0


def _numa(v: Any) -> int | None:
    if v is None:
        return None
    n = _int(v, -1)
    return max(n, 0)  # Koordinator reads -1 as 0


def _cpus(numatopology: Mapping[str, Any] | None) -> tuple[dict[int, tuple[int, ...]], dict[int, int], str, str]:
    spec = (numatopology or {}).get("spec") or {}
    detail = spec.get("cpuDetail") or {}
    cpu_numa = {_int(cpu): _int((info or {}).get("numa")) for cpu, info in detail.items()}
    allocatable_text = ((spec.get("numares") or {}).get("cpu") or {}).get("allocatable")
    allocatable = parse_cpuset(allocatable_text) if allocatable_text is not None else sorted(cpu_numa)
    cpus: dict[int, list[int]] = {}
    for cpu in allocatable:
        if cpu in cpu_numa:
            cpus.setdefault(cpu_numa[cpu], []).append(cpu)
    capacity: dict[int, int] = {}
    for node in cpu_numa.values():
        capacity[node] = capacity.get(node, 0) + 1
    policies = spec.get("policies") or {}
    return ({n: tuple(v) for n, v in sorted(cpus.items())}, dict(sorted(capacity.items())),
            str(policies.get("TopologyManagerPolicy") or "none"), str(policies.get("CPUManagerPolicy") or "none"))


def _topology(annotations: Mapping[str, str]) -> dict[str, Any]:
    raw = annotations.get(GPU_TOPOLOGY_ANNOTATION)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def inventory(node: Mapping[str, Any], device: Mapping[str, Any] | None = None,
              numatopology: Mapping[str, Any] | None = None) -> NodeInventory:
    """The node's inventory. GPUs come from the Koordinator `Device` (minor, UUID, memory, NUMA, pcieID, busID),
    completed by `lahar.sh/gpu-topology` (PCIe switch, MIG mode) and the HAMi registration; without a `Device`,
    from those two. A "mixed"-strategy node that does not say which GPUs are in MIG mode is read as the lowest
    indices being in MIG mode (the count: GPUs minus the node's `nvidia.com/gpu`)."""
    meta = _meta(node)
    name = str(meta.get("name") or "")
    annotations = dict(meta.get("annotations") or {})
    labels = dict(meta.get("labels") or {})
    status = node.get("status") or {}
    alloc = dict(status.get("allocatable") or status.get("capacity") or {})
    topo = _topology(annotations)
    topo_gpus = {_int(g.get("index")): g for g in topo.get("gpus") or () if isinstance(g, dict)}
    topo_nics = {_int(n.get("index")): n for n in topo.get("nics") or () if isinstance(n, dict)}
    hami = parse_hami_register(annotations.get(HAMI_REGISTER_ANNOTATION, ""))
    volcano = parse_volcano_register(annotations.get(VOLCANO_REGISTER_ANNOTATION, ""))
    product = labels.get("nvidia.com/gpu.product") or _meta(device).get("labels", {}).get(
        "node.koordinator.sh/gpu-model", "")
    label_memory = _int(labels.get("nvidia.com/gpu.memory"))

    entries = [d for d in ((device or {}).get("spec") or {}).get("devices") or () if isinstance(d, dict)]
    koord_gpus = {_int(d.get("minor")): d for d in entries if d.get("type") == "gpu"}
    indices = sorted(set(koord_gpus) | set(topo_gpus) | {c.index for c in hami})
    by_index_hami = {c.index: c for c in hami}
    gpus: list[GPU] = []
    for i in indices:
        k = koord_gpus.get(i, {})
        t = topo_gpus.get(i, {})
        h = by_index_hami.get(i)
        kt = k.get("topology") or {}
        memory = _mib((k.get("resources") or {}).get("koordinator.sh/gpu-memory")) or (h.memory_mib if h else 0) \
            or label_memory
        numa = _numa(kt["nodeID"]) if "nodeID" in kt else (_int(t["numa"]) if "numa" in t else (h.numa if h else None))
        mig_devices = tuple(sorted((str(p), _int(n)) for p, n in (t.get("migDevices") or {}).items()))
        gpus.append(GPU(
            index=i, uuid=str(k.get("id") or t.get("uuid") or (h.uuid if h else "")),
            model=(h.type if h else "") or product, memory_mib=memory, numa=numa,
            pcie_id=str(kt.get("pcieID") or ""), pcie_switch=_int(t["pcieSwitch"]) if "pcieSwitch" in t else None,
            bus_id=str(kt.get("busID") or t.get("busID") or ""),
            healthy=bool(k.get("health", True)) and (h.healthy if h else True),
            mig_enabled=bool(mig_devices) or (h is not None and h.mode == "mig"), mig_devices=mig_devices))

    mig_capacity = {requests.profile_of(k): _int(quantity.parse(v).value()) for k, v in alloc.items()
                    if k.startswith(_MIG_PREFIX)}
    strategy = labels.get("nvidia.com/mig.strategy", "none")
    whole = _int(quantity.parse(alloc["nvidia.com/gpu"]).value()) if "nvidia.com/gpu" in alloc else 0
    if mig_capacity and gpus and not any(g.mig_enabled for g in gpus) and not hami:
        n_mig = max(len(gpus) - whole, 0)
        gpus = [replace(g, mig_enabled=True) if k < n_mig else g for k, g in enumerate(gpus)]

    nics: list[RDMANic] = []
    for d in entries:
        if d.get("type") != "rdma":
            continue
        minor = _int(d.get("minor"))
        kt = d.get("topology") or {}
        t = topo_nics.get(minor, {})
        vfs = []
        for group in d.get("vfGroups") or ():
            glabels = tuple(sorted((group.get("labels") or {}).items()))
            vfs += [VF(str(v.get("busID") or ""), _int(v.get("minor"), -1), glabels) for v in group.get("vfs") or ()]
        nics.append(RDMANic(minor, str(d.get("id") or ""), _numa(kt.get("nodeID")) if "nodeID" in kt else None,
                            str(kt.get("pcieID") or ""), _int(t["pcieSwitch"]) if "pcieSwitch" in t else None,
                            str(kt.get("busID") or d.get("id") or ""), bool(d.get("health", True)),
                            tuple(sorted(vfs, key=lambda v: v.bus_id))))
    nics.sort(key=lambda n: n.minor)

    cpus, capacity, policy, cpu_policy = _cpus(numatopology)
    numa_nodes = sorted(set(capacity) | {g.numa for g in gpus if g.numa is not None}
                        | {n.numa for n in nics if n.numa is not None})
    return NodeInventory(
        name=name, gpus=tuple(gpus), hami=hami, volcano=volcano, nics=tuple(nics), numa_nodes=tuple(numa_nodes),
        cpus=cpus, cpu_capacity=capacity, topology_policy=policy, cpu_manager_policy=cpu_policy,
        mig_strategy=strategy, mig_capacity=mig_capacity, gpu_product=product, whole_gpu_capacity=whole)


# --- usage ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CardUsage:
    """What pods hold on one card — the one occupancy model of HAMi's and Volcano's vGPU slices and Koordinator's
    GPU shares: slots (pods' devices), MiB, cores (percent of the SMs), `ratio` (percent of the memory, for
    Koordinator shares recorded without bytes), and the PodGroups present (Volcano's spread policy)."""

    num: int = 0
    memory_mib: int = 0
    cores: int = 0
    groups: frozenset[str] = frozenset()
    ratio: int = 0

    def plus(self, memory_mib: int, cores: int, group: str = "", num: int = 1, ratio: int = 0) -> CardUsage:
        return CardUsage(self.num + num, self.memory_mib + memory_mib, self.cores + cores,
                         self.groups | {group} if group else self.groups, self.ratio + ratio)

    def add(self, other: CardUsage) -> CardUsage:
        return CardUsage(self.num + other.num, self.memory_mib + other.memory_mib, self.cores + other.cores,
                         self.groups | other.groups, self.ratio + other.ratio)

    def minus(self, memory_mib: int, cores: int, ratio: int = 0) -> CardUsage:
        return CardUsage(self.num - 1, self.memory_mib - memory_mib, self.cores - cores, self.groups,
                         self.ratio - ratio)

    def memory_on(self, card_memory_mib: int) -> int:
        """MiB held on a card of `card_memory_mib` (the ratio-only shares converted as Koordinator does)."""
        return self.memory_mib + self.ratio * card_memory_mib // 100


_IDLE = CardUsage()


@dataclass(frozen=True)
class MIGPlacement:
    """A dynamic MIG instance reserved on a GPU (`hami.io/vgpu-mig-allocations`)."""

    gpu_uuid: str
    profile: str
    start: int
    size: int

    def overlaps(self, start: int, size: int) -> bool:
        return self.start < start + size and start < self.start + self.size


@dataclass(frozen=True)
class Usage:
    """What the pods on a node hold. `cards`: vGPU usage by card UUID (HAMi and Volcano pods both count: a node
    may register the same cards to both); `gpus`: whole GPUs by index (Koordinator `device-allocated`);
    `unplaced_gpus`: whole GPUs held by pods that do not say which; `vfs`: VF busIDs; `pfs`: NIC minor → units
    held without a VF; `mig`: "mixed" MIG devices in use by profile; `mig_placements`: dynamic MIG instances;
    `mig_instances`: by profile, the "mixed" instance ids pods were recorded on (`lahar.sh/mig-instances`)."""

    cards: Mapping[str, CardUsage] = field(default_factory=dict)
    gpus: frozenset[int] = frozenset()
    unplaced_gpus: int = 0
    vfs: frozenset[str] = frozenset()
    pfs: Mapping[int, int] = field(default_factory=dict)
    mig: Mapping[str, int] = field(default_factory=dict)
    mig_placements: tuple[MIGPlacement, ...] = ()
    mig_instances: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def card(self, uuid: str) -> CardUsage:
        return self.cards.get(uuid, _IDLE)


def share_key(minor: int) -> str:
    """The `Usage.cards` key of a Koordinator GPU share whose allocation names no UUID."""
    return f"minor:{minor}"


def card_usage(gpu: GPU, usage: Usage) -> CardUsage:
    """Everything pods hold on one physical GPU, whatever vocabulary placed them: HAMi / Volcano slices and
    Koordinator shares by UUID, Koordinator shares by minor (`share_key`). Held whole (`Usage.gpus`) is not in it."""
    by_uuid = usage.cards.get(gpu.uuid, _IDLE) if gpu.uuid else _IDLE
    by_minor = usage.cards.get(share_key(gpu.index))
    return by_uuid if by_minor is None else by_uuid.add(by_minor)


def slice_usage(card: VGPUCard, usage: Usage) -> CardUsage:
    """What a HAMi / Volcano card has taken: its slices and Koordinator shares by UUID, and all of it when the GPU of
    its index is held whole (Koordinator `device-allocated` at 100 %)."""
    if card.index in usage.gpus:
        return CardUsage(max(card.count, 1), card.memory_mib, card.cores)
    return usage.card(card.uuid)


def _koord_share(entry: Mapping[str, Any]) -> CardUsage | None:
    """A Koordinator `device-allocated` GPU entry as a share of its card, None when it holds the card whole
    (gpu-memory-ratio 100, or neither ratio nor memory and gpu-core 100 or absent)."""
    res = entry.get("resources") or {}
    ratio = _int(quantity.parse(res["koordinator.sh/gpu-memory-ratio"]).value()) \
        if "koordinator.sh/gpu-memory-ratio" in res else None
    core = _int(quantity.parse(res["koordinator.sh/gpu-core"]).value()) if "koordinator.sh/gpu-core" in res else None
    memory = _mib(res["koordinator.sh/gpu-memory"]) if "koordinator.sh/gpu-memory" in res else None
    if (ratio is not None and ratio >= 100) or (ratio is None and memory is None and (core is None or core >= 100)):
        return None
    return CardUsage(1, memory or 0, core or 0, frozenset(), 0 if memory is not None else (ratio or 0))


def decode_pod_devices(text: str) -> list[list[tuple[str, str, int, int]]]:
    """HAMi / Volcano device lists: containers split on `;`, devices on `:`, each `UUID,Type,mem,cores`.
    A trailing `;` (HAMi) gives no extra container. Volcano MIG ids keep their `[group-pos]` suffix."""
    if not text:
        return []
    parts = text.split(";")
    if parts and parts[-1] == "" and text.endswith(";"):
        parts = parts[:-1]
    out: list[list[tuple[str, str, int, int]]] = []
    for part in parts:
        devs = []
        for item in part.split(":"):
            f = item.split(",")
            if len(f) >= 4:
                devs.append((f[0], f[1], _int(f[2]), _int(f[3])))
        out.append(devs)
    return out


def _card_uuid(raw: str) -> str:
    return raw.split("[", 1)[0]


def _first(annotations: Mapping[str, str], keys: Iterable[str]) -> str:
    return next((annotations[k] for k in keys if annotations.get(k)), "")


def usage(pods: Iterable[Mapping[str, Any]]) -> Usage:
    """Device usage of the pods placed on a node (pods in phase Succeeded/Failed hold nothing), from their
    allocation annotations: Volcano `volcano.sh/vgpu-ids-new`, HAMi `hami.io/vgpu-devices-allocated` and
    `hami.io/vgpu-mig-allocations`, Koordinator `scheduling.koordinator.sh/device-allocated`; "mixed" MIG
    devices from the containers' `nvidia.com/mig-*` resources; whole `nvidia.com/gpu` without an allocation
    annotation counts in `unplaced_gpus`."""
    cards: dict[str, CardUsage] = {}
    gpus: set[int] = set()
    unplaced = 0
    vfs: set[str] = set()
    pfs: dict[int, int] = {}
    mig: dict[str, int] = {}
    placements: list[MIGPlacement] = []
    instances: dict[str, frozenset[str]] = {}
    for pod in pods:
        if ((pod.get("status") or {}).get("phase")) in _TERMINAL:
            continue
        ann = dict(_meta(pod).get("annotations") or {})
        group = ann.get("scheduling.k8s.io/group-name", "")
        vgpu_seen: set[str] = set()
        for keys in (VOLCANO_ALLOCATED_ANNOTATIONS, HAMI_ALLOCATED_ANNOTATIONS):
            for container in decode_pod_devices(_first(ann, keys)):
                for raw_uuid, _type, mem, cores in container:
                    uuid = _card_uuid(raw_uuid)
                    vgpu_seen.add(uuid)
                    cards[uuid] = cards.get(uuid, _IDLE).plus(mem, cores, group)
        try:
            migs = json.loads(ann.get(HAMI_MIG_ALLOCATIONS_ANNOTATION) or "[]")
        except ValueError:
            migs = []
        for m in migs if isinstance(migs, list) else ():
            p = m.get("placement") or {}
            placements.append(MIGPlacement(str(m.get("gpuUUID") or ""), str(m.get("profile") or ""),
                                           _int(p.get("start")), _int(p.get("size"))))
        try:
            allocated = json.loads(ann.get(DEVICE_ALLOCATED_ANNOTATION) or "{}")
        except ValueError:
            allocated = {}
        koord_gpus = allocated.get("gpu") or [] if isinstance(allocated, dict) else []
        for g in koord_gpus:
            try:
                share = _koord_share(g)
            except (quantity.QuantityError, TypeError, ValueError):
                share = None
            if share is None:
                gpus.add(_int(g.get("minor")))
            else:
                key = str(g.get("id") or "") or share_key(_int(g.get("minor")))
                cards[key] = cards.get(key, _IDLE).add(share)
        for r in (allocated.get("rdma") or [] if isinstance(allocated, dict) else []):
            ext_vfs = ((r.get("extension") or {}).get("vfs")) or []
            if ext_vfs:
                vfs.update(str(v.get("busID") or "") for v in ext_vfs)
            else:
                units = _int(quantity.parse((r.get("resources") or {}).get("koordinator.sh/rdma", 100)).value())
                pfs[_int(r.get("minor"))] = pfs.get(_int(r.get("minor")), 0) + units
        for m in requests.mig_requests(pod):
            mig[m.profile] = mig.get(m.profile, 0) + m.count
        for profile, ids in parse_instances_annotation(ann.get(MIG_INSTANCES_ANNOTATION, "")).items():
            instances[profile] = instances.get(profile, frozenset()) | ids
        if not koord_gpus and not vgpu_seen:
            unplaced += requests.whole_gpus(pod, resources=("nvidia.com/gpu",))
    return Usage(cards=cards, gpus=frozenset(gpus), unplaced_gpus=unplaced, vfs=frozenset(vfs), pfs=pfs, mig=mig,
                 mig_placements=tuple(placements), mig_instances=instances)


def parse_instances_annotation(raw: str) -> dict[str, frozenset[str]]:
    """The inverse of `instances_annotation`; malformed input reads as no record."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(p): frozenset(str(i) for i in ids) for p, ids in data.items() if isinstance(ids, list)}
