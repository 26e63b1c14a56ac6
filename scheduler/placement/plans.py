"""The pieces of a (task, node) placement plan: `Plan`, `Rejection`, the `DeviceSide` protocol deviceshare
implements, node fingerprints (node equivalence classes), task signatures and the per-class plan tables.

Part of `scheduler.placement`, used by `placement.Placement`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from lahar.scheduler.devices import inventory as inventories
from lahar.scheduler.devices.requests import GROUP_NAME_ANNOTATION
from lahar.scheduler.framework.snapshot import ALLOCATED, Task, TaskStatus
from lahar.scheduler.placement.caches import DerivedCache
from lahar.scheduler.placement.numatopology import (
    ALLOCATION_ANNOTATION,
    DISTANCES_ANNOTATION,
    NUMA_MEMORY_ANNOTATION,
    OPTIONS_ANNOTATION,
    SCOPE_ANNOTATION,
    TOPOLOGY_DECISION_ANNOTATION,
    decision_annotation,
)
from lahar.scheduler.topology import (
    NONE,
    TopologyHint,
)
from lahar.scheduler.topology.cpus import cpuset_text


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
                body["cpus"] = {c: cpuset_text(v) for c, v in self.cpus.items()}
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


_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,}")


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
    # Koordinator GPU partitions: the table and whether the node honours it
    dev_meta = (device or {}).get("metadata") or {}
    devices += repr(((dev_meta.get("annotations") or {}).get("scheduling.koordinator.sh/gpu-partitions"),
                     (dev_meta.get("labels") or {}).get("node.koordinator.sh/gpu-partition-policy")))
    return hash((repr((obj.get("status") or {}).get("allocatable")), dev, numatopology is None, numa,
                 device is None, devices, repr(ann.get(OPTIONS_ANNOTATION)), repr(ann.get(SCOPE_ANNOTATION)),
                 repr(ann.get(DISTANCES_ANNOTATION))))


def node_fingerprint(node: Any, numatopology: Mapping[str, Any] | None, device: Mapping[str, Any] | None,
                     cache: DerivedCache) -> Any:
    """What a plan on the node depends on, names and GPU UUIDs aside: allocatable, device annotations, the
    Numatopology and Device specs, and the pods already there: a node with a pod that holds CPUs, memory or devices
    we can see (its annotations, extended resources) is its own class; pods that hold nothing NUMA-placed
    (DaemonSets, CPU-only pods of other schedulers) leave the node in its class. The inventory part is cached
    across sessions by resourceVersions (`cache`)."""
    for t in placed_pods(node):
        if cache.get("holds", t.uid, (t.pod,), lambda t=t: _holds_topology(t.pod)):
            return ("node", node.name)
    obj = node.node
    return cache.get("fingerprint", node.name, (obj, numatopology, device),
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


def _frozen(value: Any) -> Any:
    """`value` as a hashable of the same content: mappings and lists tagged and in their own order, other
    scalars with their type (1, 1.0 and True are equal in Python, not in a pod). Unhashables raise TypeError."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        items = tuple(value.items())
        for _, v in items:
            if type(v) is not str:
                return ("{", tuple((k, _frozen(v)) for k, v in items))
        return ("{", items)  # every value a string (annotations, a resource list): each is its own frozen form
    if isinstance(value, list | tuple):
        return ("[", tuple(_frozen(v) for v in value))
    hash(value)
    return (type(value).__name__, value)


def pod_shape(pod: Mapping[str, Any]) -> Any:
    """Everything `task_signature` and the device request (`devices.requests.parse`) read of a pod, hashable: its
    annotations and each container's kind, name and resources. Two pods of one shape get the same signature and
    device request; None when some value is not hashable (then nothing is shared). The PodGroup's name is left
    out, so the pods of many jobs share a shape: only a vGPU request reads it (`Placement.relevant`)."""
    spec = pod.get("spec") or {}
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    if GROUP_NAME_ANNOTATION in ann:
        ann = {k: v for k, v in ann.items() if k != GROUP_NAME_ANNOTATION}
    try:
        parts: list[Any] = [_frozen(ann)]
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or ():
                parts.append((key, _frozen(c.get("name")), _frozen(c.get("resources"))))
        shape = tuple(parts)
        hash(shape)
    except (TypeError, AttributeError):
        return None
    return shape


def task_signature(task: Task) -> str:
    pod = task.pod
    spec = pod.get("spec") or {}
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    key = json.dumps([[c.get("resources") for c in spec.get("initContainers") or ()],
                      [(c.get("name"), c.get("resources")) for c in spec.get("containers") or ()],
                      {k: v for k, v in sorted(ann.items()) if k.startswith(("volcano.sh/", "nvidia.com/", "hami.io/",
                                                                             "scheduling.koordinator.sh/"))}],
                     sort_keys=True, default=str)
    return hashlib.blake2b(key.encode(), digest_size=12).hexdigest()


class ClassTable:
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
