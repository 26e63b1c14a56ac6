"""Volume predicates of the predicates plugin: kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits
(CSI) filters and VolumeBinding's score as pure functions over PVC, PV, StorageClass, CSINode, CSIDriver and
CSIStorageCapacity dicts and one snapshot node.

`claim_on_node` answers for one claim on one node: fits or not, the reason in kube-scheduler's words, and what
binding at commit must do (bind a static PV, or ask for provisioning on the node — where the claim's CSI driver
tracks storage capacity, only if a CSIStorageCapacity of its class reachable from the node has room,
`enough_capacity`). `pod_on_node` combines a pod's claims, with static PVs already taken this session (`taken`),
and the CSI attach limits. `volume_score` is VolumeBinding's Score over what `pod_on_node` chose on a node
(`parse_shape` reads its utilization → score shape). The plugin shell (`plugins.predicates`) turns these into node
masks and scores and records the actions for `scheduler.commit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import fielderrors, quantity, selectors
from lahar.scheduler.framework.conf import ConfError
from lahar.scheduler.plugins._shared.nodematch import match_node_selector_terms

__all__ = [
    "BIND_CONFLICT",
    "DEFAULT_SHAPE",
    "IMMEDIATE_UNBOUND",
    "NODE_CONFLICT",
    "NOT_ENOUGH_SPACE",
    "NO_PROVISIONER",
    "SELECTED_NODE_ANNOTATION",
    "VOLUME_COUNT_EXCEEDED",
    "ZONE_LABELS",
    "ZONE_CONFLICT",
    "ClaimAnswer",
    "ClaimState",
    "PVIndex",
    "ShapeError",
    "StorageCapacities",
    "StorageCapacity",
    "VolumeAction",
    "broken_linear",
    "claim_on_node",
    "claim_request",
    "claim_state",
    "class_resources",
    "csi_driver_of",
    "enough_capacity",
    "parse_shape",
    "pod_claims",
    "pod_on_node",
    "pv_capacity",
    "pv_matches_node",
    "storage_score",
    "topology_ok",
    "volume_score",
    "zone_ok",
]

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
ZONE_CONFLICT = "node(s) had no available volume zone"
IMMEDIATE_UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
# kube-scheduler's default VolumeBindingArgs.shape under the StorageCapacityScoring gate (v1.33+, and Volcano's):
# (utilization %, score 0..10) — an empty node's pool scores highest
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))
MAX_CUSTOM_PRIORITY_SCORE = 10  # a shape point's score ceiling; scaled ×10 onto the 0..100 node score
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
    # what VolumeBinding's Score reads: the claim's class and request, and the chosen PV's capacity ("bind") or
    # the CSIStorageCapacity the provisioning was checked against (`capacity_key`, "provision"; "" = not tracked)
    storage_class: str = ""
    requested: int = 0
    capacity: int = 0
    capacity_key: str = ""


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


def _bytes(raw: Any) -> int | None:
    """A storage quantity in bytes (Quantity.Value()), None when absent or not a quantity."""
    if raw is None:
        return None
    try:
        return quantity.parse(raw).value()
    except (ValueError, TypeError):
        return None


def pv_capacity(pv: Obj) -> int:
    """A PV's `capacity.storage` in bytes (0 when absent or not a quantity)."""
    return _bytes((_spec(pv).get("capacity") or {}).get("storage")) or 0


def claim_request(claim: Obj) -> int | None:
    """The claim's `resources.requests.storage` in bytes; None when it asks for none (nothing to check)."""
    return _bytes(((_spec(claim).get("resources") or {}).get("requests") or {}).get("storage"))


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


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """One CSIStorageCapacity (storage.k8s.io/v1): what a driver can still provision for a class, from the nodes
    its `nodeTopology` selects (a nil selector: no node; `topology` None)."""

    key: str  # namespace/name
    storage_class: str
    topology: selectors.LabelSelector | None
    capacity: int | None  # bytes
    maximum_volume_size: int | None  # bytes

    @property
    def limit(self) -> int | None:
        """kube-scheduler's volumeLimit: maximumVolumeSize when set (the more precise), else capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity

    def reaches(self, node: Any) -> bool:
        """nodeHasAccess: the node's labels match nodeTopology (nil, or a selector that does not parse: no)."""
        return self.topology is not None and self.topology.matches(node.labels)

    def fits(self, size: int, reserved: int = 0) -> bool:
        """capacitySufficient: `limit` ≥ size. `reserved` is what claims placed earlier in this session were checked
        against it for; when there is any, `capacity − reserved` must hold the size too (kube-scheduler places one
        pod at a time and waits for the driver to publish a smaller capacity)."""
        limit = self.limit
        if limit is None or limit < size:
            return False
        return not reserved or self.capacity is None or self.capacity - reserved >= size


