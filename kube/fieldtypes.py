"""What each map and list of an object is, as server-side apply sees it: struct, granular or atomic maps; atomic,
set or map (keyed) lists.

Under `kube.fieldsets` and `kube.apply`. Built-in kinds read a small table of the list-map keys and atomic types
kube-apiserver's OpenAPI carries for the kinds devcluster serves (the official client's models do not carry them);
custom resources read `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and `x-kubernetes-map-type` from their
CRD's structural schema. Everything is data plus two small cursors; nothing here does I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ATOMIC", "SET", "BuiltinTypes", "ListType", "SchemaTypes", "Types", "key_default", "types_for"]


@dataclass(frozen=True)
class ListType:
    """`atomic` (replaced whole), `set` (scalars merged by value) or `map` (items merged by `keys`)."""

    kind: str
    keys: tuple[str, ...] = ()


ATOMIC = ListType("atomic")
SET = ListType("set")


def _keyed(*keys: str) -> ListType:
    return ListType("map", keys)


class Types(Protocol):
    """A cursor over an object's shape at one path."""

    def field(self, name: str) -> Types:
        """The shape of map entry `name`."""

    def item(self) -> Types:
        """The shape of this list's items."""

    def map_kind(self) -> str:
        """`struct` (named fields), `granular` (user keys: each entry owned on its own) or `atomic`."""

    def list_type(self) -> ListType:
        """How this list merges."""


# --- built-in kinds --------------------------------------------------------------------------------------------
# Paths are field names from the object's root with list items skipped, matched by suffix unless marked exact.

_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")

# Lists merged by key: (path suffix, list type). Everything else in a built-in kind is atomic.
_BUILTIN_LISTS: tuple[tuple[tuple[str, ...], ListType], ...] = (
    *(((c,), _keyed("name")) for c in _CONTAINERS),
    *(((c, "ports"), _keyed("containerPort", "protocol")) for c in _CONTAINERS),
    *(((c, "env"), _keyed("name")) for c in _CONTAINERS),
    *(((c, "volumeMounts"), _keyed("mountPath")) for c in _CONTAINERS),
    *(((c, "volumeDevices"), _keyed("devicePath")) for c in _CONTAINERS),
    *(((c, "resizePolicy"), _keyed("resourceName")) for c in _CONTAINERS),
    (("resources", "claims"), _keyed("name")),
    (("spec", "volumes"), _keyed("name")),
    (("spec", "imagePullSecrets"), _keyed("name")),
    (("spec", "hostAliases"), _keyed("ip")),
    (("spec", "topologySpreadConstraints"), _keyed("topologyKey", "whenUnsatisfiable")),
    (("spec", "resourceClaims"), _keyed("name")),
    (("spec", "schedulingGates"), _keyed("name")),
    (("status", "conditions"), _keyed("type")),
    (("status", "addresses"), _keyed("type")),
)
# Exact paths (from the root), optionally for some kinds only: (kinds or None, path, list type).
_BUILTIN_EXACT: tuple[tuple[frozenset[str] | None, tuple[str, ...], ListType], ...] = (
    (None, ("metadata", "finalizers"), SET),
    (None, ("metadata", "ownerReferences"), _keyed("uid")),
    (frozenset({"Service"}), ("spec", "ports"), _keyed("port", "protocol")),
    (frozenset({"ServiceAccount"}), ("secrets",), _keyed("name")),
    (frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}), ("webhooks",), _keyed("name")),
    (frozenset({"Job"}), ("status", "conditions"), ATOMIC),
)
_LABEL_SELECTOR_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job",
                                   "PodDisruptionBudget"})
# Maps replaced whole (`structType: atomic` / `mapType: atomic` in kube's OpenAPI), by path suffix.
_ATOMIC_MAPS: tuple[tuple[str, ...], ...] = (
    ("labelSelector",), ("namespaceSelector",), ("objectSelector",),
    ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"), ("nodeSelectorTerms",),
    ("configMapKeyRef",), ("secretKeyRef",), ("fieldRef",), ("resourceFieldRef",), ("roleRef",),
    ("metadata", "ownerReferences"), ("spec", "imagePullSecrets"), ("spec", "scaleTargetRef"),
)
# Defaults of list-map key fields, used when an item leaves them out (kube's schema defaults them too).
_KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}


