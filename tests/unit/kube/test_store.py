"""The API-server semantics engine: table tests per rule, plus a Hypothesis test of watch delivery under threads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.kube import errors, resources
from lahar.kube.apiserver import gc, store
from lahar.kube.resources import Registry, ResourceType

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
REG = Registry.of([*resources.core(), *resources.volcano()])
PODS = REG.get("", "v1", "pods")
CM = REG.get("", "v1", "configmaps")
NS = REG.get("", "v1", "namespaces")
DEPLOY = REG.get("apps", "v1", "deployments")
RS = REG.get("apps", "v1", "replicasets")
JOBS = REG.get("batch", "v1", "jobs")
CRDS = REG.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
QUEUES = REG.get("scheduling.volcano.sh", "v1beta1", "queues")
PODGROUPS = REG.get("scheduling.volcano.sh", "v1beta1", "podgroups")


def new_store(**kw: Any) -> store.Store:
    return store.Store(registry=Registry.of([*resources.core(), *resources.volcano()]), clock=lambda: NOW, **kw)


@pytest.fixture
def s() -> store.Store:
    st_ = new_store()
    yield st_
    st_.close()


def pod(name: str, *, node: str | None = None, labels: dict[str, str] | None = None, owners: list[dict] | None = None,
        finalizers: list[str] | None = None, grace: int | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def cm(name: str, data: dict | None = None, **meta: Any) -> dict:
    return {"metadata": {"name": name, **meta}, "data": data or {}}


def owner_ref(obj: dict, *, block: bool = False) -> dict:
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
           "uid": obj["metadata"]["uid"], "controller": True}
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def exists(s: store.Store, rt: ResourceType, ns: str | None, name: str) -> bool:
    try:
        s.get(rt, ns, name)
    except errors.NotFound:
        return False
    return True


def drain(w: store.StoreWatch) -> list[tuple[str, str, str]]:
    out = []
    while (e := w.next_event(0)) is not None:
        out.append((e["type"], e["object"]["metadata"].get("name", ""), e["object"]["metadata"]["resourceVersion"]))
    return out


# --- create -------------------------------------------------------------------------------------------------------


def test_create_sets_system_fields(s: store.Store) -> None:
    rv0 = int(s.resource_version)
    out = s.create(CM, "default", cm("a", {"k": "v"}))
    meta = out["metadata"]
    assert (out["apiVersion"], out["kind"]) == ("v1", "ConfigMap")
    assert meta["namespace"] == "default" and meta["generation"] == 1
    assert meta["creationTimestamp"] == "2025-01-02T03:04:05Z"
    assert len(meta["uid"]) == 36
    assert int(meta["resourceVersion"]) == rv0 + 1 == int(s.resource_version)


def test_default_namespaces_exist(s: store.Store) -> None:
    names = [n["metadata"]["name"] for n in s.list(NS)["items"]]
    assert names == sorted(gc.DEFAULT_NAMESPACES)
    assert s.get(NS, None, "default")["status"] == {"phase": "Active"}


def test_generate_name(s: store.Store) -> None:
    out = s.create(CM, "default", {"metadata": {"generateName": "job-"}})
    assert out["metadata"]["name"].startswith("job-") and len(out["metadata"]["name"]) == 9


CREATE_ERRORS = [
    ("already exists", "default", cm("dup"), errors.AlreadyExists, 'configmaps "dup" already exists'),
    ("missing namespace", "nope", cm("x"), errors.NotFound, 'namespaces "nope" not found'),
    ("no name", "default", {"metadata": {}}, errors.Invalid,
     'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'),
    ("bad name", "default", cm("Bad_Name"), errors.Invalid, 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid '
     'value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of'),
    ("namespace mismatch", "default", cm("x", namespace="other"), errors.BadRequest,
     "the namespace of the provided object does not match the namespace sent on the request"),
    ("wrong kind", "default", {"kind": "Secret", "metadata": {"name": "x"}}, errors.BadRequest,
     "the kind of the object (Secret) does not match the expected kind (ConfigMap)"),
]


@pytest.mark.parametrize(("ns", "obj", "exc", "message"), [c[1:] for c in CREATE_ERRORS],
                         ids=[c[0] for c in CREATE_ERRORS])
def test_create_errors(s: store.Store, ns: str, obj: dict, exc: type, message: str) -> None:
    s.create(CM, "default", cm("dup"))
    with pytest.raises(exc) as err:
        s.create(CM, ns, obj)
    assert err.value.message.startswith(message)
    assert type(err.value) is exc


def test_not_found_details(s: store.Store) -> None:
    with pytest.raises(errors.NotFound) as err:
        s.get(QUEUES, None, "q")
    assert err.value.message == 'queues.scheduling.volcano.sh "q" not found'
    assert err.value.details == {"name": "q", "group": "scheduling.volcano.sh", "kind": "queues"}


def test_create_resets_status_for_status_subresource(s: store.Store) -> None:
    q = s.create(QUEUES, None, {"metadata": {"name": "q"}, "spec": {"weight": 1}, "status": {"state": "Open"}})
    assert "status" not in q
    pg = s.create(PODGROUPS, "default", {"metadata": {"name": "pg"}, "status": {"phase": "Pending"}})
    assert pg["status"] == {"phase": "Pending"}  # podgroups have no status subresource
    p = s.create(PODS, "default", pod("p", labels={"a": "b"}) | {"status": {"phase": "Running"}})
    assert p["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert p["spec"]["schedulerName"] == "default-scheduler"


QOS = [
    ("best effort", {}, "BestEffort"),
    ("guaranteed", {"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ("guaranteed with equal requests", {"requests": {"cpu": "1000m", "memory": "1Gi"},
                                        "limits": {"cpu": "1", "memory": "1024Mi"}}, "Guaranteed"),
    ("burstable", {"requests": {"cpu": "1"}}, "Burstable"),
]


@pytest.mark.parametrize(("res", "want"), [c[1:] for c in QOS], ids=[c[0] for c in QOS])
def test_pod_qos_class(s: store.Store, res: dict, want: str) -> None:
    p = pod("p")
    p["spec"]["containers"][0]["resources"] = res
    assert s.create(PODS, "default", p)["status"]["qosClass"] == want


def test_pod_qos_class_ignores_a_zero_limit(s: store.Store) -> None:
    """kube's ComputePodQOS counts only positive limits: a zero cpu limit is no cpu limit, so not Guaranteed."""
    p = pod("zero")
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "0", "memory": "1Gi"}}
    assert s.create(PODS, "default", p)["status"]["qosClass"] == "Burstable"


