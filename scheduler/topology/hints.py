"""Topology hints from free resources per NUMA node, as the kubelet's hint providers generate them.

Input of `scheduler.topology.merge`: the numa-aware and deviceshare plugins turn a node's inventory (Volcano
`Numatopology`, device registrations) into per-NUMA counts and call these. Pure; spec/topology.md §5.

* CPU manager, static policy (`generateCPUTopologyHints`): every mask whose available (+ reusable) CPUs cover the
  request; preferred = as narrow as the machine's *capacity* allows (`minAffinitySize`), not what is free now.
* device manager (`generateDeviceTopologyHints`): the same shape over devices; a device on several NUMA nodes
  counts for any mask it touches; no device with topology at all = no preference (None).
* memory manager, static policy (`calculateHints`): memory and hugepages per NUMA node, with its node groups.
Masks are emitted in the kubelet's order (`bitmask.iterate`: by size, then lexicographic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lahar.scheduler.topology import bitmask
from lahar.scheduler.topology.merging import Provider, TopologyHint

__all__ = [
    "NUMAMemory",
    "cpu_hints",
    "cpu_provider",
    "cpus_per_numa",
    "device_hints",
    "memory_hints",
    "parse_cpuset",
    "pod_request",
]


def parse_cpuset(text: str) -> list[int]:
    """Linux cpuset list format ("0-3,8,10-11") → sorted CPU ids; "" → []."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi) if hi else int(lo)
        if last < first:
            raise ValueError(f"invalid cpuset range {part!r}")
        out.update(range(first, last + 1))
    return sorted(out)


def cpus_per_numa(cpus: Iterable[int], cpu_numa: Mapping[int, int]) -> dict[int, int]:
    """Count CPUs per NUMA node (`cpu_numa` as in Numatopology `cpuDetail`: cpu id → NUMA node)."""
    out: dict[int, int] = {}
    for cpu in cpus:
        node = cpu_numa[cpu]
        out[node] = out.get(node, 0) + 1
    return out


def pod_request(init_containers: Sequence[tuple[int, bool]], containers: Sequence[int]) -> int:
    """A pod-scope request (CPU manager `podGuaranteedCPUs`, memory manager `getPodRequestedResources`):
    max(largest init container + the sidecars started before it, app containers + all sidecars).
    `init_containers` are (request, restartable) in spec order; restartable = a sidecar."""
    sidecars = 0
    init_peak = 0
    for request, restartable in init_containers:
        if restartable:
            sidecars += request
        elif sidecars + request > init_peak:
            init_peak = sidecars + request
    return max(init_peak, sum(containers) + sidecars)


