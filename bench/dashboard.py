"""Server-side render time of the dashboard's Jobs and Nodes pages for a large cluster: synthetic objects (default
5,000 nodes, 50,000 pods in 5,000 gangs of 10, a tenth pending with events, GPU gangs with decision annotations)
through the same view models and HTML the app serves. Target: each page ≤ 300 ms.

    python bench/dashboard.py [--nodes 5000] [--pods 50000] [--repeat 5]

Prints the target and, per page, the best and median CPU time of `--repeat` renders (CPU time: the machine is
shared), as the app renders them (the pods by job and the nodes' occupancy kept from watch events, as `live.Hub`
keeps them) and, for comparison, from the bare lists; and the page sizes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from lahar.dashboard import app, gpus, nodes, views

TARGET_MS = 300.0


def cluster(nodes: int, pods: int, gang: int = 10) -> dict[str, list[dict[str, Any]]]:
    """Nodes (a quarter with 8 GPUs and 8 RDMA VFs, a twentieth with 4 vGPU cards), queues, Volcano Jobs with their PodGroups and pods (every
    tenth job pending with a FailedScheduling Event per pod, GPU jobs with device and NUMA annotations)."""
    node_objs = []
    for i in range(nodes):
        alloc = {"cpu": "128", "memory": "1Ti", "pods": "110"}
        if i % 4 == 0:
            alloc |= {"nvidia.com/gpu": "8", "nvidia.com/rdma_vf": "8"}
        meta: dict[str, Any] = {"name": f"node-{i:05d}", "labels": {"rack": f"r{i // 32}"}, "uid": f"node-uid-{i}",
                                "resourceVersion": str(i + 1)}
        if i % 20 == 2:  # a twentieth shares 4 cards as vGPUs (the Nodes page's per-card table)
            meta["annotations"] = {"volcano.sh/node-vgpu-register": "".join(
                f"GPU-{i:05d}-{c},10,15360,Tesla-T4,true,hami-core:" for c in range(4))}
        node_objs.append({"metadata": meta,
                          "spec": {}, "status": {"allocatable": alloc, "conditions": [{"type": "Ready",
                                                                                       "status": "True"}]}})
    # status.allocated as the scheduler writes it
    queues = [{"metadata": {"name": n}, "spec": {"weight": w}, "status": {"allocated": {"cpu": "40000",
                                                                                        "memory": "160Ti"}}}
              for n, w in (("root", 1), ("default", 1), ("a", 2), ("b", 1))]
    jobs, groups, pod_objs, events = [], [], [], []
    devices = json.dumps({"gpu": [{"minor": m, "resources": {}} for m in range(8)],
                          "rdma": [{"minor": 0, "id": "0000:09:00.0", "extension": {"vfs": [
                              {"minor": -1, "busID": f"0000:09:00.{v}"} for v in range(1, 9)]}}]})
    pairs = json.dumps([{"gpu": m, "vf": f"0000:09:00.{m + 1}"} for m in range(8)])
    numa = json.dumps({"numa": {"0": {"cpu": "4"}, "1": {"cpu": "4"}}})
    for j in range(pods // gang):
        name, queue = f"job-{j:05d}", ("default", "a", "b")[j % 3]
        pending, gpu = j % 10 == 0, j % 7 == 0
        jobs.append({"metadata": {"name": name, "namespace": "ml"},
                     "spec": {"queue": queue, "minAvailable": gang},
                     "status": {"state": {"phase": "Pending" if pending else "Running"},
                                **({"pending": gang} if pending else {"running": gang})}})
        groups.append({"metadata": {"name": f"{name}-uid", "namespace": "ml", "ownerReferences": [
            {"kind": "Job", "name": name}]}, "spec": {"queue": queue, "minMember": gang},
            "status": {"phase": "Inqueue" if pending else "Running"}})
        for t in range(gang):
            pod_name = f"{name}-w-{t}"
            ann = {"scheduling.k8s.io/group-name": f"{name}-uid"}
            spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": "4", "memory": "16Gi", **({"nvidia.com/gpu": "8", "nvidia.com/rdma_vf": "8"} if gpu else {})}}}]}
            if pending:
                events.append({"reason": "FailedScheduling", "involvedObject": {"kind": "Pod", "namespace": "ml",
                                                                                "name": pod_name},
                               "message": f"0/{nodes} nodes are available: {nodes} Insufficient cpu.", "count": 3})
            else:
                where = ((j * gang + t) * (4 if gpu else 1)) % nodes
                spec["nodeName"] = f"node-{where:05d}"
                if where % 20 == 2:  # a slice of one of the node's vGPU cards
                    ann["volcano.sh/vgpu-ids-new"] = f"GPU-{where:05d}-{j % 4},NVIDIA,2048,25"
                ann["volcano.sh/topology-decision"] = numa
                if gpu:
                    ann |= {"scheduling.koordinator.sh/device-allocated": devices, "lahar.sh/gpu-rdma-pairs": pairs}
            pod_objs.append({"metadata": {"name": pod_name, "namespace": "ml", "annotations": ann,
                                          "uid": f"uid-{j}-{t}", "resourceVersion": str(j * gang + t + 1),
                                          "labels": {"volcano.sh/job-name": name}},
                             "spec": spec, "status": {"phase": "Pending" if pending else "Running"}})
    return {"nodes": node_objs, "pods": pod_objs, "jobs": jobs, "podgroups": groups, "queues": queues,
            "events": events, "hypernodes": [], "configmaps": []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="500 nodes, 5,000 pods, 2 repeats (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"nodes": 500, "pods": 5000, "repeat": 2})
    objs = cluster(args.nodes, args.pods)
    print(f"cluster: {len(objs['nodes'])} nodes, {len(objs['pods'])} pods, {len(objs['jobs'])} jobs, "
          f"{len(objs['events'])} events; target: each page rendered in <= {TARGET_MS:.0f} ms")
    start = time.process_time()
    occupancy = nodes.Occupancy()
    for pod in objs["pods"]:
        occupancy.put(pod)
    by_job = views.pods_by_job(objs["pods"])
    device_pods = gpus.DevicePods()
    for pod in objs["pods"]:
        device_pods.put(pod)
    print(f"indexes (the hub keeps them from watch events; built once here): "
          f"{(time.process_time() - start) * 1000:.0f} ms CPU")
    for page in ("jobs", "nodes", "queues"):
        for how, kw in (("indexed", {"pods_by_job": lambda: by_job, "occupancy": lambda: occupancy,
                                     "device_pods": device_pods.snapshot}),
                        ("from lists", {})):
            times, size = [], 0
            for _ in range(args.repeat):
                start = time.process_time()
                _, html = app.render(page, objs.__getitem__, **kw)
                times.append((time.process_time() - start) * 1000)
                size = len(html)
            verdict = ("met" if min(times) <= TARGET_MS else "MISSED") if how == "indexed" else "(for comparison)"
            print(f"{page:7s} {how:10s} best {min(times):7.1f} ms  median {statistics.median(times):7.1f} ms CPU"
                  f"  ({size / 1e6:.2f} MB of HTML)  {verdict}")


if __name__ == "__main__":
    main()