def test_namespace_name_with_dots_says_so(s: store.Store) -> None:
    with pytest.raises(errors.Invalid, match="must not contain dots"):
        s.create(NS, None, {"metadata": {"name": "a.b"}})


def test_dry_run_create_writes_nothing(s: store.Store) -> None:
    rv = s.resource_version
    out = s.create(CM, "default", cm("dry"), req=store.Request(dry_run=True))
    assert out["metadata"]["name"] == "dry"
    assert not exists(s, CM, "default", "dry") and s.resource_version == rv


# --- update, conflicts, generation, status subresource -----------------------------------------------------------


def test_stale_update_conflicts(s: store.Store) -> None:
    a = s.create(CM, "default", cm("a"))
    s.update(CM, "default", "a", a | {"data": {"x": "1"}})
    with pytest.raises(errors.Conflict) as err:
        s.update(CM, "default", "a", a | {"data": {"x": "2"}})
    assert err.value.message == ('Operation cannot be fulfilled on configmaps "a": the object has been modified; '
                                 "please apply your changes to the latest version and try again")


def test_update_without_rv_is_unconditional(s: store.Store) -> None:
    a = s.create(CM, "default", cm("a"))
    s.update(CM, "default", "a", a | {"data": {"x": "1"}})
    body = cm("a", {"x": "2"})
    assert s.update(CM, "default", "a", body)["data"] == {"x": "2"}


def test_noop_update_keeps_resource_version(s: store.Store) -> None:
    a = s.create(CM, "default", cm("a", {"k": "v"}))
    again = s.update(CM, "default", "a", a)
    assert again["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]


def test_update_missing_and_name_mismatch(s: store.Store) -> None:
    with pytest.raises(errors.NotFound):
        s.update(CM, "default", "zz", cm("zz"))
    s.create(CM, "default", cm("a"))
    with pytest.raises(errors.BadRequest) as err:
        s.update(CM, "default", "a", cm("b"))
    assert err.value.message == "the name of the object (b) does not match the name on the URL (a)"


GENERATION = [
    # (name, rt, initial, change, subresource, generation after)
    ("spec change bumps", DEPLOY, {"spec": {"replicas": 1}}, {"spec": {"replicas": 2}}, None, 2),
    ("label change does not", DEPLOY, {"spec": {"replicas": 1}},
     {"spec": {"replicas": 1}, "metadata": {"labels": {"a": "b"}}}, None, 1),
    ("status via main ignored", DEPLOY, {"spec": {"replicas": 1}},
     {"spec": {"replicas": 1}, "status": {"replicas": 5}}, None, 1),
    ("status update does not bump", DEPLOY, {"spec": {"replicas": 1}},
     {"spec": {"replicas": 9}, "status": {"replicas": 5}}, "status", 1),
    ("no status subresource: any change bumps", CM, {"data": {"a": "1"}}, {"data": {"a": "2"}}, None, 2),
    ("no status subresource: metadata does not", CM, {"data": {"a": "1"}},
     {"data": {"a": "1"}, "metadata": {"annotations": {"x": "y"}}}, None, 1),
]


@pytest.mark.parametrize(("rt", "initial", "change", "sub", "want"), [c[1:] for c in GENERATION],
                         ids=[c[0] for c in GENERATION])
def test_generation_rules(s: store.Store, rt: ResourceType, initial: dict, change: dict, sub: str | None,
                          want: int) -> None:
    created = s.create(rt, "default", {"metadata": {"name": "o"}, **initial})
    body = {**created, **{k: v for k, v in change.items() if k != "metadata"}}
    body["metadata"] = {**created["metadata"], **change.get("metadata", {})}
    out = s.update(rt, "default", "o", body, subresource=sub)
    assert out["metadata"]["generation"] == want


def test_status_subresource_splits_spec_and_status(s: store.Store) -> None:
    d = s.create(DEPLOY, "default", {"metadata": {"name": "d"}, "spec": {"replicas": 1}})
    d = s.update(DEPLOY, "default", "d", d | {"status": {"replicas": 1}}, subresource="status")
    assert d["status"] == {"replicas": 1}
    d2 = s.update(DEPLOY, "default", "d", d | {"spec": {"replicas": 3}, "status": {"replicas": 7}})
    assert d2["status"] == {"replicas": 1} and d2["spec"] == {"replicas": 3}
    d3 = s.update(DEPLOY, "default", "d", d2 | {"spec": {"replicas": 9}, "status": {"replicas": 2}},
                  subresource="status")
    assert d3["spec"] == {"replicas": 3} and d3["status"] == {"replicas": 2}


def test_status_subresource_missing_is_not_found(s: store.Store) -> None:
    s.create(CM, "default", cm("a"))
    with pytest.raises(errors.NotFound):
        s.update(CM, "default", "a", cm("a"), subresource="status")


# --- patch ----------------------------------------------------------------------------------------------------------


PATCHES = [
    ("merge", "merge", {"metadata": {"labels": {"a": "b"}}}, lambda o: o["metadata"]["labels"] == {"a": "b"}),
    ("json", "json", [{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}],
     lambda o: o["metadata"]["labels"] == {"x": "y"}),
    ("strategic", "strategic", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}},
     lambda o: o["spec"]["containers"][0]["image"] == "busybox:2" and o["spec"]["containers"][0]["name"] == "c"),
]


