"""API errors shared by every client and by devcluster: one exception per Kubernetes `Status` reason.

Sits under everything: clients raise these, devcluster renders them as `Status` bodies, reconcilers map them
to retry decisions. `ApiError.status()` is the wire form; `from_status()` is the inverse.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServiceUnavailable",
    "Timeout",
    "Unauthorized",
    "UnsupportedMediaType",
    "from_status",
]


class ApiError(Exception):
    """A Kubernetes API failure: HTTP `code`, machine `reason`, human `message`, optional `details`."""

    code: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, code: int | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason

    def status(self) -> dict[str, Any]:
        """The `meta/v1 Status` body kube-apiserver would send."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.reason!r}, {self.message!r})"


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class AlreadyExists(Conflict):
    reason = "AlreadyExists"


class Gone(ApiError):
    """The requested resourceVersion is older than the watch history kept: relist."""

    code, reason = 410, "Expired"


class UnsupportedMediaType(ApiError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(ApiError):
    """422: `details.causes` lists `{reason, message, field}` per offending field."""

    code, reason = 422, "Invalid"


class Timeout(ApiError):
    code, reason = 504, "Timeout"


class ServiceUnavailable(ApiError):
    code, reason = 503, "ServiceUnavailable"


_BY_REASON = {cls.reason: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict,
                                           AlreadyExists, Gone, UnsupportedMediaType, Invalid, Timeout,
                                           ServiceUnavailable)}
_BY_CODE = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
            410: Gone, 415: UnsupportedMediaType, 422: Invalid, 503: ServiceUnavailable, 504: Timeout}


def from_status(body: dict[str, Any] | None, *, code: int) -> ApiError:
    """Rebuild the typed error from a `Status` body (or from the HTTP code alone)."""
    body = body or {}
    reason = body.get("reason") or ""
    message = body.get("message") or f"HTTP {code}"
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
    return cls(message, details=body.get("details"), code=body.get("code") or code, reason=reason or None)