def _capacity_of(key: str, o: Obj) -> StorageCapacity:
    raw = o.get("nodeTopology")
    topology: selectors.LabelSelector | None = None
    if isinstance(raw, Mapping):
        try:
            topology = selectors.from_label_selector(raw)
        except (selectors.SelectorError, TypeError, AttributeError):
            topology = None
    return StorageCapacity(key, str(o.get("storageClassName") or ""), topology, _bytes(o.get("capacity")),
                           _bytes(o.get("maximumVolumeSize")))


class StorageCapacities:
    """The CSIDrivers and CSIStorageCapacities of a session: which drivers opt into capacity tracking
    (`spec.storageCapacity: true`), and the capacities of each StorageClass in key order (kube-scheduler walks its
    lister, whose order is unspecified; lahar takes the first by namespace/name, so a choice is reproducible)."""

    def __init__(self, capacities: Mapping[str, Obj] | None = None, drivers: Mapping[str, Obj] | None = None) -> None:
        self.tracking = frozenset(name for name, d in (drivers or {}).items()
                                  if _spec(d).get("storageCapacity") is True)
        by_class: dict[str, list[StorageCapacity]] = {}
        for key in sorted(capacities or {}):
            cap = _capacity_of(key, (capacities or {})[key])
            by_class.setdefault(cap.storage_class, []).append(cap)
        self.by_class = {name: tuple(caps) for name, caps in by_class.items()}

    def tracked(self, provisioner: str) -> bool:
        return provisioner in self.tracking

    def of_class(self, name: str) -> tuple[StorageCapacity, ...]:
        return self.by_class.get(name, ())


def enough_capacity(claim: Obj, sc: Obj, node: Any, *, storage: StorageCapacities | None,
                    reserved: Mapping[str, int] | None = None) -> tuple[bool, StorageCapacity | None]:
    """kube-scheduler's hasEnoughCapacity for a claim to provision with `sc` on `node`: (room, the
    CSIStorageCapacity that has it). A claim without a storage request, a provisioner with no CSIDriver object or
    one with `storageCapacity` unset or false is not checked: (True, None). Otherwise the first capacity of the
    class that reaches the node and fits the request wins; none: (False, None). `reserved`: capacity key → bytes
    already checked against it this session (`StorageCapacity.fits`)."""
    size = claim_request(claim)
    if size is None or storage is None or not storage.tracked(str(sc.get("provisioner") or "")):
        return True, None
    name = str(_meta(sc).get("name") or "")
    for cap in storage.of_class(name):
        if cap.fits(size, (reserved or {}).get(cap.key, 0)) and cap.reaches(node):
            return True, cap
    return False, None


class ShapeError(ConfError):
    """A `volumebinding.shape` that cannot be used; the message names the point and field."""


