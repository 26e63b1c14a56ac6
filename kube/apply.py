"""Server-side apply and managedFields: kube-apiserver's field manager over plain dicts.

Under the store's PATCH (`application/apply-patch+yaml`) and every write that tracks ownership. `apply` merges an
applied configuration into the live object, removes what the manager stopped applying when nobody else owns it,
and refuses changes to fields other managers own (409 naming them) unless forced; `update` records who changed
what on ordinary writes. Pure: the caller passes the time and the object's shape (`kube.fieldtypes`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from lahar.kube import errors, fieldsets
from lahar.kube.fieldsets import Path
from lahar.kube.fieldtypes import Types

__all__ = ["BEFORE_FIRST_APPLY", "Entry", "ManagedFieldsError", "apply", "conflict_error", "diff", "decode_managed",
           "encode_managed", "is_reset", "manager_from_user_agent", "merge", "update"]

Obj = dict[str, Any]
APPLY, UPDATE = "Apply", "Update"
BEFORE_FIRST_APPLY = "before-first-apply"


class ManagedFieldsError(ValueError):
    """`metadata.managedFields` that cannot be read."""


@dataclass(frozen=True)
class Entry:
    """One `metadata.managedFields` entry: who (manager, operation, subresource) owns which fields."""

    manager: str
    operation: str
    api_version: str
    fields: frozenset[Path]
    time: str | None = None
    subresource: str = ""

    def ident(self) -> tuple[str, str, str, str]:
        """kube's manager identity: appliers are one manager whatever apiVersion they apply with."""
        return (self.manager, self.operation, self.api_version if self.operation == UPDATE else "", self.subresource)

    def describe(self) -> str:
        """As kube-apiserver names a manager in conflict messages."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


# --- managedFields wire form -----------------------------------------------------------------------------------

def is_reset(value: Any) -> bool:
    """`managedFields: [{}]` is how a client asks to clear ownership."""
    return isinstance(value, list) and len(value) == 1 and value[0] == {}


def decode_managed(value: Any) -> list[Entry]:
    """`metadata.managedFields` → entries; anything malformed raises ManagedFieldsError."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManagedFieldsError("managedFields must be a list")
    out = []
    for i, raw in enumerate(value):
        if not isinstance(raw, Mapping):
            raise ManagedFieldsError(f"managedFields[{i}] must be an object")
        operation = raw.get("operation")
        if operation not in (APPLY, UPDATE):
            raise ManagedFieldsError(f"managedFields[{i}].operation must be Apply or Update, got {operation!r}")
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise ManagedFieldsError(f"managedFields[{i}].fieldsType must be FieldsV1")
        try:
            fields = fieldsets.decode(raw.get("fieldsV1") or {})
        except fieldsets.FieldSetError as e:
            raise ManagedFieldsError(f"managedFields[{i}].fieldsV1: {e}") from None
        out.append(Entry(manager=str(raw.get("manager") or ""), operation=operation,
                         api_version=str(raw.get("apiVersion") or ""), fields=fields, time=raw.get("time"),
                         subresource=str(raw.get("subresource") or "")))
    return out


