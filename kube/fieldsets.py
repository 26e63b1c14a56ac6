"""Field paths and field sets: which fields of an object exist, which a manager owns, and how two objects differ.

Under `kube.apply` (server-side apply and managedFields). A path is a tuple of kube's encoded path elements
(`f:<field>`, `k:<json of the key fields>`, `v:<json of a set item>`), so a set of paths maps one to one onto the
`FieldsV1` tree of `metadata.managedFields` (`encode` / `decode`). Pure functions over plain dicts.
"""

from __future__ import annotations

import collections
import functools
import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from lahar.kube import fieldtypes
from lahar.kube.fieldtypes import Types

__all__ = ["FieldSetError", "Path", "closure", "compare", "decode", "element", "encode", "flatten",
           "flatten_object", "members", "path_string"]

Path = tuple[str, ...]
LEAF, MAP, LIST = "leaf", "map", "list"
# kube-apiserver strips these before tracking ownership: nobody manages identity or system fields.
_SYSTEM_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                          "selfLink", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds"})


class FieldSetError(ValueError):
    """An object that does not fit its shape (an item without its key, a duplicate key); `path` names where."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path_string(path) or '.'}: {detail}")
        self.path, self.detail = path, detail


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def element(item: Any, list_type: fieldtypes.ListType, path: Path, index: int) -> str:
    """The path element naming `item` in a set or map list."""
    if list_type.kind == "set":
        if isinstance(item, (dict, list)):
            raise FieldSetError(path, f"element {index}: set items must be scalars")
        return "v:" + _dumps(item)
    if not isinstance(item, dict):
        raise FieldSetError(path, f"element {index}: associative list items must be objects")
    key: dict[str, Any] = {}
    for name in list_type.keys:
        value = item.get(name)
        if value is None:
            value = fieldtypes.key_default(name)
        if value is None:
            raise FieldSetError(path, f'element {index}: associative list with keys has an element that omits key '
                                      f'field "{name}" (and doesn\'t have default value)')
        key[name] = value
    return "k:" + _dumps(key)


def path_string(path: Path) -> str:
    """kube's printed form: `.spec.containers[name="app"].image`, `.metadata.finalizers[="x"]`."""
    out = []
    for pe in path:
        tag, body = pe[:2], pe[2:]
        if tag == "f:":
            out.append("." + body)
        elif tag == "k:":
            key = json.loads(body)
            out.append("[" + ",".join(f"{k}={_dumps(v)}" for k, v in key.items()) + "]")
        elif tag == "v:":
            out.append("[=" + body + "]")
        else:
            out.append("[" + body + "]")
    return "".join(out)


# --- walking an object -----------------------------------------------------------------------------------------

def flatten(obj: Mapping[str, Any], types: Types, *, status: str = "include",
            strict: bool = False) -> dict[Path, tuple[str, Any, bool]]:
    """Every path of `obj` → (shape, leaf value, member). Leaves are scalars, atomic or empty maps/lists; members
    are what ownership is recorded for (leaves, list items, granular map entries). `status` is `include`,
    `exclude` (a main resource whose status is a subresource) or `only` (the status subresource). System fields
    (apiVersion, kind, metadata.name, uid, ...) are left out. `strict` refuses duplicate list keys (an applied
    configuration); a live object keeps the first of duplicates, as kube does."""
    out: dict[Path, tuple[str, Any, bool]] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (status == "exclude" and key == "status") or (
                status == "only" and key != "status"):
            continue
        child = types.field(key)
        path = ("f:" + key,)
        if key == "metadata" and isinstance(value, dict):
            for mkey, mvalue in value.items():
                if mkey not in _SYSTEM_META:
                    _walk(mvalue, child.field(mkey), (*path, "f:" + mkey), out, False, strict)
            continue
        _walk(value, child, path, out, False, strict)
    return out


def _walk(value: Any, types: Types, path: Path, out: dict[Path, tuple[str, Any, bool]], member: bool,
          strict: bool) -> None:
    if isinstance(value, dict):
        kind = types.map_kind()
        if kind == "atomic" or not value:
            out[path] = (LEAF, value, True)
            return
        out[path] = (MAP, None, member)
        granular = kind == "granular"
        for key, sub in value.items():
            if isinstance(sub, (dict, list)):
                _walk(sub, types.field(key), (*path, "f:" + key), out, granular, strict)
            else:
                out[(*path, "f:" + key)] = (LEAF, sub, True)
        return
    if isinstance(value, list):
        list_type = types.list_type()
        if list_type.kind == "atomic" or not value:
            out[path] = (LEAF, value, list_type.kind == "atomic")
            return
        out[path] = (LIST, None, member)
        item_types = types.item()
        seen: set[str] = set()
        for index, item in enumerate(value):
            pe = element(item, list_type, path, index)
            if pe in seen:
                if strict:
                    raise FieldSetError(path, f"duplicate entries for key {path_string((pe,))}")
                continue
            seen.add(pe)
            _walk(item, item_types, (*path, pe), out, True, strict)
        return
    out[path] = (LEAF, value, True)


