"""MemoryClient: the ClusterClient port over the store engine, as unit tests elsewhere will use it."""

from __future__ import annotations

import threading

import pytest

from lahar.kube import client, errors, resources
from lahar.kube.apiserver import store
from lahar.kube.apiserver.memory import MemoryClient

REG = resources.in_tree()
PODS = REG.get("", "v1", "pods")
CM = REG.get("", "v1", "configmaps")
JOBS = REG.get("batch.volcano.sh", "v1alpha1", "jobs")
QUEUES = REG.get("scheduling.volcano.sh", "v1beta1", "queues")
PODGROUPS = REG.get("scheduling.volcano.sh", "v1beta1", "podgroups")


@pytest.fixture
def c() -> MemoryClient:
    cl = MemoryClient.with_crds()
    yield cl
    cl.close()


def test_satisfies_the_port(c: MemoryClient) -> None:
    assert isinstance(c, client.ClusterClient)
    w = c.watch(CM, namespace="default", timeout_seconds=0)
    assert isinstance(w, client.Watch)
    assert list(w) == []


def test_plain_client_does_not_serve_volcano() -> None:
    with MemoryClient() as plain:
        assert plain.registry.get("batch.volcano.sh", "v1alpha1", "jobs") is None
        assert plain.registry.get("", "v1", "pods") is not None


def test_crud_round_trip(c: MemoryClient) -> None:
    job = c.create(JOBS, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                          "metadata": {"name": "j", "namespace": "default"},
                          "spec": {"minAvailable": 1, "tasks": []}})
    assert job["metadata"]["generation"] == 1
    job["spec"]["minAvailable"] = 2
    updated = c.update(JOBS, job)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(errors.Conflict):
        c.update(JOBS, job)
    st = c.update_status(JOBS, updated | {"status": {"state": {"phase": "Running"}}})
    assert st["status"]["state"]["phase"] == "Running" and st["metadata"]["generation"] == 2
    patched = c.patch(JOBS, "j", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    assert patched["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(errors.UnsupportedMediaType):
        c.patch(JOBS, "j", {"spec": {}}, namespace="default", patch_type="strategic")
    assert [j["metadata"]["name"] for j in c.list(JOBS, namespace="default")["items"]] == ["j"]
    c.delete(JOBS, "j", namespace="default")
    with pytest.raises(errors.NotFound) as err:
        c.get(JOBS, "j", namespace="default")
    assert err.value.message == 'jobs.batch.volcano.sh "j" not found'


def test_namespace_defaults_to_default(c: MemoryClient) -> None:
    c.create(CM, {"metadata": {"name": "a"}})
    assert c.get(CM, "a")["metadata"]["namespace"] == "default"
    q = c.create(QUEUES, {"metadata": {"name": "q"}, "spec": {"weight": 1}})
    assert "namespace" not in q["metadata"]


def test_dry_run(c: MemoryClient) -> None:
    c.create(CM, {"metadata": {"name": "dry"}}, dry_run=True)
    assert c.list(CM, namespace="default")["items"] == []


def test_bind_and_evict(c: MemoryClient) -> None:
    c.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}})
    c.bind(namespace="default", name="p", node_name="n1", annotations={"volcano.sh/x": "1"})
    p = c.get(PODS, "p", namespace="default")
    assert p["spec"]["nodeName"] == "n1" and p["metadata"]["annotations"] == {"volcano.sh/x": "1"}
    c.evict(namespace="default", name="p", grace_period_seconds=0)
    with pytest.raises(errors.NotFound):
        c.get(PODS, "p", namespace="default")


def test_watch_streams_and_stops(c: MemoryClient) -> None:
    w = c.watch(PODGROUPS, namespace="default")
    got: list[str] = []

    def reader() -> None:
        for event in w:
            got.append(f'{event["type"]}:{event["object"]["metadata"]["name"]}')
            if len(got) == 2:
                w.stop()

    t = threading.Thread(target=reader)
    t.start()
    c.create(PODGROUPS, {"metadata": {"name": "pg"}, "spec": {"minMember": 1}})
    c.delete(PODGROUPS, "pg", namespace="default")
    t.join(5)
    assert not t.is_alive()
    assert got == ["ADDED:pg", "DELETED:pg"]


def test_watch_timeout_ends_iteration(c: MemoryClient) -> None:
    w = c.watch(CM, namespace="default", resource_version="0", timeout_seconds=0.05)
    assert list(w) == []


def test_watch_gone(c: MemoryClient) -> None:
    small = MemoryClient(store=store.Store(registry=resources.in_tree(), history=2))
    rv = small.list(CM)["metadata"]["resourceVersion"]
    for i in range(4):
        small.create(CM, {"metadata": {"name": f"c{i}"}})
    with pytest.raises(errors.Gone):
        small.watch(CM, resource_version=rv)
    small.close()


def test_unknown_fields_are_dropped_with_warn_default() -> None:
    schemas = pytest.importorskip("lahar.kube.schemas")
    del schemas
    cl = MemoryClient()
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "a": {"type": "string"}}}}}}}]}}
    cl.create(cl.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions"), crd)
    things = cl.registry.get("example.com", "v1", "things")
    out = cl.create(things, {"metadata": {"name": "t"}, "spec": {"a": "x", "b": "y"}})
    assert out["spec"] == {"a": "x"}
    cl.close()
