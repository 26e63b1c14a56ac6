"""NUMA topology readers and the kubelet CPU / memory manager emulation (pure): the node's topology from its
Volcano `Numatopology`, a pod's guaranteed CPU and memory requests, kubelet-exact CPU and memory picks, the
reasons a NUMA merge refuses, and the CPUs and memory that placed pods hold (read from their annotations).

Shared by the numa-aware and deviceshare plugins (through `placement`); plugins import it, never each other.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from lahar.kube import quantity
from lahar.scheduler.topology import (
    BEST_EFFORT,
    NONE,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    TOPOLOGY_AFFINITY_MESSAGE,
    TopologyHint,
    bitmask,
    hints,
    merge,
)

if TYPE_CHECKING:
    pass

NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
TOPOLOGY_DECISION_ANNOTATION = "volcano.sh/topology-decision"
ALLOCATION_ANNOTATION = "lahar.sh/numa-allocation"  # exact CPUs / NUMA nodes chosen (lahar's own, for the node side)
OPTIONS_ANNOTATION = "lahar.sh/topology-manager-policy-options"  # node: the kubelet's options, JSON object
SCOPE_ANNOTATION = "lahar.sh/topology-manager-scope"  # node: container (default) | pod
DISTANCES_ANNOTATION = "lahar.sh/numa-distances"  # node: {"0": [10, 21], "1": [21, 10]}
# Numatopology: allocatable memory and hugepages per NUMA node, {"0": {"memory": "1Ti", "hugepages-1Gi": "0"}}
NUMA_MEMORY_ANNOTATION = "lahar.sh/numa-memory"

_RANK = {NONE: 0, BEST_EFFORT: 1, RESTRICTED: 2, SINGLE_NUMA_NODE: 3}


# --- pure cores ---------------------------------------------------------------------------------------------------


def effective_policy(node_policy: str, task_policy: str) -> str:
    """The policy the scheduler merges under: the stricter of the node's and the task's (unknown task values and
    "" count as none). none < best-effort < restricted < single-numa-node."""
    node_policy = node_policy if node_policy in _RANK else NONE
    if _RANK.get(task_policy, 0) > _RANK[node_policy]:
        return task_policy
    return node_policy


@dataclass(frozen=True)
class NodeTopology:
    """A node's NUMA layout and Topology Manager configuration, from its Numatopology (and node annotations)."""

    name: str
    numa_nodes: tuple[int, ...]
    policy: str
    cpu_manager_policy: str
    scope: str
    options: Mapping[str, str]
    distances: Mapping[int, Sequence[int]] | None
    cpu_numa: Mapping[int, int]
    cpu_socket: Mapping[int, int]
    cpu_core: Mapping[int, int]
    allocatable: frozenset[int]  # the shared pool the CPU manager may hand out
    # allocatable bytes per NUMA node and resource (`memory`, `hugepages-<size>`) from `lahar.sh/numa-memory`;
    # None: not published (or malformed), memory gives no preference
    memory: Mapping[int, Mapping[str, int]] | None = None

    @property
    def static(self) -> bool:
        return self.cpu_manager_policy == "static"

    @functools.cached_property
    def layout(self) -> tuple[dict[int, frozenset[int]], dict[tuple[int, int], frozenset[int]]]:
        """CPUs per socket and per (socket, core), for `take_cpus`."""
        sockets: dict[int, set[int]] = {}
        cores: dict[tuple[int, int], set[int]] = {}
        for cpu in self.cpu_numa:
            sockets.setdefault(self.cpu_socket.get(cpu, 0), set()).add(cpu)
            cores.setdefault((self.cpu_socket.get(cpu, 0), self.cpu_core.get(cpu, cpu)), set()).add(cpu)
        return ({k: frozenset(v) for k, v in sorted(sockets.items())},
                {k: frozenset(v) for k, v in sorted(cores.items())})

    def capacity(self) -> dict[int, int]:
        out = dict.fromkeys(self.numa_nodes, 0)
        for n in self.cpu_numa.values():
            out[n] = out.get(n, 0) + 1
        return out

    def per_numa(self, cpus: Iterable[int]) -> dict[int, int]:
        out = dict.fromkeys(self.numa_nodes, 0)
        for c in cpus:
            n = self.cpu_numa.get(c)
            if n is not None:
                out[n] = out.get(n, 0) + 1
        return out


