"""gangpreempt / gangreclaim: job-level eviction (spec §5.3). A starving gang that cannot fit evicts whole bundles
of other gangs inside one domain (a HyperNode of its allowed tier when it has a hard networkTopology, else the
cluster), chosen by `actions/_gang.choose`, then pipelines every pending task there. All in one Statement: when the
gang is not pipelined after the evictions nothing is evicted. gangpreempt takes lower-priority gangs of its own
queue; gangreclaim takes gangs of other, reclaimable queues for a queue that is not overused.

Subgroups (PodGroup subGroupPolicy): a preemptor's subgroups are each pipelined whole under a HyperNode of their
own allowed tier inside the domain, minSubGroups per policy, victims chosen per subgroup, the domain with the fewest
victims in total taken; a victim with subgroups loses whole subgroups only.
After the commit the preemptor is nominated to the domain and each subgroup to its HyperNode
(`_network.nominate`): its next sessions place it there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lahar.kube import selectors
from lahar.scheduler.actions import _gang, _network, _subgroups
from lahar.scheduler.actions._util import fits, preempt_candidate_nodes, starving_by_queue
from lahar.scheduler.framework import hypernodes, subgroups
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import _READY, Job, Queue, Task, TaskStatus
from lahar.scheduler.plugins.conformance import CRITICAL

__all__ = ["GangPreempt", "GangReclaim"]

EVICTABLE = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
DEFAULT_MAX_DOMAINS = 8
PREEMPTABLE_KEY = "volcano.sh/preemptable"
PLANS_PER_DOMAIN = 4  # cheapest plans of a domain tried when the aggregate fits but a pod does not land
MAX_ATTEMPTS = 8
_READY_OR_PLACED = frozenset({*_READY, TaskStatus.PIPELINED, TaskStatus.ALLOCATED})


class GangPreempt:
    name = "gangpreempt"
    reason = "gangpreempt"
    statuses = EVICTABLE

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        try:
            self.max_domains = int(self.arguments.get("maxDomains", DEFAULT_MAX_DOMAINS))
        except (TypeError, ValueError):
            self.max_domains = DEFAULT_MAX_DOMAINS
        if self.max_domains <= 0:  # Volcano falls back to the default
            self.max_domains = DEFAULT_MAX_DOMAINS
        self.allow_whole = _flag(self.arguments.get("allowWholeBundle", True))

    # --- what differs between preempt and reclaim ----------------------------------------------------------------

    def eligible_queue(self, ssn: Session, queue: Queue) -> bool:
        return True

    def victim_job(self, ssn: Session, preemptor: Job, victim: Job) -> bool:
        return victim.queue == preemptor.queue and victim.priority < preemptor.priority

    def rank(self, ssn: Session, victims: list[Job]) -> dict[str, int]:
        """Lowest job order first (Volcano: !JobOrderFn)."""
        order = sorted(victims, key=victims_order_job(ssn))
        return {j.uid: i for i, j in enumerate(order)}

    # --- the action ----------------------------------------------------------------------------------------------

    def execute(self, ssn: Session) -> None:
        queues, preemptors, _ = starving_by_queue(ssn)
        while not queues.empty():
            queue = queues.pop()
            jobs = preemptors.get(queue.uid)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                if self.eligible_queue(ssn, queue):
                    self.preempt_job(ssn, queue, job)

    def preempt_job(self, ssn: Session, queue: Queue, job: Job) -> bool:
        pending = sorted((t for t in job.index.get(TaskStatus.PENDING, {}).values()
                          if not t.sch_gated and t.preemption_policy != "Never"), key=ssn.task_key())
        if not pending or any(ssn.pre_predicate(t) is not None for t in pending):
            return False
        need = np.sum([t.init_resreq for t in pending], axis=0)
        policies = _subgroups.policies_of(ssn, job)
        if policies:  # dry-run each domain, then take the one with the fewest victims (then the lowest tier)
            found = [(cost, i, name, rows) for i, (name, rows) in enumerate(self.domains(ssn, job, need))
                     if (cost := self.preempt_subgroups(ssn, queue, job, pending, name, rows, policies)) is not None]
            return bool(found) and self.preempt_subgroups(ssn, queue, job, pending, *min(
                found, key=lambda x: (x[0], x[1]))[2:], policies, dry_run=False) is not None
        tries: list[tuple[Any, int, int, _gang.Plan, str, np.ndarray]] = []
        for i, (name, rows) in enumerate(self.domains(ssn, job, need)):
            plans = _gang.choose(need, self._idle(ssn, rows), self.bundles(ssn, job, rows), PLANS_PER_DOMAIN)
            if plans and not plans[0].bundles:
                return False  # room without evicting anything: allocate's business, not ours
            tries += [(p.cost, i, j, p, name, rows) for j, p in enumerate(plans)]
        tries.sort(key=lambda x: (x[0], x[1], x[2]))  # the fewest victims over every domain, then the lowest tier first
        return any(self.attempt(ssn, queue, job, pending, rows, plan, name)
                   for _, _, _, plan, name, rows in tries[:MAX_ATTEMPTS])

    def domains(self, ssn: Session, job: Job, need: np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
        """(HyperNode, node rows) of each candidate domain: the HyperNodes of a hard-constrained job's allowed tiers
        whose nodes could hold `need` when empty (Volcano's PurposeEvict gradient), lowest tier first (at most
        maxDomains), else the whole cluster ("")."""
        con = _network.constraint_of(ssn, job)
        if con is None or con.mode is not hypernodes.Mode.HARD:
            return [("", np.arange(len(ssn.nodes), dtype=np.intp))]
        tree = _network._tree(ssn)
        allocated = ssn.allocated_hypernodes.get(job.uid, "")
        index = ssn.arrays.index

        def big_enough(name: str) -> bool:
            return need is None or fits(need, ssn.arrays.allocatable[tree.rows(name, index)].sum(axis=0))
        names = [n for tier in hypernodes.gradient(tree, highest_tier=con.highest_tier, allocated=allocated,
                                                   eligible=big_enough) for n in tier][: self.max_domains]
        return [(n, r) for n, r in ((n, tree.rows(n, index)) for n in names) if len(r)]

    def bundles(self, ssn: Session, preemptor: Job, rows: np.ndarray) -> list[_gang.Bundle]:
        local: dict[str, list[Task]] = {}
        for row in rows:
            for t in ssn.nodes[int(row)].tasks.values():
                if t.job == preemptor.uid or t.status not in self.statuses or not evictable_task(t):
                    continue
                victim = ssn.jobs.get(t.job)
                if victim is None or not job_preemptable(victim) or not self.victim_job(ssn, preemptor, victim):
                    continue
                local.setdefault(t.job, []).append(t)
        victims = [ssn.jobs[j] for j in local]
        ranks = self.rank(ssn, victims)
        budgets = pdb_budgets(ssn.snapshot.extras.get("poddisruptionbudgets") or {}, _healthy_counter(ssn))
        out: list[_gang.Bundle] = []
        for victim in victims:
            tasks = local[victim.uid]
            tasks.sort(key=lambda t: (t.pod.get("spec", {}).get("priority") or 0, t.uid))
            everywhere = [t for s in EVICTABLE for t in victim.index.get(s, {}).values()]
            policies = _subgroups.policies_of(ssn, victim)
            if policies:
                out += self._subgroup_bundles(victim, policies, tasks, everywhere, ranks[victim.uid],
                                              budget_for(budgets, everywhere))
                continue
            out += _gang.bundles_of(victim.uid, local=[(t.uid, t.resreq) for t in tasks],
                                    running=victim.ready_task_num(), min_available=victim.min_available,
                                    everywhere=sorted(t.uid for t in everywhere), priority=victim.priority,
                                    rank=ranks[victim.uid], allow_whole=self.allow_whole,
                                    budget=budget_for(budgets, everywhere))
        return out

    def _subgroup_bundles(self, victim: Job, policies: list[dict[str, Any]], local: list[Task],
                          everywhere: list[Task], rank: int, budget: int | None) -> list[_gang.Bundle]:
        """A victim with a subGroupPolicy: its safe bundle is whole subgroups (`_subgroups.safe_subgroups`) and
        its pods of no subgroup inside the domain, within its minAvailable surplus; the whole bundle as for any
        gang."""
        groups = subgroups.partition(policies, [(t.uid, (t.pod.get("metadata") or {}).get("labels"))
                                                for t in victim.tasks.values()])
        alive = {t.uid for t in everywhere}
        here = {t.uid: t for t in local}
        grouped = {u for g in groups.values() for u in g.members}
        views = [_subgroups.VictimGroup(g.uid, g.policy, g.size, tuple(sorted(u for u in g.members if u in alive)),
                                        sum(1 for u in g.members if u in here)) for g in groups.values()]
        surplus = victim.ready_task_num() - victim.min_available
        chosen = set(_subgroups.safe_subgroups(views, subgroups.minimums(policies), max(surplus, 0)
                                               if surplus >= 0 else len(alive)))
        safe = [u for v in views if v.uid in chosen for u in v.running]
        loose = [t.uid for t in local if t.uid not in grouped]
        room = surplus - len(safe) if surplus >= 0 else len(loose)  # a broken gang: whatever runs here may go
        safe += loose[:max(room, 0)]
        out: list[_gang.Bundle] = []
        freed = [here[u].resreq for u in safe if u in here]
        if freed and (budget is None or len(safe) <= budget):
            out.append(_gang.Bundle(victim.uid, False, tuple(safe), np.sum(freed, axis=0), victim.priority, rank))
        if self.allow_whole and surplus >= 0 and (budget is None or len(alive) <= budget):
            out.append(_gang.Bundle(victim.uid, True, tuple(sorted(alive)),
                                    np.sum([t.resreq for t in local], axis=0), victim.priority, rank))
        return out

    def attempt(self, ssn: Session, queue: Queue, job: Job, pending: list[Task], rows: np.ndarray,
                plan: _gang.Plan, domain: str = "") -> bool:
        stmt = ssn.statement()
        self._evict(ssn, stmt, plan)
        inside = set(int(r) for r in rows)
        for task in pending:
            self._pipeline_in(ssn, stmt, queue, task, inside)
        if not ssn.job_pipelined(job):
            stmt.discard()
            return False
        self._commit(ssn, stmt, job, [plan], _network.Nomination(domain))
        return True

    def _evict(self, ssn: Session, stmt: Any, plan: _gang.Plan) -> None:
        by_uid = {t.uid: t for b in plan.bundles for t in _tasks_of(ssn.jobs[b.job])}
        for uid in plan.tasks:
            if by_uid[uid].status in self.statuses:  # one evicted for an earlier subgroup is already going
                stmt.evict(by_uid[uid], self.reason)

    def _commit(self, ssn: Session, stmt: Any, job: Job, plans: list[_gang.Plan],
                nomination: _network.Nomination) -> None:
        stmt.commit()
        seen: set[str] = set()
        for b in (b for plan in plans for b in plan.bundles):
            if b.job in seen:
                continue  # one event per victim even when two subgroups' plans took from it
            seen.add(b.job)
            victim = ssn.jobs[b.job]
            what = "all its running pods" if b.whole else f"{len(b.tasks)} pod(s) above its minAvailable"
            ssn.record_podgroup_event(victim, "Warning", "Evict",
                                      f"{self.name}: {what} evicted for job {job.uid} (priority {job.priority})")
        if nomination:
            _network.nominate(ssn, job, nomination)

    @staticmethod
    def _pipeline_in(ssn: Session, stmt: Any, queue: Queue, task: Task, inside: set[int]) -> bool:
        if not ssn.allocatable(queue, task):
            return False
        arrays = ssn.arrays
        for node in preempt_candidate_nodes(ssn, task):
            if node in inside and fits(task.init_resreq, arrays.future_idle_row(node)):
                stmt.pipeline(task, node)
                return True
        return False

    def preempt_subgroups(self, ssn: Session, queue: Queue, job: Job, pending: list[Task], domain: str,
                          rows: np.ndarray, policies: list[dict[str, Any]], *,
                          dry_run: bool = True) -> tuple[int, int, int] | None:
        """A preemptor with a subGroupPolicy, in one domain: its subgroups in allocate's order, each whole under a
        HyperNode of its allowed tiers inside the domain (lowest tier first): per HyperNode the cheapest victim
        sets that free room for the subgroup (`_gang.choose`), the cheapest over the tier tried first, until its
        pods are pipelined there; then the pods of no subgroup. When every policy has minSubGroups ready
        subgroups and the gang is pipelined: the victims' total cost (broken gangs, pods, priority), committed
        unless `dry_run`; else None. A dry run leaves nothing applied."""
        tree = _network._tree(ssn)
        index = ssn.arrays.index
        inside = set(int(r) for r in rows)
        groups = subgroups.partition(policies, [(t.uid, (t.pod.get("metadata") or {}).get("labels"))
                                                for t in job.tasks.values()])
        mins = subgroups.minimums(policies)
        todo = {t.uid: t for t in pending}
        placed = {g.uid: sum(1 for u in g.members if job.tasks[u].status in _READY_OR_PLACED) for g in groups.values()}
        stmt = ssn.statement()
        plans: list[_gang.Plan] = []
        where: dict[str, str] = {}
        for gid in _subgroups.order(groups, todo, mins):
            mine = [todo[u] for u in groups[gid].members if u in todo]
            if not mine:
                continue
            need = np.sum([t.init_resreq for t in mine], axis=0)
            for names in _subgroups.subgroup_domains(tree, domain or None, groups[gid].network_topology):
                tries = []
                for k, name in enumerate(names):
                    here = rows if name is None else np.array(
                        sorted(inside & set(int(r) for r in tree.rows(name, index))), dtype=np.intp)
                    if not len(here):
                        continue
                    for j, plan in enumerate(_gang.choose(need, self._idle(ssn, here), self.bundles(ssn, job, here),
                                                          PLANS_PER_DOMAIN)):
                        tries.append((plan.cost, k, j, name, plan, here))
                tries.sort(key=lambda x: (x[0], x[1], x[2]))
                hit = False
                for _, _, _, name, plan, here in tries[:MAX_ATTEMPTS]:
                    sub = ssn.statement()
                    self._evict(ssn, sub, plan)
                    if all(_pipeline_within(ssn, sub, queue, t, here) for t in mine):
                        stmt.merge(sub)
                        plans.append(plan)
                        placed[gid] += len(mine)
                        if name or domain:
                            where[gid] = name or domain
                        hit = True
                        break
                    sub.discard()
                if hit:
                    break
        grouped = {u for g in groups.values() for u in g.members}
        for task in pending:
            if task.uid not in grouped:
                self._pipeline_in(ssn, stmt, queue, task, inside)
        if not (plans and any(p.bundles for p in plans)) or not subgroups.ready(
                subgroups.count_ready(groups.values(), placed), mins) or not ssn.job_pipelined(job):
            stmt.discard()  # nothing to evict (allocate's business), or the gang still does not fit
            return None
        costs = [p.cost for p in plans]
        total = (sum(c[0] for c in costs), sum(c[1] for c in costs), sum(c[2] for c in costs))
        if dry_run:
            stmt.discard()
        else:
            self._commit(ssn, stmt, job, plans, _network.Nomination(domain, where))
        return total

    @staticmethod
    def _idle(ssn: Session, rows: np.ndarray) -> np.ndarray:
        return np.sum([ssn.arrays.future_idle_row(int(r)) for r in rows], axis=0)


class GangReclaim(GangPreempt):
    name = "gangreclaim"
    reason = "gangreclaim"
    statuses = frozenset({TaskStatus.RUNNING})

    def eligible_queue(self, ssn: Session, queue: Queue) -> bool:
        return not ssn.overused(queue)

    def victim_job(self, ssn: Session, preemptor: Job, victim: Job) -> bool:
        """Another queue that is reclaimable and holds at least its deserved share (proportion's overused)."""
        other = ssn.queues.get(victim.queue)
        return (victim.queue != preemptor.queue and other is not None and other.reclaimable
                and ssn.overused(other))

    def rank(self, ssn: Session, victims: list[Job]) -> dict[str, int]:
        """The last queue in queue order first (Volcano SortBundlesForReclaim), then the lowest job order."""
        queues = _sorted_by_less(sorted({j.queue for j in victims}),
                                 lambda a, b: ssn.queue_order(ssn.queues[b], ssn.queues[a]))
        qrank = {q: i for i, q in enumerate(queues)}
        jrank = GangPreempt.rank(self, ssn, victims)
        ordered = sorted(victims, key=lambda j: (qrank[j.queue], jrank[j.uid]))
        return {j.uid: i for i, j in enumerate(ordered)}


def _pipeline_within(ssn: Session, stmt: Any, queue: Queue, task: Task, rows: np.ndarray) -> bool:
    """Pipeline `task` on the best-scored of `rows` whose predicate failures (if any) evicting resolves and whose
    future idle resources hold it; scores only those nodes (a subgroup's HyperNode, not the cluster)."""
    if not ssn.allocatable(queue, task):
        return False
    f = ssn.predicate(task)
    idx = rows if f.unresolvable is None else rows[(f.feasible | ~f.unresolvable)[rows]]
    idx = idx[np.all(task.init_resreq <= ssn.arrays.future_idle()[idx] + EPSILON, axis=1)] if len(idx) else idx
    if not len(idx):
        return False
    stmt.pipeline(task, int(idx[int(np.argmax(ssn.node_scores(task, idx)))]))
    return True


def victims_order_job(ssn: Session) -> Callable[[Job], Any]:
    """Victim jobs, the lowest in job order first (reverse JobOrderFn), then by uid."""
    def cmp(a: Job, b: Job) -> int:
        if ssn.job_order(b, a):
            return -1
        if ssn.job_order(a, b):
            return 1
        return (a.uid > b.uid) - (a.uid < b.uid)
    return functools.cmp_to_key(cmp)


def _sorted_by_less(items: list[str], less: Callable[[str, str], bool]) -> list[str]:
    return sorted(items, key=functools.cmp_to_key(lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0)))


