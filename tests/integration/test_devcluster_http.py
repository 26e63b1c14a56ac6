"""devcluster's REST protocol over real HTTPS, checked with the official `kubernetes` client and raw httpx.

Covers what the conformance suite does not: auth, discovery/OpenAPI/Table documents, Status bodies and codes,
content types, watch streaming details (legacy paths, resume, bookmarks, 410 as an ERROR event), restarts.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from lahar.devcluster import protobuf, tables
from lahar.devcluster.server import DevCluster, parse_resource_path
from lahar.kube import kubeconfig
from lahar.kube.apiserver import store

pytestmark = pytest.mark.integration


# --- helpers -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def api(live_devcluster: Any) -> Iterator[k8s.ApiClient]:
    with k8s.ApiClient(kubeconfig.load(live_devcluster.kubeconfig)) as c:
        yield c


@pytest.fixture(scope="module")
def http(live_devcluster: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_devcluster.url, verify=_tls(live_devcluster.ca_path), timeout=20,
                      headers={"Authorization": f"Bearer {live_devcluster.token}"}) as c:
        yield c


@pytest.fixture
def ns(http: httpx.Client) -> Iterator[str]:
    name = f"h-{uuid.uuid4().hex[:8]}"
    r = http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    http.delete(f"/api/v1/namespaces/{name}")


def _tls(ca_path: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_path))


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


def watch_lines(http: httpx.Client, url: str, *, count: int, params: dict[str, Any] | None = None,
                until: str | None = None, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Read up to `count` events (or until one of type `until`) from a streaming watch, bounded by timeoutSeconds."""
    params = {"watch": "true", "timeoutSeconds": "10", **(params or {})}
    out: list[dict[str, Any]] = []
    with http.stream("GET", url, params=params, headers=headers) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/json")
        for line in r.iter_lines():
            if not line:
                continue
            out.append(json.loads(line))
            if len(out) >= count or (until and out[-1]["type"] == until):
                break
    return out


# --- pure routing ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("group", "rest", "expected"), [
    ("", ["pods"], ("pods", None, None, None, False)),
    ("", ["namespaces", "a", "pods", "p", "status"], ("pods", "a", "p", "status", False)),
    ("", ["namespaces", "a"], ("namespaces", None, "a", None, False)),
    ("", ["namespaces", "a", "status"], ("namespaces", None, "a", "status", False)),
    ("", ["namespaces", "a", "finalize"], ("namespaces", None, "a", "finalize", False)),
    ("", ["namespaces", "a", "configmaps"], ("configmaps", "a", None, None, False)),
    ("apps", ["watch", "namespaces", "a", "deployments"], ("deployments", "a", None, None, True)),
    ("", ["watch", "pods"], ("pods", None, None, None, True)),
    ("", ["nodes", "n1", "status"], ("nodes", None, "n1", "status", False)),
], ids=["list", "subresource", "namespace", "ns-status", "ns-finalize", "namespaced-list", "legacy-watch",
        "watch-all", "cluster-status"])
def test_parse_resource_path(group: str, rest: list[str], expected: tuple) -> None:
    p = parse_resource_path(group, "v1", rest)
    assert p is not None
    assert (p.plural, p.namespace, p.name, p.subresource, p.watch) == expected


# `kubectl create configmap pb1 --from-literal=a=b --from-literal=c=d` and `kubectl create secret generic s1
# --from-literal=k=v`, as kubectl 1.32 sends them
_CM_PB = ("6b3873000a0f0a0276311209436f6e6669674d617012250a130a03706231"
          "12001a0022002a0032003800420012060a016112016212060a01631201641a002200")
_SECRET_PB = ("6b3873000a0c0a0276311206536563726574121e0a120a02733112001a00"
              "22002a0032003800420012060a016b1201761a001a002200")


@pytest.mark.parametrize(("hexdata", "expected"), [
    (_CM_PB, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pb1"}, "data": {"a": "b", "c": "d"}}),
    (_SECRET_PB, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"k": "dg=="}}),
], ids=["configmap", "secret"])
def test_protobuf_bodies_decode(hexdata: str, expected: dict[str, Any]) -> None:
    assert protobuf.decode(bytes.fromhex(hexdata)) == expected


