"""OpenAPI v3 documents (`/openapi/v3`, `/openapi/v3/<api|apis/g>/<v>`) as much as kubectl 1.32 needs them.

Pure functions over the registry and the CRD objects, called by `devcluster.server`. Each group-version's PATCH
operation carries `x-kubernetes-group-version-kind` and a `fieldValidation` parameter, so kubectl validates
server-side and never asks `/openapi/v2`. Custom resources get their CRD's `openAPIV3Schema` as a component
(for `kubectl explain`); built-in kinds get Kubernetes' own schemas (`devcluster.builtin_schemas`), with the
`x-kubernetes-patch-*` extensions kubectl computes strategic merge patches from. The documents are built once per
set of served types and CRDs (`devcluster.server` caches them with their hash).
"""

from __future__ import annotations

import copy
import hashlib
import threading
from typing import Any

import orjson

from lahar.devcluster import builtin_schemas
from lahar.kube.resources import Registry, ResourceType

__all__ = ["document_hash", "group_version_document", "group_version_key", "index", "schema_name", "warm_up"]

Obj = dict[str, Any]

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
_STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"

_BUILTIN_PREFIX = {
    "": "io.k8s.api.core", "apps": "io.k8s.api.apps", "batch": "io.k8s.api.batch", "policy": "io.k8s.api.policy",
    "events.k8s.io": "io.k8s.api.events", "scheduling.k8s.io": "io.k8s.api.scheduling",
    "coordination.k8s.io": "io.k8s.api.coordination", "networking.k8s.io": "io.k8s.api.networking",
    "rbac.authorization.k8s.io": "io.k8s.api.rbac",
    "admissionregistration.k8s.io": "io.k8s.api.admissionregistration",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}


