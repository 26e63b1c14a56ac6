"""The cluster client port: what every lahar process needs from a Kubernetes API, over plain dict objects.

Two implementations keep the same semantics: `kube.rest.RestClient` (the official `kubernetes` client, for a real
cluster or devcluster) and `kube.apiserver.memory.MemoryClient` (in-process, for unit tests). Errors are `kube.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from lahar.kube.resources import Registry, ResourceType

__all__ = ["ClusterClient", "Obj", "PatchType", "Watch", "WatchEvent", "namespace_for"]

Obj = dict[str, Any]
PatchType = Literal["merge", "json", "strategic"]


class WatchEvent(TypedDict):
    """`type` is ADDED, MODIFIED, DELETED or BOOKMARK; a BOOKMARK's object carries only metadata.resourceVersion."""

    type: str
    object: Obj


@runtime_checkable
class Watch(Protocol):
    """An iterator of events in resourceVersion order; raises `errors.Gone` when the start version has expired."""

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def __next__(self) -> WatchEvent: ...

    def stop(self) -> None:
        """End the stream; a blocked `next()` returns (StopIteration) promptly."""


@runtime_checkable
class ClusterClient(Protocol):
    registry: Registry

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> Obj: ...

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> Obj:
        """A `<Kind>List` dict: `items` (each with apiVersion/kind set) and `metadata.resourceVersion`."""

    def watch(self, rt: ResourceType, *, namespace: str | None = None, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              allow_bookmarks: bool = True, timeout_seconds: float | None = None) -> Watch:
        """Events after `resource_version`; with None or "0", synthetic ADDED events for what exists first."""

    def create(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None, dry_run: bool = False) -> Obj:
        """Honours `metadata.generateName`; AlreadyExists (409) when the name is taken."""

    def update(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        """Full replace; Conflict (409) when `metadata.resourceVersion` is stale."""

    def update_status(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj: ...

    def patch(self, rt: ResourceType, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: PatchType = "merge", subresource: str | None = None) -> Obj: ...

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation_policy: str | None = None, preconditions: dict[str, str] | None = None,
               grace_period_seconds: int | None = None) -> Obj:
        """Returns the object as deleted (or as now terminating, with deletionTimestamp, when finalizers hold it)."""

    def bind(self, *, namespace: str, name: str, node_name: str, annotations: dict[str, str] | None = None) -> None:
        """POST pods/binding."""

    def evict(self, *, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        """POST pods/eviction (policy/v1 Eviction)."""


def namespace_for(rt: ResourceType, namespace: str | None, obj: Obj | None = None) -> str | None:
    """The namespace a call addresses, as kubectl picks it: None for cluster-scoped types, else the one given, else
    the object's own, else `default`."""
    if not rt.namespaced:
        return None
    if namespace:
        return namespace
    if obj is not None and (obj.get("metadata") or {}).get("namespace"):
        return obj["metadata"]["namespace"]
    return "default"
