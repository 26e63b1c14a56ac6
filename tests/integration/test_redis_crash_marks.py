"""A Redis crash (SIGKILL, append-only file kept) while a 32-pod job's pods are being created: the job still reaches
Completed within one resync period of its pods finishing (issue 18 item 5).

The de-duplication marks `lahar:pending:*` survive in the append-only file while messages in flight are lost (a
claim whose send failed, unacknowledged deliveries that cannot be restored); before the resync repaired such marks
they suppressed every event of their key until their TTL (60 s) ran out. The stack is the one of
test_controllers_celery (devcluster, a real Celery worker, dispatch, beat) on a redis-server of its own with
`appendonly yes`, killed with SIGKILL and started again on the same port and directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.builders import simulated_job
from tests.integration.test_controllers_celery import CRDS, FakeScheduler, Stack, submit
from tests.support import wait_for

pytestmark = pytest.mark.integration

RESYNC = 5.0       # LAHAR_RESYNC_INTERVAL of this stack
PENDING_TTL = 60.0  # the default: a stale mark would block its key this long
SLACK = 8.0        # a reconcile, the dispatcher's reconnect and the poll interval on top of one resync period


@dataclass
class AofRedis:
    """A redis-server with an append-only file (fsync on every write) that can be crashed and started again."""

    port: int
    data_dir: Path
    proc: Any = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> AofRedis:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--dir", str(self.data_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis-server to listen", self._listening, timeout=20, interval=0.05)
        return self

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def crash_and_restart(self, down: float = 1.0) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        time.sleep(down)
        self.start()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, AofRedis]]:
    import shutil

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    tmp = tmp_path_factory.mktemp("redis-crash")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    redis = AofRedis(port, tmp / "redis")
    redis.data_dir.mkdir()
    redis.start()
    st = Stack(tmp / "stack", redis) if (tmp / "stack").mkdir() is None else None
    assert st is not None
    # the defaults of a deployment for the mark's TTL and the broker's visibility timeout (what Celery dropped at the
    # crash comes back only after it); a short resync so the test is quick
    st.env.update(LAHAR_RESYNC_INTERVAL=str(RESYNC), LAHAR_PENDING_TTL=str(PENDING_TTL),
                  LAHAR_VISIBILITY_TIMEOUT="300")
    try:
        st.start_worker("worker")
        st.start("dispatch", "dispatch")
        st.start("beat", "beat")
        with FakeScheduler(st.client, st.cluster.node_names):
            yield st, redis
    finally:
        st.close()
        redis.stop()


def _phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def test_redis_sigkilled_while_pods_are_created_the_job_completes_within_a_resync(stack) -> None:
    st, redis = stack
    ns = st.namespace()
    submit(st, ns, simulated_job("j", tasks={"w": 32}, duration="3s"))
    wait_for("the first pods", lambda: 0 < len(st.pods(ns)) < 32 or None, timeout=120, interval=0.02)
    worker = st.procs["worker"].pid
    os.killpg(worker, signal.SIGSTOP)  # the worker holds what it reserved (prefetched) when the crash comes
    try:
        time.sleep(0.5)
        redis.crash_and_restart()
    finally:
        os.killpg(worker, signal.SIGCONT)

    def all_succeeded() -> bool:
        pods = st.pods(ns)
        return len(pods) == 32 and all(_phase(p) == "Succeeded" for p in pods)

    wait_for("all 32 pods to succeed", all_succeeded, timeout=240, interval=0.2)
    finished = time.monotonic()
    wait_for("the job to be Completed", lambda: st.phase(ns, "j") == "Completed", timeout=PENDING_TTL + 30,
             interval=0.2)
    took = time.monotonic() - finished
    assert took <= RESYNC + SLACK, f"Completed {took:.1f}s after its pods finished (resync every {RESYNC:.0f}s)"
    assert st.job(ns, "j")["status"]["succeeded"] == 32
