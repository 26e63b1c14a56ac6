"""Benchmark lahar against Volcano's own scheduler on one real cluster (issue 19, item 4).

    .venv/bin/python bench/versus.py                     # 200 kwok nodes, 2,000 pods in gangs of 8, one round
    .venv/bin/python bench/versus.py --large             # 1,000 nodes, 10,000 pods
    .venv/bin/python bench/versus.py --rounds 2          # V L, then L V (interleaved, order alternating)
    .venv/bin/python bench/versus.py --only lahar        # one side (the other peer is not built, say)

One control plane from tests/realcluster (etcd, kube-apiserver, kube-controller-manager, kwok) holds Volcano's CRDs
(deploy/crds), weighted queues and M kwok nodes. Each run starts one side's processes against it:

- volcano: vc-scheduler (the Helm chart's default `volcano-scheduler.conf`) and vc-controller-manager (job,
  podgroup, queue and gc controllers), from `make peers`;
- lahar: `lahar scheduler`, `lahar worker`, `lahar dispatch` and `lahar beat` on a redis-server of its own, the same
  conf in ConfigMap `lahar-scheduler-configmap`.

Neither side runs admission webhooks: the Jobs are written fully defaulted (queue, minAvailable, schedulerName), so
the measure is the controllers and the scheduler. A one-pod warm-up Job must be bound before the clock starts (both
sides have synced their informers by then). Then N Volcano Jobs (gangs, round-robin over the queues) are created in a
fresh namespace and a watch notes when each pod appears and is bound. Recorded per run: apply → every pod bound and
pods/s, apply → every pod exists (the controllers' share: a gang's pods are made once the scheduler has
enqueued its PodGroup), time to the first bind, p50 / p99 pod scheduling latency (from the watch, in ms, and from the API's
creationTimestamp → PodScheduled condition, whole seconds), the scheduler's and the controllers' CPU seconds and
peak RSS (from /proc), and the API server's requests (`apiserver_request_total` from its /metrics). Prints a
side-by-side table with ratios (lahar / volcano) and writes JSON to bench/out/.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lahar.kube import errors, kubeconfig  # noqa: E402
from lahar.kube.informers import Informer  # noqa: E402
from lahar.kube.rest import RestClient  # noqa: E402
from tests.peers import build as peers  # noqa: E402
from tests.realcluster.cluster import RealCluster  # noqa: E402
from tests.support import free_port  # noqa: E402

SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
VOLCANO_CONTROLLERS = ("job-controller", "pg-controller", "queue-controller", "gc-controller")
SIDES = ("volcano", "lahar")


# ------------------------------------------------------------------------------------------------------- pure parts
def queues(n: int) -> list[dict[str, Any]]:
    """`n` Open queues q0..q(n-1) with weights 1..n, and the `default` queue (weight 1)."""
    out = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"q{i}"},
            "spec": {"weight": i + 1, "reclaimable": True}} for i in range(n)]
    out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                "spec": {"weight": 1, "reclaimable": True}})
    return out


def nodes(n: int, *, cpu: str = "16", memory: str = "64Gi") -> list[dict[str, Any]]:
    """`n` Node objects kwok takes over (label type=kwok), every fourth with 8 GPUs."""
    out = []
    for i in range(n):
        capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
        if i % 4 == 0:
            capacity["nvidia.com/gpu"] = "8"
        name = f"vs-node-{i:05d}"
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"type": "kwok", "kubernetes.io/hostname": name},
                                 "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                    "spec": {}, "status": {"capacity": capacity, "allocatable": capacity}})
    return out


def jobs(namespace: str, n_pods: int, gang: int, n_queues: int, *, cpu: str = "1", memory: str = "1Gi",
         prefix: str = "vs") -> list[dict[str, Any]]:
    """Volcano Jobs of `gang` pods each (minAvailable = gang, one task) totalling `n_pods`, round-robin over the
    queues q0.., written fully defaulted so no mutating webhook is needed."""
    if gang < 1 or n_pods < gang:
        raise ValueError(f"--gang must be between 1 and --pods ({n_pods}), not {gang}")
    out = []
    for i in range(n_pods // gang):
        template = {"spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}
        out.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                    "metadata": {"name": f"{prefix}-{i:05d}", "namespace": namespace},
                    "spec": {"schedulerName": "volcano", "queue": f"q{i % n_queues}", "minAvailable": gang,
                             "maxRetry": 3, "tasks": [{"name": "w", "replicas": gang, "template": template}]}})
    return out


def order(rounds: int, only: str | None = None) -> list[str]:
    """The runs in order: V L, L V, V L, ... (the side that goes first alternates), or only one side."""
    if only:
        return [only] * rounds
    return [side for r in range(rounds) for side in (SIDES if r % 2 == 0 else SIDES[::-1])]


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (0 < q <= 100) of `values`, None when empty."""
    if not values:
        return None
    ranked = sorted(values)
    k = max(0, min(len(ranked) - 1, int(-(-q * len(ranked) // 100)) - 1))
    return ranked[k]


def api_latencies(pods: list[dict[str, Any]]) -> list[float]:
    """Seconds from each bound pod's creationTimestamp to its PodScheduled=True condition (whole seconds: the API's
    timestamps have no finer grain)."""
    out = []
    for pod in pods:
        created = pod.get("metadata", {}).get("creationTimestamp")
        cond = next((c for c in (pod.get("status") or {}).get("conditions") or []
                     if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
        if created and cond and cond.get("lastTransitionTime"):
            out.append((_ts(cond["lastTransitionTime"]) - _ts(created)).total_seconds())
    return out


def _ts(raw: str) -> dt.datetime:
    return dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))


def request_total(metrics_text: str) -> dict[str, float]:
    """`apiserver_request_total` from a /metrics page, summed by verb (and `all`)."""
    out: dict[str, float] = {"all": 0.0}
    for line in metrics_text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        verb = labels.split('verb="', 1)[1].split('"', 1)[0] if 'verb="' in labels else "?"
        out[verb] = out.get(verb, 0.0) + float(value)
        out["all"] += float(value)
    return out


def reads_by_resource(metrics_text: str) -> dict[str, float]:
    """`apiserver_request_total`'s GETs and LISTs from a /metrics page, summed per `<verb> <resource>[/<sub>]`: which
    objects a side reads from the API rather than from its informers."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if found.get("verb") not in ("GET", "LIST"):
            continue
        key = f"{found['verb']} {found.get('resource') or '?'}"
        key += f"/{found['subresource']}" if found.get("subresource") else ""
        out[key] = out.get(key, 0.0) + float(value)
    return out


def reads_delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """`after - before` per key, the keys that changed only, largest first."""
    delta = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return dict(sorted(((k, v) for k, v in delta.items() if v), key=lambda kv: (-kv[1], kv[0])))


PASSED_SETTINGS = frozenset({"LAHAR_JOB_CACHE"})  # kept from the caller's environment, to compare a setting


def lahar_env(base: dict[str, str], kubeconfig_path: str, redis_port: int, work: Path) -> dict[str, str]:
    """The environment of lahar's processes: the caller's minus its LAHAR_* settings (PASSED_SETTINGS stay), the
    cluster's kubeconfig, a redis of its own, and a data directory not named `lahar` inside their working directory
    (`python -m lahar.cli` puts the cwd first on sys.path, and a `lahar` directory there shadows the package: the
    second run's Celery worker died with `cannot import name '__version__' from 'lahar'`)."""
    env = {k: v for k, v in base.items() if not k.startswith("LAHAR_") or k in PASSED_SETTINGS}
    env.update(KUBECONFIG=kubeconfig_path, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", PYTHONUNBUFFERED="1",
               LAHAR_SCHEDULER_CONF_NAMESPACES="volcano-system", LAHAR_LOG_LEVEL="WARNING",
               LAHAR_DATA_DIR=str(work / "lahar-data"))
    return env


def ratio(lahar: float | None, volcano: float | None) -> str:
    if lahar is None or volcano is None or volcano == 0:
        return "—"
    return f"{lahar / volcano:.2f}×"


def table(results: list[dict[str, Any]]) -> str:
    """Side by side: the mean of each side's runs per measure, and lahar / volcano."""
    rows = [("pods bound", "bound", "{:.0f}"), ("apply → every pod exists (s)", "all_created_s", "{:.1f}"),
            ("apply → every pod bound (s)", "all_bound_s", "{:.1f}"),
            ("pods/s", "pods_per_s", "{:.0f}"), ("apply → first bind (s)", "first_bind_s", "{:.2f}"),
            ("p50 latency, watch (ms)", "p50_ms", "{:.0f}"), ("p99 latency, watch (ms)", "p99_ms", "{:.0f}"),
            ("p50 latency, API (s)", "p50_api_s", "{:.0f}"), ("p99 latency, API (s)", "p99_api_s", "{:.0f}"),
            ("scheduler CPU (s)", "scheduler_cpu_s", "{:.1f}"), ("scheduler peak RSS (MiB)", "scheduler_rss_mib",
                                                                 "{:.0f}"),
            ("controllers CPU (s)", "controllers_cpu_s", "{:.1f}"),
            ("controllers peak RSS (MiB)", "controllers_rss_mib", "{:.0f}"),
            ("API requests", "api_requests", "{:.0f}")]
    mean: dict[str, dict[str, float | None]] = {}
    for side in SIDES:
        mine = [r for r in results if r["side"] == side]
        mean[side] = {}
        for _, key, _ in rows:
            vals = [r[key] for r in mine if r.get(key) is not None]
            mean[side][key] = sum(vals) / len(vals) if vals else None
    runs = {side: sum(1 for r in results if r["side"] == side) for side in SIDES}
    lines = [f"| measure | volcano ({runs['volcano']} runs) | lahar ({runs['lahar']} runs) | lahar / volcano |",
             "|---|---|---|---|"]
    for label, key, fmt in rows:
        v, la = mean["volcano"][key], mean["lahar"][key]
        lines.append(f"| {label} | {fmt.format(v) if v is not None else '—'} | "
                     f"{fmt.format(la) if la is not None else '—'} | {ratio(la, v)} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ /proc reads
def proc_tree(root: int) -> list[int]:
    """`root` and every live descendant of it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def rss_mib(pids: list[int], key: str = "VmHWM") -> float:
    """The sum of each process's peak (VmHWM) resident set, MiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
    return total / 1024


# ---------------------------------------------------------------------------------------------------- the sides
class Side:
    """The processes of one scheduler stack, started against the cluster's kubeconfig and stopped by process id."""

    def __init__(self, name: str, cluster: RealCluster, work: Path) -> None:
        self.name, self.cluster, self.work = name, cluster, work
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.scheduler = ""

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.work / f"{self.name}-{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=env, cwd=self.work)
        log.close()

    def start(self) -> None:
        kc = str(self.cluster.kubeconfig)
        if self.name == "volcano":
            conf = self.work / "volcano-scheduler.conf"
            conf.write_text(SCHEDULER_CONF)
            self._spawn("controllers", [str(peers.binary("vc-controller-manager")), f"--kubeconfig={kc}",
                                        "--leader-elect=false", f"--controllers={','.join(VOLCANO_CONTROLLERS)}",
                                        f"--listen-address=127.0.0.1:{free_port()}",
                                        f"--healthz-address=127.0.0.1:{free_port()}", "--v=1"])
            self._spawn("scheduler", [str(peers.binary("vc-scheduler")), f"--kubeconfig={kc}",
                                      f"--scheduler-conf={conf}", "--leader-elect=false", "--schedule-period=1s",
                                      f"--listen-address=127.0.0.1:{free_port()}",
                                      f"--healthz-address=127.0.0.1:{free_port()}", "--v=1"])
            self.scheduler = "scheduler"
            return
        port = free_port()
        self._spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"])
        env = lahar_env(dict(os.environ), kc, port, self.work)
        py = [sys.executable, "-m", "lahar.cli"]
        _wait_port(port, self)
        self._spawn("dispatch", [*py, "dispatch"], env)
        self._spawn("worker", [*py, "worker", "--no-supervise", "-c", "2"], env)
        self._spawn("scheduler", [*py, "scheduler"], env)
        self._spawn("beat", [*py, "beat"], env)
        self.scheduler = "scheduler"

    def pids(self, which: str) -> list[int]:
        """The scheduler's process tree, or every other process's ('controllers')."""
        roots = [p.pid for n, p in self.procs.items() if (n == self.scheduler) == (which == "scheduler")]
        return [pid for root in roots for pid in proc_tree(root)]

    def dead(self) -> str | None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                log = self.work / f"{self.name}-{name}.log"
                tail = log.read_text(errors="replace").splitlines()[-8:] if log.is_file() else []
                return f"{self.name} {name} exited with {proc.returncode}: " + "\n".join(tail)
        return None

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.procs.clear()


def _wait_port(port: int, side: Side, timeout: float = 30.0) -> None:
    """Until something listens on loopback `port` (redis-server, before the Celery processes connect to it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        why = side.dead()
        if why:
            raise RuntimeError(why)
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


class Watch:
    """When each pod of one namespace was first seen and first seen bound (time.monotonic)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}

    def pod(self, pod: dict[str, Any]) -> None:
        now = time.monotonic()
        name = pod["metadata"]["name"]
        with self.lock:
            self.seen.setdefault(name, now)
            if (pod.get("spec") or {}).get("nodeName"):
                self.bound.setdefault(name, now)


# ------------------------------------------------------------------------------------------------------- the run
def kubectl(cluster: RealCluster, *args: str, stdin: str | None = None, timeout: float = 600) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    proc = subprocess.run(["kubectl", *args], input=stdin, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])} failed: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


def prepare(cluster: RealCluster, args: argparse.Namespace) -> None:
    kubectl(cluster, "apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "lahar-scheduler-configmap", "namespace": "volcano-system"},
         "data": {"volcano-scheduler.conf": SCHEDULER_CONF}},
        *queues(args.queues)]
    kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    t0 = time.monotonic()
    limit = max(300.0, 0.2 * args.nodes)  # 1,000 kwok nodes were Ready in ~90 s here, 5,000 in 204 s
    all_nodes = nodes(args.nodes)
    for start in range(0, args.nodes, 500):
        kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump_all(all_nodes[start:start + 500]))
    while True:
        ready = kubectl(cluster, "get", "nodes", "-l", "type=kwok", "-o",
                        "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}")
        n = ready.split().count("True")
        print(f"\r  nodes Ready {n}/{args.nodes}", end="", flush=True)
        if n >= args.nodes:
            break
        if time.monotonic() - t0 > limit:
            raise RuntimeError(f"only {n} of {args.nodes} kwok nodes Ready after {limit:.0f} s")
        time.sleep(1)
    # kube-apiserver's TaintNodesByCondition taints a new node not-ready; the node lifecycle controller, not run
    # here, would lift it once kwok posts Ready.
    with contextlib.suppress(RuntimeError):  # none left to lift
        kubectl(cluster, "taint", "nodes", "-l", "type=kwok", "node.kubernetes.io/not-ready:NoSchedule-")
    print(f" ({time.monotonic() - t0:.0f} s)", flush=True)


def _wait_bound(client: RestClient, namespace: str, want: int, side: Side, timeout: float) -> None:
    pods = client.registry.get("", "v1", "pods")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        why = side.dead()
        if why:
            raise RuntimeError(why)
        items = client.list(pods, namespace=namespace).get("items", [])
        if sum(1 for p in items if p["spec"].get("nodeName")) >= want:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{side.name}: warm-up pod in {namespace} not bound in {timeout:.0f} s")


def _delete_collection(cluster: RealCluster, path: str) -> None:
    """One DELETE of a whole collection (kubectl deletes pod by pod: minutes for thousands)."""
    ctx = ssl.create_default_context(cafile=str(cluster.ca_path))
    req = urllib.request.Request(f"{cluster.url}{path}?gracePeriodSeconds=0", method="DELETE",
                                 headers={"Authorization": f"Bearer {cluster.token}"})
    with contextlib.suppress(OSError), urllib.request.urlopen(req, context=ctx, timeout=120):  # noqa: S310
        pass


def clean(cluster: RealCluster, namespace: str) -> None:
    """Delete the run's Jobs, PodGroups and pods (no grace: kwok's pods stop at once) and its namespace, and wait
    until no pod of it holds node capacity."""
    for path in (f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs",
                 f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"):
        _delete_collection(cluster, path)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        _delete_collection(cluster, f"/api/v1/namespaces/{namespace}/pods")
        left = kubectl(cluster, "get", "pods", "-n", namespace, "-o", "name", "--ignore-not-found").split()
        if not left:
            break
        time.sleep(2)
    with contextlib.suppress(RuntimeError):
        kubectl(cluster, "delete", "namespace", namespace, "--wait=false")


def run(cluster: RealCluster, client: RestClient, side_name: str, index: int, args: argparse.Namespace,
        work: Path) -> dict[str, Any]:
    ns, warm = f"vs-{index}-{side_name}", f"vs-{index}-{side_name}-warm"
    want = (args.pods // args.gang) * args.gang
    side = Side(side_name, cluster, work)
    result: dict[str, Any] = {"side": side_name, "run": index, "namespace": ns, "pods": want, "nodes": args.nodes}
    informer = None
    try:
        kubectl(cluster, "create", "namespace", ns)
        kubectl(cluster, "create", "namespace", warm)
        side.start()
        t_start = time.monotonic()
        kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump_all(jobs(warm, 1, 1, 1, prefix="warm")))
        _wait_bound(client, warm, 1, side, args.timeout)
        result["ready_s"] = time.monotonic() - t_start
        print(f"  [{index}] {side_name}: up and warm in {result['ready_s']:.1f} s", flush=True)

        watch = Watch()
        informer = Informer(client, client.registry.get("", "v1", "pods"), namespace=ns)
        informer.add_handler(on_add=watch.pod, on_update=lambda _old, new: watch.pod(new))
        informer.start()
        informer.wait_for_sync(60)
        text0 = cluster.get("/metrics", timeout=30).decode()
        metrics0, reads0 = request_total(text0), reads_by_resource(text0)
        sched0, ctrl0 = cpu_seconds(side.pids("scheduler")), cpu_seconds(side.pids("controllers"))
        manifest = work / f"jobs-{index}.yaml"
        manifest.write_text(yaml.safe_dump_all(jobs(ns, args.pods, args.gang, args.queues)))
        t0 = time.monotonic()
        kubectl(cluster, "create", "-f", str(manifest))
        result["create_s"] = time.monotonic() - t0
        last_print = 0.0
        while len(watch.bound) < want and time.monotonic() - t0 < args.timeout:
            why = side.dead()
            if why:
                raise RuntimeError(why)
            now = time.monotonic()
            if now - last_print >= 2:
                last_print = now
                print(f"\r  [{index}] {side_name}: {now - t0:6.1f} s  pods {len(watch.seen):>6}/{want}  "
                      f"bound {len(watch.bound):>6}/{want}", end="", flush=True)
            time.sleep(0.1)
        t_end = time.monotonic()
        sched_pids, ctrl_pids = side.pids("scheduler"), side.pids("controllers")
        result["scheduler_cpu_s"] = cpu_seconds(sched_pids) - sched0
        result["controllers_cpu_s"] = cpu_seconds(ctrl_pids) - ctrl0
        result["scheduler_rss_mib"] = rss_mib(sched_pids)
        result["controllers_rss_mib"] = rss_mib(ctrl_pids)
        text1 = cluster.get("/metrics", timeout=30).decode()
        metrics1 = request_total(text1)
        result["api_reads_by_resource"] = reads_delta(reads_by_resource(text1), reads0)
        result["api_requests"] = metrics1["all"] - metrics0["all"]
        result["api_requests_by_verb"] = {k: metrics1[k] - metrics0.get(k, 0.0) for k in metrics1 if k != "all"}
        with watch.lock:
            bound = dict(watch.bound)
            seen = dict(watch.seen)
        result["bound"] = len(bound)
        result["all_bound_s"] = (max(bound.values()) - t0) if len(bound) >= want else None
        result["pods_per_s"] = want / result["all_bound_s"] if result["all_bound_s"] else None
        # Where the time goes: the controllers make the pods (after the scheduler's enqueue), the scheduler binds.
        result["all_created_s"] = (max(seen.values()) - t0) if len(seen) >= want else None
        result["first_bind_s"] = (min(bound.values()) - t0) if bound else None
        lat = [1000 * (bound[k] - seen[k]) for k in bound if k in seen]
        result["p50_ms"], result["p99_ms"] = percentile(lat, 50), percentile(lat, 99)
        listed = client.list(client.registry.get("", "v1", "pods"), namespace=ns).get("items", [])
        api = api_latencies(listed)
        result["p50_api_s"], result["p99_api_s"] = percentile(api, 50), percentile(api, 99)
        result["load_average"] = os.getloadavg()[0]
        status = f"{result['all_bound_s']:.1f} s" if result["all_bound_s"] else f"NOT all bound in {t_end - t0:.0f} s"
        print(f"\r  [{index}] {side_name}: {len(bound)}/{want} bound, {status}; scheduler CPU "
              f"{result['scheduler_cpu_s']:.1f} s, API requests {result['api_requests']:.0f}" + " " * 10, flush=True)
        return result
    finally:
        if informer is not None:
            informer.stop()
        side.stop()
        clean(cluster, warm)
        clean(cluster, ns)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--large", action="store_true", help="1,000 nodes and 10,000 pods")
    ap.add_argument("--gang", type=int, default=8, help="pods per Job (minAvailable)")
    ap.add_argument("--queues", type=int, default=4, help="queues q0.. with weights 1..N")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of (volcano, lahar), order alternating")
    ap.add_argument("--only", choices=SIDES, help="run one side only")
    ap.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default bench/out/versus-<time>.json)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (logs)")
    args = ap.parse_args(argv)
    if args.large:
        args.nodes, args.pods = 1000, 10000
    for flag in ("nodes", "pods", "queues", "rounds"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag} must be at least 1, not {getattr(args, flag)}")
    if args.gang < 1 or args.gang > args.pods:
        ap.error(f"--gang must be between 1 and --pods ({args.pods}), not {args.gang}")
    need = ["etcd", "kube-apiserver", "kube-controller-manager", "kwok"]
    if args.only != "lahar":
        need += ["vc-scheduler", "vc-controller-manager"]
    missing = [peers.missing_reason(n) for n in need if peers.binary(n) is None]
    if missing:
        raise SystemExit("versus: " + "; ".join(missing))
    for tool in ("kubectl", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"versus: needs {tool} on the PATH")

    work = Path(tempfile.mkdtemp(prefix="lahar-versus-"))
    cluster = RealCluster(work / "cluster")
    results: list[dict[str, Any]] = []
    started = dt.datetime.now(dt.UTC)
    try:
        t = time.monotonic()
        cluster.start()
        print(f"versus: cluster up in {time.monotonic() - t:.1f} s; {args.nodes} nodes, {args.pods} pods in gangs "
              f"of {args.gang} over {args.queues} weighted queues; runs: {' '.join(order(args.rounds, args.only))}",
              flush=True)
        prepare(cluster, args)
        with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            for i, side in enumerate(order(args.rounds, args.only)):
                try:
                    results.append(run(cluster, client, side, i, args, work))
                except (RuntimeError, errors.ApiError, subprocess.TimeoutExpired) as exc:
                    print(f"\n  [{i}] {side}: FAILED: {str(exc)[-1500:]}", flush=True)
                    results.append({"side": side, "run": i, "error": str(exc)[-3000:]})
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    print()
    print(table([r for r in results if "error" not in r]))
    out = args.out or ROOT / "bench" / "out" / f"versus-{started:%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"started": started.isoformat(), "args": {k: str(v) for k, v in vars(args).items()},
                               "cpus": os.cpu_count(), "peers": {p.name: p.version for p in peers.PEERS},
                               "results": results}, indent=2))
    print(f"\nwrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0 if results and all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