def encode_managed(entries: list[Entry]) -> list[Obj]:
    """Entries → `metadata.managedFields`, in kube's order (Apply first, then by time, manager, apiVersion)."""
    ordered = sorted(entries, key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    out = []
    for e in ordered:
        raw: Obj = {"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version}
        if e.time:
            raw["time"] = e.time
        raw["fieldsType"] = "FieldsV1"
        raw["fieldsV1"] = fieldsets.encode(e.fields)
        if e.subresource:
            raw["subresource"] = e.subresource
        out.append(raw)
    return out


def manager_from_user_agent(user_agent: str) -> str:
    """The manager of a write without `fieldManager`: the user agent up to its first `/`, as kube-apiserver does."""
    return user_agent.split("/", 1)[0].strip()


# --- ordinary writes -------------------------------------------------------------------------------------------

Diff = tuple[frozenset[Path], frozenset[Path], frozenset[Path]]


def diff(live: Mapping[str, Any], new: Mapping[str, Any], types: Types, status: str = "include") -> Diff:
    """(added, modified, removed) fields of a write, system fields and managedFields aside; `status` as in
    `fieldsets.flatten` (a write that cannot change a part need not look at it)."""
    return fieldsets.compare(fieldsets.flatten_object(live, types, status=status),
                             fieldsets.flatten_object(new, types, status=status))


def update(entries: list[Entry], live: Mapping[str, Any], new: Mapping[str, Any], *, manager: str,
           api_version: str, subresource: str, now: str, types: Types, changes: Diff | None = None) -> list[Entry]:
    """Ownership after an ordinary write (operation Update): `manager` takes every field it added or changed,
    others lose those and every removed field. A write that changes nothing changes no entry. `changes` is the
    write's `diff` when the caller has it already."""
    added, modified, removed = changes if changes is not None else diff(live, new, types)
    if not (added or modified or removed):
        return list(entries)
    changed = added | modified
    mine = Entry(manager, UPDATE, api_version, frozenset(), None, subresource)
    out = []
    for e in entries:
        if e.ident() == mine.ident():
            mine = e
            continue
        kept = e.fields - changed - removed
        if kept:
            out.append(e if kept == e.fields else replace(e, fields=frozenset(kept)))
    fields = (mine.fields - removed) | changed
    if fields:
        out.append(replace(mine, fields=frozenset(fields), time=now))
    return out


# --- server-side apply -----------------------------------------------------------------------------------------

def _strip_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def merge(live: Any, config: Any, types: Types) -> Any:
    """The applied configuration over the live value: maps merge per field, keyed lists per item (in kube's
    order), set lists per value, atomic maps and lists and scalars take the configuration's value."""
    if isinstance(config, Mapping) and isinstance(live, Mapping) and types.map_kind() != "atomic":
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live[key], value, types.field(key)) if key in live else copy.deepcopy(value)
        return out
    if isinstance(config, list) and isinstance(live, list):
        list_type = types.list_type()
        if list_type.kind != "atomic":
            return _merge_list(live, config, list_type, types.item())
    return copy.deepcopy(config)


def _index(items: list[Any], list_type: Any) -> tuple[list[str], dict[str, Any]]:
    order, by_id = [], {}
    for i, item in enumerate(items):
        pe = fieldsets.element(item, list_type, (), i)
        if pe not in by_id:
            by_id[pe] = item
            order.append(pe)
    return order, by_id


def _merge_list(live: list[Any], config: list[Any], list_type: Any, item_types: Types) -> list[Any]:
    """Items only in the live list keep their places; shared and new items follow the configuration's order."""
    lhs, lhs_items = _index(live, list_type)
    rhs, rhs_items = _index(config, list_type)
    shared = [pe for pe in rhs if pe in lhs_items]
    next_shared = 0
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs) or ri < len(rhs):
        want = shared[next_shared] if next_shared < len(shared) else None
        if li < len(lhs) and ri < len(rhs) and lhs[li] == rhs[ri]:
            out.append(merge(lhs_items[lhs[li]], rhs_items[rhs[ri]], item_types))
            li, ri, next_shared = li + 1, ri + 1, next_shared + 1
            continue
        if li < len(lhs):
            pe = lhs[li]
            if pe not in rhs_items:
                out.append(copy.deepcopy(lhs_items[pe]))
                li += 1
                continue
            if want != pe:  # shared, but its turn comes with the configuration's order
                li += 1
                continue
        if ri < len(rhs):
            pe = rhs[ri]
            out.append(merge(lhs_items[pe], rhs_items[pe], item_types) if pe in lhs_items
                       else copy.deepcopy(rhs_items[pe]))
            if want == pe:
                next_shared += 1
            ri += 1
    return out


def _keeping(paths: frozenset[Path]) -> frozenset[Path]:
    """What owning `paths` keeps alive: the paths and the named fields above them, not the list items above them
    (an updater owning one field of an item does not keep the item when its applier drops it, as in kube)."""
    out = set(paths)
    for p in paths:
        for i in range(len(p) - 1, 0, -1):
            if p[i - 1].startswith("f:"):
                out.add(p[:i])
    return frozenset(out)


