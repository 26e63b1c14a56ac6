"""Admission requests and AdmissionReviews for the tests (tests/builders), as an API server sends them.

`create(obj)`, `update(old, new)` and `delete(old)` give a `lahar.webhooks.review.Request`; `admission_review(obj)` the
AdmissionReview dict an HTTPS test posts. The resource is the kind's plural (`Job` -> `jobs`) unless given.
"""

from __future__ import annotations

from typing import Any

from lahar.webhooks import review

__all__ = ["admission_review", "create", "delete", "resource_of", "update"]


def resource_of(obj: dict[str, Any]) -> str:
    """The plural resource of `obj`'s kind, as Volcano's and Kubernetes' kinds spell it (`PodGroup` -> `podgroups`)."""
    return str(obj.get("kind") or "").lower() + "s"


def create(obj: dict[str, Any], resource: str | None = None, **kw: Any) -> review.Request:
    return review.request_for(obj, resource=resource or resource_of(obj), **kw)


def update(old: dict[str, Any], new: dict[str, Any], resource: str | None = None, **kw: Any) -> review.Request:
    return review.request_for(new, resource=resource or resource_of(new), operation="UPDATE", old_object=old, **kw)


def delete(old: dict[str, Any], resource: str | None = None, **kw: Any) -> review.Request:
    return review.request_for(None, resource=resource or resource_of(old), operation="DELETE",  # type: ignore[arg-type]
                              old_object=old, **kw)


def admission_review(obj: dict[str, Any], resource: str | None = None, *, uid: str = "uid-1",
                     api_version: str = review.V1, **kw: Any) -> dict[str, Any]:
    return review.to_review(create(obj, resource, uid=uid, **kw), api_version=api_version)
