"""CustomResourceDefinitions: their validation and status, serving their versions as types of the registry, and
each version's structural schema and selectable fields.

`validate_crd` and `crd_status` are pure; `CustomResources` is mixed into `kube.apiserver.store.Store` (under its
lock) and registers a CRD when it is stored, unregisters it (and deletes its objects) when it is removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import orjson

from lahar.kube.apiserver.objects import DELETED, invalid
from lahar.kube.client import Obj
from lahar.kube.resources import Registry, ResourceType

__all__ = ["CustomResources", "crd_status", "validate_crd"]


def validate_crd(rt: ResourceType, crd: Obj) -> None:
    """422 for a CRD kube-apiserver would refuse: name not plural.group, missing group, names or scope, not exactly
    one storage version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = crd["metadata"].get("name", "")
    causes: list[tuple[str, str, str]] = []
    if name != f"{names.get('plural', '')}.{spec.get('group', '')}":
        causes.append(("FieldValueInvalid", "metadata.name",
                       f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if not spec.get("group"):
        causes.append(("FieldValueRequired", "spec.group", "Required value"))
    if not names.get("plural"):
        causes.append(("FieldValueRequired", "spec.names.plural", "Required value"))
    if not names.get("kind"):
        causes.append(("FieldValueRequired", "spec.names.kind", "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("FieldValueNotSupported", "spec.scope",
                       f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(("FieldValueInvalid", "spec.versions", "Invalid value: null: must have exactly one version "
                                                             "marked as storage version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(("FieldValueInvalid", "spec.versions",
                       "Invalid value: " + orjson.dumps(versions).decode()[:200] +
                       ": must have exactly one version marked as storage version"))
    if causes:
        raise invalid(rt, name, causes)


def crd_status(crd: Obj, old: Obj | None, *, now: str) -> Obj:
    """The status the server writes for a CRD: NamesAccepted and Established (transition times kept from `old`),
    acceptedNames with kube's defaults, storedVersions grown by the storage version."""
    old_conditions = {c.get("type"): c for c in (old or {}).get("conditions") or []}

    def cond(ctype: str, reason: str, message: str) -> Obj:
        prev = old_conditions.get(ctype)
        ts = prev.get("lastTransitionTime", now) if prev and prev.get("status") == "True" else now
        return {"type": ctype, "status": "True", "lastTransitionTime": ts, "reason": reason, "message": message}

    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stored = list((old or {}).get("storedVersions") or [])
    for v in spec.get("versions") or []:
        if v.get("storage") and v.get("name") not in stored:
            stored.append(v.get("name"))
    return {
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                       cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "acceptedNames": names,
        "storedVersions": stored,
    }


class CustomResources:
    """Mixed into `Store`: the schemas and selectable fields of served custom types, by (group, version, plural)."""

    # what this part uses of the others (set or defined by `Store` and its other parts), named for readers
    registry: Registry
    _lock: threading.RLock
    _by_type: dict[tuple[str, str], dict[str, Obj]]
    _rt_cache: dict[tuple[str, str], ResourceType]
    _obj: Callable[[str], Obj | None]
    _commit: Callable[[str, str, Obj, Obj | None], Obj]
    _collect_dependents: Callable[[str], None]

    def _init_crds(self) -> None:
        self._schemas: dict[tuple[str, str, str], Obj] = {}
        self._selectable: dict[tuple[str, str, str], tuple[str, ...]] = {}

    def _schema(self, rt: ResourceType) -> Obj | None:
        return self._schemas.get((rt.group, rt.version, rt.plural))

    def _register_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural = spec.get("group", ""), names.get("plural", "")
        served = set()
        for v in spec.get("versions") or []:
            if not v.get("served", True):
                continue
            sub = set()
            subresources = v.get("subresources") or spec.get("subresources") or {}
            if "status" in subresources:
                sub.add("status")
            if "scale" in subresources:
                sub.add("scale")
            rt = ResourceType(group=group, version=v["name"], kind=names.get("kind", ""), plural=plural,
                              namespaced=spec.get("scope") == "Namespaced",
                              short_names=tuple(names.get("shortNames") or ()),
                              singular=names.get("singular", "") or "", subresources=frozenset(sub),
                              categories=tuple(names.get("categories") or ()))
            self.registry.add(rt, replace=True)
            served.add(v["name"])
            self._selectable[(group, v["name"], plural)] = tuple(
                f"{f['jsonPath'].lstrip('.')}" for f in v.get("selectableFields") or () if f.get("jsonPath"))
            schema = ((v.get("schema") or spec.get("validation") or {}).get("openAPIV3Schema"))
            if schema is not None:
                self._schemas[(group, v["name"], plural)] = schema
            else:
                self._schemas.pop((group, v["name"], plural), None)
        for rt in list(self.registry):
            if rt.group == group and rt.plural == plural and rt.version not in served:
                self.registry.remove(group, rt.version, plural)
                self._schemas.pop((group, rt.version, plural), None)
        self._rt_cache.pop((group, plural), None)

    def _unregister_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        for key in sorted(self._by_type.get((group, plural), {})):
            obj = self._obj(key)
            if obj is not None:
                self._commit(DELETED, key, obj, obj)
                self._collect_dependents(obj["metadata"].get("uid", ""))
        for rt in list(self.registry):
            if rt.group == group and rt.plural == plural:
                self.registry.remove(group, rt.version, plural)
                self._schemas.pop((group, rt.version, plural), None)
        self._rt_cache.pop((group, plural), None)

    def register_type(self, rt: ResourceType, schema: Obj | None = None) -> None:
        """Serve a custom type without a CRD object (unit tests); `schema` is an openAPIV3Schema or None."""
        with self._lock:
            self.registry.add(rt, replace=True)
            if schema is not None:
                self._schemas[(rt.group, rt.version, rt.plural)] = schema
            self._rt_cache.pop((rt.group, rt.plural), None)
