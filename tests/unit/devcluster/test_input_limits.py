"""Tables for the pure input bounds: nesting depth, YAML alias amplification, kube's typed decoding of built-in
kinds (JSON types, int32, unknown fields, labels, quantities), Scale patches and list options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lahar.devcluster import server
from lahar.devcluster.storage import SQLiteBackend
from lahar.kube import errors, limits, resources, wiretypes
from lahar.kube.apiserver import store


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(("value", "expected"), [
    (1, 0), ({}, 1), ([], 1), ({"a": [1, {"b": []}]}, 4), (_nested(100), 100), (_nested(5000), limits.MAX_DEPTH + 2),
], ids=["scalar", "object", "array", "mixed", "at-limit", "far-beyond"])
def test_depth(value: Any, expected: int) -> None:
    assert limits.depth(value) == expected


def _bomb(levels: int) -> str:
    lines = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for prev, cur in zip("abcdefghij"[:levels], "bcdefghijk"[:levels], strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines)


@pytest.mark.parametrize(("text", "message"), [
    (_bomb(6), "aliases expand it by"),
    ("[" * 200 + "]" * 200, "levels deep"),
    ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 150)), "levels deep"),
    ("a: &a [*a]", "refers to itself"),
    ("a: &a {b: *a}", "refers to itself"),
    ("d: &d " + "[" * 90 + "]" * 90 + "\nf: " + "[" * 20 + "*d" + "]" * 20, "through aliases"),
], ids=["bomb", "flow-deep", "block-deep", "recursive-seq", "recursive-map", "deep-through-aliases"])
def test_yaml_refused(text: str, message: str) -> None:
    with pytest.raises(limits.LimitError, match=message):
        limits.safe_load(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("a: &x {k: 1}\nb: *x", {"a": {"k": 1}, "b": {"k": 1}}),
    (_bomb(2), None),
    ("k: " + "[" * 99 + "]" * 99, None),
], ids=["small-alias", "modest-expansion", "just-under-limit"])
def test_yaml_accepted(text: str, expected: Any) -> None:
    doc = limits.safe_load(text)
    if expected is not None:
        assert doc == expected


def _model(kind: str, group: str = "", version: str = "v1") -> Any:
    model = wiretypes.model_for(group, version, kind)
    assert model is not None
    return model


@pytest.mark.parametrize(("kind", "group", "obj", "type_errors", "unknown"), [
    ("Pod", "", {"spec": {"containers": "x"}}, ["spec.containers: cannot unmarshal string into a field of type "
                                                "array"], []),
    ("Pod", "", {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 2}}}]}}, [], []),
    ("Pod", "", {"spec": {"containers": [{"name": "c", "colour": 1}]}}, [], ["spec.containers[0].colour"]),
    ("Pod", "", {"spec": {"terminationGracePeriodSeconds": 2**40}}, [], []),
    ("Deployment", "apps", {"spec": {"replicas": 1e15}},
     ["spec.replicas: cannot unmarshal number into a field of type integer"], []),
    ("Deployment", "apps", {"spec": {"replicas": 2**31}},
     ["spec.replicas: Invalid value: 2147483648: out of range for an int32"], []),
    ("Deployment", "apps", {"spec": {"replicas": True}},
     ["spec.replicas: cannot unmarshal bool into a field of type integer"], []),
    ("ConfigMap", "", {"data": {"k": 5}}, ["data[k]: cannot unmarshal number into a field of type string"], []),
    ("ConfigMap", "", {"metadata": {"labels": {"k": None}}}, [], []),
    ("ConfigMap", "", {"metadata": {"labels": {"k": 1}}},
     ["metadata.labels[k]: cannot unmarshal number into a field of type string"], []),
    ("ConfigMap", "", {"metadata": "x"}, ["metadata: cannot unmarshal string into a field of type object"], []),
], ids=["containers-string", "cpu-number", "unknown", "int64-field", "float-replicas", "int32-overflow",
        "bool-replicas", "data-int", "label-null", "label-int", "metadata-string"])
def test_decode_problems(kind: str, group: str, obj: dict[str, Any], type_errors: list[str],
                         unknown: list[str]) -> None:
    found = wiretypes.decode_problems(_model(kind, group), obj)
    assert (found.type_errors, found.unknown) == (type_errors, unknown)


@pytest.mark.parametrize(("obj", "pod", "fields"), [
    ({"metadata": {"labels": {"bad key": "v"}}}, False, ["metadata.labels"]),
    ({"metadata": {"labels": {"example.com/ok": "v-1"}}}, False, []),
    ({"metadata": {"labels": {"/x": "v"}}}, False, ["metadata.labels"]),
    ({"metadata": {"labels": {"k": "not ok"}}}, False, ["metadata.labels"]),
    ({"metadata": {"labels": {"k": "x" * 64}}}, False, ["metadata.labels"]),
    ({"metadata": {"annotations": {"Bad_Prefix/x": "anything goes"}}}, False, ["metadata.annotations"]),
    # apimachinery gives every message of IsQualifiedName: an empty name part is both empty and unmatched
    ({"metadata": {"labels": {"x/": "v"}}}, False, ["metadata.labels", "metadata.labels"]),
    # ValidateAnnotations checks the lower-cased key, so an upper-case prefix is fine
    ({"metadata": {"annotations": {"Example.com/x": "v"}}}, False, []),
    ({"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}, True,
     ["spec.containers[0].resources.requests[cpu]"]),
    ({"spec": {"containers": [{"resources": {"limits": {"memory": "1Gi", "cpu": 0.5}}}]}}, True, []),
], ids=["label-key-space", "label-prefixed", "empty-prefix", "label-value-space", "label-value-long",
        "annotation-prefix", "empty-name-part", "annotation-upper-prefix", "cpu-lots", "good-quantities"])
def test_meta_problems(obj: dict[str, Any], pod: bool, fields: list[str]) -> None:
    assert [f for f, _ in wiretypes.meta_problems(obj, pod=pod)] == fields


@pytest.mark.parametrize(("patch", "replicas"), [
    ({"spec": {"replicas": 3}}, 3), ([{"op": "replace", "path": "/spec/replicas", "value": 2}], 2), ({}, None),
], ids=["merge", "json-patch", "empty"])
def test_scale_replicas(patch: Any, replicas: Any) -> None:
    assert server.scale_replicas(patch) == replicas


@pytest.mark.parametrize("patch", [[1], 7, "x", {"spec": 3}, [None]], ids=["list-of-int", "int", "str", "spec-int",
                                                                            "list-of-null"])
def test_scale_replicas_refuses(patch: Any) -> None:
    with pytest.raises(errors.BadRequest):
        server.scale_replicas(patch)


@pytest.mark.parametrize(("limit", "rv", "ok"), [
    (None, None, True), ("10", "0", True), ("", "", True), ("abc", None, False), ("-1", None, False),
    (None, "-1", False), (None, "1.5", False), (None, "²", False),
], ids=["none", "digits", "empty", "limit-abc", "limit-negative", "rv-negative", "rv-float", "rv-unicode-digit"])
def test_list_options(limit: str | None, rv: str | None, ok: bool) -> None:
    if ok:
        server.check_list_options(limit, rv)
    else:
        with pytest.raises(errors.BadRequest):
            server.check_list_options(limit, rv)


def test_store_refuses_what_a_patch_makes_too_deep() -> None:
    s = store.Store(registry=resources.in_tree())
    rt = s.registry.get("batch.volcano.sh", "v1alpha1", "jobs")  # no schema registered: any field is kept
    s.create(rt, "default", {"metadata": {"name": "d"}})
    deep = {"x": _nested(60)}
    s.patch(rt, "default", "d", deep, patch_type="merge", req=store.Request(field_validation="Ignore"))
    grown = [{"op": "add", "path": "/x" + "/0" * 55, "value": _nested(60)}]
    with pytest.raises(errors.BadRequest, match="100 levels"):
        s.patch(rt, "default", "d", grown, patch_type="json", req=store.Request(field_validation="Ignore"))
    assert s.list(rt, "default")["items"]


def test_stored_object_too_deep_for_lists_is_not_served_after_a_restart(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "state.db")
    key = store.object_key(resources.Registry.of(resources.core()).get("", "v1", "configmaps"), "default", "deep")
    backend.write(5, "ADDED", key, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "deep", "namespace": "default", "resourceVersion": "5",
                                                 "uid": "u"}, "data": {"k": _nested(200)}})
    backend.close()
    s = store.Store(backend=SQLiteBackend(tmp_path / "state.db"))
    try:
        listed = s.list(s.registry.get("", "v1", "configmaps"))
        assert [i["metadata"]["name"] for i in listed["items"]] == []
    finally:
        s.close()


@pytest.mark.parametrize("text", ["a: !!timestamp 2001-13-45", "a: !!int 0x", "!!python/object:os.system [ls]"],
                         ids=["bad-timestamp", "bad-int", "python-tag"])
def test_yaml_construction_errors_are_yaml_errors(text: str) -> None:
    import yaml

    with pytest.raises(yaml.YAMLError):
        limits.safe_load(text)
