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
    "ZONE_LABELS",
    "ZONE_CONFLICT",
    "ClaimAnswer",
    "ClaimState",
    "PVIndex",
    "VolumeAction",
    "claim_on_node",
    "claim_state",
    "csi_driver_of",
    "pod_claims",
    "pod_on_node",
    "pv_matches_node",
    "topology_ok",
    "zone_ok",
]

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
ZONE_CONFLICT = "node(s) had no available volume zone"
IMMEDIATE_UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
ZONE_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
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


def zone_ok(pv: Obj, node: Any) -> bool:
    """VolumeZone: each zone/region label on the PV (a `__`-joined set) must hold the node's value of that label."""
    for key in ZONE_LABELS:
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


def topology_ok(sc: Obj, node: Any) -> bool:
    """A StorageClass's allowedTopologies (terms ORed, label values per key) admit the node; none: every node."""
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or []
        if exprs and all(node.labels.get(e.get("key", "")) in (e.get("values") or ()) for e in exprs):
            return True
    return False


class PVIndex:
    """The PVs of a session arranged for claim matching: free PVs (no claimRef, not released) by class, PVs
    pre-bound by claimRef by claim, and a memo of the sorted candidates per (class, request, access modes)."""

    def __init__(self, pvs: Mapping[str, Obj]) -> None:
        self.free: dict[str, list[tuple[Any, frozenset[str], str, Obj]]] = {}
        self.by_ref: dict[str, list[Obj]] = {}
        self.memo: dict[tuple[str, str, frozenset[str]], tuple[Obj, ...]] = {}
        for pv in pvs.values():
            spec = _spec(pv)
            if _meta(pv).get("deletionTimestamp") or (pv.get("status") or {}).get("phase") in ("Released", "Failed"):
                continue
            ref = spec.get("claimRef") or {}
            if ref:
                self.by_ref.setdefault(f"{ref.get('namespace')}/{ref.get('name')}", []).append(pv)
                continue
            try:
                cap = quantity.parse((spec.get("capacity") or {}).get("storage"))
            except (ValueError, TypeError):
                continue
            self.free.setdefault(spec.get("storageClassName") or "", []).append(
                (cap, frozenset(spec.get("accessModes") or ()), str(_meta(pv).get("name", "")), pv))

    def candidates(self, claim: Obj, sc_name: str) -> tuple[Obj, ...]:
        """Free PVs of the class that fit the claim, smallest first (the PV controller's FindMatchingVolume order),
        after the PVs whose claimRef already names the claim."""
        want = _request(claim)
        modes = frozenset(_spec(claim).get("accessModes") or ())
        key = (sc_name, str(want), modes)
        base = self.memo.get(key)
        if base is None:
            fits = sorted((e for e in self.free.get(sc_name, ()) if not e[0] < want and modes <= e[1]),
                          key=lambda e: (e[0], e[2]))
            base = self.memo[key] = tuple(e[3] for e in fits)
        mine = [pv for pv in self.by_ref.get(f"{_meta(claim).get('namespace')}/{_meta(claim).get('name')}", ())
                if _static_candidate(pv, claim, sc_name)]
        return (*mine, *base) if mine else base


@dataclass(frozen=True, slots=True)
class ClaimState:
    """What of a claim's answer does not depend on the node: a failure everywhere (`reason`), the PV it is bound
    to, or — delayed binding — the free static PVs of its class (smallest first) and whether its class provisions."""

    reason: str = ""
    unresolvable: bool = False
    bound: Obj | None = None
    candidates: tuple[Obj, ...] = ()
    provision: Obj | None = None  # the StorageClass, when a new PV may be provisioned for the claim


