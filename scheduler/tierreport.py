"""Placement by network tier for `lahar simulate`: where each job landed in the HyperNode tree, how fragmented each
tier is, and the scheduler conf with the network-topology-aware plugin switched on or off.

Pure functions over a `framework.hypernodes.Tree` and plain dicts (node → used / capacity of one resource);
`scheduler.simulate` and `scheduler.workload` call them on the state after each session, `scheduler.plot` draws
`occupancy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lahar.scheduler.framework.conf import PluginOption, SchedulerConf, Tier
from lahar.scheduler.framework.hypernodes import CLUSTER_TOP, Tree

__all__ = ["PLUGIN", "fragmentation", "landed", "occupancy", "placements", "resource_of", "subgroup_placements",
           "with_topology"]

PLUGIN = "network-topology-aware"
_GPU = "nvidia.com/gpu"


def resource_of(capacity: Mapping[str, Mapping[str, float]]) -> str:
    """The resource fragmentation is counted in: GPUs when any node has them, else cpu."""
    return _GPU if any(c.get(_GPU, 0) > 0 for c in capacity.values()) else "cpu"


def landed(tree: Tree, nodes: Iterable[str]) -> tuple[str, int | None]:
    """The HyperNode a job's pods landed under (the lowest common ancestor of their nodes' lowest HyperNodes, as
    Volcano records it in `volcano.sh/job-allocated-hypernode`) and its tier; ("", None) with no pods or when a
    node is under no HyperNode. Spanning two roots gives the virtual cluster-top HyperNode."""
    got = ""
    seen = False
    for node in sorted(set(nodes)):
        leaf = tree.leaf_of(node)
        if not leaf:
            return "", None
        got = leaf if not seen else tree.lca(got, leaf)
        seen = True
    if not got:
        return "", None
    return got, tree.hypernodes[got].tier


def placements(tree: Tree, bindings: Mapping[str, str], pod_job: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """job → {"hypernode", "tier", "nodes"} for the bound pods in `bindings` (pod → node), pods mapped to jobs by
    `pod_job`; pods of no job are left out."""
    by_job: dict[str, set[str]] = {}
    for pod, node in bindings.items():
        job = pod_job.get(pod)
        if job:
            by_job.setdefault(job, set()).add(node)
    out = {}
    for job in sorted(by_job):
        name, tier = landed(tree, by_job[job])
        out[job] = {"hypernode": name, "tier": tier, "nodes": len(by_job[job])}
    return out


def subgroup_placements(tree: Tree, bindings: Mapping[str, str], pod_job: Mapping[str, str],
                        pod_subgroup: Mapping[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """job → subgroup → {"hypernode", "tier", "nodes"}: `placements` per subgroup (pod → subgroup id by
    `pod_subgroup`) of the jobs whose bound pods are in subgroups; pods of no subgroup are left out."""
    by_job: dict[str, dict[str, str]] = {}
    for pod, node in bindings.items():
        job = pod_job.get(pod)
        if job and pod in pod_subgroup:
            by_job.setdefault(job, {})[pod] = node
    return {job: placements(tree, by_job[job], pod_subgroup) for job in sorted(by_job)}


def occupancy(tree: Tree, used: Mapping[str, float], capacity: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """HyperNode → {"tier", "parent", "used", "capacity", "free", "busy_nodes", "nodes"} of one resource (node →
    amount); nodes missing from `capacity` are not counted. The virtual cluster-top HyperNode is left out."""
    out = {}
    for name in sorted(tree.hypernodes, key=lambda n: (-tree.hypernodes[n].tier, n)):
        if name == CLUSTER_TOP:
            continue
        hn = tree.hypernodes[name]
        nodes = [n for n in hn.nodes if n in capacity]
        cap = sum(capacity[n] for n in nodes)
        use = sum(min(used.get(n, 0.0), capacity[n]) for n in nodes)
        out[name] = {"tier": hn.tier, "parent": "" if hn.parent == CLUSTER_TOP else hn.parent,
                     "used": round(use, 6), "capacity": round(cap, 6), "free": round(cap - use, 6),
                     "busy_nodes": sum(1 for n in nodes if used.get(n, 0.0) > 0), "nodes": len(nodes)}
    return out


def fragmentation(tree: Tree, used: Mapping[str, float], capacity: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """Per tier ("1", "2", ...): {"hypernodes", "whole", "whole_share", "free", "free_in_whole"}. A HyperNode is
    whole when none of its nodes has anything of the resource in use (a job that needs the whole rack still fits);
    `free_in_whole` is the free amount in whole HyperNodes, `free` all of it. A tier with no node of the resource
    counts no HyperNode."""
    occ = occupancy(tree, used, capacity)
    out: dict[str, dict[str, Any]] = {}
    top = tree.hypernodes[CLUSTER_TOP].tier if CLUSTER_TOP in tree else None
    for tier in tree.tiers:
        if tier == top:
            continue  # the virtual HyperNode above the roots
        rows = [occ[n] for n in tree.by_tier[tier] if n in occ and occ[n]["capacity"] > 0]
        whole = [r for r in rows if r["busy_nodes"] == 0]
        out[str(tier)] = {"hypernodes": len(rows), "whole": len(whole),
                          "whole_share": round(len(whole) / len(rows), 4) if rows else None,
                          "free": round(sum(r["free"] for r in rows), 6),
                          "free_in_whole": round(sum(r["free"] for r in whole), 6)}
    return out


def with_topology(conf: SchedulerConf, on: bool) -> SchedulerConf:
    """`conf` with the network-topology-aware plugin in its last tier (`on`), or with it removed from every tier."""
    tiers = [Tier(plugins=tuple(p for p in t.plugins if p.name != PLUGIN)) for t in conf.tiers]
    if on:
        if not tiers:
            tiers = [Tier()]
        present = any(p.name == PLUGIN for t in conf.tiers for p in t.plugins)
        if present:
            return conf
        tiers[-1] = Tier(plugins=(*tiers[-1].plugins, PluginOption(name=PLUGIN)))
    return conf.model_copy(update={"tiers": tuple(tiers)})
