"""The webhook's uvicorn under slow clients: half-sent requests are cut off within the header deadline, a stalled
body gets a 408, and the server still answers (hardening issue, item 9)."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lahar.certs import authority, serving
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups
from lahar.webhooks.server import WebhookServer

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[WebhookServer, ssl.SSLContext]]:
    ca = authority.new_ca("test-ca")
    authority.write(authority.issue(ca, common_name="webhook", hosts=["localhost", "127.0.0.1"]),
                    tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    limits = serving.Limits(header_timeout=1.0, body_timeout=0.5, max_connections=1000, max_header_bytes=64 << 10)
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    srv = WebhookServer(app, host="127.0.0.1", port=0, certfile=tmp_path / "tls.crt", keyfile=tmp_path / "tls.key",
                        reload_interval=None, graceful_timeout=1, limits=limits).start()
    try:
        yield srv, ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    finally:
        srv.stop()


def _connect(port: int, tls: ssl.SSLContext, head: bytes) -> ssl.SSLSocket:
    s = tls.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
    s.sendall(head)
    return s


def _closed(s: ssl.SSLSocket, deadline: float) -> bool:
    s.settimeout(max(deadline - time.monotonic(), 0.05))
    try:
        while s.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except (OSError, ssl.SSLError):
        return True
    finally:
        s.close()


def test_half_sent_requests_are_cut_off(server: Any) -> None:
    srv, tls = server
    socks = [_connect(srv.port, tls, b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-") for _ in range(300)]
    deadline = time.monotonic() + 15
    assert sum(_closed(s, deadline) for s in socks) == 300
    assert httpx.get(f"https://127.0.0.1:{srv.port}/healthz", verify=tls, timeout=10).status_code == 200


def test_stalled_body_gets_a_408(server: Any) -> None:
    srv, tls = server
    s = _connect(srv.port, tls, b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
                                b"content-type: application/json\r\n\r\n{\"kind\":")
    s.settimeout(10)
    answer = s.recv(4096)
    s.close()
    assert answer.startswith(b"HTTP/1.1 408")


def test_oversized_request_head_gets_a_431(server: Any) -> None:
    srv, tls = server
    s = _connect(srv.port, tls, b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\n")
    s.settimeout(10)
    try:
        for _ in range(20):
            s.sendall(b"x-filler: " + b"a" * 8190 + b"\r\n")
    except OSError:
        pass  # the server may close while we are still sending
    answer = s.recv(4096)
    s.close()
    assert answer.startswith(b"HTTP/1.1 431")


def test_a_413_is_not_followed_by_a_408(server: Any) -> None:
    srv, tls = server
    s = _connect(srv.port, tls, b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n"
                                b"content-type: application/json\r\n\r\n" + b"x" * 100)
    s.settimeout(3)
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except (TimeoutError, OSError):
        pass
    s.close()
    assert data.startswith(b"HTTP/1.1 4") and b"HTTP/1.1 408" not in data, data[:200]


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_the_rest_of_a_refused_body_is_not_the_next_requests_head(tmp_path: Path, http: str) -> None:
    """A 4 MiB body refused before it was read, sent in full on a kept-alive connection: its unread rest is
    discarded (not counted as the next request's head, which would be a 431), and the next request is answered."""
    ca = authority.new_ca("test-ca")
    authority.write(authority.issue(ca, common_name="webhook", hosts=["127.0.0.1"]),
                    tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    tls = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    limits = serving.Limits(header_timeout=5.0, body_timeout=5.0, max_header_bytes=64 << 10)
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    srv = WebhookServer(app, host="127.0.0.1", port=0, certfile=tmp_path / "tls.crt", keyfile=tmp_path / "tls.key",
                        http=http, reload_interval=None, graceful_timeout=1, limits=limits).start()
    try:
        with httpx.Client(base_url=f"https://127.0.0.1:{srv.port}", verify=tls, timeout=30) as client:
            big = client.post("/jobs/validate", content=b"x" * (4 << 20),
                              headers={"content-type": "application/json"})
            assert big.status_code in (400, 413), big.text
            assert "3 MiB" in big.text
            assert client.get("/healthz").status_code == 200
    finally:
        srv.stop()
