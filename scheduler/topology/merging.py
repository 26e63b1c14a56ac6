"""The Topology Manager's hint merge, as the kubelet computes it, without enumerating the cartesian product.

Called per (task, node) by the numa-aware and deviceshare plugins with the hints of `scheduler.topology.hints`;
answers what the node's kubelet would admit, so a pod is never rejected with TopologyAffinityError after binding.

How it stays exact without the product (spec/topology.md §2). The kubelet folds `compare` over every merged
permutation. That fold picks the minimum of a total order in which two merged hints rank equal only if they are
the same (mask, preferred) pair, so the result depends only on the SET of merged pairs, not on the order:
* preferred pairs beat the rest; a permutation merges to a preferred pair iff each list contributes a preferred
  hint whose affinity is nil or one common mask M. Checking every M offered is linear in the number of hints.
* only when no preferred pair exists are the non-preferred results needed: the set of reachable AND masks, built
  list by list over DISTINCT masks (at most 2^n states, however many permutations), or, when that product is
  large and n <= 20, with a superset-zeta / Möbius AND-convolution in numpy (O(n·2^n) per provider list).
* dominated hints are pruned first: duplicates, a non-preferred hint whose affinity is also offered preferred in
  the same list, and hints whose affinity misses the machine entirely (they only yield empty masks, which the
  kubelet skips). `BestNonPreferredAffinityCount` is taken before pruning, as the kubelet takes it.
`scheduler.topology._cartesian.merge_cartesian` is the literal port; a Hypothesis test proves the two agree.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lahar.scheduler.topology import bitmask
from lahar.scheduler.topology.options import (
    BEST_EFFORT,
    NONE,
    SINGLE_NUMA_NODE,
    PolicyOptionError,
    PolicyOptions,
    check_policy,
    parse_options,
)

__all__ = [
    "TOPOLOGY_AFFINITY_ERROR",
    "TOPOLOGY_AFFINITY_MESSAGE",
    "Admission",
    "Provider",
    "TopologyHint",
    "can_admit",
    "merge",
    "merge_container_scope",
    "merge_pod_scope",
]

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"


@dataclass(frozen=True)
class TopologyHint:
    """`TopologyHint{NUMANodeAffinity, Preferred}`; `affinity=None` is the kubelet's nil mask ("don't care")."""

    affinity: frozenset[int] | None
    preferred: bool

    def __post_init__(self) -> None:
        if self.affinity is not None and not isinstance(self.affinity, frozenset):
            object.__setattr__(self, "affinity", frozenset(self.affinity))

    @functools.cached_property
    def mask(self) -> int | None:
        """The affinity as a bitmask int (computed once per hint)."""
        return None if self.affinity is None else bitmask.from_bits(*self.affinity)

    @classmethod
    def of(cls, mask: int | None, preferred: bool) -> TopologyHint:
        return cls(None if mask is None else bitmask.to_frozenset(mask), preferred)

    def __str__(self) -> str:
        nodes = "nil" if self.affinity is None else "{" + ",".join(map(str, sorted(self.affinity))) + "}"
        return f"{nodes} {'preferred' if self.preferred else 'not preferred'}"


# A provider's answer: None (no preference at all) or {resource: hints | None (no preference) | [] (unsatisfiable)}.
Provider = Mapping[str, Sequence[TopologyHint] | None] | None

_Hint = tuple[int | None, bool]  # (mask or None, preferred)


@dataclass(frozen=True)
class Admission:
    """The outcome of a scope's admit: per container the hint the providers would allocate against."""

    admit: bool
    hints: tuple[TopologyHint, ...]
    rejected: int | None = None  # index of the container whose merge was refused (container scope)
    reason: str = ""
    message: str = ""


# --- shared with the reference implementation (_cartesian.py) ---------------------------------------------------


def _provider_lists(providers: Iterable[Provider]) -> list[list[_Hint]]:
    """`filterProvidersHints`: one list per (provider, resource), with the four meanings of spec §1.3."""
    lists: list[list[_Hint]] = []
    for provider in providers:
        if not provider:
            lists.append([(None, True)])
            continue
        for hints in provider.values():
            if hints is None:
                lists.append([(None, True)])
            elif len(hints) == 0:
                lists.append([(None, False)])
            else:
                lists.append([(h.mask, bool(h.preferred)) for h in hints])
    return lists


