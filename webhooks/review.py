"""AdmissionReview in, AdmissionReview out: the one typed entry point of every lahar webhook.

The HTTP shell (`webhooks.app`) and `lahar admit` call `decode`/`parse` to get a `Request`, hand it to a rule
handler that returns a `Verdict`, and send back `response(...)` in the apiVersion the review came in.

Wire details, as kube-apiserver expects them (`admission.k8s.io/v1`; `v1beta1` is the same shape):
- a denial carries `response.status = {message, code?, reason?}`; the message is trimmed (Volcano trims too);
  `code` unset lets the API server answer 403;
- a mutation carries `patchType: JSONPatch` and `patch` = base64 of the RFC 6902 ops, only when there are ops
  (never on a denial);
- `warnings` are passed through when present.
Anything malformed raises `ReviewError` whose message names the field ("request.uid is required"); the HTTP
shell answers it with 400.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "API_VERSIONS",
    "MAX_BODY_BYTES",
    "OPERATIONS",
    "V1",
    "V1BETA1",
    "Request",
    "Review",
    "ReviewError",
    "Verdict",
    "decode",
    "encode_patch",
    "escape",
    "parse",
    "request_for",
    "response",
    "response_bytes",
    "to_review",
]

V1 = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"
API_VERSIONS = (V1, V1BETA1)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
# kube-apiserver refuses request bodies above 3 MiB (etcd's 1.5 MiB object limit, doubled by the review's
# object + oldObject); a review bigger than that cannot come from a real API server.
MAX_BODY_BYTES = 3 * 1024 * 1024


class ReviewError(ValueError):
    """The body is not a usable AdmissionReview; the message names what is wrong (HTTP 400)."""


@dataclass(frozen=True)
class Request:
    """`AdmissionReview.request`, flattened; objects are the review's own dicts (copy before changing them)."""

    uid: str
    operation: str                 # CREATE | UPDATE | DELETE | CONNECT
    group: str                     # request.kind.group
    version: str                   # request.kind.version
    kind: str                      # request.kind.kind
    resource: str                  # request.resource.resource (plural)
    sub_resource: str              # "" when none
    namespace: str                 # "" for cluster-scoped
    name: str                      # may be "" on CREATE with generateName
    object: dict | None            # None on DELETE
    old_object: dict | None        # on UPDATE and DELETE
    user_info: dict
    dry_run: bool
    resource_group: str = ""       # request.resource.group (usually equal to `group`)
    resource_version: str = ""     # request.resource.version


@dataclass(frozen=True)
class Verdict:
    """What a handler decided: allow (maybe with patch ops and warnings) or deny with Volcano's message."""

    allowed: bool
    message: str = ""              # denial text, sent as response.status.message
    code: int | None = None        # response.status.code when denied (None → not set, apiserver uses 403)
    reason: str = ""               # response.status.reason
    patch: tuple[dict, ...] = ()   # RFC 6902 ops (mutators); framework base64-encodes, patchType JSONPatch
    warnings: tuple[str, ...] = ()

    @classmethod
    def allow(cls, *, patch: Iterable[dict] = (), warnings: Iterable[str] = ()) -> Verdict:
        return cls(True, patch=tuple(patch), warnings=tuple(warnings))

    @classmethod
    def deny(cls, message: str, *, code: int | None = None, reason: str = "",
             warnings: Iterable[str] = ()) -> Verdict:
        return cls(False, message=message, code=code, reason=reason, warnings=tuple(warnings))


@dataclass(frozen=True)
class Review:
    """A parsed AdmissionReview: the apiVersion to answer in, and the request."""

    api_version: str
    request: Request


def escape(segment: str) -> str:
    """JSON-pointer escaping of one path segment (RFC 6901): "~" → "~0", "/" → "~1"."""
    return segment.replace("~", "~0").replace("/", "~1")


# -- parsing ------------------------------------------------------------------------------------------------------


def decode(body: bytes) -> Review:
    """Parse raw bytes (the HTTP body) into a `Review`; `ReviewError` for oversized, non-JSON or malformed bodies."""
    if len(body) > MAX_BODY_BYTES:
        raise ReviewError(f"request body is {len(body)} bytes, larger than the {MAX_BODY_BYTES} bytes (3 MiB) "
                          "an API server sends")
    if not body:
        raise ReviewError("request body is empty, expected an AdmissionReview")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise ReviewError(f"request body is not valid JSON: {e}") from None
    return parse(data)


