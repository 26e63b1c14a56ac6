"""Volume predicates of the predicates plugin: kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits
(CSI) filters as pure functions over PVC, PV, StorageClass and CSINode dicts and one snapshot node.

`claim_on_node` answers for one claim on one node: fits or not, the reason in kube-scheduler's words, and what
binding at commit must do (bind a static PV, or ask for provisioning on the node). `pod_on_node` combines a pod's
claims, with static PVs already taken this session (`taken`), and the CSI attach limits. The plugin shell
(`plugins.predicates`) turns these into node masks and records the actions for `scheduler.commit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import quantity
from lahar.scheduler.plugins._shared.nodematch import match_node_selector_terms

__all__ = [
    "BIND_CONFLICT",
    "IMMEDIATE_UNBOUND",
    "NODE_CONFLICT",
    "NO_PROVISIONER",
    "SELECTED_NODE_ANNOTATION",
    "VOLUME_COUNT_EXCEEDED",
    "ZONE_CONFLICT",
    "ClaimAnswer",
    "VolumeAction",
    "claim_on_node",
    "csi_driver_of",
    "pod_claims",
    "pod_on_node",
    "pv_matches_node",
]

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
ZONE_CONFLICT = "node(s) had no available volume zone"
IMMEDIATE_UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
_ZONE_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class VolumeAction:
    """What commit does for one unbound claim before the pod's bind: `bind` a static PV (its claimRef), or
    `provision` (the selected-node annotation on the claim, for the provisioner)."""

    namespace: str
    claim: str
    kind: str  # "bind" | "provision"
    volume: str = ""  # the PV for "bind"
    node: str = ""


@dataclass(frozen=True, slots=True)
class ClaimAnswer:
    ok: bool
    reason: str = ""
    unresolvable: bool = False
    action: VolumeAction | None = None
    driver: str = ""  # the CSI driver the claim's volume attaches with ("" = not counted)


def _meta(o: Obj) -> Obj:
    return o.get("metadata") or {}


def _spec(o: Obj) -> Obj:
    return o.get("spec") or {}


def pod_claims(pod: Obj) -> list[str]:
    """The PVC names a pod's volumes name (persistentVolumeClaim.claimName), in order, without repeats."""
    out: list[str] = []
    for v in _spec(pod).get("volumes") or ():
        name = ((v or {}).get("persistentVolumeClaim") or {}).get("claimName")
        if name and name not in out:
            out.append(str(name))
    return out


def _zone_ok(pv: Obj, node: Any) -> bool:
    """VolumeZone: each zone/region label on the PV (a `__`-joined set) must hold the node's value of that label."""
    for key in _ZONE_LABELS:
        want = (_meta(pv).get("labels") or {}).get(key)
        if want is None:
            continue
        have = node.labels.get(key)
        if have is None or have not in str(want).split("__"):
            return False
    return True


def pv_matches_node(pv: Obj, node: Any) -> bool:
    """A PV's spec.nodeAffinity.required terms match the node (no affinity: every node)."""
    required = ((_spec(pv).get("nodeAffinity") or {}).get("required") or {})
    terms = required.get("nodeSelectorTerms")
    if not required or terms is None:
        return True
    return match_node_selector_terms(list(terms), node)


def csi_driver_of(pv: Obj | None, sc: Obj | None) -> str:
    if pv is not None:
        return str((_spec(pv).get("csi") or {}).get("driver") or "")
    return str((sc or {}).get("provisioner") or "") if sc is not None else ""