@pytest.mark.parametrize(("ptype", "body", "check"), [c[1:] for c in PATCHES], ids=[c[0] for c in PATCHES])
def test_patch_types(s: store.Store, ptype: str, body: Any, check) -> None:
    s.create(PODS, "default", pod("p"))
    assert check(s.patch(PODS, "default", "p", body, patch_type=ptype))


def test_strategic_patch_on_custom_resource_is_415(s: store.Store) -> None:
    s.create(QUEUES, None, {"metadata": {"name": "q"}})
    with pytest.raises(errors.UnsupportedMediaType) as err:
        s.patch(QUEUES, None, "q", {"spec": {}}, patch_type="strategic")
    assert err.value.code == 415


def test_patch_status_subresource(s: store.Store) -> None:
    s.create(PODS, "default", pod("p"))
    out = s.patch(PODS, "default", "p", {"status": {"phase": "Running"}, "spec": {"nodeName": "n"}},
                  patch_type="merge", subresource="status")
    assert out["status"]["phase"] == "Running" and "nodeName" not in out["spec"]


def test_patch_with_stale_rv_conflicts(s: store.Store) -> None:
    a = s.create(CM, "default", cm("a"))
    s.patch(CM, "default", "a", {"data": {"x": "1"}}, patch_type="merge")
    with pytest.raises(errors.Conflict):
        s.patch(CM, "default", "a", {"metadata": {"resourceVersion": a["metadata"]["resourceVersion"]}},
                patch_type="merge")
    with pytest.raises(errors.NotFound):
        s.patch(CM, "default", "zz", {}, patch_type="merge")


def test_patch_retries_over_concurrent_writes(s: store.Store) -> None:
    s.create(CM, "default", cm("counter", {"n": "0"}))

    def bump(i: int) -> None:
        for _ in range(20):
            s.patch(CM, "default", "counter", {"data": {f"k{i}": "x"}}, patch_type="merge")

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(s.get(CM, "default", "counter")["data"]) == {"n", "k0", "k1", "k2", "k3"}


# --- finalizers and graceful deletion ------------------------------------------------------------------------------


def test_finalizers_hold_deletion(s: store.Store) -> None:
    s.create(CM, "default", cm("f", finalizers=["example.com/x"]))
    out = s.delete(CM, "default", "f")
    assert out["metadata"]["deletionTimestamp"] == "2025-01-02T03:04:05Z"
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0
    assert out["metadata"]["generation"] == 2
    cur = s.get(CM, "default", "f")
    with pytest.raises(errors.Invalid) as err:
        s.update(CM, "default", "f", cur | {"metadata": {**cur["metadata"], "finalizers": ["example.com/x", "y"]}})
    assert 'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found ' \
           'new finalizers []string{"y"}' in err.value.message
    labelled = s.update(CM, "default", "f", cur | {"metadata": {**cur["metadata"], "labels": {"a": "b"}}})
    assert labelled["metadata"]["labels"] == {"a": "b"}
    s.patch(CM, "default", "f", {"metadata": {"finalizers": None}}, patch_type="merge")
    assert not exists(s, CM, "default", "f")


GRACE = [
    # (name, pod kwargs, delete grace option, removed at once, deletionGracePeriodSeconds)
    ("unbound pod goes at once", {}, None, True, None),
    ("bound pod waits 30s", {"node": "n1"}, None, False, 30),
    ("bound pod uses terminationGracePeriodSeconds", {"node": "n1", "grace": 5}, None, False, 5),
    ("option overrides", {"node": "n1", "grace": 5}, 2, False, 2),
    ("grace 0 removes a bound pod", {"node": "n1"}, 0, True, None),
    ("grace 0 with finalizers waits", {"node": "n1", "finalizers": ["x/y"]}, 0, False, 0),
]