def node_topology(numatopology: Mapping[str, Any], node: Mapping[str, Any] | None = None) -> NodeTopology:
    """Parse a Volcano Numatopology (`spec.policies`, `spec.numares.cpu.allocatable`, `spec.cpuDetail` with
    Go-omitempty zeros). Options, scope and distances come from `spec.policies` keys `TopologyManagerScope` /
    `TopologyManagerPolicyOptions` or the node annotations `lahar.sh/topology-manager-*`."""
    meta = numatopology.get("metadata") or {}
    spec = numatopology.get("spec") or {}
    policies = spec.get("policies") or {}
    ann = ((node or {}).get("metadata") or {}).get("annotations") or {}
    details = spec.get("cpuDetail") or {}
    cpu_numa = {int(c): int((d or {}).get("numa") or 0) for c, d in details.items()}
    cpu_socket = {int(c): int((d or {}).get("socket") or 0) for c, d in details.items()}
    cpu_core = {int(c): int((d or {}).get("core") or 0) for c, d in details.items()}
    numares = (spec.get("numares") or {}).get("cpu") or {}
    text = numares.get("allocatable")
    allocatable = frozenset(hints.parse_cpuset(str(text))) if text is not None else frozenset(cpu_numa)
    options_raw = policies.get("TopologyManagerPolicyOptions") or ann.get(OPTIONS_ANNOTATION) or {}
    options = json.loads(options_raw) if isinstance(options_raw, str) else dict(options_raw)
    distances_raw = ann.get(DISTANCES_ANNOTATION)
    distances = ({int(k): [int(x) for x in v] for k, v in json.loads(distances_raw).items()}
                 if distances_raw else None)
    memory = _numa_memory(meta.get("annotations") or {})
    numa_nodes = tuple(sorted(set(cpu_numa.values()) | set(distances or {}) | set(memory or {}))) or (0,)
    return NodeTopology(
        name=meta.get("name") or "",
        numa_nodes=numa_nodes,
        policy=policies.get("TopologyManagerPolicy") or NONE,
        cpu_manager_policy=policies.get("CPUManagerPolicy") or "none",
        scope=policies.get("TopologyManagerScope") or ann.get(SCOPE_ANNOTATION) or "container",
        options={str(k): str(v) for k, v in options.items()},
        distances=distances,
        cpu_numa=cpu_numa, cpu_socket=cpu_socket, cpu_core=cpu_core,
        allocatable=allocatable & frozenset(cpu_numa) if cpu_numa else allocatable,
        memory=memory,
    )


def is_memory(resource: str) -> bool:
    return resource == "memory" or resource.startswith("hugepages-")


def _numa_memory(annotations: Mapping[str, Any]) -> dict[int, dict[str, int]] | None:
    """`lahar.sh/numa-memory` → {NUMA id: {resource: bytes}}; None when absent or malformed (never raises)."""
    raw = annotations.get(NUMA_MEMORY_ANNOTATION)
    if not raw or not isinstance(raw, str):
        return None
    try:
        body = json.loads(raw)
        if not isinstance(body, dict) or not body:
            return None
        out: dict[int, dict[str, int]] = {}
        for numa_id, res in body.items():
            if not isinstance(res, dict):
                return None
            slot = out[int(numa_id)] = {}
            for r, v in res.items():
                if not is_memory(str(r)) or isinstance(v, bool) or not isinstance(v, (str, int)):
                    return None
                slot[str(r)] = quantity.parse(v).value()
                if slot[str(r)] < 0 or int(numa_id) < 0:
                    return None
        return out
    except (ValueError, TypeError, ArithmeticError):
        return None


