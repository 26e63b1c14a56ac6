"""The API-server semantics engine: kube-apiserver's object rules over plain dicts, in memory, optionally persisted.

devcluster's REST server (SQLite backend, webhooks as the admission port) and `kube.memory.MemoryClient` both sit on
this one `Store`; it owns resourceVersions, watches, generation rules, finalizers, GC and namespace lifecycle.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import functools
import gc
import logging
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson

from lahar.kube import (
    apply,
    errors,
    fieldtypes,
    limits,
    ownership,
    patches,
    podspec,
    quantity,
    resources,
    selectors,
    wiretypes,
)
from lahar.kube import schemas as _schemas
from lahar.kube.client import Obj, WatchEvent
from lahar.kube.resources import Registry, ResourceType

__all__ = [
    "AdmissionAttributes",
    "AdmissionPort",
    "Backend",
    "Request",
    "Store",
    "StoreWatch",
    "object_key",
]

_log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_BUILTIN_GROUPS = frozenset(rt.group for rt in resources.core())
_SELECTABLE: dict[tuple[str, str], tuple[str, ...]] = {  # beyond metadata.name/namespace; "label=path" when they differ
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
_INDEXED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {  # field paths with an equality index (beyond name)
    ("", "pods"): ("spec.nodeName", "status.phase"),
    ("", "events"): ("involvedObject.name", "involvedObject.uid"),
    ("events.k8s.io", "events"): ("regarding.name", "regarding.uid"),
}
_INDEXED_LABEL_OPS = frozenset(("=", "==", "in"))
_CONFLICT_TEXT = "the object has been modified; please apply your changes to the latest version and try again"


# --- request, admission and backend ports -----------------------------------------------------------------------


@dataclass
class Request:
    """Who asks and how: dry run, field validation (`Strict` | `Warn` | `Ignore`), the field manager and `force` of
    server-side apply; `warnings` and `created` (an apply that created the object) are filled in."""

    user: str = "admin"
    groups: tuple[str, ...] = ("system:masters",)
    dry_run: bool = False
    field_validation: str = "Strict"
    warnings: list[str] = field(default_factory=list)
    field_manager: str | None = None
    force: bool = False
    created: bool = False


@dataclass
class AdmissionAttributes:
    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    rt: ResourceType
    subresource: str | None
    namespace: str | None
    name: str
    obj: Obj | None
    old_obj: Obj | None
    request: Request
    options: Obj | None = None


class AdmissionPort(Protocol):
    def mutate(self, attrs: AdmissionAttributes) -> Obj | None:
        """Return the mutated object (or None for no change)."""

    def validate(self, attrs: AdmissionAttributes) -> None:
        """Raise an ApiError to deny; may append to `attrs.request.warnings`."""


class Backend(Protocol):
    def load(self) -> tuple[int, dict[str, Obj], list[tuple[int, str, str, Obj]]]: ...

    def write(self, rv: int, type: str, key: str, obj: Obj) -> None: ...

    def trim(self, before_rv: int) -> None: ...

    def close(self) -> None: ...


# --- small pure helpers -----------------------------------------------------------------------------------------


def object_key(rt: ResourceType, namespace: str | None, name: str) -> str:
    """The storage key: `group/plural/namespace/name` (core group "", cluster-scoped namespace "")."""
    return f"{rt.group}/{rt.plural}/{(namespace or '') if rt.namespaced else ''}/{name}"


def _split_key(key: str) -> tuple[tuple[str, str], str, str]:
    group, plural, ns, name = key.split("/", 3)
    return (group, plural), ns, name


def _copy(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


_GC_PAUSE_ITEMS = 64


@contextlib.contextmanager
def _gc_paused(pause: bool = True) -> Iterator[None]:
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


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _resource(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _qualified_kind(rt: ResourceType) -> str:
    return f"{rt.kind}.{rt.group}" if rt.group else rt.kind


def _not_found(rt: ResourceType, name: str) -> errors.NotFound:
    return errors.NotFound(f'{_resource(rt)} "{name}" not found',
                           details={"name": name, "group": rt.group, "kind": rt.plural})


def _conflict(rt: ResourceType, name: str, why: str = _CONFLICT_TEXT, resource: str | None = None) -> errors.Conflict:
    return errors.Conflict(f'Operation cannot be fulfilled on {resource or _resource(rt)} "{name}": {why}',
                           details={"name": name, "group": rt.group, "kind": rt.plural})


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> errors.Invalid:
    """kube's NewInvalid: causes are (reason e.g. FieldValueInvalid, field, body e.g. `Invalid value: "x": ...`)."""
    texts = [f"{fld}: {body}" if fld else body for _, fld, body in causes]
    agg = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return errors.Invalid(f'{_qualified_kind(rt)} "{name}" is invalid: {agg}', details={
        "name": name, "group": rt.group, "kind": rt.kind,
        "causes": [{"reason": reason, "message": body, "field": fld} for reason, fld, body in causes],
    })


def _rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_storable(rt: ResourceType, obj: Obj) -> None:
    """Refuse (400) an object nested deeper than `limits.MAX_DEPTH` -- whether it came so from the client or grew
    so through a patch or a mutating webhook -- so that nothing stored is unserialisable in a LIST or a watch."""
    try:
        limits.check_depth(obj, what=f"the {rt.kind} object")
    except limits.LimitError as e:
        raise errors.BadRequest(str(e)) from None


def _status_success(code: int = 201) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def name_errors(rt: ResourceType, name: str) -> list[str]:
    """Object-name validation as kube's registries do it (namespaces: DNS label; RBAC: path segment; else subdomain)."""
    if rt.group == "rbac.authorization.k8s.io":
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{c}'" for c in ("/", "%") if c in name]
    if rt.group == "" and rt.plural == "namespaces":
        return podspec.is_dns1123_label(name)
    return podspec.is_dns1123_subdomain(name)


def _pod_status(rt: ResourceType, pod: Obj) -> Obj:
    """A new pod's status (PrepareForCreate): Pending with its QoS class; a malformed quantity is a 422."""
    try:
        return {"phase": "Pending", "qosClass": podspec.qos_class(pod)}
    except (quantity.QuantityError, TypeError, ValueError) as e:
        raise invalid(rt, _meta(pod).get("name", ""), [("FieldValueInvalid", "spec.containers[*].resources",
                                                         f"Invalid value: {e}")]) from None