@pytest.mark.parametrize(("kw", "grace", "gone", "period"), [c[1:] for c in GRACE], ids=[c[0] for c in GRACE])
def test_graceful_pod_deletion(s: store.Store, kw: dict, grace: int | None, gone: bool, period: int | None) -> None:
    s.create(PODS, "default", pod("p", **kw))
    s.delete(PODS, "default", "p", grace_period_seconds=grace)
    assert exists(s, PODS, "default", "p") is not gone
    if not gone:
        assert s.get(PODS, "default", "p")["metadata"]["deletionGracePeriodSeconds"] == period


def test_kubelet_finishes_graceful_deletion(s: store.Store) -> None:
    s.create(PODS, "default", pod("p", node="n1"))
    s.delete(PODS, "default", "p")
    s.delete(PODS, "default", "p", grace_period_seconds=0)
    assert not exists(s, PODS, "default", "p")


def test_finished_pods_delete_at_once(s: store.Store) -> None:
    s.create(PODS, "default", pod("p", node="n1"))
    s.patch(PODS, "default", "p", {"status": {"phase": "Succeeded"}}, patch_type="merge", subresource="status")
    s.delete(PODS, "default", "p")
    assert not exists(s, PODS, "default", "p")


# kube-apiserver's texts for DELETE (rest.BeforeDelete checks preconditions before storage does), found by running
# the conformance suite on the real one; the resource is the object's Kind, as there.
DELETE_PRECONDITIONS = [
    ("uid", {"uid": "other"}, 'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (other) '
                              "does not match the UID in record ("),
    ("resourceVersion", {"resourceVersion": "1"}, 'Operation cannot be fulfilled on ConfigMap "a": the '
                                                  "ResourceVersion in the precondition (1) does not match the "
                                                  "ResourceVersion in record ("),
]


@pytest.mark.parametrize(("pre", "message"), [c[1:] for c in DELETE_PRECONDITIONS],
                         ids=[c[0] for c in DELETE_PRECONDITIONS])
def test_delete_preconditions(s: store.Store, pre: dict, message: str) -> None:
    s.create(CM, "default", cm("a"))
    with pytest.raises(errors.Conflict) as err:
        s.delete(CM, "default", "a", preconditions=pre)
    assert message in err.value.message


# --- ownerReferences: background / foreground / orphan -------------------------------------------------------------


def _family(s: store.Store, *, block: bool = False) -> tuple[dict, dict, list[dict]]:
    d = s.create(DEPLOY, "default", {"metadata": {"name": "d"}, "spec": {"replicas": 2}})
    rs = s.create(RS, "default", {"metadata": {"name": "rs", "ownerReferences": [owner_ref(d, block=block)]}})
    pods = [s.create(PODS, "default", pod(f"p{i}", owners=[owner_ref(rs, block=block)])) for i in range(2)]
    return d, rs, pods


def test_background_cascades_through_generations(s: store.Store) -> None:
    _family(s)
    s.delete(DEPLOY, "default", "d")
    assert not exists(s, DEPLOY, "default", "d")
    assert s.list(RS, "default")["items"] == [] and s.list(PODS, "default")["items"] == []


def test_background_deletes_dependents_after_owner(s: store.Store) -> None:
    _family(s)
    w = s.watch(DEPLOY, "default", resource_version=s.resource_version)
    w_rs = s.watch(RS, "default", resource_version=s.resource_version)
    s.delete(DEPLOY, "default", "d")
    (d_event,), (rs_event,) = drain(w), drain(w_rs)
    assert d_event[0] == rs_event[0] == "DELETED" and int(d_event[2]) < int(rs_event[2])


def test_foreground_waits_for_blocking_dependents(s: store.Store) -> None:
    _, rs, _ = _family(s, block=True)
    for i in range(2):
        s.bind("default", f"p{i}", {"target": {"name": "n1"}})
    out = s.delete(RS, "default", "rs", propagation_policy="Foreground")
    assert "foregroundDeletion" in out["metadata"]["finalizers"] and out["metadata"]["deletionTimestamp"]
    assert all(p["metadata"].get("deletionTimestamp") for p in s.list(PODS, "default")["items"])
    s.delete(PODS, "default", "p0", grace_period_seconds=0)
    assert exists(s, RS, "default", "rs")
    s.delete(PODS, "default", "p1", grace_period_seconds=0)
    assert not exists(s, RS, "default", "rs")


def test_foreground_without_blockers_completes_at_once(s: store.Store) -> None:
    _family(s)
    s.delete(DEPLOY, "default", "d", propagation_policy="Foreground")
    assert not exists(s, DEPLOY, "default", "d") and s.list(PODS, "default")["items"] == []


