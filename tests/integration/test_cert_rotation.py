"""Certificates rotate under load with zero failed reviews: real uvicorn HTTPS, real TLS clients, real files.

A uvicorn server answers AdmissionReviews over HTTPS with a `certs.rotation.CertReloader` on its SSLContext. Client
threads keep it busy — fresh connections (a TLS handshake per request), keep-alive connections, and slow requests in
flight across the swaps — trusting whatever `caBundle` the webhook configurations hold, as kube-apiserver does.
Meanwhile `certs.bundles.ensure` (against the in-memory cluster, with a clock moved forward) renews the serving
certificate several times, then rolls the CA, then renews again. Every request must succeed, and every new
certificate must be seen by new handshakes.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import http.client
import json
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography.hazmat.primitives.serialization import Encoding

from lahar.certs import authority, bundles, rotation
from lahar.certs.bundles import Action
from lahar.kube.apiserver.memory import MemoryClient

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOSTS = authority.serving_hosts("lahar-webhook", "lahar-system")
DAY = dt.timedelta(days=1)
# (days after the first issue, what ensure must do): serving certificates live 9 days (renewal due after 6), the
# first CA 60 days (roll due after 40); certificates are issued at the real present, only the decisions' clock moves
STEPS = [(7, Action.RENEW_SERVING), (14, Action.RENEW_SERVING), (21, Action.RENEW_SERVING), (41, Action.ROLL_CA),
         (48, Action.RENEW_SERVING), (55, Action.RENEW_SERVING)]


async def admission_app(scope: dict, receive: Any, send: Any) -> None:
    """A trivial ASGI webhook: allowed, echoing the uid; `/slow` sleeps first (a request in flight across a swap)."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(0.15)
    uid = json.loads(body)["request"]["uid"]
    answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": uid, "allowed": True}}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})


@dataclass
class Stats:
    ok: Counter = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)
    seen_certs: set[str] = field(default_factory=set)     # sha256 of the serving certificates new handshakes got
    lock: threading.Lock = field(default_factory=threading.Lock)


class TrustFromCluster:
    """The client's trust, read from the webhook configuration's caBundle the way kube-apiserver does."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client
        self.rt = next(rt for rt in client.registry if rt.kind == "ValidatingWebhookConfiguration")
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def context(self) -> ssl.SSLContext:
        config = self.client.get(self.rt, "lahar-validating-webhooks")
        bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
        with self._lock:
            ctx = self._contexts.get(bundle)
            if ctx is None:
                ctx = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
                self._contexts[bundle] = ctx
            return ctx


def _review(n: int) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": f"u{n}", "operation": "CREATE", "object": {"kind": "Pod"}}}).encode()


def _post(conn: http.client.HTTPSConnection, path: str, n: int) -> None:
    conn.request("POST", path, body=_review(n), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200 or json.loads(data)["response"] != {"uid": f"u{n}", "allowed": True}:
        raise AssertionError(f"HTTP {resp.status}: {data[:200]!r}")


def _cert_digest(conn: http.client.HTTPSConnection) -> str:
    return hashlib.sha256(conn.sock.getpeercert(binary_form=True)).hexdigest()


def client_loop(kind: str, port: int, trust: TrustFromCluster, stats: Stats, stop: threading.Event) -> None:
    n = 0
    conn: http.client.HTTPSConnection | None = None
    while not stop.is_set():
        n += 1
        try:
            if kind == "fresh" or conn is None:
                if conn is not None:
                    conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=trust.context(), timeout=10)
                conn.connect()
                with stats.lock:
                    stats.seen_certs.add(_cert_digest(conn))
            _post(conn, "/slow" if kind == "slow" else "/jobs/validate", n)
            with stats.lock:
                stats.ok[kind] += 1
        except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
            with stats.lock:
                stats.failed.append(f"{kind}: {type(exc).__name__}: {exc}")
            if conn is not None:
                conn.close()
            conn = None
    if conn is not None:
        conn.close()


@pytest.fixture
def cluster_and_certs(tmp_path: Path) -> tuple[MemoryClient, Path, bundles.EnsureResult]:
    client = MemoryClient()
    out = tmp_path / "certs"
    first = bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=HOSTS,
                           templates=bundles.load_templates(ROOT / "deploy" / "webhooks"),
                           url="https://127.0.0.1:1", out_dir=out, days=9, ca_days=60)
    return client, out, first


def test_rotation_under_load_drops_nothing(cluster_and_certs: tuple[MemoryClient, Path, bundles.EnsureResult],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    client, out, first = cluster_and_certs
    config = uvicorn.Config(admission_app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                            ssl_certfile=str(out / "tls.crt"), ssl_keyfile=str(out / "tls.key"),
                            timeout_graceful_shutdown=2)
    config.load()
    reloader = rotation.CertReloader(config.ssl, out / "tls.crt", out / "tls.key", interval=0.02).start()
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="rotation-webhook", daemon=True)
    thread.start()
    stats, stop = Stats(), threading.Event()
    clients: list[threading.Thread] = []
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.started, "webhook server did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        trust = TrustFromCluster(client)
        for kind in ("fresh", "fresh", "keepalive", "slow"):
            t = threading.Thread(target=client_loop, args=(kind, port, trust, stats, stop), daemon=True)
            t.start()
            clients.append(t)

        def served(material: bundles.Material) -> None:
            digest = hashlib.sha256(material.serving.certificate.public_bytes(Encoding.DER)).hexdigest()
            wait_until = time.monotonic() + 20
            while time.monotonic() < wait_until:
                with stats.lock:
                    if digest in stats.seen_certs and sum(stats.ok.values()) > 0:
                        return
                time.sleep(0.01)
            raise AssertionError("new handshakes never got the renewed certificate")

        served(first.material)
        start = first.material.serving.certificate.not_valid_before_utc
        actions, cas = [], {first.material.ca.cert_pem}
        for offset, _ in STEPS:
            now = start + offset * DAY
            before = reloader.reloads
            result = bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs",
                                    hosts=HOSTS, templates=bundles.load_templates(ROOT / "deploy" / "webhooks"),
                                    url="https://127.0.0.1:1", out_dir=out, days=9, ca_days=3650, now=now)
            actions.append(result.plan.action)
            cas.add(result.material.ca.cert_pem)
            served(result.material)
            assert reloader.reloads > before
            time.sleep(0.25)  # let load run on the new certificate for a moment
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=20)
        server.should_exit = True
        thread.join(timeout=20)
        reloader.stop()

    assert actions == [action for _, action in STEPS]
    assert len(cas) == 2
    total = sum(stats.ok.values())
    with capsys.disabled():
        print(f"\ncert rotation under load: {len(STEPS)} swaps ({', '.join(a for _, a in STEPS)}), "
              f"{total} requests ok {dict(stats.ok)}, "
              f"{len(stats.failed)} failed, {len(stats.seen_certs)} serving certificates seen by new handshakes, "
              f"reloads={reloader.reloads} skipped-half-written={reloader.failures}")
    assert stats.failed == []
    assert len(stats.seen_certs) == len(STEPS) + 1
    assert all(stats.ok[kind] > 0 for kind in ("fresh", "keepalive", "slow"))
    assert not any(t.is_alive() for t in clients) and not thread.is_alive()
