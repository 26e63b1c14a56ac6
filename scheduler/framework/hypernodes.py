"""The network-topology tree a session sees: HyperNodes (topology.volcano.sh/v1alpha1) resolved to node names.

Pure: `build(hypernodes, nodes)` turns HyperNode and Node objects of the snapshot into a `Tree` (tier, parent,
children, the real nodes under each HyperNode, ancestors, lowest common ancestor); `constraint(...)` reads a
PodGroup's `spec.networkTopology`; `gradient(...)` lists the HyperNodes a job may land in, lowest tier first.
Read by the allocate action and the network-topology-aware plugin (Volcano `api/hyper_node_info.go`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lahar.kube import selectors

__all__ = [
    "ALLOCATED_HYPERNODE_ANNOTATION",
    "CLUSTER_TOP",
    "Constraint",
    "HyperNode",
    "Mode",
    "RowSums",
    "Tree",
    "build",
    "constraint",
    "gradient",
]

# PodGroup annotation: the HyperNode the job was placed under (the LCA of its tasks' HyperNodes), as Volcano writes it
ALLOCATED_HYPERNODE_ANNOTATION = "volcano.sh/job-allocated-hypernode"
# Volcano's virtual HyperNode above every root, one tier above the highest (tier 1 when there are none), holding
# every node of the session
CLUSTER_TOP = "<cluster-top-hypernode>"


class Mode(enum.StrEnum):
    HARD = "hard"
    SOFT = "soft"


@dataclass(frozen=True, slots=True)
class Constraint:
    """A job's `networkTopology`: `highest_tier` None = any tier (the whole tree)."""

    mode: Mode
    highest_tier: int | None = None


@dataclass(slots=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)  # HyperNode members, by name
    nodes: frozenset[str] = frozenset()  # every real node under this HyperNode (members of members included)


class Tree:
    """HyperNodes by name and by tier, each node's HyperNodes, and why some members were left out (`errors`)."""

    __slots__ = ("hypernodes", "by_tier", "tiers", "errors", "_ancestors", "_node_hypernodes", "_rows", "_lca")

    def __init__(self, hypernodes: dict[str, HyperNode], errors: list[str]) -> None:
        self.hypernodes = hypernodes
        self.errors = errors
        by_tier: dict[int, list[str]] = {}
        for name in sorted(hypernodes):
            by_tier.setdefault(hypernodes[name].tier, []).append(name)
        self.by_tier = by_tier
        self.tiers: tuple[int, ...] = tuple(sorted(by_tier))
        self._ancestors: dict[str, tuple[str, ...]] = {}
        node_hns: dict[str, list[str]] = {}
        for name in sorted(hypernodes, key=lambda n: (hypernodes[n].tier, n)):
            for node in hypernodes[name].nodes:
                node_hns.setdefault(node, []).append(name)
        self._node_hypernodes = node_hns
        self._rows: dict[tuple[str, int], np.ndarray] = {}
        self._lca: dict[tuple[str, str], str] = {}

    def __len__(self) -> int:
        return len(self.hypernodes)

    def __contains__(self, name: object) -> bool:
        return name in self.hypernodes

    def ancestors(self, name: str) -> tuple[str, ...]:
        """`name` first, then its parent, up to the root (Volcano GetAncestors)."""
        got = self._ancestors.get(name)
        if got is None:
            chain = [name]
            hn = self.hypernodes.get(name)
            while hn is not None and hn.parent and hn.parent not in chain:
                chain.append(hn.parent)
                hn = self.hypernodes.get(hn.parent)
            got = self._ancestors[name] = tuple(chain)
        return got

    def lca(self, a: str, b: str) -> str:
        """Lowest common ancestor; either side empty → the other; no common ancestor → ""."""
        if not a:
            return b
        if not b:
            return a
        got = self._lca.get((a, b))
        if got is None:
            mine = set(self.ancestors(a))
            got = self._lca[(a, b)] = next((x for x in self.ancestors(b) if x in mine), "")
        return got

    def descendants(self, name: str) -> list[str]:
        """`name` and every HyperNode below it, breadth first."""
        out, queue, seen = [], [name], {name}
        while queue:
            cur = queue.pop(0)
            if cur not in self.hypernodes:
                continue
            out.append(cur)
            for child in sorted(self.hypernodes[cur].children):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        return out

    def hypernodes_of(self, node: str) -> list[str]:
        """The HyperNodes a real node is under, lowest tier first."""
        return self._node_hypernodes.get(node, [])

    def leaf_of(self, node: str) -> str:
        """The lowest-tier HyperNode holding `node` ("" when none does; Volcano FindHyperNodeForNode)."""
        hns = self._node_hypernodes.get(node)
        return hns[0] if hns else ""

    def tier_of(self, tier_name: str) -> int | None:
        for hn in self.hypernodes.values():
            if hn.tier_name == tier_name:
                return hn.tier
        return None

    def rows(self, name: str, index: Mapping[str, int]) -> np.ndarray:
        """The session's node rows under `name` (sorted; nodes not in the snapshot are left out)."""
        key = (name, id(index))
        got = self._rows.get(key)
        if got is None:
            hn = self.hypernodes.get(name)
            got = np.array(sorted(index[n] for n in (hn.nodes if hn else ()) if n in index), dtype=np.intp)
            self._rows[key] = got
        return got


