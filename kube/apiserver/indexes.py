"""The store's indexes: objects by type, namespace, uid and owner; per-namespace buckets of ordered keys with label
and field equality indexes; field-selector labels per type.

`Indexes` is mixed into `kube.apiserver.store.Store` and runs under its lock; every commit calls `_index`, every
LIST and initial watch asks `_select_keys` which keys to look at.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from typing import Any

from lahar.kube import errors, selectors
from lahar.kube.apiserver.objects import object_key, owner_uids, split_key
from lahar.kube.client import Obj
from lahar.kube.resources import Registry, ResourceType

__all__ = ["FOREGROUND", "INDEXED_FIELDS", "SELECTABLE", "Indexes"]

FOREGROUND = "foregroundDeletion"
SELECTABLE: dict[tuple[str, str], tuple[str, ...]] = {  # beyond metadata.name/namespace; "label=path" when they differ
    ("", "pods"): ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                   "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    ("", "events"): ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                     "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                     "reason", "reportingComponent", "source=source.component", "type"),
    ("events.k8s.io", "events"): ("regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
                                  "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
                                  "reason", "reportingController", "type"),
    ("", "nodes"): ("spec.unschedulable",),
    ("", "namespaces"): ("status.phase",),
    ("", "secrets"): ("type",),
    ("", "services"): ("spec.clusterIP", "spec.type"),
    ("", "persistentvolumeclaims"): (),
    ("apps", "replicasets"): ("status.replicas",),
    ("batch", "jobs"): ("status.successful",),
    ("certificates.k8s.io", "certificatesigningrequests"): ("spec.signerName",),
}
INDEXED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {  # field paths with an equality index (beyond name)
    ("", "pods"): ("spec.nodeName", "status.phase"),
    ("", "events"): ("involvedObject.name", "involvedObject.uid"),
    ("events.k8s.io", "events"): ("regarding.name", "regarding.uid"),
}
_INDEXED_LABEL_OPS = frozenset(("=", "==", "in"))


class _SortedKeys:
    """A set of storage keys with a sorted list built on first use and kept sorted by every later add/remove
    (LIST returns items in key order without re-sorting the type on each call)."""

    __slots__ = ("_keys", "_sorted")

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._sorted: list[str] | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def add(self, key: str) -> None:
        if key in self._keys:
            return
        self._keys.add(key)
        order = self._sorted
        if order is not None:
            if not order or key > order[-1]:
                order.append(key)
            else:
                bisect.insort(order, key)

    def discard(self, key: str) -> None:
        if key not in self._keys:
            return
        self._keys.discard(key)
        order = self._sorted
        if order is not None:
            i = bisect.bisect_left(order, key)
            if i < len(order) and order[i] == key:
                del order[i]

    def ordered(self) -> list[str]:
        """The keys in order; the caller must not change the list (copy it before releasing the store lock)."""
        if self._sorted is None:
            self._sorted = sorted(self._keys)
        return self._sorted


def _index_labels(obj: Obj | None) -> dict[str, Any]:
    """The labels to index (`_Bucket.put` skips values that are not strings: they never equal a selector value)."""
    if obj is None:
        return {}
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _field(obj: Obj, parts: tuple[str, ...]) -> str:
    """`selectors.field_value` over pre-split paths of plain dicts (the store holds nothing else)."""
    cur: Any = obj
    for part in parts:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, str):
        return cur
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if isinstance(cur, (dict, list)) else str(cur)


class _Bucket:
    """The objects of one (group, plural, namespace): their keys in order, and equality indexes
    label key → value → keys and field path → field-selector value → keys, kept current by every write."""

    __slots__ = ("keys", "labels", "fields", "paths")

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.keys = _SortedKeys()
        self.labels: dict[str, dict[str, set[str]]] = {}
        self.fields: dict[str, dict[str, set[str]]] = {path: {} for path in paths}
        self.paths = tuple((path, tuple(path.split("."))) for path in paths)

    def put(self, key: str, obj: Obj, old: Obj | None) -> None:
        self.keys.add(key)
        labels, old_labels = _index_labels(obj), _index_labels(old)
        if labels != old_labels:
            for k, v in old_labels.items():
                if labels.get(k) != v:
                    _drop(self.labels, k, v, key)
            for k, v in labels.items():
                if isinstance(v, str) and (not old_labels or old_labels.get(k) != v):
                    by_value = self.labels.get(k)
                    if by_value is None:
                        by_value = self.labels[k] = {}
                    keys = by_value.get(v)
                    if keys is None:
                        by_value[v] = {key}
                    else:
                        keys.add(key)
        for path, parts in self.paths:
            value = _field(obj, parts)
            if old is not None:
                before = _field(old, parts)
                if value == before:
                    continue
                _drop(self.fields, path, before, key, keep_path=True)
            by_value = self.fields[path]
            keys = by_value.get(value)
            if keys is None:
                by_value[value] = {key}
            else:
                keys.add(key)

    def remove(self, key: str, old: Obj | None) -> None:
        self.keys.discard(key)
        if old is None:
            return
        for k, v in _index_labels(old).items():
            _drop(self.labels, k, v, key)
        for path, parts in self.paths:
            _drop(self.fields, path, _field(old, parts), key, keep_path=True)

    def probe(self, rt_prefix: str, label_reqs: tuple[selectors.Requirement, ...],
              field_reqs: tuple[selectors.FieldRequirement, ...]) -> set[str] | None:
        """The smallest index hit among the equality terms (a superset of the matches), or None for no usable term."""
        best: set[str] | None = None
        for r in label_reqs:
            if r.op not in _INDEXED_LABEL_OPS:
                continue
            by_value = self.labels.get(r.key) or {}
            if len(r.values) == 1:
                hit = by_value.get(r.values[0]) or set()
            else:
                hit = set().union(*(by_value.get(v) or () for v in r.values))
            if best is None or len(hit) < len(best):
                best = hit
            if not best:
                return best
        for f in field_reqs:
            if f.op != "=":
                continue
            if f.path == "metadata.name":
                key = rt_prefix + f.value
                hit = {key} if key in self.keys else set()
            elif f.path in self.fields:
                hit = self.fields[f.path].get(f.value) or set()
            else:
                continue
            if best is None or len(hit) < len(best):
                best = hit
            if not best:
                return best
        return best


def _drop(index: dict[str, dict[str, set[str]]], name: str, value: Any, key: str, keep_path: bool = False) -> None:
    by_value = index.get(name)
    if by_value is None or not isinstance(value, str):
        return
    keys = by_value.get(value)
    if keys is None:
        return
    keys.discard(key)
    if not keys:
        del by_value[value]
        if not by_value and not keep_path:
            del index[name]


@functools.lru_cache(maxsize=4096)
def _parse_selectors(label_selector: str | None,
                     field_selector: str | None) -> tuple[selectors.LabelSelector, selectors.FieldSelector]:
    """Parsed selectors (frozen, so shared between calls); a SelectorError is not cached."""
    return selectors.parse_labels(label_selector), selectors.parse_fields(field_selector)



class Indexes:
    """Mixed into `Store`: the stored objects and every index over them, kept in step by `_index` on each commit
    (under the store lock). `_selectable` (a CRD's selectableFields) is filled by `crds.CustomResources`."""

    # what this part uses of the others (set or defined by `Store` and its other parts), named for readers
    registry: Registry
    _selectable: dict[tuple[str, str, str], tuple[str, ...]]

    def _init_indexes(self) -> None:
        self._by_type: dict[tuple[str, str], dict[str, Obj]] = {}
        self._by_ns: dict[str, set[str]] = {}
        self._buckets: dict[tuple[str, str], dict[str, _Bucket]] = {}  # (group, plural) → namespace ("": cluster)
        self._all_keys: dict[tuple[str, str], _SortedKeys] = {}  # (group, plural) → every key, in order
        self._uids: dict[str, str] = {}
        self._dependents: dict[str, set[str]] = {}
        self._foreground: set[str] = set()
        self._rt_cache: dict[tuple[str, str], ResourceType] = {}

    def _index(self, key: str, obj: Obj | None, prev: Obj | None) -> None:
        gp, ns, _ = split_key(key)
        self._index_selectable(gp, ns, key, obj)
        if prev is not None:
            for uid in owner_uids(prev):
                deps = self._dependents.get(uid)
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[uid]
            if obj is None:
                self._uids.pop(prev["metadata"].get("uid", ""), None)
                self._by_type.get(gp, {}).pop(key, None)
                if ns:
                    keys = self._by_ns.get(ns)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del self._by_ns[ns]
                self._foreground.discard(key)
                return
        if obj is None:
            return
        self._by_type.setdefault(gp, {})[key] = obj
        meta = obj["metadata"]
        if meta.get("uid"):
            self._uids[meta["uid"]] = key
        if ns:
            self._by_ns.setdefault(ns, set()).add(key)
        for uid in owner_uids(obj):
            self._dependents.setdefault(uid, set()).add(key)
        if FOREGROUND in (meta.get("finalizers") or ()) and meta.get("deletionTimestamp"):
            self._foreground.add(key)
        else:
            self._foreground.discard(key)

    def _index_selectable(self, gp: tuple[str, str], ns: str, key: str, obj: Obj | None) -> None:
        """Keep the ordered keys and the label/field indexes of `key`'s bucket in step with the write (`obj` None:
        removed); the object stored so far is what gets unindexed, whatever the caller calls `prev`."""
        objs = self._by_type.get(gp)
        old = objs.get(key) if objs is not None else None
        buckets = self._buckets.get(gp)
        if buckets is None:
            buckets = self._buckets[gp] = {}
        bucket = buckets.get(ns)
        every = self._all_keys.get(gp)
        if obj is None:
            if bucket is not None:
                bucket.remove(key, old)
                if not len(bucket.keys):
                    del buckets[ns]
            if every is not None:
                every.discard(key)
            return
        if bucket is None:
            bucket = buckets[ns] = _Bucket(INDEXED_FIELDS.get(gp, ()))
        bucket.put(key, obj, old)
        if every is None:
            every = self._all_keys[gp] = _SortedKeys()
        every.add(key)

    def _select_keys(self, rt: ResourceType, namespace: str | None, labels: selectors.LabelSelector,
                     fields: selectors.FieldSelector) -> list[str]:
        """Under the lock: the keys a LIST has to look at, in key order — the smallest index hit of the selectors'
        equality terms (`l=v`, `l in (..)`, `metadata.name=`, an indexed field `=`) per namespace, else every key of
        the namespace or the type. A superset of the matches: the caller still applies the full matcher."""
        gp = (rt.group, rt.plural)
        if labels.requirements is None:
            return []
        buckets = self._buckets.get(gp) or {}
        namespaces: list[str] | None = [namespace] if namespace is not None else None
        for f in fields.requirements:
            if f.op == "=" and f.path == "metadata.namespace" and rt.namespaced:
                namespaces = [f.value] if namespaces is None or f.value in namespaces else []
        label_reqs, field_reqs = labels.requirements, fields.requirements
        indexable = any(r.op in _INDEXED_LABEL_OPS for r in label_reqs) or any(
            f.op == "=" and (f.path == "metadata.name" or f.path in INDEXED_FIELDS.get(gp, ())) for f in field_reqs)
        if not indexable:
            if namespaces is None:
                every = self._all_keys.get(gp)
                return list(every.ordered()) if every is not None else []
            out: list[str] = []
            for ns in namespaces:
                bucket = buckets.get(ns)
                if bucket is not None:
                    out.extend(bucket.keys.ordered())
            return out
        hits: list[str] = []
        for ns in (namespaces if namespaces is not None else list(buckets)):
            bucket = buckets.get(ns)
            if bucket is None:
                continue
            hit = bucket.probe(f"{rt.group}/{rt.plural}/{ns}/", label_reqs, field_reqs)
            hits.extend(hit if hit is not None else bucket.keys.ordered())
        hits.sort()
        return hits

    def _rt_for(self, gp: tuple[str, str], obj: Obj | None = None) -> ResourceType:
        rt = self._rt_cache.get(gp)
        if rt is not None and self.registry.get(rt.group, rt.version, rt.plural) is rt:
            return rt
        candidates = [r for r in self.registry if (r.group, r.plural) == gp]
        if obj is not None:
            exact = [r for r in candidates if r.api_version == obj.get("apiVersion")]
            candidates = exact or candidates
        if not candidates:
            raise errors.NotFound("the server could not find the requested resource")
        self._rt_cache[gp] = candidates[0]
        return candidates[0]

    def _find(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, Obj | None]:
        key = object_key(rt, namespace, name)
        return key, self._by_type.get((rt.group, rt.plural), {}).get(key)

    def _obj(self, key: str) -> Obj | None:
        return self._by_type.get(split_key(key)[0], {}).get(key)

    def _matcher(self, rt: ResourceType, label_selector: str | None,
                 field_selector: str | None) -> Callable[[Obj], bool] | None:
        return self._combine(*self._selectors(rt, label_selector, field_selector))

    def _selectors(self, rt: ResourceType, label_selector: str | None,
                   field_selector: str | None) -> tuple[selectors.LabelSelector, selectors.FieldSelector]:
        """Parsed selectors, field labels translated to object paths (BadRequest for bad or unsupported ones)."""
        if not label_selector and not field_selector:
            return selectors.everything(), selectors.FieldSelector(())
        try:
            labels, fields = _parse_selectors(label_selector or None, field_selector or None)
        except selectors.SelectorError as err:
            raise errors.BadRequest(str(err)) from None
        if fields.empty:
            return labels, fields
        allowed = self._selectable_fields(rt)
        reqs = []
        for r in fields.requirements:
            if r.path not in allowed:
                raise errors.BadRequest(f"field label not supported: {r.path}")
            reqs.append(selectors.FieldRequirement(allowed[r.path], r.op, r.value))
        return labels, selectors.FieldSelector(tuple(reqs))

    @staticmethod
    def _combine(labels: selectors.LabelSelector, fields: selectors.FieldSelector) -> Callable[[Obj], bool] | None:
        if labels.empty and fields.empty:
            return None
        if fields.empty:
            return labels.matches_object
        if labels.empty:
            return fields.matches
        return lambda obj: labels.matches_object(obj) and fields.matches(obj)

    def _selectable_fields(self, rt: ResourceType) -> dict[str, str]:
        """Field-selector label → dotted path in the object, per type (kube's field label conversion funcs)."""
        out = {"metadata.name": "metadata.name"}
        if rt.namespaced:
            out["metadata.namespace"] = "metadata.namespace"
        extra = SELECTABLE.get((rt.group, rt.plural))
        if extra is None:
            extra = self._selectable.get((rt.group, rt.version, rt.plural), ())
        for item in extra:
            label, _, path = item.partition("=")
            out[label] = path or label
        return out

