"""Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch tables (shapes of apimachinery's tests)."""

from __future__ import annotations

import copy

import pytest

from lahar.kube import errors, patches

# --- RFC 7386 appendix A -----------------------------------------------------------------------------------------

RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "want"), RFC7386, ids=[f"rfc7386-{i}" for i in range(len(RFC7386))])
def test_merge_patch_rfc7386(target, patch, want) -> None:
    before = copy.deepcopy(target)
    assert patches.merge_patch(target, patch) == want
    assert target == before


# --- RFC 6902 ----------------------------------------------------------------------------------------------------

DOC = {"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1, 2, 3]}}

JSON_OK = [
    ("add", [{"op": "add", "path": "/metadata/labels/b", "value": "2"}], {"a": "1", "b": "2"}, "/metadata/labels"),
    ("remove", [{"op": "remove", "path": "/metadata/labels/a"}], {}, "/metadata/labels"),
    ("replace", [{"op": "replace", "path": "/spec/list/1", "value": 9}], [1, 9, 3], "/spec/list"),
    ("append", [{"op": "add", "path": "/spec/list/-", "value": 4}], [1, 2, 3, 4], "/spec/list"),
    ("move", [{"op": "move", "from": "/spec/list", "path": "/spec/other"}], [1, 2, 3], "/spec/other"),
    ("copy", [{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/c"}], {"a": "1", "c": "1"},
     "/metadata/labels"),
    ("test passes", [{"op": "test", "path": "/metadata/labels/a", "value": "1"}], {"a": "1"}, "/metadata/labels"),
]


def _at(doc, pointer: str):
    for part in pointer.strip("/").split("/"):
        doc = doc[part]
    return doc


@pytest.mark.parametrize(("ops", "want", "where"), [c[1:] for c in JSON_OK], ids=[c[0] for c in JSON_OK])
def test_json_patch_applies(ops, want, where) -> None:
    out = patches.json_patch(DOC, ops)
    assert _at(out, where) == want
    assert DOC["metadata"]["labels"] == {"a": "1"}


JSON_FAIL = [
    ("missing path", [{"op": "remove", "path": "/metadata/annotations/x"}], errors.Invalid),
    ("failed test", [{"op": "test", "path": "/metadata/labels/a", "value": "2"}], errors.Invalid),
    ("bad index", [{"op": "replace", "path": "/spec/list/7", "value": 1}], errors.Invalid),
    ("unknown op", [{"op": "frobnicate", "path": "/a"}], errors.BadRequest),
    ("not a list", {"op": "add"}, errors.BadRequest),
]


@pytest.mark.parametrize(("ops", "exc"), [c[1:] for c in JSON_FAIL], ids=[c[0] for c in JSON_FAIL])
def test_json_patch_errors(ops, exc) -> None:
    with pytest.raises(exc) as err:
        patches.json_patch(DOC, ops)
    if exc is errors.Invalid:
        assert err.value.code == 422
        assert err.value.message == "the server rejected our request due to an error in our request"
        assert err.value.details["causes"][0]["message"]


# --- strategic merge patch ---------------------------------------------------------------------------------------

POD = {
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"],
                 "ownerReferences": [{"uid": "u1", "name": "o1", "kind": "Job", "apiVersion": "batch/v1"}]},
    "spec": {
        "containers": [
            {"name": "main", "image": "img:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "ports": [{"containerPort": 80, "name": "http"}], "args": ["a", "b"],
             "volumeMounts": [{"name": "v", "mountPath": "/data"}]},
            {"name": "side", "image": "side:1"},
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "imagePullSecrets": [{"name": "s1"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}

SMP = [
    ("merge container by name",
     {"spec": {"containers": [{"name": "main", "image": "img:2"}]}},
     lambda o: o["spec"]["containers"][0]["image"] == "img:2" and len(o["spec"]["containers"]) == 2
     and o["spec"]["containers"][0]["env"][0]["name"] == "A"),
    ("append new container",
     {"spec": {"containers": [{"name": "third", "image": "t"}]}},
     lambda o: [c["name"] for c in o["spec"]["containers"]] == ["main", "side", "third"]),
    ("delete container directive",
     {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
     lambda o: [c["name"] for c in o["spec"]["containers"]] == ["main"]),
    ("env merged by name",
     {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "9"}, {"name": "C", "value": "3"}]}]}},
     lambda o: o["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "9"},
                                                     {"name": "C", "value": "3"}]),
    ("ports by containerPort",
     {"spec": {"containers": [{"name": "main", "ports": [{"containerPort": 80, "protocol": "TCP"},
                                                         {"containerPort": 443}]}]}},
     lambda o: o["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"},
                                                       {"containerPort": 443}]),
    ("volumeMounts by mountPath",
     {"spec": {"containers": [{"name": "main", "volumeMounts": [{"mountPath": "/data", "readOnly": True}]}]}},
     lambda o: o["spec"]["containers"][0]["volumeMounts"] == [{"name": "v", "mountPath": "/data", "readOnly": True}]),
    ("args replace (atomic list)",
     {"spec": {"containers": [{"name": "main", "args": ["c"]}]}},
     lambda o: o["spec"]["containers"][0]["args"] == ["c"]),
    ("tolerations replace",
     {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}},
     lambda o: o["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]),
    ("volumes by name",
     {"spec": {"volumes": [{"name": "w", "emptyDir": {}}]}},
     lambda o: [v["name"] for v in o["spec"]["volumes"]] == ["v", "w"]),
    ("imagePullSecrets by name",
     {"spec": {"imagePullSecrets": [{"name": "s2"}]}},
     lambda o: o["spec"]["imagePullSecrets"] == [{"name": "s1"}, {"name": "s2"}]),
    ("conditions by type",
     {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
     lambda o: o["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                             {"type": "PodScheduled", "status": "True"}]),
    ("ownerReferences by uid",
     {"metadata": {"ownerReferences": [{"uid": "u2", "name": "o2", "kind": "Job", "apiVersion": "batch/v1"}]}},
     lambda o: [r["uid"] for r in o["metadata"]["ownerReferences"]] == ["u1", "u2"]),
    ("finalizers merge as a set",
     {"metadata": {"finalizers": ["y", "x"]}},
     lambda o: o["metadata"]["finalizers"] == ["x", "y"]),
    ("deleteFromPrimitiveList",
     {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
     lambda o: o["metadata"]["finalizers"] == []),
    ("null deletes a key",
     {"metadata": {"labels": {"a": None, "b": "2"}}},
     lambda o: o["metadata"]["labels"] == {"b": "2"}),
    ("$patch replace on a map",
     {"metadata": {"labels": {"$patch": "replace", "z": "9"}}},
     lambda o: o["metadata"]["labels"] == {"z": "9"}),
    ("$patch delete on a map",
     {"spec": {"containers": [{"name": "main", "$patch": "delete"}], "volumes": None}},
     lambda o: [c["name"] for c in o["spec"]["containers"]] == ["side"] and "volumes" not in o["spec"]),
    ("$patch replace on a list",
     {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}},
     lambda o: o["spec"]["containers"] == [{"name": "only", "image": "o"}]),
    ("$retainKeys",
     {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}, "$retainKeys": ["name", "hostPath"]}]}},
     lambda o: o["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]),
    ("$setElementOrder",
     {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
               "containers": [{"name": "main", "image": "img:3"}]}},
     lambda o: [c["name"] for c in o["spec"]["containers"]] == ["side", "main"]
     and o["spec"]["containers"][1]["image"] == "img:3"),
]


@pytest.mark.parametrize(("patch", "check"), [c[1:] for c in SMP], ids=[c[0] for c in SMP])
def test_strategic_merge_patch(patch, check) -> None:
    before = copy.deepcopy(POD)
    out = patches.strategic_merge_patch(POD, patch, "Pod")
    assert check(out), out
    assert before == POD


def test_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    out = patches.strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]


def test_missing_merge_key_is_bad_request() -> None:
    with pytest.raises(errors.BadRequest) as err:
        patches.strategic_merge_patch(POD, {"spec": {"containers": [{"image": "x"}]}}, "Pod")
    assert "does not contain declared merge key: name" in err.value.message


def test_strategic_patch_must_be_an_object() -> None:
    with pytest.raises(errors.BadRequest):
        patches.strategic_merge_patch(POD, [1], "Pod")


MERGE_KEYS = [
    (("spec", "containers"), "Pod", "name"),
    (("spec", "template", "spec", "containers", "ports"), "Deployment", "containerPort"),
    (("spec", "ports"), "Service", "port"),
    (("spec", "tolerations"), "Pod", None),
    (("spec", "finalizers"), "Namespace", None),
    (("status", "conditions"), "Pod", "type"),
]


@pytest.mark.parametrize(("path", "kind", "want"), MERGE_KEYS, ids=[".".join(m[0]) for m in MERGE_KEYS])
def test_merge_keys(path, kind, want) -> None:
    assert patches.merge_key(path, kind) == want