class RowSums:
    """Per-HyperNode sums of per-node-row values, for `names` (in that order) over a session's node index: the
    rows of every HyperNode laid end to end and summed segment by segment (a node under several HyperNodes counts
    in each; one pass over ~tiers × nodes rows instead of a HyperNode × node product)."""

    __slots__ = ("order", "starts", "empty")

    def __init__(self, tree: Tree, names: Sequence[str], index: Mapping[str, int]) -> None:
        rows = [tree.rows(name, index) for name in names]
        sizes = np.array([len(r) for r in rows], dtype=np.intp)
        self.empty = sizes == 0
        self.starts = (np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else sizes).astype(np.intp)
        if len(sizes) and sizes[-1] == 0:  # empty HyperNodes last: their start is one past the rows, so one more
            rows.append(np.zeros(1, dtype=np.intp))  # row (masked below) keeps it in range
        self.order = np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """`values` (node rows × k, or node rows) summed per HyperNode: len(names) × k (or len(names))."""
        if not len(self.empty) or not len(values):
            return np.zeros((len(self.empty), *values.shape[1:]))
        out = np.add.reduceat(values[self.order], self.starts, axis=0).astype(np.float64, copy=False)
        out[self.empty] = 0.0  # reduceat gives an empty segment the value at its start
        return out


def _member_nodes(selector: Mapping[str, Any], nodes: Sequence[tuple[str, Mapping[str, str]]],
                  where: str, errors: list[str]) -> set[str]:
    """Volcano GetMembers for a Node member: exactMatch by name, regexMatch searched in the name, labelMatch a
    LabelSelector (an empty one matches nothing)."""
    exact = selector.get("exactMatch")
    if exact is not None:
        name = exact.get("name") or ""
        return {name} if name else set()
    regex = selector.get("regexMatch")
    if regex is not None:
        try:
            pattern = re.compile(regex.get("pattern") or "")
        except re.error as e:
            errors.append(f"{where}.regexMatch.pattern: {e}")
            return set()
        return {n for n, _ in nodes if pattern.search(n)}
    label = selector.get("labelMatch")
    if label is not None:
        if not label.get("matchLabels") and not label.get("matchExpressions"):
            return set()
        try:
            sel = selectors.from_label_selector(label)
        except selectors.SelectorError as e:
            errors.append(f"{where}.labelMatch: {e}")
            return set()
        return {n for n, labels in nodes if sel.matches(labels)}
    return set()


