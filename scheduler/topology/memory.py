"""The kubelet's static memory manager, emulated (pure): what a Guaranteed pod pins (`memory` and `hugepages-*`
per container, or per pod in pod scope), the machine state its hints are built from, which NUMA nodes it takes
memory from (`Allocate`), and which resources are to blame when a merge refuses.

Part of `scheduler.topology` beside the hint merge; `scheduler.placement` plans a pod's memory with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from lahar.kube import quantity
from lahar.scheduler.topology import bitmask, hints
from lahar.scheduler.topology.cpus import container_requests, is_guaranteed
from lahar.scheduler.topology.merging import TopologyHint, merge

__all__ = ["MemoryTopology", "container_memory_requests", "is_memory", "numa_machine", "short_memory",
           "subtract_held", "take_memory"]


class MemoryTopology(Protocol):
    """What the memory manager reads of a node's topology (`scheduler.placement.numatopology.NodeTopology`)."""

    @property
    def numa_nodes(self) -> tuple[int, ...]: ...

    @property
    def memory(self) -> Mapping[int, Mapping[str, int]] | None: ...

    @property
    def options(self) -> Mapping[str, str]: ...

    @property
    def distances(self) -> Mapping[int, Sequence[int]] | None: ...


def is_memory(resource: str) -> bool:
    return resource == "memory" or resource.startswith("hugepages-")


def container_memory_requests(pod: Mapping[str, Any], scope: str = "container") -> list[dict[str, int]]:
    """What the static memory manager pins (`getRequestedResources`): `memory` and `hugepages-*` bytes of each app
    container of a Guaranteed pod ([] otherwise); pod scope: one entry for the pod (`pod_request` per resource,
    init containers and sidecars included). Zero requests are left out."""
    if not is_guaranteed(pod):
        return []
    spec = pod.get("spec") or {}

    def requests(c: Mapping[str, Any]) -> dict[str, int]:
        wanted, _ = container_requests(c)
        return {r: v for r, v in ((str(r), quantity.parse(q).value()) for r, q in wanted.items() if is_memory(str(r)))
                if v > 0}

    apps = [requests(c) for c in spec.get("containers") or ()]
    if scope != "pod":
        return apps
    inits = [(requests(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or ()]
    names = sorted({r for req in apps for r in req} | {r for req, _ in inits for r in req})
    total = {r: hints.pod_request([(req.get(r, 0), side) for req, side in inits], [req.get(r, 0) for req in apps])
             for r in names}
    return [{r: v for r, v in total.items() if v > 0}]


def _best_memory_hint(candidates: Sequence[TopologyHint]) -> TopologyHint | None:
    """The memory manager's `findBestHint`: preferred first, then the narrowest (fewest nodes, lowest mask)."""
    best: TopologyHint | None = None
    for h in candidates:
        if best is None or (h.preferred and not best.preferred) or (
                h.preferred == best.preferred and h.mask is not None and best.mask is not None
                and bitmask.is_narrower(h.mask, best.mask)):
            best = h
    return best


def take_memory(requests: Mapping[str, int], machine: Mapping[int, hints.NUMAMemory],
                affinity: Iterable[int] | None,
                generated: Mapping[str, list[TopologyHint]] | None = None) -> dict[int, dict[str, int]] | None:
    """The static memory manager's `Allocate` for one container (or pod): the merged hint's NUMA nodes, the
    default hint when the merge had no preference, extended to the best hint containing it when its nodes lack the
    free memory; then every resource is taken from the nodes in id order, each filled before the next. None when
    no NUMA nodes can hold the request (the kubelet would fail the pod's admission). `generated`: the hints
    `hints.memory_hints(requests, machine)` already gave, if at hand."""
    if not requests:
        return {}
    if generated is None:
        generated = hints.memory_hints(requests, machine)
    offered = generated.get("memory") or next(iter(generated.values()), [])
    nodes = None if affinity is None else frozenset(affinity)
    if nodes is None:
        best = _best_memory_hint(offered)
        if best is None:
            return None
        nodes = best.affinity or frozenset()

    def satisfied(ids: frozenset[int]) -> bool:
        return all(sum(max(0, machine[n].free.get(r, 0)) for n in ids if n in machine) >= size
                   for r, size in requests.items())

    if not satisfied(nodes):
        best = _best_memory_hint([h for h in offered if h.affinity is not None and nodes <= h.affinity])
        if best is None or best.affinity is None:
            return None
        nodes = best.affinity
    out: dict[int, dict[str, int]] = {}
    for r, size in requests.items():
        left = size
        for n in sorted(nodes):
            free = machine[n].free.get(r, 0) if n in machine else 0
            if free <= 0:
                continue
            taken = min(free, left)
            out.setdefault(n, {})[r] = taken
            left -= taken
            if not left:
                break
        if left:
            return None
    return out


def numa_machine(topo: MemoryTopology, free: Mapping[int, Mapping[str, int]]) -> dict[int, hints.NUMAMemory]:
    """The memory manager's machine state for `hints.memory_hints`: allocatable and free bytes per NUMA node."""
    memory = topo.memory or {}
    return {n: hints.NUMAMemory(memory.get(n, {}), {r: max(0, v) for r, v in free.get(n, {}).items()})
            for n in topo.numa_nodes}


def short_memory(policy: str | None, requests: Mapping[str, int], machine: Mapping[int, hints.NUMAMemory],
                  topo: MemoryTopology) -> list[str]:
    """Which of the memory resources are to blame (only asked on a refusal): those no NUMA nodes can hold, or
    (with `policy`) whose hints alone the policy would not admit; every requested one when only together."""
    if not requests:
        return []
    short = []
    for r in sorted(requests):
        alone = hints.memory_hints({r: requests[r]}, machine)
        if not alone or (policy is not None and not merge(policy, [alone], list(topo.numa_nodes), topo.options,
                                                          topo.distances)[1]):
            short.append(r)
    if short or policy is not None:
        return short
    return sorted(requests)


def subtract_held(free: dict[int, dict[str, int]], held: Mapping[int, Mapping[str, int]], sign: int,
              grow: bool = False) -> None:
    """free[n][r] += sign * held[n][r] for the NUMA nodes `free` knows (every node of `held` with `grow`)."""
    for n, res in held.items():
        slot = free.get(n)
        if slot is None:
            if not grow:
                continue
            slot = free[n] = {}
        for r, v in res.items():
            slot[r] = slot.get(r, 0) + sign * v