def _prune(value: Any, types: Types, path: Path, last: frozenset[Path], keep: frozenset[Path],
           keys: tuple[str, ...] = ()) -> None:
    """Remove, in place, what the applier owned last time, no longer applies, and nobody else owns. `keys` are
    the key fields of a list item that stays: they stay with it."""
    if isinstance(value, dict) and types.map_kind() != "atomic":
        for key in list(value):
            if (path == () and key in ("apiVersion", "kind")) or key in keys:
                continue
            sub = (*path, "f:" + key)
            if sub not in last:
                continue
            if sub not in keep and sub != ("f:metadata",):
                del value[key]
            else:
                _prune(value[key], types.field(key), sub, last, keep)
    elif isinstance(value, list):
        list_type = types.list_type()
        if list_type.kind == "atomic":
            return
        item_types = types.item()
        kept = []
        for i, item in enumerate(value):
            sub = (*path, fieldsets.element(item, list_type, path, i))
            if sub in last and sub not in keep:
                continue
            if sub in last:
                _prune(item, item_types, sub, last, keep, list_type.keys)
            kept.append(item)
        value[:] = kept


def _scope(status: str, config: Obj) -> Obj:
    """The part of an applied configuration that a write may change: without `status` on a main resource whose
    status is a subresource, only `status` on that subresource."""
    if status == "exclude":
        return {k: v for k, v in config.items() if k != "status"}
    if status == "only":
        return {k: v for k, v in config.items() if k in ("apiVersion", "kind", "metadata", "status")}
    return config


def apply(live: Obj, config: Obj, *, entries: list[Entry], manager: str, api_version: str, subresource: str,
          force: bool, now: str, types: Types, status: str = "include") -> tuple[Obj, list[Entry]]:
    """Apply `config` as `manager` to `live` (`{}` for a create). Returns the new object (without
    managedFields) and the new entries, or raises the 409 of `conflict_error`. A bad configuration (an item
    without its key, a duplicate key) raises `errors.Invalid` naming the field."""
    config = _scope(status, _strip_nulls(config))
    try:
        if not entries and live:
            entries = update([], {}, live, manager=BEFORE_FIRST_APPLY, api_version=str(live.get("apiVersion")
                                                                                       or api_version),
                             subresource="", now=now, types=types)
        applied = fieldsets.members(fieldsets.flatten(config, types, status=status, strict=True))
        merged = merge(copy.deepcopy(live), config, types)
        mine = Entry(manager, APPLY, api_version, frozenset(), None, subresource)
        others: list[Entry] = []
        for e in entries:
            if e.ident() == mine.ident():
                mine = e
            else:
                others.append(e)
        if mine.fields:
            keep = _keeping(applied.union(*(e.fields for e in others)))
            _prune(merged, types, (), fieldsets.closure(mine.fields), keep)
        added, modified, removed = fieldsets.compare(fieldsets.flatten_object(live, types, status=status),
                                                     fieldsets.flatten_object(merged, types, status=status))
    except fieldsets.FieldSetError as e:
        raise errors.Invalid(f"failed to apply the configuration: {e}",
                             details={"causes": [{"reason": "FieldValueInvalid", "message": e.detail,
                                                  "field": fieldsets.path_string(e.path).lstrip(".")}]}) from None
    changed = added | modified
    conflicts = [(e, p) for e in others for p in sorted(e.fields & changed)]
    if conflicts and not force:
        raise conflict_error(conflicts)
    out = []
    for e in others:
        kept = e.fields - changed - removed
        if kept:
            out.append(e if kept == e.fields else replace(e, fields=frozenset(kept)))
    if applied:
        touched = bool(changed or removed) or applied != mine.fields or mine.time is None
        out.append(replace(mine, api_version=api_version, fields=applied, time=now if touched else mine.time))
    return merged, out


def conflict_error(conflicts: list[tuple[Entry, Path]]) -> errors.Conflict:
    """kube-apiserver's apply conflict: 409, one `FieldManagerConflict` cause per field, and the message
    `Apply failed with N conflict(s): conflict with "manager": .spec.replicas`."""
    conflicts = sorted(conflicts, key=lambda c: (c[0].manager, c[0].operation, c[0].subresource, c[1]))
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.describe()}",
               "field": fieldsets.path_string(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        e, p = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {e.describe()}: {fieldsets.path_string(p)}"
    else:
        lines: list[str] = []
        last = None
        for e, p in conflicts:
            if e.ident() != last:
                lines.append(f"conflicts with {e.describe()}:")
                last = e.ident()
            lines.append(f"- {fieldsets.path_string(p)}")
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, details={"causes": causes})
