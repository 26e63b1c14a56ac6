"""Benchmark: API writes per scheduling session with 10,000 pods that cannot be placed (issue 20 item 2; volcano#3072:
adding one node to a cluster with 8,000 pending pods rewrote every pod's status, "0/10" → "0/11 nodes"; #3080:
PodGroup status rewritten with no change; #3852: far more API requests in flight than kube-scheduler).

    .venv/bin/python bench/status_writes.py                # 10 nodes, 10,000 pending pods, 5 steady sessions
    .venv/bin/python bench/status_writes.py --pods 2000    # smaller
    .venv/bin/python bench/status_writes.py --runner       # sessions as `lahar scheduler` ticks them
    .venv/bin/python bench/status_writes.py --devcluster   # against `lahar devcluster` (cpu-small) over HTTPS

The cluster is the in-memory API server (`MemoryClient`), or with `--devcluster` a `lahar devcluster` process with
simulated cpu-small nodes reached over HTTPS, behind a client that counts every write request (create, update,
patch, delete, bind) by verb and resource: the count an API server's request log would show for the scheduler's
user. Half the pods are gangs of 100 that the cluster cannot hold at once (3 cpu each on 4-cpu nodes),
half are single pods asking 8 cpu (no node fits); and 100 PodGroups that enqueue holds back (minResources beyond the
cluster, so their pods are not created yet). Each session is `scheduler.session.run_once` (list, session, commit), or
with `--runner` a tick of `scheduler.tasks.Runner` (what `lahar scheduler` runs: informer cache, incremental
snapshot, settled jobs reused), each after the informers have seen the previous one's writes; counted as one per
`schedulePeriod` of 1 s, or back to back when it takes longer. Phases: the first session (every pending pod gets
its condition once), steady sessions, one 2-cpu node added (fits no pending pod), the session after it, and an
idle tick.
Targets: steady state ≤ 5 writes/s, adding a node 0 pod-status rewrites, an idle tick 0 writes.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _devcluster import devcluster  # noqa: E402

from lahar.kube import errors  # noqa: E402
from lahar.kube.apiserver.memory import MemoryClient  # noqa: E402
from lahar.scheduler.framework import conf as confs  # noqa: E402
from lahar.scheduler.registry import in_tree_registry  # noqa: E402
from lahar.scheduler.session import run_once  # noqa: E402
from lahar.scheduler.tasks import Runner  # noqa: E402

NS = "bench"
WRITES = ("create", "update", "update_status", "patch", "delete", "bind")
GANG = 100


class Counting:
    """The cluster client port with every write request counted by (verb, resource)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.writes: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)
        if name not in WRITES:
            return fn

        def counted(*args: Any, **kwargs: Any) -> Any:
            rt = args[0] if args and hasattr(args[0], "plural") else None
            sub = kwargs.get("subresource")
            self.writes[f"{name} {rt.plural if rt is not None else 'pods'}{'/' + sub if sub else ''}"] += 1
            return fn(*args, **kwargs)
        return counted

    def take(self) -> Counter[str]:
        got, self.writes = self.writes, Counter()
        return got


def _node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": alloc, "capacity": alloc,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _add_node(c: Any, name: str, cpu: str) -> None:
    rt = c.registry.get("", "v1", "nodes")
    built = _node(name, cpu)
    n = c.create(rt, built)
    n["status"] = built["status"]
    c.update_status(rt, n)


def _pod(name: str, group: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def _podgroup(name: str, min_member: int, *, phase: str = "Inqueue", cpu: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if cpu:
        spec["minResources"] = {"cpu": cpu, "memory": "1Gi"}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec, "status": {"phase": phase}}


def populate(c: Any, nodes: int, pods: int, held: int) -> None:
    """The namespace, the default queue, the PodGroups and their pods (8 writers at once)."""
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    with contextlib.suppress(errors.AlreadyExists):
        c.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
            "spec": {"weight": 1, "reclaimable": True}})
    pg_rt, pods_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), reg.get("", "v1", "pods")
    gangs = (pods // 2) // GANG

    def gang(g: int) -> None:
        c.create(pg_rt, _podgroup(f"gang{g}", GANG), namespace=NS)
        for i in range(GANG):
            c.create(pods_rt, _pod(f"gang{g}-{i}", f"gang{g}", "3"), namespace=NS)

    def single(s: int) -> None:
        c.create(pg_rt, _podgroup(f"big{s}", 1), namespace=NS)
        c.create(pods_rt, _pod(f"big{s}", f"big{s}", "8"), namespace=NS)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(gang, range(gangs)))
        list(pool.map(single, range(pods - gangs * GANG)))
        list(pool.map(lambda h: c.create(pg_rt, _podgroup(f"held{h}", 4, phase="Pending", cpu=str(nodes * 8)),
                                         namespace=NS), range(held)))


