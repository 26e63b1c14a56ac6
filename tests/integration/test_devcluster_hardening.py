"""devcluster under hostile input, over real HTTPS: every bad body is a 4xx naming the field or the limit, nothing
stored breaks LIST or watch, the data directory is owner-only, and slow clients are cut off.

Each test is a finding of the hardening issue (data-dir modes, depth, body size and YAML aliases, 500s on bad
input, kube-apiserver's validation, slow clients) and failed before its fix.
"""

from __future__ import annotations

import socket
import ssl
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lahar.certs import serving
from lahar.devcluster.server import DevCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def http(live_devcluster: Any) -> Iterator[httpx.Client]:
    tls = ssl.create_default_context(cafile=str(live_devcluster.ca_path))
    with httpx.Client(base_url=live_devcluster.url, verify=tls, timeout=30,
                      headers={"Authorization": f"Bearer {live_devcluster.token}"}) as c:
        yield c


@pytest.fixture
def ns(http: httpx.Client) -> Iterator[str]:
    name = f"hard-{uuid.uuid4().hex[:8]}"
    r = http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    http.delete(f"/api/v1/namespaces/{name}")


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _deployment(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


def _pod(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox", **container}]}}


# --- item 3: the data directory ------------------------------------------------------------------------------

def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_data_dir_is_owner_only_on_create_and_on_reopen(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with DevCluster(data) as dc:
        dc.store.create(dc.registry.get("", "v1", "configmaps"), "default",
                        {"metadata": {"name": "x"}, "data": {"k": "v"}})
        for name in ("state.db", "state.db-wal", "state.db-shm", "kubeconfig", "token", "pki/ca.key"):
            assert (data / name).exists(), name
        modes = _modes(data)
    assert {k: m for k, m in modes.items() if m != (0o700 if (data / k).is_dir() else 0o600)} == {}
    for path in [data, *data.rglob("*")]:  # what an older version (or a umask of 022) left behind
        path.chmod(0o755 if path.is_dir() else 0o644)
    with DevCluster(data):
        modes = _modes(data)
    assert {k: m for k, m in modes.items() if m != (0o700 if (data / k).is_dir() else 0o600)} == {}


# --- items 4, 6, 7: depth, size, aliases, malformed bodies -----------------------------------------------------

def test_deep_configmap_is_refused_and_list_and_watch_keep_working(http: httpx.Client, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": {"k": _nested(253)}}
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=body)
    assert r.status_code == 400, r.text
    assert "100 levels" in r.json()["message"]
    assert http.get("/api/v1/configmaps").status_code == 200
    r = http.get(f"/api/v1/namespaces/{ns}/configmaps", params={"watch": "true", "timeoutSeconds": "1"})
    assert r.status_code == 200


@pytest.mark.parametrize("levels", [101, 255, 1024, 1100], ids=["101", "255", "1024", "1100"])
def test_deep_json_is_a_400(http: httpx.Client, ns: str, levels: int) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"x":' + b"[" * levels + b"]" * levels + b"}"
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text


def test_deep_yaml_is_a_400(http: httpx.Client, ns: str) -> None:
    raw = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\nx: " + b"[" * 5000 + b"]" * 5000
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", content=raw, headers={"content-type": "application/yaml"})
    assert r.status_code == 400, r.text
    assert "levels deep" in r.json()["message"]


def test_yaml_alias_bomb_is_a_400(http: httpx.Client, ns: str) -> None:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "a: &a [x,x,x,x,x,x,x,x,x]"]
    for prev, cur in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", content="\n".join(lines).encode(),
                  headers={"content-type": "application/yaml"})
    assert r.status_code == 400, r.text
    assert "aliases" in r.json()["message"]
    assert http.get(f"/api/v1/namespaces/{ns}/configmaps/bomb").status_code == 404


def test_body_over_3mib_is_a_413_naming_the_limit(http: httpx.Client, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "x" * (4 << 20)}}
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=body)
    assert r.status_code == 413, r.text
    assert r.json()["message"] == "Request entity too large: limit is 3145728"
    ok = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fits"}, "data": {"k": "x" * (2 << 20)}}
    assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json=ok).status_code == 201


@pytest.mark.parametrize("patch", [b"{{{", b"[1]", b'{"spec": 3}', b"7", b'{"spec": {"replicas": "x"}}',
                                   b'{"spec": {"replicas": 1e15}}', b'[{"op": "replace"}]'],
                         ids=["garbage", "list-of-int", "spec-int", "scalar", "string", "overflow", "no-value"])
def test_bad_scale_patch_is_a_400(http: httpx.Client, ns: str, patch: bytes) -> None:
    assert http.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=_deployment("s")).status_code == 201
    kind = "application/json-patch+json" if patch.startswith(b"[") else "application/merge-patch+json"
    r = http.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/s/scale", content=patch,
                   headers={"content-type": kind})
    assert r.status_code == 400, r.text