def test_protobuf_of_unknown_kind_is_refused() -> None:
    envelope = bytes.fromhex("6b3873000a0e0a02763112085365727669636573")
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(envelope)


def test_parse_resource_path_rejects_deep_paths() -> None:
    assert parse_resource_path("", "v1", ["namespaces", "a", "pods", "p", "status", "x"]) is None
    assert parse_resource_path("", "v1", []) is None


@pytest.mark.parametrize(("path", "expected"), [
    (".status.state.phase", ["Running"]),
    (".spec.tasks[0].name", ["a"]),
    (".spec.tasks[*].replicas", [1, 2]),
    ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
    ("{.metadata.name}", ["j"]),
    (".status.missing", []),
], ids=["nested", "index", "wildcard", "filter", "braces", "missing"])
def test_printer_column_jsonpath(path: str, expected: list[Any]) -> None:
    obj = {"metadata": {"name": "j"}, "spec": {"tasks": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]},
           "status": {"state": {"phase": "Running"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    assert tables.jsonpath(obj, path) == expected


@pytest.mark.parametrize(("status", "deleting", "expected"), [
    ({"phase": "Pending"}, False, "Pending"),
    ({"phase": "Running", "containerStatuses": [{"ready": True, "state": {"running": {}}}]}, False, "Running"),
    ({"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]}, False,
     "ImagePullBackOff"),
    ({"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}, False, "ExitCode:3"),
    ({"phase": "Running"}, True, "Terminating"),
], ids=["pending", "running", "waiting-reason", "exit-code", "terminating"])
def test_pod_status_column(status: dict[str, Any], deleting: bool, expected: str) -> None:
    meta: dict[str, Any] = {"name": "p", "creationTimestamp": "2025-01-01T00:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:01:00Z"
    pod = {"metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": status}
    now = dt.datetime(2025, 1, 1, 0, 5, tzinfo=dt.UTC)
    cells = tables.row("", "Pod", pod, now=now)["cells"]
    assert cells[2] == expected and cells[4] == "5m"


# --- auth ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "headers", "code"), [
    ("/api/v1/namespaces", {}, 401),
    ("/api/v1/namespaces", {"Authorization": "Bearer wrong"}, 401),
    ("/api/v1/namespaces", {"Authorization": "Basic YWRtaW46YWRtaW4="}, 401),
    ("/apis", {}, 401),
    ("/version", {}, 200),
    ("/healthz", {}, 200),
    ("/readyz", {}, 200),
], ids=["no-token", "wrong-token", "basic-auth", "discovery", "version-open", "healthz-open", "readyz-open"])
def test_only_the_kubeconfig_token_gets_in(live_devcluster: Any, path: str, headers: dict[str, str],
                                           code: int) -> None:
    r = httpx.get(live_devcluster.url + path, headers=headers, verify=_tls(live_devcluster.ca_path))
    assert r.status_code == code
    if code == 401:
        assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_kubeconfig_trusts_the_ca_and_names_the_context(live_devcluster: Any) -> None:
    import yaml

    doc = yaml.safe_load(live_devcluster.kubeconfig.read_text())
    assert doc["current-context"] == "lahar"
    assert doc["clusters"][0]["cluster"]["server"] == live_devcluster.url
    assert doc["users"][0]["user"]["token"] == live_devcluster.token


# --- discovery, OpenAPI ----------------------------------------------------------------------------------------

def test_version(api: k8s.ApiClient) -> None:
    info = k8s.VersionApi(api).get_code()
    assert info.git_version.startswith("v1.32.")
    assert (info.major, info.minor) == ("1", "32")


def test_discovery_core_and_groups(http: httpx.Client) -> None:
    assert http.get("/api").json()["versions"] == ["v1"]
    groups = {g["name"]: g for g in http.get("/apis").json()["groups"]}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert "" not in groups
    core = {r["name"]: r for r in http.get("/api/v1").json()["resources"]}
    assert core["pods"]["shortNames"] == ["po"] and core["pods"]["namespaced"] is True
    assert core["pods"]["singularName"] == "pod" and "all" in core["pods"]["categories"]
    assert set(core["pods"]["verbs"]) >= {"create", "delete", "get", "list", "patch", "update", "watch"}
    assert core["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert core["pods/binding"]["kind"] == "Binding" and core["pods/binding"]["verbs"] == ["create"]
    assert (core["pods/eviction"]["group"], core["pods/eviction"]["kind"]) == ("policy", "Eviction")
    assert core["nodes"]["namespaced"] is False
    apps = {r["name"]: r for r in http.get("/apis/apps/v1").json()["resources"]}
    assert apps["deployments/scale"]["kind"] == "Scale"
    assert http.get("/apis/nope.example.com/v1").status_code == 404
    assert http.get("/apis/apps").json()["kind"] == "APIGroup"


def test_openapi_v3_carries_gvk_and_field_validation(http: httpx.Client) -> None:
    index = http.get("/openapi/v3").json()["paths"]
    assert index["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    doc = http.get(index["apis/apps/v1"]["serverRelativeURL"]).json()
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert http.get("/openapi/v2").status_code == 404


# --- CRUD with the official client -----------------------------------------------------------------------------

def test_crud_and_status_errors(api: k8s.ApiClient, ns: str) -> None:
    v1 = k8s.CoreV1Api(api)
    created = v1.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="a"),
                                                                  data={"k": "1"}))
    assert created.metadata.uid and created.metadata.resource_version
    with pytest.raises(k8s.ApiException) as ei:
        v1.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="a")))
    assert ei.value.status == 409
    body = json.loads(ei.value.body)
    assert (body["kind"], body["reason"], body["message"]) == ("Status", "AlreadyExists",
                                                              'configmaps "a" already exists')
    with pytest.raises(k8s.ApiException) as ei:
        v1.read_namespaced_config_map("missing", ns)
    assert ei.value.status == 404
    details = json.loads(ei.value.body)["details"]
    assert (details["name"], details["kind"], details.get("group", "")) == ("missing", "configmaps", "")

    stale = created.metadata.resource_version
    v1.patch_namespaced_config_map("a", ns, {"data": {"k": "2"}})
    created.metadata.resource_version = stale
    with pytest.raises(k8s.ApiException) as ei:
        v1.replace_namespaced_config_map("a", ns, created)
    assert ei.value.status == 409 and json.loads(ei.value.body)["reason"] == "Conflict"

    listed = v1.list_namespaced_config_map(ns)
    assert [i.metadata.name for i in listed.items] == ["a"]
    assert listed.items[0].data == {"k": "2"}
    v1.delete_namespaced_config_map("a", ns)
    assert v1.list_namespaced_config_map(ns).items == []


