"""Fuzz of devcluster's REST entry points over real HTTPS (the session's `live_devcluster`): hostile bodies,
content types, query parameters and paths on CRUD, patch, scale, list and watch. Invariant: never a 5xx, every
request answered within the client's timeout (no hang), and the server still answering LIST and /healthz after.

Writes stay inside one namespace of the fuzz's own (namespaced kinds only), so other tests sharing the cluster
never see them.
"""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ._strategies import SETTINGS, json_values, k8s_objects

pytestmark = pytest.mark.integration

NS = f"fuzz-{uuid.uuid4().hex[:6]}"
_COLLECTIONS = [f"/api/v1/namespaces/{NS}/configmaps", f"/api/v1/namespaces/{NS}/pods",
                f"/api/v1/namespaces/{NS}/secrets", f"/apis/apps/v1/namespaces/{NS}/deployments",
                f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"]
_SUFFIXES = ["", "/a", "/a/status", "/a/scale", "/a/binding", "/a/eviction", "/a/x/y", "/%00", "/.."]
_CONTENT_TYPES = ["application/json", "application/yaml", "application/merge-patch+json",
                  "application/json-patch+json", "application/strategic-merge-patch+json",
                  "application/vnd.kubernetes.protobuf", "text/plain", ""]
_QUERY = st.dictionaries(st.sampled_from(["limit", "resourceVersion", "fieldValidation", "labelSelector",
                                          "fieldSelector", "dryRun", "propagationPolicy", "gracePeriodSeconds",
                                          "continue", "timeoutSeconds", "allowWatchBookmarks"]),
                         st.one_of(st.sampled_from(["abc", "-1", "0", "10", "Strict", "Warn", "All", "a=b", "a in (",
                                                    "Foreground", "1e15", "!x", ""]), st.text(max_size=10)),
                         max_size=3)


def _body(value: Any, content_type: str, raw: bytes | None) -> bytes:
    if raw is not None:
        return raw
    if content_type == "application/yaml":
        import yaml

        return yaml.safe_dump(value).encode()
    return json.dumps(value).encode()


@pytest.fixture(scope="module")
def http(live_devcluster: Any) -> Iterator[httpx.Client]:
    tls = ssl.create_default_context(cafile=str(live_devcluster.ca_path))
    with httpx.Client(base_url=live_devcluster.url, verify=tls, timeout=20,
                      headers={"Authorization": f"Bearer {live_devcluster.token}"}) as c:
        r = c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        assert r.status_code == 201, r.text
        yield c
        c.delete(f"/api/v1/namespaces/{NS}")


@settings(max_examples=120, **SETTINGS)
@given(method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]), base=st.sampled_from(_COLLECTIONS),
       suffix=st.sampled_from(_SUFFIXES), content_type=st.sampled_from(_CONTENT_TYPES), query=_QUERY,
       value=st.one_of(k8s_objects, json_values),
       raw=st.one_of(st.none(), st.binary(max_size=64), st.sampled_from([b"{{{", b"[1]", b"[" * 300 + b"]" * 300,
                                                                          b"a: &a [*a]", b"\xff\xfe"])))
def test_requests(http: httpx.Client, method: str, base: str, suffix: str, content_type: str,
                  query: dict[str, str], value: Any, raw: bytes | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    body = _body(value, content_type, raw) if method != "GET" else None
    r = http.request(method, base + suffix, params={**query, "timeoutSeconds": "1"},  # a watch must end: no hang
                     content=body, headers=headers)
    assert r.status_code < 500, (method, base + suffix, query, r.status_code, r.text[:300])


@settings(max_examples=25, **SETTINGS)
@given(query=_QUERY, watch=st.booleans())
def test_list_and_watch_options(http: httpx.Client, query: dict[str, str], watch: bool) -> None:
    params = {**query, "timeoutSeconds": "1", **({"watch": "true"} if watch else {})}
    r = http.get(f"/api/v1/namespaces/{NS}/configmaps", params=params)
    assert r.status_code < 500, (params, r.status_code, r.text[:300])


def test_still_answering(http: httpx.Client) -> None:
    for path in _COLLECTIONS[:4]:
        assert http.get(path).status_code == 200
    assert http.get("/api/v1/configmaps").status_code == 200
    assert http.get("/healthz").status_code == 200