def _healthy_counter(ssn: Session) -> Callable[[str, selectors.LabelSelector], int]:
    def healthy(ns: str, sel: selectors.LabelSelector) -> int:
        return sum(1 for j in ssn.jobs.values() if j.namespace == ns
                   for t in j.index.get(TaskStatus.RUNNING, {}).values()
                   if sel.matches((t.pod.get("metadata") or {}).get("labels") or {}))
    return healthy


def _tasks_of(job: Job) -> list[Task]:
    return [t for s in EVICTABLE for t in job.index.get(s, {}).values()]


def evictable_task(t: Task) -> bool:
    """The pod's own preemptable flag and the conformance rule: no critical pods, nothing in kube-system."""
    spec = t.pod.get("spec") or {}
    return t.preemptable and spec.get("priorityClassName") not in CRITICAL and t.namespace != "kube-system"


def job_preemptable(job: Job) -> bool:
    """Volcano IsJobPreemptableForGangEviction: a PodGroup `volcano.sh/preemptable` annotation or label decides."""
    meta = job.podgroup.get("metadata") or {}
    for src in (meta.get("annotations") or {}, meta.get("labels") or {}):
        if PREEMPTABLE_KEY in src:
            return _flag(src[PREEMPTABLE_KEY])
    return True


def pdb_budgets(pdbs: Mapping[str, Mapping[str, Any]],
                healthy: Callable[[str, selectors.LabelSelector], int] | None = None,
                ) -> list[tuple[str, selectors.LabelSelector, int]]:
    """(namespace, selector, disruptions allowed) of each policy/v1 PodDisruptionBudget of the snapshot: its
    `status.disruptionsAllowed` when the status is current (observedGeneration ≥ generation), else computed as the
    disruption controller would from `healthy(namespace, selector)` (the matching running pods) and
    `spec.minAvailable` / `spec.maxUnavailable` (integer or percent); 0 when neither is known."""
    out = []
    for pdb in pdbs.values():
        meta = pdb.get("metadata") or {}
        spec = pdb.get("spec") or {}
        status = pdb.get("status") or {}
        ns = meta.get("namespace", "")
        try:
            sel = selectors.from_label_selector(spec.get("selector"))
        except selectors.SelectorError:
            continue
        current = "disruptionsAllowed" in status and int(status.get("observedGeneration") or 0) >= int(
            meta.get("generation") or 0)
        if current or healthy is None:
            allowed = _int(status.get("disruptionsAllowed"))
        else:
            allowed = disruptions_allowed(spec, healthy(ns, sel))
        out.append((ns, sel, allowed))
    return out


def disruptions_allowed(spec: Mapping[str, Any], healthy: int) -> int:
    """Pods that may go now: healthy − desired healthy; the expected count is the healthy count (no scale lookup)."""
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], healthy, up=True)
    elif spec.get("maxUnavailable") is not None:
        desired = healthy - _scaled(spec["maxUnavailable"], healthy, up=True)
    else:
        return 0
    return max(0, healthy - desired)


def _scaled(value: object, total: int, *, up: bool) -> int:
    text = str(value).strip()
    if text.endswith("%"):
        pct = _int(text[:-1])
        return -(-pct * total // 100) if up else pct * total // 100
    return _int(text)


def _int(value: object) -> int:
    try:
        return int(str(value).strip()) if value is not None else 0
    except ValueError:
        return 0


def budget_for(budgets: list[tuple[str, selectors.LabelSelector, int]], tasks: list[Task]) -> int | None:
    """The fewest disruptions any PDB covering these pods allows (None: no PDB covers them)."""
    got: int | None = None
    for ns, sel, allowed in budgets:
        if any(t.namespace == ns and sel.matches((t.pod.get("metadata") or {}).get("labels") or {}) for t in tasks):
            got = allowed if got is None else min(got, allowed)
    return got


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in ("false", "0", "no", "off")