# --- item 8: kube-apiserver's validation -------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "body", "code", "named"), [
    ("pods", {**_pod("p"), "spec": {"containers": "x"}}, 400, "spec.containers"),
    ("pods", _pod("p", resources={"requests": {"cpu": "lots"}}), 422, "resources.requests[cpu]"),
    ("configmaps", {"metadata": {"name": "c", "labels": {"bad key!": "v"}}}, 422, "metadata.labels"),
    ("configmaps", {"metadata": {"name": "c", "labels": {"k": 5}}}, 400, "metadata.labels[k]"),
    ("configmaps", {"metadata": {"name": "c"}, "data": {"k": 5}}, 400, "data[k]"),
    ("configmaps", {"metadata": {"name": "c"}, "data": {"k": ["v"]}}, 400, "data[k]"),
], ids=["containers-string", "cpu-lots", "label-key", "label-int", "data-int", "data-list"])
def test_kube_validation(http: httpx.Client, ns: str, path: str, body: dict[str, Any], code: int,
                         named: str) -> None:
    r = http.post(f"/api/v1/namespaces/{ns}/{path}", json=body)
    assert r.status_code == code, r.text
    assert named in r.json()["message"]


def test_replicas_beyond_int32_is_refused(http: httpx.Client, ns: str) -> None:
    r = http.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=_deployment("big", replicas=1e15))
    assert r.status_code == 400, r.text
    assert "spec.replicas" in r.json()["message"]
    r = http.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=_deployment("big", replicas=2**31))
    assert r.status_code == 400 and "int32" in r.json()["message"], r.text


def test_field_validation_strict_refuses_unknown_fields(http: httpx.Client, ns: str) -> None:
    body = {**_pod("u"), "spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}]}}
    r = http.post(f"/api/v1/namespaces/{ns}/pods", params={"fieldValidation": "Strict"}, json=body)
    assert r.status_code == 400, r.text
    assert 'unknown field "spec.containers[0].colour"' in r.json()["message"]
    r = http.post(f"/api/v1/namespaces/{ns}/pods", params={"fieldValidation": "Warn"}, json=body)
    assert r.status_code == 201
    assert "colour" in r.headers["warning"]
    assert "colour" not in r.json()["spec"]["containers"][0]  # dropped, as kube's typed decoder does


@pytest.mark.parametrize("params", [{"resourceVersion": "-1"}, {"limit": "abc"}, {"limit": "-5"},
                                    {"resourceVersion": "-1", "watch": "true"}, {"resourceVersion": "abc",
                                                                                 "watch": "true"}],
                         ids=["list-rv", "limit-abc", "limit-negative", "watch-rv", "watch-rv-abc"])
def test_bad_list_options_are_a_400(http: httpx.Client, ns: str, params: dict[str, str]) -> None:
    r = http.get(f"/api/v1/namespaces/{ns}/configmaps", params=params)
    assert r.status_code == 400, r.text
    assert next(iter(params)) in r.json()["message"] or "resource version" in r.json()["message"]


def test_negative_resource_version_on_update_is_a_400(http: httpx.Client, ns: str) -> None:
    assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "rv"}}).status_code == 201
    r = http.put(f"/api/v1/namespaces/{ns}/configmaps/rv", json={"metadata": {"name": "rv", "resourceVersion": "-1"}})
    assert r.status_code == 400, r.text
    assert "metadata.resourceVersion" in r.json()["message"]


# --- item 9: slow clients ----------------------------------------------------------------------------------------

def _half_sent(host: str, port: int, tls: ssl.SSLContext, n: int) -> list[ssl.SSLSocket]:
    socks = []
    for _ in range(n):
        raw = socket.create_connection((host, port), timeout=10)
        s = tls.wrap_socket(raw, server_hostname="localhost")
        s.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Le")
        socks.append(s)
    return socks


def _closed_within(socks: list[ssl.SSLSocket], bound: float) -> int:
    """How many of `socks` the server closed (EOF, reset or a 408) within `bound` seconds."""
    closed = 0
    deadline = time.monotonic() + bound
    for s in socks:
        s.settimeout(max(deadline - time.monotonic(), 0.05))
        try:
            while s.recv(4096):
                pass
            closed += 1
        except TimeoutError:
            pass
        except (OSError, ssl.SSLError):
            closed += 1
        finally:
            s.close()
    return closed


def test_half_sent_requests_are_cut_off_and_the_server_answers(tmp_path: Path) -> None:
    limits = serving.Limits(header_timeout=1.0, body_timeout=1.0, max_connections=1000)
    with DevCluster(tmp_path / "slow", limits=limits) as dc:
        tls = ssl.create_default_context(cafile=str(dc.ca_path))
        socks = _half_sent("127.0.0.1", dc.port, tls, 300)
        started = time.monotonic()
        assert _closed_within(socks, 15.0) == 300
        assert time.monotonic() - started < 15.0
        r = httpx.get(f"{dc.url}/healthz", verify=tls, timeout=10)
        assert r.status_code == 200


def test_half_sent_body_is_cut_off_with_a_408(tmp_path: Path) -> None:
    limits = serving.Limits(header_timeout=5.0, body_timeout=0.5)
    with DevCluster(tmp_path / "body", limits=limits) as dc:
        tls = ssl.create_default_context(cafile=str(dc.ca_path))
        s = tls.wrap_socket(socket.create_connection(("127.0.0.1", dc.port), timeout=10), server_hostname="localhost")
        s.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                  b"Authorization: Bearer " + dc.token.encode() + b"\r\ncontent-type: application/json\r\n\r\n{")
        s.settimeout(10)
        answer = s.recv(4096)
        s.close()
        assert answer.startswith(b"HTTP/1.1 408")