def _filter_single_numa(lists: list[list[_Hint]]) -> list[list[_Hint]]:
    """`filterSingleNumaHints`: keep preferred hints whose affinity is nil or a single node; lists may empty."""
    return [[(m, p) for m, p in hints if p and (m is None or m.bit_count() == 1)] for hints in lists]


def _max_of_min(lists: Iterable[Iterable[_Hint]]) -> int:
    """`maxOfMinAffinityCounts`: the widest of the lists' narrowest affinities (0 without any affinity)."""
    best = 0
    for hints in lists:
        counts = [m.bit_count() for m, _ in hints if m is not None]
        if counts:
            best = max(best, min(counts))
    return best


@dataclass
class _Context:
    """Per-merge constants: the machine's mask, which mask comparison applies, NUMA distances."""

    policy: str
    numa_nodes: tuple[int, ...]
    default: int
    closest: bool  # prefer-closest-numa-nodes in effect (never under single-numa-node)
    rows: dict[int, dict[int, int]] = field(default_factory=dict)  # node -> node -> distance
    strategy: str = "auto"  # tests and the bench force "sets" or "zeta"

    @classmethod
    def build(cls, policy: str, numa_nodes: Iterable[int], opts: PolicyOptions,
              distances: Mapping[int, Sequence[int]] | None, strategy: str = "auto") -> _Context:
        nodes = tuple(numa_nodes)
        default = bitmask.from_bits(*nodes)
        rows: dict[int, dict[int, int]] = {}
        if opts.prefer_closest_numa:
            for node in nodes:
                row = (distances or {}).get(node)
                if row is None or len(row) != len(nodes):
                    raise PolicyOptionError("error getting NUMA distances from cadvisor")
                rows[node] = {other: int(d) for other, d in zip(nodes, row, strict=True)}
        return cls(policy, nodes, default, opts.prefer_closest_numa and policy != SINGLE_NUMA_NODE, rows, strategy)

    def average(self, mask: int) -> float:
        """`CalculateAverageFor`: mean distance over ordered pairs of the mask's nodes, diagonal included."""
        ids = bitmask.bits(mask)
        if not ids:
            return 0.0
        return sum(self.rows[i][j] for i in ids for j in ids) / (len(ids) * len(ids))

    def better_mask(self, current: int, candidate: int) -> bool:
        """`CompareNUMAAffinityMasks`: True if the candidate's mask wins (ties keep the current one)."""
        if current == candidate:
            return False
        if self.closest and current.bit_count() == candidate.bit_count():
            a, b = self.average(current), self.average(candidate)
            if a != b:
                return b < a
            return candidate < current
        return bitmask.is_narrower(candidate, current)

    def tiebreak(self) -> Callable[[int], tuple]:
        if self.closest:
            return lambda m: (self.average(m), m)
        return lambda m: (m,)


def _finish(best: _Hint | None, ctx: _Context) -> TopologyHint:
    mask, preferred = (ctx.default, False) if best is None else best
    if ctx.policy == SINGLE_NUMA_NODE and mask == ctx.default:
        return TopologyHint(None, preferred)
    return TopologyHint.of(mask, preferred)


def can_admit(policy: str, hint: TopologyHint) -> bool:
    """`canAdmitPodResult`: none and best-effort always admit; restricted and single-numa-node need preferred."""
    return policy in (NONE, BEST_EFFORT) or hint.preferred


# --- the merge ----------------------------------------------------------------------------------------------------


def merge(policy: str, providers: Sequence[Provider], numa_nodes: Sequence[int],
          options: Mapping[str, str] | PolicyOptions | None = None,
          distances: Mapping[int, Sequence[int]] | None = None) -> tuple[TopologyHint, bool]:
    """The node's Topology Manager verdict for one merge: `(merged hint, admit)`, exactly as the kubelet's
    `policy.Merge` returns it, for any number of NUMA nodes.

    `distances[node]` lists the node's distance to every node of `numa_nodes`, in that order (used only with
    `prefer-closest-numa-nodes: "true"`). Raises `PolicyOptionError` with the kubelet's message where the kubelet
    would refuse to start (unknown policy or option, bad option value, missing distances).
    """
    return _merge(policy, providers, numa_nodes, options, distances)