def test_list_across_namespaces_and_selectors(api: k8s.ApiClient, ns: str) -> None:
    v1 = k8s.CoreV1Api(api)
    for name, tier in (("x", "web"), ("y", "db")):
        v1.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name,
                                                                                     labels={"tier": tier})))
    everywhere = v1.list_config_map_for_all_namespaces(label_selector="tier=web")
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items] == [(ns, "x")]
    by_field = v1.list_namespaced_config_map(ns, field_selector="metadata.name=y")
    assert [i.metadata.name for i in by_field.items] == ["y"]


@pytest.mark.parametrize(("content_type", "body", "code"), [
    ("application/merge-patch+json", {"data": {"b": "2"}}, 200),
    ("application/strategic-merge-patch+json", {"data": {"b": "2"}}, 200),
    ("application/json-patch+json", [{"op": "add", "path": "/data/b", "value": "2"}], 200),
    ("application/apply-patch+yaml", {"data": {"b": "2"}}, 422),
    ("text/plain", {"data": {"b": "2"}}, 415),
], ids=["merge", "strategic", "json", "apply-without-field-manager", "unknown"])
def test_patch_content_types(http: httpx.Client, ns: str, content_type: str, body: Any, code: int) -> None:
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("p", a="1"))
    r = http.patch(f"/api/v1/namespaces/{ns}/configmaps/p", content=json.dumps(body),
                   headers={"Content-Type": content_type})
    assert r.status_code == code, r.text
    if code == 200:
        assert r.json()["data"] == {"a": "1", "b": "2"}
    else:
        assert r.json()["reason"] == ("Invalid" if code == 422 else "UnsupportedMediaType")


