"""devcluster's /readyz: ok only once every pending start-up check (the profile's nodes) is done, in
kube-apiserver's shape (one `[-]name failed` line per check, then the verdict, status 500)."""

from __future__ import annotations

import asyncio

import pytest

from lahar.devcluster import server
from lahar.kube.resources import Registry, core


def _get(app: server.ApiServer, path: str) -> tuple[int, bytes]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": []}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], body


@pytest.mark.parametrize(("pending", "status", "body"), [
    (set(), 200, b"ok"),
    ({"lahar-profile-nodes"}, 500, b"[-]lahar-profile-nodes failed: reason withheld\nreadyz check failed\n"),
    ({"b", "a"}, 500, b"[-]a failed: reason withheld\n[-]b failed: reason withheld\nreadyz check failed\n"),
], ids=["ready", "nodes-pending", "two-pending-sorted"])
def test_readyz(pending: set[str], status: int, body: bytes) -> None:
    app = server.ApiServer(None, Registry.of(core()), token=None)
    app.pending_checks = pending
    assert _get(app, "/readyz") == (status, body)
    assert _get(app, "/livez") == (200, b"ok")