def _request(claim: Obj) -> Any:
    raw = ((_spec(claim).get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return quantity.parse(raw) if raw is not None else quantity.parse("0")
    except (ValueError, TypeError):
        return quantity.parse("0")


def _static_candidate(pv: Obj, claim: Obj, sc_name: str) -> bool:
    """A PV free for this claim: no claimRef (or one to this claim), not being deleted, same class, big enough,
    the claim's access modes offered."""
    spec = _spec(pv)
    ref = spec.get("claimRef") or {}
    cm = _meta(claim)
    if ref and (ref.get("name") != cm.get("name") or ref.get("namespace") != cm.get("namespace")):
        return False
    if _meta(pv).get("deletionTimestamp") or (pv.get("status") or {}).get("phase") in ("Released", "Failed"):
        return False
    if (spec.get("storageClassName") or "") != sc_name:
        return False
    cap = (spec.get("capacity") or {}).get("storage")
    try:
        if cap is None or quantity.parse(cap) < _request(claim):
            return False
    except (ValueError, TypeError):
        return False
    modes = set(spec.get("accessModes") or ())
    return set(_spec(claim).get("accessModes") or ()) <= modes


def _topology_ok(sc: Obj, node: Any) -> bool:
    """A StorageClass's allowedTopologies (terms ORed, label values per key) admit the node; none: every node."""
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or []
        if exprs and all(node.labels.get(e.get("key", "")) in (e.get("values") or ()) for e in exprs):
            return True
    return False


def claim_on_node(claim: Obj | None, node: Any, *, name: str, namespace: str, pvs: Mapping[str, Obj],
                  classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                  zones: bool = True) -> ClaimAnswer:
    """One claim on one node, as kube-scheduler's VolumeBinding (+ VolumeZone unless `zones` is off) decides it.

    `taken`: PV name → "namespace/claim" of static PVs assumed by other claims earlier in this session."""
    if claim is None:
        return ClaimAnswer(False, f'persistentvolumeclaim "{name}" not found', True)
    if _meta(claim).get("deletionTimestamp"):
        return ClaimAnswer(False, f'persistentvolumeclaim "{name}" is being deleted', True)
    volume = _spec(claim).get("volumeName")
    sc_name = _spec(claim).get("storageClassName") or ""
    sc = classes.get(sc_name)
    if volume:
        pv = pvs.get(volume)
        if pv is None:
            return ClaimAnswer(False, "pvc(s) bound to non-existent pv(s)", True)
        if not pv_matches_node(pv, node):
            return ClaimAnswer(False, NODE_CONFLICT, True)
        if zones and not _zone_ok(pv, node):
            return ClaimAnswer(False, ZONE_CONFLICT, True)
        return ClaimAnswer(True, driver=csi_driver_of(pv, None))
    if sc is None:
        return ClaimAnswer(False, f'storageclass.storage.k8s.io "{sc_name}" not found', True)
    if sc.get("volumeBindingMode") != "WaitForFirstConsumer":
        return ClaimAnswer(False, IMMEDIATE_UNBOUND, True)
    me = f"{namespace}/{name}"
    taken = taken or {}
    candidates = sorted((pv for pv in pvs.values() if _static_candidate(pv, claim, sc_name)
                         and taken.get(_meta(pv).get("name", ""), me) == me),
                        key=lambda pv: (quantity.parse((_spec(pv).get("capacity") or {}).get("storage")),
                                        _meta(pv).get("name", "")))
    for pv in candidates:  # the smallest PV that fits, as the PV controller's FindMatchingVolume
        if pv_matches_node(pv, node) and (not zones or _zone_ok(pv, node)):
            pv_name = str(_meta(pv).get("name"))
            return ClaimAnswer(True, action=VolumeAction(namespace, name, "bind", pv_name, node.name),
                               driver=csi_driver_of(pv, None))
    if sc.get("provisioner") and sc.get("provisioner") != NO_PROVISIONER and _topology_ok(sc, node):
        return ClaimAnswer(True, action=VolumeAction(namespace, name, "provision", "", node.name),
                           driver=csi_driver_of(None, sc))
    return ClaimAnswer(False, NODE_CONFLICT if candidates else BIND_CONFLICT)


def pod_on_node(pod: Obj, node: Any, *, claims: Mapping[str, Obj], pvs: Mapping[str, Obj],
                classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                csi_limits: Mapping[str, int] | None = None,
                attached: Mapping[str, set[str]] | None = None,
                zones: bool = True) -> tuple[ClaimAnswer, list[VolumeAction]]:
    """Every claim of `pod` on `node` (the first failure answers), then NodeVolumeLimits: per CSI driver, the
    distinct claims already attached on the node (`attached`: driver → claim keys) plus the pod's new ones must
    not exceed the node's CSINode `allocatable.count` (`csi_limits`: driver → count; absent = no limit)."""
    ns = _meta(pod).get("namespace") or "default"
    actions: list[VolumeAction] = []
    new_by_driver: dict[str, set[str]] = {}
    for name in pod_claims(pod):
        got = claim_on_node(claims.get(f"{ns}/{name}"), node, name=name, namespace=ns, pvs=pvs, classes=classes,
                            taken=taken, zones=zones)
        if not got.ok:
            return got, []
        if got.action is not None:
            actions.append(got.action)
        if got.driver:
            new_by_driver.setdefault(got.driver, set()).add(f"{ns}/{name}")
    for driver, keys in new_by_driver.items():
        limit = (csi_limits or {}).get(driver)
        if limit is None:
            continue
        have = set((attached or {}).get(driver) or ())
        if len(have | keys) > limit:
            return ClaimAnswer(False, VOLUME_COUNT_EXCEEDED), []
    return ClaimAnswer(True), actions
