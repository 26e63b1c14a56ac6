"""Benchmark the controllers on Celery: 1,000 Volcano Jobs × 8 pods through `lahar dispatch` + 2 `lahar worker`s.

Starts `lahar devcluster` (no nodes), a redis-server, the dispatcher and the workers as processes; this process
applies the CRDs, plays the scheduler's enqueue (every PodGroup Pending → Inqueue, as soon as it appears), creates
the Jobs over HTTPS and watches PodGroups and pods. Prints the time until every PodGroup and pod exists, reconciles/s
and reconciles per Job for the creation burst (from the workers' counters in Redis), each process's CPU seconds in
the burst and the load average (2 cores are shared). No beat runs (the 30 s resync would add one reconcile per key
per interval). `--pod-concurrency N` sets the workers' LAHAR_POD_CONCURRENCY (1: a job's pods one after another).
Targets (issue 4): ≥ 100 reconciles/s; 8,000 pods in ≤ 40 s; ≤ 3 reconciles per job.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lahar.controllers import workqueue  # noqa: E402
from lahar.kube import errors, kubeconfig  # noqa: E402
from lahar.kube.informers import Informer  # noqa: E402
from lahar.kube.rest import RestClient  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(i: int, pods: int, tasks: int) -> dict[str, Any]:
    per = pods // tasks
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": f"bench-{i:04d}"},
        "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": pods, "maxRetry": 3,
                 "tasks": [{"name": f"t{t}", "replicas": per, "template": template} for t in range(tasks)]},
    }


class Processes:
    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env = workdir, env
        self.procs: list[subprocess.Popen] = []
        self.names: list[str] = []

    def start(self, name: str, *args: str, module: bool = True) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps its own descriptor
        cmd = [sys.executable, "-m", "lahar.cli", *args] if module else list(args)
        proc = subprocess.Popen(cmd, env=self.env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        self.procs.append(proc)
        self.names.append(name)
        return proc

    def cpu_seconds(self) -> dict[str, float]:
        """user + system CPU seconds so far of each started process's session (the process and its children)."""
        tick = os.sysconf("SC_CLK_TCK")
        by_group: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            session = int(fields[3])  # after ")": state ppid pgrp session ... utime(11) stime(12)
            by_group[session] = by_group.get(session, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return {name: by_group.get(proc.pid, 0.0) for name, proc in zip(self.names, self.procs, strict=True)}

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _wait(what: str, fn, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if fn():
                return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=8, help="pods per job")
    ap.add_argument("--tasks", type=int, default=2, help="tasks per job (pods are split evenly)")
    ap.add_argument("--workers", type=int, default=2, help="`lahar worker` processes")
    ap.add_argument("--concurrency", type=int, default=8, help="concurrency of each worker")
    ap.add_argument("--pool", default="threads", help="Celery pool of each worker: prefork or threads")
    ap.add_argument("--pod-concurrency", type=int, default=None,
                    help="LAHAR_POD_CONCURRENCY of the workers: a Job's pod creates in flight at once per worker "
                         "process (default: the setting's default, 16; 1 = one after another)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent job creators")
    ap.add_argument("--namespaces", type=int, default=1, help="spread the jobs over this many namespaces")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--keep", action="store_true", help="keep the work dir (logs) afterwards")
    ap.add_argument("--quick", action="store_true", help="50 jobs (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"jobs": 50, "timeout": 180.0})

    workdir = Path(tempfile.mkdtemp(prefix="lahar-bench-controllers-"))
    api_port, redis_port = _free_port(), _free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = dict(os.environ, REDIS_URL=redis_url, KUBECONFIG=str(workdir / "devcluster" / "kubeconfig"),
               LAHAR_DATA_DIR=str(workdir / "state"), LAHAR_LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1",
               PYTHONPATH=str(ROOT))
    if args.pod_concurrency is not None:
        env["LAHAR_POD_CONCURRENCY"] = str(args.pod_concurrency)
    load0 = os.getloadavg()
    procs = Processes(workdir, env)
    stop = threading.Event()
    try:
        procs.start("redis", "redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", module=False)
        procs.start("devcluster", "devcluster", "--port", str(api_port), "--data-dir", str(workdir / "devcluster"),
                    "--nodes", "0")
        _wait("devcluster's kubeconfig", lambda: (workdir / "devcluster" / "kubeconfig").exists())
        client = RestClient(kubeconfig.load(workdir / "devcluster" / "kubeconfig"), pool_size=64)
        _wait("devcluster", lambda: client.list(client.registry.get("", "v1", "namespaces")) is not None)
        crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    with contextlib.suppress(errors.AlreadyExists):
                        client.create(crd_rt, doc)
        job_rt = client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")
        pg_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        pod_rt = client.registry.get("", "v1", "pods")
        _wait("the Volcano CRDs to be served", lambda: client.list(job_rt) is not None)

        redis = workqueue.connect(redis_url)
        _wait("redis", redis.ping)
        for i in range(args.workers):
            procs.start(f"worker{i}", "worker", "-c", str(args.concurrency), "-P", args.pool, "--hostname", f"w{i}@%h",
                        "-l", "WARNING")
        procs.start("dispatch", "dispatch", "-l", "WARNING")
        _wait("the dispatcher's lease", lambda: redis.get("lahar:lease:dispatcher"))
        _wait("the workers", lambda: len(redis.keys("_kombu.binding.reconcile*")) > 0, timeout=60)

        # the scheduler's enqueue, as fast as a watch allows: PodGroup Pending → Inqueue
        pool = ThreadPoolExecutor(8)

        def inqueue(pg: dict[str, Any]) -> None:
            if ((pg.get("status") or {}).get("phase") or "Pending") != "Pending":
                return
            for _ in range(5):
                try:
                    pg = client.get(pg_rt, pg["metadata"]["name"], namespace=pg["metadata"]["namespace"])
                    pg["status"] = {**(pg.get("status") or {}), "phase": "Inqueue"}
                    client.update(pg_rt, pg)  # Volcano's PodGroup CRD has no status subresource
                    return
                except errors.Conflict:
                    continue
                except errors.NotFound:
                    return

        pgs = Informer(client, pg_rt)
        pgs.add_handler(on_add=lambda pg: pool.submit(inqueue, pg))
        pods = Informer(client, pod_rt)
        pgs.start()
        pods.start()
        pgs.wait_for_sync(30)
        pods.wait_for_sync(30)
        namespaces = ["default"] + [f"bench-{n}" for n in range(1, args.namespaces)]
        ns_rt = client.registry.get("", "v1", "namespaces")
        for ns in namespaces[1:]:
            client.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        before = workqueue.WorkQueue(redis).stats()

        cpu0, self_cpu0 = procs.cpu_seconds(), time.process_time()
        t0 = time.monotonic()
        with ThreadPoolExecutor(args.clients) as creators:
            list(creators.map(lambda i: client.create(job_rt, _job(i, args.pods, args.tasks),
                                                      namespace=namespaces[i % len(namespaces)]), range(args.jobs)))
        t_created = time.monotonic() - t0
        want_pods = args.jobs * (args.pods // args.tasks) * args.tasks
        t_pg = t_pods = None
        deadline = time.monotonic() + args.timeout
        reconciles, moved, next_look = -1, time.monotonic(), 0.0  # the count, when it last moved, next look at it
        while time.monotonic() < deadline:
            now = time.monotonic() - t0
            if now >= next_look:  # a worker that cannot start (an import error, say) would leave the bench waiting
                next_look = now + 1  # silently until --timeout
                done = workqueue.WorkQueue(redis).stats().get("reconciles", 0)
                if done != reconciles:
                    reconciles, moved = done, time.monotonic()
                elif time.monotonic() - moved > 60:
                    args.keep = True
                    raise SystemExit(f"no reconcile in 60 s ({len(pods.keys())} of {want_pods} pods exist): the "
                                     f"workers' logs are in {workdir}")
            if t_pg is None and len(pgs.keys()) >= args.jobs:
                t_pg = now
            if t_pods is None and len(pods.keys()) >= want_pods:
                t_pods = now
            if t_pg is not None and t_pods is not None:
                break
            time.sleep(0.05)
        burst = time.monotonic() - t0
        cpu1, self_cpu1 = procs.cpu_seconds(), time.process_time()
        at_burst = workqueue.WorkQueue(redis).stats()
        # let the queue drain (the last pod events' reconciles), then count again
        quiet_since, last = time.monotonic(), None
        while time.monotonic() - quiet_since < 3.0 and time.monotonic() < deadline:
            cur = (redis.llen("reconcile"), workqueue.WorkQueue(redis).stats().get("reconciles", 0))
            if cur != last:
                quiet_since, last = time.monotonic(), cur
            time.sleep(0.2)
        settled = workqueue.WorkQueue(redis).stats()
        pgs.stop()
        pods.stop()
        pool.shutdown(wait=False)

        # steady state: a resync of every Job (nothing to change) — the pure reconcile throughput
        os.environ["REDIS_URL"] = redis_url
        from lahar import worker as celery_worker
        from lahar.controllers.workqueue import Key

        rt = celery_worker.runtime()
        t1 = time.monotonic()
        for i in range(args.jobs):
            celery_worker.enqueue(Key("Job", namespaces[i % len(namespaces)], f"bench-{i:04d}"), rt=rt)
        target = settled.get("reconcile:Job", 0) + args.jobs
        while workqueue.WorkQueue(redis).stats().get("reconcile:Job", 0) < target and time.monotonic() < deadline:
            time.sleep(0.05)
        t_resync = time.monotonic() - t1

        def delta(stats: dict[str, int], key: str) -> int:
            return stats.get(key, 0) - before.get(key, 0)

        rec_burst = delta(at_burst, "reconciles")
        load1 = os.getloadavg()
        print(f"controllers bench: {args.jobs} jobs x {args.pods} pods in {args.namespaces} namespace(s), "
              f"{args.workers} workers x "
              f"{args.concurrency} ({args.pool}), pod concurrency {env.get('LAHAR_POD_CONCURRENCY', 'default')}, "
              f"devcluster over HTTPS, {os.cpu_count()} CPUs")
        print(f"  load average (1/5/15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
              f"at the end (includes this bench): {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
        print(f"  jobs created (HTTPS, {args.clients} clients): {t_created:.1f} s")
        print(f"  every PodGroup exists after: {t_pg if t_pg is not None else float('nan'):.1f} s")
        print(f"  every pod ({want_pods}) exists after: {t_pods if t_pods is not None else float('nan'):.1f} s"
              f"  ({len(pods.keys())} seen)")
        print(f"  reconciles until then: {rec_burst} ({rec_burst / burst:.0f}/s); Job reconciles per job "
              f"{delta(at_burst, 'reconcile:Job') / args.jobs:.2f}")
        used = {name: cpu1[name] - cpu0.get(name, 0.0) for name in cpu1}
        used["bench (this process)"] = self_cpu1 - self_cpu0
        print(f"  CPU seconds in those {burst:.1f} s: " + ", ".join(
            f"{name} {sec:.1f} ({sec / burst:.0%} of a core)" for name, sec in sorted(used.items(), key=lambda kv: -kv[1])))
        hits, misses = delta(settled, "cache:hits"), delta(settled, "cache:misses")
        print(f"  Job reconciler reads (Job, pods, PodGroup) until drained: {hits + misses} "
              f"({(hits + misses) / args.jobs:.1f} per job), from informers {hits}, from the API {misses} "
              f"({misses / args.jobs:.1f} per job; LAHAR_JOB_CACHE={os.environ.get('LAHAR_JOB_CACHE', 'true')}; "
              "with the cache off every read is an API read and is not counted here)")
        print(f"  after the queue drained: {delta(settled, 'reconciles')} reconciles, Job reconciles per job "
              f"{delta(settled, 'reconcile:Job') / args.jobs:.2f}, found locked {delta(settled, 'locked')}, "
              f"retries {delta(settled, 'retries')}, dropped {delta(settled, 'dropped')}")
        print(f"  resync of {args.jobs} unchanged jobs: {t_resync:.1f} s ({args.jobs / t_resync:.0f} reconciles/s)")
        return 0 if t_pods is not None else 1
    finally:
        stop.set()
        procs.stop()
        if args.keep:
            print(f"  logs in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
