"""The kubelet's static CPU manager, emulated (pure): which containers of a pod get exclusive CPUs (Guaranteed
QoS, integer CPU requests; init containers and sidecars), and which CPUs it picks (`allocateCPUs`, whole sockets
then whole cores then threads, the hint's NUMA nodes first).

Part of `scheduler.topology` beside the hint merge; `scheduler.placement` plans a pod's CPUs with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from lahar.kube import quantity

__all__ = ["CPUTopology", "container_cpu_requests", "container_requests", "cpuset_text", "init_cpu_requests", "is_guaranteed",
           "take_cpus"]


class CPUTopology(Protocol):
    """What the CPU picks read of a node's topology (`scheduler.placement.numatopology.NodeTopology` has it)."""

    @property
    def cpu_numa(self) -> Mapping[int, int]: ...

    @property
    def cpu_socket(self) -> Mapping[int, int]: ...

    @property
    def cpu_core(self) -> Mapping[int, int]: ...

    @property
    def layout(self) -> tuple[Mapping[int, frozenset[int]], Mapping[tuple[int, int], frozenset[int]]]:
        """CPUs per socket and per (socket, core)."""


def container_requests(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(requests with limits as their defaults, limits) of one container."""
    r = container.get("resources") or {}
    limits = r.get("limits") or {}
    requests = r.get("requests") or {}
    return {**limits, **requests}, limits


def is_guaranteed(pod: Mapping[str, Any]) -> bool:
    """Kubernetes' QoS class Guaranteed: every container has cpu and memory limits equal to its requests
    (requests default to limits)."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    if not containers:
        return False
    for c in containers:
        r = c.get("resources") or {}
        limits = r.get("limits") or {}
        requests = r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits:
                return False
            if name in requests and quantity.parse(requests[name]).milli_value() != \
                    quantity.parse(limits[name]).milli_value():
                return False
        for name, value in requests.items():
            if name in limits and quantity.parse(value).milli_value() != quantity.parse(limits[name]).milli_value():
                return False
    return True


def container_cpu_requests(pod: Mapping[str, Any], field_: str = "containers") -> list[tuple[str, int]]:
    """(container name, exclusive CPUs) for the app containers (`field_="initContainers"`: the init containers):
    the static CPU manager pins CPUs only for a Guaranteed pod's containers with an integer CPU request; others
    get 0 (the shared pool)."""
    spec = pod.get("spec") or {}
    guaranteed = is_guaranteed(pod)
    out = []
    for c in spec.get(field_) or ():
        n = 0
        if guaranteed:
            requests, limits = container_requests(c)
            raw = requests.get("cpu", limits.get("cpu"))
            if raw is not None:
                milli = quantity.parse(raw).milli_value()
                n = milli // 1000 if milli % 1000 == 0 else 0
        out.append((c.get("name") or "", int(n)))
    return out


def init_cpu_requests(pod: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    """(name, exclusive CPUs, is a sidecar) per init container, in spec order. The CPU manager admits them before
    the app containers; a plain init container's CPUs may be given again to the containers after it (it has
    exited: `cpusToReuse`), a sidecar's (`restartPolicy: Always`) may not (it keeps running)."""
    inits = (pod.get("spec") or {}).get("initContainers") or ()
    sidecar = {(c.get("name") or ""): c.get("restartPolicy") == "Always" for c in inits}
    return [(name, n, sidecar.get(name, False)) for name, n in container_cpu_requests(pod, "initContainers")]


def _take_by_topology(available: set[int], count: int, topo: CPUTopology) -> list[int]:
    """The CPU manager's `takeByTopology`: whole sockets, then whole cores, then single threads from the cores and
    sockets with the fewest free CPUs (fill partly used cores first). `available` must hold at least `count`."""
    taken: list[int] = []
    if count <= 0:
        return taken
    free = set(available)
    sockets, cores = topo.layout

    def take(cpus: Iterable[int]) -> None:
        for c in sorted(cpus):
            taken.append(c)
            free.discard(c)

    for cpus in sockets.values():
        if count - len(taken) >= len(cpus) and cpus <= free:
            take(cpus)
    if count - len(taken) >= 2:
        for cpus in cores.values():
            if count - len(taken) >= len(cpus) and cpus <= free:
                take(cpus)
    elif count - len(taken) == 1:
        for cpus in cores.values():
            if len(cpus) == 1 and cpus <= free:
                take(cpus)
                break
    if len(taken) < count:
        used_sockets = {topo.cpu_socket.get(c, 0) for c in taken}
        free_on_socket = {s: len(cpus & free) for s, cpus in sockets.items()}
        free_on_core = {k: len(cpus & free) for k, cpus in cores.items() if not cpus.isdisjoint(free)}

        def order(c: int) -> tuple[int, int, int, int, int, int]:
            s, k = topo.cpu_socket.get(c, 0), topo.cpu_core.get(c, c)
            return (s not in used_sockets, free_on_socket[s], free_on_core[(s, k)], s, k, c)

        take(sorted(free, key=order)[:count - len(taken)])
    return taken


def take_cpus(available: Iterable[int], count: int, topo: CPUTopology,
              affinity: Iterable[int] | None = None) -> list[int] | None:
    """The static CPU manager's `allocateCPUs`: CPUs on the hint's NUMA nodes first (by topology), the rest from
    anywhere. None when fewer than `count` CPUs are free."""
    free = set(available)
    if len(free) < count:
        return None
    result: list[int] = []
    if affinity is not None:
        nodes = set(affinity)
        aligned = {c for c in free if topo.cpu_numa.get(c) in nodes}
        result = _take_by_topology(aligned, min(len(aligned), count), topo)
        free -= set(result)
    result += _take_by_topology(free, count - len(result), topo)
    return sorted(result)


def cpuset_text(cpus: Iterable[int]) -> str:
    ids = sorted(cpus)
    parts: list[str] = []
    start = prev = None
    for c in ids:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            parts.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = c
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts)
