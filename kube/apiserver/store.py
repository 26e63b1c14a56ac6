"""The API-server engine's store: kube-apiserver's object rules over plain dicts, in memory, optionally persisted.

devcluster's REST server (SQLite backend, webhooks as the admission port) and `kube.apiserver.memory.MemoryClient`
both sit on this one `Store`. It owns resourceVersions and the write path (create, update, patch, server-side
apply); the other concerns are its sibling modules, mixed in: `indexes`, `watch`, `crds`, `gc` (deletion and
namespaces), `pods` (binding, eviction), and the pure `decoding`, `defaulting`, `updates`, `names`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from lahar.kube import apply, errors, fieldtypes, limits, ownership, patches, resources
from lahar.kube.apiserver import decoding, defaulting, names, updates
from lahar.kube.apiserver.crds import CustomResources, crd_status, validate_crd
from lahar.kube.apiserver.gc import Collector
from lahar.kube.apiserver.indexes import Indexes
from lahar.kube.apiserver.objects import (
    ADDED,
    DELETED,
    GC_PAUSE_ITEMS,
    MODIFIED,
    check_storable,
    conflict,
    copy_obj,
    gc_paused,
    invalid,
    meta_of,
    not_found,
    object_key,
    resource_name,
    rfc3339,
    spec_part,
    split_key,
)
from lahar.kube.apiserver.pods import PodSubresources
from lahar.kube.apiserver.ports import AdmissionAttributes, AdmissionPort, Backend, Request
from lahar.kube.apiserver.watch import Change, StoreWatch, Watches
from lahar.kube.client import Obj
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
_BUILTIN_GROUPS = frozenset(rt.group for rt in resources.core())


class Store(Indexes, Watches, CustomResources, Collector, PodSubresources):
    """kube-apiserver semantics over dicts; thread-safe (one RLock), synchronous; state in memory, persisted through
    the optional backend. Watch fan-out happens under the lock, in resourceVersion order. LIST reads keys kept in
    order per type and namespace, narrowed by label and field equality indexes (`indexes`) updated on every write."""

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
        self._init_indexes()
        self._init_watches()
        self._init_crds()
        self._pending: list[Change] = []
        self._flushes = 0
        self._closed = False
        if backend is not None:
            self._load(backend)
        with self._lock:
            self._ensure_namespaces()
            self._flush()

    # ----- state loading ----------------------------------------------------------------------------------------

    def _load(self, backend: Backend) -> None:
        rv, objects, events = backend.load()
        self._rv = int(rv)
        crds = []
        for key, obj in objects.items():
            if limits.depth(obj) > limits.MAX_DEPTH:  # stored before the depth rule: it would break LIST and watch
                _log.warning("not serving %s: it nests deeper than %d levels", key, limits.MAX_DEPTH)
                continue
            self._index(key, obj, None)
            gp, _, _ = split_key(key)
            if gp == ("apiextensions.k8s.io", "customresourcedefinitions"):
                crds.append(obj)
        for crd in crds:
            self._register_crd(crd)
        self._load_history(events)

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
        self._pending.append(Change(rv, etype, key, obj, prev))
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
        self._publish(pending)
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

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with self._lock:
            _, obj = self._find(rt, namespace, name)
        if obj is None:
            raise not_found(rt, name)
        return self._out(rt, obj)

    def _view(self, rt: ResourceType, obj: Obj) -> Obj:
        """The stored object as served at `rt`, read-only: the object itself when its apiVersion and kind are the
        served ones, else a shallow relabelled copy (the old object admission reads, never changes)."""
        if obj.get("apiVersion") == rt.api_version and obj.get("kind") == rt.kind:
            return obj
        return {"apiVersion": rt.api_version, "kind": rt.kind,
                **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}

    def peek(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself, or None: a read-only view for the server's own bookkeeping (admission's
        namespace labels), without `get`'s copy. Stored objects are replaced, never changed in place, so the view
        stays as it was read; the caller must not change it."""
        with self._lock:
            return self._find(rt, namespace, name)[1]

    def peek_all(self, rt: ResourceType) -> list[Obj]:
        """Every stored object of `rt`, read-only as `peek` gives them (`lahar up`'s status counts)."""
        with self._lock:
            return list(self._by_type.get((rt.group, rt.plural), {}).values())

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
        with gc_paused(len(chosen) >= GC_PAUSE_ITEMS):
            out = orjson.loads(orjson.dumps(chosen))
        api_version, kind = rt.api_version, rt.kind
        for i, o in enumerate(out):
            if o.get("apiVersion") != api_version or o.get("kind") != kind:
                rest = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
                out[i] = {"apiVersion": api_version, "kind": kind, **rest}
        return {"apiVersion": api_version, "kind": rt.list_kind, "metadata": {"resourceVersion": rv},
                "items": out}

    # ----- admission ------------------------------------------------------------------------------------------

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

    # ----- create -----------------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str | None, obj: Obj, *, req: Request | None = None,
               _applied: bool = False) -> Obj:
        req = req or Request()
        obj = decoding.check_body(rt, obj)
        meta = obj["metadata"]
        supplied = meta.pop("managedFields", ownership.ABSENT)
        ns = decoding.resolve_namespace(rt, namespace, meta)
        for system in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "generation", "selfLink"):
            meta.pop(system, None)
        if ns is not None:  # NamespaceLifecycle runs before any webhook
            with self._lock:
                self._check_namespace_open(ns)
        obj = decoding.decode(rt, obj, req, self._schema(rt))
        obj = self._admit("CREATE", rt, None, ns, meta.get("name", ""), obj, None, req) or obj
        meta = meta_of(obj)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        if not meta.get("name") and not generate:
            raise invalid(rt, "", [("FieldValueRequired", "metadata.name",
                                    "Required value: name or generateName is required")])
        if generate:
            meta["name"] = names.generate(meta["generateName"])
        errs = names.name_errors(rt, meta["name"])
        if errs:
            fld = "metadata.generateName" if generate else "metadata.name"
            value = meta["generateName"] if generate else meta["name"]
            raise invalid(rt, meta["name"], [("FieldValueInvalid", fld, f'Invalid value: "{value}": {"; ".join(errs)}')])
        defaulting.prepare_create(rt, obj)
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            validate_crd(rt, obj)
        decoding.schema_validate(rt, obj, self._schema(rt))
        self._admit_validate("CREATE", rt, None, ns, meta["name"], obj, None, req)
        check_storable(rt, obj)
        with self._txn():
            if ns is not None:
                self._check_namespace_open(ns)
            key, existing = self._find(rt, ns, meta["name"])
            tries = 0
            while existing is not None and generate and tries < 8:
                meta["name"] = names.generate(meta["generateName"])
                key, existing = self._find(rt, ns, meta["name"])
                tries += 1
            if existing is not None:
                raise errors.AlreadyExists(f'{resource_name(rt)} "{meta["name"]}" already exists',
                                           details={"name": meta["name"], "group": rt.group, "kind": rt.plural})
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339(self.clock())
            meta["generation"] = 1
            managed = supplied if _applied else self._managed_after(rt, None, obj, supplied, None, req)
            if managed:
                meta["managedFields"] = managed
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                obj["status"] = crd_status(obj, None, now=rfc3339(self.clock()))
            if req.dry_run:
                return self._out(rt, obj)
            stored = self._commit(ADDED, key, obj, None)
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                self._register_crd(stored)
        return self._out(rt, stored)

    # ----- update, patch and server-side apply ------------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str | None, name: str, obj: Obj, *, subresource: str | None = None,
               req: Request | None = None) -> Obj:
        req = req or Request()
        body = decoding.check_body(rt, obj)
        bmeta = body["metadata"]
        if bmeta.get("name") and bmeta["name"] != name:
            raise errors.BadRequest(f"the name of the object ({bmeta['name']}) does not match the name on the URL "
                                    f"({name})")
        bmeta["name"] = name
        decoding.resolve_namespace(rt, namespace, bmeta)
        want_rv = bmeta.get("resourceVersion") or None
        if want_rv is not None and not (isinstance(want_rv, str) and want_rv.isascii() and want_rv.isdigit()):
            raise errors.BadRequest(f"metadata.resourceVersion: Invalid value: {want_rv!r}: must be a "
                                    f"non-negative integer")

        def make(cur: Obj) -> Obj:
            if want_rv is not None and want_rv != cur["metadata"].get("resourceVersion"):
                raise conflict(rt, name)
            if bmeta.get("uid") and bmeta["uid"] != cur["metadata"].get("uid"):
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {bmeta['uid']}, UID in object "
                                         f"meta: {cur['metadata'].get('uid')}")
            return copy_obj(body)

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
            base = copy_obj(cur)
            if patch_type == "merge":
                out = patches.merge_patch(base, patch)
            elif patch_type == "json":
                out = patches.json_patch(base, patch)
            else:
                out = patches.strategic_merge_patch(base, patch, rt.kind)
            if not isinstance(out, dict):
                raise errors.BadRequest("the patch did not produce an object")
            out_meta = meta_of(out)
            rv = out_meta.get("resourceVersion")
            if rv and rv != cur["metadata"].get("resourceVersion"):
                raise conflict(rt, name)
            if out_meta.get("name") != name:
                raise errors.BadRequest(f"the name of the object ({out_meta.get('name')}) does not match the name on "
                                        f"the URL ({name})")
            if rt.namespaced and out_meta.get("namespace") != cur["metadata"].get("namespace"):
                raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on "
                                        "the request")
            return decoding.check_body(rt, out)

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
                    raise conflict(rt, name)
                live = copy_obj(cur)
                meta_of(live).pop("managedFields", None)
            out, entries = apply.apply(live, config, entries=ownership.live_entries(cur), manager=manager,
                                       api_version=rt.api_version, subresource=subresource or "", force=req.force,
                                       now=rfc3339(self.clock()), types=types, status=scope)
            meta_of(out)["managedFields"] = apply.encode_managed(entries)
            return out

        for _ in range(8):
            try:
                return self._update_loop(rt, namespace, name, lambda cur: decoding.check_body(rt, merged(cur)),
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
        raise conflict(rt, name)

    def _managed_after(self, rt: ResourceType, cur: Obj | None, new: Obj, supplied: Any, subresource: str | None,
                       req: Request) -> list[Obj] | None:
        return ownership.after_write(cur, new, supplied, manager=req.field_manager or "unknown",
                                     subresource=subresource, now=rfc3339(self.clock()),
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
                raise not_found(rt, name)
            made = make(cur)
            supplied = meta_of(made).get("managedFields", ownership.ABSENT)
            new = updates.prepare_update(rt, cur, made, subresource)
            new = decoding.decode(rt, new, req, self._schema(rt))
            old_out = self._view(rt, cur)
            new = self._admit("UPDATE", rt, subresource, ns, name, new, old_out, req) or new
            updates.restore_system_fields(rt, cur, new, subresource)
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                validate_crd(rt, new)
            updates.validate_update(rt, cur, new)
            decoding.schema_validate(rt, new, self._schema(rt))
            self._admit_validate("UPDATE", rt, subresource, ns, name, new, old_out, req)
            check_storable(rt, new)
            with self._txn():
                key, now = self._find(rt, ns, name)
                if now is None:
                    raise not_found(rt, name)
                if now["metadata"].get("resourceVersion") != cur["metadata"].get("resourceVersion"):
                    continue
                managed = supplied if applied else self._managed_after(rt, now, new, supplied, subresource, req)
                if managed:
                    new["metadata"]["managedFields"] = managed
                result = self._finish_update(rt, key, now, new, req)
            return self._out(rt, result)
        raise conflict(rt, name)

    def _finish_update(self, rt: ResourceType, key: str, cur: Obj, new: Obj, req: Request) -> Obj:
        """Under the lock: generation, no-op detection, finalizer-driven removal, CRD (re)registration."""
        has_status = "status" in rt.subresources
        meta = new["metadata"]
        meta["generation"] = cur["metadata"].get("generation", 1)
        if spec_part(cur, has_status) != spec_part(new, has_status):
            meta["generation"] = meta["generation"] + 1
        is_crd = rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions"
        if is_crd:
            new["status"] = crd_status(new, cur.get("status"), now=rfc3339(self.clock()))
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
            stored = self._by_type.get(split_key(key)[0], {}).get(key, stored)
        if rt.group == "" and rt.plural == "namespaces" and meta.get("deletionTimestamp"):
            self._maybe_finalize_namespace(meta["name"])
        return stored

    # ----- shutdown ---------------------------------------------------------------------------------------------

    def close(self) -> None: ...

    def __enter__(self) -> StoreWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
