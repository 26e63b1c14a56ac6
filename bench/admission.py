"""Benchmark the admission webhooks over TLS: lahar's rules against a bare FastAPI app that does no work.

Starts `lahar webhook --state ...` (uvicorn, HTTPS, static look-ups) and a bare app answering "allowed" on the same
`webhooks.server` settings, each in its own process; drives them from client processes (asyncio + uvloop, raw
keep-alive HTTP/1.1 over TLS, pre-built requests, so the client stays light on a 2-core machine) with realistic
Volcano Job and Pod reviews on `/jobs/validate`, `/jobs/mutate` and `/pods/mutate`. Prints, per path: saturation
throughput, p50/p95/p99 and the server process's CPU time per review (Linux /proc; robust to a shared machine,
unlike the rest) for lahar and bare, lahar's share of the bare throughput, and latency at a fixed 1,000 reviews/s
(open loop: latency counted from the intended send time).
Targets (2 cores, client on the same machine): p99 <= 5 ms at 1,000/s; >= 4,000/s on /pods/mutate; >= 50 % of bare.

AdmissionPolicies (`--policies N`, default 20; 0 skips): a third `lahar webhook --state ... --policies FILE` with N
CEL policies that all match the Job (label, GPU-sum, image-registry and replica checks; a few mutations) against
the one without, at a fixed rate (`--policy-rate`, default 250/s: one uvicorn process evaluating 20 CEL policies
saturates below 1,000/s on 2 shared cores) on `/jobs/validate` and `/jobs/mutate`; prints both p99s, the difference,
and the policy stage's own cost per review measured in-process. Target: the difference within 2 ms.

Worker processes (`--workers N`, default 2; 0 skips): a `lahar webhook --workers N` beside the single-process one,
both saturated in turn on `--workers-path` (default /jobs/validate, three rounds each, interleaved, so the load of a
shared machine falls on both alike); prints each one's reviews/s and their ratio, and the watchdog's cost per review
(the review clock's two stamps, measured in-process).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PATHS = ("/jobs/validate", "/jobs/mutate", "/pods/mutate")


# -- realistic bodies ------------------------------------------------------------------------------------------------


def _container(name: str, *, cpu: str, memory: str, extra: dict | None = None) -> dict:
    res = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"name": name, "image": "registry.example.com/ml/trainer:2.4.1",
            "command": ["python", "-m", "trainer", "--epochs", "10"],
            "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "OMP_NUM_THREADS", "value": "8"}],
            "ports": [{"containerPort": 2222, "name": "job-port"}],
            "resources": {"requests": dict(res), "limits": dict(res)},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def job_object() -> dict:
    """A Volcano Job as users write them: master + workers, policies, plugins; no defaults filled in."""
    def task(name: str, replicas: int, cpu: str) -> dict:
        return {"name": name, "replicas": replicas,
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}] if name == "master" else [],
                "template": {"metadata": {"labels": {"app": "trainer", "role": name}},
                             "spec": {"restartPolicy": "OnFailure",
                                      "containers": [_container(name, cpu=cpu, memory="8Gi")],
                                      "volumes": [{"name": "data", "emptyDir": {}}]}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "dist-train", "namespace": "team-a", "labels": {"team": "a"}},
            "spec": {"minAvailable": 5, "queue": "default",
                     "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                     "plugins": {"env": [], "svc": []},
                     "tasks": [task("master", 1, "2"), task("worker", 4, "4")]}}


def pod_object() -> dict:
    """A pod as Volcano's job controller creates it, asking for a vGPU by memory only (normalized by the rules)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "dist-train-worker-0", "namespace": "team-a",
                         "labels": {"app": "trainer", "role": "worker", "volcano.sh/job-name": "dist-train",
                                    "volcano.sh/task-spec": "worker"},
                         "annotations": {"scheduling.k8s.io/group-name": "dist-train-3f1c",
                                         "volcano.sh/job-name": "dist-train", "volcano.sh/queue-name": "default",
                                         "volcano.sh/task-spec": "worker", "volcano.sh/template-uid": "dist-train-worker"},
                         "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                              "name": "dist-train", "uid": "3f1c2d4e-0000-4000-8000-000000000001",
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"schedulerName": "volcano", "restartPolicy": "OnFailure", "hostname": "dist-train-worker-0",
                     "subdomain": "dist-train",
                     "containers": [_container("worker", cpu="4", memory="8Gi",
                                               extra={"volcano.sh/vgpu-memory": "8192"})],
                     "volumes": [{"name": "data", "emptyDir": {}}]}}


