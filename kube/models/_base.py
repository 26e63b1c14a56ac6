"""Shared base of the Volcano models: camelCase on the wire, unknown fields kept, loose core types.

Everything in `kube.models` builds on these; `to_dict()` gives back the wire form exactly as it came in.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, Strict
from pydantic.alias_generators import to_camel

__all__ = ["LEFT_TO_RIGHT", "Bool", "Int", "Kind", "ObjectMeta", "ResourceList", "VolcanoModel"]

# Integers and booleans are strict: a quoted "3" is not silently turned into 3 (it would not round-trip, and the
# API server's schema rejects it too). Enum-typed fields are `Enum | str` tried left to right: known values
# become enum members, unknown ones stay strings so the admission webhooks can answer with Volcano's messages.
Int = Annotated[int, Strict()]
Bool = Annotated[bool, Strict()]
LEFT_TO_RIGHT = Field(union_mode="left_to_right")

# corev1.ResourceList as it is on the wire (`{"cpu": "500m"}`); parse with `kube.quantity.resource_list`.
ResourceList = dict[str, Any]


class VolcanoModel(BaseModel):
    """A wire object: camelCase aliases, python names accepted too, unknown fields kept on round-trip."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def to_dict(self) -> dict[str, Any]:
        """The wire form: only the fields that were set, by their JSON names."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class ObjectMeta(VolcanoModel):
    """metav1.ObjectMeta, permissive: the common fields typed, the rest (managedFields, ...) kept as is."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: Int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None


class Kind(VolcanoModel):
    """A top-level object. `apiVersion` and `kind` are always rendered, even when built in Python."""

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None

    def model_post_init(self, context: Any, /) -> None:
        if self.api_version is None and "api_version" not in self.model_fields_set:
            self.api_version = self.API_VERSION
        if self.kind is None and "kind" not in self.model_fields_set:
            self.kind = self.KIND
