"""Benchmark network-topology-aware gang scheduling: one allocate session with and without HyperNodes.

Pure CPU, no cluster. 1,000 nodes (8 GPUs each) in 4 tiers of HyperNodes — racks of 8 nodes (tier 1), 5 racks a
leaf group (tier 2), 5 groups a spine (tier 3), one core (tier 4) — and 200 gangs of 2–16 pods: half with a hard
`networkTopology` (highestTierAllowed 1 or 2), a quarter soft, a quarter unconstrained. Prints the session time
with the network-topology-aware plugin (constraints enforced, HyperNodes scored) against the same tiers without
it (constraints ignored), in CPU seconds (the best of interleaved pairs after a cold one), and the target (with
≤ 1.5× without).

Fragmentation: 500 single pods (1–2 GPUs) on the cluster where 100 1-GPU pods already run on random nodes; the share of tier-1 HyperNodes (racks) left whole
(no pod) after the session, with the plugin's tier bin-packing of unconstrained pods and without, under the
default node scores (least-requested: spreading) and with `binpack` added.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session

BASE = ["gang", "proportion", "predicates", "nodeorder"]


def conf_text(topology: bool, extra: tuple[str, ...] = ()) -> str:
    plugins = [*BASE, *extra, "network-topology-aware"] if topology else [*BASE, *extra]
    return "actions: allocate\ntiers:\n- plugins:\n" + "".join(f"  - name: {p}\n" for p in plugins)


def hypernode(name: str, tier: int, nodes: list[str] = (), children: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def cluster(n_nodes: int, rack: int = 8, fan: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [{"metadata": {"name": f"n{i:04d}", "labels": {}}, "spec": {},
              "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}
             for i in range(n_nodes)]
    hns, tier = [], []
    for r in range(0, n_nodes, rack):
        name = f"rack{r // rack:03d}"
        hns.append(hypernode(name, 1, nodes=[n["metadata"]["name"] for n in nodes[r:r + rack]]))
        tier.append(name)
    level = 2
    while len(tier) > 1:
        up = []
        for k in range(0, len(tier), fan):
            name = f"t{level}-{k // fan:03d}"
            hns.append(hypernode(name, level, children=tier[k:k + fan]))
            up.append(name)
        tier, level = up, level + 1
    return nodes, hns


def pod(name: str, group: str, gpus: int, cpu: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "bench", "uid": f"bench-{name}",
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {
                "cpu": str(cpu), "memory": "8Gi", "nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


def gangs(n_gangs: int, seed: int = 11) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    pgs, pods = [], []
    for g in range(n_gangs):
        size = rnd.choice([2, 4, 8, 16])
        gpus = rnd.choice([4, 8])
        kind = rnd.random()
        spec: dict[str, Any] = {"minMember": size, "queue": "default"}
        if kind < 0.5:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1 if size * gpus <= 64 else 2}
        elif kind < 0.75:
            spec["networkTopology"] = {"mode": "soft", "highestTierAllowed": 1}
        name = f"pg{g:03d}"
        pgs.append({"metadata": {"name": name, "namespace": "bench", "creationTimestamp":
                                 f"2024-01-01T00:{g // 60:02d}:{g % 60:02d}Z"},
                    "spec": spec, "status": {"phase": "Inqueue"}})
        pods += [pod(f"{name}-w-{i}", name, gpus, 8) for i in range(size)]
    return pgs, pods


def singles(n: int, seed: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    pgs, pods = [], []
    for k in range(n):
        name = f"single{k:04d}"
        pgs.append({"metadata": {"name": name, "namespace": "bench", "creationTimestamp": "2023-12-31T00:00:00Z"},
                    "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Inqueue"}})
        pods.append(pod(f"{name}-p-0", name, rnd.choice([1, 2]), 2))
    return pgs, pods


QUEUE = {"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}}


def session(nodes: list[Any], hns: list[Any], pgs: list[Any], pods: list[Any], topology: bool,
            extra: tuple[str, ...] = ()) -> tuple[float, Any]:
    registry = in_tree_registry()
    c = confs.load(conf_text(topology, extra), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=pods, nodes=nodes, podgroups=pgs, queues=[QUEUE], hypernodes=hns)
    t0 = time.process_time()  # CPU seconds: on a shared machine wall time mostly measures the neighbours
    d = run_session(snap, c, registry=registry, uid="bench")
    return time.process_time() - t0, d


def racks_whole(hns: list[Any], binds: dict[str, str]) -> float:
    used = set(binds.values())
    racks = [h for h in hns if h["spec"]["tier"] == 1]
    whole = sum(1 for h in racks if not any(m["selector"]["exactMatch"]["name"] in used for m in h["spec"]["members"]))
    return whole / len(racks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gangs", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=3, help="interleaved off/on pairs after a cold one")
    ap.add_argument("--quick", action="store_true", help="200 nodes, 40 gangs, 1 pair (what `make bench` runs)")
    a = ap.parse_args()
    if a.quick:
        vars(a).update({"nodes": 200, "gangs": 40, "pairs": 1})
    nodes, hns = cluster(a.nodes)
    pgs, pods = gangs(a.gangs)
    session(nodes, hns, pgs, pods, True)  # cold: imports, caches
    off, on = [], []
    binds = {}
    for _ in range(a.pairs):
        t, _ = session(nodes, hns, pgs, pods, False)
        off.append(t)
        t, d = session(nodes, hns, pgs, pods, True)
        on.append(t)
        binds = d.bind_map()
    placed = len({b.split("/")[1].rsplit("-w-", 1)[0] for b in binds})
    t_off, t_on = min(off), min(on)
    ratio = t_on / t_off
    print(f"{a.nodes} nodes, {len(hns)} hypernodes in 4 tiers, {a.gangs} gangs ({len(pods)} pods): "
          f"session without topology {t_off * 1000:.0f} ms, with {t_on * 1000:.0f} ms, ratio {ratio:.2f}x "
          f"(target <= 1.5x: {'ok' if ratio <= 1.5 else 'MISSED'}); {placed} gangs placed with topology")
    spgs, spods = singles(a.nodes // 2)
    rnd = random.Random(3)
    running = []  # what a cluster in use looks like: 1-GPU pods already running on a random tenth of the nodes
    for k, node in enumerate(rnd.sample(nodes, a.nodes // 10)):
        p = pod(f"running{k:04d}", "", 1, 2)
        p["metadata"]["annotations"] = {}
        p["spec"]["nodeName"] = node["metadata"]["name"]
        p["status"]["phase"] = "Running"
        running.append(p)
    spods = running + spods
    for extra in ((), ("binpack",)):
        frag = {}
        for topology in (False, True):
            _, d = session(nodes, hns, spgs, spods, topology, extra)
            frag[topology] = racks_whole(hns, {**d.bind_map(), **{p["metadata"]["name"]: p["spec"]["nodeName"]
                                                                   for p in running}})
        with_ = " + binpack" if extra else ""
        print(f"tier-1 hypernodes (racks) left whole after {a.nodes // 2} single pods on a cluster with "
              f"{len(running)} running ({'+'.join(BASE)}{with_}): "
              f"{frag[True]:.0%} with network-topology-aware, {frag[False]:.0%} without")


if __name__ == "__main__":
    main()