def _resources(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
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
            requests, limits = _resources(c)
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


def _take_by_topology(available: set[int], count: int, topo: NodeTopology) -> list[int]:
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


def take_cpus(available: Iterable[int], count: int, topo: NodeTopology,
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


def container_memory_requests(pod: Mapping[str, Any], scope: str = "container") -> list[dict[str, int]]:
    """What the static memory manager pins (`getRequestedResources`): `memory` and `hugepages-*` bytes of each app
    container of a Guaranteed pod ([] otherwise); pod scope: one entry for the pod (`pod_request` per resource,
    init containers and sidecars included). Zero requests are left out."""
    if not is_guaranteed(pod):
        return []
    spec = pod.get("spec") or {}

    def requests(c: Mapping[str, Any]) -> dict[str, int]:
        wanted, _ = _resources(c)
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


def quantity_text(resource: str, value: int) -> str:
    return quantity.Quantity(value, quantity.Format.BINARY_SI).canonical if is_memory(resource) else str(value)


def decision_annotation(per_numa: Mapping[int, Mapping[str, int]]) -> str:
    """Volcano's `PodResourceDecision` JSON: `{"numa": {"<id>": {"<resource>": "<quantity>"}}}` (memory and
    hugepages in bytes, rendered as binary-SI quantities: `16Gi`)."""
    body = {str(n): {r: quantity_text(r, v) for r, v in sorted(res.items()) if v}
            for n, res in sorted(per_numa.items()) if any(res.values())}
    return orjson.dumps({"numa": body}, option=orjson.OPT_SORT_KEYS).decode()


def normalize_reverse(values: np.ndarray, max_score: float = 100.0) -> np.ndarray:
    """Volcano `util.NormalizeScore(100, reverse=true, ...)`: the smallest value scores highest."""
    if not len(values):
        return values.astype(np.float64)
    top = float(values.max())
    if top <= 0:
        return np.full(len(values), max_score)
    return max_score - np.floor(max_score * values / top)


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


def numa_machine(topo: NodeTopology, free: Mapping[int, Mapping[str, int]]) -> dict[int, hints.NUMAMemory]:
    """The memory manager's machine state for `hints.memory_hints`: allocatable and free bytes per NUMA node."""
    memory = topo.memory or {}
    return {n: hints.NUMAMemory(memory.get(n, {}), {r: max(0, v) for r, v in free.get(n, {}).items()})
            for n in topo.numa_nodes}


def short_memory(policy: str | None, requests: Mapping[str, int], machine: Mapping[int, hints.NUMAMemory],
                  topo: NodeTopology) -> list[str]:
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


def memory_reason(container: str, short: Sequence[str]) -> str:
    return f"container {container} cannot be assigned by numa: not enough free {', '.join(short)} on NUMA nodes"


def numa_reason(container: str, policy: str, memory_short: Sequence[str] = ()) -> str:
    if memory_short:
        return (f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE}): "
                f"not enough free {', '.join(memory_short)} on NUMA nodes")
    return f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE})"


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


def held_memory(annotations: Mapping[str, str]) -> dict[int, dict[str, int]]:
    """Memory and hugepages a running pod holds per NUMA node, from its `volcano.sh/topology-decision`."""
    raw = annotations.get(TOPOLOGY_DECISION_ANNOTATION)
    if not raw:
        return {}
    try:
        numa = json.loads(raw).get("numa") or {}
    except (ValueError, AttributeError):
        return {}
    out: dict[int, dict[str, int]] = {}
    if not isinstance(numa, dict):
        return out
    for numa_id, res in numa.items():
        if not isinstance(res, dict):
            continue
        for r, v in res.items():
            if not is_memory(str(r)):
                continue
            try:
                out.setdefault(int(numa_id), {})[str(r)] = max(0, quantity.parse(v).value())
            except (ValueError, TypeError, ArithmeticError):
                continue
    return out


def held_cpus(annotations: Mapping[str, str], topo: NodeTopology, free: set[int]) -> set[int]:
    raw = annotations.get(ALLOCATION_ANNOTATION)
    if raw:
        try:
            cpus = (json.loads(raw).get("cpus") or {})
            return {c for v in cpus.values() for c in hints.parse_cpuset(v)}
        except (ValueError, AttributeError, TypeError):
            pass
    raw = annotations.get(TOPOLOGY_DECISION_ANNOTATION)
    if not raw:
        return set()
    try:
        numa = json.loads(raw).get("numa") or {}
    except (ValueError, AttributeError):
        return set()
    held: set[int] = set()
    for numa_id, res in numa.items():
        try:
            count = int(quantity.parse((res or {}).get("cpu", "0")).value())
            nid = int(numa_id)
        except (ValueError, TypeError):
            continue
        on_node = sorted(c for c in free - held if topo.cpu_numa.get(c) == nid)
        held.update(on_node[:max(0, count)])
    return held
