"""predicates: which nodes a pod may run on — the kube-scheduler filters Volcano wraps (spec §5.4): max pods,
unschedulable nodes, node selector and required node affinity, taints and tolerations, host ports, inter-pod
affinity and anti-affinity, pod topology spread (DoNotSchedule).

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

from lahar.scheduler.framework.hooks import NodeFilter
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins import _affinity, _ports, _spread
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


class Predicates:
    name = "predicates"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.node_affinity = arg_bool(args, "predicate.NodeAffinityEnable", True)
        self.node_ports = arg_bool(args, "predicate.NodePortsEnable", True)
        self.taint_toleration = arg_bool(args, "predicate.TaintTolerationEnable", True)
        self.pod_affinity = arg_bool(args, "predicate.PodAffinityEnable", True)
        self.topology_spread = arg_bool(args, "predicate.PodTopologySpreadEnable", True)
        self.ssn: Session | None = None
        self.view: PodView | None = None
        self._static: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray | None]] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.view = view_of(ssn, self)
        self._static.clear()

    # the session's events keep the pod view current (only its owner forwards them, so each counts once)
    def on_allocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.view is not None and self.view.owner is self:
            self.view.on_deallocate(task)

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
        feasible = static_ok & room
        for bad, _, _ in checks:
            feasible = feasible & ~bad
        if feasible.all():
            return NodeFilter(feasible)
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
