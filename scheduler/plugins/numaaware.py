"""numa-aware: a node passes only if its Topology Manager would admit the pod with what is free per NUMA node; the
score prefers placements on fewer NUMA nodes; the chosen CPUs are reserved for the rest of the session.

Sits between the snapshot (Volcano `Numatopology` objects in `Snapshot.extras`) and the bind: a per-session
`Placement`, shared with the deviceshare plugin (which registers the devices as more hint providers), plans every
(task, node) pair — hints, kubelet-exact merge (`scheduler.topology.merge`), concrete CPUs and devices — and its
plans become the `volcano.sh/topology-decision` annotation written with the bind (spec volcano.md §5.4).

Beyond Volcano: a task's `volcano.sh/numa-topology-policy` stricter than its node's (e.g. `single-numa-node` on a
`best-effort` node) is honoured by the scheduler — the merge runs under the stricter policy — instead of making
the node unusable; a weaker one changes nothing (the node's kubelet enforces its own policy regardless).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import orjson

from lahar.kube import quantity
from lahar.scheduler.devices import inventory as inventories
from lahar.scheduler.framework.hooks import NodeFilter
from lahar.scheduler.framework.snapshot import ALLOCATED, Task, TaskStatus
from lahar.scheduler.topology import (
    BEST_EFFORT,
    NONE,
    POLICIES,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    TOPOLOGY_AFFINITY_MESSAGE,
    PolicyOptionError,
    TopologyHint,
    bitmask,
    hints,
    merge,
)

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session

__all__ = [
    "ALLOCATION_ANNOTATION",
    "NUMA_POLICY_ANNOTATION",
    "OPTIONS_ANNOTATION",
    "SCOPE_ANNOTATION",
    "TOPOLOGY_DECISION_ANNOTATION",
    "NUMA_MEMORY_ANNOTATION",
    "DeviceSide",
    "NodeTopology",
    "NumaAware",
    "Placement",
    "Plan",
    "Rejection",
    "container_cpu_requests",
    "container_memory_requests",
    "decision_annotation",
    "effective_policy",
    "explain",
    "is_guaranteed",
    "node_topology",
    "normalize_reverse",
    "cached",
    "placement",
    "take_cpus",
    "take_memory",
]

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


def _is_memory(resource: str) -> bool:
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
                if not _is_memory(str(r)) or isinstance(v, bool) or not isinstance(v, (str, int)):
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
        return {r: v for r, v in ((str(r), quantity.parse(q).value()) for r, q in wanted.items() if _is_memory(str(r)))
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


def _quantity_text(resource: str, value: int) -> str:
    return quantity.Quantity(value, quantity.Format.BINARY_SI).canonical if _is_memory(resource) else str(value)


def decision_annotation(per_numa: Mapping[int, Mapping[str, int]]) -> str:
    """Volcano's `PodResourceDecision` JSON: `{"numa": {"<id>": {"<resource>": "<quantity>"}}}` (memory and
    hugepages in bytes, rendered as binary-SI quantities: `16Gi`)."""
    body = {str(n): {r: _quantity_text(r, v) for r, v in sorted(res.items()) if v}
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


# --- the per-session placement shared by numa-aware and deviceshare --------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    reason: str
    unresolvable: bool = False
    merges: tuple[dict[str, Any], ...] = ()  # the merges made before the refusal (for explain)


@dataclass
class Plan:
    """One (task, node) placement: policy, every provider's hints and the merged hint per merge, the CPUs (per
    container) and the device choice (deviceshare's, opaque here)."""

    policy: str
    merges: list[dict[str, Any]] = field(default_factory=list)  # explain: {"container", "providers", "hint", "admit"}
    cpus: dict[str, list[int]] = field(default_factory=dict)
    devices: Any = None
    numa: frozenset[int] = frozenset()
    per_numa: dict[int, dict[str, int]] = field(default_factory=dict)
    memory: dict[int, dict[str, int]] = field(default_factory=dict)  # memory/hugepages bytes per NUMA node
    _rendered: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _memory_key: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    def numa_count(self) -> int:
        return len(self.numa)

    def memory_key(self) -> tuple[Any, ...]:
        """The memory taken, as a hashable node-agnostic key (part of the node's reservation key)."""
        if self._memory_key is None:
            self._memory_key = tuple(sorted((n, tuple(sorted(r.items()))) for n, r in self.memory.items()))
        return self._memory_key

    def rendered(self) -> dict[str, str]:
        """The NUMA annotations (`volcano.sh/topology-decision`, `lahar.sh/numa-allocation`): node-agnostic, so
        rendered once per plan (the nodes of one class share their plan)."""
        if self._rendered is None:
            body: dict[str, Any] = {"policy": self.policy, "numa": sorted(self.numa)}
            if self.cpus:
                body["cpus"] = {c: _cpuset(v) for c, v in self.cpus.items()}
            self._rendered = {TOPOLOGY_DECISION_ANNOTATION: decision_annotation(self.per_numa),
                              ALLOCATION_ANNOTATION: orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()}
        return self._rendered


class DeviceSide(Protocol):
    """What deviceshare contributes to a placement (implemented by `scheduler.plugins.deviceshare.DeviceShare`)."""

    def device_request(self, task: Task) -> Any | None: ...

    def device_providers(self, task: Task, node: int, request: Any) -> dict[str, list[TopologyHint] | None] | str:
        """Hints per device resource on `node` (None = no preference), or the reason the node cannot fit them."""

    def device_allocate(self, task: Task, node: int, request: Any, hint: TopologyHint | None) -> Any | str:
        """The concrete devices within `hint` (an opaque plan), or why not."""

    def device_numa(self, node: int, plan: Any) -> dict[int, dict[str, int]]: ...

    def device_key(self, plan: Any) -> Any:
        """A hashable, node-agnostic key of what the plan takes (indices and bus ids, no UUIDs)."""

    def device_reserve(self, node: int, plan: Any) -> None: ...

    def device_release(self, node: int, plan: Any) -> None: ...

    def device_annotations(self, task: Task, node: int, plan: Any) -> dict[str, str]: ...


_PLACEMENTS: weakref.WeakKeyDictionary[Any, Placement] = weakref.WeakKeyDictionary()


def placement(ssn: Session) -> Placement:
    """The session's placement (created on first use by whichever plugin opens first)."""
    p = _PLACEMENTS.get(ssn)
    if p is None:
        p = _PLACEMENTS[ssn] = Placement(ssn)
    return p


_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,}")


