"""The kubelet's merge, ported literally: every permutation of the cartesian product, folded with `compare`.

Not used by the scheduler. It is the reference the exact fast merge (`merging.py`) is proven equal to (Hypothesis
test) and the "plain cartesian" column of bench/topology.py. Follows spec/topology.md §2.3–2.7 step by step.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from lahar.scheduler.topology.merging import (
    Provider,
    TopologyHint,
    _Context,
    _filter_single_numa,
    _finish,
    _Hint,
    _max_of_min,
    _provider_lists,
    can_admit,
)
from lahar.scheduler.topology.options import NONE, SINGLE_NUMA_NODE, PolicyOptions, check_policy, parse_options

__all__ = ["compare", "merge_cartesian", "merge_permutation"]


def merge_permutation(permutation: Sequence[_Hint], default: int) -> _Hint:
    """`mergePermutation`: AND of the non-nil affinities with the machine's mask; preferred only if every hint
    is preferred and every non-nil affinity equals the first one."""
    preferred = True
    first: int | None = None
    merged = default
    for mask, pref in permutation:
        if mask is not None:
            if first is None:
                first = mask
            elif mask != first:
                preferred = False
            merged &= mask
        if not pref:
            preferred = False
    return merged, preferred


def compare(current: _Hint | None, candidate: _Hint, target: int, ctx: _Context) -> _Hint | None:
    """`HintMerger.compare` with `BestNonPreferredAffinityCount = target`; returns current or candidate."""
    cand_mask, cand_pref = candidate
    if cand_mask is None or cand_mask.bit_count() == 0:
        return current
    if current is None:
        return candidate
    cur_mask, cur_pref = current
    if not cur_pref and cand_pref:
        return candidate
    if cur_pref and not cand_pref:
        return current
    if cur_pref and cand_pref:
        return candidate if ctx.better_mask(cur_mask, cand_mask) else current
    c, k = cur_mask.bit_count(), cand_mask.bit_count()
    if c > target:
        return candidate if ctx.better_mask(cur_mask, cand_mask) else current
    if c == target:
        if k != target:
            return current
        return candidate if ctx.better_mask(cur_mask, cand_mask) else current
    if k > target:
        return current
    if k == target:
        return candidate
    if k > c:
        return candidate
    if k < c:
        return current
    return candidate if ctx.better_mask(cur_mask, cand_mask) else current


def merge_cartesian(policy: str, providers: Sequence[Provider], numa_nodes: Sequence[int],
                    options: Mapping[str, str] | PolicyOptions | None = None,
                    distances: Mapping[int, Sequence[int]] | None = None) -> tuple[TopologyHint, bool]:
    """Same contract as `scheduler.topology.merge`; cost is the product of the list lengths."""
    check_policy(policy)
    if policy == NONE:
        return TopologyHint(None, False), True
    ctx = _Context.build(policy, numa_nodes, parse_options(options), distances)
    lists = _provider_lists(providers)
    if policy == SINGLE_NUMA_NODE:
        lists = _filter_single_numa(lists)
    target = _max_of_min(lists)
    best: _Hint | None = None
    for permutation in itertools.product(*lists):
        best = compare(best, merge_permutation(permutation, ctx.default), target, ctx)
    hint = _finish(best, ctx)
    return hint, can_admit(policy, hint)
