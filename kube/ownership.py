"""The store's bridge to field management: `metadata.managedFields` after a write, and the checks of an apply
request before `kube.apply` merges it.

Called by `kube.apiserver.store.Store` on create, update, patch and apply; pure functions over plain dicts, errors are
`kube.errors` with kube-apiserver's texts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.kube import apply, errors
from lahar.kube.fieldtypes import Types

__all__ = ["ABSENT", "after_write", "check_apply_config", "check_field_manager", "live_entries", "status_scope"]

Obj = dict[str, Any]
ABSENT: Any = object()
_MAX_MANAGER = 128


def status_scope(subresources: frozenset[str] | set[str], subresource: str | None) -> str:
    """Which part of the object a write on `subresource` owns: `only` status, all but status (`exclude`: status is
    a subresource), or everything (`include`)."""
    if subresource == "status":
        return "only"
    return "exclude" if "status" in subresources else "include"


def live_entries(obj: Mapping[str, Any] | None) -> list[apply.Entry]:
    """The stored object's entries; unreadable ones count as none (kube resets them rather than fail a write)."""
    try:
        return apply.decode_managed(((obj or {}).get("metadata") or {}).get("managedFields"))
    except apply.ManagedFieldsError:
        return []


def after_write(cur: Obj | None, new: Obj, supplied: Any, *, manager: str, subresource: str | None, now: str,
                types: Types, track: bool, scope: str = "include") -> list[Obj] | None:
    """`metadata.managedFields` for `new` after an ordinary write of `cur` (None on create). A client may set
    managedFields itself (kept when readable), clear them with `[{}]`, or leave them out (the live ones stay);
    a subresource write never sets them. With `track`, the write's own changes go to `manager` (operation
    Update), as kube-apiserver records them; without, ownership is carried over unchanged. `scope` is
    `status_scope` of the write: the part of the object it can change."""
    changes = apply.diff(cur or {}, new, types, scope) if track else None
    if changes is not None and not any(changes) and (supplied is ABSENT or subresource) and cur is not None:
        return ((cur.get("metadata") or {}).get("managedFields")) or None  # nothing changed: nobody gains a field
    base: list[apply.Entry] | None = None
    if supplied is not ABSENT and not subresource:
        if apply.is_reset(supplied):
            base = []
        elif supplied:
            try:
                base = apply.decode_managed(supplied) or None
            except apply.ManagedFieldsError:
                base = None
    if base is None:
        base = live_entries(cur)
    if track:
        base = apply.update(base, cur or {}, new, manager=manager, api_version=str(new.get("apiVersion", "")),
                            subresource=subresource or "", now=now, types=types, changes=changes)
    return apply.encode_managed(base) or None


def check_field_manager(manager: str | None, *, apply_patch: bool, force: bool) -> None:
    """PatchOptions validation: apply needs a fieldManager; `force` is for apply only; at most 128 characters."""
    if apply_patch and not manager:
        raise errors.Invalid('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
                             'apply patch', details={"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
                                 {"reason": "FieldValueRequired", "message": "Required value: is required for apply "
                                  "patch", "field": "fieldManager"}]})
    if force and not apply_patch:
        raise errors.Invalid('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for '
                             'non-apply patch', details={"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
                                 {"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for "
                                  "non-apply patch", "field": "force"}]})
    if manager and len(manager) > _MAX_MANAGER:
        raise errors.Invalid(f'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than '
                             f'{_MAX_MANAGER} bytes', details={"group": "meta.k8s.io", "kind": "PatchOptions",
                                                              "causes": [{"reason": "FieldValueTooLong",
                                                                          "message": "Too long: may not be more "
                                                                          f"than {_MAX_MANAGER} bytes",
                                                                          "field": "fieldManager"}]})


def check_apply_config(config: Any, *, api_version: str, kind: str, name: str, namespace: str | None) -> Obj:
    """An applied configuration must be an object of this resource's apiVersion and kind, for this name and
    namespace, without managedFields. Returns it with the name filled in."""
    if not isinstance(config, Mapping):
        raise errors.BadRequest("error decoding YAML: the applied configuration must be an object")
    given = config.get("apiVersion")
    if not given:
        raise errors.BadRequest("apiVersion must be set in an applied configuration")
    if given != api_version:
        raise errors.BadRequest(f"Incorrect version specified in apply patch. Specified patch version: {given}, "
                                f"expected: {api_version}")
    if config.get("kind") != kind:
        raise errors.BadRequest(f"kind must be {kind!r} in an applied configuration, got {config.get('kind')!r}")
    meta = config.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise errors.BadRequest("metadata must be an object")
    if meta.get("managedFields") is not None:
        raise errors.BadRequest("metadata.managedFields must be nil")
    if meta.get("name") and meta["name"] != name:
        raise errors.BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                f"({name})")
    if namespace is not None and meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on the "
                                "request")
    out = dict(config)
    out["metadata"] = {**meta, "name": name}
    if namespace is not None:
        out["metadata"]["namespace"] = namespace
    return out
