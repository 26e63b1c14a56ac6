"""What placements derive from API objects, kept across sessions: node topologies, inventories, fingerprints and
task signatures, keyed by (kind, name, resourceVersions).

Owned by whoever runs the sessions — the scheduler cache (`scheduler.cache.SchedulerCache.shared`), a simulation —
and reached from a session with `derived(ssn)`; a session whose owner keeps nothing gets a fresh one. Nothing here
is process-wide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from lahar.scheduler.framework.session import Session

__all__ = ["DerivedCache", "derived"]

T = TypeVar("T")

_MISSING = object()


def _rv(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return ""
    return (obj.get("metadata") or {}).get("resourceVersion") or None


class DerivedCache:
    """`get(kind, name, objs, compute)`: `compute()` once per (kind, name, resourceVersion of each of `objs`); an
    object with the same resourceVersion has the same content (the API server's contract). Computed every time when
    an object carries no resourceVersion (hand-built snapshots: no way to tell a change). Cleared whole when it
    reaches `limit` entries (old versions are never asked again)."""

    __slots__ = ("_items", "limit")

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._items: dict[tuple[Any, ...], Any] = {}

    def __len__(self) -> int:
        return len(self._items)

    def get(self, kind: str, name: str, objs: Sequence[Mapping[str, Any] | None], compute: Callable[[], T]) -> T:
        rvs = tuple(_rv(o) for o in objs)
        if None in rvs:
            return compute()
        key = (kind, name, rvs)
        hit = self._items.get(key, _MISSING)
        if hit is _MISSING:
            if len(self._items) >= self.limit:
                self._items.clear()
            hit = self._items[key] = compute()
        return hit  # type: ignore[return-value]


def derived(ssn: Session) -> DerivedCache:
    """The derived-object cache of the session's owner (`Session.shared_state`)."""
    return ssn.shared_state(DerivedCache, DerivedCache)