def review_body(path: str, uid: int = 0) -> bytes:
    from lahar.webhooks import review

    obj = job_object() if path.startswith("/jobs") else pod_object()
    req = review.request_for(obj, resource="jobs" if path.startswith("/jobs") else "pods",
                             uid=f"00000000-0000-4000-8000-{uid:012d}",
                             user_info={"username": "system:serviceaccount:volcano-system:volcano-controllers",
                                        "groups": ["system:serviceaccounts", "system:authenticated"]})
    return orjson.dumps(review.to_review(req))


def http_request(path: str, body: bytes) -> bytes:
    head = (f"POST {path}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, */*\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


# -- servers ---------------------------------------------------------------------------------------------------------


def bare_app():  # noqa: ANN201 - a FastAPI app
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.post("/{path:path}")
    async def allow(request: Request) -> Response:
        uid = orjson.loads(await request.body())["request"]["uid"]
        return Response(orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                      "response": {"uid": uid, "allowed": True}}), media_type="application/json")

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b"ok")

    return app


def serve_bare(port: int, cert: str, key: str, http: str) -> None:
    from lahar.webhooks.server import serve

    serve(bare_app(), host="127.0.0.1", port=port, certfile=cert, keyfile=key, http=http)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(port: int, ctx: ssl.SSLContext, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server did not become healthy")


# -- clients ---------------------------------------------------------------------------------------------------------


async def _connection(port: int, ctx: ssl.SSLContext, request: bytes, stop_at: float, interval: float | None,
                      first: float, latencies: list[float], errors: list[str]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    clock = time.perf_counter
    due = first
    try:
        while True:
            if interval is not None:
                now = clock()
                if due > now:
                    await asyncio.sleep(due - now)
                start = due
                due += interval
            else:
                start = clock()
            if start >= stop_at:
                return
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = head[9:12]
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
                    break
            body = await reader.readexactly(length)
            latencies.append(clock() - start)
            if status != b"200" or b'"allowed"' not in body:
                errors.append(f"{status.decode()} {body[:160]!r}")
    finally:
        writer.close()


def _client(port: int, ca: str, request: bytes, connections: int, duration: float, rate: float | None,
            out: mp.Queue) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    ctx = ssl.create_default_context(cafile=ca)

    async def run() -> tuple[list[float], list[str]]:
        latencies: list[float] = []
        errors: list[str] = []
        start = time.perf_counter() + 0.2
        interval = connections / rate if rate else None
        tasks = [_connection(port, ctx, request, start + duration, interval,
                             start + (i * interval / connections if interval else 0), latencies, errors)
                 for i in range(connections)]
        await asyncio.gather(*tasks)
        return latencies, errors

    latencies, errors = asyncio.run(run())
    out.put((latencies, errors[:5], len(errors)))


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process (Linux /proc), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def drive(port: int, ca: str, path: str, *, processes: int, connections: int, duration: float,
          rate: float | None = None, warmup: float = 0.5, pid: int | None = None) -> dict:
    """Run the load; rate None = saturation (closed loop), else open loop at `rate` reviews/s in total.
    With the server's `pid`, also its CPU time per answered review (`cpu_us`): what the server spends on a review
    whatever else runs on the machine, unlike the throughput and the tail."""
    request = http_request(path, review_body(path))
    ctx = mp.get_context("fork")
    if warmup:
        q = ctx.Queue()
        p = ctx.Process(target=_client, args=(port, ca, request, 2, warmup, None, q))
        p.start()
        q.get()
        p.join()
    q = ctx.Queue()
    per_proc_rate = rate / processes if rate else None
    procs = [ctx.Process(target=_client, args=(port, ca, request, connections, duration, per_proc_rate, q))
             for _ in range(processes)]
    cpu_start = _cpu_seconds(pid)
    for p in procs:
        p.start()
    latencies: list[float] = []
    errors: list[str] = []
    n_errors = 0
    for _ in procs:
        lat, errs, n = q.get()
        latencies += lat
        errors += errs
        n_errors += n
    for p in procs:
        p.join()
    cpu_end = _cpu_seconds(pid)
    latencies.sort()

    def pct(x: float) -> float:
        return latencies[min(len(latencies) - 1, int(x * len(latencies)))] * 1000 if latencies else float("nan")

    cpu_us = ((cpu_end - cpu_start) / len(latencies) * 1e6 if cpu_start is not None and cpu_end is not None
              and latencies else float("nan"))
    return {"n": len(latencies), "rps": len(latencies) / duration, "p50": pct(0.50), "p95": pct(0.95),
            "p99": pct(0.99), "errors": n_errors, "error_samples": errors, "cpu_us": cpu_us}


# -- AdmissionPolicies: p99 with N CEL policies loaded vs none ------------------------------------------------------


_POLICY_SHAPES = (
    # (validations/mutations YAML, what it checks) — every one matches the benchmark's Job and lets it through
    ("""  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: every Job needs a team label
  validationActions: [Deny]""", "label"),
    ("""  variables:
  - name: gpus
    expression: >-
      object.spec.tasks.map(t, (has(t.replicas) ? t.replicas : 1) * t.template.spec.containers.map(c,
        has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits
          ? int(q(c.resources.limits['nvidia.com/gpu'])) : 0).sum()).sum()
  validations:
  - expression: "variables.gpus <= LIMIT"
    messageExpression: "'job asks for ' + string(variables.gpus) + ' GPUs, at most LIMIT'"
  validationActions: [Deny]""", "gpu-sum"),
    ("""  validations:
  - expression: >-
      object.spec.tasks.all(t, t.template.spec.containers.all(c, c.image.startsWith('registry.example.com/')))
    message: images come from registry.example.com
  validationActions: [Warn]""", "registry"),
    ("""  variables:
  - name: replicas
    expression: "object.spec.tasks.map(t, has(t.replicas) ? t.replicas : 1).sum()"
  validations:
  - expression: "!has(object.spec.minAvailable) || object.spec.minAvailable <= variables.replicas"
    message: minAvailable is at most the replicas
  validationActions: [Deny, Audit]""", "replicas"),
    ("""  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        has(object.metadata.annotations) && 'lahar.sh/benchNAME' in object.metadata.annotations ? [] :
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {"lahar.sh/benchNAME": "seen"}}]""", "mutation"),
)


def policy_documents(n: int) -> str:
    """N AdmissionPolicy documents over Volcano Jobs, cycling through `_POLICY_SHAPES` (every 5th a mutation)."""
    docs = []
    for i in range(n):
        body, kind = _POLICY_SHAPES[i % len(_POLICY_SHAPES)]
        name = f"bench-{kind}-{i}"
        docs.append(f"""apiVersion: lahar.sh/v1alpha1
kind: AdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [batch.volcano.sh], apiVersions: ["*"], operations: [CREATE, UPDATE],
                      resources: [jobs]}}]
""" + body.replace("LIMIT", str(64 + i)).replace("NAME", str(i)))
    return "\n---\n".join(docs) + "\n"


def _stage_cost(n: int, rounds: int = 200) -> str:
    """Mean in-process time of the policy stage alone on the benchmark's Job, per phase."""
    from lahar.policies.admission_policies import parse_policies, policy_stage
    from lahar.webhooks import policystage, review

    split = policystage.Policies.of(parse_policies(policy_documents(n)))
    req = review.request_for(job_object(), resource="jobs")
    out = []
    for label, chosen in (("validating", split.validating), ("mutating", split.mutating)):
        policy_stage(chosen, req)
        start = time.perf_counter()
        for _ in range(rounds):
            policy_stage(chosen, req)
        out.append(f"{label} ({len(chosen)}) {(time.perf_counter() - start) / rounds * 1000:.2f} ms")
    return ", ".join(out)


def policy_section(args: argparse.Namespace, tmp: Path, env: dict, ctx: ssl.SSLContext, ca_path: str,
                   baseline_port: int) -> None:
    """p99 at the fixed rate, N policies vs none, on the paths the policies run on."""
    (tmp / "policies.yaml").write_text(policy_documents(args.policies))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(port),
         "--cert", str(tmp / "tls.crt"), "--key", str(tmp / "tls.key"), "--state", str(tmp / "state.yaml"),
         "--http", args.http, "--policies", str(tmp / "policies.yaml")], env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_healthy(port, ctx, proc)
        rate = args.policy_rate
        print()
        print(f"AdmissionPolicies: {args.policies} CEL policies loaded vs none, fixed rate {rate:,.0f}/s; in-process "
              f"policy stage per review: {_stage_cost(args.policies)}")
        print(f"{'path':<16} {'policies':>8} {'reviews/s':>10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}")
        for path in ("/jobs/validate", "/jobs/mutate"):
            runs = {}
            for label, p in (("0", baseline_port), (str(args.policies), port)):
                r = drive(p, ca_path, path, processes=args.processes, connections=args.connections,
                          duration=args.duration, rate=rate)
                runs[label] = r
                print(f"{path:<16} {label:>8} {r['rps']:>10,.0f} {r['p50']:>8.2f} {r['p95']:>8.2f} {r['p99']:>8.2f} "
                      f"{r['errors']:>7}")
                for sample in r["error_samples"]:
                    print(f"    error: {sample}")
            delta = runs[str(args.policies)]["p99"] - runs["0"]["p99"]
            print(f"{path:<16} p99 difference {delta:+.2f} ms (target: within 2 ms)")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- worker processes: lahar webhook --workers N against one process ------------------------------------------------


def _clock_cost(rounds: int = 200_000) -> float:
    """ns per review of the watchdog's review clock (begin + end), with a watch directory as under the supervisor."""
    from lahar.webhooks import watchdog

    with tempfile.TemporaryDirectory() as d:
        os.environ[watchdog.WATCH_DIR_ENV] = d
        try:
            clock = watchdog.ReviewClock()
            clock.begin()
            start = time.perf_counter()
            for _ in range(rounds):
                clock.begin()
                clock.end()
            return (time.perf_counter() - start) / rounds * 1e9
        finally:
            del os.environ[watchdog.WATCH_DIR_ENV]


def workers_section(args: argparse.Namespace, tmp: Path, env: dict, ctx: ssl.SSLContext, ca_path: str,
                    single_port: int) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(port),
         "--cert", str(tmp / "tls.crt"), "--key", str(tmp / "tls.key"), "--state", str(tmp / "state.yaml"),
         "--http", args.http, "--workers", str(args.workers)], env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_healthy(port, ctx, proc)
        path = args.workers_path
        print(f"\nworker processes on {path}: saturation, 3 interleaved rounds of {args.duration:.0f} s each")
        totals = {1: [], args.workers: []}
        for _ in range(3):
            for n, p in ((1, single_port), (args.workers, port)):
                r = drive(p, ca_path, path, processes=args.processes, connections=args.connections,
                          duration=args.duration)
                totals[n].append(r["rps"])
                print(f"{path:<16} --workers {n:<3} {r['rps']:>10,.0f} reviews/s  p99 {r['p99']:>7.2f} ms  "
                      f"errors {r['errors']}")
        one, many = (sum(totals[1]) / 3, sum(totals[args.workers]) / 3)
        print(f"{path:<16} --workers {args.workers} / --workers 1 = {many:,.0f} / {one:,.0f} reviews/s = "
              f"{many / one:.2f}x ({os.cpu_count()} CPUs, the clients on the same machine)")
        print(f"watchdog review clock: {_clock_cost():.0f} ns per review (two stamps into a shared page)")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- main ------------------------------------------------------------------------------------------------------------



