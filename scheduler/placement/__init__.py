"""Topology-aware placement shared by the numa-aware and deviceshare plugins: the per-session `Placement` (plans per
(task, node) pair, NUMA reservations), the `DeviceSide` protocol the device plugin implements, the plan pieces and
the derived-object cache its owner keeps across sessions.

Sits below the plugins (which import it, never each other) and above `scheduler.topology` (hint merging, the
kubelet CPU and memory manager emulation) and `scheduler.devices`.
"""

from lahar.scheduler.placement.caches import DerivedCache, derived
from lahar.scheduler.placement.explain import explain
from lahar.scheduler.placement.placement import Placement, placement
from lahar.scheduler.placement.plans import DeviceSide, Plan, Rejection, placed_pods

__all__ = ["DerivedCache", "DeviceSide", "Placement", "Plan", "Rejection", "derived", "explain", "placed_pods",
           "placement"]
