"""ResourceClaims from templates: the part of kube-controller-manager's resourceclaim controller devcluster needs.

A pod's `spec.resourceClaims` entry with `resourceClaimTemplateName` gets a ResourceClaim made from the template's
`spec` (owned by the pod, so it goes with it; annotated `resource.kubernetes.io/pod-claim-name`), and the pod's
`status.resourceClaimStatuses` names it; the scheduler's DRA filter (scheduler/plugins/_dra.py) reads it there.
Used by `controllers.WorkloadControllers`. The claim's name is `<pod>-<entry>`, not upstream's generated suffix,
so a retried pass finds the claim it made.

`released_status(claim, pods)`: the same controller's clean-up: pods that are gone or finished leave the claim's
`status.reservedFor`, and a claim nobody reserves any more is deallocated (its devices are free again) when it
carries the finalizer `resource.kubernetes.io/delete-protection` the scheduler adds before allocating, as the real
controller does; `release_claim` then takes the finalizer off. Without it the allocation stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLAIM_FINALIZER", "POD_CLAIM_NAME_ANNOTATION", "ClaimsPlan", "claim_names", "pending_templates", "released_status",
           "template_claims"]

Obj = Mapping[str, Any]
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


@dataclass
class ClaimsPlan:
    create: list[dict[str, Any]] = field(default_factory=list)          # claims to create
    statuses: list[dict[str, str]] | None = None                        # the pod's new resourceClaimStatuses
    waiting: list[str] = field(default_factory=list)                    # templates that do not exist (yet)


def pending_templates(pod: Obj) -> list[tuple[str, str]]:
    """(entry name, template name) of the pod's template claims that its status does not name yet."""
    done = {s.get("name") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
            if isinstance(s, Mapping) and s.get("resourceClaimName")}
    return [(str(e.get("name")), str(e["resourceClaimTemplateName"]))
            for e in (pod.get("spec") or {}).get("resourceClaims") or ()
            if isinstance(e, Mapping) and e.get("resourceClaimTemplateName") and e.get("name") not in done]


def template_claims(pod: Obj, templates: Mapping[str, Obj]) -> ClaimsPlan:
    """What to create for the pod's pending template claims, with the status that names them."""
    todo = pending_templates(pod)
    plan = ClaimsPlan()
    if not todo:
        return plan
    meta = pod.get("metadata") or {}
    statuses = [dict(s) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
                if isinstance(s, Mapping) and s.get("resourceClaimName")]
    for entry, template_name in todo:
        template = templates.get(template_name)
        if template is None:
            plan.waiting.append(template_name)
            continue
        name = f"{meta.get('name')}-{entry}"
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        plan.create.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": meta.get("namespace"),
                         "labels": dict(tmeta.get("labels") or {}),
                         "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: entry},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                                              "uid": meta.get("uid"), "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": dict((template.get("spec") or {}).get("spec") or {})})
        statuses.append({"name": entry, "resourceClaimName": name})
    if len(statuses) > len([s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()]):
        plan.statuses = statuses
    return plan


def claim_names(pod: Obj) -> list[str]:
    """The ResourceClaims a pod uses: by name, and those its status names for template entries."""
    out = [str(e["resourceClaimName"]) for e in (pod.get("spec") or {}).get("resourceClaims") or ()
           if isinstance(e, Mapping) and e.get("resourceClaimName")]
    out += [str(s["resourceClaimName"]) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
            if isinstance(s, Mapping) and s.get("resourceClaimName")]
    return out


CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"  # scheduler.commit's, written before an allocation


def released_status(claim: Obj, pods: Mapping[str, Obj]) -> dict[str, Any] | None:
    """The claim's status without the pods (by name in its namespace) that are gone, finished or replaced (another
    uid), deallocated once no pod reserves it if it carries CLAIM_FINALIZER; None when nothing changes."""
    status = dict(claim.get("status") or {})
    reserved = list(status.get("reservedFor") or ())
    if not reserved:
        return None

    def live(ref: Mapping[str, Any]) -> bool:
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return True  # not a pod: someone else's reservation
        pod = pods.get(str(ref.get("name")))
        if pod is None:
            return False
        uid = (pod.get("metadata") or {}).get("uid")
        phase = (pod.get("status") or {}).get("phase")
        return not (ref.get("uid") and uid and ref["uid"] != uid) and phase not in ("Succeeded", "Failed")

    kept = [r for r in reserved if isinstance(r, Mapping) and live(r)]
    if len(kept) == len(reserved):
        return None
    if kept:
        status["reservedFor"] = kept
    else:
        status.pop("reservedFor", None)
        if CLAIM_FINALIZER in ((claim.get("metadata") or {}).get("finalizers") or ()):
            status.pop("allocation", None)
    return status
