"""devcluster's /metrics: `apiserver_request_total` with kube-apiserver's labels (verb LIST / WATCH / APPLY /
DELETECOLLECTION, scope resource / namespace / cluster), counted per answered request with its status code."""

from __future__ import annotations

import asyncio
import re

import pytest

from lahar.devcluster import requestmetrics, server
from lahar.kube.apiserver.memory import MemoryClient

# (method, path, query, content type) → (dry_run, group, resource, scope, subresource, verb, version)
LABEL_CASES = [
    ("GET", "/api/v1/namespaces/ns/pods", (), "", ("", "", "pods", "namespace", "", "LIST", "v1")),
    ("GET", "/api/v1/pods", (), "", ("", "", "pods", "cluster", "", "LIST", "v1")),
    ("GET", "/api/v1/namespaces/ns/pods", (("watch", "true"),), "", ("", "", "pods", "namespace", "", "WATCH", "v1")),
    ("GET", "/api/v1/watch/namespaces/ns/pods", (), "", ("", "", "pods", "namespace", "", "WATCH", "v1")),
    ("GET", "/api/v1/namespaces/ns/pods/p", (), "", ("", "", "pods", "resource", "", "GET", "v1")),
    ("POST", "/api/v1/namespaces/ns/pods", (), "", ("", "", "pods", "namespace", "", "POST", "v1")),
    ("POST", "/api/v1/namespaces/ns/pods/p/binding", (), "",
     ("", "", "pods", "resource", "binding", "POST", "v1")),
    ("PATCH", "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/j/status", (), "application/merge-patch+json",
     ("", "batch.volcano.sh", "jobs", "resource", "status", "PATCH", "v1alpha1")),
    ("PATCH", "/apis/scheduling.volcano.sh/v1beta1/queues/q", (), "application/apply-patch+yaml",
     ("", "scheduling.volcano.sh", "queues", "resource", "", "APPLY", "v1beta1")),
    ("PUT", "/api/v1/namespaces/ns/status", (), "", ("", "", "namespaces", "resource", "status", "PUT", "v1")),
    ("DELETE", "/api/v1/namespaces/ns/pods", (), "", ("", "", "pods", "namespace", "", "DELETECOLLECTION", "v1")),
    ("DELETE", "/api/v1/namespaces/ns/pods/p", (("dryRun", "All"),), "",
     ("All", "", "pods", "resource", "", "DELETE", "v1")),
    ("GET", "/version", (), "", ("", "", "", "", "", "GET", "")),
    ("GET", "/apis/batch.volcano.sh/v1alpha1", (), "", ("", "", "", "", "", "GET", "")),
]


@pytest.mark.parametrize(("method", "path", "query", "content_type", "labels"), LABEL_CASES,
                         ids=[f"{c[0]} {c[1]}" for c in LABEL_CASES])
def test_request_labels(method: str, path: str, query: tuple, content_type: str, labels: tuple) -> None:
    assert requestmetrics.request_labels(method, path, query, content_type=content_type) == labels


def _call(app: server.ApiServer, method: str, path: str, body: bytes = b"", query: bytes = b"") -> tuple[int, bytes]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": headers}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _samples(text: str) -> dict[tuple[str, str, str, str], int]:
    out = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            out[(labels["verb"], labels["resource"], labels["scope"], labels["code"])] = int(line.rsplit(" ", 1)[1])
    return out


def test_metrics_count_each_answer_with_its_code() -> None:
    client = MemoryClient()
    app = server.ApiServer(client.store, client.registry, token=None)
    pod = b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}'
    assert _call(app, "POST", "/api/v1/namespaces/default/pods", pod)[0] == 201
    assert _call(app, "POST", "/api/v1/namespaces/default/pods", pod)[0] == 409
    assert _call(app, "GET", "/api/v1/namespaces/default/pods/p")[0] == 200
    assert _call(app, "GET", "/api/v1/namespaces/default/pods/missing")[0] == 404
    assert _call(app, "GET", "/api/v1/pods")[0] == 200
    status, body = _call(app, "GET", "/metrics")
    assert status == 200
    text = body.decode()
    assert "# TYPE apiserver_request_total counter" in text
    assert _samples(text) == {
        ("POST", "pods", "namespace", "201"): 1,
        ("POST", "pods", "namespace", "409"): 1,
        ("GET", "pods", "resource", "200"): 1,
        ("GET", "pods", "resource", "404"): 1,
        ("LIST", "pods", "cluster", "200"): 1,
    }
    assert 'component="apiserver"' in text


def test_metrics_need_the_token() -> None:
    client = MemoryClient()
    app = server.ApiServer(client.store, client.registry, token="secret")
    assert _call(app, "GET", "/metrics")[0] == 401


def test_peek_is_the_stored_object_not_a_copy() -> None:
    client = MemoryClient()
    ns_rt = client.registry.get("", "v1", "namespaces")
    client.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"a": "b"}}})
    peeked = client.store.peek(ns_rt, None, "team")
    assert peeked is not None and peeked["metadata"]["labels"]["a"] == "b"
    assert client.store.peek(ns_rt, None, "team") is peeked
    assert client.store.peek(ns_rt, None, "missing") is None
    assert {o["metadata"]["name"] for o in client.store.peek_all(ns_rt)} >= {"team"}