def test_server_side_apply_over_http(http: httpx.Client, ns: str) -> None:
    url = f"/api/v1/namespaces/{ns}/configmaps/sa"
    yaml_body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\n  namespace: {ns}\ndata:\n  a: '1'\n"
    apply_yaml = {"Content-Type": "application/apply-patch+yaml"}
    created = http.patch(url, params={"fieldManager": "one"}, content=yaml_body, headers=apply_yaml)
    assert created.status_code == 201, created.text
    assert [m["manager"] for m in created.json()["metadata"]["managedFields"]] == ["one"]
    again = http.patch(url, params={"fieldManager": "one"}, content=yaml_body, headers=apply_yaml)
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]
    clash = http.patch(url, params={"fieldManager": "two"}, content=yaml_body.replace("'1'", "'2'"), headers=apply_yaml)
    assert clash.status_code == 409 and clash.json()["details"]["causes"][0]["field"] == ".data.a"
    edited = http.patch(url, json={"data": {"b": "1"}}, headers={"Content-Type": "application/merge-patch+json",
                                                                 "User-Agent": "my-tool/1.0"})
    assert {m["manager"] for m in edited.json()["metadata"]["managedFields"]} == {"one", "my-tool"}


def test_dry_run_does_not_persist(http: httpx.Client, ns: str) -> None:
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", params={"dryRun": "All"}, json=cm("dry"))
    assert r.status_code == 201
    assert http.get(f"/api/v1/namespaces/{ns}/configmaps/dry").status_code == 404
    assert http.post(f"/api/v1/namespaces/{ns}/configmaps", params={"dryRun": "Some"},
                     json=cm("dry")).status_code == 400


def test_delete_options_body_and_query(http: httpx.Client, ns: str) -> None:
    uid = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("d")).json()["metadata"]["uid"]
    r = http.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/d",
                     json={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "other"}})
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    r = http.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/d", params={"propagationPolicy": "Foreground"},
                     json={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}})
    assert r.status_code in (200, 202), r.text
    assert http.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/d",
                        params={"propagationPolicy": "Sideways"}).status_code == 400


def test_body_namespace_and_name_must_match_url(http: httpx.Client, ns: str) -> None:
    obj = cm("m")
    obj["metadata"]["namespace"] = "elsewhere"
    r = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=obj)
    assert r.status_code == 400 and "does not match the namespace" in r.json()["message"]
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("m"))
    r = http.put(f"/api/v1/namespaces/{ns}/configmaps/m", json=cm("other"))
    assert r.status_code == 400 and "does not match the name on the URL" in r.json()["message"]


def test_unknown_paths_are_404_status(http: httpx.Client) -> None:
    for path in ("/api/v1/nothings", "/apis/apps/v1/namespaces/x/nodes", "/nope", "/api/v1/namespaces/x/pods/p/y"):
        r = http.get(path)
        assert r.status_code == 404, path
        assert r.json()["kind"] == "Status"


# --- pods: binding, eviction, status ---------------------------------------------------------------------------

def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_binding_eviction_and_status_subresources(api: k8s.ApiClient, http: httpx.Client, ns: str) -> None:
    v1 = k8s.CoreV1Api(api)
    http.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("p"))
    binding = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="p"), target=k8s.V1ObjectReference(kind="Node",
                                                                                              name="n1"))
    resp = v1.create_namespaced_pod_binding("p", ns, binding, _preload_content=False)
    assert resp.status == 201
    assert v1.read_namespaced_pod("p", ns).spec.node_name == "n1"
    r = http.post(f"/api/v1/namespaces/{ns}/pods/p/binding",
                  json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                        "target": {"kind": "Node", "name": "n2"}})
    assert r.status_code == 409

    status = http.patch(f"/api/v1/namespaces/{ns}/pods/p/status", json={"status": {"phase": "Running"}},
                        headers={"Content-Type": "application/merge-patch+json"})
    assert status.status_code == 200 and status.json()["status"]["phase"] == "Running"

    http.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("q"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "q", "namespace": ns}}
    r = http.post(f"/api/v1/namespaces/{ns}/pods/q/eviction", json=eviction)
    assert r.status_code == 201 and r.json()["status"] == "Success"
    assert http.get(f"/api/v1/namespaces/{ns}/pods/q").status_code == 404


