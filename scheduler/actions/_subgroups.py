"""allocate for a job whose PodGroup has a `subGroupPolicy` (Volcano allocateForJob / allocateForSubJob): inside
each HyperNode the job's own networkTopology allows (the whole cluster without one), every subgroup is placed whole
under one HyperNode of its own allowed tier, lowest tier first; the job is committed only when each policy has
minSubGroups ready subgroups and the gang is ready, else everything tried is discarded. The grouping rules are in
scheduler/framework/subgroups.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.scheduler.actions import _network
from lahar.scheduler.framework import hypernodes, subgroups
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import _READY, FitErrors, Job, Queue, Task, TaskStatus
from lahar.scheduler.framework.statement import Statement

if TYPE_CHECKING:
    from lahar.scheduler.actions.allocate import Allocate

__all__ = ["VictimGroup", "allocate_job", "keep_with", "order", "policies_of", "safe_subgroups", "subgroup_domains"]


def policies_of(ssn: Session, job: Job) -> list[dict[str, Any]]:
    """The job's subGroupPolicy when the network-topology-aware plugin is on (as for networkTopology)."""
    got = (job.podgroup.get("spec") or {}).get("subGroupPolicy")
    if not got or not isinstance(got, list) or not ssn.has_hook("hypernode_gradient"):
        return []
    return [p for p in got if isinstance(p, dict)]


def subgroup_domains(tree: hypernodes.Tree, scope: str | None, topology: Any) -> list[list[str | None]]:
    """Where one subgroup may go, per tier in the order tried: with a networkTopology, the HyperNodes of tier ≤ its
    highestTierAllowed (any tier when unset) inside `scope` (None: the whole tree), lowest tier first, by name;
    soft mode then falls back to the whole scope. Without one: the scope only."""
    c = hypernodes.constraint(topology, tree) if topology else None
    if c is None:
        return [[scope]]
    names = tree.descendants(scope) if scope else sorted(tree.hypernodes)
    limit = c.highest_tier if c.highest_tier is not None else (tree.tiers[-1] if tree.tiers else 0)
    by_tier: dict[int, list[str | None]] = {}
    for n in sorted(names):
        if tree.hypernodes[n].tier <= limit:
            by_tier.setdefault(tree.hypernodes[n].tier, []).append(n)
    out = [by_tier[t] for t in sorted(by_tier)]
    if c.mode is hypernodes.Mode.SOFT:
        out.append([scope])
    return out


def order(groups: Mapping[str, subgroups.SubGroup], pending: Mapping[str, Any],
          mins: Mapping[str, int]) -> list[str]:
    """The order subgroups are tried in (Volcano: the smallest set that meets every minSubGroups first): per policy
    its first minSubGroups subgroups by id, then the rest; within each part the ones with more pending pods first
    (first-fit decreasing), ties by id."""
    def size(gid: str) -> int:
        return sum(1 for u in groups[gid].members if u in pending)
    taken: Counter[str] = Counter()
    required, rest = [], []
    for gid in sorted(groups):
        g = groups[gid]
        if taken[g.policy] < mins.get(g.policy, 0):
            taken[g.policy] += 1
            required.append(gid)
        else:
            rest.append(gid)
    return sorted(required, key=lambda k: (-size(k), k)) + sorted(rest, key=lambda k: (-size(k), k))


def keep_with(tree: hypernodes.Tree, names: list[str | None], anchor: frozenset[str]) -> list[str | None]:
    """The domains that hold every node where the subgroup already runs (`anchor`): restarted pods go back to
    their peers' HyperNode. None (the whole scope, soft mode's fallback) always does."""
    if not anchor:
        return names
    return [n for n in names if n is None or anchor <= tree.hypernodes[n].nodes]


@dataclass(frozen=True, slots=True)
class VictimGroup:
    """A subgroup of a victim job as gangpreempt sees it: its running pods (uids, everywhere) and how many of them
    run inside the domain being freed."""

    uid: str
    policy: str
    size: int
    running: tuple[str, ...]
    local: int


