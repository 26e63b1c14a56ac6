"""The rules of an update: what the status and finalize subresources may change, the system fields a client cannot
set, and what kube-apiserver refuses to change (finalizers of an object being deleted, a bound pod's node).

Pure functions over plain dicts, called by `kube.apiserver.store.Store` on every update, patch and apply.
"""

from __future__ import annotations

from lahar.kube.apiserver.objects import copy_obj, invalid, meta_of
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["prepare_update", "restore_system_fields", "validate_update"]


def prepare_update(rt: ResourceType, cur: Obj, body: Obj, subresource: str | None) -> Obj:
    """The object to store from the current one and the body: only `status` (status), only `spec.finalizers`
    (finalize), else the body with the current status kept when status is a subresource."""
    if subresource == "status":
        new = copy_obj(cur)
        if "status" in body:
            new["status"] = body["status"]
        else:
            new.pop("status", None)
    elif subresource == "finalize":
        new = copy_obj(cur)
        new.setdefault("spec", {})["finalizers"] = list((body.get("spec") or {}).get("finalizers") or [])
    else:
        new = body
        if "status" in rt.subresources:
            if "status" in cur:
                new["status"] = copy_obj(cur["status"])
            else:
                new.pop("status", None)
    restore_system_fields(rt, cur, new, subresource)
    return new


def restore_system_fields(rt: ResourceType, cur: Obj, new: Obj, subresource: str | None) -> None:
    """Put back what only the server sets (uid, timestamps, generation, name, namespace, resourceVersion) and the
    type's apiVersion and kind; managedFields are the caller's business."""
    meta, cmeta = meta_of(new), cur["metadata"]
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
              "namespace", "name", "resourceVersion"):
        if k in cmeta:
            meta[k] = cmeta[k]
        else:
            meta.pop(k, None)
    meta.pop("managedFields", None)
    new["apiVersion"], new["kind"] = cur.get("apiVersion", rt.api_version), rt.kind


def validate_update(rt: ResourceType, cur: Obj, new: Obj) -> None:
    """422 for what no update may do: add finalizers to an object being deleted, move a bound pod."""
    cmeta, meta = cur["metadata"], new["metadata"]
    if cmeta.get("deletionTimestamp"):
        added = [f for f in meta.get("finalizers") or [] if f not in (cmeta.get("finalizers") or [])]
        if added:
            listed = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
            raise invalid(rt, cmeta.get("name", ""), [(
                "FieldValueForbidden", "metadata.finalizers",
                f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers "
                f"{listed}")])
    if rt.group == "" and rt.plural == "pods":
        node = (cur.get("spec") or {}).get("nodeName")
        if node and (new.get("spec") or {}).get("nodeName") != node:
            raise invalid(rt, cmeta.get("name", ""), [(
                "FieldValueForbidden", "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to "
                "1 if it was previously negative)")])
