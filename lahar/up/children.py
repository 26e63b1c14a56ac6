"""`lahar up`'s child-process shell: which processes it supervises (`child_specs`, pure), `Child` (one subprocess
in its own process group, restarted with backoff), `stop_children`, `free_port`, and the cleanup of children an
earlier, killed `lahar up` left behind (`stale_cleanup`).

Part of `lahar.up`; uses `status.ProcessRow` for the rows it reports.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lahar.supervisor import kill_group, next_failures, restart_delay
from lahar.up.status import ProcessRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: tuple[str, ...]


def child_specs(*, python: str, webhook_port: int, certs_dir: Path, flower_port: int, workers: int = 1,
                concurrency: int = 2, dashboard_port: int | None = None,
                dashboard_token_file: Path | None = None) -> list[ChildSpec]:
    """The processes of ARCHITECTURE.md's table that `lahar up` supervises, webhook first; the dashboard last, when
    it has a port."""
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
    if dashboard_port:
        token = ("--token-file", str(dashboard_token_file)) if dashboard_token_file else ()
        specs.append(ChildSpec("dashboard", (*lahar, "dashboard", "--host", "127.0.0.1", "--port", str(dashboard_port),
                                             *token, "--webhook-metrics", f"https://127.0.0.1:{webhook_port}/metrics",
                                             "--webhook-ca", str(certs_dir / "ca.crt"))))
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


def stale_cleanup(ready_file: Path) -> None:
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
