"""Patch mechanics: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and Kubernetes strategic merge patch.

Pure functions under the store's PATCH verb (and anything that wants kube's patch semantics offline); errors are
`kube.errors` with kube-apiserver's texts. Inputs are never mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer

from lahar.kube import errors

__all__ = ["json_patch", "merge_key", "merge_patch", "strategic_merge_patch"]

Obj = dict[str, Any]


# --- RFC 7386 ---------------------------------------------------------------------------------------------------


def merge_patch(obj: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else (lists included) replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            out[key] = merge_patch(out.get(key), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- RFC 6902 ---------------------------------------------------------------------------------------------------

_REJECTED = "the server rejected our request due to an error in our request"


def json_patch(obj: Any, ops: Any) -> Any:
    """RFC 6902 via `jsonpatch`. A malformed patch → BadRequest; one that does not apply → Invalid (422), as
    kube-apiserver answers (`the server rejected our request ...` with the cause in details)."""
    if not isinstance(ops, list):
        raise errors.BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    for op in ops:
        if not isinstance(op, Mapping) or "op" not in op:
            raise errors.BadRequest("Unexpected kind: <nil>" if isinstance(op, Mapping) else
                                    f"json: cannot unmarshal {type(op).__name__} into Go value of type jsonpatch.Operation")
        if op["op"] not in ("add", "remove", "replace", "move", "copy", "test"):
            raise errors.BadRequest(f"Unexpected kind: {op['op']}")
    try:
        patch = jsonpatch.JsonPatch(ops)
        return patch.apply(obj, in_place=False)
    except jsonpatch.JsonPatchTestFailed as err:
        raise _unprocessable(f"testing value {_path_of(err)} failed: {err}") from None
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException, jsonpatch.JsonPatchException,
            KeyError, IndexError, TypeError) as err:
        raise _unprocessable(str(err) or type(err).__name__) from None


def _path_of(err: Exception) -> str:
    return getattr(err, "path", "") or ""


def _unprocessable(detail: str) -> errors.Invalid:
    return errors.Invalid(_REJECTED, details={"causes": [{"reason": "UnexpectedServerResponse", "message": detail}]})


# --- strategic merge patch --------------------------------------------------------------------------------------

# Field name → merge key for lists merged by key (patchStrategy "merge" + patchMergeKey in k8s.io/api).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "secrets": "name",  # ServiceAccount.secrets
    "subsets": "",  # Endpoints subsets: atomic
}
# Primitive lists merged as sets (patchStrategy "merge" without key).
_MERGE_PRIMITIVE = {"finalizers"}
# Lists with the "retainKeys" strategy on their parent, irrelevant for merging; kept for reference.


def merge_key(path: tuple[str, ...], kind: str | None = None) -> str | None:
    """The merge key of the list at `path` (field names, list indices skipped), or None for an atomic list."""
    if not path:
        return None
    field = path[-1]
    parent = path[-2] if len(path) > 1 else ""
    if field == "ports":
        if parent in ("containers", "initContainers", "ephemeralContainers"):
            return "containerPort"
        if kind == "Service" and path == ("spec", "ports"):
            return "port"
        return None
    if field == "finalizers" and path != ("metadata", "finalizers"):
        return None  # Namespace spec.finalizers is atomic
    if field == "conditions" and parent != "status":
        return None
    key = _MERGE_KEYS.get(field)
    return key or None


def strategic_merge_patch(obj: Any, patch: Any, kind_key: str | None = None) -> Any:
    """Kubernetes strategic merge patch for the core types lahar touches. `kind_key` is the object's Kind (it picks
    e.g. Service `spec.ports` merged by `port`). Directives: `$patch: replace|delete|merge`, `$retainKeys`,
    `$deleteFromPrimitiveList/<f>`, `$setElementOrder/<f>`. Non-dict patch → BadRequest."""
    if not isinstance(patch, Mapping):
        raise errors.BadRequest("json: cannot unmarshal array into Go value of type map[string]interface {}")
    result = _merge_map(obj if isinstance(obj, Mapping) else {}, patch, (), kind_key)
    return {} if result is _DELETE else result


_DELETE = object()


def _merge_map(original: Mapping[str, Any], patch: Mapping[str, Any], path: tuple[str, ...],
               kind: str | None) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return _DELETE
    if directive not in (None, "merge"):
        raise errors.BadRequest(f"Unknown patch type: {directive} in map: {dict(patch)}")
    out = dict(original)
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise errors.BadRequest("invalid patch: $retainKeys must be a list of strings")
        for key in list(out):
            if key not in retain:
                del out[key]
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise errors.BadRequest("Invalid format of $deleteFromPrimitiveList")
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
            continue
        sub_path = (*path, key)
        current = out.get(key)
        if isinstance(value, Mapping):
            merged = _merge_map(current if isinstance(current, Mapping) else {}, value, sub_path, kind)
            if merged is _DELETE:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list):
            out[key] = _merge_list(current if isinstance(current, list) else [], value, sub_path, kind)
        else:
            out[key] = copy.deepcopy(value)
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(value, list):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = _reorder(out[field], value, merge_key((*path, field), kind))
    return out


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(item: Any) -> Any:
        if key and isinstance(item, Mapping):
            return item.get(key)
        return item

    wanted = [ident(o) for o in order]
    ranked = [i for i in items if ident(i) in wanted]
    ranked.sort(key=lambda i: wanted.index(ident(i)))
    rest = [i for i in items if ident(i) not in wanted]
    return ranked + rest


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...], kind: str | None) -> list[Any]:
    # `{"$patch": "replace"}` anywhere in the list: the rest of the patch list replaces the whole list.
    if any(isinstance(p, Mapping) and p.get("$patch") == "replace" and len(p) == 1 for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, Mapping) and p.get("$patch") == "replace")]
    if path[-1] in _MERGE_PRIMITIVE and path == ("metadata", path[-1]):
        out = list(original)
        for value in patch:
            if value not in out:
                out.append(value)
        return out
    key = merge_key(path, kind)
    if key is None or not all(isinstance(p, Mapping) for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, Mapping) and "$patch" in p)]
    out = [copy.deepcopy(o) for o in original]
    for item in patch:
        if key not in item:
            if item.get("$patch") == "delete" and len(item) == 1:
                continue
            raise errors.BadRequest(f"map: {dict(item)} does not contain declared merge key: {key}")
        idx = next((i for i, o in enumerate(out) if isinstance(o, Mapping) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out = [o for o in out if not (isinstance(o, Mapping) and o.get(key) == item[key])]
            continue
        if idx is None:
            merged = _merge_map({}, item, path, kind)
            if merged is not _DELETE:
                out.append(merged)
        else:
            merged = _merge_map(out[idx], item, path, kind)
            if merged is _DELETE:
                del out[idx]
            else:
                out[idx] = merged
    return out
