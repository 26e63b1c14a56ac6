"""predicates: which nodes a pod may run on — unschedulable nodes, node selector, required node affinity,
taints and tolerations, max pods (the kube-scheduler filters Volcano wraps, spec §5.4).

Static checks are computed once per pod "signature" (selector, affinity, tolerations) as a boolean mask over all
nodes and cached for the session; the pod-count check is one vector comparison per call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from scheduler.framework.hooks import NodeFilter
from scheduler.framework.nodes import NodeArrays
from scheduler.framework.session import Session
from scheduler.framework.snapshot import Node, Task

__all__ = [
    "NODE_AFFINITY_MISMATCH",
    "NODE_UNSCHEDULABLE",
    "POD_NUMBER_EXCEEDED",
    "Predicates",
    "match_node_selector_terms",
    "tolerates",
    "untolerated_taint",
]

NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(taints: list[Mapping[str, Any]], tolerations: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration covers."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _requirement(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def match_node_selector_terms(terms: list[Mapping[str, Any]], node: Node) -> bool:
    """Terms are ORed; a term's expressions and fields are ANDed; an empty term matches nothing."""
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_requirement(e, node.labels.get(e.get("key", ""))) for e in exprs) and all(
                _requirement(f, node.name if f.get("key") == "metadata.name" else None) for f in fields):
            return True
    return False


def _signature(task: Task) -> str:
    spec = task.pod.get("spec") or {}
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return json.dumps([spec.get("nodeSelector") or {}, aff or {}, spec.get("tolerations") or []], sort_keys=True)


class Predicates:
    name = "predicates"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.node_affinity = bool(args.get("predicate.NodeAffinityEnable", True))
        self.taint_toleration = bool(args.get("predicate.TaintTolerationEnable", True))
        self.ssn: Session | None = None
        self._static: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self._static.clear()

    def _static_filter(self, task: Task) -> tuple[np.ndarray, np.ndarray | None]:
        if task.signature is None:
            task.signature = _signature(task)
        hit = self._static.get(task.signature)
        if hit is not None:
            return hit
        assert self.ssn is not None
        spec = task.pod.get("spec") or {}
        selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        tolerations = spec.get("tolerations") or []
        nodes = self.ssn.nodes
        ok = np.ones(len(nodes), dtype=bool)
        reasons: np.ndarray | None = None
        trivial = not selector and terms is None
        for node in nodes:
            if trivial and not node.taints and not node.unschedulable:
                continue
            reason = self._check(node, selector, terms, tolerations)
            if reason is not None:
                ok[node.index] = False
                if reasons is None:
                    reasons = np.full(len(nodes), None, dtype=object)
                reasons[node.index] = reason
        self._static[task.signature] = (ok, reasons)
        return ok, reasons

    def _check(self, node: Node, selector: Mapping[str, str], terms: list[Mapping[str, Any]] | None,
               tolerations: list[Mapping[str, Any]]) -> str | None:
        if node.unschedulable and not any(
                tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations):
            return NODE_UNSCHEDULABLE
        if self.node_affinity:
            if any(node.labels.get(k) != v for k, v in selector.items()):
                return NODE_AFFINITY_MISMATCH
            if terms is not None and not match_node_selector_terms(terms, node):
                return NODE_AFFINITY_MISMATCH
        if self.taint_toleration and node.taints:
            taint = untolerated_taint(node.taints, tolerations)
            if taint is not None:
                return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
        return None

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        static_ok, static_reasons = self._static_filter(task)
        room = nodes.pods < nodes.max_pods
        feasible = static_ok & room
        if feasible.all():
            return NodeFilter(feasible)
        reasons = static_reasons.copy() if static_reasons is not None else np.full(len(nodes), None, dtype=object)
        reasons[static_ok & ~room] = POD_NUMBER_EXCEEDED
        return NodeFilter(feasible, reasons, ~static_ok)