def test_orphan_removes_owner_references(s: store.Store) -> None:
    _family(s)
    s.delete(RS, "default", "rs", propagation_policy="Orphan")
    assert not exists(s, RS, "default", "rs")
    left = s.list(PODS, "default")["items"]
    assert len(left) == 2 and all("ownerReferences" not in p["metadata"] for p in left)


def test_dependent_with_two_owners_survives_one(s: store.Store) -> None:
    a = s.create(CM, "default", cm("a"))
    b = s.create(CM, "default", cm("b"))
    s.create(CM, "default", cm("child", ownerReferences=[owner_ref(a), owner_ref(b)]))
    s.delete(CM, "default", "a")
    assert exists(s, CM, "default", "child")
    s.delete(CM, "default", "b")
    assert not exists(s, CM, "default", "child")


def test_tick_collects_dangling_dependents(s: store.Store) -> None:
    s.create(CM, "default", cm("orphan", ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                                            "uid": "00000000-dead-beef-0000-000000000000"}]))
    assert exists(s, CM, "default", "orphan")
    s.tick()
    assert not exists(s, CM, "default", "orphan")


# --- namespaces ------------------------------------------------------------------------------------------------------


def test_namespace_termination(s: store.Store) -> None:
    created = s.create(NS, None, {"metadata": {"name": "team"}})
    assert created["spec"] == {"finalizers": ["kubernetes"]} and created["status"] == {"phase": "Active"}
    assert created["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    s.create(CM, "team", cm("a"))
    s.create(PODS, "team", pod("bound", node="n1"))
    out = s.delete(NS, None, "team")
    assert out["status"]["phase"] == "Terminating" and out["metadata"]["deletionTimestamp"]
    assert not exists(s, CM, "team", "a")
    with pytest.raises(errors.Forbidden) as err:
        s.create(CM, "team", cm("b"))
    assert err.value.message == "unable to create new content in namespace team because it is being terminated"
    s.tick()
    assert exists(s, NS, None, "team")  # the bound pod is still terminating
    s.delete(PODS, "team", "bound", grace_period_seconds=0)
    s.tick()
    assert not exists(s, NS, None, "team")


def test_empty_namespace_goes_at_once(s: store.Store) -> None:
    s.create(NS, None, {"metadata": {"name": "empty"}})
    s.delete(NS, None, "empty")
    assert not exists(s, NS, None, "empty")


def test_namespace_spec_finalizers_hold_it(s: store.Store) -> None:
    s.create(NS, None, {"metadata": {"name": "held"}})
    cur = s.get(NS, None, "held")
    s.update(NS, None, "held", cur | {"spec": {"finalizers": ["kubernetes", "example.com/x"]}}, subresource="finalize")
    s.delete(NS, None, "held")
    held = s.get(NS, None, "held")
    assert held["spec"]["finalizers"] == ["example.com/x"]
    s.update(NS, None, "held", held | {"spec": {"finalizers": []}}, subresource="finalize")
    assert not exists(s, NS, None, "held")


def test_default_namespace_cannot_be_deleted(s: store.Store) -> None:
    with pytest.raises(errors.Forbidden) as err:
        s.delete(NS, None, "default")
    assert err.value.message == 'namespaces "default" is forbidden: this namespace may not be deleted'


# --- binding and eviction --------------------------------------------------------------------------------------------


def test_bind(s: store.Store) -> None:
    s.create(PODS, "default", pod("p"))
    status = s.bind("default", "p", {"metadata": {"name": "p", "annotations": {"a": "b"}}, "target": {"name": "n1"}})
    assert status["status"] == "Success"
    out = s.get(PODS, "default", "p")
    assert out["spec"]["nodeName"] == "n1" and out["metadata"]["annotations"] == {"a": "b"}
    cond = [c for c in out["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond == [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": "2025-01-02T03:04:05Z"}]
    with pytest.raises(errors.Conflict) as err:
        s.bind("default", "p", {"target": {"name": "n2"}})
    assert err.value.message == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'


def test_evict_deletes_gracefully(s: store.Store) -> None:
    s.create(PODS, "default", pod("p", node="n1"))
    s.evict("default", "p", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
    assert s.get(PODS, "default", "p")["metadata"]["deletionGracePeriodSeconds"] == 30
    s.evict("default", "p", {"deleteOptions": {"gracePeriodSeconds": 0}})
    assert not exists(s, PODS, "default", "p")


# --- list and selectors --------------------------------------------------------------------------------------------


def test_list_filters_and_sorts(s: store.Store) -> None:
    s.create(NS, None, {"metadata": {"name": "a"}})
    for ns, name, labels in [("default", "z", {"app": "x"}), ("default", "b", {"app": "y"}), ("a", "c", {"app": "x"})]:
        s.create(PODS, ns, pod(name, labels=labels))
    all_pods = s.list(PODS)
    assert [p["metadata"]["name"] for p in all_pods["items"]] == ["c", "b", "z"]
    assert all_pods["kind"] == "PodList" and all_pods["metadata"]["resourceVersion"] == s.resource_version
    assert [p["metadata"]["name"] for p in s.list(PODS, "default", label_selector="app=x")["items"]] == ["z"]
    assert [p["metadata"]["name"] for p in s.list(PODS, field_selector="metadata.namespace!=default")["items"]] == ["c"]
    with pytest.raises(errors.BadRequest):
        s.list(PODS, label_selector="app in x")


def test_reads_are_copies(s: store.Store) -> None:
    s.create(CM, "default", cm("a", {"k": "v"}))
    got = s.get(CM, "default", "a")
    got["data"]["k"] = "mutated"
    s.list(CM, "default")["items"][0]["data"]["k"] = "mutated"
    assert s.get(CM, "default", "a")["data"] == {"k": "v"}


# --- watch -----------------------------------------------------------------------------------------------------------


def test_watch_initial_then_live_in_order(s: store.Store) -> None:
    s.create(CM, "default", cm("a"))
    w = s.watch(CM, "default")
    s.create(CM, "default", cm("b"))
    s.patch(CM, "default", "a", {"data": {"x": "1"}}, patch_type="merge")
    s.delete(CM, "default", "b")
    events = drain(w)
    assert [(t, n) for t, n, _ in events] == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(rv) for _, _, rv in events[1:]]
    assert rvs == sorted(rvs) and rvs[-1] == int(s.resource_version)
    w.stop()


def test_watch_resume_and_gone() -> None:
    s = new_store(history=5)
    rv = s.resource_version
    for i in range(3):
        s.create(CM, "default", cm(f"c{i}"))
    w = s.watch(CM, "default", resource_version=rv)
    assert [n for _, n, _ in drain(w)] == ["c0", "c1", "c2"]
    for i in range(3, 10):
        s.create(CM, "default", cm(f"c{i}"))
    with pytest.raises(errors.Gone) as err:
        s.watch(CM, "default", resource_version=rv)
    assert err.value.code == 410 and err.value.message.startswith(f"too old resource version: {rv} (")
    s.close()


def test_watch_selector_enter_and_leave(s: store.Store) -> None:
    s.create(CM, "default", cm("a", labels={"app": "x"}))
    s.create(CM, "default", cm("b"))
    w = s.watch(CM, "default", label_selector="app=x")
    s.patch(CM, "default", "b", {"metadata": {"labels": {"app": "x"}}}, patch_type="merge")
    s.patch(CM, "default", "a", {"metadata": {"labels": {"app": "y"}}}, patch_type="merge")
    s.patch(CM, "default", "a", {"data": {"ignored": "1"}}, patch_type="merge")
    s.patch(CM, "default", "b", {"data": {"k": "1"}}, patch_type="merge")
    events = []
    while (e := w.next_event(0)) is not None:
        events.append(e)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    left = events[2]["object"]
    assert left["metadata"]["labels"] == {"app": "x"}  # the last state that matched, at the new RV
    assert int(left["metadata"]["resourceVersion"]) > int(events[1]["object"]["metadata"]["resourceVersion"])


def test_watch_field_selector_and_namespace(s: store.Store) -> None:
    s.create(NS, None, {"metadata": {"name": "other"}})
    w = s.watch(PODS, None, field_selector="spec.nodeName=n1")
    w_ns = s.watch(PODS, "other")
    s.create(PODS, "default", pod("p"))
    s.create(PODS, "other", pod("q"))
    s.bind("default", "p", {"target": {"name": "n1"}})
    assert [(t, n) for t, n, _ in drain(w)] == [("ADDED", "p")]
    assert [(t, n) for t, n, _ in drain(w_ns)] == [("ADDED", "q")]


def test_watch_bookmarks_and_on_ready(s: store.Store) -> None:
    calls: list[int] = []
    w = s.watch(CM, "default", resource_version=s.resource_version, allow_bookmarks=True)
    w.on_ready = lambda: calls.append(1)
    s.create(CM, "default", cm("a"))
    w.bookmark()
    assert len(calls) == 2
    assert w.next_event(0)["type"] == "ADDED"
    bm = w.next_event(0)
    assert bm == {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                                 "metadata": {"resourceVersion": s.resource_version}}}
    quiet = s.watch(CM, "default", resource_version=s.resource_version)
    quiet.bookmark()
    assert quiet.next_event(0) is None


