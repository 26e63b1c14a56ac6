"""Decoding a request body as kube-apiserver does before anyone else sees it: kind and apiVersion checks, the
namespace of the request, typed decoding of built-in kinds, pruning, defaulting and validation of custom resources
against their structural schema.

Pure functions over plain dicts, called by `kube.apiserver.store.Store` on every create, update and patch; a custom
resource's schema comes from `kube.apiserver.crds`, the schema rules from `kube.schemas`.
"""

from __future__ import annotations

from typing import Any

from lahar.kube import errors, schemas, wiretypes
from lahar.kube.apiserver.defaulting import default_pod, merge_string_data
from lahar.kube.apiserver.objects import copy_obj, invalid, meta_of
from lahar.kube.apiserver.ports import Request
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["check_body", "check_decoded", "decode", "resolve_namespace", "schema_validate"]


def check_body(rt: ResourceType, obj: Any) -> Obj:
    """A copy of the body under the type's apiVersion and kind (400 when it names another type), with metadata."""
    if not isinstance(obj, dict):
        raise errors.BadRequest(f"the body of the request was not a {rt.kind} object")
    obj = copy_obj(obj)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if kind and kind != rt.kind:
        raise errors.BadRequest(f"the kind of the object ({kind}) does not match the expected kind ({rt.kind})")
    if api_version and api_version != rt.api_version:
        group = api_version.rpartition("/")[0]
        if group != rt.group:
            raise errors.BadRequest(f"the API version in the data ({api_version}) does not match the expected "
                                    f"API version ({rt.api_version})")
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    obj = {"apiVersion": rt.api_version, "kind": rt.kind, **rest}
    meta_of(obj)
    return obj


def resolve_namespace(rt: ResourceType, namespace: str | None, meta: dict[str, Any]) -> str | None:
    """The namespace the object goes to (the request's, else the body's; none for cluster-scoped types)."""
    if not rt.namespaced:
        meta.pop("namespace", None)
        return None
    body_ns = meta.get("namespace")
    if namespace and body_ns and body_ns != namespace:
        raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on the "
                                "request")
    ns = namespace or body_ns
    if not ns:
        raise errors.BadRequest("an empty namespace may not be set during creation")
    meta["namespace"] = ns
    return ns


def decode(rt: ResourceType, obj: Obj, req: Request, schema: Obj | None) -> Obj:
    """Strict-field check, pruning and defaulting for custom resources (`schema`: their openAPIV3Schema, or None);
    kube's typed decoding (JSON types, int32 ranges, unknown fields), metadata checks and defaults for built-in
    kinds."""
    check_decoded(rt, obj, req)
    if rt.group == "" and rt.plural == "pods":
        default_pod(obj)
        return obj
    if rt.group == "" and rt.plural == "secrets":
        merge_string_data(obj)
        return obj
    if schema is None:
        return obj
    unknown = [u for u in schemas.unknown_fields(schema, obj)
               if u not in ("apiVersion", "kind") and not u.startswith("metadata")]
    if unknown:
        if req.field_validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errors.BadRequest(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                    f"strict decoding error: {listed}")
        if req.field_validation == "Warn":
            req.warnings.extend(f'unknown field "{u}"' for u in unknown)
    keep = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    obj = schemas.prune(schema, obj)
    obj = schemas.apply_defaults(schema, obj)
    obj.update(keep)
    return obj


def check_decoded(rt: ResourceType, obj: Obj, req: Request) -> None:
    """What kube-apiserver's decoder refuses before any webhook sees the object: a JSON type that does not fit
    the field (400), unknown fields under fieldValidation=Strict (400, or warnings under Warn), then invalid
    label keys and values and unparsable pod quantities (422)."""
    model = wiretypes.model_for(rt.group, rt.version, rt.kind)
    if model is not None:
        found = wiretypes.decode_problems(model, obj)
        prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
        if found.type_errors:
            raise errors.BadRequest(prefix + "; ".join(found.type_errors))
        unknown = [u for u in found.unknown if not u.startswith("metadata.managedFields")]
        if unknown and req.field_validation == "Strict":
            raise errors.BadRequest(prefix + "strict decoding error: " +
                                    ", ".join(f'unknown field "{u}"' for u in unknown))
        if unknown and req.field_validation == "Warn":
            req.warnings.extend(f'unknown field "{u}"' for u in unknown)
        found.drop_unknown()  # never stored, as in kube: a later Strict apply must not trip over them
    causes = wiretypes.meta_problems(obj, pod=rt.group == "" and rt.plural == "pods")
    if causes:
        raise invalid(rt, meta_of(obj).get("name", ""), [("FieldValueInvalid", fld, body) for fld, body in causes])


def schema_validate(rt: ResourceType, obj: Obj, schema: Obj | None) -> None:
    """A custom resource against its structural schema (metadata aside): a 422 naming every cause."""
    if schema is None:
        return
    errs = [e for e in schemas.validate(schema, obj) if not str(getattr(e, "field", "")).startswith("metadata")]
    if not errs:
        return
    causes = []
    for e in errs:
        fld = str(getattr(e, "field", ""))
        if callable(getattr(e, "body", None)):
            body = e.body()
        else:
            msg = e.message() if callable(getattr(e, "message", None)) else str(e)
            body = msg[len(fld) + 2:] if fld and msg.startswith(fld + ": ") else msg
        causes.append((str(getattr(e, "type", "FieldValueInvalid")), fld, body))
    raise invalid(rt, obj["metadata"].get("name", ""), causes)