def webhook_workdir(prefix: str) -> Path:
    """A temporary folder with a CA (`ca.crt`), the webhook's serving pair (`tls.crt`, `tls.key`) for 127.0.0.1,
    and `state.yaml`: the namespace and the Inqueue PodGroup the reviews' pods belong to."""
    from lahar.certs import authority

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    ca = authority.new_ca("lahar-bench-ca", 1)
    authority.write(authority.issue(ca, common_name="127.0.0.1", hosts=["127.0.0.1", "localhost"], days=1),
                    tmp / "tls.crt", tmp / "tls.key")
    (tmp / "ca.crt").write_bytes(ca.cert_pem)
    (tmp / "state.yaml").write_text(orjson.dumps({
        "apiVersion": "v1", "kind": "List",
        "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
                  {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "dist-train-3f1c", "namespace": "team-a"},
                   "spec": {"minMember": 5, "queue": "default"}, "status": {"phase": "Inqueue"}}]}).decode())
    return tmp

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--processes", type=int, default=2, help="client processes")
    ap.add_argument("--connections", type=int, default=16, help="keep-alive connections per client process")
    ap.add_argument("--rate", type=float, default=1000.0, help="fixed-rate run, reviews/s (0 skips it)")
    ap.add_argument("--http", default="httptools", choices=["httptools", "h11"], help="uvicorn HTTP parser")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--policies", type=int, default=20, help="AdmissionPolicies for the policy section (0 skips it)")
    ap.add_argument("--policy-rate", type=float, default=250.0, help="fixed rate of the policy section, reviews/s")
    ap.add_argument("--only-policies", action="store_true", help="run only the policy section")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the workers section (0 skips it)")
    ap.add_argument("--workers-path", default="/jobs/validate", help="path of the workers section")
    ap.add_argument("--only-workers", action="store_true", help="run only the workers section")
    ap.add_argument("--serve-bare", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--cert", help=argparse.SUPPRESS)
    ap.add_argument("--key", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="1 s runs, fixed rate 500/s, no workers section (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"duration": 1.0, "rate": 500.0, "workers": 0})
    if args.serve_bare:
        serve_bare(args.serve_bare, args.cert, args.key, args.http)
        return 0

    tmp = webhook_workdir("lahar-bench-admission-")
    cert, key, ca_path = str(tmp / "tls.crt"), str(tmp / "tls.key"), str(tmp / "ca.crt")
    ctx = ssl.create_default_context(cafile=ca_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    lahar_port, bare_port = _free_port(), _free_port()
    servers = {
        "lahar": (lahar_port, subprocess.Popen(
            [sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(lahar_port),
             "--cert", cert, "--key", key, "--state", str(tmp / "state.yaml"), "--http", args.http],
            env=env, stdout=subprocess.DEVNULL)),
        "bare": (bare_port, subprocess.Popen(
            [sys.executable, __file__, "--serve-bare", str(bare_port), "--cert", cert, "--key", key,
             "--http", args.http], env=env, stdout=subprocess.DEVNULL)),
    }
    try:
        for port, proc in servers.values():
            _wait_healthy(port, ctx, proc)
        cpus = os.cpu_count()
        print(f"admission benchmark: {cpus} CPUs, uvicorn http={args.http}, {args.processes} client processes x "
              f"{args.connections} connections, {args.duration:.0f} s per run")
        print(f"{'path':<16} {'server':<6} {'reviews/s':>10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7} "
              f"{'server CPU/review':>18}")
        summary = []
        for path in ([] if args.only_policies or args.only_workers else args.paths.split(",")):
            results = {}
            for name, (port, proc) in servers.items():
                r = drive(port, ca_path, path, processes=args.processes, connections=args.connections,
                          duration=args.duration, pid=proc.pid)
                results[name] = r
                print(f"{path:<16} {name:<6} {r['rps']:>10,.0f} {r['p50']:>8.2f} {r['p95']:>8.2f} {r['p99']:>8.2f} "
                      f"{r['errors']:>7} {r['cpu_us']:>15.0f} µs")
                for sample in r["error_samples"]:
                    print(f"    error: {sample}")
            share = results["lahar"]["rps"] / results["bare"]["rps"]
            fixed = None
            if args.rate:
                fixed = drive(lahar_port, ca_path, path, processes=args.processes, connections=args.connections,
                              duration=args.duration, rate=args.rate)
                print(f"{path:<16} {'lahar':<6} {fixed['rps']:>10,.0f} {fixed['p50']:>8.2f} {fixed['p95']:>8.2f} "
                      f"{fixed['p99']:>8.2f} {fixed['errors']:>7}   (fixed rate {args.rate:,.0f}/s)")
            summary.append((path, results["lahar"]["rps"], share, fixed, results["lahar"]["cpu_us"],
                            results["bare"]["cpu_us"]))
        print()
        for path, rps, share, fixed, cpu, bare_cpu in summary:
            line = (f"{path:<16} lahar {rps:,.0f} reviews/s = {share:.0%} of bare; server CPU {cpu:.0f} µs/review "
                    f"(bare {bare_cpu:.0f})")
            if fixed:
                line += f"; at {args.rate:,.0f}/s p99 {fixed['p99']:.2f} ms"
            print(line)
        if args.policies and not args.only_workers:
            policy_section(args, tmp, env, ctx, ca_path, lahar_port)
        if args.workers > 1 and not args.only_policies:
            workers_section(args, tmp, env, ctx, ca_path, lahar_port)
    finally:
        for _, proc in servers.values():
            proc.send_signal(signal.SIGINT)
        for _, proc in servers.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
