"""The request a policy sees: an AdmissionReview's request (or a bare object, for `lahar policy test`) normalized
into one frozen shape (`normalize`, `request_for_object`), with its CEL variables (`object`, `oldObject`, ...).

Part of `policies.admission_policies`; `evaluation` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import resources


@dataclass(frozen=True)
class _Req:
    uid: str
    operation: str
    group: str
    version: str
    kind: str
    resource: str
    sub_resource: str
    namespace: str
    name: str
    object: dict | None
    old_object: dict | None
    user_info: dict
    dry_run: bool
    resource_group: str
    resource_version: str

    def cel(self) -> dict[str, Any]:
        """The CEL `request` variable (AdmissionRequest's JSON shape)."""
        return {"uid": self.uid, "operation": self.operation,
                "kind": {"group": self.group, "version": self.version, "kind": self.kind},
                "resource": {"group": self.resource_group, "version": self.resource_version,
                             "resource": self.resource},
                "subResource": self.sub_resource, "name": self.name, "namespace": self.namespace,
                "userInfo": self.user_info, "dryRun": self.dry_run}


def normalize(request: Any) -> _Req:
    """A `webhooks.review.Request`-like object, or an AdmissionReview `request` mapping."""
    if isinstance(request, _Req):
        return request
    if isinstance(request, Mapping):
        kind, res = request.get("kind") or {}, request.get("resource") or {}
        return _Req(uid=request.get("uid", ""), operation=request.get("operation", "CREATE"),
                    group=kind.get("group", ""), version=kind.get("version", ""), kind=kind.get("kind", ""),
                    resource=res.get("resource", ""), sub_resource=request.get("subResource", "") or "",
                    namespace=request.get("namespace", "") or "", name=request.get("name", "") or "",
                    object=request.get("object"), old_object=request.get("oldObject"),
                    user_info=request.get("userInfo") or {}, dry_run=bool(request.get("dryRun")),
                    resource_group=res.get("group", kind.get("group", "")),
                    resource_version=res.get("version", kind.get("version", "")))
    g = getattr
    return _Req(uid=g(request, "uid", ""), operation=g(request, "operation", "CREATE"), group=g(request, "group", ""),
                version=g(request, "version", ""), kind=g(request, "kind", ""), resource=g(request, "resource", ""),
                sub_resource=g(request, "sub_resource", "") or "", namespace=g(request, "namespace", "") or "",
                name=g(request, "name", "") or "", object=g(request, "object", None),
                old_object=g(request, "old_object", None), user_info=g(request, "user_info", None) or {},
                dry_run=bool(g(request, "dry_run", False)),
                resource_group=g(request, "resource_group", "") or g(request, "group", ""),
                resource_version=g(request, "resource_version", "") or g(request, "version", ""))


def request_for_object(obj: Mapping[str, Any], *, operation: str = "CREATE", old_object: Mapping | None = None,
                       registry: resources.Registry | None = None, user_info: Mapping | None = None) -> dict:
    """An AdmissionReview `request` mapping for `obj` as if it were being created (or updated/deleted): the plural
    comes from `registry` (default: the in-tree kinds, Volcano's included), else the lowercased kind + "s"."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group, _, version = api_version.rpartition("/")
    rt = (registry or _in_tree()).by_kind(api_version, kind)
    plural = rt.plural if rt else kind.lower() + "s"
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace", "") or ("" if rt is not None and not rt.namespaced else "default")
    is_delete = operation == "DELETE"
    return {"uid": "", "operation": operation, "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural}, "name": meta.get("name", ""),
            "namespace": namespace, "object": None if is_delete else dict(obj),
            "oldObject": dict(obj) if is_delete else (dict(old_object) if old_object else None),
            "userInfo": dict(user_info or {"username": "lahar-policy-test"}), "dryRun": True}


_REGISTRY: list[resources.Registry] = []


def _in_tree() -> resources.Registry:
    if not _REGISTRY:
        _REGISTRY.append(resources.in_tree())
    return _REGISTRY[0]