def test_watch_stop_unblocks_iteration(s: store.Store) -> None:
    w = s.watch(CM, "default", resource_version=s.resource_version)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.extend(w))
    t.start()
    s.create(CM, "default", cm("a"))
    for _ in range(200):
        if w.pending() == 0:
            break
        threading.Event().wait(0.01)
    w.stop()
    t.join(5)
    assert not t.is_alive()
    assert [e["object"]["metadata"]["name"] for e in got] in ([], ["a"])


def test_watch_of_future_rv_sees_only_new_events(s: store.Store) -> None:
    w = s.watch(CM, "default", resource_version=str(int(s.resource_version) + 100))
    assert w.next_event(0) is None


# --- admission -------------------------------------------------------------------------------------------------------


class RecordingAdmission:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    def mutate(self, attrs: store.AdmissionAttributes) -> dict | None:
        self.calls.append(("mutate", attrs.operation, attrs.subresource))
        if attrs.obj is not None and attrs.rt.plural == "configmaps":
            attrs.obj.setdefault("metadata", {}).setdefault("labels", {})["mutated"] = "true"
            return attrs.obj
        return None

    def validate(self, attrs: store.AdmissionAttributes) -> None:
        self.calls.append(("validate", attrs.operation, attrs.subresource))
        if attrs.obj is not None and attrs.obj.get("data", {}).get("deny"):
            raise errors.Forbidden('admission webhook "x" denied the request: no')
        if attrs.operation == "DELETE":
            assert attrs.obj is None and attrs.old_obj is not None
            attrs.request.warnings.append("deleting")