def _default_pod(pod: Obj) -> None:
    """A few of kube's pod defaults (SetDefaults_Pod/PodSpec/Container) that schedulers and kubectl read."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            image = str(c.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            res = c["resources"]
            if isinstance(res, dict) and res.get("limits") and not res.get("requests"):
                res["requests"] = dict(res["limits"])
            elif isinstance(res, dict) and res.get("limits"):
                for k, v in res["limits"].items():
                    res["requests"].setdefault(k, v)


def _merge_string_data(secret: Obj) -> None:
    """Secrets: `stringData` is write-only, merged into `data` base64-encoded (it wins); `type` defaults to Opaque."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data") if isinstance(secret.get("data"), dict) else {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        secret["data"] = data
    secret.setdefault("type", "Opaque")


def _spec_part(obj: Obj, has_status: bool) -> dict[str, Any]:
    skip = ("metadata", "apiVersion", "kind", "status") if has_status else ("metadata", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


def _owner_uids(obj: Obj) -> list[str]:
    return [r.get("uid") for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r.get("uid")]


# --- indexes ----------------------------------------------------------------------------------------------------


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


# --- watches ----------------------------------------------------------------------------------------------------


class StoreWatch:
    """One watcher's queue. Events are queued by the writer under the store lock; the reader copies them out."""

    def __init__(self, store: Store, rt: ResourceType, namespace: str | None,
                 match: Callable[[Obj], bool] | None, allow_bookmarks: bool) -> None:
        self._store = store
        self.rt = rt
        self.namespace = namespace or None
        self._match = match
        self.allow_bookmarks = allow_bookmarks
        self._queue: deque[tuple[str, Obj]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self.on_ready: Callable[[], None] | None = None

    # writer side (store lock held)
    def _offer(self, etype: str, obj: Obj, prev: Obj | None) -> None:
        if self.namespace is not None and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return
        match = self._match
        if match is None:
            self._push(etype, obj)
            return
        if etype != MODIFIED:
            if match(obj):
                self._push(etype, obj)
            return
        now_ok = match(obj)
        was_ok = prev is None or match(prev)
        if now_ok and was_ok:
            self._push(MODIFIED, obj)
        elif now_ok:
            self._push(ADDED, obj)
        elif was_ok and prev is not None:
            rv = obj["metadata"]["resourceVersion"]
            self._push(DELETED, {**prev, "metadata": {**prev["metadata"], "resourceVersion": rv}})

    def _push(self, etype: str, obj: Obj) -> None:
        with self._cond:
            if self._stopped:
                return
            self._queue.append((etype, obj))
            self._cond.notify()
        callback = self.on_ready
        if callback is not None:
            callback()

    # reader side
    def next_event(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None on timeout or once stopped."""
        with self._cond:
            if not self._queue and not self._stopped:
                self._cond.wait_for(lambda: self._queue or self._stopped, timeout)
            if self._stopped or not self._queue:
                return None
            etype, obj = self._queue.popleft()
        if etype == BOOKMARK:
            return {"type": BOOKMARK, "object": obj}
        return {"type": etype, "object": self._store._out(self.rt, obj)}

    def pending(self) -> int:
        return len(self._queue)

    def bookmark(self) -> None:
        """Queue a BOOKMARK carrying the current resourceVersion (no-op unless bookmarks were allowed)."""
        if not self.allow_bookmarks:
            return
        with self._store._lock:
            rv = str(self._store._rv)
            self._push(BOOKMARK, {"kind": self.rt.kind, "apiVersion": self.rt.api_version,
                                  "metadata": {"resourceVersion": rv}})

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._cond.notify_all()
        self._store._remove_watcher(self)
        callback = self.on_ready
        if callback is not None:
            with contextlib.suppress(Exception):
                callback()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        event = self.next_event(None)
        if event is None:
            raise StopIteration
        return event

    def __enter__(self) -> StoreWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- the store --------------------------------------------------------------------------------------------------


@dataclass
class _Change:
    rv: int
    type: str
    key: str
    obj: Obj
    prev: Obj | None


class Store:
    """kube-apiserver semantics over dicts; thread-safe (one RLock), synchronous; state in memory, persisted through
    the optional backend. Watch fan-out happens under the lock, in resourceVersion order. LIST reads keys kept in
    order per type and namespace, narrowed by label and field equality indexes (`_Bucket`) updated on every write."""

    def __init__(self, registry: Registry | None = None, backend: Backend | None = None,
                 admission: AdmissionPort | None = None, clock: Callable[[], datetime] | None = None,
                 history: int = 100_000, track_managed_fields: bool = False) -> None:
        self.registry = registry if registry is not None else Registry.of(resources.core())
        self.track_managed_fields = track_managed_fields  # managedFields on every write, as kube-apiserver keeps
        self.backend = backend
        self.admission = admission
        self.clock = clock or (lambda: datetime.now(UTC))
        self.history_size = max(1, history)
        self._lock = threading.RLock()
        self._rv = 0
        self._by_type: dict[tuple[str, str], dict[str, Obj]] = {}
        self._by_ns: dict[str, set[str]] = {}
        self._buckets: dict[tuple[str, str], dict[str, _Bucket]] = {}  # (group, plural) → namespace ("": cluster)
        self._all_keys: dict[tuple[str, str], _SortedKeys] = {}  # (group, plural) → every key, in order
        self._uids: dict[str, str] = {}
        self._dependents: dict[str, set[str]] = {}
        self._foreground: set[str] = set()
        self._history: deque[_Change] = deque()
        self._floor = 0  # events with rv <= floor are no longer available
        self._watchers: dict[tuple[str, str], set[StoreWatch]] = {}
        self._pending: list[_Change] = []
        self._schemas: dict[tuple[str, str, str], Obj] = {}
        self._selectable: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._rt_cache: dict[tuple[str, str], ResourceType] = {}
        self._flushes = 0
        self._closed = False
        if backend is not None:
            self._load(backend)
        with self._lock:
            self._ensure_namespaces()
            self._flush()

    # ----- state loading and indexes ----------------------------------------------------------------------------

    def _load(self, backend: Backend) -> None:
        rv, objects, events = backend.load()
        self._rv = int(rv)
        crds = []
        for key, obj in objects.items():
            if limits.depth(obj) > limits.MAX_DEPTH:  # stored before the depth rule: it would break LIST and watch
                _log.warning("not serving %s: it nests deeper than %d levels", key, limits.MAX_DEPTH)
                continue
            self._index(key, obj, None)
            gp, _, _ = _split_key(key)
            if gp == ("apiextensions.k8s.io", "customresourcedefinitions"):
                crds.append(obj)
        for crd in crds:
            self._register_crd(crd)
        events = [e for e in sorted(events, key=lambda e: e[0])[-self.history_size:]
                  if limits.depth(e[3]) <= limits.MAX_DEPTH]
        last: dict[str, Obj] = {}
        for erv, etype, key, obj in events:
            self._history.append(_Change(int(erv), etype, key, obj, last.get(key)))
            last[key] = obj
        self._floor = (self._history[0].rv - 1) if self._history else self._rv

    def _index(self, key: str, obj: Obj | None, prev: Obj | None) -> None:
        gp, ns, _ = _split_key(key)
        self._index_selectable(gp, ns, key, obj)
        if prev is not None:
            for uid in _owner_uids(prev):
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
        for uid in _owner_uids(obj):
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
            bucket = buckets[ns] = _Bucket(_INDEXED_FIELDS.get(gp, ()))
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
            f.op == "=" and (f.path == "metadata.name" or f.path in _INDEXED_FIELDS.get(gp, ())) for f in field_reqs)
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

    # ----- writes: commit under the lock, flush (persist, history, fan-out) before releasing ---------------------

    def _commit(self, etype: str, key: str, obj: Obj, prev: Obj | None) -> Obj:
        self._rv += 1
        rv = self._rv
        if etype == DELETED:
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
            self._index(key, None, prev)
        else:
            obj["metadata"]["resourceVersion"] = str(rv)
            self._index(key, obj, prev)
        self._pending.append(_Change(rv, etype, key, obj, prev))
        return obj

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        if self.backend is not None:
            writer = getattr(self.backend, "write_many", None)
            if writer is not None and len(pending) > 1:
                writer([(c.rv, c.type, c.key, c.obj) for c in pending])
            else:
                for c in pending:
                    self.backend.write(c.rv, c.type, c.key, c.obj)
        hist = self._history
        for c in pending:
            if len(hist) >= self.history_size:
                self._floor = hist.popleft().rv
            hist.append(c)
            watchers = self._watchers.get(_split_key(c.key)[0])
            if watchers:
                for w in list(watchers):
                    w._offer(c.type, c.obj, c.prev)
        self._flushes += 1
        if self.backend is not None and self._flushes % 1024 == 0:
            self.backend.trim(self._floor + 1)

    @contextlib.contextmanager
    def _txn(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise errors.ServiceUnavailable("the store is closed")
            try:
                yield
            finally:
                self._flush()

    # ----- reads ------------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def _out(self, rt: ResourceType, obj: Obj) -> Obj:
        out = orjson.loads(orjson.dumps(obj))
        if out.get("apiVersion") != rt.api_version or out.get("kind") != rt.kind:
            rest = {k: v for k, v in out.items() if k not in ("apiVersion", "kind")}
            out = {"apiVersion": rt.api_version, "kind": rt.kind, **rest}
        return out

    def _find(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, Obj | None]:
        key = object_key(rt, namespace, name)
        return key, self._by_type.get((rt.group, rt.plural), {}).get(key)

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with self._lock:
            _, obj = self._find(rt, namespace, name)
        if obj is None:
            raise _not_found(rt, name)
        return self._out(rt, obj)

    def list(self, rt: ResourceType, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> Obj:
        labels, fields = self._selectors(rt, label_selector, field_selector)
        match = self._combine(labels, fields)
        with self._lock:
            objs = self._by_type.get((rt.group, rt.plural), {})
            keys = self._select_keys(rt, namespace if rt.namespaced and namespace else None, labels, fields)
            chosen = [objs[k] for k in keys]
            rv = str(self._rv)
        if match is not None:  # stored objects are never changed in place, so matching needs no lock
            chosen = [o for o in chosen if match(o)]
        with _gc_paused(len(chosen) >= _GC_PAUSE_ITEMS):
            out = orjson.loads(orjson.dumps(chosen))
        api_version, kind = rt.api_version, rt.kind
        for i, o in enumerate(out):
            if o.get("apiVersion") != api_version or o.get("kind") != kind:
                rest = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
                out[i] = {"apiVersion": api_version, "kind": kind, **rest}
        return {"apiVersion": api_version, "kind": rt.list_kind, "metadata": {"resourceVersion": rv},
                "items": out}

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
        extra = _SELECTABLE.get((rt.group, rt.plural))
        if extra is None:
            extra = self._selectable.get((rt.group, rt.version, rt.plural), ())
        for item in extra:
            label, _, path = item.partition("=")
            out[label] = path or label
        return out

    def watch(self, rt: ResourceType, namespace: str | None = None, *, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              allow_bookmarks: bool = False) -> StoreWatch:
        match = self._matcher(rt, label_selector, field_selector)
        ns = namespace if rt.namespaced else None
        w = StoreWatch(self, rt, ns, match, allow_bookmarks)
        gp = (rt.group, rt.plural)
        start: int | None = None
        if resource_version not in (None, "", "0"):
            text = str(resource_version)
            if not (text.isascii() and text.isdigit()):  # kube parses it as an unsigned integer: "-1" and "abc" are both refused
                raise errors.BadRequest(f"invalid resource version: {resource_version!r}")
            start = int(text)
        with self._lock:
            if start is None:
                objs = self._by_type.get(gp, {})
                for key in self._select_keys(rt, ns or None, selectors.everything(), selectors.FieldSelector(())):
                    w._offer(ADDED, objs[key], None)
            else:
                if start < self._floor:
                    raise errors.Gone(f"too old resource version: {start} ({self._floor})")
                replay: list[_Change] = []
                for c in reversed(self._history):
                    if c.rv <= start:
                        break
                    if _split_key(c.key)[0] == gp:
                        replay.append(c)
                for c in reversed(replay):
                    w._offer(c.type, c.obj, c.prev)
            self._watchers.setdefault(gp, set()).add(w)
        return w

    def _remove_watcher(self, w: StoreWatch) -> None:
        with self._lock:
            ws = self._watchers.get((w.rt.group, w.rt.plural))
            if ws is not None:
                ws.discard(w)

    # ----- admission and custom-resource decoding ----------------------------------------------------------------

    def _admit(self, operation: str, rt: ResourceType, subresource: str | None, namespace: str | None, name: str,
               obj: Obj | None, old: Obj | None, req: Request, options: Obj | None = None) -> Obj | None:
        if self.admission is None:
            return obj
        attrs = AdmissionAttributes(operation, rt, subresource, namespace, name, obj, old, req, options)
        if obj is not None:
            mutated = self.admission.mutate(attrs)
            if mutated is not None:
                obj = mutated
        return obj

    def _admit_validate(self, operation: str, rt: ResourceType, subresource: str | None, namespace: str | None,
                        name: str, obj: Obj | None, old: Obj | None, req: Request,
                        options: Obj | None = None) -> None:
        if self.admission is None:
            return
        self.admission.validate(AdmissionAttributes(operation, rt, subresource, namespace, name, obj, old, req,
                                                    options))

    def _schema(self, rt: ResourceType) -> Obj | None:
        if _schemas is None:
            return None
        return self._schemas.get((rt.group, rt.version, rt.plural))

    def _decode(self, rt: ResourceType, obj: Obj, req: Request) -> Obj:
        """Strict-field check, pruning and defaulting for custom resources; kube's typed decoding (JSON types,
        int32 ranges, unknown fields), metadata checks and defaults for built-in kinds."""
        self._check_decoded(rt, obj, req)
        if rt.group == "" and rt.plural == "pods":
            _default_pod(obj)
            return obj
        if rt.group == "" and rt.plural == "secrets":
            _merge_string_data(obj)
            return obj
        schema = self._schema(rt)
        if schema is None:
            return obj
        unknown = [u for u in _schemas.unknown_fields(schema, obj)
                   if u not in ("apiVersion", "kind") and not u.startswith("metadata")]
        if unknown:
            if req.field_validation == "Strict":
                listed = ", ".join(f'unknown field "{u}"' for u in unknown)
                raise errors.BadRequest(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                        f"strict decoding error: {listed}")
            if req.field_validation == "Warn":
                req.warnings.extend(f'unknown field "{u}"' for u in unknown)
        keep = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        obj = _schemas.prune(schema, obj)
        obj = _schemas.apply_defaults(schema, obj)
        obj.update(keep)
        return obj

    @staticmethod
    def _check_decoded(rt: ResourceType, obj: Obj, req: Request) -> None:
        """What kube-apiserver's decoder refuses before any webhook sees the object: a JSON type that does not fit
        the field (400), unknown fields under fieldValidation=Strict (400, or warnings under Warn), then invalid
        label keys and values and unparsable pod quantities (422)."""
        model = wiretypes.model_for(rt.group, rt.version, rt.kind)
        if model is not None:
            found = wiretypes.decode_problems(model, obj)
            prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            if found.type_errors:
                raise errors.BadRequest(prefix + "; ".join(found.type_errors))
            unknown = [u for u in found.unknown if not u.startswith("metadata.managedFields")]
            if unknown and req.field_validation == "Strict":
                raise errors.BadRequest(prefix + "strict decoding error: " +
                                        ", ".join(f'unknown field "{u}"' for u in unknown))
            if unknown and req.field_validation == "Warn":
                req.warnings.extend(f'unknown field "{u}"' for u in unknown)
            found.drop_unknown()  # never stored, as in kube: a later Strict apply must not trip over them
        causes = wiretypes.meta_problems(obj, pod=rt.group == "" and rt.plural == "pods")
        if causes:
            raise invalid(rt, _meta(obj).get("name", ""), [("FieldValueInvalid", fld, body) for fld, body in causes])

    def _schema_validate(self, rt: ResourceType, obj: Obj) -> None:
        schema = self._schema(rt)
        if schema is None:
            return
        errs = [e for e in _schemas.validate(schema, obj) if not str(getattr(e, "field", "")).startswith("metadata")]
        if not errs:
            return
        causes = []
        for e in errs:
            fld = str(getattr(e, "field", ""))
            if callable(getattr(e, "body", None)):
                body = e.body()
            else:
                msg = e.message() if callable(getattr(e, "message", None)) else str(e)
                body = msg[len(fld) + 2:] if fld and msg.startswith(fld + ": ") else msg
            causes.append((str(getattr(e, "type", "FieldValueInvalid")), fld, body))
        raise invalid(rt, obj["metadata"].get("name", ""), causes)

    # ----- create -----------------------------------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise errors.BadRequest(f"the body of the request was not a {rt.kind} object")
        obj = _copy(obj)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if kind and kind != rt.kind:
            raise errors.BadRequest(f"the kind of the object ({kind}) does not match the expected kind ({rt.kind})")
        if api_version and api_version != rt.api_version:
            group = api_version.rpartition("/")[0]
            if group != rt.group:
                raise errors.BadRequest(f"the API version in the data ({api_version}) does not match the expected "
                                        f"API version ({rt.api_version})")
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        obj = {"apiVersion": rt.api_version, "kind": rt.kind, **rest}
        _meta(obj)
        return obj

    def _resolve_namespace(self, rt: ResourceType, namespace: str | None, meta: dict[str, Any]) -> str | None:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return None
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on the "
                                    "request")
        ns = namespace or body_ns
        if not ns:
            raise errors.BadRequest("an empty namespace may not be set during creation")
        meta["namespace"] = ns
        return ns

    def _prepare_create(self, rt: ResourceType, obj: Obj) -> None:
        """kube's PrepareForCreate: status resets, namespace lifecycle fields, pod status."""
        gp = (rt.group, rt.plural)
        meta = obj["metadata"]
        if gp == ("", "namespaces"):
            obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        elif gp == ("", "pods"):
            obj["status"] = _pod_status(rt, obj)
        elif gp == ("", "nodes"):
            pass  # kubelets register with status
        elif gp == ("apiextensions.k8s.io", "customresourcedefinitions") or "status" in rt.subresources:
            obj.pop("status", None)

    def create(self, rt: ResourceType, namespace: str | None, obj: Obj, *, req: Request | None = None,
               _applied: bool = False) -> Obj:
        req = req or Request()
        obj = self._check_body(rt, obj)
        meta = obj["metadata"]
        supplied = meta.pop("managedFields", ownership.ABSENT)
        ns = self._resolve_namespace(rt, namespace, meta)
        for system in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "generation", "selfLink"):
            meta.pop(system, None)
        if ns is not None:  # NamespaceLifecycle runs before any webhook
            with self._lock:
                self._check_namespace_open(ns)
        obj = self._decode(rt, obj, req)
        obj = self._admit("CREATE", rt, None, ns, meta.get("name", ""), obj, None, req) or obj
        meta = _meta(obj)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        if not meta.get("name") and not generate:
            raise invalid(rt, "", [("FieldValueRequired", "metadata.name",
                                    "Required value: name or generateName is required")])
        if generate:
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        errs = name_errors(rt, meta["name"])
        if errs:
            fld = "metadata.generateName" if generate else "metadata.name"
            value = meta["generateName"] if generate else meta["name"]
            raise invalid(rt, meta["name"], [("FieldValueInvalid", fld, f'Invalid value: "{value}": {"; ".join(errs)}')])
        self._prepare_create(rt, obj)
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            self._validate_crd(rt, obj)
        self._schema_validate(rt, obj)
        self._admit_validate("CREATE", rt, None, ns, meta["name"], obj, None, req)
        _check_storable(rt, obj)
        with self._txn():
            if ns is not None:
                self._check_namespace_open(ns)
            key, existing = self._find(rt, ns, meta["name"])
            tries = 0
            while existing is not None and generate and tries < 8:
                meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
                key, existing = self._find(rt, ns, meta["name"])
                tries += 1
            if existing is not None:
                raise errors.AlreadyExists(f'{_resource(rt)} "{meta["name"]}" already exists',
                                           details={"name": meta["name"], "group": rt.group, "kind": rt.plural})
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _rfc3339(self.clock())
            meta["generation"] = 1
            managed = supplied if _applied else self._managed_after(rt, None, obj, supplied, None, req)
            if managed:
                meta["managedFields"] = managed
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                obj["status"] = self._crd_status(obj)
            if req.dry_run:
                return self._out(rt, obj)
            stored = self._commit(ADDED, key, obj, None)
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                self._register_crd(stored)
        return self._out(rt, stored)

    def _check_namespace_open(self, ns: str) -> None:
        nsobj = self._by_type.get(("", "namespaces"), {}).get(f"/namespaces//{ns}")
        if nsobj is None:
            raise errors.NotFound(f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"})
        if nsobj["metadata"].get("deletionTimestamp") or (nsobj.get("status") or {}).get("phase") == "Terminating":
            raise errors.Forbidden(f"unable to create new content in namespace {ns} because it is being terminated",
                                   details={"name": ns, "kind": "namespaces",
                                            "causes": [{"reason": "NamespaceTerminating",
                                                        "message": f"namespace {ns} is being terminated",
                                                        "field": "metadata.namespace"}]})

    def _ensure_namespaces(self) -> None:
        for name in DEFAULT_NAMESPACES:
            key = f"/namespaces//{name}"
            if key in self._by_type.get(("", "namespaces"), {}):
                continue
            obj = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": _rfc3339(self.clock()),
                                "labels": {"kubernetes.io/metadata.name": name}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            self._commit(ADDED, key, obj, None)

    # ----- update and patch -------------------------------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str | None, name: str, obj: Obj, *, subresource: str | None = None,
               req: Request | None = None) -> Obj:
        req = req or Request()
        body = self._check_body(rt, obj)
        bmeta = body["metadata"]
        if bmeta.get("name") and bmeta["name"] != name:
            raise errors.BadRequest(f"the name of the object ({bmeta['name']}) does not match the name on the URL "
                                    f"({name})")
        bmeta["name"] = name
        self._resolve_namespace(rt, namespace, bmeta)
        want_rv = bmeta.get("resourceVersion") or None
        if want_rv is not None and not (isinstance(want_rv, str) and want_rv.isascii() and want_rv.isdigit()):
            raise errors.BadRequest(f"metadata.resourceVersion: Invalid value: {want_rv!r}: must be a "
                                    f"non-negative integer")

        def make(cur: Obj) -> Obj:
            if want_rv is not None and want_rv != cur["metadata"].get("resourceVersion"):
                raise _conflict(rt, name)
            if bmeta.get("uid") and bmeta["uid"] != cur["metadata"].get("uid"):
                raise _conflict(rt, name, f"Precondition failed: UID in precondition: {bmeta['uid']}, UID in object "
                                          f"meta: {cur['metadata'].get('uid')}")
            return _copy(body)

        return self._update_loop(rt, namespace, name, make, subresource, req)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Any, *, patch_type: str,
              subresource: str | None = None, req: Request | None = None) -> Obj:
        req = req or Request()
        if patch_type == "strategic" and rt.group not in _BUILTIN_GROUPS:
            raise errors.UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
        ownership.check_field_manager(req.field_manager, apply_patch=patch_type == "apply", force=req.force)
        if patch_type == "apply":
            return self._apply(rt, namespace, name, patch, subresource, req)
        if patch_type not in ("merge", "json", "strategic"):
            raise errors.UnsupportedMediaType(f"unsupported patch type: {patch_type}")
        if patch_type in ("merge", "strategic") and not isinstance(patch, dict):
            raise errors.BadRequest("json: cannot unmarshal array into Go value of type map[string]interface {}")

        def make(cur: Obj) -> Obj:
            base = _copy(cur)
            if patch_type == "merge":
                out = patches.merge_patch(base, patch)
            elif patch_type == "json":
                out = patches.json_patch(base, patch)
            else:
                out = patches.strategic_merge_patch(base, patch, rt.kind)
            if not isinstance(out, dict):
                raise errors.BadRequest("the patch did not produce an object")
            out_meta = _meta(out)
            rv = out_meta.get("resourceVersion")
            if rv and rv != cur["metadata"].get("resourceVersion"):
                raise _conflict(rt, name)
            if out_meta.get("name") != name:
                raise errors.BadRequest(f"the name of the object ({out_meta.get('name')}) does not match the name on "
                                        f"the URL ({name})")
            if rt.namespaced and out_meta.get("namespace") != cur["metadata"].get("namespace"):
                raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on "
                                        "the request")
            return self._check_body(rt, out)

        return self._update_loop(rt, namespace, name, make, subresource, req)

    def _apply(self, rt: ResourceType, namespace: str | None, name: str, config: Any, subresource: str | None,
               req: Request) -> Obj:
        """Server-side apply (`kube.apply`): merge into the live object, or create it when it does not exist."""
        ns = namespace if rt.namespaced else None
        config = ownership.check_apply_config(config, api_version=rt.api_version, kind=rt.kind, name=name,
                                              namespace=ns)
        types = fieldtypes.types_for(rt.kind, self._schema(rt))
        scope = ownership.status_scope(rt.subresources, subresource)
        manager = req.field_manager or ""

        want_rv = config["metadata"].get("resourceVersion")

        def merged(cur: Obj | None) -> Obj:
            live: Obj = {}
            if cur is not None:
                if want_rv and want_rv != cur["metadata"].get("resourceVersion"):
                    raise _conflict(rt, name)
                live = _copy(cur)
                _meta(live).pop("managedFields", None)
            out, entries = apply.apply(live, config, entries=ownership.live_entries(cur), manager=manager,
                                       api_version=rt.api_version, subresource=subresource or "", force=req.force,
                                       now=_rfc3339(self.clock()), types=types, status=scope)
            _meta(out)["managedFields"] = apply.encode_managed(entries)
            return out

        for _ in range(8):
            try:
                return self._update_loop(rt, namespace, name, lambda cur: self._check_body(rt, merged(cur)),
                                         subresource, req, applied=True)
            except errors.NotFound:
                if subresource is not None:
                    raise
            try:
                created = self.create(rt, namespace, merged(None), req=req, _applied=True)
            except errors.AlreadyExists:
                continue
            req.created = True
            return created
        raise _conflict(rt, name)

    def _managed_after(self, rt: ResourceType, cur: Obj | None, new: Obj, supplied: Any, subresource: str | None,
                       req: Request) -> list[Obj] | None:
        return ownership.after_write(cur, new, supplied, manager=req.field_manager or "unknown",
                                     subresource=subresource, now=_rfc3339(self.clock()),
                                     types=fieldtypes.types_for(rt.kind, self._schema(rt)),
                                     track=self.track_managed_fields,
                                     scope=ownership.status_scope(rt.subresources, subresource))

    def _update_loop(self, rt: ResourceType, namespace: str | None, name: str, make: Callable[[Obj], Obj],
                     subresource: str | None, req: Request, *, applied: bool = False) -> Obj:
        if subresource not in (None, "status", "finalize") or (subresource and subresource not in rt.subresources):
            raise errors.NotFound("the server could not find the requested resource")
        ns = namespace if rt.namespaced else None
        for _ in range(64):
            with self._lock:
                key, cur = self._find(rt, ns, name)
            if cur is None:
                raise _not_found(rt, name)
            made = make(cur)
            supplied = _meta(made).get("managedFields", ownership.ABSENT)
            new = self._prepare_update(rt, cur, made, subresource)
            new = self._decode(rt, new, req)
            old_out = self._out(rt, cur)
            new = self._admit("UPDATE", rt, subresource, ns, name, new, old_out, req) or new
            self._restore_system_fields(rt, cur, new, subresource)
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                self._validate_crd(rt, new)
            self._validate_update(rt, cur, new)
            self._schema_validate(rt, new)
            self._admit_validate("UPDATE", rt, subresource, ns, name, new, old_out, req)
            _check_storable(rt, new)
            with self._txn():
                key, now = self._find(rt, ns, name)
                if now is None:
                    raise _not_found(rt, name)
                if now["metadata"].get("resourceVersion") != cur["metadata"].get("resourceVersion"):
                    continue
                managed = supplied if applied else self._managed_after(rt, now, new, supplied, subresource, req)
                if managed:
                    new["metadata"]["managedFields"] = managed
                result = self._finish_update(rt, key, now, new, req)
            return self._out(rt, result)
        raise _conflict(rt, name)

    def _prepare_update(self, rt: ResourceType, cur: Obj, body: Obj, subresource: str | None) -> Obj:
        if subresource == "status":
            new = _copy(cur)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
        elif subresource == "finalize":
            new = _copy(cur)
            new.setdefault("spec", {})["finalizers"] = list((body.get("spec") or {}).get("finalizers") or [])
        else:
            new = body
            if "status" in rt.subresources:
                if "status" in cur:
                    new["status"] = _copy(cur["status"])
                else:
                    new.pop("status", None)
        self._restore_system_fields(rt, cur, new, subresource)
        return new

    @staticmethod
    def _restore_system_fields(rt: ResourceType, cur: Obj, new: Obj, subresource: str | None) -> None:
        meta, cmeta = _meta(new), cur["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                  "namespace", "name", "resourceVersion"):
            if k in cmeta:
                meta[k] = cmeta[k]
            else:
                meta.pop(k, None)
        meta.pop("managedFields", None)
        new["apiVersion"], new["kind"] = cur.get("apiVersion", rt.api_version), rt.kind

    def _validate_update(self, rt: ResourceType, cur: Obj, new: Obj) -> None:
        cmeta, meta = cur["metadata"], new["metadata"]
        if cmeta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in (cmeta.get("finalizers") or [])]
            if added:
                listed = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
                raise invalid(rt, cmeta.get("name", ""), [(
                    "FieldValueForbidden", "metadata.finalizers",
                    f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers "
                    f"{listed}")])
        if rt.group == "" and rt.plural == "pods":
            node = (cur.get("spec") or {}).get("nodeName")
            if node and (new.get("spec") or {}).get("nodeName") != node:
                raise invalid(rt, cmeta.get("name", ""), [(
                    "FieldValueForbidden", "spec",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                    "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to "
                    "1 if it was previously negative)")])

    def _finish_update(self, rt: ResourceType, key: str, cur: Obj, new: Obj, req: Request) -> Obj:
        """Under the lock: generation, no-op detection, finalizer-driven removal, CRD (re)registration."""
        has_status = "status" in rt.subresources
        meta = new["metadata"]
        meta["generation"] = cur["metadata"].get("generation", 1)
        if _spec_part(cur, has_status) != _spec_part(new, has_status):
            meta["generation"] = meta["generation"] + 1
        is_crd = rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions"
        if is_crd:
            new["status"] = self._crd_status(new, cur.get("status"))
        if new == cur:
            return cur
        if req.dry_run:
            return new
        cmeta = cur["metadata"]
        if (meta.get("deletionTimestamp") and not meta.get("finalizers") and cmeta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")):
            deleted = self._remove(rt, key, cur, new)
            return deleted
        stored = self._commit(MODIFIED, key, new, cur)
        if is_crd:
            self._register_crd(stored)
        if key in self._foreground:
            self._maybe_release_foreground(key)
            stored = self._by_type.get(_split_key(key)[0], {}).get(key, stored)
        if rt.group == "" and rt.plural == "namespaces" and meta.get("deletionTimestamp"):
            self._maybe_finalize_namespace(meta["name"])
        return stored

    # ----- delete -----------------------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, propagation_policy: str | None = None,
               preconditions: dict[str, str] | None = None, grace_period_seconds: int | None = None,
               req: Request | None = None) -> Obj:
        req = req or Request()
        ns = namespace if rt.namespaced else None
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise invalid(rt, name, [("FieldValueNotSupported", "propagationPolicy",
                                      f'Unsupported value: "{propagation_policy}": supported values: "Foreground", '
                                      '"Background", "Orphan", "nil"')])
        if rt.group == "" and rt.plural == "namespaces" and name in UNDELETABLE_NAMESPACES:
            raise errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                                   details={"name": name, "kind": "namespaces"})
        with self._lock:
            _, cur = self._find(rt, ns, name)
        if cur is None:
            raise _not_found(rt, name)
        self._check_preconditions(rt, name, cur, preconditions)
        self._admit_validate("DELETE", rt, None, ns, name, None, self._out(rt, cur), req,
                             {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                              "propagationPolicy": propagation_policy, "gracePeriodSeconds": grace_period_seconds})
        if req.dry_run:
            return self._out(rt, cur)
        with self._txn():
            key, cur = self._find(rt, ns, name)
            if cur is None:
                raise _not_found(rt, name)
            self._check_preconditions(rt, name, cur, preconditions)
            result = self._delete_locked(rt, key, cur, propagation_policy, grace_period_seconds)
        return self._out(rt, result)

    @staticmethod
    def _check_preconditions(rt: ResourceType, name: str, cur: Obj, pre: dict[str, str] | None) -> None:
        if not pre:
            return
        # kube-apiserver checks DELETE preconditions before storage does (rest.BeforeDelete): its texts, and the
        # object's Kind where other conflicts name the resource.
        meta, kind = cur["metadata"], _qualified_kind(rt)
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise _conflict(rt, name, f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
                                      f"({meta.get('uid')}). The object might have been deleted and then recreated",
                            resource=kind)
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise _conflict(rt, name, f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not "
                                      f"match the ResourceVersion in record ({meta.get('resourceVersion')}). The "
                                      "object might have been modified", resource=kind)

    def _pod_grace(self, pod: Obj, option: int | None) -> int:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        if option is not None:
            return max(0, int(option))
        grace = spec.get("terminationGracePeriodSeconds")
        return 30 if grace is None else max(0, int(grace))

    def _delete_locked(self, rt: ResourceType, key: str, cur: Obj, policy: str | None, grace: int | None) -> Obj:
        """Delete one object under the lock with kube's rules; returns the object as now stored or as deleted."""
        meta = cur["metadata"]
        gp = (rt.group, rt.plural)
        if gp == ("", "namespaces"):
            return self._delete_namespace(key, cur)
        grace = self._pod_grace(cur, grace) if gp == ("", "pods") else 0
        uid = meta.get("uid", "")
        if policy == "Orphan":
            self._orphan_dependents(uid)
        finalizers = list(meta.get("finalizers") or [])
        blocking = policy == "Foreground" and bool(self._dependents.get(uid))
        if blocking and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if meta.get("deletionTimestamp"):
            current_grace = meta.get("deletionGracePeriodSeconds") or 0
            if finalizers == list(meta.get("finalizers") or []) and grace >= current_grace:
                return cur
            new = _copy(cur)
            new["metadata"]["finalizers"] = finalizers
            if grace < current_grace:
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                new["metadata"]["deletionTimestamp"] = _rfc3339(self.clock() + timedelta(seconds=grace))
            if not finalizers and not new["metadata"]["deletionGracePeriodSeconds"]:
                return self._remove(rt, key, cur, new)
            stored = self._commit(MODIFIED, key, new, cur)
            if blocking:
                self._delete_dependents(uid)
                self._maybe_release_foreground(key)
            return self._by_type.get(gp, {}).get(key, stored)
        if finalizers or grace > 0:
            new = _copy(cur)
            nmeta = new["metadata"]
            nmeta["deletionTimestamp"] = _rfc3339(self.clock() + timedelta(seconds=grace))
            nmeta["deletionGracePeriodSeconds"] = grace
            nmeta["generation"] = nmeta.get("generation", 1) + 1
            if finalizers:
                nmeta["finalizers"] = finalizers
            stored = self._commit(MODIFIED, key, new, cur)
            if blocking:
                self._delete_dependents(uid)
                self._maybe_release_foreground(key)
                return self._by_type.get(gp, {}).get(key, stored)
            return stored
        return self._remove(rt, key, cur, cur)

    def _remove(self, rt: ResourceType, key: str, cur: Obj, last: Obj) -> Obj:
        """Remove the object for good (DELETED event with its last state), then cascade."""
        deleted = self._commit(DELETED, key, last, cur)
        gp, ns, name = _split_key(key)
        uid = cur["metadata"].get("uid", "")
        if gp == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._unregister_crd(cur)
        self._collect_dependents(uid)
        for owner_uid in _owner_uids(cur):
            owner_key = self._uids.get(owner_uid)
            if owner_key in self._foreground:
                self._maybe_release_foreground(owner_key)
        if ns:
            self._maybe_finalize_namespace(ns)
        return deleted

    def _obj(self, key: str) -> Obj | None:
        return self._by_type.get(_split_key(key)[0], {}).get(key)

    def _collect_dependents(self, owner_uid: str) -> None:
        """GC: delete (background) every dependent of `owner_uid` none of whose owners is left."""
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None or dep["metadata"].get("deletionTimestamp"):
                continue
            if any(u in self._uids for u in _owner_uids(dep)):
                continue
            self._delete_locked(self._rt_for(_split_key(dkey)[0], dep), dkey, dep, None, None)

    def _delete_dependents(self, owner_uid: str) -> None:
        """Foreground: delete every dependent now (they may linger on their own finalizers / grace)."""
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None or dep["metadata"].get("deletionTimestamp"):
                continue
            self._delete_locked(self._rt_for(_split_key(dkey)[0], dep), dkey, dep, None, None)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None:
                continue
            new = _copy(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit(MODIFIED, dkey, new, dep)

    def _blocking(self, owner_uid: str) -> bool:
        for dkey in self._dependents.get(owner_uid, ()):
            dep = self._obj(dkey)
            if dep is None:
                continue
            for ref in dep["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return True
        return False

    def _maybe_release_foreground(self, key: str) -> None:
        owner = self._obj(key)
        if owner is None:
            return
        meta = owner["metadata"]
        if FOREGROUND not in (meta.get("finalizers") or ()) or self._blocking(meta.get("uid", "")):
            return
        new = _copy(owner)
        rest = [f for f in meta.get("finalizers") or [] if f != FOREGROUND]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        rt = self._rt_for(_split_key(key)[0], owner)
        if not rest and not meta.get("deletionGracePeriodSeconds"):
            self._remove(rt, key, owner, new)
        else:
            self._commit(MODIFIED, key, new, owner)

    def _delete_namespace(self, key: str, cur: Obj) -> Obj:
        meta = cur["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            self._maybe_finalize_namespace(name)
            return self._obj(key) or cur
        new = _copy(cur)
        new["metadata"]["deletionTimestamp"] = _rfc3339(self.clock())
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
        new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        stored = self._commit(MODIFIED, key, new, cur)
        self._delete_namespace_contents(name)
        self._maybe_finalize_namespace(name)
        return self._obj(key) or stored

    def _delete_namespace_contents(self, ns: str) -> None:
        for dkey in sorted(self._by_ns.get(ns, ())):
            obj = self._obj(dkey)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            self._delete_locked(self._rt_for(_split_key(dkey)[0], obj), dkey, obj, None, None)

    def _maybe_finalize_namespace(self, ns: str) -> None:
        key = f"/namespaces//{ns}"
        nsobj = self._obj(key)
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp") or self._by_ns.get(ns):
            return
        rt = self._rt_for(("", "namespaces"), nsobj)
        spec_finalizers = list((nsobj.get("spec") or {}).get("finalizers") or [])
        rest = [f for f in spec_finalizers if f != "kubernetes"]
        if rest or nsobj["metadata"].get("finalizers"):
            if rest != spec_finalizers:  # the namespace controller's part is done; others still hold it
                new = _copy(nsobj)
                new.setdefault("spec", {})["finalizers"] = rest
                self._commit(MODIFIED, key, new, nsobj)
            return
        new = _copy(nsobj)
        new.setdefault("spec", {})["finalizers"] = []
        self._remove(rt, key, nsobj, new)

    # ----- pods/binding and pods/eviction -----------------------------------------------------------------------

    def _pods(self) -> ResourceType:
        return self._rt_for(("", "pods"))

    def bind(self, namespace: str, name: str, binding: Obj, *, req: Request | None = None) -> Obj:
        req = req or Request()
        rt = self._pods()
        binding = _copy(binding)
        target = binding.get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid(rt, name, [("FieldValueRequired", "target.name", "Required value")])
        binding = self._admit("CREATE", rt, "binding", namespace, name, binding, None, req) or binding
        self._admit_validate("CREATE", rt, "binding", namespace, name, binding, None, req)
        annotations = (binding.get("metadata") or {}).get("annotations") or {}
        with self._txn():
            key, pod = self._find(rt, namespace, name)
            if pod is None:
                raise _not_found(rt, name)
            pre_uid = (binding.get("metadata") or {}).get("uid")
            if pre_uid and pre_uid != pod["metadata"].get("uid"):
                raise _conflict(rt, name, f"Precondition failed: UID in precondition: {pre_uid}, UID in object "
                                          f"meta: {pod['metadata'].get('uid')}", resource="pods/binding")
            if pod["metadata"].get("deletionTimestamp"):
                raise _conflict(rt, name, f"pod {name} is being deleted, cannot be assigned to a host",
                                resource="pods/binding")
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound:
                raise _conflict(rt, name, f'pod {name} is already assigned to node "{bound}"', resource="pods/binding")
            if req.dry_run:
                return _status_success()
            new = _copy(pod)
            new.setdefault("spec", {})["nodeName"] = node
            if annotations:
                new["metadata"].setdefault("annotations", {}).update(annotations)
            status = new.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": _rfc3339(self.clock())})
            status["conditions"] = conditions
            self._commit(MODIFIED, key, new, pod)
        return _status_success()

    def evict(self, namespace: str, name: str, eviction: Obj, *, req: Request | None = None) -> Obj:
        req = req or Request()
        rt = self._pods()
        eviction = _copy(eviction or {})
        eviction = self._admit("CREATE", rt, "eviction", namespace, name, eviction, None, req) or eviction
        self._admit_validate("CREATE", rt, "eviction", namespace, name, eviction, None, req)
        opts = eviction.get("deleteOptions") or {}
        with self._txn():
            key, pod = self._find(rt, namespace, name)
            if pod is None:
                raise _not_found(rt, name)
            self._check_preconditions(rt, name, pod, opts.get("preconditions"))
            if req.dry_run:
                return _status_success()
            self._delete_locked(rt, key, pod, opts.get("propagationPolicy"), opts.get("gracePeriodSeconds"))
        return _status_success()

    # ----- CustomResourceDefinitions ----------------------------------------------------------------------------

    def _validate_crd(self, rt: ResourceType, crd: Obj) -> None:
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

    def _crd_status(self, crd: Obj, old: Obj | None = None) -> Obj:
        now = _rfc3339(self.clock())
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

    # ----- background work and shutdown -------------------------------------------------------------------------

    def tick(self) -> None:
        """Finish deferred work: GC of dependents whose owners are all gone, foreground owners whose blocking
        dependents are gone, terminating namespaces that are empty."""
        with self._txn():
            for owner_uid in [u for u in self._dependents if u not in self._uids]:
                self._collect_dependents(owner_uid)
            for key in sorted(self._foreground):
                self._maybe_release_foreground(key)
            for _key, nsobj in sorted(self._by_type.get(("", "namespaces"), {}).items()):
                if nsobj["metadata"].get("deletionTimestamp"):
                    name = nsobj["metadata"]["name"]
                    self._delete_namespace_contents(name)
                    self._maybe_finalize_namespace(name)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watchers = [w for ws in self._watchers.values() for w in ws]
        for w in watchers:
            w.stop()
        if self.backend is not None:
            self.backend.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
