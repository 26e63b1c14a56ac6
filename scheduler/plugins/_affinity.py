"""Inter-pod affinity over the session's pod view: kube-scheduler's InterPodAffinity filter (required affinity,
required anti-affinity, placed pods' anti-affinity against the incoming pod) and its preferred-terms score.

Used by `plugins/predicates.py` (filter) and `plugins/nodeorder.py` (score); vectorised per topology domain.
"""

from __future__ import annotations

import numpy as np

from lahar.scheduler.plugins._podview import AffinityTerm, LabelGroup, PodProfile, PodView

__all__ = [
    "AFFINITY_MISMATCH",
    "ANTI_AFFINITY_MISMATCH",
    "EXISTING_ANTI_AFFINITY_MISMATCH",
    "HARD_POD_AFFINITY_WEIGHT",
    "filter_nodes",
    "normalize",
    "raw_scores",
]

AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight default


def _term_matcher(view: PodView, term: AffinityTerm):  # noqa: ANN202 - a small closure
    def match(g: LabelGroup) -> bool:
        return term.matches(g.namespace, g.labels, view.ns_labels(g.namespace))
    return match


def _all_terms_matcher(view: PodView, terms: tuple[AffinityTerm, ...]):  # noqa: ANN202
    def match(g: LabelGroup) -> bool:
        ns_labels = view.ns_labels(g.namespace)
        return all(t.matches(g.namespace, g.labels, ns_labels) for t in terms)
    return match


def existing_anti_affinity(view: PodView, prof: PodProfile) -> np.ndarray | None:
    """Nodes in a topology domain where a placed pod's required anti-affinity selects the incoming pod."""
    groups = [g for g in view.terms_matching(prof) if g.kind == "anti_req"]
    if not groups:
        return None
    bad = np.zeros(view.n, dtype=bool)
    for g in groups:
        codes, _ = view.column(g.term.topology_key)
        nodes = np.fromiter((i for i, c in g.nodes.items() if c > 0), dtype=np.int64)
        dom = codes[nodes]
        dom = dom[dom >= 0]
        if len(dom):
            bad |= np.isin(codes, dom)
    return bad


def filter_nodes(view: PodView, prof: PodProfile) -> list[tuple[np.ndarray, str, bool]]:
    """(failing mask, reason, unresolvable) per check, in kube-scheduler's order: affinity, anti-affinity,
    existing pods' anti-affinity."""
    out: list[tuple[np.ndarray, str, bool]] = []
    if prof.aff_req:
        terms = prof.aff_req
        counts = view.count_matching(("all", tuple(t.key for t in terms)), _all_terms_matcher(view, terms),
                                     selector=terms[0].selector)
        has_all = np.ones(view.n, dtype=bool)
        exist = np.ones(view.n, dtype=bool)
        any_count = False
        for t in terms:
            codes, _ = view.column(t.topology_key)
            has_all &= codes >= 0
            dom = view.domain_sum(t.topology_key, counts)
            exist &= dom > 0
            any_count = any_count or bool((counts[codes >= 0] > 0).any())
        ok = has_all & exist
        if not any_count:
            ns_labels = view.ns_labels(prof.namespace)
            if all(t.matches(prof.namespace, prof.labels, ns_labels) for t in terms):
                ok = has_all  # the first pod of a group with affinity to itself
        out.append((~ok, AFFINITY_MISMATCH, True))
    if prof.anti_req:
        bad = np.zeros(view.n, dtype=bool)
        for t in prof.anti_req:
            counts = view.count_matching(("one", t.key, prof.namespace), _term_matcher(view, t), selector=t.selector)
            bad |= view.domain_sum(t.topology_key, counts) > 0
        out.append((bad, ANTI_AFFINITY_MISMATCH, False))
    existing = existing_anti_affinity(view, prof)
    if existing is not None:
        out.append((existing, EXISTING_ANTI_AFFINITY_MISMATCH, False))
    return out


def raw_scores(view: PodView, prof: PodProfile) -> np.ndarray | None:
    """InterPodAffinity's per-node score before normalisation: the incoming pod's preferred (anti-)affinity
    against placed pods, plus placed pods' required affinity (hardPodAffinityWeight) and preferred (anti-)affinity
    terms that select the incoming pod, summed per topology domain. None when nothing contributes (Skip)."""
    score = np.zeros(view.n, dtype=np.float64)
    contributed = False
    for sign, terms in ((1.0, prof.aff_pref), (-1.0, prof.anti_pref)):
        for t in terms:
            if not t.weight:
                continue
            counts = view.count_matching(("one", t.key, prof.namespace), _term_matcher(view, t), selector=t.selector)
            if counts.any():
                contributed = True
                score += sign * t.weight * view.domain_sum(t.topology_key, counts)
    if view.term_groups():
        for g in view.terms_matching(prof):
            if g.kind == "anti_req":
                continue
            weight = {"aff_req": HARD_POD_AFFINITY_WEIGHT, "aff_pref": g.term.weight,
                      "anti_pref": -g.term.weight}[g.kind]
            if not weight:
                continue
            contributed = True
            score += weight * view.domain_sum(g.term.topology_key, view.counts_vector(g.nodes))
    return score if contributed else None


def normalize(raw: np.ndarray) -> np.ndarray:
    """InterPodAffinity NormalizeScore over the candidates: ⌊100 · (s − min) / (max − min)⌋, 0 when all equal."""
    lo, hi = float(raw.min()), float(raw.max())
    if hi - lo <= 0:
        return np.zeros_like(raw)
    return np.trunc(100.0 * ((raw - lo) / (hi - lo)))
