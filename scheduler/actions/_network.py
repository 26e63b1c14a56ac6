"""allocate for a job with a `networkTopology` (Volcano allocateForJob with HyperNodes): the gang is placed whole
under one HyperNode, trying the gradient's tiers lowest first and, inside a tier, the best-scored HyperNode it fits.

Hard mode: nothing fits → nothing is placed, and the job's fit error says per tier why no HyperNode fits. Soft
mode: nothing fits → placed as an unconstrained job. The HyperNode a committed job landed under is recorded on its
PodGroup (annotation `volcano.sh/job-allocated-hypernode`); later sessions keep its pending tasks in that domain.

A gang that gangpreempt pipelined into a HyperNode it freed is *nominated* there (annotation
`lahar.sh/nominated-hypernodes`, the job's domain and each subgroup's): its next sessions try that HyperNode first,
and the nodes its pods were nominated to are held from other topology-constrained jobs until it is placed or the
HyperNode can no longer hold it (then the nomination lapses and the normal gradient applies).
"""

from __future__ import annotations

import json
import weakref
from collections import Counter
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lahar.scheduler.framework import hypernodes
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import FitErrors, Job, Queue, Task, TaskStatus
from lahar.scheduler.framework.statement import Statement

if TYPE_CHECKING:
    from lahar.scheduler.actions.allocate import Allocate

__all__ = ["NOMINATED_HYPERNODES_ANNOTATION", "Nomination", "allocate_job", "constraint_of", "encode_nomination",
           "errors_within", "explain", "held_nodes", "nominate", "nomination_of", "parse_nomination", "record",
           "shortfalls"]

NOMINATED_HYPERNODES_ANNOTATION = "lahar.sh/nominated-hypernodes"

# --- nomination (gangpreempt → the next sessions' allocate): pure functions, then the session shell -------------


@dataclass(frozen=True, slots=True)
class Nomination:
    """Where gangpreempt pipelined a gang: `job` = the HyperNode of the job's domain ("" for the cluster),
    `subgroups` = subgroup id → its HyperNode."""

    job: str = ""
    subgroups: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.job or self.subgroups)


def encode_nomination(nomination: Nomination) -> str:
    """The annotation's value: {"job": ..., "subgroups": {...}} with sorted keys; "" for no nomination."""
    if not nomination:
        return ""
    return json.dumps({"job": nomination.job, "subgroups": dict(sorted(nomination.subgroups.items()))},
                      separators=(",", ":"), sort_keys=True)


def parse_nomination(text: object, known: Container[str]) -> Nomination:
    """The annotation read back: anything that is not that JSON object, and HyperNodes no longer in the tree
    (`known`), read as no nomination (a stale one must never pin a gang to a domain that is gone)."""
    if not isinstance(text, str) or not text:
        return Nomination()
    try:
        got = json.loads(text)
    except ValueError:
        return Nomination()
    if not isinstance(got, dict):
        return Nomination()
    job = got.get("job")
    job = job if isinstance(job, str) and job in known else ""
    subs = got.get("subgroups")
    subs = {k: v for k, v in subs.items() if isinstance(k, str) and isinstance(v, str) and v in known} \
        if isinstance(subs, dict) else {}
    if subs and got.get("job") and not job:
        return Nomination()  # the job's domain is gone: its subgroups' places mean nothing on their own
    return Nomination(job, subs)


