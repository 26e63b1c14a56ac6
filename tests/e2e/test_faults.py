"""Faults end to end: one `lahar up` (embedded Redis, real processes, real kubectl) with Volcano Jobs in flight while
Redis crashes, a worker and the scheduler are SIGKILLed, the webhook is down under `failurePolicy: Fail`, and the
whole `lahar up` (devcluster in-process) is SIGKILLed and started again on the same data dir.

Each fault has its own namespace and wave of jobs: gangs with `lahar.sh/sim-duration`, and one `PodFailed →
RestartJob` job whose first pod is made to fail (`lahar.sh/sim-exit-code: 1` put on that pod of version 0, as a
crashing container would). After each fault: every job is Completed (the RestartJob one after exactly one restart),
the pods are exactly the expected names at the job's final version, no pod slot (job, version, name) ever had two
pods (uids), no job ever had two PodGroups at once, and no gang is half-bound — an `Observer` thread lists pods and
PodGroups ~10 times a second all through the module and flags a PodGroup whose bound pods of one job version, before
they ever reached minMember, stay between 1 and minMember-1 for longer than HALF_BOUND_GRACE of observed time. Binds
are separate `pods/binding` calls, so one sample in a few hundred catches a commit half done, and a commit cut short
by a kill (of the scheduler or of the API server) leaves the rest to the next session; neither may last. Timeouts are
shortened through the LAHAR_* environment the supervised processes inherit, so recovery takes seconds; nothing here
asserts wall-clock times.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import simulated_job
from tests.support import free_port as _free_port
from tests.support import wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH"),
]

SIM_EXIT_CODE = "lahar.sh/sim-exit-code"
JOB_NAME = "volcano.sh/job-name"
JOB_VERSION = "volcano.sh/job-version"
GROUP_NAME = "scheduling.k8s.io/group-name"

# what the supervised processes inherit: short leases, locks and resyncs, so a killed process's work is picked up
# in seconds (the defaults are minutes, sized for a real cluster)
TUNING = {
    "LAHAR_RESYNC_INTERVAL": "3", "LAHAR_PENDING_TTL": "5", "LAHAR_VISIBILITY_TIMEOUT": "20", "LAHAR_LOCK_TTL": "4",
    "LAHAR_DISPATCH_LEASE_TTL": "3", "LAHAR_MAX_COUNTDOWN": "5", "LAHAR_LOG_LEVEL": "INFO",
}
HALF_BOUND_GRACE = 30.0  # seconds a gang may show some but not minMember pods bound (a commit cut short by a kill)
COMPLETE_TIMEOUT = 90.0


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    return True


def _group_alive(pgid: int) -> bool:
    """Whether any running process is left in the group (zombies excluded)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


# -- the stack -----------------------------------------------------------------------------------------------------


