"""devcluster's simulated volume provisioner and PV binder: what kube-controller-manager's PV controller and a CSI
external-provisioner do for PersistentVolumeClaims on a single-machine cluster.

`claim_plan(pvc, classes=..., pvs=..., nodes=...)` is pure: the writes that move one claim on (a PV to create, the
claim's `spec.volumeName` and `status`, the PV's `claimRef` and `status`). Rules, as the real controllers:
- a PV whose `claimRef` names the claim (the scheduler chose a static PV, or a PV pre-bound by the user), or the
  claim's own `spec.volumeName`: bind the two (claim and PV `Bound`);
- an `Immediate` StorageClass (the default mode): the smallest Available static PV of the class that fits, else a
  new PV from the class's provisioner;
- a `WaitForFirstConsumer` StorageClass: nothing until the scheduler writes `volume.kubernetes.io/selected-node`;
  then a static PV whose nodeAffinity admits that node, else a new PV with node affinity for the node's hostname
  and its zone/region labels.
A class whose provisioner is `kubernetes.io/no-provisioner` only binds static PVs. `WorkloadControllers` runs the
plans (kind `PersistentVolumeClaim`) from its PVC and PV watches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lahar.devcluster.workloads._objects import _meta, _spec, _status
from lahar.kube import quantity
from lahar.kube.client import Obj

__all__ = ["NO_PROVISIONER", "SELECTED_NODE_ANNOTATION", "VolumePlan", "claim_plan"]

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
PROVISIONER_ANNOTATION = "volume.kubernetes.io/storage-provisioner"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


@dataclass
class VolumePlan:
    """One pass's writes for a claim: `create_pv` first, then `pv_patch` (name, merge patch incl. status),
    `claim_patch` (merge patch of metadata/spec) and `claim_status`."""

    create_pv: Obj | None = None
    pv_patch: tuple[str, Obj] | None = None
    claim_patch: Obj = field(default_factory=dict)
    claim_status: Obj | None = None
    reason: str = ""  # why nothing happens (waiting for a consumer, no PV and no provisioner)


def _qty(raw: Any) -> Any:
    try:
        return quantity.parse(raw if raw is not None else "0")
    except (TypeError, ValueError):
        return quantity.parse("0")


def _refers_to(pv: Obj, pvc: Obj) -> bool:
    ref = _spec(pv).get("claimRef") or {}
    m = _meta(pvc)
    if ref.get("name") != m.get("name") or ref.get("namespace") != m.get("namespace"):
        return False
    return not ref.get("uid") or not m.get("uid") or ref.get("uid") == m.get("uid")


def _labels_match(terms: list[Any], node: Obj) -> bool:
    """NodeSelectorTerms (In / NotIn / Exists / DoesNotExist on labels, matchFields metadata.name) against a node."""
    labels = _meta(node).get("labels") or {}
    for term in terms:
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            continue
        ok = True
        for e in exprs:
            op, have, values = e.get("operator"), labels.get(e.get("key", "")), e.get("values") or []
            ok = ok and {"In": have in values, "NotIn": have not in values, "Exists": have is not None,
                         "DoesNotExist": have is None}.get(str(op), False)
        for f in fields:
            have = _meta(node).get("name") if f.get("key") == "metadata.name" else None
            ok = ok and ((have in (f.get("values") or [])) == (f.get("operator") == "In"))
        if ok:
            return True
    return False


def _fits(pv: Obj, pvc: Obj, class_name: str, node: Obj | None) -> bool:
    spec = _spec(pv)
    if spec.get("claimRef") or _status(pv).get("phase") not in (None, "Available"):
        return False
    if (spec.get("storageClassName") or "") != class_name:
        return False
    want = ((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage")
    if _qty((spec.get("capacity") or {}).get("storage")) < _qty(want):
        return False
    if not set(_spec(pvc).get("accessModes") or ()) <= set(spec.get("accessModes") or ()):
        return False
    terms = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    return node is None or terms is None or _labels_match(list(terms), node)


def _bind(pv: Obj, pvc: Obj, *, provisioned: bool = False) -> VolumePlan:
    m = _meta(pvc)
    pv_name = str(_meta(pv).get("name"))
    ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": m.get("namespace"),
           "name": m.get("name")}
    if m.get("uid"):
        ref["uid"] = m.get("uid")
    spec = _spec(pv)
    status = {"phase": "Bound", "accessModes": list(spec.get("accessModes") or _spec(pvc).get("accessModes") or []),
              "capacity": dict(spec.get("capacity") or {})}
    annotations = {BIND_COMPLETED: "yes"}
    if not provisioned and not _spec(pvc).get("volumeName"):
        annotations[BOUND_BY_CONTROLLER] = "yes"
    return VolumePlan(pv_patch=(pv_name, {"spec": {"claimRef": ref}, "status": {"phase": "Bound"}}),
                      claim_patch={"metadata": {"annotations": annotations}, "spec": {"volumeName": pv_name}},
                      claim_status=status)


def _new_pv(pvc: Obj, sc: Obj, node: Obj | None) -> Obj:
    m = _meta(pvc)
    name = f"pvc-{m.get('uid') or m.get('namespace', '') + '-' + m.get('name', '')}"
    storage = ((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage") or "1Gi"
    spec: dict[str, Any] = {
        "capacity": {"storage": storage},
        "accessModes": list(_spec(pvc).get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": _meta(sc).get("name"),
        "volumeMode": _spec(pvc).get("volumeMode") or "Filesystem",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": m.get("namespace"),
                     "name": m.get("name"), **({"uid": m["uid"]} if m.get("uid") else {})},
        "hostPath": {"path": f"/var/lib/lahar/volumes/{name}"},
    }
    labels: dict[str, str] = {}
    if node is not None:
        node_labels = _meta(node).get("labels") or {}
        exprs = [{"key": "kubernetes.io/hostname", "operator": "In",
                  "values": [node_labels.get("kubernetes.io/hostname") or _meta(node).get("name")]}]
        for key in _TOPOLOGY_LABELS:
            if node_labels.get(key):
                exprs.append({"key": key, "operator": "In", "values": [node_labels[key]]})
                labels[key] = node_labels[key]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    meta: dict[str, Any] = {"name": name, "annotations": {PROVISIONED_BY: str(sc.get("provisioner") or "")},
                            "finalizers": ["kubernetes.io/pv-protection"]}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": "Available"}}


def claim_plan(pvc: Obj, *, classes: Mapping[str, Obj], pvs: Mapping[str, Obj],
               nodes: Mapping[str, Obj]) -> VolumePlan:
    """The next writes for one claim (see the module docstring); an empty plan when it is Bound or must wait,
    except that a claim without a phase gets `Pending` (what kube-apiserver sets on create)."""
    plan = _claim_plan(pvc, classes=classes, pvs=pvs, nodes=nodes)
    if plan.claim_status is None and not _status(pvc).get("phase") and not _meta(pvc).get("deletionTimestamp"):
        plan.claim_status = {"phase": "Pending"}
    return plan


def _claim_plan(pvc: Obj, *, classes: Mapping[str, Obj], pvs: Mapping[str, Obj],
                nodes: Mapping[str, Obj]) -> VolumePlan:
    if _meta(pvc).get("deletionTimestamp"):
        return VolumePlan(reason="claim is being deleted")
    volume = _spec(pvc).get("volumeName")
    if volume:
        pv = pvs.get(volume)
        if pv is None:
            return VolumePlan(reason=f"volume {volume} not found") if _status(pvc).get("phase") != "Bound" \
                else VolumePlan(reason="")
        if _status(pvc).get("phase") == "Bound" and _refers_to(pv, pvc) and _status(pv).get("phase") == "Bound":
            return VolumePlan()
        return _bind(pv, pvc)
    for pv in sorted(pvs.values(), key=lambda p: str(_meta(p).get("name"))):
        if _refers_to(pv, pvc):
            return _bind(pv, pvc, provisioned=bool((_meta(pv).get("annotations") or {}).get(PROVISIONED_BY)))
    class_name = _spec(pvc).get("storageClassName") or ""
    sc = classes.get(class_name)
    if sc is None:
        return VolumePlan(reason=f'storageclass.storage.k8s.io "{class_name}" not found')
    node: Obj | None = None
    if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
        selected = (_meta(pvc).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
        if not selected:
            return VolumePlan(reason="waiting for first consumer to be created before binding")
        node = nodes.get(selected)
        if node is None:
            return VolumePlan(reason=f"selected node {selected} not found")
    fits = [pv for pv in pvs.values() if _fits(pv, pvc, class_name, node)]
    if fits:
        best = min(fits, key=lambda p: (_qty((_spec(p).get("capacity") or {}).get("storage")),
                                        str(_meta(p).get("name"))))
        return _bind(best, pvc)
    if not sc.get("provisioner") or sc.get("provisioner") == NO_PROVISIONER:
        return VolumePlan(reason="no persistent volumes available for this claim and no storage class is set")
    pv = _new_pv(pvc, sc, node)
    plan = _bind(pv, pvc, provisioned=True)
    plan.create_pv = pv
    plan.claim_patch["metadata"]["annotations"][PROVISIONER_ANNOTATION] = str(sc.get("provisioner"))
    return plan
