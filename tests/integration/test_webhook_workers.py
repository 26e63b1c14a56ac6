"""`lahar webhook --workers 2` over real HTTPS: while one review is stuck (holding the GIL, or sleeping), the other
worker answers reviews and /healthz, and the supervisor's watchdog kills the stuck worker past --review-timeout and
starts another (the stuck review's connection is cut: the API server answers it with the webhook's failurePolicy)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from lahar.certs import authority
from tests.builders import admission_review
from tests.integration import webhook_faults
from tests.integration.test_webhook_https import context, job, serving_pair
from tests.support import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
QUEUES = "".join(f"---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\n"
                 "spec: {weight: 1}\nstatus: {state: Open}\n"
                 for name in ("team", webhook_faults.GIL_QUEUE, webhook_faults.SLEEP_QUEUE))
BOUND = 5.0   # seconds any answer may take while the other worker is stuck (a liveness bound, not a benchmark)


@pytest.fixture
def workers(tmp_path):
    ca = authority.new_ca("lahar-test-ca", 1)
    authority.write(serving_pair(ca), tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "state.yaml").write_text(QUEUES)
    port = free_port()
    log = (tmp_path / "webhook.log").open("w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(port),
         "--cert", str(tmp_path / "tls.crt"), "--key", str(tmp_path / "tls.key"),
         "--state", str(tmp_path / "state.yaml"), "--workers", "2", "--review-timeout", "2",
         "--app-factory", "tests.integration.webhook_faults:stalling_app"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=url, verify=context(ca), timeout=5) as c:
            while True:
                assert proc.poll() is None, _read(log)
                try:
                    if c.get("/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "lahar webhook --workers 2 did not become ready"
                time.sleep(0.1)
        yield url, ca, proc, log, tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _read(log) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")


def _stuck_review(url: str, ca, queue: str, outcome: list) -> None:
    try:
        with httpx.Client(base_url=url, verify=context(ca), timeout=30) as c:
            outcome.append(c.post("/jobs/validate", json=admission_review(job("stuck", queue=queue))))
    except httpx.HTTPError as e:
        outcome.append(e)


@pytest.mark.parametrize("queue", [webhook_faults.GIL_QUEUE, webhook_faults.SLEEP_QUEUE], ids=["gil-held", "sleeping"])
def test_one_stuck_review_does_not_stall_the_others_and_its_worker_is_replaced(workers, queue):
    url, ca, proc, log, _ = workers
    outcome: list = []
    stuck = threading.Thread(target=_stuck_review, args=(url, ca, queue, outcome), daemon=True)
    started = time.monotonic()
    stuck.start()
    time.sleep(0.5)                      # the stuck review has reached its worker
    answered = 0
    while stuck.is_alive() and time.monotonic() - started < 20:
        # fresh connections: the kernel hands them to the worker that is accepting
        with httpx.Client(base_url=url, verify=context(ca), timeout=BOUND) as c:
            assert c.get("/healthz").text == "ok"
            out = c.post("/jobs/validate", json=admission_review(job("other", queue="team"))).json()["response"]
            assert out["allowed"] is True, out
            answered += 1
        time.sleep(0.1)
    stuck.join(1)
    assert not stuck.is_alive(), "the stuck review was never cut off"
    assert answered >= 3, answered
    # the watchdog cut the connection (no answer), after the 2 s limit and well before the client's 30 s
    assert outcome and isinstance(outcome[0], httpx.HTTPError), outcome
    assert "killed, starting another" in _read(log)
    # both workers serve again: a burst of fresh connections all answered
    with httpx.Client(base_url=url, verify=context(ca), timeout=BOUND) as c:
        deadline = time.monotonic() + 30
        while True:
            try:
                ok = all(c.get("/healthz", headers={"connection": "close"}).status_code == 200 for _ in range(10))
            except httpx.HTTPError:
                ok = False
            if ok:
                break
            assert time.monotonic() < deadline, _read(log)
            time.sleep(0.2)
    assert proc.poll() is None


def test_every_worker_reloads_a_renewed_certificate_and_the_supervisor_stops_cleanly(workers):
    url, old_ca, proc, log, tmp = workers
    new_ca = authority.new_ca("lahar-test-ca-2", 1)
    authority.write(serving_pair(new_ca), tmp / "tls.crt", tmp / "tls.key")
    deadline = time.monotonic() + 30
    while True:
        # fresh connections reach both workers: all of them must present the renewed certificate
        try:
            with httpx.Client(base_url=url, verify=context(new_ca), timeout=BOUND) as c:
                ok = all(c.get("/healthz", headers={"connection": "close"}).status_code == 200 for _ in range(12))
        except httpx.HTTPError:
            ok = False
        if ok:
            break
        assert time.monotonic() < deadline, "not every worker took the renewed certificate"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0, _read(log)
    assert "Traceback" not in _read(log), _read(log)


def test_every_scrape_counts_the_reviews_of_every_worker(workers):
    url, ca, proc, log, _ = workers
    for i in range(20):
        with httpx.Client(base_url=url, verify=context(ca), timeout=BOUND) as c:   # fresh: spread over the workers
            assert c.post("/jobs/validate", json=admission_review(job(f"j{i}", queue="team"))).status_code == 200
    series = 'lahar_admission_requests_total{path="/jobs/validate",verdict="allowed"} '
    deadline = time.monotonic() + 15
    while True:
        counts = []
        for _ in range(6):
            with httpx.Client(base_url=url, verify=context(ca), timeout=BOUND) as c:
                text = c.get("/metrics").text
            counts.append(next((int(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                if line.startswith(series)), 0))
        if counts == [20] * 6:
            break
        assert time.monotonic() < deadline, counts
        time.sleep(0.5)
