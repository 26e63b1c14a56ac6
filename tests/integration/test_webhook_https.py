"""The admission app over real HTTPS: uvicorn (`webhooks.server`) with a certificate from `certs.authority`, an httpx
client verifying the CA; certificate rotation under load with zero failed reviews; `lahar webhook` as a process."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from lahar.certs import authority
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups
from lahar.webhooks.server import WebhookServer
from tests.builders import admission_review, pod_template, vcjob
from tests.support import free_port as _free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def admission_config():
    from lahar.commands.webhook import admission_config as config

    return config()


def serving_pair(ca: authority.KeyPair) -> authority.KeyPair:
    return authority.issue(ca, common_name="127.0.0.1", hosts=["127.0.0.1", "localhost"], days=1)


def context(*cas: authority.KeyPair) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    for ca in cas:
        ctx.load_verify_locations(cadata=ca.cert_pem.decode())
    return ctx


def vgpu_pod(name: str = "p1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"volcano.sh/vgpu-memory": "1024"}}}]}}


def job(name: str = "j1", queue: str | None = None) -> dict:
    j = vcjob(name).task("t", 1, template=pod_template(restart_policy="OnFailure"))
    return (j.queue(queue) if queue else j).build()


def ops(resp: httpx.Response) -> list[dict]:
    out = resp.json()["response"]
    return json.loads(base64.b64decode(out["patch"])) if "patch" in out else []


@pytest.fixture
def certs_dir(tmp_path):
    ca = authority.new_ca("lahar-test-ca", 1)
    authority.write(serving_pair(ca), tmp_path / "tls.crt", tmp_path / "tls.key")
    return tmp_path, ca


@pytest.fixture
def server(certs_dir):
    tmp, ca = certs_dir
    app = create_app(lookups=StaticLookups(), config=admission_config())
    srv = WebhookServer(app, host="127.0.0.1", port=0, certfile=tmp / "tls.crt", keyfile=tmp / "tls.key",
                        reload_interval=0.05, graceful_timeout=2).start()
    try:
        yield srv, ca, tmp
    finally:
        srv.stop()


def test_reviews_over_https_with_the_real_rules(server):
    srv, ca, _ = server
    base = f"https://127.0.0.1:{srv.port}"
    with httpx.Client(base_url=base, verify=context(ca), timeout=10) as c:
        assert c.get("/healthz").text == "ok"
        assert c.get("/readyz").status_code == 200
        pod = c.post("/pods/mutate", json=admission_review(vgpu_pod()))
        assert pod.status_code == 200 and pod.json()["response"]["allowed"] is True
        assert {"op": "add", "path": "/spec/containers/0/resources/limits/volcano.sh~1vgpu-number",
                "value": "1"} in ops(pod)
        mutated = c.post("/jobs/mutate", json=admission_review(job()))
        assert {"op": "add", "path": "/spec/queue", "value": "default"} in ops(mutated)
        denied = c.post("/jobs/validate", json=admission_review(job(queue="root")))
        assert denied.json()["response"]["allowed"] is False
        assert "root queue" in denied.json()["response"]["status"]["message"]
        assert c.post("/jobs/validate", content=b"{").status_code == 400
        assert c.post("/nope", json=admission_review(job())).status_code == 404
        metrics = c.get("/metrics").text
        assert 'lahar_admission_requests_total{path="/jobs/validate",verdict="denied"} 1' in metrics


def test_a_client_not_trusting_the_ca_is_refused(server):
    srv, _, _ = server
    with httpx.Client(verify=context(authority.new_ca("someone-else", 1)), timeout=5) as c, \
            pytest.raises(httpx.ConnectError):
        c.get(f"https://127.0.0.1:{srv.port}/healthz")


def test_certificate_rotation_under_load_fails_no_review(server):
    srv, old_ca, tmp = server
    assert srv.reloader is not None, "certs.rotation hot reload is wired"
    new_ca = authority.new_ca("lahar-rotated-ca", 1)
    body = admission_review(vgpu_pod())
    url = f"https://127.0.0.1:{srv.port}/pods/mutate"
    failures: list[str] = []
    done = 0
    stop = threading.Event()

    def load(fresh_connections: bool) -> None:
        nonlocal done
        both = context(old_ca, new_ca)  # a caBundle holding both CAs, as `lahar certs ensure` publishes it
        client = httpx.Client(verify=both, timeout=10)
        try:
            while not stop.is_set():
                if fresh_connections:
                    client.close()
                    client = httpx.Client(verify=both, timeout=10)
                try:
                    resp = client.post(url, json=body)
                    if resp.status_code != 200 or resp.json()["response"]["allowed"] is not True:
                        failures.append(f"{resp.status_code} {resp.text[:200]}")
                except httpx.HTTPError as e:
                    failures.append(repr(e))
                done += 1
        finally:
            client.close()

    threads = [threading.Thread(target=load, args=(fresh,)) for fresh in (False, True, True)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        authority.write(serving_pair(new_ca), tmp / "tls.crt", tmp / "tls.key")
        deadline = time.monotonic() + 10
        while srv.reloader.reloads < 1:
            assert time.monotonic() < deadline, f"certificate not reloaded: {srv.reloader.last_error}"
            time.sleep(0.02)
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert failures == []
    assert done > 0
    # new handshakes present the renewed certificate: a client trusting only the new CA gets in, old-only does not
    with httpx.Client(verify=context(new_ca), timeout=5) as c:
        assert c.post(url, json=body).json()["response"]["allowed"] is True
    with httpx.Client(verify=context(old_ca), timeout=5) as c, pytest.raises(httpx.ConnectError):
        c.post(url, json=body)


def test_lahar_webhook_command_serves_and_stops(certs_dir):
    tmp, ca = certs_dir
    state = tmp / "state.yaml"
    state.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: team}\n"
                     "spec: {weight: 1}\nstatus: {state: Open}\n")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(port),
         "--cert", str(tmp / "tls.crt"), "--key", str(tmp / "tls.key"), "--state", str(state)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=context(ca), timeout=5) as c:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, proc.stdout.read().decode()
                try:
                    if c.get("/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "lahar webhook did not become ready"
                time.sleep(0.1)
            out = c.post("/jobs/validate", json=admission_review(job(queue="team"))).json()["response"]
            assert out["allowed"] is True, out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        output = proc.stdout.read().decode()
        proc.stdout.close()
    assert rc in (0, -signal.SIGTERM), output
    assert "Traceback" not in output, output