def parse_shape(raw: Any, *, path: str = "volumebinding.shape") -> tuple[tuple[int, int], ...]:
    """VolumeBindingArgs.shape: a list of {utilization, score}, utilization strictly increasing in 0..100 and
    score in 0..10 (kube-scheduler's validateFunctionShape, with its messages). None: `DEFAULT_SHAPE`."""
    if raw is None:
        return DEFAULT_SHAPE
    if not isinstance(raw, list | tuple) or not raw:
        raise ShapeError(str(fielderrors.required(path, "at least one point must be specified")))
    points: list[tuple[int, int]] = []
    for i, point in enumerate(raw):
        if not isinstance(point, Mapping):
            raise ShapeError(str(fielderrors.invalid(f"{path}[{i}]", point,
                                                     "must be a mapping with utilization and score")))
        values = []
        for field in ("utilization", "score"):
            v = point.get(field, 0)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ShapeError(str(fielderrors.invalid(f"{path}[{i}].{field}", v, "must be an integer")))
            values.append(v)
        unknown = sorted(set(point) - {"utilization", "score"})
        if unknown:
            raise ShapeError(f"{path}[{i}]: unknown field {unknown[0]!r}")
        points.append((values[0], values[1]))
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            raise ShapeError(str(fielderrors.invalid(f"{path}[{i}].utilization", points[i][0],
                                                     "values must be sorted in increasing order")))
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= 100:
            raise ShapeError(str(fielderrors.invalid(f"{path}[{i}].utilization", utilization,
                                                     "not in valid range [0, 100]")))
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ShapeError(str(fielderrors.invalid(f"{path}[{i}].score", score,
                                                     f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")))
    return tuple(points)


def _go_quo(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: tuple[tuple[int, int], ...], p: int) -> int:
    """helper.BuildBrokenLinearFunction: the shape's scores (already scaled to 0..100) interpolated at
    utilization `p`, flat before the first point and after the last, in Go's integer arithmetic."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + _go_quo((score - s0) * (p - u0), utilization - u0)
    return shape[-1][1]


def storage_score(resources: Mapping[str, tuple[int, int]], shape: tuple[tuple[int, int], ...]) -> int:
    """VolumeBinding's volumeCapacityScorer: per StorageClass (requested, capacity) in bytes → the shape at
    utilization ⌊requested · 100 / capacity⌋ (100 when capacity is 0 or exceeded), averaged over the classes with
    equal weights and rounded half away from zero; no class: 0. `shape` is (utilization, 0..10) points."""
    if not resources:
        return 0
    scaled = tuple((u, s * (100 // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape)
    total = 0
    for requested, capacity in resources.values():
        utilization = 100 if capacity == 0 or requested > capacity else requested * 100 // capacity
        total += broken_linear(scaled, utilization)
    return math.floor(total / len(resources) + 0.5)


def class_resources(actions: list[VolumeAction] | tuple[VolumeAction, ...]) -> dict[str, tuple[int, int]]:
    """What VolumeBinding's Score weighs for a pod on a node, by StorageClass: the static PVs chosen (requested and
    PV capacity summed); only when there are none, the claims to provision against a CSIStorageCapacity
    (requested summed, the capacity's `capacity` taken once — two claims on one pool do not double it)."""
    out: dict[str, tuple[int, int]] = {}
    binds = [a for a in actions if a.kind == "bind"]
    if binds:
        for a in binds:
            requested, capacity = out.get(a.storage_class, (0, 0))
            out[a.storage_class] = (requested + a.requested, capacity + a.capacity)
        return out
    for a in actions:
        if a.kind == "provision" and a.capacity_key:
            requested, _ = out.get(a.storage_class, (0, 0))
            out[a.storage_class] = (requested + a.requested, a.capacity)
    return out


def volume_score(actions: list[VolumeAction] | tuple[VolumeAction, ...],
                 shape: tuple[tuple[int, int], ...] = DEFAULT_SHAPE) -> int:
    """VolumeBinding's Score (0..100) of a pod on a node from the actions `pod_on_node` chose there."""
    return storage_score(class_resources(actions), shape)


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
                  zones: bool = True, index: PVIndex | None = None, storage: StorageCapacities | None = None,
                  reserved: Mapping[str, int] | None = None) -> ClaimAnswer:
    """One claim on one node, as kube-scheduler's VolumeBinding (+ VolumeZone unless `zones` is off) decides it;
    `storage` and `reserved`: the CSIStorageCapacity check of a claim to provision (`enough_capacity`)."""
    st = claim_state(claim, name=name, namespace=namespace, pvs=pvs, classes=classes, taken=taken, index=index)
    if st.reason:
        return ClaimAnswer(False, st.reason, st.unresolvable)
    if st.bound is not None:
        if not pv_matches_node(st.bound, node):
            return ClaimAnswer(False, NODE_CONFLICT, True)
        if zones and not zone_ok(st.bound, node):
            return ClaimAnswer(False, ZONE_CONFLICT, True)
        return ClaimAnswer(True, driver=csi_driver_of(st.bound, None))
    assert claim is not None  # claim_state answered a missing claim
    sc_name = str(_spec(claim).get("storageClassName") or "")
    requested = claim_request(claim) or 0
    for pv in st.candidates:
        if pv_matches_node(pv, node) and (not zones or zone_ok(pv, node)):
            pv_name = str(_meta(pv).get("name"))
            size = pv_capacity(pv)
            return ClaimAnswer(True, action=VolumeAction(namespace, name, "bind", pv_name, node.name, sc_name,
                                                         requested, size),
                               driver=csi_driver_of(pv, None))
    if st.provision is not None and topology_ok(st.provision, node):
        enough, cap = enough_capacity(claim, st.provision, node, storage=storage, reserved=reserved)
        if not enough:
            return ClaimAnswer(False, NOT_ENOUGH_SPACE, True)
        return ClaimAnswer(True, action=VolumeAction(namespace, name, "provision", "", node.name, sc_name, requested,
                                                     (cap.capacity or 0) if cap else 0, cap.key if cap else ""),
                           driver=csi_driver_of(None, st.provision))
    return ClaimAnswer(False, NODE_CONFLICT if st.candidates else BIND_CONFLICT)


def pod_on_node(pod: Obj, node: Any, *, claims: Mapping[str, Obj], pvs: Mapping[str, Obj],
                classes: Mapping[str, Obj], taken: Mapping[str, str] | None = None,
                csi_limits: Mapping[str, int] | None = None,
                attached: Mapping[str, set[str]] | None = None,
                zones: bool = True, index: PVIndex | None = None, storage: StorageCapacities | None = None,
                reserved: Mapping[str, int] | None = None) -> tuple[ClaimAnswer, list[VolumeAction]]:
    """Every claim of `pod` on `node` (the first failure answers), then NodeVolumeLimits: per CSI driver, the
    distinct claims already attached on the node (`attached`: driver → claim keys) plus the pod's new ones must
    not exceed the node's CSINode `allocatable.count` (`csi_limits`: driver → count; absent = no limit)."""
    ns = _meta(pod).get("namespace") or "default"
    actions: list[VolumeAction] = []
    new_by_driver: dict[str, set[str]] = {}
    for name in pod_claims(pod):
        got = claim_on_node(claims.get(f"{ns}/{name}"), node, name=name, namespace=ns, pvs=pvs, classes=classes,
                            taken=taken, zones=zones, index=index, storage=storage, reserved=reserved)
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
