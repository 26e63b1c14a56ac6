"""NUMA topology readers (pure): the node's topology from its Volcano `Numatopology`, the annotations a placement
reads and writes, the reasons a NUMA merge refuses, and the CPUs and memory that placed pods hold (read from their
annotations).

Part of `scheduler.placement`; the kubelet CPU and memory manager emulation it plans with is in
`scheduler.topology.cpus` and `scheduler.topology.memory`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from lahar.kube import quantity
from lahar.scheduler.topology import (
    BEST_EFFORT,
    NONE,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    TOPOLOGY_AFFINITY_MESSAGE,
    hints,
)
from lahar.scheduler.topology.memory import is_memory

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


def memory_reason(container: str, short: Sequence[str]) -> str:
    return f"container {container} cannot be assigned by numa: not enough free {', '.join(short)} on NUMA nodes"


def numa_reason(container: str, policy: str, memory_short: Sequence[str] = ()) -> str:
    if memory_short:
        return (f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE}): "
                f"not enough free {', '.join(memory_short)} on NUMA nodes")
    return f"container {container} cannot be assigned by numa ({policy}: {TOPOLOGY_AFFINITY_MESSAGE})"


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