def cpu_hints(request: int, capacity: Mapping[int, int], available: Mapping[int, int],
              reusable: Mapping[int, int] | None = None, *, sockets: Mapping[int, int] | None = None,
              align_by_socket: bool = False) -> list[TopologyHint]:
    """`generateCPUTopologyHints` over counts per NUMA node.

    `capacity[n]`: every CPU of node n (free or not); `available[n]`: CPUs of the shared pool on n;
    `reusable[n]`: CPUs released by this pod's init containers on n (every such node must be in the mask).
    With `align_by_socket` (CPU manager option), hints spanning exactly ceil(min width / NUMA nodes per socket)
    sockets are preferred too; `sockets` maps NUMA node → socket. `[]` means no mask fits (unsatisfiable).
    """
    nodes = sorted(capacity)
    reuse = {n: c for n, c in (reusable or {}).items() if c}
    reuse_mask = bitmask.from_bits(*reuse)
    reused = sum(reuse.values())
    min_width = len(nodes)
    emitted: list[int] = []
    for mask in bitmask.iterate(nodes):
        ids = bitmask.bits(mask)
        if sum(capacity.get(n, 0) for n in ids) >= request and len(ids) < min_width:
            min_width = len(ids)
        if reuse_mask & ~mask:
            continue
        if reused + sum(available.get(n, 0) for n in ids) < request:
            continue
        emitted.append(mask)
    socket_target = None
    if align_by_socket and sockets:
        per_socket = max(1, len(nodes) // max(1, len(set(sockets.values()))))
        socket_target = -(-min_width // per_socket)
    out = []
    for mask in emitted:
        ids = bitmask.bits(mask)
        preferred = len(ids) == min_width
        if not preferred and socket_target is not None:
            preferred = len({sockets[n] for n in ids}) == socket_target
        out.append(TopologyHint(frozenset(ids), preferred))
    return out


def cpu_provider(request: int, capacity: Mapping[int, int], available: Mapping[int, int],
                 reusable: Mapping[int, int] | None = None, assigned: Mapping[int, int] | None = None, *,
                 sockets: Mapping[int, int] | None = None, align_by_socket: bool = False) -> Provider:
    """The CPU manager's whole answer (`GetTopologyHints` / `GetPodTopologyHints`).

    `request` is the integer CPU request of a Guaranteed pod's container (or `pod_request` for pod scope);
    0 (not Guaranteed, fractional) → None, no preference. `assigned[n]`: CPUs already assigned on n (a kubelet
    restart): a different total → `{"cpu": []}`, else the hints are regenerated from the assigned CPUs.
    """
    if request <= 0:
        return None
    if assigned:
        if sum(assigned.values()) != request:
            return {"cpu": []}
        return {"cpu": cpu_hints(request, capacity, assigned, None, sockets=sockets,
                                 align_by_socket=align_by_socket)}
    return {"cpu": cpu_hints(request, capacity, available, reusable, sockets=sockets,
                             align_by_socket=align_by_socket)}


def _device_mask(numa: Iterable[int] | None) -> int:
    return 0 if numa is None else bitmask.from_bits(*numa)


def device_hints(request: int, devices: Mapping[str, Iterable[int] | None], available: Iterable[str],
                 numa_nodes: Sequence[int], reusable: Iterable[str] = (),
                 allocated: Iterable[str] = ()) -> list[TopologyHint] | None:
    """One device-plugin resource, as the device manager answers for it (`getTopologyHints`).

    `devices`: every healthy device id → its NUMA nodes (None = the plugin reported no topology);
    `available`: healthy devices not allocated to anyone; `reusable`: devices of this pod's finished init
    containers; `allocated`: devices already allocated to this very container (pod, for pod scope).
    Returns None (no device has topology: no preference), [] (cannot be satisfied) or the hints.
    """
    masks = {d: _device_mask(numa) for d, numa in devices.items()}
    if not any(masks.values()):
        return None
    allocated = list(allocated)
    if allocated:
        if len(allocated) != request:
            return []
        return _device_hints(request, masks, allocated, (), numa_nodes)
    available, reusable = list(available), list(reusable)
    if len(set(available) | set(reusable)) < request:
        return []
    return _device_hints(request, masks, available, reusable, numa_nodes)


def _device_hints(request: int, masks: Mapping[str, int], available: Sequence[str], reusable: Iterable[str],
                  numa_nodes: Sequence[int]) -> list[TopologyHint]:
    """`generateDeviceTopologyHints`."""
    min_width = len(numa_nodes)
    emitted: list[int] = []
    reuse = [masks.get(d, 0) for d in reusable]
    for mask in bitmask.iterate(numa_nodes):
        if sum(1 for m in masks.values() if m & mask) >= request and mask.bit_count() < min_width:
            min_width = mask.bit_count()
        matching = 0
        skip = False
        for m in reuse:
            if not m:
                continue  # reusable devices without topology are ignored
            if not m & mask:
                skip = True
                break
            matching += 1
        if skip:
            continue
        matching += sum(1 for d in available if masks.get(d, 0) & mask)
        if matching < request:
            continue
        emitted.append(mask)
    return [TopologyHint(bitmask.to_frozenset(m), m.bit_count() == min_width) for m in emitted]


@dataclass(frozen=True)
class NUMAMemory:
    """The memory manager's state of one NUMA node (`state.NUMANodeState`), per resource
    (`memory`, `hugepages-2Mi`, ...): allocatable and free bytes, the node group it is bound in (`cells`, just
    itself when unbound) and how many containers hold memory on it."""

    allocatable: Mapping[str, int]
    free: Mapping[str, int]
    cells: tuple[int, ...] = ()
    assignments: int = 0


def memory_hints(requests: Mapping[str, int], machine: Mapping[int, NUMAMemory]) -> dict[str, list[TopologyHint]]:
    """`calculateHints` of the static memory manager for `requests` ({"memory": bytes, "hugepages-1Gi": bytes}).

    A mask needs enough allocatable memory (that sets the minimal width), may not split an existing node group,
    and needs enough free memory; preferred = minimal width. Kubelet quirk kept: when no mask fits, the resources
    are simply absent (the Topology Manager reads "no preference"; the memory manager then fails in Allocate),
    so callers that must reject should test `requests and not result`.
    """
    nodes = sorted(machine)
    min_width = len(nodes)
    emitted: list[int] = []
    for mask in bitmask.iterate(nodes):
        ids = bitmask.bits(mask)
        single = len(ids) == 1
        if any(sum(machine[n].allocatable.get(r, 0) for n in ids) < size for r, size in requests.items()):
            continue
        if len(ids) < min_width:
            min_width = len(ids)
        if single and len(machine[ids[0]].cells or (ids[0],)) > 1:
            continue  # the node is bound in a group with others: no single-node allocation
        blocked = False
        for n in ids:
            state = machine[n]
            if not single and state.assignments > 0:
                cells = state.cells or (n,)
                if len(cells) == 1 or sorted(cells) != ids:
                    blocked = True
                    break
        if blocked:
            continue
        if any(sum(machine[n].free.get(r, 0) for n in ids) < size for r, size in requests.items()):
            continue
        emitted.append(mask)
    if not emitted:
        return {}
    hints = [TopologyHint(bitmask.to_frozenset(m), m.bit_count() == min_width) for m in emitted]
    return {resource: list(hints) for resource in requests}