# --- Table -----------------------------------------------------------------------------------------------------

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def test_table_for_pods_and_include_object(http: httpx.Client, ns: str) -> None:
    http.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("t"))
    t = http.get(f"/api/v1/namespaces/{ns}/pods", headers={"Accept": TABLE}).json()
    assert (t["kind"], t["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    names = [c["name"] for c in t["columnDefinitions"] if c["priority"] == 0]
    assert names == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert t["rows"][0]["cells"][:4] == ["t", "0/1", "Pending", 0]
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    full = http.get(f"/api/v1/namespaces/{ns}/pods/t", params={"includeObject": "Object"},
                    headers={"Accept": TABLE}).json()
    assert full["rows"][0]["object"]["kind"] == "Pod"
    bare = http.get(f"/api/v1/namespaces/{ns}/pods", params={"includeObject": "None"},
                    headers={"Accept": TABLE}).json()
    assert "object" not in bare["rows"][0]
    plain = http.get(f"/api/v1/namespaces/{ns}/pods", headers={"Accept": "application/json"}).json()
    assert plain["kind"] == "PodList"


def test_watch_as_table_sends_columns_once(http: httpx.Client, ns: str) -> None:
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("a"))
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("b"))
    events = watch_lines(http, f"/api/v1/namespaces/{ns}/configmaps", count=2, headers={"Accept": TABLE})
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert [c["name"] for c in events[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert events[1]["object"]["columnDefinitions"] == []
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


# --- watch -----------------------------------------------------------------------------------------------------

def test_watch_resume_from_resource_version(http: httpx.Client, ns: str) -> None:
    first = http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("a")).json()["metadata"]["resourceVersion"]
    http.post(f"/api/v1/namespaces/{ns}/configmaps", json=cm("b"))
    http.delete(f"/api/v1/namespaces/{ns}/configmaps/a")
    events = watch_lines(http, f"/api/v1/namespaces/{ns}/configmaps", count=2, params={"resourceVersion": first})
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b"), ("DELETED", "a")]
    legacy = watch_lines(http, f"/api/v1/watch/namespaces/{ns}/configmaps", count=1, params={"resourceVersion": "0"})
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in legacy] == [("ADDED", "b")]
    one = watch_lines(http, f"/api/v1/watch/namespaces/{ns}/configmaps/b", count=1)
    assert [e["object"]["metadata"]["name"] for e in one] == ["b"]


def test_watch_with_official_client_sees_live_events(api: k8s.ApiClient, ns: str) -> None:
    v1 = k8s.CoreV1Api(api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="live")))
    w = k8s_watch.Watch()
    seen = []
    for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert seen == [("ADDED", "live")]


def test_watch_timeout_ends_stream_and_bookmarks_arrive(http: httpx.Client, ns: str) -> None:
    events = watch_lines(http, f"/api/v1/namespaces/{ns}/configmaps", count=5, until="BOOKMARK",
                         params={"allowWatchBookmarks": "true", "timeoutSeconds": "5",
                                 "resourceVersion": http.get(f"/api/v1/namespaces/{ns}/configmaps").json()[
                                     "metadata"]["resourceVersion"]})
    assert events and events[-1]["type"] == "BOOKMARK"
    assert set(events[-1]["object"]["metadata"]) == {"resourceVersion"}
    quiet = watch_lines(http, f"/api/v1/namespaces/{ns}/configmaps", count=1,
                        params={"timeoutSeconds": "1", "resourceVersion": events[-1]["object"]["metadata"][
                            "resourceVersion"]})
    assert quiet == []


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dc = DevCluster(tmp_path_factory.mktemp("small"), store=store.Store(history=5)).start()
    yield dc
    dc.stop()


