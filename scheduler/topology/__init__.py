"""NUMA topology for the scheduler: the kubelet's Topology Manager hint merge, exact and without its 8-node cap.

Plugins (numa-aware, deviceshare) build per-node hints with `hints` and ask `merge` what the node's kubelet would
admit. Pure functions over plain data; see spec/topology.md for the semantics reproduced here.
"""

from lahar.scheduler.topology import bitmask, hints
from lahar.scheduler.topology.merging import (
    TOPOLOGY_AFFINITY_ERROR,
    TOPOLOGY_AFFINITY_MESSAGE,
    Admission,
    Provider,
    TopologyHint,
    can_admit,
    merge,
    merge_container_scope,
    merge_pod_scope,
)
from lahar.scheduler.topology.options import (
    BEST_EFFORT,
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
    MAX_ALLOWABLE_NUMA_NODES,
    NONE,
    POLICIES,
    PREFER_CLOSEST_NUMA_NODES,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    PolicyOptionError,
    PolicyOptions,
    numa_limit_error,
    parse_options,
)

__all__ = [
    "BEST_EFFORT",
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "MAX_ALLOWABLE_NUMA_NODES",
    "NONE",
    "POLICIES",
    "PREFER_CLOSEST_NUMA_NODES",
    "RESTRICTED",
    "SINGLE_NUMA_NODE",
    "TOPOLOGY_AFFINITY_ERROR",
    "TOPOLOGY_AFFINITY_MESSAGE",
    "Admission",
    "PolicyOptionError",
    "PolicyOptions",
    "Provider",
    "TopologyHint",
    "bitmask",
    "can_admit",
    "hints",
    "merge",
    "merge_container_scope",
    "merge_pod_scope",
    "numa_limit_error",
    "parse_options",
]
