"""The in-memory cluster: `kube.client.ClusterClient` over the `kube.apiserver` engine, for unit tests and simulation.

Same semantics as a real API server (conflicts, generation, finalizers, GC, watches, selectors) without a network;
`MemoryClient.with_crds()` also serves Volcano's kinds so tests need no CRD objects.
"""

from __future__ import annotations

import time
from typing import Any

from lahar.kube import errors, resources
from lahar.kube.apiserver.store import Request, Store, StoreWatch
from lahar.kube.client import Obj, PatchType, WatchEvent, namespace_for
from lahar.kube.resources import Registry, ResourceType

__all__ = ["MemoryClient", "MemoryWatch"]


class MemoryWatch:
    """A `kube.client.Watch` over a `StoreWatch`: blocking iterator, `stop()`, optional overall timeout."""

    def __init__(self, inner: StoreWatch, timeout_seconds: float | None = None, *, read_only: bool = False) -> None:
        self._inner = inner
        self._deadline = None if timeout_seconds is None else time.monotonic() + float(timeout_seconds)
        self._next = inner.next_view if read_only else inner.next_event

    def __iter__(self) -> MemoryWatch:
        return self

    def __next__(self) -> WatchEvent:
        timeout = None
        if self._deadline is not None:
            timeout = self._deadline - time.monotonic()
            if timeout <= 0:
                self.stop()
                raise StopIteration
        event = self._next(timeout)
        if event is None:
            self.stop()
            raise StopIteration
        return event

    def next_event(self, timeout: float | None = None) -> WatchEvent | None:
        return self._next(timeout)

    def bookmark(self) -> None:
        self._inner.bookmark()

    def stop(self) -> None:
        self._inner.stop()

    def __enter__(self) -> MemoryWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MemoryClient:
    """`ClusterClient` over a `Store` (a fresh one with the core types unless given). Field validation is `Warn`,
    the default of a real API server for clients that do not ask."""

    def __init__(self, store: Store | None = None, registry: Registry | None = None) -> None:
        if store is None:
            store = Store(registry=registry if registry is not None else Registry.of(resources.core()))
        self.store = store
        self.registry = store.registry

    @classmethod
    def with_crds(cls, store: Store | None = None) -> MemoryClient:
        """A client whose store also serves Volcano's kinds (registered directly, no CRD objects)."""
        client = cls(store)
        for rt in resources.volcano():
            client.store.register_type(rt)
        return client

    _ns = staticmethod(namespace_for)

    @staticmethod
    def _req(dry_run: bool = False) -> Request:
        return Request(dry_run=dry_run, field_validation="Warn", field_manager="lahar")

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> Obj:
        return self.store.get(rt, self._ns(rt, namespace), name)

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> Obj:
        return self.store.list(rt, namespace if rt.namespaced else None, label_selector=label_selector,
                               field_selector=field_selector)

    def watch(self, rt: ResourceType, *, namespace: str | None = None, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              allow_bookmarks: bool = True, timeout_seconds: float | None = None,
              read_only: bool = False) -> MemoryWatch:
        """`read_only`: each event's object is the stored one itself, not a copy (`StoreWatch.next_view`); for a
        watcher in the server's own process that never changes what it reads."""
        inner = self.store.watch(rt, namespace if rt.namespaced else None, resource_version=resource_version,
                                 label_selector=label_selector, field_selector=field_selector,
                                 allow_bookmarks=allow_bookmarks)
        return MemoryWatch(inner, timeout_seconds, read_only=read_only)

    def peek_all(self, rt: ResourceType) -> list[Obj]:
        """Every stored object of `rt`, read-only (`Store.peek_all`): no copy, for callers that only read."""
        return self.store.peek_all(rt)

    def create(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None, dry_run: bool = False) -> Obj:
        return self.store.create(rt, self._ns(rt, namespace, obj), obj, req=self._req(dry_run))

    def _name(self, rt: ResourceType, obj: Obj) -> str:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise errors.Invalid(f"{rt.kind} is invalid: metadata.name: Required value: name is required")
        return name

    def update(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        return self.store.update(rt, self._ns(rt, namespace, obj), self._name(rt, obj), obj, req=self._req())

    def update_status(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        return self.store.update(rt, self._ns(rt, namespace, obj), self._name(rt, obj), obj, subresource="status",
                                 req=self._req())

    def patch(self, rt: ResourceType, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: PatchType = "merge", subresource: str | None = None) -> Obj:
        return self.store.patch(rt, self._ns(rt, namespace), name, patch, patch_type=patch_type,
                                subresource=subresource, req=self._req())

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation_policy: str | None = None, preconditions: dict[str, str] | None = None,
               grace_period_seconds: int | None = None) -> Obj:
        return self.store.delete(rt, self._ns(rt, namespace), name, propagation_policy=propagation_policy,
                                 preconditions=preconditions, grace_period_seconds=grace_period_seconds,
                                 req=self._req())

    def bind(self, *, namespace: str, name: str, node_name: str, annotations: dict[str, str] | None = None) -> None:
        meta: Obj = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        self.store.bind(namespace, name, {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                                          "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}},
                        req=self._req())

    def evict(self, *, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        eviction: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name,
                                                                                    "namespace": namespace}}
        if grace_period_seconds is not None:
            eviction["deleteOptions"] = {"gracePeriodSeconds": int(grace_period_seconds)}
        self.store.evict(namespace, name, eviction, req=self._req())

    def tick(self) -> None:
        """Run the store's deferred work (GC, foreground owners, terminating namespaces)."""
        self.store.tick()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
