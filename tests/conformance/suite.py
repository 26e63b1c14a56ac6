"""One suite of cluster-client semantics, run unchanged against MemoryClient and RestClient-on-devcluster.

Each test takes a `backend` fixture (a `Backend`: the client, how to let background work settle, optional
capabilities) and a fresh namespace `ns`; `test_memory.py` and `test_live.py` provide them and import this module.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from lahar.kube import errors
from lahar.kube.client import ClusterClient, Obj, WatchEvent
from lahar.kube.resources import ResourceType, core

_TYPES = {rt.plural if rt.group == "" else f"{rt.plural}.{rt.group}": rt for rt in core()}
CM = _TYPES["configmaps"]
POD = _TYPES["pods"]
NS = _TYPES["namespaces"]
DEPLOY = _TYPES["deployments.apps"]
SECRET = _TYPES["secrets"]
CRD = _TYPES["customresourcedefinitions.apiextensions.k8s.io"]


@dataclass
class Backend:
    """What a test needs from one backend: a client, `settle()` (drive background work), and capabilities."""

    name: str
    client: ClusterClient
    settle: Callable[[], None]
    poll_timeout: float = 10.0
    # a client on an engine keeping only a few watch events (None: not configurable here → skip Gone tests)
    small_history: Callable[[], tuple[ClusterClient, int]] | None = None
    # makes every open watch of the backend emit a BOOKMARK now (None: wait for the server's own bookmarks)
    send_bookmarks: Callable[[], None] | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def ns(backend: Backend) -> Iterator[str]:
    """A fresh namespace per test (deleted afterwards, best effort)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    backend.client.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(errors.ApiError):
        backend.client.delete(NS, name)


def eventually(backend: Backend, check: Callable[[], Any], *, what: str) -> Any:
    """Poll `check` (bounded) until it returns something truthy; settle the backend between tries."""
    deadline = time.monotonic() + backend.poll_timeout
    delay = 0.01
    while True:
        backend.settle()
        out = check()
        if out:
            return out
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def exists(client: ClusterClient, rt: ResourceType, name: str, namespace: str | None) -> Obj | None:
    try:
        return client.get(rt, name, namespace=namespace)
    except errors.NotFound:
        return None


_END = object()


class Collector:
    """Reads a watch on a helper thread so tests can take N events with a bounded wait."""

    def __init__(self, watch: Any) -> None:
        self.watch = watch
        self.events: queue.Queue[Any] = queue.Queue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for ev in self.watch:
                self.events.put(ev)
        except BaseException as e:  # noqa: BLE001 - surfaced to the test via .error
            self.error = e
        finally:
            self.events.put(_END)

    def take(self, n: int, *, timeout: float = 10.0, bookmarks: bool = False) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                break
            if ev is _END:
                self.events.put(_END)
                break
            if ev["type"] == "BOOKMARK" and not bookmarks:
                continue
            out.append(ev)
        return out

    def quiet(self, *, timeout: float = 0.3) -> list[WatchEvent]:
        """Whatever non-bookmark events arrive within a short window (for "nothing more" checks)."""
        return self.take(1_000, timeout=timeout)

    def close(self) -> None:
        self.watch.stop()
        self._thread.join(10)
        assert not self._thread.is_alive(), "watch did not stop"

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cm(name: str | None = None, *, data: dict[str, str] | None = None, labels: dict[str, str] | None = None,
       generate_name: str | None = None, finalizers: list[str] | None = None,
       owners: list[Obj] | None = None) -> Obj:
    meta: Obj = {}
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    if labels:
        meta["labels"] = labels
    if finalizers:
        meta["finalizers"] = finalizers
    if owners:
        meta["ownerReferences"] = [
            {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
             "uid": o["metadata"]["uid"], "blockOwnerDeletion": True}
            for o in owners
        ]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data or {})}


def pod(name: str, *, labels: dict[str, str] | None = None, grace: int | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": {}},
                                {"name": "side", "image": "busybox:1"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec}


def deployment(name: str, *, replicas: int = 1) -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    }


def names(items: list[Obj]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in items)