class Up:
    """`lahar up --plain` in a subprocess (its own process group) on `data_dir`, restartable on the same port."""

    args: tuple[str, ...] = ("--nodes", "4")  # the cluster and the simulation: a subclass's own flags

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data_dir = tmp / "lahar"
        self.port = _free_port()
        self.flower_port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.log = tmp / "up.out"
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.started: list[dict[str, Any]] = []  # every up.json seen, for the cleanup

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def read_info(self) -> dict[str, Any]:
        info = json.loads((self.data_dir / "up.json").read_text())
        self.started.append(info)
        return info

    def start(self) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG")}
        env.update(TUNING, PYTHONUNBUFFERED="1", LAHAR_FLOWER_PORT=str(self.flower_port), LAHAR_DASHBOARD_PORT=str(_free_port()))
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "up", "--data-dir", str(self.data_dir),
                                          "--port", str(self.port), *self.args, "--plain"],
                                         cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

        def ready() -> dict[str, Any] | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"lahar up exited with {self.proc.returncode}")
            info = self.read_info()
            return info if info.get("ready") and info.get("pid") == self.proc.pid else None

        try:
            self.info = wait_for("lahar up to be ready", ready, timeout=120, interval=0.25)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.output()}") from None
        return self.info

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    def child_pid(self, name: str) -> int:
        pid = self.read_info()["children"].get(name)
        assert pid, f"no {name} in up.json"
        return int(pid)

    def crash(self) -> None:
        """SIGKILL `lahar up` itself (devcluster, the simulated kubelets and the supervisor): its children are
        orphaned, still running; the next `start` must clean them up."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def kill_everything(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None
        pids = {int(p) for info in self.started for p in [*(info.get("children") or {}).values(),
                                                          info.get("redis_pid")] if p}
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}
        out = subprocess.run(["kubectl", "--cache-dir", str(self.home / "cache"), *args], input=stdin, env=env,
                             capture_output=True, text=True, timeout=60, cwd=REPO)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}\n{self.output()}")
        return out

    def client(self) -> Any:
        from lahar.kube import kubeconfig
        from lahar.kube.rest import RestClient

        return RestClient(kubeconfig.load(str(self.kubeconfig)))


# -- what is observed all along ------------------------------------------------------------------------------------


@dataclass
class Observer:
    """Lists pods and PodGroups every `interval` seconds while the module runs (through devcluster restarts)."""

    up: Up
    interval: float = 0.1
    samples: int = 0
    slots: dict[tuple[str, str, str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    streaks: dict[tuple[str, str, str], tuple[float, int, int]] = field(default_factory=dict)  # → (since, bound, min)
    transient: dict[str, int] = field(default_factory=lambda: defaultdict(int))      # namespace → partial samples
    longest: dict[str, float] = field(default_factory=lambda: defaultdict(float))    # namespace → longest streak
    half_bound: list[str] = field(default_factory=list)
    whole: set[tuple[str, str, str]] = field(default_factory=set)  # (ns, PodGroup, version) seen with minMember bound
    partials: dict[tuple[str, str, str], list[tuple[float, int, int]]] = field(default_factory=dict)
    two_groups: list[str] = field(default_factory=list)  # a job with two PodGroups at once
    errors: int = 0

    def __post_init__(self) -> None:
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, name="fault-observer", daemon=True)

    def start(self) -> Observer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def _loop(self) -> None:
        client = None
        while not self.stop.wait(self.interval):
            try:
                if client is None:
                    client = self.up.client()
                r = client.registry
                pods = client.list(r.get("", "v1", "pods"))["items"]
                pgs = client.list(r.get("scheduling.volcano.sh", "v1beta1", "podgroups"))["items"]
            except Exception:  # noqa: BLE001 - devcluster restarting: a new client next time
                self.errors += 1
                with self.lock:
                    self.streaks.clear()  # unobserved meanwhile: streaks count observed time only
                with contextlib.suppress(Exception):
                    if client is not None:
                        client.close()
                client = None
                continue
            self.observe(pods, pgs, time.monotonic())

    def observe(self, pods: list[dict[str, Any]], pgs: list[dict[str, Any]], now: float) -> None:
        with self.lock:
            self.samples += 1
            bound: dict[tuple[str, str, str], int] = defaultdict(int)
            for p in pods:
                meta = p["metadata"]
                ns, ann = meta.get("namespace", ""), meta.get("annotations") or {}
                job = (meta.get("labels") or {}).get(JOB_NAME)
                if not job:
                    continue
                version = ann.get(JOB_VERSION, "?")
                self.slots[(ns, job, version, meta["name"])].add(meta["uid"])
                if (p.get("spec") or {}).get("nodeName") and not meta.get("deletionTimestamp") and ann.get(GROUP_NAME):
                    bound[(ns, ann[GROUP_NAME], version)] += 1
            seen: set[tuple[str, str, str]] = set()
            per_job: dict[tuple[str, str], list[str]] = defaultdict(list)
            for pg in pgs:
                ns, name = pg["metadata"].get("namespace", ""), pg["metadata"]["name"]
                for ref in pg["metadata"].get("ownerReferences") or ():
                    per_job[(ns, ref["name"])].append(name)
                min_member = int((pg.get("spec") or {}).get("minMember") or 1)
                for (bns, bpg, version), n in bound.items():
                    key = (ns, name, version)
                    if (bns, bpg) != (ns, name) or key in self.whole:
                        continue
                    if n >= min_member:
                        self.whole.add(key)  # from now on pods leave (finish, RestartJob deletes): not a binding
                        continue
                    seen.add(key)
                    self.transient[ns] += 1
                    since, _, _ = self.streaks.get(key, (now, n, min_member))
                    self.streaks[key] = (since, n, min_member)
                    self.longest[ns] = max(self.longest[ns], now - since)
                    self.partials.setdefault(key, []).append((round(now, 2), n, min_member))
                    if now - since > HALF_BOUND_GRACE:
                        self.half_bound.append(f"{ns}/{name} version {version}: {n} of minMember {min_member} pods "
                                               f"bound for {now - since:.1f}s")
            for key in set(self.streaks) - seen:
                del self.streaks[key]
            self.two_groups += [f"{ns}/{job}: PodGroups {names}" for (ns, job), names in per_job.items()
                                if len(names) > 1]

    def report(self, ns: str) -> tuple[list[str], list[str], list[str]]:
        """(duplicated pod slots, half-bound gangs, jobs with two PodGroups) of namespace `ns`."""
        with self.lock:
            dups = [f"{job} version {v}: pod {name} had {len(uids)} pods" for (n, job, v, name), uids in
                    self.slots.items() if n == ns and len(uids) > 1]
            half = sorted({h for h in self.half_bound if h.startswith(ns + "/")})
            groups = sorted({g for g in self.two_groups if g.startswith(ns + "/")})
        return dups, half, groups


# -- the jobs --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    name: str
    tasks: dict[str, int]
    restarts: int = 0

    def pod_names(self) -> list[str]:
        return sorted(f"{self.name}-{t}-{i}" for t, n in self.tasks.items() for i in range(n))


def vcjob(e: Expect, duration: str) -> dict[str, Any]:
    policies = [{"event": "PodFailed", "action": "RestartJob"}] if e.restarts else None
    return simulated_job(e.name, tasks=e.tasks, duration=duration, policies=policies)


WAVE = [Expect("g1", {"w": 3}), Expect("g2", {"ps": 1, "w": 3}), Expect("g3", {"w": 2}),
        Expect("r", {"w": 2}, restarts=1)]
DURATIONS = {"g1": "3s", "g2": "3s", "g3": "4s", "r": "4s"}
FAILING_POD = "r-w-0"  # fails once (version 0): RestartJob, then version 1 completes


@dataclass
class Wave:
    up: Up
    ns: str
    expects: list[Expect]
    failed: threading.Event = field(default_factory=threading.Event)

    def pods(self) -> list[dict[str, Any]]:
        client = self.up.client()
        try:
            return client.list(client.registry.get("", "v1", "pods"), namespace=self.ns)["items"]
        finally:
            client.close()


def submit_wave(up: Up, fault: str) -> Wave:
    ns = f"{fault}-{uuid.uuid4().hex[:5]}"
    up.kubectl("create", "namespace", ns)
    docs = [vcjob(e, DURATIONS[e.name]) for e in WAVE]
    wave = Wave(up, ns, list(WAVE))
    threading.Thread(target=_fail_once, args=(wave,), name=f"fail-{ns}", daemon=True).start()
    up.kubectl("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump_all(docs))
    return wave


def _fail_once(wave: Wave, timeout: float = 90.0) -> None:
    """What a crashing container does, through the simulated kubelet: pod `r-w-0` of version 0 exits 1."""
    deadline = time.monotonic() + timeout
    client = None
    while time.monotonic() < deadline and not wave.failed.is_set():
        try:
            client = client or wave.up.client()
            pod_rt = client.registry.get("", "v1", "pods")
            pod = client.get(pod_rt, FAILING_POD, namespace=wave.ns)
            ann = pod["metadata"].get("annotations") or {}
            if ann.get(JOB_VERSION) == "0" and (pod.get("status") or {}).get("phase") in (None, "Pending", "Running"):
                client.patch(pod_rt, FAILING_POD, {"metadata": {"annotations": {SIM_EXIT_CODE: "1"}}},
                             namespace=wave.ns, patch_type="merge")
                wave.failed.set()
                break
        except Exception:  # noqa: BLE001 - not created yet, or devcluster restarting
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
            client = None
        time.sleep(0.05)
    if client is not None:
        client.close()


def check_wave(wave: Wave, observer: Observer) -> None:
    """Every job Completed with the expected restarts, exactly its pods at its final version, nothing duplicated,
    no gang half-bound."""
    up, ns = wave.up, wave.ns
    assert wave.failed.wait(30), f"{ns}/{FAILING_POD} was never made to fail"

    def phases() -> dict[str, str]:
        jobs = json.loads(up.kubectl("get", "vcjob", "-n", ns, "-o", "json").stdout)["items"]
        return {j["metadata"]["name"]: ((j.get("status") or {}).get("state") or {}).get("phase", "") for j in jobs}

    try:
        wait_for(f"every job in {ns} to be Completed",
                 lambda: (p := phases()) and all(p.get(e.name) == "Completed" for e in wave.expects) and p,
                 timeout=COMPLETE_TIMEOUT, interval=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{up.output()}") from None
    jobs = {j["metadata"]["name"]: j for j in
            json.loads(up.kubectl("get", "vcjob", "-n", ns, "-o", "json").stdout)["items"]}
    pods = wave.pods()
    for e in wave.expects:
        status = jobs[e.name]["status"]
        assert int(status.get("retryCount") or 0) == e.restarts, (e.name, status)
        version = str(int(status.get("version") or 0))
        if e.restarts:
            assert int(version) >= e.restarts, (e.name, status)
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_NAME) == e.name]
        assert sorted(p["metadata"]["name"] for p in mine) == e.pod_names(), (e.name, [p["metadata"]["name"]
                                                                                        for p in mine])
        assert {p["metadata"]["annotations"].get(JOB_VERSION) for p in mine} == {version}, e.name
        assert {(p.get("status") or {}).get("phase") for p in mine} == {"Succeeded"}, e.name
        assert all(p["spec"].get("nodeName") for p in mine), e.name
        assert int(status.get("succeeded") or 0) == sum(e.tasks.values()), (e.name, status)
    dups, half, groups = observer.report(ns)
    assert not dups, dups
    assert not half, half
    assert not groups, groups


def first_running(wave: Wave, n: int = 1) -> None:
    """Wait until `n` pods of the wave are Running: the fault lands mid-run."""
    wait_for(f"{n} running pods in {wave.ns}",
             lambda: sum((p.get("status") or {}).get("phase") == "Running" for p in wave.pods()) >= n, timeout=60)


# -- fixtures --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Up, Observer]]:
    import logging

    up = Up(tmp_path_factory.mktemp("faults"))
    observer = Observer(up)
    pool_log = logging.getLogger("urllib3.connectionpool")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)  # the observer's retries while devcluster restarts would drown a failure
    try:
        up.start()
        observer.start()
        yield up, observer
    finally:
        observer.close()
        up.kill_everything()
        pool_log.setLevel(level)


# -- the faults ------------------------------------------------------------------------------------------------------


def test_redis_crash_mid_run(stack: tuple[Up, Observer]) -> None:
    """The embedded redis-server SIGKILLed mid-run: the supervisor starts it again (same port, its append-only
    file), the processes reconnect, every job completes."""
    up, observer = stack
    wave = submit_wave(up, "redis")
    first_running(wave)
    old = up.read_info()["redis_pid"]
    os.killpg(old, signal.SIGKILL)
    info = wait_for("the supervisor to restart redis-server",
                    lambda: (i := up.read_info())["redis_pid"] not in (None, old) and _alive(i["redis_pid"]) and i,
                    timeout=30)
    assert "redis-server exited with" in up.output() and "redis-server restarted" in up.output()
    check_wave(wave, observer)
    assert up.read_info()["redis_pid"] == info["redis_pid"]  # came back once, stayed up


def test_worker_and_scheduler_sigkilled(stack: tuple[Up, Observer]) -> None:
    """The controller worker as it reconciles the new jobs, and the scheduler as it binds the first gang, both
    SIGKILLed (the process only: the supervisor ends what is left of its group and starts it again)."""
    up, observer = stack
    worker, scheduler = up.child_pid("worker"), up.child_pid("scheduler")
    wave = submit_wave(up, "kill")
    wait_for("a PodGroup in the wave", lambda: up.kubectl("get", "podgroup", "-n", wave.ns, "-o", "name").stdout,
             timeout=30, interval=0.05)
    os.kill(worker, signal.SIGKILL)
    wait_for("a bound pod in the wave", lambda: any(p["spec"].get("nodeName") for p in wave.pods()), timeout=60,
             interval=0.05)
    os.kill(scheduler, signal.SIGKILL)
    wait_for("the worker and the scheduler to be restarted",
             lambda: (c := up.read_info()["children"])["worker"] not in (None, worker)
             and c["scheduler"] not in (None, scheduler), timeout=30)
    for pgid in (worker, scheduler):  # the Celery pool children of the killed worker went with it
        wait_for(f"process group {pgid} to be gone", lambda pgid=pgid: not _group_alive(pgid), timeout=10)
    check_wave(wave, observer)


def test_webhook_down_with_failure_policy_fail(stack: tuple[Up, Observer]) -> None:
    """The webhook killed and kept down (every restart the supervisor tries is killed at once): `kubectl apply`
    of a job is refused with the API server's message and creates nothing (no Job, no PodGroup, no pod); the
    jobs already admitted wait (their pods cannot be created meanwhile) and complete once it is back."""
    up, observer = stack
    wave = submit_wave(up, "webhook")
    keep_down = threading.Event()
    killed: list[int] = []

    def keeper() -> None:
        while not keep_down.is_set():
            with contextlib.suppress(Exception):
                pid = up.read_info()["children"].get("webhook")
                if pid and pid not in killed and _alive(pid):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.02)

    thread = threading.Thread(target=keeper, name="webhook-keeper", daemon=True)
    thread.start()
    try:
        wait_for("the webhook to be killed", lambda: killed, timeout=10)
        late = Expect("late", {"w": 2})
        out = up.kubectl("apply", "-n", wave.ns, "-f", "-", stdin=yaml.safe_dump(vcjob(late, "2s")), check=False)
        assert out.returncode != 0, out.stdout
        assert 'Internal error occurred: failed calling webhook "mutatejob.volcano.sh"' in out.stderr, out.stderr
        assert "connect: connection refused" in out.stderr, out.stderr
        time.sleep(2.0)  # down for a while: admitted jobs' pod creations are refused meanwhile
        assert up.kubectl("get", "vcjob", "late", "-n", wave.ns, check=False).returncode != 0
        pgs = json.loads(up.kubectl("get", "podgroup", "-n", wave.ns, "-o", "json").stdout)["items"]
        assert not [pg for pg in pgs if any(r["name"] == "late" for r in pg["metadata"].get("ownerReferences") or ())]
        assert not [p for p in wave.pods() if (p["metadata"].get("labels") or {}).get(JOB_NAME) == "late"]
    finally:
        keep_down.set()
        thread.join(5)
    # the supervisor brings it back (after its backoff); then the same apply goes through
    created = wait_for("the apply to succeed once the webhook is back",
                       lambda: up.kubectl("apply", "-n", wave.ns, "-f", "-", stdin=yaml.safe_dump(vcjob(late, "2s")),
                                          check=False).stdout, timeout=60, interval=0.5)
    assert "job.batch.volcano.sh/late created" in created, created
    wave.expects.append(late)
    check_wave(wave, observer)


def test_devcluster_restarted(stack: tuple[Up, Observer]) -> None:
    """`lahar up` (devcluster runs in it) SIGKILLed mid-run and started again on the same data dir: the orphaned
    children of the first are ended, the jobs' state comes back from SQLite, every job completes."""
    up, observer = stack
    wave = submit_wave(up, "restart")
    first_running(wave, 2)
    assert wave.failed.wait(30)
    before = up.read_info()
    up.crash()
    info = up.start()
    assert info["pid"] != before["pid"]
    # the orphans were gone before anything started: the same Redis port (and data), the same webhook port
    assert (info["redis_port"], info["webhook_port"]) == (before["redis_port"], before["webhook_port"])
    for name, pid in before["children"].items():
        assert pid and not _alive(pid) or pid == info["children"].get(name), f"{name} of the first lahar up is alive"
    check_wave(wave, observer)


def test_scheduler_lease_lapses_soon_and_is_kept_while_held(redis_server: Any) -> None:
    """What makes the two faults above heal in seconds: the session lease of a scheduler that died holding it (or
    whose release was lost with Redis) lapses after `lease_ttl`, not a minute; a session longer than that renews it."""
    import redis

    from lahar.scheduler.tasks import RedisLease, lease_ttl

    assert lease_ttl(1.0) <= 10.0 and lease_ttl(4.0) == 20.0
    r = redis.Redis.from_url(redis_server.url)
    try:
        holder = RedisLease(r, key=f"lahar:test:{uuid.uuid4().hex}", ttl_seconds=0.6)
        other = RedisLease(r, key=holder.key, ttl_seconds=0.6)
        assert holder.acquire()
        with holder.kept():
            time.sleep(1.5)  # > 2 TTLs: renewed meanwhile
            assert not other.acquire()
        holder.token = ""  # died without releasing
        wait_for("the lease to lapse", other.acquire, timeout=5, interval=0.1)
        other.release()
    finally:
        r.close()
