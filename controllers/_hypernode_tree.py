"""The pure core of the hypernode controller: the discovery ConfigMap's format, the label source's tree builder, and
what a HyperNode's status should say (nodeCount, the cross-object checks). Plain dicts in, plain dicts out.

`controllers.hypernodes` is the I/O shell around it. Volcano's counterparts: `pkg/controllers/hypernode/api/types.go`
(the config), `discovery/label/label.go` (the tree), `hypernode_handler.go` (nodeCount).

The label source, as Volcano's: `networkTopologyTypes` maps a topology type to a chain of node labels listed from the
top tier down to `kubernetes.io/hostname`; the last label names the node itself and is dropped, the one above it is
tier 1, and so on up. A node joins the tier-1 HyperNode of its tier-1 label value, that HyperNode joins the tier-2
one of the node's tier-2 label value, ...; a node missing a label stops its chain there (no higher tier for it).
One HyperNode per (label key, value) across the whole cluster. Types named longer than 20 characters and chains
with a repeated label are skipped (Volcano logs them; lahar also returns them as problems).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from lahar.kube import limits, regexes, selectors

__all__ = [
    "API_VERSION",
    "CONFIG_KEY",
    "CONFIGMAP_NAMES",
    "DiscoveryConfig",
    "Plan",
    "SOURCE_LABEL",
    "TopologyConfig",
    "build_label_tree",
    "hypernode_name",
    "label_chains",
    "node_counts",
    "parse_config",
    "plan",
    "problems",
]

Obj = dict[str, Any]

API_VERSION = "topology.volcano.sh/v1alpha1"
SOURCE_LABEL = "volcano.sh/network-topology-source"  # Volcano's NetworkTopologySourceLabelKey: who made the HyperNode
CONFIGMAP_NAMES = ("volcano-controller-configmap", "lahar-controller-configmap")  # Volcano's `<release>-controller-configmap`
CONFIG_KEY = "volcano-controller.conf"
MAX_TYPE_NAME = 20  # Volcano's networkTopologyTypeLength
MAX_LISTED = 5  # node names listed in one problem message


@dataclass(frozen=True)
class DiscoveryConfig:
    """One `networkTopologyDiscovery[]` entry."""

    source: str
    enabled: bool = False
    interval: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TopologyConfig:
    discovery: tuple[DiscoveryConfig, ...] = ()

    def enabled(self, source: str) -> DiscoveryConfig | None:
        """Volcano's GetDiscoveryConfig: the first enabled entry of `source`."""
        return next((d for d in self.discovery if d.source == source and d.enabled), None)


def parse_config(text: str | None) -> tuple[TopologyConfig, list[str]]:
    """The ConfigMap key's YAML → (config, problems). Bad YAML or shapes give an empty config and the reason."""
    if not text:
        return TopologyConfig(), []
    try:
        data = limits.safe_load(text)
    except (yaml.YAMLError, limits.LimitError) as e:
        return TopologyConfig(), [f"{CONFIG_KEY}: not valid YAML: {e}"]
    if not isinstance(data, Mapping):
        return TopologyConfig(), [f"{CONFIG_KEY}: must be a mapping"]
    entries = data.get("networkTopologyDiscovery") or []
    if not isinstance(entries, list):
        return TopologyConfig(), [f"{CONFIG_KEY}: networkTopologyDiscovery: must be a list"]
    out: list[DiscoveryConfig] = []
    errs: list[str] = []
    for i, entry in enumerate(entries):
        where = f"{CONFIG_KEY}: networkTopologyDiscovery[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("source"), str):
            errs.append(f"{where}.source: required")
            continue
        config = entry.get("config") or {}
        if not isinstance(config, Mapping):
            errs.append(f"{where}.config: must be a mapping")
            continue
        interval = entry.get("interval")
        out.append(DiscoveryConfig(source=entry["source"], enabled=bool(entry.get("enabled")),
                                   interval=None if interval is None else str(interval), config=dict(config)))
    return TopologyConfig(tuple(out)), errs