def rv_int(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


# ---------------------------------------------------------------------------------------------------------------
# CRUD


def test_create_get_roundtrip(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(CM, cm("a", data={"k": "v"}), namespace=ns)
    meta = made["metadata"]
    assert (made["apiVersion"], made["kind"]) == ("v1", "ConfigMap")
    assert meta["name"] == "a" and meta["namespace"] == ns
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"].endswith("Z")
    got = c.get(CM, "a", namespace=ns)
    assert (got["apiVersion"], got["kind"]) == ("v1", "ConfigMap")
    assert got["data"] == {"k": "v"}
    assert got["metadata"]["uid"] == meta["uid"]
    assert got["metadata"]["resourceVersion"] == meta["resourceVersion"]


def test_update_bumps_resource_version(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(CM, cm("a", data={"k": "1"}), namespace=ns)
    made["data"]["k"] = "2"
    updated = c.update(CM, made, namespace=ns)
    assert updated["data"] == {"k": "2"}
    assert rv_int(updated) > rv_int(made)
    assert updated["metadata"]["uid"] == made["metadata"]["uid"]
    assert c.get(CM, "a", namespace=ns)["data"] == {"k": "2"}


def test_update_without_resource_version_is_unconditional(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", data={"k": "1"}), namespace=ns)
    out = c.update(CM, cm("a", data={"k": "2"}), namespace=ns)
    assert out["data"] == {"k": "2"}


def test_list_is_a_kind_list_with_typed_items(backend: Backend, ns: str) -> None:
    c = backend.client
    for n in ("b", "a", "c"):
        c.create(CM, cm(n), namespace=ns)
    out = c.list(CM, namespace=ns)
    assert out["kind"] == "ConfigMapList"
    assert out["apiVersion"] == "v1"
    assert int(out["metadata"]["resourceVersion"]) >= max(rv_int(o) for o in out["items"])
    assert names(out["items"]) == ["a", "b", "c"]
    assert {(o["apiVersion"], o["kind"]) for o in out["items"]} == {("v1", "ConfigMap")}


def test_list_across_namespaces(backend: Backend, ns: str) -> None:
    c = backend.client
    other = f"{ns}-x"
    c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    c.create(CM, cm("one"), namespace=ns)
    c.create(CM, cm("two"), namespace=other)
    everywhere = c.list(CM)["items"]
    mine = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everywhere}
    assert {(ns, "one"), (other, "two")} <= mine
    assert names(c.list(CM, namespace=other)["items"]) == ["two"]


def test_generate_name(backend: Backend, ns: str) -> None:
    c = backend.client
    made = [c.create(CM, cm(generate_name="job-"), namespace=ns) for _ in range(3)]
    got = [m["metadata"]["name"] for m in made]
    assert len(set(got)) == 3
    for n in got:
        assert n.startswith("job-") and len(n) == len("job-") + 5
    assert all(m["metadata"]["generateName"] == "job-" for m in made)


def test_dry_run_create_does_not_persist(backend: Backend, ns: str) -> None:
    c = backend.client
    out = c.create(CM, cm("dry"), namespace=ns, dry_run=True)
    assert out["metadata"]["name"] == "dry"
    assert exists(c, CM, "dry", ns) is None


def test_generation_counts_spec_changes_only(backend: Backend, ns: str) -> None:
    c = backend.client
    d = c.create(DEPLOY, deployment("d"), namespace=ns)
    assert d["metadata"]["generation"] == 1
    d = c.patch(DEPLOY, "d", {"metadata": {"labels": {"x": "y"}}}, namespace=ns)
    assert d["metadata"]["generation"] == 1
    d = c.patch(DEPLOY, "d", {"spec": {"replicas": 3}}, namespace=ns)
    assert d["metadata"]["generation"] == 2
    d = c.patch(DEPLOY, "d", {"status": {"replicas": 3}}, namespace=ns, subresource="status")
    assert d["metadata"]["generation"] == 2


# ---------------------------------------------------------------------------------------------------------------
# Errors


def _nf_get(c: ClusterClient, ns: str) -> None:
    c.get(CM, "nope", namespace=ns)


def _nf_delete(c: ClusterClient, ns: str) -> None:
    c.delete(CM, "nope", namespace=ns)


def _nf_patch(c: ClusterClient, ns: str) -> None:
    c.patch(CM, "nope", {"data": {"a": "b"}}, namespace=ns)


def _nf_update(c: ClusterClient, ns: str) -> None:
    c.update(CM, cm("nope"), namespace=ns)


@pytest.mark.parametrize("op", [_nf_get, _nf_delete, _nf_patch, _nf_update], ids=["get", "delete", "patch", "update"])
def test_not_found(backend: Backend, ns: str, op: Callable[[ClusterClient, str], None]) -> None:
    with pytest.raises(errors.NotFound) as ei:
        op(backend.client, ns)
    e = ei.value
    assert (e.code, e.reason) == (404, "NotFound")
    assert e.message == 'configmaps "nope" not found'
    assert e.details.get("name") == "nope"
    assert e.details.get("kind") == "configmaps"


def test_not_found_names_the_group(backend: Backend, ns: str) -> None:
    with pytest.raises(errors.NotFound) as ei:
        backend.client.get(DEPLOY, "nope", namespace=ns)
    assert ei.value.message == 'deployments.apps "nope" not found'
    assert ei.value.details.get("group") == "apps"


def test_already_exists(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a"), namespace=ns)
    with pytest.raises(errors.AlreadyExists) as ei:
        c.create(CM, cm("a"), namespace=ns)
    e = ei.value
    assert isinstance(e, errors.Conflict)
    assert (e.code, e.reason) == (409, "AlreadyExists")
    assert e.message == 'configmaps "a" already exists'
    assert e.details.get("name") == "a"


def test_conflict_on_stale_resource_version(backend: Backend, ns: str) -> None:
    c = backend.client
    first = c.create(CM, cm("a", data={"k": "1"}), namespace=ns)
    c.patch(CM, "a", {"data": {"k": "2"}}, namespace=ns)
    first["data"]["k"] = "3"
    with pytest.raises(errors.Conflict) as ei:
        c.update(CM, first, namespace=ns)
    e = ei.value
    assert not isinstance(e, errors.AlreadyExists)
    assert (e.code, e.reason) == (409, "Conflict")
    assert e.message == ('Operation cannot be fulfilled on configmaps "a": the object has been modified; '
                         "please apply your changes to the latest version and try again")
    assert c.get(CM, "a", namespace=ns)["data"] == {"k": "2"}


def test_create_in_missing_namespace(backend: Backend, ns: str) -> None:
    with pytest.raises(errors.NotFound) as ei:
        backend.client.create(CM, cm("a"), namespace=f"{ns}-missing")
    assert ei.value.message == f'namespaces "{ns}-missing" not found'


def test_delete_precondition_uid_mismatch(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(CM, cm("a"), namespace=ns)
    with pytest.raises(errors.Conflict) as ei:
        c.delete(CM, "a", namespace=ns, preconditions={"uid": "not-the-uid"})
    assert ei.value.message == (f'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition '
                                f"(not-the-uid) does not match the UID in record ({made['metadata']['uid']}). The "
                                "object might have been deleted and then recreated")
    assert exists(c, CM, "a", ns) is not None
    c.delete(CM, "a", namespace=ns, preconditions={"uid": made["metadata"]["uid"]})
    assert exists(c, CM, "a", ns) is None


# ---------------------------------------------------------------------------------------------------------------
# Selectors


LABELS = {
    "a": {"app": "web", "tier": "front"},
    "b": {"app": "web", "tier": "back"},
    "c": {"app": "db"},
    "d": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),
        ("app in (web,db)", ["a", "b", "c"]),
        ("tier notin (front)", ["b", "c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("app=web,tier=back", ["b"]),
        ("app in (web, db), tier != back", ["a", "c"]),
        ("", ["a", "b", "c", "d"]),
    ],
    ids=["eq", "eqeq", "neq", "in", "notin", "exists", "not-exists", "and", "spaces", "empty"],
)
def test_label_selectors(backend: Backend, ns: str, selector: str, expected: list[str]) -> None:
    c = backend.client
    for n, labels in LABELS.items():
        c.create(CM, cm(n, labels=labels), namespace=ns)
    assert names(c.list(CM, namespace=ns, label_selector=selector)["items"]) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", ["b"]),
        ("metadata.name!=b", ["a", "c"]),
        ("spec.nodeName=n1", ["a"]),
        ("spec.nodeName=", ["c"]),
        ("spec.nodeName!=", ["a", "b"]),
        ("status.phase=Pending", ["a", "b", "c"]),
        ("metadata.name!=a,spec.nodeName!=", ["b"]),
    ],
    ids=["name", "name-neq", "node", "unbound", "bound", "phase", "and"],
)
def test_field_selectors_on_pods(backend: Backend, ns: str, selector: str, expected: list[str]) -> None:
    c = backend.client
    for n in ("a", "b", "c"):
        p = pod(n)
        p["status"] = {"phase": "Pending"}
        c.create(POD, p, namespace=ns)
        if n != "c":
            c.bind(namespace=ns, name=n, node_name="n1" if n == "a" else "n2")
    for n in ("a", "b", "c"):
        phase = c.get(POD, n, namespace=ns).get("status", {}).get("phase")
        if phase != "Pending":
            pytest.skip(f"pods do not start Pending on {backend.name} ({phase!r})")
    assert names(c.list(POD, namespace=ns, field_selector=selector)["items"]) == expected


def test_field_selector_metadata_namespace(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a"), namespace=ns)
    items = c.list(CM, field_selector=f"metadata.namespace={ns}")["items"]
    assert names(items) == ["a"]


# ---------------------------------------------------------------------------------------------------------------
# Patches


def test_merge_patch_sets_and_removes(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", data={"keep": "1", "drop": "2"}, labels={"x": "1"}), namespace=ns)
    out = c.patch(CM, "a", {"data": {"drop": None, "new": "3"}, "metadata": {"labels": {"y": "2"}}},
                  namespace=ns, patch_type="merge")
    assert out["data"] == {"keep": "1", "new": "3"}
    assert out["metadata"]["labels"] == {"x": "1", "y": "2"}


def test_json_patch(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", data={"k": "1", "gone": "x"}), namespace=ns)
    ops = [{"op": "replace", "path": "/data/k", "value": "2"}, {"op": "remove", "path": "/data/gone"},
           {"op": "add", "path": "/metadata/labels", "value": {"l": "v"}}]
    out = c.patch(CM, "a", ops, namespace=ns, patch_type="json")
    assert out["data"] == {"k": "2"}
    assert out["metadata"]["labels"] == {"l": "v"}


def test_json_patch_failed_test_op_changes_nothing(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", data={"k": "1"}), namespace=ns)
    ops = [{"op": "test", "path": "/data/k", "value": "nope"}, {"op": "replace", "path": "/data/k", "value": "2"}]
    with pytest.raises(errors.ApiError) as ei:
        c.patch(CM, "a", ops, namespace=ns, patch_type="json")
    assert ei.value.code in (409, 422, 500)
    assert c.get(CM, "a", namespace=ns)["data"] == {"k": "1"}


def test_strategic_patch_merges_containers_by_name(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p"), namespace=ns)
    out = c.patch(POD, "p", {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}},
                  namespace=ns, patch_type="strategic")
    containers = {x["name"]: x["image"] for x in out["spec"]["containers"]}
    assert containers == {"main": "busybox", "side": "busybox:2"}


def test_merge_patch_replaces_lists(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", finalizers=["x.io/a", "x.io/b"]), namespace=ns)
    out = c.patch(CM, "a", {"metadata": {"finalizers": ["x.io/b"]}}, namespace=ns, patch_type="merge")
    assert out["metadata"]["finalizers"] == ["x.io/b"]
    c.patch(CM, "a", {"metadata": {"finalizers": None}}, namespace=ns)


def test_patch_with_stale_resource_version_conflicts(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(CM, cm("a"), namespace=ns)
    c.patch(CM, "a", {"data": {"k": "1"}}, namespace=ns)
    with pytest.raises(errors.Conflict):
        c.patch(CM, "a", {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]},
                          "data": {"k": "2"}}, namespace=ns)


# ---------------------------------------------------------------------------------------------------------------
# Status subresource


def test_status_subresource_isolation(backend: Backend, ns: str) -> None:
    c = backend.client
    d = c.create(DEPLOY, {**deployment("d"), "status": {"replicas": 7}}, namespace=ns)
    assert d.get("status", {}).get("replicas") != 7, "create must ignore status for types with a status subresource"
    d["spec"]["replicas"] = 2
    d["status"] = {"replicas": 5}
    d = c.update(DEPLOY, d, namespace=ns)
    assert d["spec"]["replicas"] == 2
    assert d.get("status", {}).get("replicas") != 5, "main update must keep the old status"
    d["spec"]["replicas"] = 9
    d["status"] = {"replicas": 2, "readyReplicas": 1}
    d = c.update_status(DEPLOY, d, namespace=ns)
    assert d["status"]["replicas"] == 2 and d["status"]["readyReplicas"] == 1
    assert d["spec"]["replicas"] == 2, "status update must keep the old spec"
    d = c.patch(DEPLOY, "d", {"spec": {"replicas": 4}, "status": {"replicas": 4}}, namespace=ns,
                subresource="status")
    assert (d["spec"]["replicas"], d["status"]["replicas"]) == (2, 4)
    d = c.patch(DEPLOY, "d", {"spec": {"replicas": 3}, "status": {"replicas": 1}}, namespace=ns)
    assert (d["spec"]["replicas"], d["status"]["replicas"]) == (3, 4)


def test_status_update_with_stale_resource_version_conflicts(backend: Backend, ns: str) -> None:
    c = backend.client
    d = c.create(DEPLOY, deployment("d"), namespace=ns)
    c.patch(DEPLOY, "d", {"spec": {"replicas": 2}}, namespace=ns)
    d["status"] = {"replicas": 1}
    with pytest.raises(errors.Conflict):
        c.update_status(DEPLOY, d, namespace=ns)


# ---------------------------------------------------------------------------------------------------------------
# Deletion: finalizers, cascades, graceful pods, namespaces


def test_delete_returns_the_object(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(CM, cm("a"), namespace=ns)
    out = c.delete(CM, "a", namespace=ns)
    # kube-apiserver answers a DELETE that removes a ConfigMap at once with a Status naming the uid (its ConfigMap
    # registry does not return deleted objects); devcluster returns the object (docs/compatibility.md).
    uid = out["details"]["uid"] if out.get("kind") == "Status" else out["metadata"]["uid"]
    assert uid == made["metadata"]["uid"]
    assert exists(c, CM, "a", ns) is None


def test_delete_with_finalizers_then_finalizer_removal(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", finalizers=["example.com/hold"]), namespace=ns)
    out = c.delete(CM, "a", namespace=ns)
    assert out["metadata"].get("deletionTimestamp")
    assert out["metadata"].get("deletionGracePeriodSeconds") == 0
    held = c.get(CM, "a", namespace=ns)
    assert held["metadata"]["deletionTimestamp"] == out["metadata"]["deletionTimestamp"]
    # metadata other than finalizers stays writable on a deleting object
    held = c.patch(CM, "a", {"metadata": {"labels": {"still": "writable"}}}, namespace=ns)
    assert held["metadata"]["labels"] == {"still": "writable"}
    with pytest.raises((errors.Forbidden, errors.Invalid)) as ei:
        c.patch(CM, "a", {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}, namespace=ns)
    assert "no new finalizers can be added if the object is being deleted" in ei.value.message
    c.patch(CM, "a", {"metadata": {"finalizers": None}}, namespace=ns)
    eventually(backend, lambda: exists(c, CM, "a", ns) is None, what="finalized object to be removed")


def test_second_delete_of_a_finalizing_object_keeps_it(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", finalizers=["example.com/hold"]), namespace=ns)
    first = c.delete(CM, "a", namespace=ns)
    again = c.delete(CM, "a", namespace=ns)
    assert again["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    c.patch(CM, "a", {"metadata": {"finalizers": []}}, namespace=ns)


def _family(c: ClusterClient, ns: str) -> tuple[Obj, list[str]]:
    owner = c.create(CM, cm("owner"), namespace=ns)
    kids = []
    for i in range(3):
        kids.append(c.create(CM, cm(f"kid-{i}", owners=[owner]), namespace=ns)["metadata"]["name"])
    return owner, kids


def test_cascade_background(backend: Backend, ns: str) -> None:
    c = backend.client
    _, kids = _family(c, ns)
    c.delete(CM, "owner", namespace=ns, propagation_policy="Background")
    assert exists(c, CM, "owner", ns) is None
    eventually(backend, lambda: all(exists(c, CM, k, ns) is None for k in kids), what="dependents to be collected")


def test_cascade_default_is_background(backend: Backend, ns: str) -> None:
    c = backend.client
    _, kids = _family(c, ns)
    c.delete(CM, "owner", namespace=ns)
    assert exists(c, CM, "owner", ns) is None
    eventually(backend, lambda: all(exists(c, CM, k, ns) is None for k in kids), what="dependents to be collected")


def test_cascade_foreground(backend: Backend, ns: str) -> None:
    c = backend.client
    _, kids = _family(c, ns)
    out = c.delete(CM, "owner", namespace=ns, propagation_policy="Foreground")
    assert out["metadata"].get("deletionTimestamp")
    assert "foregroundDeletion" in out["metadata"].get("finalizers", [])
    eventually(backend, lambda: exists(c, CM, "owner", ns) is None, what="owner to go after its dependents")
    assert all(exists(c, CM, k, ns) is None for k in kids)


def test_cascade_orphan(backend: Backend, ns: str) -> None:
    c = backend.client
    owner, kids = _family(c, ns)
    c.delete(CM, "owner", namespace=ns, propagation_policy="Orphan")
    eventually(backend, lambda: exists(c, CM, "owner", ns) is None, what="owner to be removed")

    def orphaned() -> bool:
        objs = [exists(c, CM, k, ns) for k in kids]
        return all(o is not None and not o["metadata"].get("ownerReferences") for o in objs)

    eventually(backend, orphaned, what="dependents to lose their ownerReferences")
    for _ in range(3):
        backend.settle()
    assert all(exists(c, CM, k, ns) is not None for k in kids)


def test_dependent_of_a_missing_owner_is_collected(backend: Backend, ns: str) -> None:
    c = backend.client
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    c.create(CM, cm("stray", owners=[ghost]), namespace=ns)
    eventually(backend, lambda: exists(c, CM, "stray", ns) is None, what="orphan dependent to be collected")


def test_graceful_delete_of_a_bound_pod(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p", grace=15), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="conformance-node")
    out = c.delete(POD, "p", namespace=ns)
    assert out["metadata"].get("deletionTimestamp")
    assert out["metadata"].get("deletionGracePeriodSeconds") == 15
    still = c.get(POD, "p", namespace=ns)
    assert still["metadata"]["deletionTimestamp"]
    c.delete(POD, "p", namespace=ns, grace_period_seconds=0)
    assert exists(c, POD, "p", ns) is None


def test_graceful_delete_option_overrides_pod_grace(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p", grace=15), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="conformance-node")
    out = c.delete(POD, "p", namespace=ns, grace_period_seconds=5)
    assert out["metadata"].get("deletionGracePeriodSeconds") == 5
    c.delete(POD, "p", namespace=ns, grace_period_seconds=0)


def test_unbound_pod_is_deleted_at_once(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p", grace=15), namespace=ns)
    c.delete(POD, "p", namespace=ns)
    assert exists(c, POD, "p", ns) is None


def test_namespace_deletion(backend: Backend, ns: str) -> None:
    c = backend.client
    doomed = f"{ns}-doomed"
    c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": doomed}})
    created = c.get(NS, doomed)
    assert created.get("status", {}).get("phase") == "Active"
    c.create(CM, cm("a"), namespace=doomed)
    c.create(CM, cm("held", finalizers=["example.com/hold"]), namespace=doomed)
    out = c.delete(NS, doomed)
    assert out["metadata"].get("deletionTimestamp")
    assert out.get("status", {}).get("phase") == "Terminating"
    assert "kubernetes" in out.get("spec", {}).get("finalizers", [])
    with pytest.raises(errors.Forbidden) as ei:
        c.create(CM, cm("late"), namespace=doomed)
    assert f"unable to create new content in namespace {doomed} because it is being terminated" in ei.value.message
    eventually(backend, lambda: exists(c, CM, "a", doomed) is None, what="namespace content to be deleted")
    held = eventually(backend, lambda: exists(c, CM, "held", doomed), what="finalizing object to stay")
    assert held["metadata"].get("deletionTimestamp")
    assert exists(c, NS, doomed, None) is not None, "namespace must wait for its finalizing content"
    c.patch(CM, "held", {"metadata": {"finalizers": None}}, namespace=doomed)
    eventually(backend, lambda: exists(c, NS, doomed, None) is None, what="namespace to be removed")


# ---------------------------------------------------------------------------------------------------------------
# Pod subresources: binding and eviction


def test_bind(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p"), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="node-a", annotations={"lahar.sh/decision": "x"})
    got = c.get(POD, "p", namespace=ns)
    assert got["spec"]["nodeName"] == "node-a"
    assert got["metadata"].get("annotations", {}).get("lahar.sh/decision") == "x"
    conditions = {x["type"]: x["status"] for x in got.get("status", {}).get("conditions", [])}
    assert conditions.get("PodScheduled") == "True"


def test_bind_twice_conflicts(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p"), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="node-a")
    with pytest.raises(errors.Conflict) as ei:
        c.bind(namespace=ns, name="p", node_name="node-b")
    assert "is already assigned to node" in ei.value.message
    assert c.get(POD, "p", namespace=ns)["spec"]["nodeName"] == "node-a"


def test_bind_missing_pod(backend: Backend, ns: str) -> None:
    with pytest.raises(errors.NotFound):
        backend.client.bind(namespace=ns, name="nope", node_name="node-a")


def test_evict_unbound_pod_removes_it(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p"), namespace=ns)
    c.evict(namespace=ns, name="p")
    assert exists(c, POD, "p", ns) is None


def test_evict_bound_pod_is_graceful(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p", grace=20), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="conformance-node")
    c.evict(namespace=ns, name="p")
    got = c.get(POD, "p", namespace=ns)
    assert got["metadata"].get("deletionTimestamp")
    assert got["metadata"].get("deletionGracePeriodSeconds") == 20
    c.delete(POD, "p", namespace=ns, grace_period_seconds=0)


def test_evict_missing_pod(backend: Backend, ns: str) -> None:
    with pytest.raises(errors.NotFound):
        backend.client.evict(namespace=ns, name="nope")


# ---------------------------------------------------------------------------------------------------------------
# Watch


def _current_rv(c: ClusterClient, ns: str) -> str:
    return c.list(CM, namespace=ns)["metadata"]["resourceVersion"]


def test_watch_sees_writes_in_order(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        c.create(CM, cm("a"), namespace=ns)
        c.patch(CM, "a", {"data": {"k": "1"}}, namespace=ns)
        c.create(CM, cm("b"), namespace=ns)
        c.delete(CM, "a", namespace=ns)
        events = col.take(4)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    rvs = [rv_int(e["object"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4
    assert rvs[0] > int(rv)
    assert events[1]["object"]["data"] == {"k": "1"}
    assert {(e["object"]["apiVersion"], e["object"]["kind"]) for e in events} == {("v1", "ConfigMap")}


@pytest.mark.parametrize("start", ["0", None], ids=["rv-0", "rv-unset"])
def test_watch_from_zero_lists_existing_first(backend: Backend, ns: str, start: str | None) -> None:
    c = backend.client
    for n in ("a", "b"):
        c.create(CM, cm(n), namespace=ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=start)) as col:
        first = col.take(2)
        c.create(CM, cm("c"), namespace=ns)
        later = col.take(1)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in first) == [("ADDED", "a"), ("ADDED", "b")]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in later] == [("ADDED", "c")]


def test_watch_resume_gets_exactly_the_later_events(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a"), namespace=ns)
    mark = c.patch(CM, "a", {"data": {"v": "1"}}, namespace=ns)["metadata"]["resourceVersion"]
    c.patch(CM, "a", {"data": {"v": "2"}}, namespace=ns)
    c.create(CM, cm("b"), namespace=ns)
    c.delete(CM, "a", namespace=ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=mark)) as col:
        events = col.take(3)
        extra = col.quiet()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert events[0]["object"]["data"] == {"v": "2"}
    assert extra == []


def test_watch_is_scoped_to_its_namespace(backend: Backend, ns: str) -> None:
    c = backend.client
    other = f"{ns}-other"
    c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        c.create(CM, cm("elsewhere"), namespace=other)
        c.create(CM, cm("here"), namespace=ns)
        events = col.take(1)
        extra = col.quiet()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "here")]
    assert extra == []


def test_watch_label_selector_transitions(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a", labels={"app": "web"}), namespace=ns)
    c.create(CM, cm("b", labels={"app": "db"}), namespace=ns)
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv, label_selector="app=web")) as col:
        c.patch(CM, "a", {"metadata": {"labels": {"app": "db"}}}, namespace=ns)   # stops matching
        c.patch(CM, "b", {"metadata": {"labels": {"app": "web"}}}, namespace=ns)  # starts matching
        c.patch(CM, "b", {"data": {"k": "v"}}, namespace=ns)                     # still matching
        c.patch(CM, "a", {"data": {"k": "v"}}, namespace=ns)                     # still not matching
        events = col.take(3)
        extra = col.quiet()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("DELETED", "a"), ("ADDED", "b"), ("MODIFIED", "b")]
    assert extra == []


def test_watch_field_selector(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv, field_selector="metadata.name=b")) as col:
        c.create(CM, cm("a"), namespace=ns)
        c.create(CM, cm("b"), namespace=ns)
        events = col.take(1)
        extra = col.quiet()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]
    assert extra == []


def test_watch_stop_ends_iteration(backend: Backend, ns: str) -> None:
    c = backend.client
    w = c.watch(CM, namespace=ns, resource_version=_current_rv(c, ns))
    col = Collector(w)
    col.close()
    assert col.error is None


def test_watch_timeout_seconds_ends_the_stream(backend: Backend, ns: str) -> None:
    c = backend.client
    w = c.watch(CM, namespace=ns, resource_version=_current_rv(c, ns), timeout_seconds=1)
    done = threading.Event()
    got: list[Any] = []

    def drain() -> None:
        got.extend(w)
        done.set()

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    ended = done.wait(15)
    w.stop()
    t.join(5)
    assert ended, "a watch with timeout_seconds must end by itself"
    assert [e for e in got if e["type"] != "BOOKMARK"] == []


def test_watch_expired_resource_version_is_gone(backend: Backend, ns: str) -> None:
    if backend.small_history is None:
        pytest.skip(f"watch history size is not configurable on {backend.name}")
    c, history = backend.small_history()
    c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}})
    first = c.create(CM, cm("a"), namespace="gone")["metadata"]["resourceVersion"]
    for i in range(history * 2 + 5):
        c.patch(CM, "a", {"data": {"i": str(i)}}, namespace="gone")
    with pytest.raises(errors.Gone) as ei:
        w = c.watch(CM, namespace="gone", resource_version=first)
        try:
            next(iter(w))
        finally:
            w.stop()
    assert ei.value.code == 410
    # a recent version is still fine
    recent = c.get(CM, "a", namespace="gone")["metadata"]["resourceVersion"]
    with Collector(c.watch(CM, namespace="gone", resource_version=recent)) as col:
        c.patch(CM, "a", {"data": {"i": "last"}}, namespace="gone")
        assert [e["type"] for e in col.take(1)] == ["MODIFIED"]


def test_watch_bookmarks(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(CM, cm("a"), namespace=ns)
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv, allow_bookmarks=True)) as col:
        if backend.send_bookmarks is not None:
            backend.send_bookmarks()
            marks = col.take(1, bookmarks=True, timeout=5)
        else:
            marks = col.take(1, bookmarks=True, timeout=backend.extras.get("bookmark_wait", 3.0))
            if not marks:
                pytest.skip(f"no bookmark within the wait on {backend.name}")
    assert marks and marks[0]["type"] == "BOOKMARK"
    obj = marks[0]["object"]
    assert obj["kind"] == "ConfigMap"
    assert int(obj["metadata"]["resourceVersion"]) >= int(rv)
    assert set(obj["metadata"]) == {"resourceVersion"} or set(obj["metadata"]) <= {"resourceVersion", "annotations"}


def test_watch_without_bookmarks_gets_none(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv, allow_bookmarks=False)) as col:
        if backend.send_bookmarks is not None:
            backend.send_bookmarks()
        else:
            time.sleep(backend.extras.get("bookmark_wait", 3.0))
        c.create(CM, cm("a"), namespace=ns)
        events = col.take(1, bookmarks=True)
    assert [e["type"] for e in events] == ["ADDED"]


def test_concurrent_writers_are_all_seen_once(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    n_threads, per_thread = 4, 5
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        def writer(t: int) -> None:
            for i in range(per_thread):
                c.create(CM, cm(f"w{t}-{i}"), namespace=ns)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events = col.take(n_threads * per_thread)
    got = [e["object"]["metadata"]["name"] for e in events]
    assert sorted(got) == sorted(f"w{t}-{i}" for t in range(n_threads) for i in range(per_thread))
    rvs = [rv_int(e["object"]) for e in events]
    assert rvs == sorted(rvs)



def test_watch_cluster_scoped(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = c.list(NS)["metadata"]["resourceVersion"]
    with Collector(c.watch(NS, resource_version=rv)) as col:
        c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{ns}-w"}})
        c.create(CM, cm("noise"), namespace=ns)
        # on a shared cluster other tests' namespaces change too (a deleted one is finalized later: MODIFIED, then
        # DELETED); only Namespaces may come, and ours first as ADDED
        events: list = []
        while not any(e["object"]["metadata"]["name"] == f"{ns}-w" for e in events):
            taken = col.take(1)
            if not taken:
                break
            events += taken
    assert all(e["object"]["kind"] == "Namespace" for e in events)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events
            if e["object"]["metadata"]["name"] == f"{ns}-w"] == [("ADDED", f"{ns}-w")]


# ---------------------------------------------------------------------------------------------------------------
# Validation errors carry their causes across the wire


def test_invalid_name_has_causes(backend: Backend, ns: str) -> None:
    with pytest.raises(errors.Invalid) as ei:
        backend.client.create(CM, cm("Bad_Name"), namespace=ns)
    e = ei.value
    assert (e.code, e.reason) == (422, "Invalid")
    assert e.message.startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    causes = e.details.get("causes") or []
    assert any(cause.get("field") == "metadata.name" and cause.get("reason") == "FieldValueInvalid"
               for cause in causes)
    assert e.details.get("name") == "Bad_Name" and e.details.get("kind") == "ConfigMap"


# ---------------------------------------------------------------------------------------------------------------
# CustomResourceDefinitions


WIDGET = ResourceType(group="conformance.lahar.sh", version="v1", kind="Widget", plural="widgets", namespaced=True,
                      subresources=frozenset({"status"}))


def _widget_crd() -> Obj:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 1, "default": 3},
                "color": {"type": "string", "enum": ["red", "blue"]},
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.conformance.lahar.sh"},
        "spec": {"group": "conformance.lahar.sh", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                           "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": schema}}]},
    }


@pytest.fixture
def widgets(backend: Backend) -> Iterator[ResourceType]:
    c = backend.client
    with contextlib.suppress(errors.AlreadyExists):
        c.create(CRD, _widget_crd())

    def established() -> bool:
        crd = c.get(CRD, "widgets.conformance.lahar.sh")
        # a fresh CRD on kube-apiserver reads `status: {conditions: null}` until its controllers have run
        conds = {x["type"]: x["status"] for x in (crd.get("status") or {}).get("conditions") or []}
        return conds.get("Established") == "True" and conds.get("NamesAccepted") == "True"

    eventually(backend, established, what="CRD to be Established")
    eventually(backend, lambda: _served(c), what="the new type to be served")
    yield WIDGET


def _served(c: ClusterClient) -> bool:
    try:
        c.list(WIDGET, namespace="default")
    except errors.NotFound:
        return False
    return True


def widget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "conformance.lahar.sh/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_custom_resource_crud_with_defaults(backend: Backend, ns: str, widgets: ResourceType) -> None:
    c = backend.client
    made = c.create(widgets, widget("w", color="red"), namespace=ns)
    assert made["spec"] == {"color": "red", "size": 3}
    assert (made["apiVersion"], made["kind"]) == ("conformance.lahar.sh/v1", "Widget")
    assert made["metadata"]["generation"] == 1
    out = c.patch(widgets, "w", {"spec": {"size": 5}}, namespace=ns)
    assert out["spec"]["size"] == 5 and out["metadata"]["generation"] == 2
    out = c.patch(widgets, "w", {"status": {"phase": "Ready"}}, namespace=ns, subresource="status")
    assert out["status"] == {"phase": "Ready"} and out["metadata"]["generation"] == 2
    listed = c.list(widgets, namespace=ns)
    assert listed["kind"] == "WidgetList"
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [("Widget", "w")]


def test_custom_resource_schema_violation_is_invalid(backend: Backend, ns: str, widgets: ResourceType) -> None:
    with pytest.raises(errors.Invalid) as ei:
        backend.client.create(widgets, widget("w", size=0, color="green"), namespace=ns)
    assert ei.value.message.startswith('Widget.conformance.lahar.sh "w" is invalid: ')
    fields = sorted(cause.get("field") for cause in ei.value.details.get("causes", []))
    assert fields == ["spec.color", "spec.size"]


def test_custom_resource_unknown_fields_are_pruned(backend: Backend, ns: str, widgets: ResourceType) -> None:
    made = backend.client.create(widgets, widget("w", color="blue", shape="round"), namespace=ns)
    assert "shape" not in made["spec"]


def test_strategic_patch_on_a_custom_resource_is_unsupported(backend: Backend, ns: str,
                                                            widgets: ResourceType) -> None:
    c = backend.client
    c.create(widgets, widget("w"), namespace=ns)
    with pytest.raises(errors.UnsupportedMediaType) as ei:
        c.patch(widgets, "w", {"spec": {"size": 2}}, namespace=ns, patch_type="strategic")
    assert ei.value.code == 415


def test_custom_resource_watch(backend: Backend, ns: str, widgets: ResourceType) -> None:
    c = backend.client
    rv = c.list(widgets, namespace=ns)["metadata"]["resourceVersion"]
    with Collector(c.watch(widgets, namespace=ns, resource_version=rv)) as col:
        c.create(widgets, widget("w"), namespace=ns)
        c.delete(widgets, "w", namespace=ns)
        events = col.take(2)
    assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "Widget"), ("DELETED", "Widget")]


# ---------------------------------------------------------------------------------------------------------------
# Informers on top of the client


def test_informer_tracks_the_cluster(backend: Backend, ns: str) -> None:
    from lahar.kube import informers

    c = backend.client
    c.create(CM, cm("before", labels={"team": "red"}), namespace=ns)
    log: list[tuple[str, str]] = []
    inf = informers.Informer(c, CM, namespace=ns, backoff=(0.01, 0.1))
    inf.add_handler(on_add=lambda o: log.append(("add", o["metadata"]["name"])),
                    on_update=lambda old, new: log.append(("update", new["metadata"]["name"])),
                    on_delete=lambda o: log.append(("delete", o["metadata"]["name"])))
    inf.add_index("team", lambda o: (o["metadata"].get("labels") or {}).get("team"))
    with inf:
        assert inf.wait_for_sync(10)
        c.create(CM, cm("after", labels={"team": "red"}), namespace=ns)
        c.patch(CM, "before", {"metadata": {"labels": {"team": "blue"}}}, namespace=ns)
        c.delete(CM, "after", namespace=ns)
        eventually(backend, lambda: len(log) >= 4, what="informer handlers")
        assert log == [("add", "before"), ("add", "after"), ("update", "before"), ("delete", "after")]
        assert [o["metadata"]["name"] for o in inf.list()] == ["before"]
        assert [o["metadata"]["name"] for o in inf.by_index("team", "blue")] == ["before"]
        assert inf.by_index("team", "red") == []
    assert not any(t.is_alive() for t in inf._threads)


class _Severable:
    """Delegates to a client; `cut()` stops open watches and refuses new ones until `heal()`."""

    def __init__(self, inner: ClusterClient) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.down = False
        self.watches: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def watch(self, rt: ResourceType, **kw: Any) -> Any:
        if self.down:
            raise errors.ServiceUnavailable("connection refused")
        w = self.inner.watch(rt, **kw)
        self.watches.append(w)
        return w

    def cut(self) -> None:
        self.down = True
        for w in self.watches:
            w.stop()


def test_informer_relists_after_gone_and_reconciles_missed_deletions(backend: Backend, ns: str) -> None:
    if backend.small_history is None:
        pytest.skip(f"watch history size is not configurable on {backend.name}")
    from lahar.kube import informers

    base, history = backend.small_history()
    space = f"relist-{uuid.uuid4().hex[:6]}"
    base.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": space}})
    for n in ("a", "b"):
        base.create(CM, cm(n), namespace=space)
    c = _Severable(base)
    deleted: list[str] = []
    inf = informers.Informer(c, CM, namespace=space, backoff=(0.01, 0.05))
    inf.on_delete(lambda o: deleted.append(o["metadata"]["name"]))
    with inf:
        assert inf.wait_for_sync(10)
        eventually(backend, lambda: c.watches, what="the informer's watch")
        c.cut()
        base.delete(CM, "a", namespace=space)
        for i in range(history * 2 + 5):
            base.patch(CM, "b", {"data": {"i": str(i)}}, namespace=space)
        c.down = False
        eventually(backend, lambda: inf.relists >= 2, what="a relist after Gone")
        eventually(backend, lambda: [o["metadata"]["name"] for o in inf.list()] == ["b"], what="reconciled store")
        assert deleted == ["a"]
        assert inf.get(space, "b")["data"] == {"i": str(history * 2 + 4)}



_ENGINE_GAP = "engine gap vs kube-apiserver (same on both backends)"


@pytest.mark.parametrize(
    ("label_selector", "field_selector"),
    [("app in (web", None), ("a=b=c", None),
     (None, "spec.nope=x"),
     (None, "metadata.name")],
    ids=["unclosed-set", "double-eq", "unknown-field", "no-operator"],
)
def test_bad_selectors_are_bad_requests(backend: Backend, ns: str, label_selector: str | None,
                                        field_selector: str | None) -> None:
    with pytest.raises(errors.BadRequest):
        backend.client.list(CM, namespace=ns, label_selector=label_selector, field_selector=field_selector)


def test_secret_string_data_is_encoded(backend: Backend, ns: str) -> None:
    c = backend.client
    made = c.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                             "stringData": {"user": "admin"}, "data": {"pw": "aHVudGVyMg=="}}, namespace=ns)
    assert made["data"] == {"user": "YWRtaW4=", "pw": "aHVudGVyMg=="}
    assert "stringData" not in made
    assert made.get("type") == "Opaque"