def _merge(policy: str, providers: Sequence[Provider], numa_nodes: Sequence[int],
           options: Mapping[str, str] | PolicyOptions | None, distances: Mapping[int, Sequence[int]] | None,
           strategy: str = "auto") -> tuple[TopologyHint, bool]:
    check_policy(policy)
    if policy == NONE:
        return TopologyHint(None, False), True
    ctx = _Context.build(policy, numa_nodes, parse_options(options), distances, strategy)
    lists = _provider_lists(providers)
    if policy == SINGLE_NUMA_NODE:
        lists = _filter_single_numa(lists)
    hint = _finish(_best(lists, ctx), ctx)
    return hint, can_admit(policy, hint)


def _best(lists: list[list[_Hint]], ctx: _Context) -> _Hint | None:
    """The winner of the kubelet's fold, or None when it would stay nil (no permutation with a non-empty mask)."""
    if any(not hints for hints in lists):
        return None  # an emptied list: no permutation at all
    default = ctx.default
    target = 0  # BestNonPreferredAffinityCount (`_max_of_min`), taken before pruning
    pruned: list[tuple[set[int | None], set[int | None]]] = []
    for hints in lists:
        preferred = {mask for mask, pref in hints if pref}
        other = {mask for mask, pref in hints if not pref} - preferred
        masks = preferred | other
        masks.discard(None)
        if masks:
            target = max(target, min(map(int.bit_count, masks)))
            # Masks missing the machine only ever merge to an empty mask, which the fold skips.
            stray = functools.reduce(operator.or_, masks) & ~default
            for group in (preferred, other):
                group.discard(0)
                if stray:
                    group.difference_update([m for m in group if m is not None and not m & default])
        if not preferred and not other:
            return None
        pruned.append((preferred, other))

    # Preferred results: every list offers (nil or M) preferred, for one common raw mask M.
    candidates: set[int] = set()
    if all(None in pref for pref, _ in pruned):
        candidates.add(default)
    offered = {m for pref, _ in pruned for m in pref if m is not None}
    for mask in offered:
        if all(mask in pref or None in pref for pref, _ in pruned):
            candidates.add(mask & default)
    candidates.discard(0)
    if candidates:
        key = ctx.tiebreak()
        return min(candidates, key=lambda m: (m.bit_count(), *key(m))), True

    # Non-preferred results: the reachable AND masks (nil = the whole machine).
    sets = [{default if m is None else m & default for m in pref | other} for pref, other in pruned]
    return _best_reachable(sets, target, ctx)


def _best_width(widths: Iterable[int], target: int) -> int:
    """The non-preferred rule of `compare`: width == target, else the widest below it, else the narrowest above."""
    widths = set(widths)
    if target in widths:
        return target
    below = [w for w in widths if w < target]
    return max(below) if below else min(widths)


_ZETA_MAX_NODES = 20