def safe_subgroups(groups: Sequence[VictimGroup], mins: Mapping[str, int], surplus: int) -> list[str]:
    """The subgroups a victim job can lose whole without breaking its gang (its safe bundle when it has a
    subGroupPolicy): only ones with pods in the domain; a subgroup below its size (already broken, it counts for
    no minSubGroups) first, then ready ones, most pods in the domain first, ties by id; a ready one only while its
    policy keeps minSubGroups ready subgroups, and all of them only while the job keeps `surplus` (running −
    minAvailable) ≥ the pods evicted. A subgroup is never split."""
    ready: Counter[str] = Counter(g.policy for g in groups if len(g.running) >= g.size)
    left = surplus
    out: list[str] = []
    for g in sorted((g for g in groups if g.local > 0),
                    key=lambda g: (len(g.running) >= g.size, -g.local, g.uid)):
        whole = len(g.running) >= g.size
        if len(g.running) > left or (whole and ready[g.policy] - 1 < mins.get(g.policy, 0)):
            continue
        left -= len(g.running)
        if whole:
            ready[g.policy] -= 1
        out.append(g.uid)
    return out


def _scopes(ssn: Session, job: Job, constraint: hypernodes.Constraint | None,
            nominated: str = "") -> list[str | None]:
    """The job's domains in the order tried; a nominated one (gangpreempt freed it) first."""
    if nominated:
        return [nominated, *(s for s in _scopes(ssn, job, constraint) if s != nominated)]
    if constraint is None:
        return [None]
    out: list[str | None] = []
    for names in _network._gradient(ssn, job) or []:
        scores = _network._scores(ssn, job, names) if names else []
        out += [names[k] for k in sorted(range(len(names)), key=lambda k: (-scores[k], names[k]))]
    if constraint.mode is hypernodes.Mode.SOFT:
        out.append(None)
    return out


def _mask(ssn: Session, tree: hypernodes.Tree, name: str | None) -> np.ndarray:
    n = len(ssn.arrays)
    if name is None:
        return np.ones(n, dtype=bool)
    mask = np.zeros(n, dtype=bool)
    mask[tree.rows(name, ssn.arrays.index)] = True
    return mask


def _place(alloc: Allocate, ssn: Session, job: Job, queue: Queue, todo: list[Task],
           mask: np.ndarray) -> Statement:
    """Place each of `todo` (in order) among `mask`'s nodes; stops at the first that fits nowhere."""
    stmt = ssn.statement()
    job.fit_errors.clear()  # the role cache must not carry a failure from another domain into this one
    for task in todo:
        got = alloc.place_tasks(ssn, [task], job, queue, mask)
        if not len(got):
            break
        stmt.merge(got)
    return stmt


def _room(ssn: Session, todo: list[Task]) -> np.ndarray:
    """Per node, how many of `todo` its free (or being freed) resources and pod room could take at most (by the
    smallest request of each resource): a domain whose sum is below len(todo) cannot hold the subgroup."""
    arrays = ssn.arrays
    free = arrays.future_idle() + EPSILON
    room = np.maximum(arrays.max_pods - arrays.pods, 0).astype(np.float64)
    req = np.min([t.init_resreq for t in todo], axis=0)
    dims = req > EPSILON
    if not dims.any():
        return room
    return np.minimum(np.maximum(np.floor(free[:, dims] / req[dims]).min(axis=1), 0), room)


def _best_fit(ssn: Session, tree: hypernodes.Tree, names: list[str | None], todo: list[Task]) -> list[str | None]:
    """A tier's HyperNodes that could hold `todo`, the one with the least free resources (as shares of the
    cluster) first: a subgroup goes where it fits tightest and leaves the roomier HyperNodes to the subgroups still
    to come."""
    if names and any(names):
        slots = _room(ssn, todo)
        names = [n for n in names if n is None or slots[tree.rows(n, ssn.arrays.index)].sum() >= len(todo)]
    if len(names) < 2:
        return names
    free = ssn.arrays.future_idle()
    total = free.sum(axis=0)
    weight = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)
    share = {n: float((free[tree.rows(n, ssn.arrays.index)].sum(axis=0) * weight).sum()) for n in names if n}
    return sorted(names, key=lambda n: (share.get(n, float("inf")) if n else float("inf"), n or ""))