def label_chains(config: Mapping[str, Any]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The label source's `networkTopologyTypes` → ({type: (tier-1 key, tier-2 key, ...)}, problems)."""
    types = config.get("networkTopologyTypes") or {}
    if not isinstance(types, Mapping):
        return {}, ["networkTopologyTypes: must be a mapping of topology type to a list of {nodeLabel: key}"]
    chains: dict[str, tuple[str, ...]] = {}
    errs: list[str] = []
    for name, labels in sorted(types.items(), key=lambda kv: str(kv[0])):
        where = f"networkTopologyTypes.{name}"
        if len(str(name)) > MAX_TYPE_NAME:
            errs.append(f"{where}: the topology type name is longer than {MAX_TYPE_NAME} characters")
            continue
        keys = [entry.get("nodeLabel") if isinstance(entry, Mapping) else None for entry in labels or []] \
            if isinstance(labels, list) else None
        if keys is None or not all(isinstance(k, str) and k for k in keys):
            errs.append(f"{where}: must be a list of {{nodeLabel: <label key>}}")
            continue
        if len(set(keys)) != len(keys):
            errs.append(f"{where}: there are duplicate labels")
            continue
        chains[str(name)] = tuple(reversed(keys[:-1]))  # the last label names the node itself
    return chains, errs


def _clean(text: str) -> str:
    """Volcano's cleanString: letters lowercased, digits, `.` and `-` kept, anything else `-`."""
    return "".join(c.lower() if c.isalpha() else c if c.isdigit() or c in ".-" else "-" for c in text)


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def hypernode_name(topology_type: str, tier: int, key: str, value: str, taken: Iterable[str] = ()) -> str:
    """`hypernode-<type>-tier<N>-<value>` (deterministic, where Volcano appends 5 random characters); the value is
    cleaned like the type, and replaced by a hash of `key=value` when the result is not a valid name or taken."""
    prefix = f"hypernode-{_clean(topology_type)}-tier{tier}"
    name = f"{prefix}-{_clean(value)}"
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253 or name in set(taken):
        name = f"{prefix}-{hashlib.sha256(f'{key}={value}'.encode()).hexdigest()[:10]}"
    return name


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _adopted(existing: Sequence[Obj], topology_type: str, tier: int, key: str, value: str) -> str | None:
    """Volcano's buildHyperNodeName reuse: an existing label-source HyperNode carrying `key=value` whose name starts
    with `hypernode-<type>-tier<N>` keeps its name (so a tree a Volcano controller made is adopted, not replaced)."""
    prefix = f"hypernode-{_clean(topology_type)}-tier{tier}"
    for hn in sorted(existing, key=_name):
        labels = _labels(hn)
        if labels.get(SOURCE_LABEL) == "label" and labels.get(key) == value and _name(hn).startswith(prefix):
            return _name(hn)
    return None


def build_label_tree(nodes: Sequence[Mapping[str, Any]], chains: Mapping[str, Sequence[str]],
                     existing: Sequence[Obj] = ()) -> list[Obj]:
    """Nodes + label chains → the desired HyperNodes (sorted by name), each labelled with its source and its
    `key: value`, members as exactMatch, sorted. `existing` (HyperNodes already there) only decides names."""
    by_label: dict[tuple[str, str], str] = {}
    info: dict[str, dict[str, Any]] = {}
    for node in sorted(nodes, key=_name):
        labels = _labels(node)
        for topology_type in sorted(chains):
            member = _name(node)
            for i, key in enumerate(chains[topology_type]):
                if key not in labels:
                    break
                tier, value = i + 1, labels[key]
                name = by_label.get((key, value))
                if name is None:
                    name = _adopted(existing, topology_type, tier, key, value) or \
                        hypernode_name(topology_type, tier, key, value, taken=info)
                    by_label[(key, value)] = name
                    info[name] = {"tier": tier, "tierName": key, "labels": {key: value}, "members": set()}
                info[name]["members"].add(member)
                member = name
    out = []
    for name in sorted(info):
        entry = info[name]
        member_type = "Node" if entry["tier"] == 1 else "HyperNode"
        out.append({
            "apiVersion": API_VERSION, "kind": "HyperNode",
            "metadata": {"name": name, "labels": {SOURCE_LABEL: "label", **entry["labels"]}},
            "spec": {"tier": entry["tier"], "tierName": entry["tierName"],
                     "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}}
                                 for m in sorted(entry["members"])]},
        })
    return out


@dataclass(frozen=True)
class Plan:
    """What to write so the source's HyperNodes are the desired ones."""

    create: tuple[Obj, ...] = ()
    update: tuple[Obj, ...] = ()   # the existing object with the desired spec and labels merged in
    delete: tuple[str, ...] = ()


def plan(desired: Sequence[Obj], existing: Sequence[Obj], source: str) -> Plan:
    """Diff the desired HyperNodes of `source` against the existing ones; only HyperNodes labelled with that source
    are ever updated or deleted (a user's HyperNode of the same name is left alone and not overwritten)."""
    ours = {_name(hn): hn for hn in existing if _labels(hn).get(SOURCE_LABEL) == source}
    others = {_name(hn) for hn in existing} - set(ours)
    create, update = [], []
    for hn in desired:
        name = _name(hn)
        if name in others:
            continue
        current = ours.get(name)
        if current is None:
            create.append(hn)
            continue
        labels = {**_labels(current), **_labels(hn)}
        if current.get("spec") != hn["spec"] or labels != _labels(current):
            update.append({**current, "metadata": {**current["metadata"], "labels": labels}, "spec": hn["spec"]})
    wanted = {_name(hn) for hn in desired}
    return Plan(tuple(create), tuple(update), tuple(sorted(n for n in ours if n not in wanted)))


# --- status: nodeCount and the cross-object checks -------------------------------------------------------------------


