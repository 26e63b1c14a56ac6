"""`lahar worker --metrics-port` for real: a prefork worker (two pool processes) on a real redis-server and the
devcluster reconciles Jobs sent through the broker, and its /metrics adds up every pool process's reconciles."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, install_crds, wait_for

pytestmark = pytest.mark.timeout(180)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def _value(text: str, series: str) -> float:
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.fixture
def worker(tmp_path: Path, redis_server: Any, live_devcluster: Any) -> Any:
    from lahar.kube import errors, kubeconfig
    from lahar.kube.rest import RestClient

    client = RestClient(kubeconfig.load(str(live_devcluster.kubeconfig)))
    with contextlib.suppress(errors.ApiError):
        install_crds(client, "batch.volcano.sh_jobs.yaml", "scheduling.volcano.sh_podgroups.yaml")
    port = free_port()
    mp_dir = tmp_path / "mp"
    mp_dir.mkdir()
    env = {**os.environ, "REDIS_URL": redis_server.url, "KUBECONFIG": str(live_devcluster.kubeconfig),
           "PROMETHEUS_MULTIPROC_DIR": str(mp_dir)}
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "worker", "--no-supervise", "-c", "2", "-P",
                             "prefork", "--hostname", f"m{uuid.uuid4().hex[:6]}@%h", "--metrics-port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("the worker's /metrics", lambda: _scrape(port) is not None, 60)
        yield port, mp_dir, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
        client.close()


def test_worker_metrics_sum_the_pool_after_reconciles(worker: Any, redis_server: Any) -> None:
    import redis as redis_lib
    from celery import Celery

    port, mp_dir, _ = worker
    ns = f"m{uuid.uuid4().hex[:6]}"
    r = redis_lib.Redis.from_url(redis_server.url)
    r.set(f"lahar:lock:Job/{ns}/held", "someone-else", px=60_000)  # another worker holds this key
    sender = Celery(broker=redis_server.url)
    before = _scrape(port)
    n = 6
    for i in range(n):  # Jobs that do not exist: each reconcile reads, finds nothing, succeeds
        sender.send_task("lahar.reconcile", args=("Job", ns, f"gone-{i}"), queue="reconcile")
    sender.send_task("lahar.reconcile", args=("Job", ns, "held"), queue="reconcile")
    ok = 'lahar_reconcile_total{kind="Job",result="success"}'
    base = _value(before, ok)

    def settled() -> str | None:
        t = _scrape(port)
        done = _value(t, ok) >= base + n and _value(t, 'lahar_reconcile_lock_waits_total{kind="Job"}') >= 1
        return t if done else None

    text = wait_for("six reconciles and a lock wait on /metrics", settled, 90)
    assert _value(text, 'lahar_reconcile_duration_seconds_count{kind="Job"}') >= base + n
    assert "# TYPE lahar_reconcile_duration_seconds histogram" in text
    pids = {p.name.rsplit("_", 1)[1] for p in mp_dir.glob("counter_*.db")}
    print(f"pool processes that wrote counters: {len(pids)}")
    r.delete(f"lahar:lock:Job/{ns}/held")
    sender.close()
