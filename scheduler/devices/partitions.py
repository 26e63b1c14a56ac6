"""Koordinator GPU partitions: a node's table of GPU sets that work well together (the Device's
`scheduling.koordinator.sh/gpu-partitions` annotation) and the choice of one for a whole-GPU request.

Called by the deviceshare plugin before its link-aware choice (`gpu.allocate`), per (task, node):
`choose(count, free, table=..., spec=..., node_honors=...)` → minors, `None` (partitions not honoured here: fall back
to the link-aware choice) or a reason. Honoured when the pod sets `scheduling.koordinator.sh/gpu-partition-spec` or
the Device is labelled `node.koordinator.sh/gpu-partition-policy: Honor`. Semantics: koordinator
`pkg/scheduler/plugins/deviceshare/allocator_gpu.go` (allocateByPartition, selectPartitionByBinPack); spec/devices.md §3.2.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import quantity

__all__ = [
    "INSUFFICIENT_PARTITIONED",
    "MISSING_TABLE",
    "PARTITIONS_ANNOTATION",
    "PARTITION_SPEC_ANNOTATION",
    "POLICY_LABEL",
    "UNSUPPORTED_COUNT",
    "Partition",
    "PartitionSpec",
    "choose",
    "node_honors",
    "spec",
    "table",
]

PARTITIONS_ANNOTATION = "scheduling.koordinator.sh/gpu-partitions"
PARTITION_SPEC_ANNOTATION = "scheduling.koordinator.sh/gpu-partition-spec"
POLICY_LABEL = "node.koordinator.sh/gpu-partition-policy"
# Koordinator's reasons
INSUFFICIENT_PARTITIONED = "Insufficient Partitioned GPU Devices"
MISSING_TABLE = "node(s) missing GPU Partition Table"
UNSUPPORTED_COUNT = "node(s) Unsupported number of GPU requests"
_BINPACK_WEIGHTS = ((8, 10000), (4, 100), (2, 1))

Table = Mapping[int, tuple[tuple["Partition", ...], ...]]   # GPUs → groups of partitions, best allocationScore first


@dataclass(frozen=True)
class Partition:
    minors: tuple[int, ...]
    score: int = 0                       # allocationScore
    ring_bus_bandwidth: float | None = None


@dataclass(frozen=True)
class PartitionSpec:
    """The pod's `gpu-partition-spec`: `restricted` (allocatePolicy Restricted: only the best-scored partitions),
    `ring_bus_bandwidth` (a partition must offer at least this much)."""

    restricted: bool = False
    ring_bus_bandwidth: float | None = None


def _bandwidth(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    try:
        return float(quantity.parse(raw).fraction)
    except (quantity.QuantityError, TypeError, ValueError):
        raise ValueError(f"{where}: ringBusBandwidth {raw!r} is not a quantity") from None


def spec(annotations: Mapping[str, str]) -> PartitionSpec | None:
    """The pod's partition spec, None without the annotation; `ValueError` naming the annotation when malformed."""
    raw = annotations.get(PARTITION_SPEC_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"annotation {PARTITION_SPEC_ANNOTATION} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"annotation {PARTITION_SPEC_ANNOTATION} must be a JSON object")
    policy = value.get("allocatePolicy") or ""
    if policy not in ("", "Restricted", "BestEffort"):
        raise ValueError(f"annotation {PARTITION_SPEC_ANNOTATION}: allocatePolicy must be Restricted or BestEffort, "
                         f"got {policy!r}")
    return PartitionSpec(policy == "Restricted",
                         _bandwidth(value.get("ringBusBandwidth"), f"annotation {PARTITION_SPEC_ANNOTATION}"))


def table(device: Mapping[str, Any] | None) -> Table | None:
    """The Device's partition table (None when it has none or it cannot be read)."""
    raw = (((device or {}).get("metadata") or {}).get("annotations") or {}).get(PARTITIONS_ANNOTATION)
    if not raw:
        return None
    try:
        value = json.loads(raw)
        out: dict[int, tuple[tuple[Partition, ...], ...]] = {}
        for size, parts in dict(value).items():
            by_score: dict[int, list[Partition]] = {}
            for p in parts:
                part = Partition(tuple(int(m) for m in p["minors"]), int(p.get("allocationScore") or 0),
                                 _bandwidth(p.get("ringBusBandwidth"), PARTITIONS_ANNOTATION))
                by_score.setdefault(part.score, []).append(part)
            out[int(size)] = tuple(tuple(by_score[s]) for s in sorted(by_score, reverse=True))
        return out
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def node_honors(device: Mapping[str, Any] | None) -> bool:
    return (((device or {}).get("metadata") or {}).get("labels") or {}).get(POLICY_LABEL) == "Honor"


def _binpack_score(used: frozenset[int], part: Partition, partitions: Table, count: int) -> int:
    """Koordinator `selectPartitionByBinPack`: after taking `part`, how many partitions of 8, 4 and 2 GPUs (at least
    `count`) stay whole, weighted 10000 / 100 / 1 and by their allocationScore (best-scored group only)."""
    after = used | set(part.minors)
    score = 0
    for size, weight in _BINPACK_WEIGHTS:
        if size < count or not partitions.get(size):
            continue
        score += sum(weight * p.score for p in partitions[size][0] if not after & set(p.minors))
    return score


def choose(count: int, free: Collection[int], *, total: Collection[int], partitions: Table | None,
           spec: PartitionSpec | None, node_honors: bool) -> tuple[int, ...] | str | None:
    """The partition for `count` whole GPUs: its minors; a reason (str) when partitions are honoured and none fits;
    None when they are not honoured here (the caller chooses link-aware). `free`: minors no pod holds; `total`:
    every healthy whole-GPU minor."""
    honour = spec is not None or node_honors
    result = _choose(count, frozenset(free), frozenset(total), partitions, spec or PartitionSpec())
    if isinstance(result, str):
        return result if honour else None
    return result


def _choose(count: int, free: frozenset[int], total: frozenset[int], partitions: Table | None,
            spec: PartitionSpec) -> tuple[int, ...] | str:
    if partitions is None:
        return MISSING_TABLE
    groups = partitions.get(count)
    if not groups:
        return UNSUPPORTED_COUNT
    used = total - free
    feasible: list[Partition] = []
    for group in groups:
        for p in group:
            if not set(p.minors) <= free:
                continue
            if spec.ring_bus_bandwidth is not None and (p.ring_bus_bandwidth is None
                                                        or p.ring_bus_bandwidth < spec.ring_bus_bandwidth):
                continue
            feasible.append(p)
        if feasible or spec.restricted:
            break
    if not feasible:
        return INSUFFICIENT_PARTITIONED
    best = max(feasible, key=lambda p: _binpack_score(used, p, partitions, count))  # first of equal scores
    return tuple(sorted(best.minors))