def _best_reachable(sets: list[set[int]], target: int, ctx: _Context) -> _Hint | None:
    sets = sorted(sets, key=len)
    n = len(ctx.numa_nodes)
    zeta_ok = n <= _ZETA_MAX_NODES and (not ctx.numa_nodes or max(ctx.numa_nodes) < 63)
    states = {ctx.default}
    for i, masks in enumerate(sets):
        big = len(states) * len(masks) > max(4096, n * (1 << n) // 2)
        if zeta_ok and ctx.strategy != "sets" and (ctx.strategy == "zeta" or big):
            return _best_reachable_zeta(states, sets[i:], target, ctx)
        states = {s & m for s in states for m in masks}
        states.discard(0)
        if not states:
            return None
    width = _best_width((s.bit_count() for s in states), target)
    key = ctx.tiebreak()
    return min((s for s in states if s.bit_count() == width), key=key), False


# --- AND-convolution over the subset lattice (numpy) --------------------------------------------------------------


def _superset_zeta(f: np.ndarray, n: int) -> np.ndarray:
    """f[T] := sum of f[S] over S ⊇ T, in place."""
    for i in range(n):
        view = f.reshape(-1, 2, 1 << i)
        view[:, 0, :] += view[:, 1, :]
    return f


def _superset_mobius(f: np.ndarray, n: int) -> np.ndarray:
    """The inverse of `_superset_zeta`, in place."""
    for i in range(n):
        view = f.reshape(-1, 2, 1 << i)
        view[:, 0, :] -= view[:, 1, :]
    return f


def _compact(masks: Iterable[int], nodes: tuple[int, ...]) -> np.ndarray:
    """Masks over node ids → indices over positions 0..n-1 (order-preserving: ids are ascending)."""
    arr = np.fromiter(masks, dtype=np.uint64)
    if nodes == tuple(range(len(nodes))):
        return arr.astype(np.int64)
    out = np.zeros_like(arr)
    for pos, node in enumerate(nodes):
        out |= ((arr >> np.uint64(node)) & np.uint64(1)) << np.uint64(pos)
    return out.astype(np.int64)


def _expand(index: int, nodes: tuple[int, ...]) -> int:
    return bitmask.from_bits(*(nodes[p] for p in bitmask.bits(index)))


def _best_reachable_zeta(states: set[int], rest: list[set[int]], target: int, ctx: _Context) -> _Hint | None:
    """Reachable AND masks via counts: zeta(A ⊛ D) = zeta(A) · zeta(D) pointwise, then Möbius. Counts stay below
    |A|·|D| <= 2^(2n) (every partial inversion counts pairs), so int64 is exact for n <= 20."""
    nodes = tuple(sorted(ctx.numa_nodes))
    n = len(nodes)
    size = 1 << n
    reach = np.zeros(size, dtype=np.int64)
    reach[_compact(states, nodes)] = 1
    for masks in rest:
        offered = np.zeros(size, dtype=np.int64)
        offered[_compact(masks, nodes)] = 1
        counts = _superset_mobius(_superset_zeta(reach, n) * _superset_zeta(offered, n), n)
        reach = (counts > 0).astype(np.int64)
        reach[0] = 0
        if not reach.any():
            return None
    index = np.flatnonzero(reach)
    widths = np.bitwise_count(index.astype(np.uint64)).astype(np.int64)
    width = _best_width(np.unique(widths).tolist(), target)
    index = index[widths == width]
    if not ctx.closest:
        return _expand(int(index.min()), nodes), False
    # prefer-closest: mean distance per mask, vectorised; exact integer sums, then one float64 division as Go does.
    dist = np.array([[ctx.rows[a][b] for b in nodes] for a in nodes], dtype=np.int64)
    member = ((index[:, None] >> np.arange(n)) & 1).astype(np.int64)
    sums = np.einsum("mi,ij,mj->m", member, dist, member)
    avg = sums.astype(np.float64) / float(width * width)
    best = index[avg == avg.min()].min()
    return _expand(int(best), nodes), False


# --- scopes (topology_manager.go, scope_container.go, scope_pod.go) -----------------------------------------------


def merge_container_scope(policy: str, containers: Sequence[Sequence[Provider]], numa_nodes: Sequence[int],
                          options: Mapping[str, str] | PolicyOptions | None = None,
                          distances: Mapping[int, Sequence[int]] | None = None) -> Admission:
    """Container scope: one merge per container (init containers first, then app containers, in spec order); the
    first refusal rejects the whole pod. `containers[i]` holds every provider's `GetTopologyHints` for container i.
    With policy `none` nothing is merged and every container gets the zero hint."""
    if policy == NONE:
        check_policy(policy)
        return Admission(True, tuple(TopologyHint(None, False) for _ in containers))
    out: list[TopologyHint] = []
    for index, providers in enumerate(containers):
        hint, admit = merge(policy, providers, numa_nodes, options, distances)
        out.append(hint)
        if not admit:
            return Admission(False, tuple(out), index, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
    return Admission(True, tuple(out))


def merge_pod_scope(policy: str, providers: Sequence[Provider], numa_nodes: Sequence[int], containers: int = 1,
                    options: Mapping[str, str] | PolicyOptions | None = None,
                    distances: Mapping[int, Sequence[int]] | None = None) -> Admission:
    """Pod scope: one merge of the providers' `GetPodTopologyHints`; every container gets that same hint."""
    hint, admit = merge(policy, providers, numa_nodes, options, distances)
    hints = tuple(hint for _ in range(containers))
    if not admit:
        return Admission(False, hints, None, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
    return Admission(True, hints)
