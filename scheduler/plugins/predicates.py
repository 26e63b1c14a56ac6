"""predicates: which nodes a pod may run on — the kube-scheduler filters Volcano wraps (spec §5.4): max pods,
unschedulable nodes, node selector and required node affinity, taints and tolerations, host ports, inter-pod
affinity and anti-affinity, pod topology spread (DoNotSchedule), and the volume filters VolumeBinding,
VolumeZone and NodeVolumeLimits (`_volumes`, with the CSIStorageCapacity check of claims to provision; binding at
commit through `Decisions.volumes`), and, behind
`predicate.DynamicResourceAllocationEnable` (off by default, as in Volcano), DynamicResources: a pod's
ResourceClaims allocated from the node's ResourceSlices (`_dra`; written at commit through `Decisions.claims`).
Behind `predicate.StorageCapacityScoringEnable` (off by default, as kube-scheduler's alpha StorageCapacityScoring
gate that Volcano's volume scoring waits for) it also scores nodes (the NodeOrder hook, as Volcano's predicates
BatchNodeOrder): VolumeBinding's Score, `volumebinding.shape` over the chosen static PVs or the CSIStorageCapacity of
claims to provision, times `volumebinding.weight` (Volcano's names and default 1).

Static checks (node labels, taints) are computed once per pod "signature" (node selector, required affinity,
tolerations) as boolean masks over all nodes, vectorised per label key with numpy, and cached for the session.
Checks that depend on the pods on nodes (host ports, inter-pod affinity, spread) read the session's pod view
(`_podview.PodView`), which counts pods placed earlier in the session; they run only for pods that have such
rules, or, for anti-affinity, when placed pods have anti-affinity terms. Failure reasons read like
kube-scheduler's, so FailedScheduling events summarise them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import NodeFilter, passing
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task, TaskStatus
from lahar.scheduler.plugins import _affinity, _dra, _ports, _spread, _volumes
from lahar.scheduler.plugins._podview import PodProfile, PodView, profile_of, view_of
from lahar.scheduler.plugins._shared.nodematch import (
    NODE_AFFINITY_MISMATCH,
    NODE_UNSCHEDULABLE,
    POD_NUMBER_EXCEEDED,
    TOO_MANY_PODS,
    StaticMasks,
    match_node_selector_terms,
    node_selector_terms_mask,
    static_masks,
    untolerated_taint,
)

__all__ = [
    "NODE_AFFINITY_MISMATCH",
    "NODE_UNSCHEDULABLE",
    "POD_NUMBER_EXCEEDED",
    "TOO_MANY_PODS",
    "Predicates",
    "StaticMasks",
    "arg_bool",
    "match_node_selector_terms",
    "node_selector_terms_mask",
    "static_masks",
    "untolerated_taint",
]


def arg_int(args: Mapping[str, Any], key: str, default: int) -> int:
    """Volcano framework.Get[int]: an int (a bool or anything else keeps the default)."""
    v = args.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def bind_timeout_seconds(args: Mapping[str, Any]) -> int | None:
    """`volumebinding.bindTimeoutSeconds`: an int as Volcano reads it (anything else: unset, None); a negative
    one is refused with kube-scheduler's VolumeBindingArgs validation message."""
    v = args.get("volumebinding.bindTimeoutSeconds")
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    if v < 0:
        raise ValueError(f"volumebinding.bindTimeoutSeconds: invalid value {v}: should not be a negative value")
    return v


def arg_bool(args: Mapping[str, Any], key: str, default: bool) -> bool:
    """Volcano Arguments.GetBool: a bool, or a string strconv.ParseBool accepts; anything else keeps the default."""
    v = args.get(key)
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("1", "t", "true"):
            return True
        if low in ("0", "f", "false"):
            return False
    return default




Check = tuple[np.ndarray, Any, bool]  # (failing mask, reason text or per-node object array, unresolvable)