def _str(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise ReviewError(f"{where}.{key} is required")
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"{where}.{key} must be a string")
    if required and not value:
        raise ReviewError(f"{where}.{key} is required")
    return value


def _obj(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> dict | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ReviewError(f"{where}.{key} is required")
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"{where}.{key} must be an object")
    return value


def _well_formed(req: dict) -> Request | None:
    """The `Request` of a review whose fields all have the expected types and values (what API servers send), or
    None: then `parse` checks field by field and names what is wrong. Same result, a third of the work."""
    uid, operation, gvk, gvr = req.get("uid"), req.get("operation"), req.get("kind"), req.get("resource")
    obj, old, user_info, dry_run = req.get("object"), req.get("oldObject"), req.get("userInfo"), req.get("dryRun")
    if not (type(uid) is str and uid and operation in _OBJECT_REQUIRED and type(gvk) is dict
            and type(gvr) is dict and type(obj) is dict and (old is None or type(old) is dict)
            and (operation == "CREATE" or old is not None)
            and (user_info is None or type(user_info) is dict) and (dry_run is None or type(dry_run) is bool)):
        return None
    group, version, kind = gvk.get("group"), gvk.get("version"), gvk.get("kind")
    resource, resource_group, resource_version = gvr.get("resource"), gvr.get("group"), gvr.get("version")
    sub_resource, namespace, name = req.get("subResource"), req.get("namespace"), req.get("name")
    for value in (group, resource_group, sub_resource, namespace, name):
        if value is not None and type(value) is not str:
            return None
    for value in (version, kind, resource, resource_version):
        if type(value) is not str or not value:
            return None
    # a frozen dataclass's __init__ sets each field through object.__setattr__ (2 µs for these 15); filling the
    # instance dict is the same object, every field given
    out = object.__new__(Request)
    out.__dict__.update(uid=uid, operation=operation, group=group or "", version=version, kind=kind,
                        resource=resource, sub_resource=sub_resource or "", namespace=namespace or "", name=name or "",
                        object=obj, old_object=old, user_info=user_info or {}, dry_run=bool(dry_run),
                        resource_group=resource_group or "", resource_version=resource_version)
    return out


_OBJECT_REQUIRED = ("CREATE", "UPDATE")   # the operations `_well_formed` takes (DELETE/CONNECT: `parse` checks)


def parse(data: Any) -> Review:
    """Check and flatten a decoded AdmissionReview (`admission.k8s.io/v1` or `v1beta1`)."""
    if type(data) is dict:
        api_version, req = data.get("apiVersion"), data.get("request")
        if api_version in API_VERSIONS and data.get("kind") == "AdmissionReview" and type(req) is dict:
            fast = _well_formed(req)
            if fast is not None:
                return Review(api_version, fast)
    if not isinstance(data, dict):
        raise ReviewError(f"request body must be an AdmissionReview object, got a JSON {_json_type(data)}")
    api_version = data.get("apiVersion")
    if not api_version:
        raise ReviewError("apiVersion is required")
    if api_version not in API_VERSIONS:
        raise ReviewError(f"apiVersion {api_version!r} is not supported, expected one of {', '.join(API_VERSIONS)}")
    kind = data.get("kind")
    if kind != "AdmissionReview":
        raise ReviewError("kind is required" if not kind else f"kind must be AdmissionReview, got {kind!r}")
    req = data.get("request")
    if req is None:
        raise ReviewError("request is required")
    if not isinstance(req, dict):
        raise ReviewError("request must be an object")
    uid = _str(req, "uid", "request", required=True)
    operation = _str(req, "operation", "request", required=True)
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}, got {operation!r}")
    gvk = _obj(req, "kind", "request", required=True)
    assert gvk is not None
    gvr = _obj(req, "resource", "request", required=True)
    assert gvr is not None
    obj = _obj(req, "object", "request")
    old = _obj(req, "oldObject", "request")
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise ReviewError(f"request.object is required for {operation}")
    if operation == "UPDATE" and old is None:
        raise ReviewError("request.oldObject is required for UPDATE")
    user_info = _obj(req, "userInfo", "request") or {}
    dry_run = req.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise ReviewError("request.dryRun must be a boolean")
    return Review(api_version, Request(
        uid=uid,
        operation=operation,
        group=_str(gvk, "group", "request.kind"),
        version=_str(gvk, "version", "request.kind", required=True),
        kind=_str(gvk, "kind", "request.kind", required=True),
        resource=_str(gvr, "resource", "request.resource", required=True),
        sub_resource=_str(req, "subResource", "request"),
        namespace=_str(req, "namespace", "request"),
        name=_str(req, "name", "request"),
        object=obj,
        old_object=old,
        user_info=user_info,
        dry_run=bool(dry_run),
        resource_group=_str(gvr, "group", "request.resource"),
        resource_version=_str(gvr, "version", "request.resource", required=True),
    ))


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


