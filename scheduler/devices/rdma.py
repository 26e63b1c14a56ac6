"""GPU + RDMA joint allocation on one node: Koordinator's `device-joint-allocate` with `requiredScope: SamePCIe` —
GPUs first, then RDMA devices (PFs) or VFs from NICs under the same PCIe ids — plus lahar's explicit pairs.

Called by the deviceshare plugin after the GPUs of a (task, node) are chosen (`gpu.allocate`):
`allocate(chosen_gpus, inventory.nics, usage, request=..., same_pcie=..., must_vf=...)` → `RDMAAllocation` or a
reason; `annotations(chosen_gpus, allocation)` gives `scheduling.koordinator.sh/device-allocated` (Koordinator's
format, spec/devices.md §3.2) and `lahar.sh/gpu-rdma-pairs`. Algorithm: devices.md §3.3.

`lahar.sh/gpu-rdma-pairs` (lahar's own, koordinator#2187 asks for it; Koordinator only implies pairs through
shared pcieIDs): a JSON list, one entry per GPU of the pod in allocation order::

    [{"gpu": 0, "gpuUUID": "GPU-…", "nic": 0, "pf": "0000:11:00.0", "vf": "0000:11:00.1",
      "pcieID": "pci0000:10", "scope": "PCIe"}, …]

`vf` is "" when a whole PF was allocated; `scope` says how close the pair is: `PCIe` (same PCIe id), `NUMA`
(same NUMA node) or `Node`. With at least as many VFs as GPUs under SamePCIe, every GPU gets its own VF on its
own PCIe id (GPU i ↔ VF i), spread over the NICs of that PCIe; with fewer, GPUs of one PCIe share its VFs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import orjson

from lahar.scheduler.devices.inventory import DEVICE_ALLOCATED_ANNOTATION, GPU, VF, RDMANic, Usage
from lahar.scheduler.devices.requests import KOORD_UNITS, RDMARequest

__all__ = [
    "DEVICE_ALLOCATED_ANNOTATION",
    "INSUFFICIENT_RDMA",
    "INSUFFICIENT_VFS",
    "JOINT_ALLOCATE_VIOLATION",
    "PAIRS_ANNOTATION",
    "GPUPair",
    "NICGrant",
    "RDMAAllocation",
    "allocate",
    "annotations",
    "device_allocated",
]

PAIRS_ANNOTATION = "lahar.sh/gpu-rdma-pairs"
INSUFFICIENT_RDMA = "Insufficient rdma devices"
INSUFFICIENT_VFS = "Insufficient rdma VirtualFunctions"
JOINT_ALLOCATE_VIOLATION = "node(s) Device Joint-Allocate rules violation"


@dataclass(frozen=True)
class NICGrant:
    """One NIC given to the pod: whole (`vfs` empty, `units` of its 100) or the listed VFs."""

    minor: int
    id: str
    pcie_id: str
    numa: int | None
    units: int
    vfs: tuple[str, ...] = ()


@dataclass(frozen=True)
class GPUPair:
    gpu: int
    gpu_uuid: str
    nic: int
    pf: str
    vf: str
    pcie_id: str
    scope: str   # PCIe | NUMA | Node


@dataclass(frozen=True)
class RDMAAllocation:
    nics: tuple[NICGrant, ...]
    pairs: tuple[GPUPair, ...]

    def vfs(self) -> list[str]:
        return [v for n in self.nics for v in n.vfs]


def _selected(vf: VF, selector: Mapping[str, object] | None) -> bool:
    """A VF group label selector: only `matchLabels` is evaluated ({} or None selects every VF)."""
    labels = dict(vf.labels)
    match = (selector or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in dict(match).items())  # type: ignore[union-attr]


def _round_robin(nics: Sequence[RDMANic], preferred: Sequence[str]) -> list[RDMANic]:
    """Koordinator `sortDeviceResourcesByPreferredPCIe`: NICs on the preferred PCIe ids first, round-robin over
    those ids (the 1st NIC of each, then the 2nd, …; by minor within a round), then the others by minor."""
    by_pcie: dict[str, list[RDMANic]] = {p: [] for p in preferred}
    others = []
    for n in sorted(nics, key=lambda n: n.minor):
        by_pcie.get(n.pcie_id, others).append(n)
    out: list[RDMANic] = []
    depth = max((len(v) for v in by_pcie.values()), default=0)
    for r in range(depth):
        out += sorted((v[r] for v in by_pcie.values() if r < len(v)), key=lambda n: n.minor)
    return out + others


def allocate(gpus: Sequence[GPU], nics: Sequence[RDMANic], usage: Usage, *, request: RDMARequest,
             same_pcie: bool = True, must_vf: bool = True, vf_selector: Mapping[str, object] | None = None,
             numa_nodes: Collection[int] | None = None) -> RDMAAllocation | str:
    """Choose RDMA for a pod whose GPUs are `gpus` (already chosen, in order), or say why not.

    `request.devices` Koordinator devices are distinct NICs; `request.vfs` SR-IOV VFs may share a NIC. The count
    is raised to the number of distinct PCIe ids of the GPUs under `same_pcie` (Koordinator). `must_vf`: a VF per
    NIC (Koordinator `vfSelector`, or a VF resource), else whole PFs. `numa_nodes`: NICs allowed by the merged
    NUMA hint (None: any). Under `same_pcie` only NICs on the GPUs' PCIe ids are candidates and each of those
    ids must get one ("Joint-Allocate rules violation" otherwise); without it other NICs are the fallback.
    """
    distinct = request.devices > 0
    units = request.units or KOORD_UNITS
    preferred = list(dict.fromkeys(g.pcie_id for g in gpus if g.pcie_id))
    desired = request.count
    if same_pcie and desired < len(preferred):
        desired = len(preferred)
    if desired <= 0:
        return RDMAAllocation((), ())

    candidates = [n for n in nics if n.healthy and (numa_nodes is None or n.numa is None or n.numa in numa_nodes)]
    if same_pcie:
        candidates = [n for n in candidates if n.pcie_id in preferred]
    free_vfs: dict[int, list[str]] = {}
    if must_vf:
        if not any(n.vfs for n in nics):
            return f"{INSUFFICIENT_VFS}: no RDMA device on the node has VFs"
        for n in candidates:
            if usage.pfs.get(n.minor):
                continue
            free_vfs[n.minor] = sorted(v.bus_id for v in n.vfs if v.bus_id not in usage.vfs and _selected(v, vf_selector))
        candidates = [n for n in candidates if free_vfs.get(n.minor)]
    else:
        candidates = [n for n in candidates if not any(v.bus_id in usage.vfs for v in n.vfs)
                      and usage.pfs.get(n.minor, 0) + units <= KOORD_UNITS]

    taken: dict[int, list[str]] = {}   # NIC minor -> VFs taken ([] for a whole PF)
    pairs_plan: list[tuple[GPU, RDMANic, str]] = []
    by_minor = {n.minor: n for n in candidates}

    def take(n: RDMANic) -> str | None:
        if must_vf:
            if not free_vfs[n.minor]:
                return None
            vf = free_vfs[n.minor].pop(0)
            taken.setdefault(n.minor, []).append(vf)
            return vf
        if n.minor in taken:
            return None
        taken[n.minor] = []
        return ""

    if same_pcie and desired >= len(gpus) and gpus:
        # lahar: one VF per GPU, on a NIC under the GPU's PCIe id, spreading over that id's NICs
        for g in gpus:
            options = [n for n in candidates if n.pcie_id == g.pcie_id
                       and (not distinct or n.minor not in taken) and (n.minor not in taken or must_vf)]
            options.sort(key=lambda n: (len(taken.get(n.minor, ())), n.minor))
            got = None
            for n in options:
                vf = take(n)
                if vf is not None:
                    got = (n, vf)
                    break
            if got is None:
                return (f"{JOINT_ALLOCATE_VIOLATION}: no free RDMA {'VF' if must_vf else 'device'} under PCIe "
                        f"{g.pcie_id or '?'} for GPU {g.index}")
            pairs_plan.append((g, got[0], got[1]))
    order = _round_robin(candidates, preferred)
    count = sum(max(len(v), 1) for v in taken.values())
    progress = True
    while count < desired and progress:
        progress = False
        for n in order:
            if count >= desired:
                break
            if distinct and n.minor in taken:
                continue
            if take(n) is not None:
                count += 1
                progress = True
        if distinct or not must_vf:
            break
    if count < desired:
        return f"{INSUFFICIENT_RDMA}: {count} of {desired} available"
    if same_pcie:
        covered = {by_minor[m].pcie_id for m in taken}
        if covered != set(preferred):
            missing = sorted(set(preferred) - covered)
            return f"{JOINT_ALLOCATE_VIOLATION}: no RDMA device under PCIe {', '.join(missing)}"

    grants = tuple(NICGrant(m, by_minor[m].id, by_minor[m].pcie_id, by_minor[m].numa,
                            units if not vfs else (units if distinct else len(vfs)), tuple(vfs))
                   for m, vfs in sorted(taken.items()))
    if not pairs_plan:
        pairs_plan = _join_pairs(gpus, grants, by_minor)
    pairs = tuple(GPUPair(g.index, g.uuid, n.minor, n.id, vf, g.pcie_id, _scope(g, n)) for g, n, vf in pairs_plan)
    return RDMAAllocation(grants, pairs)


def _scope(g: GPU, n: RDMANic) -> str:
    if g.pcie_id and g.pcie_id == n.pcie_id:
        return "PCIe"
    if g.numa is not None and g.numa == n.numa:
        return "NUMA"
    return "Node"


def _join_pairs(gpus: Sequence[GPU], grants: Sequence[NICGrant], nics: Mapping[int, RDMANic]) -> list[
        tuple[GPU, RDMANic, str]]:
    """Pairs when VFs are fewer than GPUs (or not on every GPU's PCIe): each GPU takes the VFs (or PFs) of its PCIe
    id in turn, else of its NUMA node, else any."""
    slots = [(nics[g.minor], vf) for g in grants for vf in (g.vfs or ("",))]
    if not slots:
        return []
    out = []
    turn: dict[str, int] = {}
    for g in gpus:
        tiers = (("pcie", g.pcie_id, [s for s in slots if g.pcie_id and s[0].pcie_id == g.pcie_id]),
                 ("numa", g.numa, [s for s in slots if g.numa is not None and s[0].numa == g.numa]),
                 ("any", None, slots))
        for key, value, mine in tiers:
            if mine:
                k = f"{key}:{value}"
                out.append((g, *mine[turn.get(k, 0) % len(mine)]))
                turn[k] = turn.get(k, 0) + 1
                break
    return out


def device_allocated(gpus: Sequence[GPU], allocation: RDMAAllocation | None) -> dict[str, list[dict[str, object]]]:
    """Koordinator's `scheduling.koordinator.sh/device-allocated` value: whole GPUs (100 units each, with memory)
    and the RDMA devices with their VFs (`extension.vfs`, VF minor −1 as koordlet reports it)."""
    out: dict[str, list[dict[str, object]]] = {}
    if gpus:
        out["gpu"] = [{"minor": g.index, "id": g.uuid,
                       "resources": {"koordinator.sh/gpu-core": "100",
                                     **({"koordinator.sh/gpu-memory": f"{g.memory_mib}Mi"} if g.memory_mib else {}),
                                     "koordinator.sh/gpu-memory-ratio": "100"}} for g in gpus]
    if allocation and allocation.nics:
        entries: list[dict[str, object]] = []
        for n in allocation.nics:
            entry: dict[str, object] = {"minor": n.minor, "id": n.id, "resources": {"koordinator.sh/rdma": str(n.units)}}
            if n.vfs:
                entry["extension"] = {"vfs": [{"minor": -1, "busID": v} for v in n.vfs]}
            entries.append(entry)
        out["rdma"] = entries
    return out


def annotations(gpus: Sequence[GPU], allocation: RDMAAllocation | None) -> dict[str, str]:
    """`scheduling.koordinator.sh/device-allocated` and, when RDMA was allocated, `lahar.sh/gpu-rdma-pairs`.
    The pairs name each GPU by the UUID of the matching GPU in `gpus` (the node's own), else the pair's."""
    out = {DEVICE_ALLOCATED_ANNOTATION: orjson.dumps(device_allocated(gpus, allocation)).decode()}
    if allocation and allocation.pairs:
        uuid_of = {g.index: g.uuid for g in gpus}
        out[PAIRS_ANNOTATION] = orjson.dumps(
            [{"gpu": p.gpu, "gpuUUID": uuid_of.get(p.gpu, p.gpu_uuid), "nic": p.nic, "pf": p.pf, "vf": p.vf,
              "pcieID": p.pcie_id, "scope": p.scope} for p in allocation.pairs]).decode()
    return out
