"""Pod topology spread over the session's pod view: kube-scheduler's PodTopologySpread filter (DoNotSchedule:
maxSkew, minDomains, nodeAffinityPolicy / nodeTaintsPolicy) and score (ScheduleAnyway), vectorised per domain.

Used by `plugins/predicates.py` (filter) and `plugins/nodeorder.py` (score). System-default constraints (for pods
owned by Services / ReplicaSets) are not applied: the snapshot does not carry those owners.
"""

from __future__ import annotations

import math

import numpy as np

from lahar.scheduler.plugins._podview import HOSTNAME, LabelGroup, PodProfile, PodView, SpreadConstraint

__all__ = ["CONSTRAINTS_MISMATCH", "MISSING_LABEL", "filter_nodes", "scores"]

CONSTRAINTS_MISMATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = CONSTRAINTS_MISMATCH + " (missing required label)"


def _matching_counts(view: PodView, prof: PodProfile, c: SpreadConstraint) -> np.ndarray:
    """Per node, the live (not terminating) placed pods of the pod's namespace that `c.selector` selects
    (countPodsMatchSelector: an empty selector counts nothing)."""
    if c.selector.requirements is None or c.selector.empty:
        return np.zeros(view.n, dtype=np.float64)
    ns, sel = prof.namespace, c.selector

    def match(g: LabelGroup) -> bool:
        return g.namespace == ns and sel.matches(g.labels)
    return view.count_matching(("spread", ns, str(sel)), match, live=True, selector=sel)


def _has_all_keys(view: PodView, constraints: tuple[SpreadConstraint, ...]) -> np.ndarray:
    ok = np.ones(view.n, dtype=bool)
    for c in constraints:
        ok &= view.column(c.topology_key)[0] >= 0
    return ok


def filter_nodes(view: PodView, prof: PodProfile, affinity_ok: np.ndarray, taints_ok: np.ndarray
                 ) -> list[tuple[np.ndarray, str, bool]]:
    """(failing mask, reason, unresolvable) for the pod's DoNotSchedule constraints. `affinity_ok` / `taints_ok`:
    the nodes matching the pod's node selector + required node affinity / with no untolerated NoSchedule or
    NoExecute taint (for the inclusion policies)."""
    constraints = prof.spread_hard
    eligible_all = _has_all_keys(view, constraints)
    missing = np.zeros(view.n, dtype=bool)
    skewed = np.zeros(view.n, dtype=bool)
    for c in constraints:
        codes, index = view.column(c.topology_key)
        has = codes >= 0
        missing |= ~has
        eligible = eligible_all.copy()
        if c.honor_affinity:
            eligible &= affinity_ok
        if c.honor_taints:
            eligible &= taints_ok
        counts = _matching_counts(view, prof, c)
        per_domain = np.bincount(codes[eligible], weights=counts[eligible], minlength=len(index))
        present = np.zeros(len(index), dtype=bool)
        present[codes[eligible]] = True
        domains = int(present.sum())
        if domains == 0:
            continue  # no eligible domain: the global minimum is unbounded, nothing is skewed
        min_match = 0.0 if domains < c.min_domains else float(per_domain[present].min())
        self_match = 1.0 if c.selector.matches(prof.labels) else 0.0
        match_num = np.where(has, per_domain[np.maximum(codes, 0)], 0.0)
        skewed |= has & (match_num + self_match - min_match > c.max_skew)
    return [(missing, MISSING_LABEL, True), (skewed & ~missing, CONSTRAINTS_MISMATCH, False)]


def scores(view: PodView, prof: PodProfile, candidates: np.ndarray, affinity_ok: np.ndarray,
           taints_ok: np.ndarray) -> np.ndarray:
    """PodTopologySpread Score + NormalizeScore over `candidates` for the ScheduleAnyway constraints (0..100)."""
    constraints = prof.spread_soft
    n = len(candidates)
    has_all = _has_all_keys(view, constraints)
    ignored = ~has_all[candidates]
    kept = candidates[~ignored]
    raw = np.zeros(n, dtype=np.float64)
    for c in constraints:
        codes, index = view.column(c.topology_key)
        counts = _matching_counts(view, prof, c)
        if c.topology_key == HOSTNAME:
            size = len(kept)
            cnt = counts[candidates]
        else:
            present = np.zeros(len(index), dtype=bool)
            present[codes[kept]] = True
            size = int(present.sum())
            contrib = has_all.copy()
            if c.honor_affinity:
                contrib &= affinity_ok
            if c.honor_taints:
                contrib &= taints_ok
            per_domain = np.bincount(codes[contrib], weights=counts[contrib], minlength=len(index))
            per_domain[~present] = 0.0
            cand_codes = codes[candidates]
            cnt = np.where(cand_codes >= 0, per_domain[np.maximum(cand_codes, 0)], 0.0)
        weight = math.log(size + 2)
        has = codes[candidates] >= 0
        raw += np.where(has, cnt * weight + (c.max_skew - 1), 0.0)
    raw = np.floor(raw + 0.5)  # Go's math.Round (half away from zero; scores are >= 0)
    out = np.zeros(n, dtype=np.float64)
    live = ~ignored
    if not live.any():
        return out
    lo, hi = raw[live].min(), raw[live].max()
    if hi == 0:
        out[live] = 100.0
    else:
        out[live] = np.floor(100.0 * (hi + lo - raw[live]) / hi)
    return out