def build(hypernodes: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> Tree:
    """The tree from HyperNode objects and the Node objects their selectors match against, under `CLUSTER_TOP`.
    A HyperNode member names its child by exactMatch; a child claimed by two parents keeps the first (by name), a
    cycle is cut; each is reported in `Tree.errors` with the field."""
    node_list = [((n.get("metadata") or {}).get("name") or "", (n.get("metadata") or {}).get("labels") or {})
                 for n in nodes]
    errors: list[str] = []
    objs = {(o.get("metadata") or {}).get("name") or "": o for o in hypernodes}
    objs.pop("", None)
    hns: dict[str, HyperNode] = {}
    direct: dict[str, set[str]] = {}
    for name in sorted(objs):
        spec = objs[name].get("spec") or {}
        hns[name] = HyperNode(name, int(spec.get("tier") or 0), str(spec.get("tierName") or ""))
        direct[name] = set()
    for name in sorted(objs):
        for i, member in enumerate((objs[name].get("spec") or {}).get("members") or ()):
            where = f"hypernode {name}: spec.members[{i}].selector"
            selector = member.get("selector") or {}
            if member.get("type") == "HyperNode":
                child = ((selector.get("exactMatch") or {}).get("name")) or ""
                if not child:
                    errors.append(f"{where}: a HyperNode member needs exactMatch")
                elif child not in hns:
                    errors.append(f"{where}.exactMatch.name: hypernode {child} not found")
                elif child == name:
                    errors.append(f"{where}.exactMatch.name: a hypernode cannot be its own member")
                elif hns[child].parent:
                    errors.append(f"{where}.exactMatch.name: hypernode {child} already has parent "
                                  f"{hns[child].parent}")
                else:
                    hns[child].parent = name
                    hns[name].children.append(child)
            else:
                direct[name] |= _member_nodes(selector, node_list, where, errors)
    # cut cycles: walking up from any hypernode must end at a root
    for name in sorted(hns):
        seen = [name]
        cur = hns[name]
        while cur.parent:
            if cur.parent in seen:
                errors.append(f"hypernode {cur.name}: parent {cur.parent} makes a cycle, cut")
                hns[cur.parent].children.remove(cur.name)
                cur.parent = ""
                break
            seen.append(cur.parent)
            cur = hns[cur.parent]
    resolved: dict[str, frozenset[str]] = {}

    def under(name: str) -> frozenset[str]:
        got = resolved.get(name)
        if got is None:
            acc = set(direct[name])
            for child in hns[name].children:
                acc |= under(child)
            got = resolved[name] = frozenset(acc)
        return got

    for name in sorted(hns, key=lambda n: hns[n].tier):
        hns[name].nodes = under(name)
    top = HyperNode(CLUSTER_TOP, max((h.tier for h in hns.values()), default=0) + 1,
                    nodes=frozenset(n for n, _ in node_list if n))
    for name in sorted(hns):
        if not hns[name].parent:
            hns[name].parent = CLUSTER_TOP
            top.children.append(name)
    hns[CLUSTER_TOP] = top
    return Tree(hns, errors)


def constraint(spec: Mapping[str, Any] | None, tree: Tree | None = None) -> Constraint | None:
    """A PodGroup's `spec.networkTopology` (mode defaults to hard); `highestTierName` is resolved through the
    tree's tier names (an unknown name, or a tier that is not a number: any tier). None when the job has no
    network-topology constraint."""
    if not spec:
        return None
    mode = Mode.SOFT if str(spec.get("mode") or "hard").lower() == "soft" else Mode.HARD
    highest = spec.get("highestTierAllowed")
    if highest is not None:
        try:
            return Constraint(mode, int(highest))
        except (TypeError, ValueError):  # admission refuses it; one that got stored anyway limits nothing
            return Constraint(mode, None)
    name = spec.get("highestTierName")
    if name and tree is not None:
        return Constraint(mode, tree.tier_of(str(name)))
    return Constraint(mode, None)


def gradient(tree: Tree, *, highest_tier: int | None, allocated: str = "",
             eligible: Callable[[str], bool] | None = None) -> list[list[str]]:
    """Volcano hyperNodeGradientFn: the HyperNodes of tier ≤ `highest_tier`, grouped by tier, lowest first.

    With `allocated` (where the job already runs) the search is the subtree of its highest ancestor within
    `highest_tier` and no resource pre-filter applies; otherwise every HyperNode must pass `eligible` (enough free
    resources for the job's minimum). An allocated HyperNode above `highest_tier` (or unknown) gives no gradient."""
    limit = highest_tier if highest_tier is not None else (tree.tiers[-1] if tree.tiers else 0)
    if allocated:
        if allocated not in tree:
            return []
        root = ""
        for a in tree.ancestors(allocated):
            if tree.hypernodes[a].tier > limit:
                break
            root = a
        if not root:
            return []
        names = tree.descendants(root)
    else:
        names = sorted(tree.hypernodes)
    out: dict[int, list[str]] = {}
    for name in names:
        hn = tree.hypernodes[name]
        if hn.tier > limit:
            continue
        if not allocated and eligible is not None and not eligible(name):
            continue
        out.setdefault(hn.tier, []).append(name)
    return [sorted(out[t]) for t in sorted(out)]


_LAST: list[Any] = []  # [key objects, Tree]: the tree of the last snapshot asked for


def tree_of(hypernodes: Mapping[str, Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]) -> Tree:
    """`build` for a snapshot's HyperNode objects (`Snapshot.extras["hypernodes"]`) and its Node objects, reused
    while they are the same objects (an idle tick does not rebuild the tree)."""
    hn_objs = [hypernodes[k] for k in sorted(hypernodes)]
    if _LAST:
        old_hns, old_nodes, tree = _LAST
        if (len(old_hns) == len(hn_objs) and len(old_nodes) == len(nodes)
                and all(a is b for a, b in zip(old_hns, hn_objs, strict=True))
                and all(a is b for a, b in zip(old_nodes, nodes, strict=True))):
            return tree
    tree = build(hn_objs, nodes)
    _LAST[:] = [hn_objs, list(nodes), tree]
    return tree