_CACHE_LIMIT = 200_000
# cross-session caches keyed by (kind, name, resourceVersions): an object with the same resourceVersion has the same
# content (the API server's contract), so what is derived from it is computed once, not at every session open
_STATIC: dict[Any, Any] = {}


def _rv(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return ""
    return (obj.get("metadata") or {}).get("resourceVersion") or None


def cached(kind: str, name: str, objs: Sequence[Mapping[str, Any] | None], compute: Any) -> Any:
    """`compute()` once per (kind, name, resourceVersion of each of `objs`) across sessions; computed every time
    when an object carries no resourceVersion (hand-built snapshots: no way to tell a change)."""
    rvs = tuple(_rv(o) for o in objs)
    if None in rvs:
        return compute()
    key = (kind, name, rvs)
    hit = _STATIC.get(key, _STATIC)
    if hit is _STATIC:
        if len(_STATIC) >= _CACHE_LIMIT:
            _STATIC.clear()
        hit = _STATIC[key] = compute()
    return hit


def _static_fingerprint(obj: Mapping[str, Any], numatopology: Mapping[str, Any] | None,
                        device: Mapping[str, Any] | None) -> int:
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    dev = _UUID.sub("", repr((ann.get("lahar.sh/gpu-topology"), ann.get("hami.io/node-nvidia-register"),
                              ann.get("volcano.sh/node-vgpu-register"))))
    spec = (numatopology or {}).get("spec") or {}
    numa_ann = ((numatopology or {}).get("metadata") or {}).get("annotations") or {}
    numa = repr((spec.get("policies"), spec.get("numares"), spec.get("resReserved"), spec.get("cpuDetail"),
                 numa_ann.get(NUMA_MEMORY_ANNOTATION)))
    # a whole-GPU device's id is its UUID: stripped, like the names (mapped back per node at close)
    devices = _UUID.sub("", repr(((device or {}).get("spec") or {}).get("devices")))
    return hash((repr((obj.get("status") or {}).get("allocatable")), dev, numatopology is None, numa,
                 device is None, devices, repr(ann.get(OPTIONS_ANNOTATION)), repr(ann.get(SCOPE_ANNOTATION)),
                 repr(ann.get(DISTANCES_ANNOTATION))))


def _fingerprint(node: Any, numatopology: Mapping[str, Any] | None, device: Mapping[str, Any] | None) -> Any:
    """What a plan on the node depends on, names and GPU UUIDs aside: allocatable, device annotations, the
    Numatopology and Device specs, and the pods already there: a node with a pod that holds CPUs, memory or devices
    we can see (its annotations, extended resources) is its own class; pods that hold nothing NUMA-placed
    (DaemonSets, CPU-only pods of other schedulers) leave the node in its class. The inventory part is cached
    across sessions by resourceVersions (`cached`)."""
    for t in placed_pods(node):
        if cached("holds", t.uid, (t.pod,), lambda t=t: _holds_topology(t.pod)):
            return ("node", node.name)
    obj = node.node
    return cached("fingerprint", node.name, (obj, numatopology, device),
                  lambda: _static_fingerprint(obj, numatopology, device))


def placed_pods(node: Any) -> Iterator[Task]:
    """The pods holding resources on a snapshot node: the session jobs' placed tasks and the other pods bound there
    (other schedulers, pods without a PodGroup): what the node's CPUs, memory and devices are free of."""
    for t in itertools.chain(node.tasks.values(), node.others):
        if t.status in ALLOCATED or t.status is TaskStatus.RELEASING:
            yield t


_HOLDING_ANNOTATIONS = (ALLOCATION_ANNOTATION, TOPOLOGY_DECISION_ANNOTATION, inventories.DEVICE_ALLOCATED_ANNOTATION,
                        inventories.HAMI_MIG_ALLOCATIONS_ANNOTATION, inventories.MIG_INSTANCES_ANNOTATION,
                        *inventories.HAMI_ALLOCATED_ANNOTATIONS, *inventories.VOLCANO_ALLOCATED_ANNOTATIONS)


def _holds_topology(pod: Mapping[str, Any]) -> bool:
    """Whether the pod holds something a plan sees: CPUs, memory or devices recorded in its annotations, or an
    extended resource (GPUs, VFs, MIG and vGPU slices counted from its requests)."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    if any(ann.get(k) for k in _HOLDING_ANNOTATIONS):
        return True
    spec = pod.get("spec") or {}
    for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        res = c.get("resources") or {}
        if any("/" in r for part in (res.get("requests") or {}, res.get("limits") or {}) for r in part):
            return True
    return False


def _task_signature(task: Task) -> str:
    pod = task.pod
    spec = pod.get("spec") or {}
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    key = json.dumps([[c.get("resources") for c in spec.get("initContainers") or ()],
                      [(c.get("name"), c.get("resources")) for c in spec.get("containers") or ()],
                      {k: v for k, v in sorted(ann.items()) if k.startswith(("volcano.sh/", "nvidia.com/", "hami.io/",
                                                                             "scheduling.koordinator.sh/"))}],
                     sort_keys=True, default=str)
    return hashlib.blake2b(key.encode(), digest_size=12).hexdigest()


class _ClassTable:
    """One task signature's answers per node class (arrays indexed by class id, grown as classes appear)."""

    __slots__ = ("arrays_seen", "bad", "class_seen", "device_score", "done", "node_bad", "numa_count", "reasons",
                 "uniform", "unresolvable")
    _PER_CLASS = ("bad", "device_score", "done", "numa_count", "reasons", "unresolvable")

    def __init__(self) -> None:
        self.node_bad: np.ndarray | None = None  # per node: fits and its class refuses (see Placement._rejected)
        self.arrays_seen = 0
        self.class_seen = 0
        # (NUMA count, device score) shared by every class the task fits so far, None once two differ: scores
        # over candidates are then constant (no per-node work)
        self.uniform: tuple[float, float] | None | bool = True
        self.done = np.zeros(0, dtype=bool)
        self.bad = np.zeros(0, dtype=bool)
        self.unresolvable = np.zeros(0, dtype=bool)
        self.reasons = np.zeros(0, dtype=object)
        self.numa_count = np.zeros(0, dtype=np.float64)
        self.device_score = np.zeros(0, dtype=np.float64)

    def reserve(self, classes: int) -> None:
        size = len(self.done)
        if classes <= size:
            return
        grow = max(classes, 2 * size, 16) - size
        for attr in self._PER_CLASS:
            old = getattr(self, attr)
            setattr(self, attr, np.concatenate([old, np.zeros(grow, dtype=old.dtype)]))

    def record(self, cid: int, result: Plan | Rejection) -> None:
        self.done[cid] = True
        if isinstance(result, Rejection):
            self.bad[cid] = True
            self.reasons[cid] = result.reason
            self.unresolvable[cid] = result.unresolvable
        else:
            got = (float(result.numa_count() if result.policy != NONE else 0),
                   float(getattr(result.devices, "score", 0.0)))
            self.numa_count[cid], self.device_score[cid] = got
            if self.uniform is True:
                self.uniform = got
            elif self.uniform != got:
                self.uniform = None


class Placement:
    """Plans (task, node) pairs and keeps the session's NUMA reservations: a task placed earlier in the session
    holds its CPUs (and devices) until the statement that placed it is discarded."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cpu_side = False  # numa-aware enabled: CPUs are planned and the task policy is honoured
        self.devices: DeviceSide | None = None
        nodes = ssn.nodes
        self._numatopos = ssn.snapshot.extras.get("numatopologies", {})
        devices = ssn.snapshot.extras.get("devices", {})
        # per-node state is built lazily: only nodes a plan is made for (class representatives) are parsed
        self._topologies: dict[int, NodeTopology | None] = {}
        self._free: dict[int, set[int]] = {}
        self._free_memory: dict[int, dict[int, dict[str, int]]] = {}
        # node equivalence classes: nodes with the same fingerprint (inventory and pods, names and UUIDs aside)
        # and the same tasks reserved this session get the same plan, so one node per class is planned
        self.shape = [_fingerprint(n, self._numatopos.get(n.name), devices.get(n.name)) for n in nodes]
        # what this session reserved on each node, as node-agnostic keys (CPU ids, GPU indices, VF bus ids, ...):
        # two nodes of one shape holding the same reservations are in the same state
        self.held: list[dict[Any, int]] = [{} for _ in nodes]
        self.held_key: list[frozenset[Any]] = [frozenset()] * len(nodes)
        self._class_ids: dict[Any, int] = {}
        self.class_of = np.array([self._class_id(i) for i in range(len(nodes))], dtype=np.int64)
        self.cache: dict[tuple[Any, str], Plan | Rejection] = {}
        self.signatures: dict[str, str] = {}
        self.reserved: dict[str, tuple[int, Plan]] = {}
        self.reserved_on: dict[int, dict[str, Plan]] = {}  # the same, per node
        self.placing: str | None = None  # the task whose placement is being reserved (on_allocate)
        self.closed = False
        self.version = 0  # bumped whenever a node's reservations (hence its class) change
        self._tables: dict[Any, _ClassTable] = {}  # per task signature and request: every class's answer
        self._info: dict[str, tuple[bool, Any, Any]] = {}
        self.class_changes: list[int] = []  # node of every class change, in order (like NodeArrays.changes)
        self._memo: tuple[Any, NodeFilter] | None = None  # the last predicate (both plugins ask it in turn)
        self._cand_memo: tuple[Any, ...] | None = None

    def _class_id(self, node: int) -> int:
        token = (self.shape[node], self.held_key[node])
        cid = self._class_ids.get(token)
        if cid is None:
            cid = self._class_ids[token] = len(self._class_ids)
        return cid

    def _plan_key(self, plan: Plan) -> Any:
        dev = self.devices.device_key(plan.devices) if plan.devices is not None and self.devices is not None else None
        return (tuple(sorted((c, tuple(v)) for c, v in plan.cpus.items())), dev, plan.memory_key())

    def _hold(self, node: int, key: Any, delta: int) -> None:
        held = self.held[node]
        n = held.get(key, 0) + delta
        if n > 0:
            held[key] = n
        else:
            held.pop(key, None)
        self.held_key[node] = frozenset(held.items())
        self.class_of[node] = self._class_id(node)
        self.class_changes.append(node)
        self.version += 1

    def topology(self, node: int) -> NodeTopology | None:
        if node not in self._topologies:
            n = self.ssn.nodes[node]
            obj = self._numatopos.get(n.name)
            topo = None
            if obj is not None:
                try:
                    topo = cached("topology", n.name, (obj, n.node), lambda: node_topology(obj, n.node))
                except (ValueError, TypeError):
                    topo = None
            self._topologies[node] = topo
        return self._topologies[node]

    def free_cpus(self, node: int) -> set[int]:
        """The node's free CPUs: the Numatopology's allocatable pool minus what running pods hold (their
        `lahar.sh/numa-allocation` or `volcano.sh/topology-decision` annotations) minus this session's picks."""
        free = self._free.get(node)
        if free is None:
            topo = self.topology(node)
            free = set(topo.allocatable) if topo else set()
            if topo is not None:
                for t in placed_pods(self.ssn.nodes[node]):
                    ann = (t.pod.get("metadata") or {}).get("annotations") or {}
                    free -= _held_cpus(ann, topo, free)
                for plan in self.reserved_on.get(node, {}).values():
                    for cpus in plan.cpus.values():
                        free.difference_update(cpus)
            self._free[node] = free
        return free

    def free_memory(self, node: int) -> dict[int, dict[str, int]] | None:
        """The node's free memory and hugepages bytes per NUMA node: the Numatopology's `lahar.sh/numa-memory`
        allocatable minus what running pods hold (their `volcano.sh/topology-decision`) minus this session's
        reservations. None when the node publishes no (valid) per-NUMA memory: memory gives no preference."""
        topo = self.topology(node)
        if topo is None or topo.memory is None:
            return None
        free = self._free_memory.get(node)
        if free is None:
            free = {n: dict(topo.memory.get(n, {})) for n in topo.numa_nodes}
            for t in placed_pods(self.ssn.nodes[node]):
                ann = (t.pod.get("metadata") or {}).get("annotations") or {}
                _subtract(free, _held_memory(ann), -1)
            for plan in self.reserved_on.get(node, {}).values():
                _subtract(free, plan.memory, -1)
            self._free_memory[node] = free
        return free

    # --- planning ------------------------------------------------------------------------------------------------

    def relevant(self, task: Task) -> tuple[bool, Any]:
        """(does this task need per-node planning at all, its device request)."""
        request = self.devices.device_request(task) if self.devices is not None else None
        if request is not None:
            return True, request
        if not self.cpu_side:
            return False, None
        return True, None

    def signature(self, task: Task) -> str:
        sig = self.signatures.get(task.uid)
        if sig is None:
            sig = self.signatures[task.uid] = cached("signature", task.uid, (task.pod,),
                                                     lambda: _task_signature(task))
        return sig

    def evaluate(self, task: Task, node: int, request: Any = None) -> Plan | Rejection:
        """The plan for `task` on `node` as decided for its class (any node of the class gives the same answer;
        the concrete devices of `node` itself come from `plan_on`)."""
        key = ((self.shape[node], self.held_key[node]), self.signature(task))
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._plan(task, node, request)
        return hit

    def plan_on(self, task: Task, node: int, request: Any = None) -> Plan | Rejection:
        """The plan for `task` on this very node (its own CPU ids, GPU UUIDs, VF bus ids)."""
        key = ((self.shape[node], self.held_key[node]), self.signature(task))
        if key in self.cache and isinstance(self.shape[node], int):
            return self.cache[key]  # same shape and state: the same CPUs and device indices (UUIDs mapped at close)
        return self._plan(task, node, request)

    def _plan(self, task: Task, node: int, request: Any) -> Plan | Rejection:
        topo = self.topology(node)
        pod = task.pod
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        task_policy = ann.get(NUMA_POLICY_ANNOTATION, "") if self.cpu_side else ""
        if task_policy and task_policy not in POLICIES:
            return Rejection(f"unknown numa-topology-policy {task_policy!r}", True)
        cpu_requests = container_cpu_requests(pod) if self.cpu_side else []
        inits = [i for i in init_cpu_requests(pod) if i[1]] if self.cpu_side else []
        guaranteed = any(n for _, n in cpu_requests) or bool(inits)
        if task_policy not in ("", NONE):
            if topo is None:
                return Rejection("numa info is empty", True)
            if not topo.static:
                return Rejection("cpu manager policy isn't static", True)
            if not topo.allocatable:
                return Rejection("cpu allocatable map is empty", True)
        node_policy = topo.policy if topo is not None else NONE
        policy = effective_policy(node_policy, task_policy)
        plan = Plan(policy)
        if policy == NONE or topo is None:
            if request is not None and self.devices is not None:
                chosen = self.devices.device_allocate(task, node, request, None)
                if isinstance(chosen, str):
                    return _reject(plan, chosen)
                plan.devices = chosen
                plan.per_numa = self.devices.device_numa(node, chosen)
                plan.numa = frozenset(n for n, r in plan.per_numa.items() if any(r.values()))
            return plan

        numa_nodes = list(topo.numa_nodes)
        device_providers: dict[str, list[TopologyHint] | None] | None = None
        if request is not None and self.devices is not None:
            got = self.devices.device_providers(task, node, request)
            if isinstance(got, str):
                return _reject(plan, got)
            device_providers = got
        capacity = topo.capacity()
        free = set(self.free_cpus(node)) if topo.static else set()
        # the static memory manager's view: Guaranteed pods on nodes publishing memory per NUMA node
        free_mem = self.free_memory(node) if self.cpu_side else None
        mem_requests = container_memory_requests(pod, topo.scope) if free_mem is not None else []
        mem_scratch = {n: dict(r) for n, r in free_mem.items()} if free_mem is not None and mem_requests else {}
        containers = cpu_requests or [((c.get("name") or ""), 0) for c in (pod.get("spec") or {}).get("containers")
                                      or ()] or [("", 0)]
        # which container holds the devices: the first one asking for any of them (pod-level requests otherwise)
        dev_container = 0
        if device_providers is not None:
            names = set(device_providers)
            for idx, c in enumerate((pod.get("spec") or {}).get("containers") or ()):
                wanted = {**(c.get("resources") or {}).get("limits", {}),
                          **(c.get("resources") or {}).get("requests", {})}
                if names & set(wanted):
                    dev_container = idx
                    break
        try:
            init_hints: dict[str, TopologyHint] = {}
            if topo.scope == "pod":
                # the CPU manager's podGuaranteedCPUs: max(largest init + earlier sidecars, apps + sidecars)
                total = hints.pod_request([(n, side) for _, n, side in inits], [n for _, n in containers])
                providers: list[Any] = []
                cpu_p = hints.cpu_provider(total, capacity, topo.per_numa(free)) if guaranteed and topo.static \
                    else None
                providers.append(cpu_p)
                providers.append(device_providers)
                mem_req = mem_requests[0] if mem_requests else {}
                machine = _machine(topo, mem_scratch) if mem_req else {}
                mem_p = hints.memory_hints(mem_req, machine) if mem_req else None
                if mem_p is not None:
                    providers.append(mem_p)
                hint, admit = merge(policy, providers, numa_nodes, topo.options, topo.distances)
                plan.merges.append(_explain("(pod)", cpu_p, device_providers, hint, admit, mem_p))
                if not admit:
                    return _reject(plan, _numa_reason("pod", policy, _memory_short(policy, mem_req, machine, topo)))
                if mem_req:
                    got_mem = take_memory(mem_req, machine, hint.affinity, mem_p)
                    if got_mem is None:
                        return _reject(plan, _memory_reason("pod", _memory_short(None, mem_req, machine, topo)))
                    _subtract(plan.memory, got_mem, +1, grow=True)
                hints_by_container = [hint] * len(containers)
                init_hints = {name: hint for name, _, _ in inits}
            else:
                hints_by_container = []
                picked: dict[str, list[int]] = {}
                scratch = set(free)
                reusable: set[int] = set()  # CPUs of init containers that have exited (the CPU manager's reuse)
                for name, n, sidecar in inits if topo.static else ():
                    usable = scratch | reusable
                    cpu_p = hints.cpu_provider(n, capacity, topo.per_numa(usable))
                    hint, admit = merge(policy, [cpu_p], numa_nodes, topo.options, topo.distances)
                    plan.merges.append(_explain(name, cpu_p, None, hint, admit))
                    if not admit:
                        return _reject(plan, _numa_reason(name, policy))
                    got_cpus = take_cpus(usable, n, topo, hint.affinity)
                    if got_cpus is None:
                        return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
                    init_hints[name] = hint
                    picked[name] = got_cpus
                    scratch -= set(got_cpus)
                    reusable = reusable - set(got_cpus) if sidecar else reusable | set(got_cpus)
                for idx, (name, n) in enumerate(containers):
                    usable = scratch | reusable
                    cpu_p = hints.cpu_provider(n, capacity, topo.per_numa(usable)) if n and topo.static else None
                    dev_p = device_providers if idx == dev_container else None
                    mem_req = mem_requests[idx] if idx < len(mem_requests) else {}
                    machine = _machine(topo, mem_scratch) if mem_req else {}
                    mem_p = hints.memory_hints(mem_req, machine) if mem_req else None
                    hint, admit = merge(policy, [cpu_p, dev_p] if mem_p is None else [cpu_p, dev_p, mem_p],
                                        numa_nodes, topo.options, topo.distances)
                    plan.merges.append(_explain(name, cpu_p, dev_p, hint, admit, mem_p))
                    if not admit:
                        return _reject(plan, _numa_reason(name, policy, _memory_short(policy, mem_req, machine, topo)))
                    if mem_req:
                        got_mem = take_memory(mem_req, machine, hint.affinity, mem_p)
                        if got_mem is None:
                            return _reject(plan, _memory_reason(name, _memory_short(None, mem_req, machine, topo)))
                        _subtract(mem_scratch, got_mem, -1)
                        _subtract(plan.memory, got_mem, +1, grow=True)
                    hints_by_container.append(hint)
                    if n:
                        got_cpus = take_cpus(usable, n, topo, hint.affinity)
                        if got_cpus is None:
                            return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
                        scratch -= set(got_cpus)
                        reusable -= set(got_cpus)
                        picked[name] = got_cpus
        except PolicyOptionError as e:
            return _reject(plan, str(e), True)

        # concrete choices: init containers first (their CPUs reusable by later containers unless sidecars)
        pool = set(free)
        reuse: set[int] = set()
        per_numa: dict[int, dict[str, int]] = {}
        order = [(name, n, "sidecar" if side else "init", init_hints.get(name)) for name, n, side in inits]
        order += [(name, n, "app", hint) for (name, n), hint in zip(containers, hints_by_container, strict=True)]
        for name, n, kind, hint in order:
            if not n or hint is None:
                continue
            got_cpus = picked.get(name) if topo.scope != "pod" else None
            if got_cpus is None:
                got_cpus = take_cpus(pool | reuse, n, topo, hint.affinity)
            if got_cpus is None:
                return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
            pool -= set(got_cpus)
            reuse = reuse | set(got_cpus) if kind == "init" else reuse - set(got_cpus)
            plan.cpus[name] = got_cpus
        # what the pod holds: every container's CPUs, a reused one counted once
        held = {c for cpus in plan.cpus.values() for c in cpus}
        for numa_id, count in topo.per_numa(held).items():
            if count:
                per_numa.setdefault(numa_id, {})["cpu"] = per_numa.get(numa_id, {}).get("cpu", 0) + count
        if request is not None and self.devices is not None:
            chosen = self.devices.device_allocate(task, node, request, hints_by_container[dev_container])
            if isinstance(chosen, str):
                return _reject(plan, chosen)
            plan.devices = chosen
            for numa_id, res in self.devices.device_numa(node, chosen).items():
                slot = per_numa.setdefault(numa_id, {})
                for r, v in res.items():
                    slot[r] = slot.get(r, 0) + v
        _subtract(per_numa, plan.memory, +1, grow=True)
        plan.per_numa = per_numa
        plan.numa = frozenset(n for n, r in per_numa.items() if any(r.values()))
        return plan

    # --- the session hooks both plugins forward --------------------------------------------------------------------

    def task_info(self, task: Task) -> tuple[bool, Any, Any]:
        """(does the task need per-node planning, its device request, the key of its per-class answers) — asked
        by every hook of both plugins, so worked out once per task and session."""
        info = self._info.get(task.uid)
        if info is None:
            relevant, request = self.relevant(task)
            key = (self.signature(task), task.init_resreq.tobytes()) if relevant else None
            info = self._info[task.uid] = (relevant, request, key)
        return info

    def _table(self, key: Any) -> _ClassTable:
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _ClassTable()
        table.reserve(len(self._class_ids))
        return table

    def _evaluate_classes(self, table: _ClassTable, task: Task, nodes: np.ndarray, request: Any) -> None:
        """Evaluate one representative of each class among `nodes` (indices) the table has no answer for yet."""
        cls = self.class_of
        sub = nodes[~table.done[cls[nodes]]]
        if not len(sub):
            return
        first, _ = _group(cls[sub])
        for k in first:
            node = int(sub[k])
            table.record(int(cls[node]), self.evaluate(task, node, request))

    def _rejected(self, table: _ClassTable, task: Task, request: Any, arrays: NodeArrays) -> np.ndarray:
        """Per node: the request fits and the node's class refuses the task. Kept up to date incrementally: only
        the nodes whose resources or class changed since the table was last asked are looked at again (a
        placement changes one node; a later task of the gang evaluates at most that node's new class)."""
        fit = self.ssn.fit_future_idle.get(task.init_resreq.tobytes(), task.init_resreq)
        a, c = arrays.version, len(self.class_changes)
        n = len(arrays)
        cls = self.class_of
        bad = table.node_bad
        if (bad is None or len(bad) != n or table.arrays_seen > a
                or (a - table.arrays_seen) + (c - table.class_seen) > n // 8 + 1):
            self._evaluate_classes(table, task, np.flatnonzero(fit), request)
            table.node_bad = bad = fit & table.bad[cls]
        else:
            rows = set(arrays.changes[table.arrays_seen:a])
            rows.update(self.class_changes[table.class_seen:c])
            for row in rows:  # a handful: element-wise is cheaper than numpy calls here
                if not fit[row]:
                    bad[row] = False
                    continue
                cid = int(cls[row])
                if not table.done[cid]:
                    table.record(cid, self.evaluate(task, row, request))
                bad[row] = table.bad[cid]
        table.arrays_seen, table.class_seen = a, c
        return bad

    def predicate(self, task: Task, arrays: NodeArrays) -> NodeFilter:
        """Nodes whose (task-stricter) Topology Manager policy would refuse the task, or whose devices cannot take
        it; nodes the request does not fit are left to the resource check."""
        n = len(arrays)
        relevant, request, key = self.task_info(task)
        if not relevant:
            return NodeFilter(_all_true(n))
        memo_key = (key, self.version, arrays.version, n)
        if self._memo is not None and self._memo[0] == memo_key:
            return self._memo[1]  # numa-aware and deviceshare ask the same question in turn
        table = self._table(key)
        bad = self._rejected(table, task, request, arrays)
        if not bad.any():
            got = NodeFilter(_all_true(n))
        else:
            cls = self.class_of
            reasons = np.full(n, None, dtype=object)
            reasons[bad] = table.reasons[cls[bad]]
            got = NodeFilter(~bad, reasons, bad & table.unresolvable[cls])
        self._memo = (memo_key, got)
        return got

    def _candidate_classes(self, task: Task, candidates: np.ndarray) -> tuple[_ClassTable, np.ndarray]:
        """The task's table and each candidate's class, every class evaluated (numa-aware's and deviceshare's
        node orders ask in turn for the same candidates)."""
        _, request, key = self.task_info(task)
        memo = self._cand_memo
        if memo is not None and memo[0] is candidates and memo[1] == (key, self.version):
            return memo[2], memo[3]
        table = self._table(key)
        cls = self.class_of[np.asarray(candidates, dtype=np.int64)]
        if not table.done[cls].all():  # usually the predicate has just evaluated every candidate's class
            self._evaluate_classes(table, task, np.asarray(candidates, dtype=np.int64), request)
        self._cand_memo = (candidates, (key, self.version), table, cls)  # holds `candidates`: its identity is safe
        return table, cls

    def scores(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        """Volcano's batch node order: NUMA nodes spanned by the plan, normalised so fewer scores higher."""
        if not self.task_info(task)[0] or not len(candidates):
            return np.zeros(len(candidates))
        table, cls = self._candidate_classes(task, candidates)
        if isinstance(table.uniform, tuple):
            return np.zeros(len(candidates))  # one NUMA count everywhere: normalised, every node scores 0
        counts = table.numa_count[cls]
        if not counts.any():
            return np.zeros(len(candidates))
        return normalize_reverse(counts)

    def device_scores(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        if not len(candidates) or not self.task_info(task)[0]:
            return np.zeros(len(candidates))
        table, cls = self._candidate_classes(task, candidates)
        if isinstance(table.uniform, tuple):
            return np.full(len(candidates), table.uniform[1])
        return table.device_score[cls]

    def on_allocate(self, task: Task) -> None:
        if task.uid in self.reserved or task.node < 0:
            return
        relevant, request, _ = self.task_info(task)
        if not relevant:
            return
        node = task.node
        self.placing = task.uid  # placed already: the node's pods must not count it before it is reserved
        try:
            got = self.plan_on(task, node, request)
        finally:
            self.placing = None
        if not isinstance(got, Plan):
            return  # placed without passing our predicate (switch off): nothing to reserve
        free = self._free.get(node)
        if free is not None:  # a node's free CPUs are worked out when first planned on, reservations included
            for cpus in got.cpus.values():
                free.difference_update(cpus)
        if got.memory and node in self._free_memory:
            _subtract(self._free_memory[node], got.memory, -1)
        self.reserved[task.uid] = (node, got)
        self.reserved_on.setdefault(node, {})[task.uid] = got
        if got.devices is not None and self.devices is not None:
            self.devices.device_reserve(node, got.devices)
        self._hold(node, self._plan_key(got), +1)

    def on_deallocate(self, task: Task) -> None:
        held = self.reserved.pop(task.uid, None)
        if held is None:
            return
        node, plan = held
        self.reserved_on.get(node, {}).pop(task.uid, None)
        free = self._free.get(node)
        if free is not None:
            for cpus in plan.cpus.values():
                free.update(cpus)
        if plan.memory and node in self._free_memory:
            _subtract(self._free_memory[node], plan.memory, +1)
        if plan.devices is not None and self.devices is not None:
            self.devices.device_release(node, plan.devices)
        self._hold(node, self._plan_key(plan), -1)

    def close(self) -> None:
        """Write the decisions of every task bound this session as annotations carried by its bind."""
        if self.closed:
            return
        self.closed = True
        d = self.ssn.decisions
        tasks = self.ssn.snapshot.tasks
        for b in d.binds:
            held = self.reserved.get(b.uid)
            task = tasks.get(b.uid)
            if held is None or task is None:
                continue
            node, plan = held
            out = d.annotations.setdefault(b.uid, {})
            if plan.policy != NONE and plan.per_numa:
                out.update(plan.rendered())
            if plan.devices is not None and self.devices is not None:
                out.update(self.devices.device_annotations(task, node, plan.devices))

    def explain(self, task: Task) -> list[dict[str, Any]]:
        """Per node: the merges (each provider's hints, the merged hint, admit) and why the node was rejected."""
        relevant, request = self.relevant(task)
        out = []
        for i, n in enumerate(self.ssn.nodes):
            entry: dict[str, Any] = {"node": n.name}
            if not relevant:
                entry.update(admit=True, reason="", merges=[])
            else:
                got = self.plan_on(task, i, request)
                if isinstance(got, Rejection):
                    entry.update(admit=False, reason=got.reason, merges=list(got.merges))
                else:
                    entry.update(admit=True, reason="", policy=got.policy, merges=got.merges,
                                 numa=sorted(got.numa), cpus={c: _cpuset(v) for c, v in got.cpus.items()})
                    if got.memory:
                        entry["memory"] = {str(n): {r: _quantity_text(r, v) for r, v in sorted(res.items())}
                                           for n, res in sorted(got.memory.items())}
            out.append(entry)
        return out


@functools.lru_cache(maxsize=8)
def _all_true(n: int) -> np.ndarray:
    """A read-only all-True mask of `n` nodes (the usual predicate answer; shared, never written)."""
    out = np.ones(n, dtype=bool)
    out.flags.writeable = False
    return out


def _group(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one position per distinct value, the group of each position) in O(n) for small non-negative ids — what
    `np.unique(return_index=True, return_inverse=True)` gives, without the sort (any member may represent)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if (values == values[0]).all():  # the common case: every node in one class
        return np.zeros(1, dtype=np.int64), np.zeros(len(values), dtype=np.int64)
    size = int(values.max()) + 1
    present = np.zeros(size, dtype=bool)
    present[values] = True
    where = np.empty(size, dtype=np.int64)
    where[values] = np.arange(len(values))
    classes = np.flatnonzero(present)
    remap = np.cumsum(present) - 1
    return where[classes], remap[values]


def _reject(plan: Plan, reason: str, unresolvable: bool = False) -> Rejection:
    return Rejection(reason, unresolvable, tuple(plan.merges))


def _machine(topo: NodeTopology, free: Mapping[int, Mapping[str, int]]) -> dict[int, hints.NUMAMemory]:
    """The memory manager's machine state for `hints.memory_hints`: allocatable and free bytes per NUMA node."""
    memory = topo.memory or {}
    return {n: hints.NUMAMemory(memory.get(n, {}), {r: max(0, v) for r, v in free.get(n, {}).items()})
            for n in topo.numa_nodes}


def _memory_short(policy: str | None, requests: Mapping[str, int], machine: Mapping[int, hints.NUMAMemory],
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


def _memory_reason(container: str, short: Sequence[str]) -> str:
    return f"container {container} cannot be assigned by numa: not enough free {', '.join(short)} on NUMA nodes"


def _numa_reason(container: str, policy: str, memory_short: Sequence[str] = ()) -> str:
    if memory_short:
        return (f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE}): "
                f"not enough free {', '.join(memory_short)} on NUMA nodes")
    return f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE})"


def _hint_json(h: TopologyHint) -> dict[str, Any]:
    return {"affinity": None if h.affinity is None else sorted(h.affinity), "preferred": h.preferred}


def _provider_json(p: Any) -> Any:
    if p is None:
        return None
    return {r: (None if hs is None else [_hint_json(h) for h in hs]) for r, hs in p.items()}


def _explain(container: str, cpu: Any, devices: Any, hint: TopologyHint, admit: bool,
             memory: Any = None) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    if cpu is not None:
        providers.update(_provider_json(cpu))
    if devices is not None:
        providers.update(_provider_json(devices))
    if memory is not None:
        providers.update(_provider_json(memory))
    return {"container": container, "providers": providers, "hint": _hint_json(hint), "admit": admit}


def _cpuset(cpus: Iterable[int]) -> str:
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


def _subtract(free: dict[int, dict[str, int]], held: Mapping[int, Mapping[str, int]], sign: int,
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


def _held_memory(annotations: Mapping[str, str]) -> dict[int, dict[str, int]]:
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
            if not _is_memory(str(r)):
                continue
            try:
                out.setdefault(int(numa_id), {})[str(r)] = max(0, quantity.parse(v).value())
            except (ValueError, TypeError, ArithmeticError):
                continue
    return out


def _held_cpus(annotations: Mapping[str, str], topo: NodeTopology, free: set[int]) -> set[int]:
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


# --- the plugin -----------------------------------------------------------------------------------------------------


class NumaAware:
    """Volcano's `numa-aware` plugin (argument `weight`, default 1)."""

    name = "numa-aware"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.weight = int(args.get("weight", 1) or 1)
        self.placement: Placement | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.placement = placement(ssn)
        self.placement.cpu_side = True

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        assert self.placement is not None
        return self.placement.predicate(task, nodes)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        assert self.placement is not None
        return self.placement.scores(task, candidates) * self.weight

    def on_allocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_deallocate(task)

    def on_session_close(self, ssn: Session) -> None:
        if self.placement is not None:
            self.placement.close()


# --- explain ----------------------------------------------------------------------------------------------------------


def explain(ssn: Session, task: Task) -> list[dict[str, Any]]:
    """Why `task` would (not) go to each node of an open session: per node, whether its request fits the free
    resources, the first reason the node was rejected (resources first, then the first predicate plugin that said
    no, in tier order), and the topology plan — each provider's hints, the merged hint and the admit decision per
    merge (container, or the pod in pod scope), the NUMA nodes and CPUs it would get. Read-only."""
    arrays = ssn.arrays
    names = ssn.resources.names
    short = arrays.insufficient(task.init_resreq, arrays.future_idle()) if len(arrays) else []
    verdict = ssn.predicate(task)
    topo = placement(ssn).explain(task) if (ssn.plugins.get("numa-aware") is not None
                                            or ssn.plugins.get("deviceshare") is not None) else None
    out = []
    for i, n in enumerate(ssn.nodes):
        entry: dict[str, Any] = {"node": n.name, "fits": bool(short[i] < 0) if len(arrays) else False}
        reason = ""
        if short[i] >= 0:
            reason = f"Insufficient {names[short[i]]}"
        elif not verdict.feasible[i]:
            reason = str(verdict.reasons[i]) if verdict.reasons is not None and verdict.reasons[i] else "rejected"
        entry["rejected"] = reason
        if topo is not None:
            t = topo[i]
            entry.update({k: v for k, v in t.items() if k not in ("node", "reason")})
            entry["topology_reason"] = t.get("reason", "")
        out.append(entry)
    return out