def test_racing_updates_exactly_one_wins(backend: Backend, ns: str) -> None:
    c = backend.client
    base = c.create(CM, cm("race", data={"v": "0"}), namespace=ns)
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def racer(i: int) -> None:
        body = {**base, "data": {"v": str(i)}}
        start.wait()
        try:
            c.update(CM, body, namespace=ns)
            result = "ok"
        except errors.Conflict:
            result = "conflict"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(outcomes) == ["conflict"] * 5 + ["ok"]


def test_watch_sees_finalizer_lifecycle(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        c.create(CM, cm("f", finalizers=["example.com/hold"]), namespace=ns)
        c.delete(CM, "f", namespace=ns)
        c.patch(CM, "f", {"metadata": {"finalizers": None}}, namespace=ns)
        events = col.take(3)
        extra = col.quiet()
    # kube-apiserver: the update that empties the finalizers of a deleting object is the deletion (one DELETED)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert extra == []
    assert events[1]["object"]["metadata"].get("deletionTimestamp")
    assert events[-1]["object"]["metadata"].get("deletionTimestamp")


def test_large_and_unicode_objects_round_trip_through_a_watch(backend: Backend, ns: str) -> None:
    c = backend.client
    big = "x" * 300_000
    text = "ünïcödé ✓ 日本語 🚀 \"quoted\" \\ back\nslash"
    rv = _current_rv(c, ns)
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        made = c.create(CM, cm("big", data={"big": big, "text": text}, labels={"k": "v"}), namespace=ns)
        c.create(CM, cm("small"), namespace=ns)
        events = col.take(2)
    assert made["data"] == {"big": big, "text": text}
    assert c.get(CM, "big", namespace=ns)["data"]["text"] == text
    assert [e["object"]["metadata"]["name"] for e in events] == ["big", "small"]
    assert events[0]["object"]["data"] == {"big": big, "text": text}


def test_watch_keeps_up_with_a_burst(backend: Backend, ns: str) -> None:
    c = backend.client
    rv = _current_rv(c, ns)
    n = 150
    with Collector(c.watch(CM, namespace=ns, resource_version=rv)) as col:
        c.create(CM, cm("burst", data={"i": "0"}), namespace=ns)
        for i in range(1, n):
            c.patch(CM, "burst", {"data": {"i": str(i)}}, namespace=ns)
        events = col.take(n, timeout=20)
    assert [e["object"]["data"]["i"] for e in events] == [str(i) for i in range(n)]



def test_body_namespace_must_match_the_request(backend: Backend, ns: str) -> None:
    c = backend.client
    body = cm("a")
    body["metadata"]["namespace"] = "default"
    with pytest.raises(errors.BadRequest) as ei:
        c.create(CM, body, namespace=ns)
    assert "does not match the namespace sent on the request" in ei.value.message
    assert exists(c, CM, "a", ns) is None and exists(c, CM, "a", "default") is None


def test_body_kind_must_match_the_endpoint(backend: Backend, ns: str) -> None:
    body = cm("a")
    body["kind"] = "Secret"
    with pytest.raises(errors.BadRequest):
        backend.client.create(CM, body, namespace=ns)


def test_unknown_fields_on_built_ins_are_dropped(backend: Backend, ns: str) -> None:
    body = cm("a", data={"k": "v"})
    body["bogus"] = {"x": 1}
    made = backend.client.create(CM, body, namespace=ns)
    assert "bogus" not in made
    assert "bogus" not in backend.client.get(CM, "a", namespace=ns)


def test_unscheduled_pod_watch_sees_binding_as_deleted(backend: Backend, ns: str) -> None:
    """The scheduler's view: `spec.nodeName=` watches pending pods; binding moves a pod out of it."""
    c = backend.client
    rv = c.list(POD, namespace=ns)["metadata"]["resourceVersion"]
    with Collector(c.watch(POD, namespace=ns, resource_version=rv, field_selector="spec.nodeName=")) as col:
        c.create(POD, pod("p"), namespace=ns)
        c.bind(namespace=ns, name="p", node_name="node-a")
        events = col.take(2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "p"), ("DELETED", "p")]
    # kube's cacher: the DELETED of an object leaving the selector carries its previous content at the new version
    assert "nodeName" not in events[1]["object"]["spec"]
    assert events[1]["object"]["metadata"]["resourceVersion"] == c.get(POD, "p", namespace=ns)["metadata"][
        "resourceVersion"]