def test_expired_resource_version_is_an_error_event_410(small_cluster: DevCluster) -> None:
    with httpx.Client(base_url=small_cluster.url, verify=_tls(small_cluster.ca_path), timeout=20,
                      headers={"Authorization": f"Bearer {small_cluster.token}"}) as http:
        first = http.post("/api/v1/namespaces/default/configmaps", json=cm("g")).json()["metadata"]["resourceVersion"]
        for i in range(12):
            http.patch("/api/v1/namespaces/default/configmaps/g", json={"data": {"i": str(i)}},
                       headers={"Content-Type": "application/merge-patch+json"})
        events = watch_lines(http, "/api/v1/namespaces/default/configmaps", count=2,
                             params={"resourceVersion": first})
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version")


# --- custom resources: strict field validation and warnings ------------------------------------------------------

WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "additionalPrinterColumns": [{"name": "Size", "type": "integer",
                                                         "jsonPath": ".spec.size"}],
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.fixture(scope="module")
def widgets(http: httpx.Client) -> Iterator[str]:
    r = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=WIDGETS)
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 10
    while http.get("/apis/example.com/v1").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield "/apis/example.com/v1"
    http.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")


def _widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_crd_discovery_openapi_and_table(http: httpx.Client, widgets: str, ns: str) -> None:
    res = {r["name"]: r for r in http.get(widgets).json()["resources"]}
    assert res["widgets"]["shortNames"] == ["wd"] and "widgets/status" in res
    index = http.get("/openapi/v3").json()["paths"]
    doc = http.get(index["apis/example.com/v1"]["serverRelativeURL"]).json()
    patch = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert doc["components"]["schemas"]["com.example.v1.Widget"]["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}]
    http.post(f"{widgets}/namespaces/{ns}/widgets", json=_widget("w", size=3))
    t = http.get(f"{widgets}/namespaces/{ns}/widgets", headers={"Accept": TABLE}).json()
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Size"]
    assert t["rows"][0]["cells"] == ["w", 3]


@pytest.mark.parametrize(("validation", "code", "warns"), [
    ("Strict", 400, False),
    ("Warn", 201, True),
    ("Ignore", 201, False),
], ids=["strict", "warn", "ignore"])
def test_field_validation_on_custom_resources(http: httpx.Client, widgets: str, ns: str, validation: str,
                                              code: int, warns: bool) -> None:
    r = http.post(f"{widgets}/namespaces/{ns}/widgets", params={"fieldValidation": validation},
                  json=_widget("u", size=1, colour="red"))
    assert r.status_code == code, r.text
    if code == 400:
        assert 'unknown field "spec.colour"' in r.json()["message"]
    warning = r.headers.get("warning", "")
    assert warning.startswith('299 - "') == warns
    if warns:
        assert "spec.colour" in warning
        assert "colour" not in r.json()["spec"]


def test_strategic_patch_on_custom_resource_is_415(http: httpx.Client, widgets: str, ns: str) -> None:
    http.post(f"{widgets}/namespaces/{ns}/widgets", json=_widget("s", size=1))
    r = http.patch(f"{widgets}/namespaces/{ns}/widgets/s", content=json.dumps({"spec": {"size": 2}}),
                   headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType"


# --- lifecycle -------------------------------------------------------------------------------------------------

def test_restart_keeps_ca_token_and_state(tmp_path: Any) -> None:
    dc = DevCluster(tmp_path / "d").start()
    try:
        ca, token = dc.ca_path.read_bytes(), dc.token
        with httpx.Client(base_url=dc.url, verify=_tls(dc.ca_path), headers={"Authorization": f"Bearer {token}"}) as h:
            assert h.post("/api/v1/namespaces/default/configmaps", json=cm("keep")).status_code == 201
    finally:
        dc.stop()
    again = DevCluster(tmp_path / "d").start()
    try:
        assert again.ca_path.read_bytes() == ca and again.token == token
        with httpx.Client(base_url=again.url, verify=_tls(again.ca_path),
                          headers={"Authorization": f"Bearer {token}"}) as h:
            assert h.get("/api/v1/namespaces/default/configmaps/keep").status_code == 200
    finally:
        again.stop()