def held_nodes(nominees: Mapping[str, tuple[Nomination, frozenset[str]]], job: str,
               members: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The nodes `job` must leave alone: per other nominated job with pending pods (uid → its nomination and the
    nodes its pending pods are nominated to), those nodes; when its pods name none, every node of its nominated
    HyperNodes (the subgroups' when it has them, else the job's domain; `members` = HyperNode → its nodes)."""
    out: set[str] = set()
    for uid, (nom, pinned) in nominees.items():
        if uid == job or not nom:
            continue
        if pinned:
            out |= pinned
            continue
        names = list(nom.subgroups.values()) or ([nom.job] if nom.job else [])
        for name in names:
            out |= members.get(name, frozenset())
    return frozenset(out)


def nomination_of(ssn: Session, job: Job) -> Nomination:
    """The job's nomination as this session sees it (one dropped or redeemed this session reads as none)."""
    if job.uid in ssn.decisions.podgroup_annotations and \
            ssn.decisions.podgroup_annotations[job.uid].get(NOMINATED_HYPERNODES_ANNOTATION) == "":
        return Nomination()
    text = ((job.podgroup.get("metadata") or {}).get("annotations") or {}).get(NOMINATED_HYPERNODES_ANNOTATION)
    return parse_nomination(text, _tree(ssn)) if text else Nomination()


def nominate(ssn: Session, job: Job, nomination: Nomination) -> None:
    """Write the nomination on the job's PodGroup (after gangpreempt's commit)."""
    _annotate(ssn, job, NOMINATED_HYPERNODES_ANNOTATION, encode_nomination(nomination))
    _HELD.pop(ssn, None)


def _drop(ssn: Session, job: Job) -> None:
    if ((job.podgroup.get("metadata") or {}).get("annotations") or {}).get(NOMINATED_HYPERNODES_ANNOTATION):
        _annotate(ssn, job, NOMINATED_HYPERNODES_ANNOTATION, "")
        _HELD.pop(ssn, None)


def _annotate(ssn: Session, job: Job, key: str, value: str) -> None:
    ssn.decisions.podgroup_annotations.setdefault(job.uid, {})[key] = value


_HELD: weakref.WeakKeyDictionary[Session, dict[str, tuple[Nomination, frozenset[str]]]] = \
    weakref.WeakKeyDictionary()


def held_mask(ssn: Session, job: Job) -> np.ndarray:
    """Node rows `job` may use: all but the nodes held for other nominated gangs (see `held_nodes`)."""
    nominees = _HELD.get(ssn)
    if nominees is None:
        nominees = _HELD[ssn] = {}
        for other in ssn.jobs.values():
            annotations = (other.podgroup.get("metadata") or {}).get("annotations") or {}
            if not annotations.get(NOMINATED_HYPERNODES_ANNOTATION):
                continue
            pending = other.index.get(TaskStatus.PENDING, {})
            nom = nomination_of(ssn, other)
            if nom and pending:
                pinned = frozenset(n for t in pending.values()
                                   if (n := ((t.pod.get("status") or {}).get("nominatedNodeName") or "")))
                nominees[other.uid] = (nom, pinned)
    mask = np.ones(len(ssn.arrays), dtype=bool)
    if not nominees:
        return mask
    tree = _tree(ssn)
    held = held_nodes(nominees, job.uid, {n: frozenset(hn.nodes) for n, hn in tree.hypernodes.items()})
    index = ssn.arrays.index
    for name in held:
        row = index.get(name)
        if row is not None:
            mask[row] = False
    return mask


def constraint_of(ssn: Session, job: Job) -> hypernodes.Constraint | None:
    """The job's networkTopology when a plugin answers `hypernode_gradient` (Volcano: without the
    network-topology-aware plugin a constrained job is placed as any other)."""
    spec = (job.podgroup.get("spec") or {}).get("networkTopology")
    if not spec or not ssn.has_hook("hypernode_gradient"):
        return None
    return hypernodes.constraint(spec, _tree(ssn))


def _gradient(ssn: Session, job: Job) -> list[list[str]] | None:
    for p in ssn.hooked("hypernode_gradient"):
        got = p.hypernode_gradient(job)
        if got is not None:
            return got
    return None


_TREES: weakref.WeakKeyDictionary[Session, hypernodes.Tree] = weakref.WeakKeyDictionary()


def _tree(ssn: Session) -> hypernodes.Tree:
    tree = _TREES.get(ssn)
    if tree is None:
        tree = _TREES[ssn] = hypernodes.tree_of(ssn.snapshot.extras.get("hypernodes") or {},
                                                [n.node for n in ssn.nodes])
    return tree


def _scores(ssn: Session, job: Job, names: list[str]) -> np.ndarray:
    total = np.zeros(len(names))
    for p in ssn.hooked("hypernode_order"):
        total += p.hypernode_order(job, names)
    return total


def errors_within(ssn: Session, task: Task, mask: np.ndarray) -> FitErrors:
    """Why `task` fits no node of `mask`: per node the first short resource, else the predicate's reason."""
    rows = np.flatnonzero(mask)
    out = FitErrors(total=len(rows))
    f = ssn.predicate(task)
    short = ssn.arrays.insufficient(task.init_resreq, ssn.arrays.future_idle()[rows]) if len(rows) else []
    names = ssn.resources.names
    for k, i in enumerate(rows):
        if short[k] >= 0:
            out.reasons[f"Insufficient {names[short[k]]}"] += 1
        elif f.reasons is not None and f.reasons[i] is not None:
            out.reasons[f.reasons[i]] += 1
        else:
            out.reasons["node(s) didn't match the predicates"] += 1
    return out


class _Members:
    """A session's HyperNodes by position and their per-HyperNode sums of node-row values."""

    __slots__ = ("pos", "sums", "empty")

    def __init__(self, ssn: Session, tree: hypernodes.Tree) -> None:
        names = sorted(tree.hypernodes)
        self.pos = {n: i for i, n in enumerate(names)}
        self.sums = hypernodes.RowSums(tree, names, ssn.arrays.index)
        self.empty = self.sums.empty


_MEMBERS: weakref.WeakKeyDictionary[Session, _Members] = weakref.WeakKeyDictionary()


class _Need:
    """What the gang still needs, computed once per job: the missing task count and their summed request; per
    HyperNode its free resources and how many of the tasks (per request group) its nodes' free resources and pod
    room take."""

    __slots__ = ("count", "total", "free", "slots", "groups", "pos", "empty")

    def __init__(self, ssn: Session, job: Job, tasks: list[Task], members: _Members) -> None:
        self.count = job.min_available - job.ready_task_num() - job.waiting_task_num() - job.best_effort_pending
        self.pos = members.pos
        arrays = ssn.arrays
        free = arrays.future_idle() + EPSILON
        wanted = tasks[-self.count:] if 0 < self.count <= len(tasks) else tasks  # pop() order: first are last
        self.total = np.sum([t.init_resreq for t in wanted], axis=0) if wanted else arrays.resources.zeros()
        room = np.maximum(arrays.max_pods - arrays.pods, 0).astype(np.float64)
        groups: dict[bytes, list[Task]] = {}
        for t in tasks:
            groups.setdefault(t.init_resreq.tobytes(), []).append(t)
        self.groups = [len(m) for m in groups.values()]
        per_node = np.zeros((len(arrays), len(groups)))
        for g, members_ in enumerate(groups.values()):
            req = members_[0].init_resreq
            dims = req > EPSILON
            slots = np.floor(free[:, dims] / req[dims]).min(axis=1) if dims.any() else room
            per_node[:, g] = np.minimum(np.maximum(slots, 0), room)
        self.free = members.sums(free)
        self.slots = members.sums(per_node)
        self.empty = members.empty


def shortfalls(ssn: Session, need: _Need, names: list[str]) -> tuple[np.ndarray, Counter[str]]:
    """A necessary condition per HyperNode, as allocate's `_cannot_be_ready` but over its nodes: the gang's missing
    tasks must fit its free resources and its free task slots. Which of `names` may hold the gang, and why the
    others cannot (counted by reason)."""
    if need.count <= 0:
        return np.ones(len(names), dtype=bool), Counter()
    idx = np.fromiter((need.pos[n] for n in names), dtype=np.intp, count=len(names))
    short = need.total > need.free[idx]  # H × R
    possible = np.minimum(need.slots[idx], np.asarray(need.groups, dtype=np.float64)).sum(axis=1)
    empty = need.empty[idx]
    any_short = short.any(axis=1) & ~empty
    few = (possible < need.count) & ~empty & ~any_short
    reasons: Counter[str] = Counter()
    if empty.any():
        reasons["have no nodes"] = int(empty.sum())
    if any_short.any():
        first = np.argmax(short[any_short], axis=1)
        for k, c in zip(*np.unique(first, return_counts=True), strict=True):
            reasons[f"have too few free {ssn.resources.names[int(k)]}"] = int(c)
    if few.any():
        reasons["have too few nodes with room for a task"] = int(few.sum())
    return ~(empty | any_short | few), reasons


def explain(constraint: hypernodes.Constraint, per_tier: dict[int, tuple[int, Counter[str]]]) -> str:
    """"hard network topology, highestTierAllowed 1: 0/4 tier-1 hypernodes fit: 3 have too few free
    nvidia.com/gpu, 1 has ...": per tier searched, how many HyperNodes and why each failed (counts, largest first)."""
    limit = "any tier" if constraint.highest_tier is None else f"highestTierAllowed {constraint.highest_tier}"
    head = f"{constraint.mode} network topology, {limit}"
    if not per_tier:
        return f"{head}: no hypernode of an allowed tier"
    parts = []
    for tier in sorted(per_tier):
        total, reasons = per_tier[tier]
        why = ", ".join(f"{n} {_verb(r, n)}" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"0/{total} tier-{tier} hypernodes fit" + (f": {why}" if why else ""))
    return f"{head}: " + "; ".join(parts)


def _verb(reason: str, n: int) -> str:
    """"have too few …" reads "1 has too few …" for one HyperNode."""
    if n == 1 and reason.startswith("have "):
        return "has " + reason[len("have "):]
    return reason


def _candidates(ssn: Session, job: Job, tasks: list[Task], tree: hypernodes.Tree, gradient: list[list[str]],
                per_tier: dict[int, tuple[int, Counter[str]]]) -> Iterator[tuple[int, list[str]]]:
    """Per tier of the gradient (computed when asked for: a gang that fits in tier 1 never looks further), its
    HyperNodes that pass `shortfalls`, best score first (ties by name); the others are counted in `per_tier` with
    their reason."""
    members = _MEMBERS.get(ssn)
    if members is None:
        members = _MEMBERS[ssn] = _Members(ssn, tree)
    need = _Need(ssn, job, tasks, members)
    for names in gradient:
        if not names:
            continue
        tier = tree.hypernodes[names[0]].tier
        fits, reasons = shortfalls(ssn, need, names)
        ok = [name for name, f in zip(names, fits, strict=True) if f]
        per_tier[tier] = (len(names), reasons)
        if ok:
            scores = _scores(ssn, job, ok)
            order = sorted(range(len(ok)), key=lambda k: (-scores[k], ok[k]))
            yield tier, [ok[k] for k in order]


def allocate_job(alloc: Allocate, ssn: Session, job: Job, tasks: list[Task], queue: Queue,
                 constraint: hypernodes.Constraint) -> Statement | None:
    """Place the gang under one HyperNode of the gradient: per tier (lowest first), the best-scored HyperNode in
    which it becomes ready (or, if none, pipelined). As `Allocate._allocate_tasks`: the statement when the job is
    ready, None otherwise (a pipelined placement stays applied)."""
    tree = _tree(ssn)
    free = held_mask(ssn, job)
    nom = nomination_of(ssn, job)
    if nom.job:
        kept, stmt = _nominated(alloc, ssn, job, tasks, queue, tree, nom.job, free)
        if kept:
            return stmt
        _drop(ssn, job)  # the nominated HyperNode cannot hold the gang any more: the normal search decides
    gradient = _gradient(ssn, job) or []
    per_tier: dict[int, tuple[int, Counter[str]]] = {}
    n = len(ssn.arrays)
    for tier, names in _candidates(ssn, job, tasks, tree, gradient, per_tier):
        pipelined = ""
        failed: Counter[str] = Counter()
        for name in names:
            mask = np.zeros(n, dtype=bool)
            mask[tree.rows(name, ssn.arrays.index)] = True
            mask &= free
            job.fit_errors.clear()
            trial = list(tasks)
            stmt = alloc.place_tasks(ssn, trial, job, queue, mask)
            placed = len(stmt) > 0  # a job already ready (elastic, or restarted pods) must place something here
            ready = placed and ssn.job_ready(job)
            if not ready and placed and not pipelined and ssn.job_pipelined(job):
                pipelined = name
            if not ready:
                failed[_first_reason(job)] += 1
            if ready:  # the best-scored HyperNode the gang fits in: keep this placement
                tasks[:] = trial
                _note(ssn, job, tree, name)
                return stmt
            stmt.discard()
        if pipelined:
            mask = np.zeros(n, dtype=bool)
            mask[tree.rows(pipelined, ssn.arrays.index)] = True
            mask &= free
            return _final(alloc, ssn, job, tasks, queue, tree, pipelined, mask)
        total, reasons = per_tier[tier]
        per_tier[tier] = (total, reasons + failed)
    job.fit_errors.clear()
    if constraint.mode is hypernodes.Mode.SOFT:
        return alloc._allocate_tasks(ssn, tasks, job, queue)
    if tasks:
        _left_out(ssn, job, tasks, tree, constraint, gradient, per_tier)
        job.fit_errors[tasks[-1].uid] = FitErrors(total=0, error=explain(constraint, per_tier))
        tasks.clear()  # hard mode: nothing of this gang is placed this session
    return None


def _nominated(alloc: Allocate, ssn: Session, job: Job, tasks: list[Task], queue: Queue, tree: hypernodes.Tree,
               name: str, free: np.ndarray) -> tuple[bool, Statement | None]:
    """Volcano's nomination fast path: the gang in its nominated HyperNode only, first on the nodes its pods are
    nominated to (`status.nominatedNodeName` inside it), then anywhere in it. (True, statement) when it is ready
    there, (True, None) when it is pipelined there (its victims are still going: it stays pinned), (False, None)
    when it fits there no more (nothing stays applied)."""
    index = ssn.arrays.index
    mask = np.zeros(len(ssn.arrays), dtype=bool)
    mask[tree.rows(name, index)] = True
    mask &= free
    pinned = np.zeros_like(mask)
    for t in tasks:
        row = index.get((t.pod.get("status") or {}).get("nominatedNodeName") or "")
        if row is not None and mask[row]:
            pinned[row] = True
    for where in ([pinned] if pinned.any() and (pinned != mask).any() else []) + [mask]:
        job.fit_errors.clear()
        trial = list(tasks)
        stmt = alloc.place_tasks(ssn, trial, job, queue, where)
        if len(stmt) and ssn.job_ready(job):
            tasks[:] = trial
            _note(ssn, job, tree, name)
            return True, stmt
        if len(stmt) and ssn.job_pipelined(job):
            tasks[:] = trial
            return True, None
        stmt.discard()
    job.fit_errors.clear()
    return False, None


def _left_out(ssn: Session, job: Job, tasks: list[Task], tree: hypernodes.Tree, constraint: hypernodes.Constraint,
              gradient: list[list[str]], per_tier: dict[int, tuple[int, Counter[str]]]) -> None:
    """Count in `per_tier` the HyperNodes of an allowed tier the gradient left out by its minResources pre-filter,
    with their reason, so that a gang too big for every rack reads "0/4 tier-1 hypernodes fit: 4 have too few free
    nvidia.com/gpu" rather than "no hypernode of an allowed tier". Not for a job bound to its domain (recorded, or
    tasks placed this session): there the gradient is that subtree, on purpose."""
    if job.uid in ssn.allocated_hypernodes or _stored(job, tree) or any(
            job.index.get(s) for s in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED)):
        return
    offered = {name for names in gradient for name in names}
    limit = constraint.highest_tier if constraint.highest_tier is not None else (tree.tiers[-1] if tree.tiers else 0)
    need: _Need | None = None
    for tier in tree.tiers:
        names = [name for name in tree.by_tier[tier] if name not in offered] if tier <= limit else []
        if not names:
            continue
        if need is None:
            members = _MEMBERS.get(ssn)
            if members is None:
                members = _MEMBERS[ssn] = _Members(ssn, tree)
            need = _Need(ssn, job, tasks, members)
        fits, reasons = shortfalls(ssn, need, names)
        if fits.any():  # enough for the missing tasks, not for the job's whole minResources
            reasons["have too few free resources for the job's minResources"] += int(fits.sum())
        total, before = per_tier.get(tier, (0, Counter()))
        per_tier[tier] = (total + len(names), before + reasons)


