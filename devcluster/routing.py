"""devcluster's HTTP plumbing, below `server.ApiServer`: the pure routing (`parse_resource_path`, content
negotiation, list options, scale patches), ASGI helpers (reading a bounded body, replying) and request bodies
(decoding JSON/YAML/protobuf, checking an object against its resource, DeleteOptions).

Imported by `devcluster.server` and `devcluster.watchstream`; imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import orjson
import yaml

from lahar.devcluster import protobuf
from lahar.kube import errors, limits
from lahar.kube.resources import ResourceType

Obj = dict[str, Any]
Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Obj], Any]

CRD_GROUP, CRD_PLURAL = "apiextensions.k8s.io", "customresourcedefinitions"
OPEN_PATHS = ("/healthz", "/livez", "/readyz", "/version")
DEFAULT_WATCH_TIMEOUT = 1800.0
_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)


def _not_found_path() -> errors.NotFound:
    return errors.NotFound("the server could not find the requested resource", details={})


# --- routing (pure) ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResourcePath:
    """A parsed `/api/v1/...` or `/apis/<g>/<v>/...` resource URL."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    watch: bool = False  # the legacy `/watch/` prefix


def parse_resource_path(group: str, version: str, rest: list[str]) -> ResourcePath | None:
    """`rest` is what follows the group-version: `[watch/][namespaces/<ns>/]<plural>[/<name>[/<sub>]]`."""
    watch = False
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = None
    if (len(rest) >= 3 and rest[0] == "namespaces"
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3 or any(not part for part in rest):
        return None
    return ResourcePath(group, version, rest[0], namespace, rest[1] if len(rest) > 1 else None,
                        rest[2] if len(rest) > 2 else None, watch)


def _accept_as(accept: str) -> str | None:
    """Which server-side transformation the Accept header asks for first: "Table", "PartialObjectMetadata"[List]."""
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        params = dict(p.partition("=")[::2] for p in pieces[1:])
        if "as" in params:
            if params.get("g", "meta.k8s.io") == "meta.k8s.io" and params["as"] in (
                    "Table", "PartialObjectMetadata", "PartialObjectMetadataList"):
                return params["as"]
            continue
        if pieces[0] in ("application/json", "*/*", "application/*", "application/yaml"):
            return None
    return None


INT32_MAX = 2**31 - 1


def scale_replicas(patch: Any) -> Any:
    """`spec.replicas` out of a Scale patch (merge: an object; JSON patch: a list of operations); a patch of
    any other shape is a 400 naming what it must be."""
    if isinstance(patch, dict):
        spec = patch.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise errors.BadRequest("spec: Invalid value: must be an object")
        return (spec or {}).get("replicas")
    if isinstance(patch, list):
        for index, op in enumerate(patch):
            if not isinstance(op, dict):
                raise errors.BadRequest(f"patch[{index}]: Invalid value: a JSON patch operation must be an object")
        return next((op.get("value") for op in patch if op.get("path") == "/spec/replicas"), None)
    raise errors.BadRequest("the patch must be a JSON object or a JSON patch array")


def _unsigned(value: str) -> bool:
    return value.isascii() and value.isdigit()


def check_list_options(limit: str | None, resource_version: str | None) -> None:
    """kube's ListOptions decoding: `limit` and `resourceVersion` are unsigned integers (400 naming the field)."""
    if limit not in (None, "") and not _unsigned(limit):
        raise errors.BadRequest(f"limit: Invalid value: {limit!r}: must be a non-negative integer")
    if resource_version not in (None, "") and not _unsigned(resource_version):
        raise errors.BadRequest(f"resourceVersion: Invalid value: {resource_version!r}: must be a non-negative "
                                f"integer")


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


def _warning_header(text: str) -> tuple[bytes, bytes]:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return b"warning", f'299 - "{escaped}"'.encode()


class _Query:
    def __init__(self, raw: bytes) -> None:
        self.items = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
        self.map: dict[str, str] = {}
        for k, v in self.items:
            self.map.setdefault(k, v)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.map.get(key, default)

    def all(self, key: str) -> list[str]:
        return [v for k, v in self.items if k == key]


# --- ASGI plumbing -------------------------------------------------------------------------------------------

class _Reply(Exception):
    """Raised inside handlers to answer at once with a ready body."""

    def __init__(self, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
        self.status, self.body, self.content_type = status, body, content_type


def _too_large(limit: int) -> errors.ApiError:
    return errors.ApiError(f"Request entity too large: limit is {limit}", code=413, reason="RequestEntityTooLarge")


async def _read_body(receive: Receive, limit: int = limits.MAX_BODY_BYTES) -> bytes:
    """The request body, refused with 413 as soon as it grows past `limit` bytes (kube-apiserver's 3 MiB)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _decode_json(body: bytes, what: str) -> Any:
    """JSON with the shared depth bound; every failure is a 400 naming `what`."""
    try:
        value = orjson.loads(body)
        limits.check_depth(value, what=what)
    except orjson.JSONDecodeError as e:
        raise errors.BadRequest(f"error decoding {what}: {e}") from None
    except limits.LimitError as e:
        raise errors.BadRequest(f"error decoding {what}: {e}") from None
    return value


def _decode_yaml(body: bytes, what: str) -> Any:
    try:
        return limits.safe_load(body)
    except limits.LimitError as e:
        raise errors.BadRequest(f"error decoding {what}: {e}") from None
    except yaml.YAMLError as e:
        raise errors.BadRequest(f"error decoding {what}: yaml: {e}") from None


async def _respond(send: Send, status: int, body: bytes, *, content_type: bytes = b"application/json",
                   warnings: list[str] | None = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-cache, private")]
    for w in warnings or ():
        headers.append(_warning_header(w))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --- bodies ---------------------------------------------------------------------------------------------

def decode_body(body: bytes, headers: dict[str, str]) -> Obj:
    content_type = headers.get("content-type", "application/json").split(";")[0].strip()
    try:
        if content_type in ("application/yaml", "application/x-yaml"):
            obj = _decode_yaml(body, "the body")
        elif content_type in ("application/json", "*/*", ""):
            obj = _decode_json(body, "the body") if body.strip() else None
        elif content_type == "application/vnd.kubernetes.protobuf":
            obj = protobuf.decode(body)
        else:
            raise errors.UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json, application/yaml (got {content_type})")
    except protobuf.ProtobufError as e:
        raise errors.UnsupportedMediaType(str(e)) from None
    except (orjson.JSONDecodeError, yaml.YAMLError) as e:
        raise errors.BadRequest(f"couldn't get version/kind; json parse error: {e}") from None
    if not isinstance(obj, dict):
        raise errors.BadRequest("the body of the request must be a JSON object")
    return obj

def prepare_object(rt: ResourceType, obj: Obj, ns: str | None) -> Obj:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version and api_version != rt.api_version:
        raise errors.BadRequest(f"the API version in the data ({api_version}) does not match the expected API "
                                f"version ({rt.api_version})")
    if kind and kind != rt.kind:
        raise errors.BadRequest(f"{kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                                f"the object kind {kind!r} does not match the resource kind {rt.kind!r}")
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise errors.BadRequest("metadata must be an object")
    if rt.namespaced:
        if meta.get("namespace") and ns is not None and meta["namespace"] != ns:
            raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on "
                                    "the request")
        if ns is not None:
            meta["namespace"] = ns
    else:
        meta.pop("namespace", None)
    return obj

def delete_options(query: _Query, body: bytes, headers: dict[str, str]) -> Obj:
    options: Obj = {}
    if body.startswith(protobuf.MAGIC):
        try:
            options = protobuf.decode(body)
        except protobuf.ProtobufError as e:
            raise errors.UnsupportedMediaType(str(e)) from None
    elif body.strip():
        try:
            options = orjson.loads(body)
            limits.check_depth(options, what="DeleteOptions")
        except (orjson.JSONDecodeError, limits.LimitError):
            options = _decode_yaml(body, "DeleteOptions") or {}
        if not isinstance(options, dict):
            raise errors.BadRequest("DeleteOptions must be an object")
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    orphan = query.get("orphanDependents")
    orphan_flag = _bool(orphan) if orphan is not None else options.get("orphanDependents")
    if policy is None and orphan_flag is not None:
        policy = "Orphan" if orphan_flag else "Background"
    if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.BadRequest(f"propagationPolicy {policy!r} is not one of Orphan, Background, Foreground")
    grace = query.get("gracePeriodSeconds")
    grace_value = options.get("gracePeriodSeconds") if grace is None else grace
    try:
        grace_seconds = int(grace_value) if grace_value is not None else None
    except (TypeError, ValueError):
        raise errors.BadRequest(f"invalid gracePeriodSeconds {grace_value!r}") from None
    preconditions = options.get("preconditions") or None
    dry = query.all("dryRun") or list(options.get("dryRun") or [])
    return {"propagation_policy": policy, "grace_period_seconds": grace_seconds,
            "preconditions": preconditions, "dry_run": dry}


_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "events.k8s.io", "scheduling.k8s.io",
                             "coordination.k8s.io", "networking.k8s.io", "rbac.authorization.k8s.io",
                             "admissionregistration.k8s.io", "apiextensions.k8s.io", "autoscaling",
                             "storage.k8s.io", "node.k8s.io", "discovery.k8s.io", "certificates.k8s.io",
                             "authorization.k8s.io", "authentication.k8s.io", "flowcontrol.apiserver.k8s.io"})


def _decode_patch(body: bytes, patch_type: str) -> Any:
    """A PATCH body: JSON, or for server-side apply YAML (of which JSON is a subset)."""
    if patch_type == "apply":
        return _decode_yaml(body, "apply configuration")
    return _decode_json(body, "patch")


def _partial(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}
