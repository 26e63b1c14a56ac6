"""devcluster's OpenAPI v3 for built-in kinds: Kubernetes' schemas from kubernetes-validate's package data, in
kube-apiserver's v3 shape, every reference resolvable inside its document (`kubectl explain pod.spec.containers`)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.devcluster import builtin_schemas, openapi
from lahar.kube.resources import Registry, core

pytest.importorskip("kubernetes_validate")

REF = "#/components/schemas/"


@pytest.mark.parametrize(("raw", "converted"), [
    ({"type": ["string", "null"]}, {"type": "string"}),
    ({"type": "integer", "format": "int32"}, {"type": "integer", "format": "int32"}),
    ({"$ref": "#/$defs/io.k8s.api.core.v1.PodSpec"}, {"$ref": f"{REF}io.k8s.api.core.v1.PodSpec"}),
    ({"$ref": "#/$defs/X", "description": "d"}, {"description": "d", "allOf": [{"$ref": f"{REF}X"}]}),
    ({"items": {"$ref": "#/$defs/X"}, "type": ["array", "null"], "x-kubernetes-patch-merge-key": "name"},
     {"items": {"$ref": f"{REF}X"}, "type": "array", "x-kubernetes-patch-merge-key": "name"}),
    ({"additionalProperties": {"type": ["string", "null"]}, "type": ["object", "null"]},
     {"additionalProperties": {"type": "string"}, "type": "object"}),
    ({"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}], "description": "i"},
     {"description": "i", "type": "string", "format": "int-or-string"}),
    ({"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]}, {"type": "string"}),
    ({"properties": {"$ref": {"type": "string"}}}, {"properties": {"$ref": {"type": "string"}}}),
], ids=["nullable-type", "plain-type", "ref", "ref-with-description", "list-keeps-extensions", "map",
        "int-or-string", "quantity", "property-named-ref"])
def test_convert(raw: dict, converted: dict) -> None:
    assert builtin_schemas._convert(raw) == converted


def test_kind_level_api_version_and_kind_are_not_pinned() -> None:
    raw = {"properties": {"apiVersion": {"type": ["string", "null"], "enum": ["v1"]},
                          "kind": {"type": ["string", "null"], "enum": ["Pod"]},
                          "restartPolicy": {"type": "string", "enum": ["Always", "Never"]}}}
    props = builtin_schemas._convert(raw, top=True)["properties"]
    assert props["apiVersion"] == {"type": "string"} and props["kind"] == {"type": "string"}
    assert props["restartPolicy"]["enum"] == ["Always", "Never"]


def _refs(node: Any) -> set[str]:
    return set(builtin_schemas._refs(node))


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.of(core())


@pytest.mark.parametrize(("group", "version", "kind", "name"), [
    ("", "v1", "Pod", "io.k8s.api.core.v1.Pod"),
    ("", "v1", "Node", "io.k8s.api.core.v1.Node"),
    ("apps", "v1", "Deployment", "io.k8s.api.apps.v1.Deployment"),
    ("batch", "v1", "Job", "io.k8s.api.batch.v1.Job"),
    ("events.k8s.io", "v1", "Event", "io.k8s.api.events.v1.Event"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
], ids=["pod", "node", "deployment", "batch-job", "events-event", "crd"])
def test_every_builtin_kind_gets_its_schema(registry: Registry, group: str, version: str, kind: str,
                                            name: str) -> None:
    doc = openapi.group_version_document(registry, group, version, [])
    schemas = doc["components"]["schemas"]
    assert {"group": group, "version": version, "kind": kind} in schemas[name]["x-kubernetes-group-version-kind"]
    missing = {r for s in schemas.values() for r in _refs(s)} - set(schemas)
    assert not missing, f"references outside the document: {sorted(missing)[:5]}"
    plural = next(rt.plural for rt in registry.in_group_version(group, version) if rt.kind == kind)
    item = next(p for path, p in doc["paths"].items() if path.endswith(f"/{plural}/{{name}}"))
    assert item["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": f"{REF}{name}"}
    patch = item["patch"]          # kubectl validates server-side only when both are there
    assert patch["x-kubernetes-group-version-kind"] == {"group": group, "version": version, "kind": kind}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def test_every_served_builtin_kind_has_a_schema(registry: Registry) -> None:
    served = [(rt.group, rt.version, rt.kind) for rt in core()]
    assert [gvk for gvk in served if builtin_schemas.kind_schema_name(*gvk) is None] == []


def test_strategic_merge_keys_are_kept(registry: Registry) -> None:
    schemas = openapi.group_version_document(registry, "", "v1", [])["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["items"] == {"$ref": f"{REF}io.k8s.api.core.v1.Container"}
    assert "List of containers belonging to the pod" in containers["description"]


def test_custom_resources_refer_to_kubernetes_object_meta(registry: Registry) -> None:
    from lahar.kube.resources import in_tree

    volcano = Registry.of(in_tree().in_group_version("batch.volcano.sh", "v1alpha1"))
    crd = {"spec": {"group": "batch.volcano.sh", "names": {"plural": "jobs"},
                    "versions": [{"name": "v1alpha1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    doc = openapi.group_version_document(volcano, "batch.volcano.sh", "v1alpha1", [crd])
    meta = doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert "managedFields" in meta["properties"]


def test_without_the_package_builtin_kinds_get_no_schema(registry: Registry, monkeypatch) -> None:
    monkeypatch.setattr(builtin_schemas, "definitions", lambda *a: {})
    builtin_schemas._closure_of.cache_clear()
    builtin_schemas._by_gvk.cache_clear()
    try:
        doc = openapi.group_version_document(registry, "", "v1", [])
        assert "io.k8s.api.core.v1.Pod" not in doc["components"]["schemas"]
    finally:
        builtin_schemas._closure_of.cache_clear()
        builtin_schemas._by_gvk.cache_clear()


def test_release_folder_choice(tmp_path) -> None:
    for name in ("v1.30.0-local", "v1.31.0-local", "v1.33.0-local", "v1.31.0-local-strict", "master"):
        (tmp_path / name).mkdir()
    assert builtin_schemas._release_dir(tmp_path, (1, 32)).name == "v1.31.0-local"
    assert builtin_schemas._release_dir(tmp_path, (1, 33)).name == "v1.33.0-local"
    assert builtin_schemas._release_dir(tmp_path, (1, 20)).name == "v1.30.0-local"