def _first_reason(job: Job) -> str:
    for fe in job.fit_errors.values():
        if fe.reasons:
            reason = fe.reasons.most_common(1)[0][0]
            return f"have no node for a task ({reason})"
        if fe.error:
            return f"have no node for a task ({fe.error})"
    return "cannot hold the whole gang"


def _final(alloc: Allocate, ssn: Session, job: Job, tasks: list[Task], queue: Queue, tree: hypernodes.Tree,
           name: str, mask: np.ndarray) -> Statement | None:
    """Place for real in the chosen HyperNode (the same, deterministic, walk as its dry run) and note where."""
    job.fit_errors.clear()
    stmt = alloc.place_tasks(ssn, tasks, job, queue, mask)
    if len(stmt) and ssn.job_ready(job):
        _note(ssn, job, tree, name)
        return stmt
    if not ssn.job_pipelined(job):
        stmt.discard()
    return None


def _note(ssn: Session, job: Job, tree: hypernodes.Tree, name: str) -> None:
    previous = ssn.allocated_hypernodes.get(job.uid, _stored(job, tree))
    ssn.allocated_hypernodes[job.uid] = tree.lca(previous, name)


def _stored(job: Job, tree: hypernodes.Tree) -> str:
    got = ((job.podgroup.get("metadata") or {}).get("annotations") or {}).get(
        hypernodes.ALLOCATED_HYPERNODE_ANNOTATION, "")
    return got if got in tree else ""


def record(ssn: Session, job: Job) -> None:
    """After a commit: write the job's allocated HyperNode on its PodGroup when it changed, and clear its
    nomination (placed: redeemed, as Volcano clears it on commit)."""
    _drop(ssn, job)
    name = ssn.allocated_hypernodes.get(job.uid)
    if not name:
        return
    stored = ((job.podgroup.get("metadata") or {}).get("annotations") or {}).get(
        hypernodes.ALLOCATED_HYPERNODE_ANNOTATION, "")
    if stored != name:
        _annotate(ssn, job, hypernodes.ALLOCATED_HYPERNODE_ANNOTATION, name)
