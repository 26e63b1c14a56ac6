"""The dashboard's node views: occupancy per node and resource (the heatmap's cells) and the HyperNode tree with
the occupancy of each tier. Pure functions from Node, Pod and HyperNode dicts to rows; one pass over the pods.

Part of `lahar.dashboard`, beside `views` (queues, jobs, policies); `pages` renders them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.dashboard.views import PodFacts, amount, hypernode_tier, pod_facts

__all__ = ["Cell", "HyperNodeRow", "NodeRow", "Occupancy", "columns", "hypernode_rows", "node_rows", "occupancy", "totals"]

Obj = dict[str, Any]

# cluster resources that are no occupancy (every node has them, nobody waits for them), and prefixes of resources
# that only mirror others (Koordinator's per-card GPU core/memory and RDMA units follow nvidia.com/gpu and the VFs)
SKIPPED = ("pods", "ephemeral-storage")
MIRRORS = ("hugepages-", "koordinator.sh/")


@dataclass(frozen=True)
class Cell:
    used: float
    total: float

    @property
    def percent(self) -> float:
        return round(100.0 * self.used / self.total, 1) if self.total else 0.0

    @property
    def level(self) -> int:
        """0..10, the heatmap's shade (10 = full or over)."""
        return min(10, int(self.percent // 10)) if self.total else 0


@dataclass(frozen=True)
class NodeRow:
    name: str
    ready: bool
    unschedulable: bool
    cells: Mapping[str, Cell]  # resource -> occupancy, for each of `columns`
    pods: int


def columns(nodes: Sequence[Obj]) -> list[str]:
    """cpu, memory, then every extended resource some node offers (GPUs, vGPUs, MIG slices, RDMA VFs) by name;
    hugepages, pods, ephemeral storage and Koordinator's mirrors of the GPU and RDMA resources left out."""
    extra: set[str] = set()
    for n in nodes:
        for r in ((n.get("status") or {}).get("allocatable") or {}):
            if r not in ("cpu", "memory", *SKIPPED) and not r.startswith(MIRRORS):
                extra.add(r)
    return ["cpu", "memory", *sorted(extra)]


def _ready(node: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def occupancy(pods: Sequence[Obj]) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Per node name: the summed requests of its bound, unfinished pods, and their number."""
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    count: dict[str, int] = defaultdict(int)
    for pod in pods:
        facts = pod_facts(pod)
        if not facts.occupying:
            continue
        count[facts.node] += 1
        mine = used[facts.node]
        for r, v in facts.requests.items():
            mine[r] += v
    return used, count


class Occupancy:
    """`occupancy` kept up to date from pod events instead of recomputed: `put(pod)` on add and update,
    `remove(pod)` on delete (`live.Hub` wires them to the pods informer), `snapshot()` for a render. Thread-safe."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._facts: dict[str, PodFacts] = {}
        self._used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._count: dict[str, int] = defaultdict(int)

    @staticmethod
    def _key(pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"

    def _apply(self, facts: PodFacts | None, sign: int) -> None:
        if facts is None or not facts.occupying:
            return
        self._count[facts.node] += sign
        mine = self._used[facts.node]
        for r, v in facts.requests.items():
            mine[r] += sign * v
        if not self._count[facts.node]:  # no pods left: no float residue either
            del self._count[facts.node], self._used[facts.node]

    def put(self, pod: Mapping[str, Any]) -> None:
        facts, key = pod_facts(pod), self._key(pod)
        with self._lock:
            self._apply(self._facts.get(key), -1)
            self._facts[key] = facts
            self._apply(facts, +1)

    def remove(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            self._apply(self._facts.pop(self._key(pod), None), -1)

    def snapshot(self) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
        with self._lock:
            return {n: dict(u) for n, u in self._used.items()}, dict(self._count)


def totals(nodes: Sequence[Obj]) -> dict[str, float]:
    """The nodes' allocatable summed per resource (what the queue bars are scaled to)."""
    out: dict[str, float] = defaultdict(float)
    for n in nodes:
        for r, v in ((n.get("status") or {}).get("allocatable") or {}).items():
            out[r] += amount(v)
    return dict(out)


def node_rows(nodes: Sequence[Obj], pods: Sequence[Obj] | Occupancy) -> tuple[list[str], list[NodeRow]]:
    """The heatmap: its columns and one row per node (by name), each cell the requests of the node's pods against
    its allocatable. `pods` is the pod list, or an `Occupancy` kept from pod events."""
    cols = columns(nodes)
    used, count = pods.snapshot() if isinstance(pods, Occupancy) else occupancy(pods)
    rows = []
    for n in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name") or "")):
        name = str((n.get("metadata") or {}).get("name") or "")
        alloc = (n.get("status") or {}).get("allocatable") or {}
        mine = used.get(name, {})
        cells = {r: Cell(mine.get(r, 0.0), amount(alloc.get(r))) for r in cols}
        rows.append(NodeRow(name, _ready(n), bool((n.get("spec") or {}).get("unschedulable")), cells,
                            count.get(name, 0)))
    return cols, rows


@dataclass(frozen=True)
class HyperNodeRow:
    name: str
    tier: int
    depth: int
    nodes: int  # leaf nodes under it, through its member HyperNodes
    cells: Mapping[str, Cell]


def _members(hn: Mapping[str, Any], kind: str, names: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The names of `names` (Nodes or HyperNodes) that the HyperNode's members of type `kind` select."""
    out: list[str] = []
    for m in (hn.get("spec") or {}).get("members") or ():
        if not isinstance(m, dict) or (m.get("type") or "Node") != kind:
            continue
        sel = m.get("selector") or {}
        if (exact := (sel.get("exactMatch") or {}).get("name")) is not None:
            out += [exact] if exact in names else []
        elif (pattern := (sel.get("regexMatch") or {}).get("pattern")) is not None:
            try:
                rx = re.compile(pattern)
            except re.error:
                continue
            out += [n for n in names if rx.search(n)]
        elif (want := (sel.get("labelMatch") or {}).get("matchLabels")) is not None:
            out += [n for n in names if all(labels.get(n, {}).get(k) == v for k, v in want.items())]
    return out


def hypernode_rows(hypernodes: Sequence[Obj], node_table: Sequence[NodeRow], nodes: Sequence[Obj]) -> list[HyperNodeRow]:
    """The HyperNode tree, highest tier first, children under their parent (by name), each with the occupancy
    summed over the nodes below it. Empty without HyperNodes."""
    if not hypernodes:
        return []
    by_name = {str((h.get("metadata") or {}).get("name")): h for h in hypernodes}
    node_names = [r.name for r in node_table]
    labels = {str((n.get("metadata") or {}).get("name")): (n.get("metadata") or {}).get("labels") or {} for n in nodes}
    child_hn = {name: _members(h, "HyperNode", list(by_name), labels) for name, h in by_name.items()}
    direct = {name: _members(h, "Node", node_names, labels) for name, h in by_name.items()}
    has_parent = {c for cs in child_hn.values() for c in cs}
    cells_of = {r.name: r.cells for r in node_table}
    leaves: dict[str, set[str]] = {}

    def under(name: str, path: frozenset[str]) -> set[str]:
        if name in leaves:
            return leaves[name]
        out = set(direct[name])
        for c in child_hn[name]:
            if c not in path:
                out |= under(c, path | {c})
        leaves[name] = out
        return out

    rows: list[HyperNodeRow] = []

    def tier(name: str) -> int:
        return hypernode_tier(by_name[name]) or 0

    def walk(name: str, depth: int, path: frozenset[str]) -> None:
        below = under(name, path)
        cols: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for n in below:
            for r, c in cells_of.get(n, {}).items():
                cols[r][0] += c.used
                cols[r][1] += c.total
        rows.append(HyperNodeRow(name, tier(name), depth, len(below), {r: Cell(u, t) for r, (u, t) in cols.items()}))
        for c in sorted(child_hn[name]):
            if c not in path:
                walk(c, depth + 1, path | {c})

    for top in sorted((n for n in by_name if n not in has_parent), key=lambda n: (-tier(n), n)):
        walk(top, 0, frozenset({top}))
    return rows
