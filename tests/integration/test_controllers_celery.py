"""Controllers on Celery end to end: devcluster (simulated kubelets), a real redis-server, `lahar worker`, `lahar
dispatch`, `lahar beat` and `lahar flower` as subprocesses; the test plays the scheduler (PodGroup → Inqueue, binds).

Each test works in its own namespace; the stack is shared by the module. Flows: a job runs and completes; a
PodFailed → RestartJob policy restarts the job once and it completes; a worker SIGKILLed mid-run loses nothing;
a Redis restart heals; Flower's API lists the worker and the task names.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.builders import simulated_job
from tests.support import free_port as _free_port
from tests.support import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"


class FakeScheduler:
    """What the scheduler would do, just enough: PodGroups Pending → Inqueue (→ Running once bound), pods bound
    round-robin to the simulated nodes."""

    def __init__(self, client: Any, nodes: list[str]) -> None:
        self.client = client
        self.nodes = itertools.cycle(nodes)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="fake-scheduler", daemon=True)
        r = client.registry
        self.pg_rt = r.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        self.pod_rt = r.get("", "v1", "pods")

    def _loop(self) -> None:
        from lahar.kube import errors

        while not self.stop.wait(0.1):
            try:
                pgs = self.client.list(self.pg_rt)["items"]
                pods = self.client.list(self.pod_rt)["items"]
            except errors.ApiError:
                continue
            for pg in pgs:
                phase = (pg.get("status") or {}).get("phase") or "Pending"
                if phase == "Pending":
                    pg["status"] = {**(pg.get("status") or {}), "phase": "Inqueue"}
                    with contextlib.suppress(errors.ApiError):  # Volcano's PodGroup CRD has no status subresource
                        self.client.update(self.pg_rt, pg)
            for pod in pods:
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if spec.get("nodeName") or meta.get("deletionTimestamp") or spec.get("schedulerName") != "volcano":
                    continue
                with contextlib.suppress(errors.ApiError):
                    self.client.bind(namespace=meta["namespace"], name=meta["name"], node_name=next(self.nodes))

    def __enter__(self) -> FakeScheduler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


class Stack:
    def __init__(self, tmp: Path, redis_server: Any) -> None:
        from lahar.devcluster import runtime

        self.tmp = tmp
        self.redis_server = redis_server
        self.redis_url = redis_server.url.rsplit("/", 1)[0] + "/3"  # a db of our own on the shared server
        self.cluster = runtime.Cluster(data_dir=tmp / "devcluster", port=0, profile="cpu-small", nodes=4).start()
        self.client = self.cluster.client
        self.flower_port = _free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self._args: dict[str, tuple[str, ...]] = {}
        self.restarts: dict[str, int] = {}
        self._closing = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, name="stack-supervisor", daemon=True)
        self.env = dict(
            os.environ, REDIS_URL=self.redis_url, KUBECONFIG=str(self.cluster.kubeconfig),
            LAHAR_DATA_DIR=str(tmp / "state"), LAHAR_RESYNC_INTERVAL="2", LAHAR_PENDING_TTL="5",
            LAHAR_VISIBILITY_TIMEOUT="20", LAHAR_LOCK_TTL="4", LAHAR_DISPATCH_LEASE_TTL="3", LAHAR_MAX_COUNTDOWN="5",
            LAHAR_LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
        )
        self.env.pop("FLOWER_UNAUTHENTICATED_API", None)
        self._install_crds()
        self._supervisor.start()

    def _supervise(self) -> None:
        """What a Deployment (or `lahar up`) does: a process that exits on its own is started again. A Celery worker
        can exit when Redis restarts under it (kombu fails restoring unacked messages on a dead connection)."""
        while not self._closing.wait(0.5):
            for name, proc in list(self.procs.items()):
                if proc.poll() is not None and self.procs.get(name) is proc and not self._closing.is_set():
                    self.restarts[name] = self.restarts.get(name, 0) + 1
                    self.start(name, *self._args[name])

    def _install_crds(self) -> None:
        from lahar.kube import errors

        crd_rt = self.client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for path in sorted(CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    with contextlib.suppress(errors.AlreadyExists):
                        self.client.create(crd_rt, doc)

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", *args], env=self.env, cwd=self.tmp,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._args[name] = args
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str) -> subprocess.Popen:
        # unsupervised, as under a Deployment: the tests kill the Celery worker itself
        return self.start(name, "worker", "--no-supervise", "-c", "2", "--hostname", f"{name}@%h")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(10)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def close(self) -> None:
        self._closing.set()
        self._supervisor.join(5)
        for name in list(self.procs):
            self.stop(name)
        self.cluster.stop()

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    # -- the world ---------------------------------------------------------------------------------------------

    def rt(self, group: str, version: str, plural: str) -> Any:
        return self.client.registry.get(group, version, plural)

    def namespace(self) -> str:
        ns = f"t-{uuid.uuid4().hex[:6]}"
        self.client.create(self.rt("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": ns}})
        return ns

    def job(self, ns: str, name: str) -> dict[str, Any]:
        return self.client.get(self.rt("batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=ns)

    def phase(self, ns: str, name: str) -> str:
        return ((self.job(ns, name).get("status") or {}).get("state") or {}).get("phase") or ""

    def pods(self, ns: str) -> list[dict[str, Any]]:
        return self.client.list(self.rt("", "v1", "pods"), namespace=ns)["items"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[Stack]:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    s = Stack(tmp_path_factory.mktemp("controllers"), redis_server)
    try:
        s.start_worker("worker")
        s.start("dispatch", "dispatch")
        s.start("beat", "beat")
        s.start("flower", "flower", "--port", str(s.flower_port))
        with FakeScheduler(s.client, s.cluster.node_names):
            yield s
    finally:
        s.close()


def submit(stack: Stack, ns: str, job: dict[str, Any]) -> None:
    stack.client.create(stack.rt("batch.volcano.sh", "v1alpha1", "jobs"), job, namespace=ns)


def watch_phases(stack: Stack, ns: str, name: str, until: str, timeout: float = 90.0) -> list[str]:
    """The phases the Job went through (as polled), until `until` (or a timeout)."""
    seen: list[str] = []

    def done() -> bool:
        phase = stack.phase(ns, name)
        if not seen or seen[-1] != phase:
            seen.append(phase)
        return phase == until

    try:
        wait_for(f"{ns}/{name} to be {until}", done, timeout=timeout, interval=0.1)
    except AssertionError as e:
        raise AssertionError(f"{e}; phases seen {seen}") from None
    return seen


def assert_pods_exactly(stack: Stack, ns: str, tasks: dict[str, int]) -> None:
    names = sorted(p["metadata"]["name"] for p in stack.pods(ns))
    want = sorted(f"j-{t}-{i}" for t, n in tasks.items() for i in range(n))
    assert names == want


def test_job_runs_then_completes(stack: Stack) -> None:
    ns = stack.namespace()
    tasks = {"ps": 1, "worker": 2}
    submit(stack, ns, simulated_job("j", tasks=tasks, duration="2s"))
    phases = watch_phases(stack, ns, "j", "Completed")
    assert "Running" in phases and phases[-1] == "Completed"
    assert_pods_exactly(stack, ns, tasks)
    status = stack.job(ns, "j")["status"]
    assert status["succeeded"] == 3 and status.get("retryCount", 0) == 0


def test_pod_failure_restarts_the_job_which_then_completes(stack: Stack) -> None:
    from lahar.kube import errors

    ns = stack.namespace()
    tasks = {"worker": 2}
    submit(stack, ns, simulated_job("j", tasks=tasks, duration="4s", max_retry=3,
                            policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    pod_rt = stack.rt("", "v1", "pods")

    def running_pod() -> dict[str, Any] | None:
        pod = stack.client.get(pod_rt, "j-worker-0", namespace=ns)
        return pod if (pod.get("status") or {}).get("phase") == "Running" else None

    pod = wait_for("j-worker-0 to run", running_pod)
    first_uid = pod["metadata"]["uid"]
    # the simulated failure: the container exits 3 (what a kubelet would write)
    pod["status"]["phase"] = "Failed"
    pod["status"]["containerStatuses"] = [{"name": "main", "ready": False, "restartCount": 0, "image": "busybox",
                                           "imageID": "", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]
    stack.client.update_status(pod_rt, pod, namespace=ns)
    phases = watch_phases(stack, ns, "j", "Completed", timeout=120)
    assert "Restarting" in phases or stack.job(ns, "j")["status"].get("retryCount") == 1
    status = stack.job(ns, "j")["status"]
    assert status["retryCount"] == 1 and status["version"] >= 1
    assert_pods_exactly(stack, ns, tasks)
    with contextlib.suppress(errors.NotFound):
        assert stack.client.get(pod_rt, "j-worker-0", namespace=ns)["metadata"]["uid"] != first_uid


def test_worker_killed_mid_run_loses_nothing(stack: Stack) -> None:
    stack.start_worker("victim")
    wait_for("the victim worker to be ready", lambda: "ready" in stack.log("victim"), timeout=60)
    ns = stack.namespace()
    tasks = {"a": 4, "b": 4}
    names = [f"k{i}" for i in range(4)]
    for name in names:
        job = simulated_job(name, tasks=tasks, duration="2s")
        submit(stack, ns, job)
    wait_for("the victim to take reconciles", lambda: "lahar.reconcile[Job." in stack.log("victim"), interval=0.02)
    stack.kill("victim", signal.SIGKILL)  # the worker and its pool children, mid-run
    for name in names:
        watch_phases(stack, ns, name, "Completed", timeout=120)
    pods = sorted(p["metadata"]["name"] for p in stack.pods(ns))
    assert pods == sorted(f"{j}-{t}-{i}" for j in names for t, n in tasks.items() for i in range(n))
    for name in names:
        status = stack.job(ns, name)["status"]
        assert status["succeeded"] == 8 and status.get("retryCount", 0) == 0


def test_redis_restart_heals(stack: Stack) -> None:
    ns = stack.namespace()
    tasks = {"worker": 3}
    submit(stack, ns, simulated_job("j", tasks=tasks, duration="3s"))
    wait_for("the first pod", lambda: stack.pods(ns), interval=0.05)
    stack.redis_server.restart()  # queues, marks, locks and timers are gone
    watch_phases(stack, ns, "j", "Completed", timeout=120)
    assert_pods_exactly(stack, ns, tasks)
    # and the stack still works afterwards
    submit(stack, ns, simulated_job("after", tasks={"w": 1}, duration="1s"))
    watch_phases(stack, ns, "after", "Completed", timeout=120)


def _flower_auth(stack: Stack) -> tuple[str, str]:
    path = stack.tmp / "state" / "flower-auth"  # generated by `lahar flower` in LAHAR_DATA_DIR
    wait_for("flower to write its login", path.is_file, timeout=30)
    user, _, password = path.read_text().strip().partition(":")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    return user, password


def test_flower_lists_the_worker_and_the_task_names(stack: Stack) -> None:
    base = f"http://127.0.0.1:{stack.flower_port}"
    auth = _flower_auth(stack)

    def workers() -> dict[str, Any]:
        return httpx.get(f"{base}/api/workers", params={"refresh": "true"}, auth=auth, timeout=10).json()

    found = wait_for("flower to list the worker", lambda: [w for w in workers() if w.startswith("worker@")], timeout=60)
    assert found

    def tasks() -> dict[str, Any]:
        out = httpx.get(f"{base}/api/tasks", params={"limit": 2000}, auth=auth, timeout=10).json()
        return out if any(t.get("name") == "lahar.reconcile" for t in out.values()) else {}

    listed = wait_for("flower to list reconcile tasks", tasks, timeout=60)
    names = {t.get("name") for t in listed.values()}
    assert "lahar.reconcile" in names
    one = next(t for t in listed.values() if t.get("name") == "lahar.reconcile" and t.get("state") == "SUCCESS")
    assert one["args"].startswith("(") and one["result"]


def test_flower_refuses_anonymous_and_cross_origin_requests(stack: Stack) -> None:
    """Issue 18 item 10: a web page must not drive Flower's task API (it used to answer a cross-origin text/plain
    POST to /api/task/async-apply with 200, on loopback without any login)."""
    base = f"http://127.0.0.1:{stack.flower_port}"
    auth = _flower_auth(stack)
    url = f"{base}/api/task/async-apply/lahar.resync"
    evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    wait_for("flower to answer", lambda: httpx.get(f"{base}/healthcheck", timeout=5).status_code == 200, timeout=60)
    assert httpx.get(f"{base}/api/workers", timeout=10).status_code == 401
    assert httpx.post(url, content="{}", headers=evil, timeout=10).status_code in (401, 403)
    # a browser that holds the login still sends the page's Origin (or Sec-Fetch-Site): refused
    assert httpx.post(url, content="{}", headers=evil, auth=auth, timeout=10).status_code == 403
    cross_site = {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
    assert httpx.post(url, content="{}", headers=cross_site, auth=auth, timeout=10).status_code == 403
    assert httpx.get(f"{base}/api/workers", auth=auth, timeout=10).status_code == 200
