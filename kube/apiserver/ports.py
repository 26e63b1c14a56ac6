"""The API-server engine's ports: who asks (`Request`), the admission chain it calls, the backend that persists it.

devcluster plugs its webhook chain (`AdmissionPort`) and SQLite (`Backend`) into `kube.apiserver.store.Store` here;
the in-memory cluster runs with neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["AdmissionAttributes", "AdmissionPort", "Backend", "Request"]


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
    old_obj: Obj | None  # the stored object itself (read-only): an admission plugin never changes it
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
