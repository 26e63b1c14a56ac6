"""`lahar worker`'s supervisor for real: a real redis-server, the session devcluster, `lahar worker` as a subprocess
(which runs the Celery worker as its child), reconcile tasks sent by a plain Celery client.

A Celery child killed with SIGKILL is started again and reconciles afterwards; after a Redis restart a task is still
processed (by the worker, or by its restarted child); SIGTERM stops `lahar worker` with exit 0 and leaves no process.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_for

pytestmark = pytest.mark.integration

STARTED = re.compile(r"started the celery worker \(pid (\d+)\)")


class Worker:
    """`lahar worker -c 1` (supervised) with its output in a file."""

    def __init__(self, tmp: Path, redis_url: str, kubeconfig: Path) -> None:
        self.tmp = tmp
        self.redis_url = redis_url
        self.node = f"sup-{uuid.uuid4().hex[:6]}"
        self.log_path = tmp / "worker.log"
        env = dict(os.environ, REDIS_URL=redis_url, KUBECONFIG=str(kubeconfig), LAHAR_DATA_DIR=str(tmp / "state"),
                   LAHAR_LOG_LEVEL="INFO", PYTHONUNBUFFERED="1")
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "worker", "-c", "1",
                                          "--hostname", f"{self.node}@%h"], env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def children(self) -> list[int]:
        """Pids of the Celery children started so far, in order."""
        return [int(p) for p in STARTED.findall(self.log())]

    def wait_ready(self, times: int = 1) -> int:
        """The pid of the Celery child once the worker has said `ready.` `times` times in all."""
        ready = re.compile(rf"{self.node}@\S+ ready\.")
        wait_for(f"the worker to be ready ({times})", lambda: len(ready.findall(self.log())) >= times, timeout=60,
                 interval=0.1)
        return self.children()[-1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        for pid in self.children():  # whatever a failed test left behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def worker(tmp_path: Path, redis_server: Any, live_devcluster: Any) -> Iterator[Worker]:
    url = redis_server.url.rsplit("/", 1)[0] + "/6"  # a db of our own on the shared server
    w = Worker(tmp_path, url, live_devcluster.kubeconfig)
    try:
        yield w
    finally:
        w.stop()


def reconcile(redis_url: str, timeout: float = 60.0) -> dict[str, Any]:
    """Send one `lahar.reconcile` (a Job that does not exist) from a fresh Celery client; its result."""
    from celery import Celery

    client = Celery("test-client", broker=redis_url, backend=redis_url)
    client.conf.update(broker_connection_retry_on_startup=True, task_serializer="json", accept_content=["json"],
                       result_serializer="json")
    try:
        result = client.send_task("lahar.reconcile", args=("Job", f"t-{uuid.uuid4().hex[:6]}", "absent"),
                                  queue="reconcile")
        return result.get(timeout=timeout)
    finally:
        client.close()


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (from /proc; zombies are not alive)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            out.append(int(entry.name))
    return out


def test_a_killed_celery_child_is_restarted_and_reconciles(worker: Worker) -> None:
    first = worker.wait_ready()
    assert reconcile(worker.redis_url)["outcome"] == "ok"
    os.kill(first, signal.SIGKILL)
    second = worker.wait_ready(times=2)
    assert second != first
    assert re.search(rf"the celery worker \(pid {first}\) exited with signal SIGKILL after [\d.]+s; restarting it in "
                     r"1\.0s \(restart 1\)", worker.log())
    assert not group_members(first)  # its pool process went with it
    assert reconcile(worker.redis_url)["outcome"] == "ok"
    assert worker.proc.poll() is None


def test_a_redis_restart_leaves_a_worker_that_processes_tasks(worker: Worker, redis_server: Any) -> None:
    worker.wait_ready()
    assert reconcile(worker.redis_url)["outcome"] == "ok"
    redis_server.restart()
    assert reconcile(worker.redis_url)["outcome"] == "ok"  # by the worker, or by its restarted child
    assert worker.proc.poll() is None


def test_sigterm_stops_lahar_worker_with_exit_0_and_no_child_left(worker: Worker) -> None:
    child = worker.wait_ready()
    members = group_members(child)
    assert child in members and len(members) >= 2  # the Celery worker and its pool process
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(40) == 0
    assert not group_members(child)
    assert "stopping the celery worker" in worker.log() and "restarting" not in worker.log()