def allocate_job(alloc: Allocate, ssn: Session, job: Job, tasks: list[Task], queue: Queue,
                 constraint: hypernodes.Constraint | None, policies: list[dict[str, Any]]) -> Statement | None:
    """Per job scope (see `_scopes`), place the subgroups in `order`, each whole (every pending pod) in the first
    domain of `subgroup_domains` where it fits (tightest first within a tier), then the pods of no subgroup within
    the scope, until every policy has minSubGroups ready subgroups and the gang is ready: that statement is kept.
    A scope where that is never reached is discarded; when none reaches it nothing is placed."""
    tree = _network._tree(ssn)
    groups = subgroups.partition(policies, [(t.uid, (t.pod.get("metadata") or {}).get("labels"))
                                            for t in job.tasks.values()])
    mins = subgroups.minimums(policies)
    pending = {t.uid: t for t in reversed(tasks)}  # task order
    running = {g.uid: [job.tasks[u] for u in g.members if job.tasks[u].status in _READY
                       or job.tasks[u].status is TaskStatus.PIPELINED] for g in groups.values()}
    base = {gid: len(ts) for gid, ts in running.items()}
    anchors = {gid: frozenset(t.node_name for t in ts if getattr(t, "node_name", "")) for gid, ts in running.items()}
    grouped = {u for g in groups.values() for u in g.members}
    loose = [t for u, t in pending.items() if u not in grouped]
    sequence = order(groups, pending, mins)
    failed: Counter[str] = Counter()

    def done_yet(placed: Mapping[str, int]) -> bool:
        return subgroups.ready(subgroups.count_ready(groups.values(), placed), mins) and ssn.job_ready(job)

    was_ready = ssn.job_ready(job) and subgroups.ready(subgroups.count_ready(groups.values(), base), mins)
    nom = _network.nomination_of(ssn, job)
    free = _network.held_mask(ssn, job)
    for scope in _scopes(ssn, job, constraint, nom.job):
        scope_mask = _mask(ssn, tree, scope) & free
        pinned = bool(nom) and scope == (nom.job or None)
        stmt = ssn.statement()
        placed = dict(base)
        done: set[str] = set()
        ready = False
        for gid in sequence:
            g = groups[gid]
            todo = [pending[u] for u in g.members if u in pending]
            if not todo:
                continue
            fitted = False
            tiers = subgroup_domains(tree, scope, g.network_topology)
            if pinned and nom.subgroups.get(gid):
                tiers = [[nom.subgroups[gid]], *tiers]  # its nominated HyperNode first
            for names in tiers:
                for domain in _best_fit(ssn, tree, keep_with(tree, names, anchors[gid]), todo):
                    sub = _place(alloc, ssn, job, queue, todo, scope_mask & _mask(ssn, tree, domain))
                    if len(sub) == len(todo):  # whole: every pending pod of the subgroup in this domain
                        placed[gid] += len(sub)
                        done.update(op[1].uid for op in sub.operations)
                        stmt.merge(sub)
                        fitted = True
                        break
                    sub.discard()
                if fitted:
                    break
            if not fitted:
                failed[f"subgroup {gid} fits under no allowed hypernode"] += 1
            elif len(stmt) and done_yet(placed):
                ready = True
                break
        if not ready and loose:
            extra = _place(alloc, ssn, job, queue, [t for t in loose if t.uid not in done], scope_mask)
            done.update(op[1].uid for op in extra.operations)
            stmt.merge(extra)
            ready = bool(len(stmt)) and done_yet(placed)
        if ready:
            tasks[:] = [t for t in tasks if t.uid not in done]
            job.fit_errors.clear()
            if scope is not None:
                _network._note(ssn, job, tree, scope)
            return stmt
        if pinned and len(stmt) and subgroups.ready(subgroups.count_ready(groups.values(), placed), mins) \
                and ssn.job_pipelined(job):
            tasks[:] = [t for t in tasks if t.uid not in done]  # pipelined where it was nominated: it stays there
            job.fit_errors.clear()
            return None
        if pinned:
            _network._drop(ssn, job)  # its nominated HyperNode holds it no more: the normal search decides
        stmt.discard()
    job.fit_errors.clear()
    if tasks and not was_ready:
        why = ", ".join(r for r, _ in failed.most_common(3)) or "the gang does not fit"
        need = ", ".join(f"{n} {m}" for n, m in sorted(mins.items()) if m > 0)
        job.fit_errors[tasks[-1].uid] = FitErrors(
            total=0, error=f"subGroupPolicy (minSubGroups: {need or 'none'}) not satisfied: {why}")
    tasks.clear()  # nothing more of this gang is placed this session
    return None