def build(nodes: int, pods: int, held: int) -> MemoryClient:
    c = MemoryClient.with_crds()
    for i in range(nodes):
        _add_node(c, f"n{i}", "4")
    populate(c, nodes, pods, held)
    return c


def _caught_up(runner: Runner, inner: Any) -> bool:
    for kind in ("pods", "podgroups", "queues", "nodes"):
        rt = runner.cache.informers[kind].rt
        stored = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o["metadata"].get("resourceVersion")
                  for o in inner.list(rt)["items"]}
        seen = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o["metadata"].get("resourceVersion")
                for o in runner.cache.informers[kind].list()}
        if stored != seen:
            return False
    return True


def _settle(runner: Runner | None, inner: Any, timeout: float = 300.0) -> None:
    """Wait until the runner's informers hold what the store holds (the last session's writes came back)."""
    end = time.monotonic() + timeout
    while runner is not None and not _caught_up(runner, inner):
        if time.monotonic() > end:
            raise SystemExit("informers did not catch up")
        time.sleep(0.2)


def session(client: Counting, conf: Any, registry: Any, runner: Runner | None) -> tuple[Counter[str], float]:
    _settle(runner, client.inner)
    client.take()  # nothing of the setup or the wait is counted
    t0 = time.perf_counter()
    if runner is not None:
        runner.tick()
    else:
        run_once(client, conf, registry=registry)  # type: ignore[arg-type]
    return client.take(), time.perf_counter() - t0


def _fmt(writes: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(writes.items())) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--held", type=int, default=100, help="PodGroups held back by enqueue")
    ap.add_argument("--steady", type=int, default=5, help="steady sessions to measure")
    ap.add_argument("--period", type=float, default=1.0, help="schedulePeriod, seconds")
    ap.add_argument("--runner", action="store_true", help="sessions as `lahar scheduler` ticks them")
    ap.add_argument("--devcluster", action="store_true", help="against `lahar devcluster` over HTTPS")
    ap.add_argument("--quick", action="store_true", help="1,000 pods, 2 steady sessions (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"pods": 1000, "steady": 2})
    if args.devcluster:
        with devcluster(args.nodes) as rest:
            t0 = time.perf_counter()
            populate(rest, args.nodes, args.pods, args.held)
            measure(args, Counting(rest), t0, "devcluster")
    else:
        t0 = time.perf_counter()
        measure(args, Counting(build(args.nodes, args.pods, args.held)), t0, "in-memory")


def measure(args: argparse.Namespace, client: Counting, t0: float, where: str) -> None:
    print(f"cluster ({where}): {args.nodes} nodes, {args.pods} pending pods, {args.held} PodGroups held at enqueue, "
          f"built in {time.perf_counter() - t0:.1f} s")
    registry = in_tree_registry()
    conf = confs.default_conf(registry.plugin_names)
    runner: Runner | None = None
    if args.runner:
        runner = Runner(client, registry=registry, workers=16)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        if not runner.start(600):
            raise SystemExit("informers did not sync")
        print(f"runner: informers synced in {time.perf_counter() - t0:.1f} s")

    first, secs = session(client, conf, registry, runner)
    print(f"first session ({secs:.1f} s): {sum(first.values())} writes: {_fmt(first)}")
    steady_writes, steady_secs = 0, 0.0
    for _ in range(args.steady):
        w, secs = session(client, conf, registry, runner)
        steady_writes += sum(w.values())
        print(f"steady session ({secs:.1f} s): {sum(w.values())} writes: {_fmt(w)}")
        steady_secs += max(secs, args.period)  # one session per period, or back to back when slower
    rate = steady_writes / steady_secs
    _add_node(client.inner, "n-added", "2")
    added, secs = session(client, conf, registry, runner)
    pod_status = sum(v for k, v in added.items() if k.startswith("patch pods/status"))
    idle, _ = session(client, conf, registry, runner)
    print(f"after adding a node ({secs:.1f} s): {sum(added.values())} writes: {_fmt(added)}")
    print()
    print("| measure | target | measured |")
    print("|---|---|---|")
    print(f"| steady state, writes/s ({args.steady} sessions, {steady_writes} writes) | ≤ 5 | {rate:.2f} |")
    print(f"| adding a node: pod-status rewrites | 0 | {pod_status} |")
    print(f"| idle tick: writes | 0 | {sum(idle.values())} |")
    print(f"| first session: writes per pending pod | — | {sum(first.values()) / args.pods:.2f} |")
    if runner is not None:
        runner.stop()


if __name__ == "__main__":
    main()
