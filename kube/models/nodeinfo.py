"""nodeinfo.volcano.sh/v1alpha1: Numatopology, one per node, written by a node exporter.

The scheduler's numa-aware plugin reads each node's CPU/NUMA layout and kubelet policies from it.
"""

from __future__ import annotations

import enum
from typing import ClassVar

from pydantic import Field

from lahar.kube.models._base import Int, Kind, VolcanoModel

__all__ = ["CPUInfo", "MemoryNode", "MemoryTable", "Numatopology", "NumatopoSpec", "PolicyName", "ResourceInfo"]

GROUP_VERSION = "nodeinfo.volcano.sh/v1alpha1"


class PolicyName(enum.StrEnum):
    """Keys of `spec.policies`."""

    CPU_MANAGER_POLICY = "CPUManagerPolicy"
    MEMORY_MANAGER_POLICY = "MemoryManagerPolicy"
    TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"


class ResourceInfo(VolcanoModel):
    allocatable: str | None = None  # a cpuset string, e.g. "0-3,8"
    capacity: Int | None = None


class CPUInfo(VolcanoModel):
    numa: Int | None = None
    socket: Int | None = None
    core: Int | None = None


class MemoryTable(VolcanoModel):
    total: Int | None = None
    system_reserved: Int | None = None
    allocatable: Int | None = None
    reserved: Int | None = None
    free: Int | None = None


class MemoryNode(VolcanoModel):
    number_of_assignments: Int | None = None
    memory_map: dict[str, MemoryTable | None] | None = None
    cells: list[Int] | None = None


class NumatopoSpec(VolcanoModel):
    policies: dict[str, str] | None = None
    res_reserved: dict[str, str] | None = None
    numares: dict[str, ResourceInfo] | None = None
    cpu_detail: dict[str, CPUInfo] | None = None
    memory_detail: dict[str, MemoryNode | None] | None = Field(default=None, alias="MemoryDetail")


class Numatopology(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "Numatopology"

    spec: NumatopoSpec | None = None