def flatten_object(obj: Mapping[str, Any], types: Types, *, status: str = "include") -> dict[
        Path, tuple[str, Any, bool]]:
    """`flatten` of a stored object, remembered: the object a write produces is the next write's live object.
    The result is shared; callers only read it."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k not in _SYSTEM_META}}
    key = (id(types), status, orjson.dumps(obj))
    with _FLAT_LOCK:
        hit = _FLAT_CACHE.get(key)
        if hit is not None and hit[0] is types:
            _FLAT_CACHE.move_to_end(key)
            return hit[1]
    flat = flatten(obj, types, status=status)
    with _FLAT_LOCK:
        _FLAT_CACHE[key] = (types, flat)
        if len(_FLAT_CACHE) > 1024:
            _FLAT_CACHE.popitem(last=False)
    return flat


# Stored objects are never changed in place, so a flattened one stays true for as long as its bytes match.
_FLAT_CACHE: collections.OrderedDict[tuple[int, str, bytes], tuple[Types, dict[Path, tuple[str, Any, bool]]]] = (
    collections.OrderedDict())
_FLAT_LOCK = threading.Lock()


def members(flat: Mapping[Path, tuple[str, Any, bool]]) -> frozenset[Path]:
    """The owned paths of a flattened object (kube's ToFieldSet)."""
    return frozenset(p for p, (_, _, member) in flat.items() if member)


def closure(paths: Iterable[Path]) -> frozenset[Path]:
    """The paths and all their prefixes (the root excluded)."""
    out: set[Path] = set()
    for p in paths:
        for i in range(len(p), 0, -1):
            prefix = p[:i]
            if prefix in out:
                break
            out.add(prefix)
    return frozenset(out)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: bools are not numbers, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _empty_of(node: tuple[str, Any, bool], shape: str) -> bool:
    """A leaf `{}` / `[]` against a non-empty map / list at the same path is the same container, not a change."""
    kind, value, _ = node
    return kind == LEAF and ((shape == MAP and value == {}) or (shape == LIST and value == []))


def compare(old: Mapping[Path, tuple[str, Any, bool]],
            new: Mapping[Path, tuple[str, Any, bool]]) -> tuple[frozenset[Path], frozenset[Path], frozenset[Path]]:
    """(added, modified, removed) between two flattened objects, as kube's typed Compare: containers that appear
    or vanish count with everything in them (top-level ones excepted: kube's typed objects always have them);
    leaves count when their value changes."""
    added, modified = set(), set()
    for path, node in new.items():
        before = old.get(path)
        if before is None:
            if len(path) > 1 or node[0] == LEAF:  # top-level containers (spec, data) always exist in kube's view
                added.add(path)
        elif before[0] == LEAF and node[0] == LEAF:
            a, b = before[1], node[1]
            if not (a == b and (type(a) is type(b) or _equal(a, b))):
                modified.add(path)
        elif before[0] != node[0] and not (_empty_of(before, node[0]) or _empty_of(node, before[0])):
            modified.add(path)
    removed = frozenset(p for p, node in old.items() if p not in new and (len(p) > 1 or node[0] == LEAF))
    return frozenset(added), frozenset(modified), removed


# --- FieldsV1 --------------------------------------------------------------------------------------------------

def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """A set of paths → the FieldsV1 tree (`{"f:spec": {"f:replicas": {}}}`, `.` marking a member that also has
    children), keys sorted as kube writes them."""
    return _encode_cached(frozenset(paths))


@functools.lru_cache(maxsize=4096)
def _encode_cached(paths: frozenset[Path]) -> dict[str, Any]:  # most entries are unchanged by a write; the
    # tree is shared between the objects that hold it, which the store never changes in place
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for pe in path:
            node = node.setdefault(pe, {})
        node["."] = {}
    return _tidy(root)


def _tidy(node: dict[str, Any]) -> dict[str, Any]:
    children = {k: _tidy(v) for k, v in node.items() if k != "."}
    if not children:
        return {}
    if "." in node:
        children["."] = {}
    return dict(sorted(children.items()))


def decode(fields: Any) -> frozenset[Path]:
    """The FieldsV1 tree → a set of paths; key and value elements are re-encoded canonically. A malformed tree
    raises FieldSetError."""
    if not isinstance(fields, Mapping):
        raise FieldSetError((), "fieldsV1 must be an object")
    return _decode_cached(orjson.dumps(fields))


@functools.lru_cache(maxsize=4096)
def _decode_cached(raw: bytes) -> frozenset[Path]:  # the same entries are read again on every write
    out: set[Path] = set()
    _decode(orjson.loads(raw), (), out)
    return frozenset(out)


def _decode(node: Mapping[str, Any], path: Path, out: set[Path]) -> None:
    if path and (not node or "." in node):
        out.add(path)
    for key, child in node.items():
        if key == ".":
            continue
        if not isinstance(child, Mapping) or not isinstance(key, str) or key[:2] not in ("f:", "k:", "v:", "i:"):
            raise FieldSetError(path, f"invalid fieldsV1 element {key!r}")
        pe = key
        if key[:2] in ("k:", "v:"):
            try:
                pe = key[:2] + _dumps(json.loads(key[2:]))
            except ValueError:
                raise FieldSetError(path, f"invalid fieldsV1 element {key!r}") from None
        _decode(child, (*path, pe), out)