def test_admission_order_and_denial() -> None:
    adm = RecordingAdmission()
    s = new_store(admission=adm)
    out = s.create(CM, "default", cm("a"))
    assert out["metadata"]["labels"] == {"mutated": "true"}
    assert adm.calls == [("mutate", "CREATE", None), ("validate", "CREATE", None)]
    with pytest.raises(errors.Forbidden):
        s.create(CM, "default", cm("b", {"deny": "1"}))
    assert not exists(s, CM, "default", "b")
    req = store.Request()
    s.delete(CM, "default", "a", req=req)
    assert req.warnings == ["deleting"]
    s.close()


# --- CRDs --------------------------------------------------------------------------------------------------------------


def crd(*, scope: str = "Namespaced", status: bool = True, schema: dict | None = None) -> dict:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema or {"type": "object",
                                                                        "x-kubernetes-preserve-unknown-fields": True}}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": scope, "versions": [version],
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]}}}


def test_crd_registration_lifecycle(s: store.Store) -> None:
    out = s.create(CRDS, None, crd())
    conds = {c["type"]: c["status"] for c in out["status"]["conditions"]}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    assert out["status"]["acceptedNames"]["kind"] == "Widget"
    rt = s.registry.get("example.com", "v1", "widgets")
    assert rt is not None and rt.namespaced and rt.short_names == ("wd",) and "status" in rt.subresources
    w = s.create(rt, "default", {"metadata": {"name": "w1"}, "spec": {"size": 1}})
    assert (w["apiVersion"], w["kind"]) == ("example.com/v1", "Widget")
    s.delete(CRDS, None, "widgets.example.com")
    assert s.registry.get("example.com", "v1", "widgets") is None
    assert s.list(rt)["items"] == []


def test_crd_name_must_match(s: store.Store) -> None:
    bad = crd()
    bad["metadata"]["name"] = "gadgets.example.com"
    with pytest.raises(errors.Invalid) as err:
        s.create(CRDS, None, bad)
    assert 'metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group' in \
        err.value.message


WIDGET_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1, "default": 3}}},
    "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}

FIELD_VALIDATION = [
    ("Strict", errors.BadRequest, None),
    ("Warn", None, ['unknown field "spec.color"']),
    ("Ignore", None, []),
]


@pytest.mark.parametrize(("mode", "exc", "warnings"), FIELD_VALIDATION, ids=[c[0] for c in FIELD_VALIDATION])
def test_custom_resource_field_validation(s: store.Store, mode: str, exc: type | None, warnings: list | None) -> None:
    s.create(CRDS, None, crd(schema=WIDGET_SCHEMA))
    rt = s.registry.get("example.com", "v1", "widgets")
    req = store.Request(field_validation=mode)
    body = {"metadata": {"name": "w"}, "spec": {"color": "red"}}
    if exc is not None:
        with pytest.raises(exc) as err:
            s.create(rt, "default", body, req=req)
        assert err.value.message == ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                                     'unknown field "spec.color"')
        return
    out = s.create(rt, "default", body, req=req)
    assert out["spec"] == {"size": 3}  # pruned and defaulted
    assert req.warnings == warnings


def test_custom_resource_schema_validation(s: store.Store) -> None:
    s.create(CRDS, None, crd(schema=WIDGET_SCHEMA))
    rt = s.registry.get("example.com", "v1", "widgets")
    with pytest.raises(errors.Invalid) as err:
        s.create(rt, "default", {"metadata": {"name": "w"}, "spec": {"size": 0}})
    assert err.value.message.startswith('Widget.example.com "w" is invalid: spec.size: Invalid value: 0')
    assert err.value.details["causes"][0]["field"] == "spec.size"


# --- persistence through a backend (a fake one; SQLite has its own tests) ---------------------------------------------


class ListBackend:
    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.events: list[tuple[int, str, str, dict]] = []
        self.rv = 0

    def load(self):
        return self.rv, dict(self.objects), list(self.events)

    def write(self, rv, type, key, obj):
        self.rv = rv
        if type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.events.append((rv, type, key, obj))

    def trim(self, before_rv):
        self.events = [e for e in self.events if e[0] >= before_rv]

    def close(self):
        pass