def group_version_key(group: str, version: str) -> str:
    """The key in the `/openapi/v3` index: `api/v1` or `apis/<group>/<version>`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rt: ResourceType) -> str:
    """Component name of a kind: `io.k8s.api.core.v1.Pod`, `sh.volcano.batch.v1alpha1.Job` for CRDs."""
    prefix = _BUILTIN_PREFIX.get(rt.group) or ".".join(reversed(rt.group.split(".")))
    return f"{prefix}.{rt.version}.{rt.kind}"


def _param(name: str, where: str = "query", *, required: bool = False, description: str = "") -> Obj:
    p: Obj = {"name": name, "in": where, "schema": {"type": "string", "uniqueItems": True}}
    if required:
        p["required"] = True
    if description:
        p["description"] = description
    return p


_FIELD_VALIDATION = _param(
    "fieldValidation",
    description="fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
                "containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict")
_DRY_RUN = _param("dryRun", description="When present, indicates that modifications should not be persisted.")
_FIELD_MANAGER = _param("fieldManager", description="fieldManager is a name associated with the actor making "
                                                     "these changes.")
_FORCE = {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}}
_LIST_PARAMS = [_param(n) for n in ("labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
                                    "continue")] + [
    {"name": "watch", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}},
    {"name": "allowWatchBookmarks", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "uniqueItems": True}},
    {"name": "timeoutSeconds", "in": "query", "schema": {"type": "integer", "uniqueItems": True}},
]
_JSON_TYPES = ("application/json", "application/yaml")


def _ref(name: str) -> Obj:
    return {"$ref": f"#/components/schemas/{name}"}


def _content(schema: Obj | None, types: tuple[str, ...] = _JSON_TYPES) -> Obj:
    return {t: ({"schema": schema} if schema else {}) for t in types}


def _ok(schema: Obj | None, codes: tuple[str, ...] = ("200",)) -> Obj:
    return {code: {"description": "OK", "content": _content(schema)} for code in codes}


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _operation(rt: ResourceType, action: str, op_id: str, *, params: list[Obj] | None = None,
               body: Obj | None = None, responses: Obj) -> Obj:
    op: Obj = {"tags": [rt.group or "core"], "operationId": op_id, "parameters": params or [],
               "responses": responses, "x-kubernetes-action": action, "x-kubernetes-group-version-kind": _gvk(rt)}
    if body is not None:
        op["requestBody"] = body
    return op


def _op_name(rt: ResourceType, verb: str, namespaced: bool, suffix: str = "") -> str:
    group = "".join(p.capitalize() for p in (rt.group or "core").split(".")[:1])
    ns = "Namespaced" if namespaced else ""
    return f"{verb}{group}{rt.version.capitalize()}{ns}{rt.kind}{suffix}"


def _patch_types(rt: ResourceType, custom: bool) -> tuple[str, ...]:
    types = ["application/json-patch+json", "application/merge-patch+json"]
    if not custom:
        types.append("application/strategic-merge-patch+json")
    types.append("application/apply-patch+yaml")
    return tuple(types)


def _paths_for(rt: ResourceType, schema: Obj | None, custom: bool) -> dict[str, Obj]:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scoped = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    ns_params = [_param("namespace", "path", required=True)] if rt.namespaced else []
    name_params = [_param("name", "path", required=True), *ns_params]
    list_schema = None
    patch_body = {"required": True, "content": {t: {"schema": _ref(_PATCH)} for t in _patch_types(rt, custom)}}
    write_params = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    ns = rt.namespaced
    paths: dict[str, Obj] = {
        scoped: {
            "parameters": ns_params,
            "get": _operation(rt, "list", _op_name(rt, "list", ns), params=_LIST_PARAMS,
                              responses=_ok(list_schema)),
            "post": _operation(rt, "post", _op_name(rt, "create", ns), params=write_params,
                               body={"required": True, "content": _content(schema, ("*/*",))},
                               responses=_ok(schema, ("200", "201", "202"))),
            "delete": _operation(rt, "deletecollection", _op_name(rt, "deleteCollection", ns),
                                 params=_LIST_PARAMS, responses=_ok(_ref(_STATUS))),
        },
        f"{scoped}/{{name}}": {
            "parameters": name_params,
            "get": _operation(rt, "get", _op_name(rt, "read", ns), responses=_ok(schema)),
            "put": _operation(rt, "put", _op_name(rt, "replace", ns), params=write_params,
                              body={"required": True, "content": _content(schema, ("*/*",))},
                              responses=_ok(schema, ("200", "201"))),
            "patch": _operation(rt, "patch", _op_name(rt, "patch", ns), params=[*write_params, _FORCE],
                                body=patch_body, responses=_ok(schema, ("200", "201"))),
            "delete": _operation(rt, "delete", _op_name(rt, "delete", ns),
                                 params=[_DRY_RUN, _param("gracePeriodSeconds"), _param("propagationPolicy")],
                                 body={"content": _content(_ref(_DELETE_OPTIONS), ("*/*",))},
                                 responses=_ok(schema, ("200", "202"))),
        },
    }
    if rt.namespaced:
        paths[f"{base}/{rt.plural}"] = {
            "get": _operation(rt, "list", _op_name(rt, "list", False, "ForAllNamespaces"), params=_LIST_PARAMS,
                              responses=_ok(list_schema)),
        }
    if "status" in rt.subresources:
        paths[f"{scoped}/{{name}}/status"] = {
            "parameters": name_params,
            "get": _operation(rt, "get", _op_name(rt, "read", ns, "Status"), responses=_ok(schema)),
            "put": _operation(rt, "put", _op_name(rt, "replace", ns, "Status"), params=write_params,
                              body={"required": True, "content": _content(schema, ("*/*",))},
                              responses=_ok(schema, ("200", "201"))),
            "patch": _operation(rt, "patch", _op_name(rt, "patch", ns, "Status"), params=[*write_params, _FORCE],
                                body=patch_body, responses=_ok(schema, ("200", "201"))),
        }
    return paths


def _crd_version(crds: list[Obj], rt: ResourceType) -> Obj | None:
    for crd in crds:
        spec = crd.get("spec") or {}
        if spec.get("group") != rt.group or (spec.get("names") or {}).get("plural") != rt.plural:
            continue
        for v in spec.get("versions") or []:
            if v.get("name") == rt.version:
                return v
    return None


def _cr_schema(rt: ResourceType, version: Obj) -> Obj:
    schema = copy.deepcopy(((version.get("schema") or {}).get("openAPIV3Schema")) or {"type": "object"})
    props = schema.setdefault("properties", {})
    props.setdefault("apiVersion", {"type": "string", "description": "APIVersion defines the versioned schema "
                                                                      "of this representation of an object."})
    props.setdefault("kind", {"type": "string", "description": "Kind is a string value representing the REST "
                                                                "resource this object represents."})
    props["metadata"] = {"allOf": [_ref(_OBJECT_META)], "description": "Standard object's metadata."}
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    return schema


_META_SCHEMAS: dict[str, Obj] = {
    _OBJECT_META: {
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": {"type": "string"}, "namespace": {"type": "string"}, "generateName": {"type": "string"},
            "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                           "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
            "ownerReferences": {"type": "array", "items": {"type": "object"},
                                "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
        },
    },
    _PATCH: {"type": "object", "description": "Patch is provided to give a concrete name and type to the "
                                              "Kubernetes PATCH request body."},
    _STATUS: {"type": "object", "description": "Status is a return value for calls that don't return other "
                                               "objects."},
    _DELETE_OPTIONS: {"type": "object", "description": "DeleteOptions may be provided when deleting an API object."},
}


def group_version_document(registry: Registry, group: str, version: str, crds: list[Obj]) -> Obj | None:
    """The OpenAPI v3 document of one group-version, or None when it is not served."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Obj] = {}
    schemas: dict[str, Obj] = dict(_META_SCHEMAS)
    schemas.update(builtin_schemas.closure(_META_SCHEMAS))   # Kubernetes' own ObjectMeta & co. when available
    for rt in types:
        crd_version = _crd_version(crds, rt)
        custom = crd_version is not None
        schema = None
        if crd_version is not None:
            name = schema_name(rt)
            schemas[name] = _cr_schema(rt, crd_version)
            schema = _ref(name)
        elif (name := builtin_schemas.kind_schema_name(rt.group, rt.version, rt.kind)) is not None:
            schemas.update(builtin_schemas.closure([name]))
            schema = _ref(name)
        paths.update(_paths_for(rt, schema, custom))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-lahar"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def document_hash(doc: Obj) -> str:
    return hashlib.sha512(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest().upper()[:64]


def index(hashes: dict[str, str]) -> Obj:
    """`GET /openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}, ...}}`."""
    return {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={h}"} for key, h in sorted(hashes.items())}}


def warm_up() -> None:
    """Read Kubernetes' schemas in a background thread (about a second, once per process), so that the first
    `/openapi/v3` request — every kubectl's first call — does not wait for it."""
    threading.Thread(target=builtin_schemas.definitions, name="openapi-warm-up", daemon=True).start()