def _csi_limits(csinode: Mapping[str, Any]) -> dict[str, int]:
    """A CSINode's per-driver attach limits (spec.drivers[].allocatable.count); drivers without one: no limit."""
    out: dict[str, int] = {}
    for d in (csinode.get("spec") or {}).get("drivers") or ():
        count = ((d or {}).get("allocatable") or {}).get("count")
        if d.get("name") and isinstance(count, int) and not isinstance(count, bool):
            out[str(d["name"])] = count
    return out


class Predicates:
    name = "predicates"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.node_affinity = arg_bool(args, "predicate.NodeAffinityEnable", True)
        self.node_ports = arg_bool(args, "predicate.NodePortsEnable", True)
        self.taint_toleration = arg_bool(args, "predicate.TaintTolerationEnable", True)
        self.pod_affinity = arg_bool(args, "predicate.PodAffinityEnable", True)
        self.topology_spread = arg_bool(args, "predicate.PodTopologySpreadEnable", True)
        self.volumes = arg_bool(args, "predicate.VolumeBindingEnable", True)
        self.volume_zone = arg_bool(args, "predicate.VolumeZoneEnable", True)
        self.volume_limits = arg_bool(args, "predicate.NodeVolumeLimitsEnable", True)
        self.dra = arg_bool(args, "predicate.DynamicResourceAllocationEnable", False)
        # VolumeBinding's Score (kube-scheduler's StorageCapacityScoring gate; Volcano's volumebinding.* arguments)
        self.storage_scoring = arg_bool(args, "predicate.StorageCapacityScoringEnable", False)
        self.volume_weight = arg_int(args, "volumebinding.weight", 1)
        self.bind_timeout = bind_timeout_seconds(args)
        self.volume_shape = _volumes.parse_shape(args.get("volumebinding.shape")) if self.storage_scoring \
            else _volumes.DEFAULT_SHAPE
        if self.storage_scoring and self.volumes:
            self.node_order = self._volume_scores  # the hook only exists when switched on
        self._storage = _volumes.StorageCapacities()
        self._capacity_masks: dict[str, np.ndarray] = {}
        # "ns/claim" → (CSIStorageCapacity key, bytes) of a claim to provision checked against a capacity this session
        self._reservations: dict[str, tuple[str, int]] = {}
        self._dra: _dra.Claims | None = None
        self._claims: dict[str, Any] = {}
        self._pvs: dict[str, Any] = {}
        self._classes: dict[str, Any] = {}
        self._csi_limits: dict[str, dict[str, int]] = {}
        self._taken: dict[str, str] = {}  # static PV → "ns/claim" assumed this session
        self._volume_actions: dict[str, list[_volumes.VolumeAction]] = {}  # task uid → actions (allocated now)
        # "ns/claim" → (node index, tasks) of a claim to provision chosen this session: its other pods follow it
        self._provisioning: dict[str, tuple[int, int]] = {}
        self._pv_mask_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._sc_mask_cache: dict[str, np.ndarray] = {}
        self._pv_index = _volumes.PVIndex({})
        self._matrix_cache: dict[int, tuple[tuple[Any, ...], np.ndarray, dict[str, int]]] = {}
        self.ssn: Session | None = None
        self.view: PodView | None = None
        self._static: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray | None]] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.view = view_of(ssn, self)
        self._static.clear()
        extras = ssn.snapshot.extras
        self._claims = dict(extras.get("persistentvolumeclaims") or {})
        self._pvs = dict(extras.get("persistentvolumes") or {})
        self._classes = dict(extras.get("storageclasses") or {})
        self._csi_limits = {name: _csi_limits(o) for name, o in (extras.get("csinodes") or {}).items()}
        self._storage = _volumes.StorageCapacities(extras.get("csistoragecapacities"), extras.get("csidrivers"))
        self._capacity_masks = {}
        self._reservations = {}
        self._taken = {}
        self._volume_actions = {}
        self._provisioning = {}
        self._pv_mask_cache = {}
        self._sc_mask_cache = {}
        self._pv_index = _volumes.PVIndex(self._pvs)
        self._matrix_cache = {}
        self._dra = _dra.Claims(extras, ssn.nodes) if self.dra else None

    # the session's events keep the pod view current (only its owner forwards them, so each counts once)
    def on_allocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_allocate(task)
        if self.volumes and task.node >= 0 and task.status is not TaskStatus.PIPELINED \
                and _volumes.pod_claims(task.pod):
            actions = self._volume_plan(task, task.node)
            if actions:
                self._volume_actions[task.uid] = actions
                for a in actions:
                    key = f"{a.namespace}/{a.claim}"
                    if a.kind == "bind":
                        self._taken[a.volume] = key
                    else:
                        self._provisioning[key] = (task.node, self._provisioning.get(key, (task.node, 0))[1] + 1)
                        if a.capacity_key and key not in self._reservations:
                            self._reservations[key] = (a.capacity_key, a.requested)
        if self._dra is not None and task.node >= 0 and task.status is not TaskStatus.PIPELINED:
            self._dra.on_allocate(task, task.node)

    def on_deallocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_deallocate(task)
        for a in self._volume_actions.pop(task.uid, ()):
            key = f"{a.namespace}/{a.claim}"
            if a.kind == "bind":
                self._taken.pop(a.volume, None)
            elif key in self._provisioning:
                node, count = self._provisioning[key]
                if count > 1:
                    self._provisioning[key] = (node, count - 1)
                else:
                    del self._provisioning[key]
                    self._reservations.pop(key, None)
        if self._dra is not None:
            self._dra.on_deallocate(task)

    def on_session_close(self, ssn: Session) -> None:
        """Hand the volume and ResourceClaim actions of the tasks bound this session to commit
        (`Decisions.volumes`, `Decisions.claims`)."""
        bound = {b.uid for b in ssn.decisions.binds}
        if self.bind_timeout is not None:
            ssn.decisions.volume_bind_timeout = float(self.bind_timeout)
        if self._dra is not None:
            self._dra.close(bound, ssn.decisions)
        for uid, actions in self._volume_actions.items():
            if uid in bound:
                ssn.decisions.volumes[uid] = [
                    {"namespace": a.namespace, "claim": a.claim, "kind": a.kind, "volume": a.volume, "node": a.node}
                    for a in actions]

    def _attached(self, node: Any) -> dict[str, set[str]]:
        """Per CSI driver, the claims of the pods on `node` (NodeVolumeLimits counts distinct claims)."""
        out: dict[str, set[str]] = {}
        for t in (*node.tasks.values(), *node.others):
            for name in _volumes.pod_claims(t.pod):
                claim = self._claims.get(f"{t.namespace}/{name}")
                if claim is None:
                    continue
                volume = (claim.get("spec") or {}).get("volumeName")
                sc = self._classes.get((claim.get("spec") or {}).get("storageClassName") or "")
                driver = _volumes.csi_driver_of(self._pvs.get(volume) if volume else None, None if volume else sc)
                if driver:
                    out.setdefault(driver, set()).add(f"{t.namespace}/{name}")
        return out

    def _pod_volumes(self, task: Task, node: Any, *, limits: bool = True
                     ) -> tuple[_volumes.ClaimAnswer, list[_volumes.VolumeAction]]:
        csi = self._csi_limits.get(node.name) if self.volume_limits and limits else None
        return _volumes.pod_on_node(task.pod, node, claims=self._claims, pvs=self._pvs, classes=self._classes,
                                    taken=self._taken, zones=self.volume_zone, index=self._pv_index,
                                    csi_limits=csi, attached=self._attached(node) if csi else None,
                                    storage=self._storage, reserved=self._reserved())

    def _reserved(self) -> dict[str, int]:
        """CSIStorageCapacity key → bytes of the claims to provision checked against it this session."""
        out: dict[str, int] = {}
        for key, size in self._reservations.values():
            out[key] = out.get(key, 0) + size
        return out

    def _capacity_mask(self, claim: Mapping[str, Any], sc: Mapping[str, Any]) -> np.ndarray | None:
        """Nodes where a claim to provision with `sc` has room (`_volumes.enough_capacity` over every node), or
        None when its driver does not track capacity or it requests no storage (nothing to check)."""
        size = _volumes.claim_request(claim)
        if size is None or not self._storage.tracked(str(sc.get("provisioner") or "")):
            return None
        assert self.ssn is not None
        nodes = self.ssn.nodes
        reserved = self._reserved()
        room = np.zeros(len(nodes), dtype=bool)
        for cap in self._storage.of_class(str((sc.get("metadata") or {}).get("name") or "")):
            if not cap.fits(size, reserved.get(cap.key, 0)):
                continue
            reach = self._capacity_masks.get(cap.key)
            if reach is None:  # node labels do not change in a session
                reach = self._capacity_masks[cap.key] = np.fromiter((cap.reaches(n) for n in nodes), dtype=bool,
                                                                    count=len(nodes))
            room |= reach
        return room

    def _volume_scores(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """VolumeBinding's Score on each candidate (0..100, `volumebinding.shape`) times `volumebinding.weight`:
        over the static PVs the pod would take there, else its claims to provision against a CSIStorageCapacity;
        0 for a pod without claims (kube-scheduler's PreScore skip)."""
        out = np.zeros(len(candidates), dtype=np.float64)
        if not self.volume_weight or not _volumes.pod_claims(task.pod):
            return out
        assert self.ssn is not None
        for j, i in enumerate(candidates):
            got, actions = self._pod_volumes(task, self.ssn.nodes[int(i)], limits=False)
            if got.ok:
                out[j] = _volumes.volume_score(actions, self.volume_shape) * self.volume_weight
        return out

    def _pv_masks(self, pv: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(node affinity ok, zone ok) of one PV over every node, once per session (PVs do not change in it)."""
        name = (pv.get("metadata") or {}).get("name", "")
        hit = self._pv_mask_cache.get(name)
        if hit is None:
            assert self.view is not None and self.ssn is not None
            n = self.view.n
            required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            terms = required.get("nodeSelectorTerms")
            affinity = np.ones(n, dtype=bool) if not required or terms is None \
                else node_selector_terms_mask(self.view, list(terms))
            labels = (pv.get("metadata") or {}).get("labels") or {}
            zone = np.ones(n, dtype=bool)
            if self.volume_zone and any(k in labels for k in _volumes.ZONE_LABELS):
                zone = np.fromiter((_volumes.zone_ok(pv, node) for node in self.ssn.nodes), dtype=bool, count=n)
            hit = self._pv_mask_cache[name] = (affinity, zone)
        return hit

    def _class_mask(self, sc: Mapping[str, Any]) -> np.ndarray:
        name = (sc.get("metadata") or {}).get("name", "")
        hit = self._sc_mask_cache.get(name)
        if hit is None:
            assert self.ssn is not None
            nodes = self.ssn.nodes
            hit = np.ones(len(nodes), dtype=bool) if not sc.get("allowedTopologies") else np.fromiter(
                (_volumes.topology_ok(sc, node) for node in nodes), dtype=bool, count=len(nodes))
            self._sc_mask_cache[name] = hit
        return hit

    def _candidates(self, every: tuple[Any, ...]) -> tuple[np.ndarray, dict[str, int]]:
        """The candidate PVs of a claim as a (PV × node) feasibility matrix and their row numbers, cached per
        candidate tuple (`PVIndex` memoises them, so claims of one class and size share one)."""
        hit = self._matrix_cache.get(id(every))
        if hit is None or hit[0] is not every:
            assert self.view is not None
            rows = np.zeros((len(every), self.view.n), dtype=bool)
            for r, pv in enumerate(every):
                affinity, zone = self._pv_masks(pv)
                rows[r] = affinity & zone
            hit = (every, rows, {(pv.get("metadata") or {}).get("name", ""): r for r, pv in enumerate(every)})
            self._matrix_cache[id(every)] = hit
        return hit[1], hit[2]

    def _free_rows(self, rows: dict[str, int], me: str) -> np.ndarray:
        """Which candidate rows are not assumed by another claim this session."""
        free = np.ones(len(rows), dtype=bool)
        for pv_name, owner in self._taken.items():
            r = rows.get(pv_name)
            if r is not None and owner != me:
                free[r] = False
        return free

    def _volume_plan(self, task: Task, node: int) -> list[_volumes.VolumeAction]:
        """What commit must do for the task's unbound claims on `node` (already found feasible): the first free
        static PV there (smallest first), else provisioning."""
        assert self.ssn is not None
        node_name = self.ssn.nodes[node].name
        out: list[_volumes.VolumeAction] = []
        for name in _volumes.pod_claims(task.pod):
            st = _volumes.claim_state(self._claims.get(f"{task.namespace}/{name}"), name=name,
                                      namespace=task.namespace, pvs=self._pvs, classes=self._classes,
                                      index=self._pv_index)
            if st.reason or st.bound is not None:
                continue
            me = f"{task.namespace}/{name}"
            claim = self._claims[me]
            sc_name = str((claim.get("spec") or {}).get("storageClassName") or "")
            requested = _volumes.claim_request(claim) or 0
            if st.candidates:
                m, rows = self._candidates(st.candidates)
                hits = np.flatnonzero(m[:, node] & self._free_rows(rows, me))
                if hits.size:
                    pv = st.candidates[int(hits[0])]
                    out.append(_volumes.VolumeAction(task.namespace, name, "bind",
                                                     str((pv.get("metadata") or {}).get("name")), node_name,
                                                     sc_name, requested, _volumes.pv_capacity(pv)))
                    self._taken[out[-1].volume] = me  # a second claim of the pod must not take it too
                    continue
            if st.provision is not None:
                cap = None
                if me not in self._reservations:  # the claim's first pod this session: which capacity it draws on
                    _, cap = _volumes.enough_capacity(claim, st.provision, self.ssn.nodes[node],
                                                      storage=self._storage, reserved=self._reserved())
                out.append(_volumes.VolumeAction(task.namespace, name, "provision", "", node_name, sc_name, requested,
                                                 (cap.capacity or 0) if cap else 0, cap.key if cap else ""))
        return out

    def _volume_check(self, task: Task) -> Check | None:
        """VolumeBinding / VolumeZone / NodeVolumeLimits over every node, for a pod with PVC volumes: the same
        answers as `_volumes.pod_on_node` node by node, with each claim's node-independent part (`claim_state`)
        computed once and the PV / StorageClass node masks once per session."""
        names = _volumes.pod_claims(task.pod) if self.volumes else []
        if not names:
            return None
        assert self.ssn is not None
        nodes = self.ssn.nodes
        n = len(nodes)
        bad = np.zeros(n, dtype=bool)
        reasons = np.full(n, None, dtype=object)
        unres = np.zeros(n, dtype=bool)

        def fail(mask: np.ndarray, reason: str, unresolvable: bool) -> None:
            new = mask & ~bad
            reasons[new] = reason
            unres[new] = unresolvable
            bad[new] = True

        for name in names:
            st = _volumes.claim_state(self._claims.get(f"{task.namespace}/{name}"), name=name,
                                      namespace=task.namespace, pvs=self._pvs, classes=self._classes,
                                      index=self._pv_index)
            if st.reason:
                fail(np.ones(n, dtype=bool), st.reason, st.unresolvable)
                break
            if st.bound is not None:
                affinity, zone = self._pv_masks(st.bound)
                fail(~affinity, _volumes.NODE_CONFLICT, True)
                fail(~zone, _volumes.ZONE_CONFLICT, True)
                continue
            pinned = self._provisioning.get(f"{task.namespace}/{name}")
            if pinned is not None:  # a pod placed this session provisions the claim there: one selected node
                fail(np.arange(n) != pinned[0], _volumes.NODE_CONFLICT, False)
                continue
            ok = np.zeros(n, dtype=bool)
            if st.candidates:
                m, rows = self._candidates(st.candidates)
                free = self._free_rows(rows, f"{task.namespace}/{name}")
                ok = m[free].any(axis=0) if free.any() else ok
            if st.provision is not None:
                topology = self._class_mask(st.provision)
                room = self._capacity_mask(self._claims[f"{task.namespace}/{name}"], st.provision)
                if room is not None:  # CSIStorageCapacity: no room where the class could provision
                    fail(topology & ~room & ~ok, _volumes.NOT_ENOUGH_SPACE, True)
                    topology = topology & room
                ok |= topology
            fail(~ok, _volumes.NODE_CONFLICT if st.candidates else _volumes.BIND_CONFLICT, False)
        if self.volume_limits and self._csi_limits and not bad.all():
            for i in np.flatnonzero(~bad):  # only nodes with a CSINode limit can fail NodeVolumeLimits
                if nodes[i].name in self._csi_limits:
                    got, _ = self._pod_volumes(task, nodes[i])
                    if not got.ok:
                        fail(np.arange(n) == i, got.reason, got.unresolvable)
        if not bad.any():
            return None
        return bad, reasons, bool(unres[bad].all())

    def _static_filter(self, prof: PodProfile) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(feasible, reasons, unresolvable) of the label and taint checks, in kube-scheduler's order:
        NodeUnschedulable, NodeAffinity, TaintToleration — all UnschedulableAndUnresolvable."""
        hit = self._static.get(prof.static_key)
        if hit is not None:
            return hit
        assert self.view is not None
        masks = static_masks(self.view, prof)
        n = self.view.n
        ok = masks.unschedulable_ok.copy()
        reasons: np.ndarray | None = None
        if not ok.all():
            reasons = np.full(n, None, dtype=object)
            reasons[~ok] = NODE_UNSCHEDULABLE
        if self.node_affinity:
            bad = ok & ~masks.affinity_ok
            if bad.any():
                if reasons is None:
                    reasons = np.full(n, None, dtype=object)
                reasons[bad] = NODE_AFFINITY_MISMATCH
                ok &= ~bad
        if self.taint_toleration and masks.taint_reason is not None:
            bad = ok & ~masks.taints_ok
            if bad.any():
                if reasons is None:
                    reasons = np.full(n, None, dtype=object)
                reasons[bad] = masks.taint_reason[bad]
                ok &= ~bad
        out = (ok, reasons, None if reasons is None else ~ok)
        self._static[prof.static_key] = out
        return out

    def _dynamic_checks(self, prof: PodProfile) -> list[Check]:
        """Checks that read the pods on nodes, in kube-scheduler's order: NodePorts, InterPodAffinity,
        PodTopologySpread."""
        view = self.view
        assert view is not None
        checks: list[Check] = []
        if self.node_ports and prof.ports:
            checks.append((_ports.conflicts(view, prof.ports), _ports.PORTS_IN_USE, False))
        if self.pod_affinity and (prof.aff_req or prof.anti_req or view.term_groups()):
            checks.extend(_affinity.filter_nodes(view, prof))
        if self.topology_spread and prof.spread_hard:
            masks = static_masks(view, prof)
            checks.extend(_spread.filter_nodes(view, prof, masks.affinity_ok, masks.taints_ok))
        return checks

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        prof = profile_of(task)
        static_ok, static_reasons, static_unres = self._static_filter(prof)
        room = nodes.pods < nodes.max_pods
        checks = self._dynamic_checks(prof)
        volume_check = self._volume_check(task)
        if volume_check is not None:
            checks.append(volume_check)
        claim_check = self._dra.check(task) if self._dra is not None else None
        if claim_check is not None:
            checks.append(claim_check)
        feasible = static_ok & room
        for bad, _, _ in checks:
            feasible = feasible & ~bad
        if feasible.all():
            return passing(len(nodes))  # every node passes: the session skips the answer
        n = len(nodes)
        reasons = np.full(n, None, dtype=object)
        unresolvable = np.zeros(n, dtype=bool)
        decided = ~room
        reasons[decided] = TOO_MANY_PODS  # Volcano checks the pod count first
        if static_reasons is not None:
            new = ~decided & ~static_ok
            reasons[new] = static_reasons[new]
            unresolvable |= new & (static_unres if static_unres is not None else False)
            decided |= new
        for bad, reason, unres in checks:
            new = ~decided & bad
            if new.any():
                reasons[new] = reason[new] if isinstance(reason, np.ndarray) else reason
                if unres:
                    unresolvable |= new
                decided |= new
        return NodeFilter(feasible, reasons, unresolvable)