def claim_state(claim: Obj | None, *, name: str, namespace: str, pvs: Mapping[str, Obj],
                classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                index: PVIndex | None = None) -> ClaimState:
    """The node-independent part of VolumeBinding's filter for one claim (`claim_on_node` adds the node's part).

    `taken`: PV name → "namespace/claim" of static PVs assumed by other claims earlier in this session."""
    if claim is None:
        return ClaimState(f'persistentvolumeclaim "{name}" not found', True)
    if _meta(claim).get("deletionTimestamp"):
        return ClaimState(f'persistentvolumeclaim "{name}" is being deleted', True)
    volume = _spec(claim).get("volumeName")
    sc_name = _spec(claim).get("storageClassName") or ""
    if volume:
        pv = pvs.get(volume)
        if pv is None:
            return ClaimState("pvc(s) bound to non-existent pv(s)", True)
        return ClaimState(bound=pv)
    sc = classes.get(sc_name)
    if sc is None:
        return ClaimState(f'storageclass.storage.k8s.io "{sc_name}" not found', True)
    if sc.get("volumeBindingMode") != "WaitForFirstConsumer":
        return ClaimState(IMMEDIATE_UNBOUND, True)
    me = f"{namespace}/{name}"
    taken = taken or {}
    every = (index if index is not None else PVIndex(pvs)).candidates(claim, sc_name)
    candidates = [pv for pv in every if taken.get(_meta(pv).get("name", ""), me) == me] if taken else every
    provisionable = bool(sc.get("provisioner")) and sc.get("provisioner") != NO_PROVISIONER
    return ClaimState(candidates=tuple(candidates), provision=sc if provisionable else None)


def claim_on_node(claim: Obj | None, node: Any, *, name: str, namespace: str, pvs: Mapping[str, Obj],
                  classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                  zones: bool = True, index: PVIndex | None = None) -> ClaimAnswer:
    """One claim on one node, as kube-scheduler's VolumeBinding (+ VolumeZone unless `zones` is off) decides it."""
    st = claim_state(claim, name=name, namespace=namespace, pvs=pvs, classes=classes, taken=taken, index=index)
    if st.reason:
        return ClaimAnswer(False, st.reason, st.unresolvable)
    if st.bound is not None:
        if not pv_matches_node(st.bound, node):
            return ClaimAnswer(False, NODE_CONFLICT, True)
        if zones and not zone_ok(st.bound, node):
            return ClaimAnswer(False, ZONE_CONFLICT, True)
        return ClaimAnswer(True, driver=csi_driver_of(st.bound, None))
    for pv in st.candidates:
        if pv_matches_node(pv, node) and (not zones or zone_ok(pv, node)):
            pv_name = str(_meta(pv).get("name"))
            return ClaimAnswer(True, action=VolumeAction(namespace, name, "bind", pv_name, node.name),
                               driver=csi_driver_of(pv, None))
    if st.provision is not None and topology_ok(st.provision, node):
        return ClaimAnswer(True, action=VolumeAction(namespace, name, "provision", "", node.name),
                           driver=csi_driver_of(None, st.provision))
    return ClaimAnswer(False, NODE_CONFLICT if st.candidates else BIND_CONFLICT)


def pod_on_node(pod: Obj, node: Any, *, claims: Mapping[str, Obj], pvs: Mapping[str, Obj],
                classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                csi_limits: Mapping[str, int] | None = None,
                attached: Mapping[str, set[str]] | None = None,
                zones: bool = True, index: PVIndex | None = None) -> tuple[ClaimAnswer, list[VolumeAction]]:
    """Every claim of `pod` on `node` (the first failure answers), then NodeVolumeLimits: per CSI driver, the
    distinct claims already attached on the node (`attached`: driver → claim keys) plus the pod's new ones must
    not exceed the node's CSINode `allocatable.count` (`csi_limits`: driver → count; absent = no limit)."""
    ns = _meta(pod).get("namespace") or "default"
    actions: list[VolumeAction] = []
    new_by_driver: dict[str, set[str]] = {}
    for name in pod_claims(pod):
        got = claim_on_node(claims.get(f"{ns}/{name}"), node, name=name, namespace=ns, pvs=pvs, classes=classes,
                            taken=taken, zones=zones, index=index)
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
