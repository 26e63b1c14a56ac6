"""Static node matchers (pure, numpy over all nodes): tolerations against taints (one toleration against one taint
is `kube.podspec.toleration_tolerates`), node selector terms and required node affinity, and the per-pod-signature
static masks.

Shared by the predicates and nodeorder plugins; plugins import it, never each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lahar.kube import podspec
from lahar.scheduler.framework.snapshot import Node
from lahar.scheduler.plugins._podview import _INT, PodProfile, PodView

NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"  # kube-scheduler NodeResourcesFit's reason (Volcano says "node(s) pod number exceeded")
POD_NUMBER_EXCEEDED = TOO_MANY_PODS
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def _mappings(tolerations: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The well-formed entries of a pod's tolerations (a malformed one tolerates nothing, as in `kube.podspec`)."""
    return [t for t in tolerations or () if isinstance(t, Mapping)]


def untolerated_taint(taints: list[Mapping[str, Any]], tolerations: Iterable[Any]) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration covers (kube-scheduler TaintToleration Filter)."""
    tols = _mappings(tolerations)
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(podspec.toleration_tolerates(t, taint) for t in tols):
            return taint
    return None


def untolerated_prefer_no_schedule(taints: list[Mapping[str, Any]], tolerations: Iterable[Any]) -> int:
    """How many PreferNoSchedule taints the tolerations with no effect or PreferNoSchedule leave uncovered
    (kube-scheduler TaintToleration Score, `countIntolerableTaintsPreferNoSchedule`)."""
    tols = [t for t in _mappings(tolerations) if not t.get("effect") or t.get("effect") == "PreferNoSchedule"]
    return sum(1 for taint in taints if taint.get("effect") == "PreferNoSchedule"
               and not any(podspec.toleration_tolerates(t, taint) for t in tols))


def tolerates_unschedulable(tolerations: Iterable[Any]) -> bool:
    """Whether the tolerations cover the `node.kubernetes.io/unschedulable:NoSchedule` taint (NodeUnschedulable)."""
    taint = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    return any(podspec.toleration_tolerates(t, taint) for t in _mappings(tolerations))


def _valid(req: Mapping[str, Any]) -> bool:
    """labels.NewRequirement's checks for a NodeSelectorRequirement (an invalid one voids its term)."""
    op, values = req.get("operator"), req.get("values") or []
    if op in ("In", "NotIn"):
        return bool(values)
    if op in ("Exists", "DoesNotExist"):
        return not values
    if op in ("Gt", "Lt"):
        return len(values) == 1 and bool(_INT.match(str(values[0])))
    return False


def _requirement(req: Mapping[str, Any], value: str | None) -> bool:
    if not _valid(req):
        return False
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
    if value is None or not _INT.match(value):
        return False
    a, b = int(value), int(values[0])
    return a > b if op == "Gt" else a < b


def _field_valid(f: Mapping[str, Any]) -> bool:
    return (f.get("key") == "metadata.name" and f.get("operator") in ("In", "NotIn")
            and len(f.get("values") or []) == 1)


def match_node_selector_terms(terms: list[Mapping[str, Any]], node: Node) -> bool:
    """Terms are ORed; a term's expressions and fields are ANDed; an empty or invalid term matches nothing."""
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if not all(_field_valid(f) for f in fields):
            continue
        if all(_requirement(e, node.labels.get(e.get("key", ""))) for e in exprs) and all(
                _requirement(f, node.name) for f in fields):
            return True
    return False


# --- vectorised over all nodes -----------------------------------------------------------------------------------

def _requirement_mask(view: PodView, req: Mapping[str, Any]) -> np.ndarray:
    if not _valid(req):
        return np.zeros(view.n, dtype=bool)
    op = req.get("operator")
    key = req.get("key") or ""
    if op in ("Gt", "Lt"):
        nums = view.numeric(key)
        bound = float(int(req["values"][0]))
        with np.errstate(invalid="ignore"):
            return nums > bound if op == "Gt" else nums < bound
    codes, index = view.column(key)
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    want = np.array([index[v] for v in req.get("values") or [] if v in index], dtype=np.int64)
    hit = np.isin(codes, want)
    return hit if op == "In" else ~hit


def _field_mask(view: PodView, f: Mapping[str, Any]) -> np.ndarray:
    out = np.zeros(view.n, dtype=bool)
    if not _field_valid(f):
        return out
    i = view.ssn.arrays.index.get((f.get("values") or [""])[0])
    if i is not None:
        out[i] = True
    return out if f.get("operator") == "In" else ~out


def node_selector_terms_mask(view: PodView, terms: list[Mapping[str, Any]]) -> np.ndarray:
    """`match_node_selector_terms` over every node at once."""
    out = np.zeros(view.n, dtype=bool)
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        m = np.ones(view.n, dtype=bool)
        for e in exprs:
            m &= _requirement_mask(view, e)
        for f in fields:
            m &= _field_mask(view, f)
        out |= m
    return out


def taint_groups(view: PodView) -> list[tuple[list[Mapping[str, Any]], np.ndarray]]:
    """Tainted nodes grouped by their taint list (most clusters have a handful of distinct lists)."""
    hit = view._cache.get("taint-groups")
    if hit is None:
        groups: dict[str, tuple[list[Mapping[str, Any]], list[int]]] = {}
        for node in view.nodes:
            if node.taints:
                key = json.dumps(node.taints, sort_keys=True)
                groups.setdefault(key, (node.taints, []))[1].append(node.index)
        hit = view._cache["taint-groups"] = (0, [(t, np.array(ix, dtype=np.int64)) for t, ix in groups.values()])
    return hit[1]


@dataclass(frozen=True, slots=True)
class StaticMasks:
    """Per node, for one pod signature: passes the node selector + required node affinity; has no untolerated
    NoSchedule/NoExecute taint (and that taint, for the reason); is schedulable or tolerated."""

    affinity_ok: np.ndarray
    taints_ok: np.ndarray
    taint_reason: np.ndarray | None  # object: "node(s) had untolerated taint {k: v}" where not taints_ok
    unschedulable_ok: np.ndarray


def static_masks(view: PodView, prof: PodProfile) -> StaticMasks:
    key = ("static", prof.static_key)
    hit = view._cache.get(key)
    if hit is not None:
        return hit[1]
    n = view.n
    affinity_ok = np.ones(n, dtype=bool)
    for k, v in prof.node_selector.items():
        codes, index = view.column(k)
        affinity_ok &= codes == index.get(v, -2)
    if prof.required_terms is not None:
        affinity_ok &= node_selector_terms_mask(view, prof.required_terms)
    taints_ok = np.ones(n, dtype=bool)
    reason: np.ndarray | None = None
    for taints, idx in taint_groups(view):
        taint = untolerated_taint(taints, prof.tolerations)
        if taint is not None:
            taints_ok[idx] = False
            if reason is None:
                reason = np.full(n, None, dtype=object)
            reason[idx] = f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    unschedulable_ok = np.ones(n, dtype=bool)
    if not tolerates_unschedulable(prof.tolerations):
        unschedulable_ok = np.fromiter((not node.unschedulable for node in view.nodes), dtype=bool, count=n)
    out = StaticMasks(affinity_ok, taints_ok, reason, unschedulable_ok)
    view._cache[key] = (0, out)
    return out