def _select(selector: Mapping[str, Any], names: Iterable[str], labels_of: Mapping[str, Mapping[str, str]] | None
            ) -> set[str]:
    """Volcano's GetMembers: exactMatch by name, regexMatch searched in the names, labelMatch (nodes) by labels."""
    names = list(names)
    exact = selector.get("exactMatch")
    if isinstance(exact, Mapping):
        return {exact["name"]} if exact.get("name") in names else set()
    regex = selector.get("regexMatch")
    if isinstance(regex, Mapping):
        compiled = regexes.compile_bounded(regex.get("pattern"))
        return {n for n in names if compiled.search(n)} if compiled else set()
    label_match = selector.get("labelMatch")
    if isinstance(label_match, Mapping) and labels_of is not None:
        if not label_match.get("matchLabels") and not label_match.get("matchExpressions"):
            return set()
        try:
            matcher = selectors.from_label_selector(label_match)
        except selectors.SelectorError:
            return set()
        return {n for n in names if matcher.matches(labels_of.get(n) or {})}
    return set()


def _members(hn: Mapping[str, Any], nodes: Mapping[str, Mapping[str, str]], hypernodes: Iterable[str]
             ) -> tuple[set[str], set[str]]:
    """(direct member nodes, direct member HyperNodes) of one HyperNode."""
    direct_nodes: set[str] = set()
    children: set[str] = set()
    for member in (hn.get("spec") or {}).get("members") or []:
        if not isinstance(member, Mapping) or not isinstance(member.get("selector"), Mapping):
            continue
        if member.get("type") == "Node":
            direct_nodes |= _select(member["selector"], nodes, nodes)
        elif member.get("type") == "HyperNode":
            children |= _select(member["selector"], hypernodes, None) - {_name(hn)}
    return direct_nodes, children


def _subtrees(hypernodes: Sequence[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, str]]
              ) -> tuple[dict[str, tuple[set[str], set[str]]], dict[str, set[str]]]:
    """(direct members per HyperNode, the existing nodes of each subtree, cycles cut)."""
    names = [_name(hn) for hn in hypernodes]
    tree = {_name(hn): _members(hn, nodes, names) for hn in hypernodes}

    def leaves(name: str, seen: frozenset[str]) -> set[str]:
        direct, children = tree[name]
        out = set(direct)
        for child in children - seen:
            out |= leaves(child, seen | {child})
        return out

    return tree, {name: leaves(name, frozenset({name})) for name in names}


def node_counts(hypernodes: Sequence[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """Per HyperNode, the number of distinct existing nodes in its subtree (cycles are cut)."""
    return {name: len(found) for name, found in _subtrees(hypernodes, nodes)[1].items()}


def _tier(hn: Mapping[str, Any]) -> int | None:
    tier = (hn.get("spec") or {}).get("tier")
    return tier if isinstance(tier, int) and not isinstance(tier, bool) else None


def problems(hypernodes: Sequence[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """The checks across HyperNodes that admission does not make (Volcano makes none of them), per HyperNode:
    a member HyperNode's tier must be below its parent's; the member graph has no cycle; a node is in at most one
    HyperNode of a tier (counting every node of the subtree, so a leaf under two spines shows on both spines). Every HyperNode has an entry ([] when consistent); messages are sorted."""
    by_name = {_name(hn): hn for hn in hypernodes}
    names = list(by_name)
    tree, subtree = _subtrees(hypernodes, nodes)
    out: dict[str, list[str]] = {name: [] for name in names}
    for name, hn in by_name.items():
        tier = _tier(hn)
        for child in sorted(tree[name][1]):
            child_tier = _tier(by_name[child])
            if tier is not None and child_tier is not None and child_tier >= tier:
                out[name].append(f"member HyperNode {child} has tier {child_tier}, which is not below this "
                                 f"HyperNode's tier {tier}")
    for name in names:  # a cycle through `name`: depth-first over HyperNode members
        path = _cycle(name, tree)
        if path:
            out[name].append("HyperNode members form a cycle: " + " -> ".join(path))
    for name in names:  # the nodes of a subtree that another HyperNode of the same tier also holds
        for other in sorted(names):
            shared = subtree[name] & subtree[other]
            if other == name or not shared or _tier(by_name[name]) != _tier(by_name[other]):
                continue
            listed = ", ".join(sorted(shared)[:MAX_LISTED]) + (", ..." if len(shared) > MAX_LISTED else "")
            out[name].append(f"{len(shared)} node(s) also in tier-{_tier(by_name[name])} HyperNode {other}: {listed}")
    return {name: sorted(msgs) for name, msgs in out.items()}


def _cycle(start: str, tree: Mapping[str, tuple[set[str], set[str]]]) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        for child in sorted(tree.get(name, (set(), set()))[1], reverse=True):
            if child == start:
                return [*path, start]
            if child not in seen and child in tree:
                seen.add(child)
                stack.append((child, [*path, child]))
    return None