def test_pod_status_update_changes_only_status(backend: Backend, ns: str) -> None:
    c = backend.client
    p = c.create(POD, pod("p"), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="node-a")
    p = c.get(POD, "p", namespace=ns)
    p["status"]["phase"] = "Running"
    p["spec"]["containers"][0]["image"] = "changed"
    out = c.update_status(POD, p, namespace=ns)
    assert out["status"]["phase"] == "Running"
    assert out["spec"]["containers"][0]["image"] == "busybox"
    assert out["spec"]["nodeName"] == "node-a"
    assert c.list(POD, namespace=ns, field_selector="status.phase=Running")["items"][0]["metadata"]["name"] == "p"


def test_evict_with_grace_period(backend: Backend, ns: str) -> None:
    c = backend.client
    c.create(POD, pod("p", grace=20), namespace=ns)
    c.bind(namespace=ns, name="p", node_name="conformance-node")
    c.evict(namespace=ns, name="p", grace_period_seconds=3)
    assert c.get(POD, "p", namespace=ns)["metadata"].get("deletionGracePeriodSeconds") == 3
    c.delete(POD, "p", namespace=ns, grace_period_seconds=0)


__all__ = ["Backend", "Collector", "eventually", "ns", "widgets", *sorted(n for n in list(globals()) if n.startswith("test_"))]