# -- answering ----------------------------------------------------------------------------------------------------


def encode_patch(ops: Iterable[dict]) -> str:
    """base64 of the JSON-encoded RFC 6902 ops, as `response.patch` carries them."""
    return base64.b64encode(orjson.dumps(list(ops))).decode("ascii")


def response(review_api_version: str, uid: str, verdict: Verdict) -> dict:
    """The AdmissionReview answering `uid` in `review_api_version` (the apiVersion the request came in)."""
    resp: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.allowed:
        if verdict.patch:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = encode_patch(verdict.patch)
    else:
        status: dict[str, Any] = {"message": verdict.message.strip()}
        if verdict.code is not None:
            status["code"] = verdict.code
        if verdict.reason:
            status["reason"] = verdict.reason
        resp["status"] = status
    if verdict.warnings:
        resp["warnings"] = list(verdict.warnings)
    return {"apiVersion": review_api_version, "kind": "AdmissionReview", "response": resp}


def response_bytes(review_api_version: str, uid: str, verdict: Verdict) -> bytes:
    """`response(...)` as JSON bytes (orjson), what the HTTP shell writes."""
    return orjson.dumps(response(review_api_version, uid, verdict))


# -- building (tests, `lahar admit -f`, the benchmark) -------------------------------------------------------------


def request_for(obj: dict, *, resource: str, operation: str = "CREATE", old_object: dict | None = None,
                uid: str = "00000000-0000-0000-0000-000000000000", namespace: str | None = None,
                sub_resource: str = "", user_info: dict | None = None, dry_run: bool = False) -> Request:
    """A `Request` for `obj` (or `old_object` on DELETE) as an API server would send it for `resource` (plural).

    Group, version and kind come from the object's apiVersion/kind; the namespace from metadata (else
    `namespace`); the name from metadata.name ("" with only generateName).
    """
    src = obj if obj is not None else old_object
    if src is None:
        raise ValueError("request_for needs an object or an old object")
    api_version = str(src.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    meta = src.get("metadata") or {}
    return Request(
        uid=uid, operation=operation, group=group, version=version, kind=str(src.get("kind") or ""),
        resource=resource, sub_resource=sub_resource,
        namespace=str(meta.get("namespace") or namespace or ""), name=str(meta.get("name") or ""),
        object=obj if operation != "DELETE" else None, old_object=old_object, user_info=user_info or {},
        dry_run=dry_run, resource_group=group, resource_version=version,
    )


def to_review(request: Request, *, api_version: str = V1) -> dict:
    """The AdmissionReview dict an API server would send for `request` (the inverse of `parse`)."""
    options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(request.operation)
    req: dict[str, Any] = {
        "uid": request.uid,
        "kind": {"group": request.group, "version": request.version, "kind": request.kind},
        "resource": {"group": request.resource_group or request.group,
                     "version": request.resource_version or request.version, "resource": request.resource},
        "requestKind": {"group": request.group, "version": request.version, "kind": request.kind},
        "requestResource": {"group": request.resource_group or request.group,
                            "version": request.resource_version or request.version, "resource": request.resource},
        "name": request.name,
        "namespace": request.namespace,
        "operation": request.operation,
        "userInfo": request.user_info,
        "object": request.object,
        "oldObject": request.old_object,
        "dryRun": request.dry_run,
    }
    if request.sub_resource:
        req["subResource"] = request.sub_resource
    if options:
        req["options"] = {"apiVersion": "meta.k8s.io/v1", "kind": options}
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": req}
