"""`lahar up` as a user runs it: one command in its own process, the real kubectl, Ctrl-C, and a second start.

The whole stack for real — devcluster, an embedded redis-server, the webhook, dispatch, a worker, the scheduler,
beat and Flower as subprocesses: a Volcano Job applied with kubectl is admitted, gets its PodGroup, is placed, runs
on the simulated nodes and completes; SIGINT leaves no process behind; a second `lahar up` on the same data dir
finds the job (devcluster's SQLite) and what was in Redis (its append-only file).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port as _free_port
from tests.support import wait_for as _wait

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH"),
]


def _group_alive(pgid: int, settle: float = 5.0) -> bool:
    """Whether any process of the group is left (after `settle` seconds for init to reap what was killed)."""
    deadline = time.monotonic() + settle
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


class Up:
    """`lahar up --plain` in a subprocess on `data_dir`."""

    def __init__(self, data_dir: Path, args: tuple[str, ...] = ("--nodes", "4")) -> None:
        self.data_dir = data_dir
        self.args = args  # the cluster: `--nodes`, `--profile`
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.log = data_dir.parent / "up.out"

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def start(self) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG")}
        env.update(PYTHONUNBUFFERED="1", LAHAR_FLOWER_PORT=str(_free_port()), LAHAR_DASHBOARD_PORT=str(_free_port()))
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "up", "--data-dir", str(self.data_dir),
                                          "--port", str(self.port), *self.args, "--plain"],
                                         cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

        def ready() -> dict[str, Any] | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"lahar up exited with {self.proc.returncode}:\n{self.output()}")
            info = json.loads((self.data_dir / "up.json").read_text())
            return info if info.get("ready") and info.get("pid") == self.proc.pid else None

        try:
            self.info = _wait("lahar up to be ready", ready, timeout=90)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.output()}") from None
        return self.info

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def interrupt(self) -> int:
        """SIGINT (Ctrl-C); the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        finally:
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in [*(self.info.get("children") or {}).values(), self.info.get("redis_pid")]:
            if pid and _group_alive(pid, settle=0):
                os.killpg(pid, signal.SIGKILL)

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        out = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}\n{self.output()}")
        return out

    def jsonpath(self, kind: str, name: str, path: str) -> str:
        return self.kubectl("get", kind, name, "-o", f"jsonpath={path}").stdout.strip()


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    u = Up(tmp_path / "lahar")
    try:
        yield u
    finally:
        u.kill()


def test_a_job_completes_and_everything_survives_a_restart(up: Up) -> None:
    import redis

    info = up.start()
    children = dict(info["children"])
    assert set(children) == {"webhook", "dispatch", "worker", "scheduler", "beat", "flower", "dashboard"}
    assert "kubectl --kubeconfig" in up.output() and info["flower"] in up.output()
    assert info["dashboard"] in up.output()  # the URL with its token, next to Flower's

    # builtin queues are Open; the example queues become Open through the queue reconciler
    assert up.jsonpath("queue", "default", "{.status.state}") == "Open"
    up.kubectl("apply", "-f", str(EXAMPLES / "queues.yaml"))
    _wait("queue research to be Open", lambda: up.jsonpath("queue", "research", "{.status.state}") == "Open", 30)
    up.kubectl("apply", "-f", str(EXAMPLES / "job.yaml"))

    # admitted (the mutating webhook filled defaults), PodGroup from the job reconciler, placed, run, completed
    assert up.jsonpath("vcjob", "train-small", "{.spec.tasks[0].minAvailable}") == "4"
    _wait("train-small to be Completed",
          lambda: up.jsonpath("vcjob", "train-small", "{.status.state.phase}") == "Completed", 60)
    pods = json.loads(up.kubectl("get", "pods", "-o", "json").stdout)["items"]
    mine = [p for p in pods if p["metadata"]["name"].startswith("train-small-")]
    assert len(mine) == 4 and all(p["spec"].get("nodeName") for p in mine)
    assert {p["status"]["phase"] for p in mine} == {"Succeeded"}

    marker = f"e2e-{time.time_ns()}"
    r = redis.Redis.from_url(info["redis_url"])
    r.set("lahar:e2e:marker", marker)
    r.close()

    # Ctrl-C: a clean exit, and no process of any child's group (Celery pool children included) or Redis left
    assert up.interrupt() == 0, up.output()
    for name, pid in [*children.items(), ("redis", info["redis_pid"])]:
        assert not _group_alive(pid), f"{name} (process group {pid}) survived Ctrl-C"
    stopped = json.loads((up.data_dir / "up.json").read_text())
    assert stopped["ready"] is False and stopped["stopped"] is True

    # a second start resumes the same state
    info2 = up.start()
    assert up.jsonpath("vcjob", "train-small", "{.status.state.phase}") == "Completed"
    assert up.jsonpath("queue", "research", "{.status.state}") == "Open"
    r = redis.Redis.from_url(info2["redis_url"])
    try:
        assert r.get("lahar:e2e:marker") == marker.encode()
    finally:
        r.close()
    assert up.interrupt() == 0, up.output()
    for pid in [*info2["children"].values(), info2["redis_pid"]]:
        assert not _group_alive(pid)
