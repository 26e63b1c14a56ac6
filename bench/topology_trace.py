"""Benchmark the fragmentation that tier bin-packing saves on a replayed trace (issue: network topology, item 7).

Pure CPU, no cluster: `scheduler.workload.replay` runs the same seeded trace twice, with the network-topology-aware
plugin (and the jobs' `networkTopology`) and without. The cluster is `--nodes` 8-GPU nodes in racks of 8 (tier-1
HyperNodes) under spines of 5 racks (tier 2). Over `--hours` (then 3 h to drain, one session a simulated minute), single 1–2-GPU jobs arrive all the time (notebooks,
evaluation) and tensor-parallel gangs of 2–8 whole nodes that need one rack (hard, tier 1) or one spine arrive
between them. Prints, with and without topology: the mean share of racks and spines left whole (no pod) over the
trace, the gangs' waits (mean, p90) and how many never started, and the CPU seconds of each replay. A progress
line goes to stderr every 10 % of the simulated time.

    python bench/topology_trace.py             # 1,000 nodes, 2 h of arrivals
    python bench/topology_trace.py --quick     # 200 nodes, 1 h
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import yaml

from lahar.scheduler import workload

TAIL = 3 * 3600  # simulated time after the last arrival, for the queue to drain


def trace_doc(n_nodes: int, hours: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    horizon = int(hours * 3600)
    jobs: list[dict[str, Any]] = []
    # singles: about two per node per hour, 1 or 2 GPUs, 10-60 minutes (a third of the GPUs)
    for i in range(int(n_nodes * hours * 2)):
        jobs.append({"name": f"single-{i}", "arrival": f"{rng.randrange(horizon)}s", "gang": 1,
                     "requests": {"cpu": "4", "nvidia.com/gpu": str(rng.choice((1, 1, 2)))},
                     "duration": f"{rng.randrange(600, 3600)}s"})
    # gangs: whole-node pods, 2-8 of them, 20-90 minutes; most must share a rack, some a spine
    for i in range(int(n_nodes * hours / 10)):  # about 40 % of the GPUs
        size = rng.choice((2, 4, 4, 8, 8))
        tier = 1 if rng.random() < 0.7 else 2
        jobs.append({"name": f"gang-{i}", "arrival": f"{rng.randrange(horizon)}s", "gang": size,
                     "requests": {"cpu": "32", "nvidia.com/gpu": "8"}, "duration": f"{rng.randrange(1200, 5400)}s",
                     "networkTopology": {"mode": "hard", "highestTierAllowed": tier}})
    return {"tick": "60s", "horizon": f"{horizon + TAIL}s",
            "cluster": {"nodes": [{"name": "gpu", "count": n_nodes,
                                   "allocatable": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8"}}],
                        "network": {"nodesPerLeaf": 8, "leavesPerSpine": 5}},
            "jobs": jobs}


def _progress(label: str, horizon: float) -> workload.ProgressFn:
    marks = {"next": 0.1}

    def report(t: float, finished: int, total: int) -> None:
        if t >= marks["next"] * horizon:
            print(f"  {label}: {t / 3600:5.1f} h simulated, {finished} of {total} jobs finished",
                  file=sys.stderr, flush=True)
            marks["next"] += 0.1
    return report


def _gang_waits(report: dict[str, Any]) -> tuple[float, float, int]:
    waits = sorted(j["wait_s"] for j in report["jobs"] if j["name"].startswith("gang-") and j["wait_s"] is not None)
    never = sum(1 for j in report["jobs"] if j["name"].startswith("gang-") and j["wait_s"] is None)
    if not waits:
        return 0.0, 0.0, never
    return sum(waits) / len(waits), waits[int(0.9 * (len(waits) - 1))], never


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="200 nodes, 1 hour")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.hours = 200, 1.0
    doc = trace_doc(args.nodes, args.hours, args.seed)
    trace = workload.load_trace(yaml.safe_dump(doc))
    print(f"trace: {args.nodes} nodes ({args.nodes // 8} racks, {-(-args.nodes // 40)} spines), "
          f"{len(doc['jobs'])} jobs over {args.hours:g} h, seed {args.seed}")
    reports: dict[str, dict[str, Any]] = {}
    cpu: dict[str, float] = {}
    for side, on in (("with", True), ("without", False)):
        t0 = time.process_time()
        reports[side] = workload.replay(trace, topology=on, progress=_progress(side, args.hours * 3600 + TAIL))
        cpu[side] = time.process_time() - t0
    diff = workload.topology_diff(reports["with"], reports["without"])
    whole = diff["summary"]["mean_whole_share"]
    print(f"{'':28} {'with topology':>14} {'without':>10}")
    for tier in sorted(set(whole["with"]) | set(whole["without"])):
        name = {1: "racks (tier 1)", 2: "spines (tier 2)"}.get(int(tier), f"tier {tier}")
        print(f"{'mean share of ' + name + ' whole':28} {100 * whole['with'].get(tier, 0):13.1f}% "
              f"{100 * whole['without'].get(tier, 0):9.1f}%")
    for side in ("with", "without"):
        mean, p90, never = _gang_waits(reports[side])
        print(f"gang wait {side:<8} mean {mean:7.0f} s  p90 {p90:7.0f} s  never started {never}")
    print(f"replay CPU: {cpu['with']:.1f} s with, {cpu['without']:.1f} s without")


if __name__ == "__main__":
    main()