def test_restart_resumes_watch_and_types() -> None:
    be = ListBackend()
    s1 = new_store(backend=be)
    s1.create(CRDS, None, crd())
    rt = s1.registry.get("example.com", "v1", "widgets")
    s1.create(rt, "default", {"metadata": {"name": "w1"}})
    mark = s1.resource_version
    s1.create(rt, "default", {"metadata": {"name": "w2"}})
    s1.delete(rt, "default", "w1")
    s1.close()
    s2 = store.Store(registry=Registry.of(resources.core()), backend=be)
    rt2 = s2.registry.get("example.com", "v1", "widgets")
    assert rt2 is not None
    assert [o["metadata"]["name"] for o in s2.list(rt2)["items"]] == ["w2"]
    w = s2.watch(rt2, "default", resource_version=mark)
    assert [(t, n) for t, n, _ in drain(w)] == [("ADDED", "w2"), ("DELETED", "w1")]
    assert s2.resource_version == be.load()[0].__str__()
    s2.close()


# --- Hypothesis: concurrent writers, every watcher sees every event once, in order, and replay == final list ------

OPS = st.lists(st.tuples(st.sampled_from(["create", "update", "delete"]), st.integers(0, 5)), min_size=1, max_size=40)


def _apply(s: store.Store, op: str, i: int) -> None:
    name = f"o{i}"
    try:
        if op == "create":
            s.create(CM, "default", cm(name, {"v": "0"}, labels={"even": str(i % 2 == 0).lower()}))
        elif op == "update":
            s.patch(CM, "default", name, {"data": {"v": str(i)}, "metadata": {"labels": {"even": "flip"}}},
                    patch_type="merge")
        else:
            s.delete(CM, "default", name)
    except (errors.NotFound, errors.AlreadyExists):
        pass


def _replay(events: list[dict], state: dict[str, dict]) -> dict[str, dict]:
    for e in events:
        name = e["object"]["metadata"]["name"]
        if e["type"] == "DELETED":
            state.pop(name, None)
        else:
            state[name] = e["object"]
    return state


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=2, max_size=3))
def test_watchers_see_every_event_once_in_order(scripts: list[list[tuple[str, int]]]) -> None:
    s = new_store()
    seed = s.create(CM, "default", cm("seed"))
    start = s.resource_version
    all_w = s.watch(CM, "default", resource_version=start)
    from_zero = s.watch(CM, "default")
    sel_w = s.watch(CM, "default", resource_version=start, label_selector="even=true")
    threads = [threading.Thread(target=lambda ops=ops: [_apply(s, op, i) for op, i in ops]) for ops in scripts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = {o["metadata"]["name"]: o for o in s.list(CM, "default")["items"]}

    def collect(w: store.StoreWatch) -> list[dict]:
        out = []
        while (e := w.next_event(0)) is not None:
            out.append(e)
        return out

    events = collect(all_w)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    assert len(events) == int(s.resource_version) - int(start)  # every write, exactly once
    assert _replay(events, {"seed": seed}) == final

    zero = collect(from_zero)
    assert _replay(zero, {}) == final

    assert len(events) > 0 or all(op == "update" or op == "delete" for ops in scripts for op, _ in ops)
    sel = collect(sel_w)
    sel_rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in sel]
    assert sel_rvs == sorted(sel_rvs)
    assert _replay(sel, {}) == {k: v for k, v in final.items() if v["metadata"].get("labels", {}).get("even") == "true"}
    s.close()


FIELD_LABELS = [
    ("pods spec.nodeName", PODS, "spec.nodeName=n1", None),
    ("pods status.phase", PODS, "status.phase=Running", None),
    ("configmaps metadata.name", CM, "metadata.name=a", None),
    ("configmaps data is not a field label", CM, "data.k=v", "field label not supported: data.k"),
    ("custom resources only metadata", QUEUES, "spec.weight=1", "field label not supported: spec.weight"),
]


@pytest.mark.parametrize(("rt", "selector", "error"), [c[1:] for c in FIELD_LABELS], ids=[c[0] for c in FIELD_LABELS])
def test_supported_field_labels(s: store.Store, rt: ResourceType, selector: str, error: str | None) -> None:
    if error is None:
        s.list(rt, field_selector=selector)
        s.watch(rt, field_selector=selector).stop()
        return
    with pytest.raises(errors.BadRequest) as err:
        s.list(rt, field_selector=selector)
    assert err.value.message == error


def test_crd_selectable_fields(s: store.Store) -> None:
    body = crd()
    body["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.color"}]
    s.create(CRDS, None, body)
    rt = s.registry.get("example.com", "v1", "widgets")
    s.create(rt, "default", {"metadata": {"name": "r"}, "spec": {"color": "red"}})
    s.create(rt, "default", {"metadata": {"name": "b"}, "spec": {"color": "blue"}})
    assert [o["metadata"]["name"] for o in s.list(rt, field_selector="spec.color=red")["items"]] == ["r"]


def test_secret_string_data_is_merged(s: store.Store) -> None:
    secrets = s.registry.get("", "v1", "secrets")
    out = s.create(secrets, "default", {"metadata": {"name": "s"}, "stringData": {"u": "admin"}, "data": {"p": "eA=="}})
    assert out["data"] == {"p": "eA==", "u": "YWRtaW4="} and "stringData" not in out and out["type"] == "Opaque"


def test_pod_with_a_malformed_quantity_is_invalid_not_a_crash(s: store.Store) -> None:
    p = pod("bad")
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    with pytest.raises((errors.Invalid, errors.BadRequest)):
        s.create(PODS, "default", p)
