"""Small pure helpers of the API-server engine: storage keys, copies, timestamps and kube's error texts.

Used by every module of `kube.apiserver` (the store and its concerns); nothing here holds state.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from lahar.kube import errors, limits
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "MODIFIED",
    "check_storable",
    "conflict",
    "copy_obj",
    "gc_paused",
    "invalid",
    "meta_of",
    "not_found",
    "object_key",
    "owner_uids",
    "qualified_kind",
    "resource_name",
    "rfc3339",
    "spec_part",
    "split_key",
    "status_success",
]

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
CONFLICT_TEXT = "the object has been modified; please apply your changes to the latest version and try again"
GC_PAUSE_ITEMS = 64


def object_key(rt: ResourceType, namespace: str | None, name: str) -> str:
    """The storage key: `group/plural/namespace/name` (core group "", cluster-scoped namespace "")."""
    return f"{rt.group}/{rt.plural}/{(namespace or '') if rt.namespaced else ''}/{name}"


def split_key(key: str) -> tuple[tuple[str, str], str, str]:
    """`object_key` taken apart: ((group, plural), namespace, name)."""
    group, plural, ns, name = key.split("/", 3)
    return (group, plural), ns, name


def copy_obj(obj: Any) -> Any:
    """A deep copy of a JSON tree (orjson round trip: faster than `copy.deepcopy` on plain dicts)."""
    return orjson.loads(orjson.dumps(obj))


@contextlib.contextmanager
def gc_paused(pause: bool = True) -> Iterator[None]:
    """Hold off the cyclic GC while a large JSON tree is built: its allocations would trigger collections that walk
    the whole store (about two thirds of a 10,000-pod LIST) and JSON trees have no cycles to find. Leaves a GC that
    someone else disabled alone."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def meta_of(obj: Obj) -> dict[str, Any]:
    """The object's `metadata`, created empty when missing or not a mapping."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def resource_name(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def qualified_kind(rt: ResourceType) -> str:
    return f"{rt.kind}.{rt.group}" if rt.group else rt.kind


def not_found(rt: ResourceType, name: str) -> errors.NotFound:
    return errors.NotFound(f'{resource_name(rt)} "{name}" not found',
                           details={"name": name, "group": rt.group, "kind": rt.plural})


def conflict(rt: ResourceType, name: str, why: str = CONFLICT_TEXT, resource: str | None = None) -> errors.Conflict:
    return errors.Conflict(f'Operation cannot be fulfilled on {resource or resource_name(rt)} "{name}": {why}',
                           details={"name": name, "group": rt.group, "kind": rt.plural})


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> errors.Invalid:
    """kube's NewInvalid: causes are (reason e.g. FieldValueInvalid, field, body e.g. `Invalid value: "x": ...`)."""
    texts = [f"{fld}: {body}" if fld else body for _, fld, body in causes]
    agg = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return errors.Invalid(f'{qualified_kind(rt)} "{name}" is invalid: {agg}', details={
        "name": name, "group": rt.group, "kind": rt.kind,
        "causes": [{"reason": reason, "message": body, "field": fld} for reason, fld, body in causes],
    })


def rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_storable(rt: ResourceType, obj: Obj) -> None:
    """Refuse (400) an object nested deeper than `limits.MAX_DEPTH` -- whether it came so from the client or grew
    so through a patch or a mutating webhook -- so that nothing stored is unserialisable in a LIST or a watch."""
    try:
        limits.check_depth(obj, what=f"the {rt.kind} object")
    except limits.LimitError as e:
        raise errors.BadRequest(str(e)) from None


def status_success(code: int = 201) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def spec_part(obj: Obj, has_status: bool) -> dict[str, Any]:
    """What a write must change to bump `metadata.generation`: all but metadata (and status, if a subresource)."""
    skip = ("metadata", "apiVersion", "kind", "status") if has_status else ("metadata", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


def owner_uids(obj: Obj) -> list[str]:
    return [r.get("uid") for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r.get("uid")]