def key_default(field: str) -> Any:
    """The default value of a list-map key field, or None."""
    return _KEY_DEFAULTS.get(field)


class BuiltinTypes:
    """The cursor for a built-in kind: `kind` and the field names walked so far. Cursors are shared (one per
    kind and path) and answer from the tables once."""

    __slots__ = ("_list", "_map", "kind", "path")

    def __new__(cls, kind: str, path: tuple[str, ...] = ()) -> BuiltinTypes:
        return _builtin(kind, path)

    @classmethod
    def _make(cls, kind: str, path: tuple[str, ...]) -> BuiltinTypes:
        self = object.__new__(cls)
        self.kind, self.path = kind, path
        self._map: str | None = None
        self._list: ListType | None = None
        return self

    def __repr__(self) -> str:
        return f"BuiltinTypes({self.kind!r}, {self.path!r})"

    def field(self, name: str) -> BuiltinTypes:
        return _builtin(self.kind, (*self.path, name))

    def item(self) -> BuiltinTypes:
        return self

    def map_kind(self) -> str:
        if self._map is None:
            path = self.path
            atomic = (path == ("spec", "selector") and self.kind in _LABEL_SELECTOR_KINDS) or any(
                path[-len(s):] == s for s in _ATOMIC_MAPS if len(path) >= len(s))
            self._map = "atomic" if atomic else "struct"
        return self._map

    def list_type(self) -> ListType:
        if self._list is None:
            self._list = _builtin_list(self.kind, self.path)
        return self._list


@functools.lru_cache(maxsize=8192)
def _builtin(kind: str, path: tuple[str, ...]) -> BuiltinTypes:
    return BuiltinTypes._make(kind, path)


def _builtin_list(kind: str, path: tuple[str, ...]) -> ListType:
    for kinds, exact, lt in _BUILTIN_EXACT:
        if path == exact and (kinds is None or kind in kinds):
            return lt
    for suffix, lt in _BUILTIN_LISTS:
        if path[-len(suffix):] == suffix and len(path) >= len(suffix):
            return lt
    return ATOMIC


# --- custom resources ------------------------------------------------------------------------------------------

_DEDUCED: Mapping[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


@dataclass(frozen=True, eq=False)
class SchemaTypes:
    """The cursor over a CRD's openAPIV3Schema node; `metadata` at the root is ObjectMeta (a built-in shape).
    Where the schema says nothing (preserved unknown fields), maps are granular and lists atomic, as kube deduces."""

    kind: str
    node: Mapping[str, Any]
    root: bool = False

    def field(self, name: str) -> Types:
        if self.root and name == "metadata":
            return BuiltinTypes(self.kind, ("metadata",))
        props = self.node.get("properties") or {}
        if name in props:
            return SchemaTypes(self.kind, props[name] or {})
        extra = self.node.get("additionalProperties")
        if isinstance(extra, Mapping):
            return SchemaTypes(self.kind, extra)
        return SchemaTypes(self.kind, _DEDUCED)

    def item(self) -> SchemaTypes:
        items = self.node.get("items")
        return SchemaTypes(self.kind, items if isinstance(items, Mapping) else _DEDUCED)

    def map_kind(self) -> str:
        if self.node.get("x-kubernetes-map-type") == "atomic":
            return "atomic"
        return "struct" if self.node.get("properties") else "granular"

    def list_type(self) -> ListType:
        kind = self.node.get("x-kubernetes-list-type")
        if kind == "set":
            return SET
        if kind == "map":
            return ListType("map", tuple(self.node.get("x-kubernetes-list-map-keys") or ()))
        return ATOMIC


def types_for(kind: str, schema: Mapping[str, Any] | None) -> Types:
    """The root cursor: the CRD schema when the kind has one, else the built-in table."""
    if schema is not None:
        return _schema_root(kind, id(schema), schema)
    return BuiltinTypes(kind)


_ROOTS: dict[tuple[str, int], SchemaTypes] = {}


def _schema_root(kind: str, key: int, schema: Mapping[str, Any]) -> SchemaTypes:
    """One root cursor per schema object, so that results keyed by the cursor are found again."""
    root = _ROOTS.get((kind, key))
    if root is None or root.node is not schema:
        if len(_ROOTS) > 256:
            _ROOTS.clear()
        root = _ROOTS[(kind, key)] = SchemaTypes(kind, schema, root=True)
    return root
