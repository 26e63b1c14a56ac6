"""The AdmissionReview kube-apiserver sends (`build_review`) and the errors it answers with (`denied`,
`calling_failed`, `dry_run_unsupported`), plus the URL a webhook's clientConfig names (`webhook_url`). All pure.

Part of `devcluster.admission`, over `matching.AdmissionCall`; used by `client` and `chain`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from lahar.devcluster.admission.matching import _OPTIONS_KIND, AdmissionCall, Obj
from lahar.kube import errors

# ---------------------------------------------------------------------------------------------------------------
# review and errors (pure)


def build_review(call: AdmissionCall, *, uid: str | None = None) -> Obj:
    """The `admission.k8s.io/v1` AdmissionReview kube-apiserver sends (CreateV1AdmissionReview)."""
    g, v, k = call.kind
    request: Obj = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": g, "version": v, "kind": k},
        "resource": {"group": call.group, "version": call.version, "resource": call.resource},
    }
    if call.subresource:
        request["subResource"] = call.subresource
    request["requestKind"] = {"group": g, "version": v, "kind": k}
    request["requestResource"] = {"group": call.group, "version": call.version, "resource": call.resource}
    if call.subresource:
        request["requestSubResource"] = call.subresource
    if call.name:
        request["name"] = call.name
    if call.namespace:
        request["namespace"] = call.namespace
    request["operation"] = call.operation
    user: Obj = {"username": call.username}
    if call.uid:
        user["uid"] = call.uid
    if call.groups:
        user["groups"] = list(call.groups)
    request["userInfo"] = user
    request["object"] = call.obj
    request["oldObject"] = call.old_obj
    request["dryRun"] = call.dry_run
    request["options"] = _options(call)
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def _options(call: AdmissionCall) -> Obj | None:
    kind = _OPTIONS_KIND.get(call.operation)
    if kind is None:
        return call.options
    options = dict(call.options or {})
    options.setdefault("kind", kind)
    options.setdefault("apiVersion", "meta.k8s.io/v1")
    if call.dry_run:
        options.setdefault("dryRun", ["All"])
    # kind/apiVersion first, as Go marshals TypeMeta
    return {"kind": options.pop("kind"), "apiVersion": options.pop("apiVersion"), **options}


def denied(webhook_name: str, result: Mapping[str, Any] | None) -> errors.ApiError:
    """kube's `webhookerrors.ToStatusErr`: the denial as a Status error (code < 400 → 403)."""
    result = dict(result or {})
    code = result.get("code") or 0
    if code < 400:
        code = 403
    prefix = f'admission webhook "{webhook_name}" denied the request'
    if result.get("message"):
        message = f"{prefix}: {result['message']}"
    elif result.get("reason"):
        message = f"{prefix}: {result['reason']}"
    else:
        message = f"{prefix} without explanation"
    reason = result.get("reason") or ""
    cls = _error_class(code)
    return cls(message, code=code, reason=reason, details=result.get("details"))


def _error_class(code: int) -> type[errors.ApiError]:
    try:
        return type(errors.from_status({}, code=code))
    except Exception:  # pragma: no cover
        return errors.ApiError


def calling_failed(webhook_name: str, reason: str) -> errors.ApiError:
    """`apierrors.NewInternalError(ErrCallingWebhook)` as kube-apiserver returns it with failurePolicy Fail."""
    text = f'failed calling webhook "{webhook_name}": {reason}'
    return errors.ApiError(f"Internal error occurred: {text}", code=500, reason="InternalError",
                           details={"causes": [{"message": text}]})


def dry_run_unsupported(webhook_name: str) -> errors.ApiError:
    return errors.BadRequest(f'admission webhook "{webhook_name}" does not support dry run')


def service_url(service: Mapping[str, Any]) -> str:
    port = service.get("port") or 443
    path = service.get("path") or ""
    return f"https://{service.get('name')}.{service.get('namespace')}.svc:{port}{path}"


def webhook_url(webhook: Mapping[str, Any]) -> str:
    cfg = webhook.get("clientConfig") or {}
    if cfg.get("url"):
        return str(cfg["url"])
    return service_url(cfg.get("service") or {})


def _go_duration(seconds: int) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
