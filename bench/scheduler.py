"""Benchmark: one scheduling session (compute only, as `lahar simulate` runs it) at scale.

    .venv/bin/python bench/scheduler.py            # nodes {100, 1000} x pods {1000, 10000} + idle session
    .venv/bin/python bench/scheduler.py --large    # adds 5000 nodes and 50000 pods, and the 50000-running idle case
    .venv/bin/python bench/scheduler.py --idle     # only: idle tick incl. snapshot at 5000 nodes / 50000 running pods,
                                                   # snapshot rebuilt per tick (before) vs kept incrementally (after);
                                                   # PodGroup status as written by a first session (settled), 100 pods
                                                   # changed per tick, and status never written back (all recomputed)
    .venv/bin/python bench/scheduler.py --devcluster  # only: end to end on devcluster, 100 nodes, 2000 pods in gangs
                                                      # of 8, binds through the API (pods/s)

Each case runs in a fresh subprocess (peak RSS per case). Gangs of 8, mixed cpu / memory / GPU requests, four
queues. Prints snapshot build time, session time, pods placed per second and peak memory.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUEUES = ["q0", "q1", "q2", "q3"]
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def objects(n_nodes: int, n_pods: int, *, running: bool = False, seed: int = 7) -> dict[str, list[dict[str, Any]]]:
    rnd = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        gpu = i % 4 == 0
        alloc = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        if gpu:
            alloc["nvidia.com/gpu"] = "8"
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}", "labels": {
            "kubernetes.io/hostname": f"node-{i:05d}"}}, "spec": {},
                      "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}})
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
               "spec": {"weight": w + 1}, "status": {"state": "Open"}} for w, q in enumerate(QUEUES)]
    pgs, pods = [], []
    for g in range(n_pods // 8):
        name = f"job-{g:06d}"
        q = QUEUES[g % len(QUEUES)]
        kind = rnd.random()
        req = {"cpu": "4", "memory": "8Gi"} if kind < 0.5 else (
            {"cpu": "2", "memory": "16Gi"} if kind < 0.85 else {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"})
        pgs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "bench", "creationTimestamp": "2024-01-01T00:00:00Z"},
                    "spec": {"minMember": 8, "queue": q}, "status": {"phase": "Running" if running else "Inqueue"}})
        for k in range(8):
            pod: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-worker-{k}", "namespace": "bench", "uid": f"{name}-{k}",
                             "annotations": {"scheduling.k8s.io/group-name": name},
                             "creationTimestamp": "2024-01-01T00:00:00Z"},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": req}}]},
                "status": {"phase": "Pending"}}
            if running:
                pod["spec"]["nodeName"] = f"node-{(g * 8 + k) % n_nodes:05d}"
                pod["status"]["phase"] = "Running"
            pods.append(pod)
    return {"nodes": nodes, "queues": queues, "podgroups": pgs, "pods": pods}


def one(n_nodes: int, n_pods: int, running: bool) -> dict[str, Any]:
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.registry import in_tree_registry
    from lahar.scheduler.session import run_session

    objs = objects(n_nodes, n_pods, running=running)
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    t0 = time.perf_counter()
    snap = snapshots.build(**objs)
    t1 = time.perf_counter()
    d = run_session(snap, conf, registry=registry)
    t2 = time.perf_counter()
    return {"nodes": n_nodes, "pods": n_pods, "running": running, "snapshot_s": round(t1 - t0, 3),
            "session_s": round(t2 - t1, 3), "placed": len(d.binds),
            "pods_per_s": round(len(d.binds) / (t2 - t1)) if d.binds else 0,
            "allocate_s": round(d.timings.get("action:allocate", 0), 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def idle_ticks(n_nodes: int, n_pods: int, ticks: int = 7, churn: int = 0, written: bool = True) -> dict[str, Any]:
    """An idle session INCLUDING its snapshot, as `lahar scheduler` runs it each tick: `before` rebuilds the snapshot
    from the objects every tick (`snapshot.build`, what the informer cache did), `after` keeps it updated from
    events (`scheduler.incremental.SnapshotInputs`). `churn` pods change between ticks (status updates).

    `written`: the PodGroups carry the status a first session wrote (running counts, `Scheduled` condition), as they
    do once the scheduler's own status patches came back through the informers — a settled cluster. Without it
    every tick finds all 6,250 stored statuses out of date and computes (and would write) each one again."""
    import statistics

    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.incremental import SnapshotInputs
    from lahar.scheduler.registry import in_tree_registry
    from lahar.scheduler.session import run_session

    objs = objects(n_nodes, n_pods, running=True)
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    if written:  # what the first session's commit writes, as the informer then sees it
        first_decisions = run_session(snapshots.build(**objs), conf, registry=registry)
        objs["podgroups"] = [
            {**pg, "status": first_decisions.podgroups[f"bench/{pg['metadata']['name']}"].status}
            for pg in objs["podgroups"]]

    def churn_some(k: int, inputs: SnapshotInputs | None) -> None:
        for j in range(churn):
            p = objs["pods"][(k * churn + j) % len(objs["pods"])]
            p = {**p, "metadata": {**p["metadata"], "resourceVersion": str(k)}}
            objs["pods"][(k * churn + j) % len(objs["pods"])] = p
            if inputs is not None:
                inputs.upsert("pods", p)

    before = []
    for k in range(3):
        churn_some(k, None)
        t0 = time.perf_counter()
        run_session(snapshots.build(**objs), conf, registry=registry)
        before.append(time.perf_counter() - t0)
    inputs = SnapshotInputs()
    for kind, items in objs.items():
        inputs.replace(kind, items)
    t0 = time.perf_counter()
    run_session(inputs.snapshot(), conf, registry=registry)  # the one full build, at startup
    first = time.perf_counter() - t0
    after, snap_s = [], []
    settled = 0
    for k in range(ticks):
        churn_some(100 + k, inputs)
        t0 = time.perf_counter()
        snap = inputs.snapshot()
        t1 = time.perf_counter()
        d = run_session(snap, conf, registry=registry)
        after.append(time.perf_counter() - t0)
        snap_s.append(t1 - t0)
        settled = int(d.counters.get("podgroups_settled", 0))
    return {"nodes": n_nodes, "pods": n_pods, "churn": churn, "written": written,
            "before_s": round(statistics.median(before), 3),
            "first_tick_s": round(first, 3), "after_s": round(statistics.median(after), 4),
            "after_snapshot_s": round(statistics.median(snap_s), 4), "full_builds": inputs.stats["full_builds"],
            "after_range_s": [round(min(after), 4), round(max(after), 4)], "podgroups_settled": settled,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def devcluster_binds(n_nodes: int = 100, n_pods: int = 2000, gang: int = 8) -> dict[str, Any]:
    """End to end on devcluster: `lahar devcluster` (its own process, `n_nodes` simulated cpu-small nodes with
    kubelets) over HTTPS; `n_pods` pending pods in gangs of `gang`; then `run_once` sessions (list, schedule, commit:
    binds through `pods/binding` with 16 threads, PodGroup status, queue status) until every pod is bound."""
    from concurrent.futures import ThreadPoolExecutor

    from _devcluster import devcluster

    from lahar.scheduler import commit as commits
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.registry import in_tree_registry
    from lahar.scheduler.session import list_objects, run_session

    with devcluster(n_nodes, prefix="lahar-bench-sched-", timeout=120.0) as client:
        reg = client.registry
        pods_rt = reg.get("", "v1", "pods")
        pg_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        q_rt = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
        client.create(q_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                             "metadata": {"name": "bench"}, "spec": {"weight": 1}})
        client.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": "bench"}})

        def make(g: int) -> None:
            name = f"gang-{g:05d}"
            client.create(pg_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                  "metadata": {"name": name, "namespace": "bench"},
                                  "spec": {"minMember": gang, "queue": "bench"}}, namespace="bench")
            for k in range(gang):
                client.create(pods_rt, {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{name}-w-{k}", "namespace": "bench",
                                 "annotations": {"scheduling.k8s.io/group-name": name}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "sim", "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"}}}]}}, namespace="bench")

        t0 = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(make, range(n_pods // gang)))
        created_s = time.perf_counter() - t0
        registry = in_tree_registry()
        conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
        sessions = []
        bound = 0
        t0 = time.perf_counter()
        while bound < n_pods and len(sessions) < 20:
            s0 = time.perf_counter()
            snap = snapshots.build(**list_objects(client))
            s1 = time.perf_counter()
            decisions = run_session(snap, conf, registry=registry)
            s2 = time.perf_counter()
            result = commits.apply(client, decisions, workers=16)
            s3 = time.perf_counter()
            sessions.append({"bound": len(result.bound), "failures": len(result.bind_failures),
                             "list_s": round(s1 - s0, 3), "session_s": round(s2 - s1, 3),
                             "commit_s": round(s3 - s2, 3), "total_s": round(s3 - s0, 3),
                             "podgroups_written": result.podgroups_written})
            bound += len(result.bound)
        total = time.perf_counter() - t0
        first = sessions[0]
        return {"nodes": n_nodes, "pods": n_pods, "gang": gang, "created_s": round(created_s, 2),
                "bound": bound, "sessions": sessions, "elapsed_s": round(total, 3),
                "pods_per_s": round(bound / total) if total else 0,
                "first_session_pods_per_s": round(first["bound"] / first["total_s"]) if first["total_s"] else 0,
                "commit_pods_per_s": round(first["bound"] / first["commit_s"]) if first["commit_s"] else 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="include 5000 nodes / 50000 pods")
    ap.add_argument("--case", nargs=3, metavar=("NODES", "PODS", "RUNNING"), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--idle", action="store_true", help="only the idle-tick line (snapshot included, before/after)")
    ap.add_argument("--devcluster", action="store_true",
                    help="only: end-to-end bind rate on devcluster (binds through the API)")
    ap.add_argument("--dc-nodes", type=int, default=100, help=argparse.SUPPRESS)
    ap.add_argument("--dc-pods", type=int, default=2000, help=argparse.SUPPRESS)
    ap.add_argument("--idle-case", nargs=4, metavar=("NODES", "PODS", "CHURN", "WRITTEN"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(one(int(a.case[0]), int(a.case[1]), a.case[2] == "1")))
        return
    if a.idle_case:
        print(json.dumps(idle_ticks(int(a.idle_case[0]), int(a.idle_case[1]), churn=int(a.idle_case[2]),
                                    written=a.idle_case[3] == "1")))
        return
    if a.idle:
        _idle_lines(a)
        return
    if a.devcluster:
        row = devcluster_binds(a.dc_nodes, a.dc_pods)
        if a.json:
            print(json.dumps(row, indent=2))
        else:
            print(f"devcluster end to end: {row['nodes']} nodes, {row['pods']} pending pods in gangs of {row['gang']}: "
                  f"{row['bound']} bound in {row['elapsed_s']:.2f}s over {len(row['sessions'])} session(s) = "
                  f"{row['pods_per_s']} pods/s (list + session + binds + status through the API; the commit alone "
                  f"{row['commit_pods_per_s']} pods/s); "
                  f"sessions {row['sessions']}", flush=True)
        return
    nodes = [100, 1000, 5000] if a.large else [100, 1000]
    pods = [1000, 10000, 50000] if a.large else [1000, 10000]
    cases = [(n, p, False) for n in nodes for p in pods]
    cases.append((5000, 50000, True) if a.large else (1000, 10000, True))
    rows = []
    for n, p, r in cases:
        out = subprocess.run([sys.executable, __file__, "--case", str(n), str(p), "1" if r else "0"],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        rows.append(row)
        if not a.json:
            kind = "idle (all running)" if r else "pending gangs of 8"
            print(f"{n:>5} nodes {p:>6} pods {kind:<19} snapshot {row['snapshot_s']:>7.3f}s  session "
                  f"{row['session_s']:>7.3f}s  placed {row['placed']:>6}  {row['pods_per_s']:>7} pods/s  "
                  f"peak {row['peak_rss_mb']:>5} MB", flush=True)
    if a.json:
        print(json.dumps(rows, indent=2))
    _idle_lines(a)


def _idle_lines(a: argparse.Namespace) -> None:
    """Idle tick including the snapshot: full rebuild per tick (before) vs incrementally updated (after); PodGroup
    statuses as the scheduler wrote them (settled), and once as never written back (every status out of date)."""
    n, p = (5000, 50000) if a.large or a.idle else (1000, 10000)
    for churn, written in ((0, True), (100, True), (0, False)):
        out = subprocess.run([sys.executable, __file__, "--idle-case", str(n), str(p), str(churn),
                              "1" if written else "0"], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        if a.json:
            print(json.dumps(row))
            continue
        lo, hi = row["after_range_s"]
        print(f"{n:>5} nodes {p:>6} pods idle tick incl. snapshot, {churn:>3} pods changed/tick, PodGroup status "
              f"{'written  ' if written else 'unwritten'}: before {row['before_s']:>6.3f}s  after "
              f"{1000 * row['after_s']:>6.1f} ms ({1000 * lo:.1f}-{1000 * hi:.1f}; snapshot "
              f"{1000 * row['after_snapshot_s']:.1f} ms; {row['podgroups_settled']} PodGroups settled; first tick "
              f"{row['first_tick_s']:.2f}s)  peak {row['peak_rss_mb']:>5} MB", flush=True)


if __name__ == "__main__":
    main()
