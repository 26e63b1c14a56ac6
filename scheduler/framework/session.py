"""One scheduling session: a snapshot, the configured plugins in tiers, hook dispatch, and the decisions made.

`scheduler.session.run_session` opens a `Session`, runs the configured actions on it and closes it into
`Decisions`; `scheduler.commit` applies those to the cluster. Combination rules are Volcano's (spec §5.2).
"""

from __future__ import annotations

import datetime as dt
import functools
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from lahar.scheduler.framework import hooks, scorereuse
from lahar.scheduler.framework.conf import PluginOption, SchedulerConf
from lahar.scheduler.framework.hooks import MetricsSink, NodeFilter, Status, Vote
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, RowCache
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.snapshot import (
    FitErrors,
    Job,
    Queue,
    Snapshot,
    Task,
    TaskStatus,
    node_kind,
)
from lahar.scheduler.framework.statement import Statement
from lahar.scheduler.framework.status import PodCondition, PodGroupUpdate, close_job, queue_status

__all__ = ["Bind", "Closed", "Decisions", "Eviction", "PodCondition", "PodGroupUpdate", "Session"]


@dataclass(frozen=True, slots=True)
class Bind:
    namespace: str
    name: str
    uid: str
    node: str
    job: str


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    name: str
    uid: str
    reason: str
    job: str


@dataclass(frozen=True, slots=True)
class Closed:
    """What `Session.close` computed for a job that it left unchanged, with the inputs it was computed from."""

    version: int
    key: tuple[str, ...]
    phase: str
    status: Any  # the stored PodGroup status object it was computed against (identity)
    update: PodGroupUpdate
    pod_conditions: tuple[PodCondition, ...]
    pipelined: dict[str, str]
    more: bool  # pod conditions or pipelined tasks


@dataclass(slots=True)
class Decisions:
    """What one session decided, as plain data; `scheduler.commit.apply` writes it to the cluster."""

    session: str
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, PodGroupUpdate] = field(default_factory=dict)
    pod_conditions: list[PodCondition] = field(default_factory=list)
    queues: dict[str, dict[str, str]] = field(default_factory=dict)
    queues_changed: list[str] = field(default_factory=list)
    # queue → its PodGroups per phase counter (pending, inqueue, running, unknown, completed), from this session
    queue_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    # pod uid → annotations written with its bind (Binding metadata, applied with the node assignment): device
    # and NUMA decisions of the deviceshare and numa-aware plugins
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # job uid ("namespace/name") → PodGroup annotations to merge: the allocated HyperNode (actions/_network.py)
    podgroup_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # pod uid → volume binding before its bind (plugins/predicates): {namespace, claim, kind "bind" | "provision",
    # volume, node} — a static PV's claimRef, or the claim's selected-node annotation for the provisioner
    volumes: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    # pod uid → ResourceClaims to write before its bind (plugins/_dra.py): {namespace, claim, node, pod, pod_uid,
    # allocation (None when the claim is already allocated: the pod only joins `reservedFor`)}
    claims: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # seconds a pod's bind waits for its claims, from the conf (predicates' `volumebinding.bindTimeoutSeconds`);
    # None: commit's own bound
    volume_bind_timeout: float | None = None

    def bind_map(self) -> dict[str, str]:
        return {f"{b.namespace}/{b.name}": b.node for b in self.binds}


T = TypeVar("T")


def _fits_future_idle(arrays: NodeArrays, req: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Per node (or per row of `rows`): does `req` fit future idle? Idle alone when that is the same. A row or two
    (what one placement changes) in Python floats: the same IEEE sums and comparisons, without numpy's per-call cost."""
    if rows is not None and len(rows) <= 2:
        r = req.tolist()
        out = []
        for i in rows.tolist():
            idle = arrays.idle[i].tolist()
            if not arrays.future_is_idle():
                rel, pip = arrays.releasing[i].tolist(), arrays.pipelined[i].tolist()
                idle = [(x + y) - z for x, y, z in zip(idle, rel, pip, strict=True)]
            out.append(all(q <= x + EPSILON for q, x in zip(r, idle, strict=True)))
        return np.array(out, dtype=bool)
    if arrays.future_is_idle():
        return (req <= (arrays.idle if rows is None else arrays.idle[rows]) + EPSILON).all(axis=1)
    if rows is None:
        return (req <= arrays.future_idle() + EPSILON).all(axis=1)  # type: ignore[no-any-return]
    return (req <= arrays.idle[rows] + arrays.releasing[rows] - arrays.pipelined[rows] + EPSILON).all(axis=1)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def compare_task_default(left: Task, right: Task) -> int:
    """Volcano helpers.CompareTask: pod index (name suffix) when both have one, else creation time, then UID."""
    if left.index is not None and right.index is not None and left.index != right.index:
        return -1 if left.index < right.index else 1
    if left.creation != right.creation:
        return -1 if left.creation < right.creation else 1
    return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)


def _compare_created(left: Job | Queue, right: Job | Queue) -> int:
    if left.creation != right.creation:
        return -1 if left.creation < right.creation else 1
    return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)


class Session:
    """Open on a snapshot: builds the plugins of every tier (fresh per session) and calls `on_session_open`."""

    def __init__(self, snapshot: Snapshot, conf: SchedulerConf, registry: Registry, *, uid: str | None = None,
                 now: Callable[[], str] = _now, shared: dict[Hashable, Any] | None = None) -> None:
        self.uid = uid or str(uuid.uuid4())
        self._state: dict[Hashable, Any] = {}
        # state kept across sessions by the session's owner (the scheduler cache, a simulation); a fresh one when
        # nobody keeps it, so nothing is process-wide
        self._shared: dict[Hashable, Any] = shared if shared is not None else {}
        self.snapshot = snapshot
        self.conf = conf
        self.registry = registry
        self.timestamp = now()
        self.now = lambda: self.timestamp
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.nodes = snapshot.nodes
        self.arrays = snapshot.arrays
        self.resources = snapshot.resources
        self.total = snapshot.total
        self.decisions = Decisions(session=self.uid)
        # job uid → the HyperNode it runs under (Volcano JobInfo.AllocatedHyperNode), as allocate decides it
        self.allocated_hypernodes: dict[str, str] = {}
        self.tiers: list[list[tuple[PluginOption, Any]]] = []
        self.plugins: dict[str, Any] = {}
        self._hooks: dict[str, list[list[Any]]] = {}
        self._handlers: list[Any] = []
        # the jobs `close()` computes a PodGroup status for (set when it starts; the others are settled: see close())
        self.closing: list[Job] = []
        snapshot.closed_jobs = None  # until this session closes
        self.plugin_seconds: Counter[str] = Counter()
        arrays = self.arrays
        self.fit_future_idle = RowCache(arrays, lambda req, rows: _fits_future_idle(arrays, req, rows))
        self.fit_idle = RowCache(arrays, lambda req, rows: (
            (req <= arrays.idle + EPSILON).all(axis=1) if rows is None else
            (req <= arrays.idle[rows] + EPSILON).all(axis=1)))
        self._open()

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def _open(self) -> None:
        for tier in self.conf.tiers:
            built = []
            for option in tier.plugins:
                plugin = self.registry.plugin(option.name, option.arguments)
                built.append((option, plugin))
                self.plugins[option.name] = plugin
            self.tiers.append(built)
        for name, (proto, switch) in hooks.HOOKS.items():
            self._hooks[name] = [[p for opt, p in tier if _implements(p, proto) and opt.enabled(switch)]
                                 for tier in self.tiers]
        self._handlers = [p for tier in self.tiers for _, p in tier if _implements(p, hooks.EventHandler)]
        self._predicates: list[Any] = list(self.hooked("predicate"))
        self._node_orders: list[Any] = list(self.hooked("node_order"))
        # per node-order plugin, its `node_order_reuse` (None: none); None when the session reuses no score
        reuse = [getattr(p, "node_order_reuse", None) for p in self._node_orders]
        self._score_reuse: list[Any] | None = ([r if r is not None else scorereuse.no_reuse for r in reuse]
                                               if len(reuse) > 1 and any(reuse) else None)
        self._score_entries: OrderedDict[tuple[Any, ...], scorereuse.Scores] = OrderedDict()
        self._job_readies: list[Any] = list(self.hooked("job_ready"))  # asked after every task allocate places
        self._allocatables: list[Any] = list(self.hooked("allocatable"))
        self._best_nodes: list[Any] = list(self.hooked("best_node"))
        self._resolvable = np.zeros(len(self.arrays), dtype=bool)  # "no failure unresolvable", shared: read-only
        self._resolvable.flags.writeable = False
        for tier in self.tiers:
            for _, plugin in tier:
                if _implements(plugin, hooks.SessionOpen):
                    t0 = time.perf_counter()
                    plugin.on_session_open(self)
                    self.plugin_seconds[f"{plugin.name}:OnSessionOpen"] += time.perf_counter() - t0

    # --- state shared by plugins ----------------------------------------------------------------------------------

    def state(self, key: Hashable, factory: Callable[[], T]) -> T:
        """This session's value for `key` (kube-scheduler's CycleState): `factory()` on first use, then the same
        object for every plugin that asks, dropped with the session. Plugins that share work (numa-aware and
        deviceshare's placement, predicates and nodeorder's pod view) meet here instead of in module globals."""
        try:
            return self._state[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._state[key] = factory()
            return value

    def shared_state(self, key: Hashable, factory: Callable[[], T]) -> T:
        """Like `state`, but kept by the session's owner across sessions (caches of what is derived from API
        objects by resourceVersion); per session when the owner keeps none."""
        try:
            return self._shared[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._shared[key] = factory()
            return value

    def hooked(self, hook: str) -> Iterator[Any]:
        """The plugins answering `hook`, tier by tier, with their switch on."""
        for tier in self._hooks[hook]:
            yield from tier

    def has_hook(self, hook: str) -> bool:
        return any(self._hooks[hook])

    # --- orders: first non-zero compare wins; fallbacks creation time then UID (tasks: CompareTask) ----------------

    def _order(self, hook: str, left: Any, right: Any) -> int:
        for tier in self._hooks[hook]:
            for p in tier:
                c = getattr(p, hook)(left, right)
                if c:
                    return c
        return 0

    def job_order(self, left: Job, right: Job) -> bool:
        c = self._order("job_order", left, right)
        return c < 0 if c else _compare_created(left, right) < 0

    def queue_order(self, left: Queue, right: Queue) -> bool:
        c = self._order("queue_order", left, right)
        return c < 0 if c else _compare_created(left, right) < 0

    def task_order(self, left: Task, right: Task) -> bool:
        c = self._order("task_order", left, right)
        return c < 0 if c else compare_task_default(left, right) < 0

    def task_key(self) -> Callable[[Task], Any]:
        return functools.cmp_to_key(lambda a, b: -1 if self.task_order(a, b) else (1 if self.task_order(b, a) else 0))

    # --- job verdicts --------------------------------------------------------------------------------------------

    def job_valid(self, job: Job) -> Status | None:
        """First failing status wins."""
        for p in self.hooked("job_valid"):
            st = p.job_valid(job)
            if st is not None and not st.ok:
                return st
        return None

    def job_ready(self, job: Job) -> bool:
        """AND over plugins."""
        return all(p.job_ready(job) for p in self._job_readies)

    def _vote(self, hook: str, job: Job) -> bool:
        """Any REJECT → False; a tier with a PERMIT → True; otherwise next tier; default True."""
        for tier in self._hooks[hook]:
            permit = False
            for p in tier:
                v = getattr(p, hook)(job)
                if v == Vote.REJECT:
                    return False
                if v == Vote.PERMIT:
                    permit = True
            if permit:
                return True
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._vote("job_pipelined", job)

    def job_enqueueable(self, job: Job) -> bool:
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: Job) -> None:
        for p in self.hooked("job_enqueued"):
            p.job_enqueued(job)

    def job_starving(self, job: Job) -> bool:
        """The first tier with a plugin decides (AND within it); default False."""
        for tier in self._hooks["job_starving"]:
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    # --- victims: intersect per tier; the first tier with a non-empty answer decides ---------------------------

    def _victims(self, hook: str, actor: Task, candidates: list[Task]) -> list[Task]:
        victims: list[Task] | None = None
        init = False
        for tier in self._hooks[hook]:
            for p in tier:
                got = getattr(p, hook)(actor, candidates)
                if got is None:
                    continue
                if not got:
                    victims = None
                    break
                if not init:
                    victims = list(got)
                    init = True
                else:
                    keep = {t.uid for t in got}
                    victims = [v for v in (victims or []) if v.uid in keep]
            if victims is not None:
                return victims
        return victims or []

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task]:
        return self._victims("preemptable", preemptor, preemptees)

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task]:
        return self._victims("reclaimable", reclaimer, reclaimees)

    def victim_tasks(self, tasks: list[Task]) -> list[tuple[Task, str]]:
        """The union of the proposals within a tier, first proposal order, no task twice; the first tier with a
        non-empty union decides (Volcano's VictimTasks). Each victim comes with why: the proposing plugin's
        `victim_reason(task)` when it has one, else the plugin's name."""
        for tier in self._hooks["victim_tasks"]:
            seen: dict[str, tuple[Task, str]] = {}
            for p in tier:
                explain = getattr(p, "victim_reason", None)
                for t in p.victim_tasks(tasks):
                    if t.uid not in seen:
                        seen[t.uid] = (t, explain(t) if explain is not None else p.name)
            if seen:
                return list(seen.values())
        return []

    def victim_filter(self, victims: list[Task]) -> list[Task]:
        """What every filtering plugin lets go, in the victims' order (AND over plugins, all tiers)."""
        for p in self.hooked("victim_filter"):
            if not victims:
                break
            keep = {t.uid for t in p.victim_filter(victims)}
            victims = [v for v in victims if v.uid in keep]
        return list(victims)

    # --- queue verdicts ------------------------------------------------------------------------------------------

    def overused(self, queue: Queue) -> bool:
        """OR over plugins."""
        return any(p.overused(queue) for p in self.hooked("overused"))

    def allocatable(self, queue: Queue, task: Task) -> bool:
        """AND over plugins."""
        return all(p.allocatable(queue, task) for p in self._allocatables)

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """AND over plugins."""
        return all(p.preemptive(queue, task) for p in self.hooked("preemptive"))

    # --- nodes ---------------------------------------------------------------------------------------------------

    def pre_predicate(self, task: Task) -> Status | None:
        """All must pass: the first failing status, or None."""
        for p in self.hooked("pre_predicate"):
            st = p.pre_predicate(task)
            if st is not None and not st.ok:
                return st
        return None

    def predicate(self, task: Task) -> NodeFilter:
        """AND of every plugin's vectorised predicate; a node's reason is the first plugin's that rejected it. An
        answer that passes every node (`all_feasible`) is skipped."""
        n = len(self.arrays)
        feasible: np.ndarray | None = None
        reasons: np.ndarray | None = None
        unresolvable: np.ndarray | None = None
        for p in self._predicates:
            f = p.predicate(task, self.arrays)
            if f.all_feasible:
                continue
            if feasible is None:
                feasible = np.array(f.feasible, dtype=bool)
                newly = ~feasible
                if not newly.any():
                    continue
            else:
                newly = feasible & ~f.feasible
                if not newly.any():
                    continue
                feasible &= f.feasible
            if reasons is None:
                reasons = np.full(n, None, dtype=object)
            if f.reasons is not None:
                reasons[newly] = f.reasons[newly]
            else:
                reasons[newly] = f"node(s) rejected by {p.name}"
            if f.unresolvable is not None:
                if unresolvable is None:
                    unresolvable = np.zeros(n, dtype=bool)
                unresolvable |= newly & f.unresolvable
        if reasons is None:  # no node rejected: a fresh all-True array
            return NodeFilter(np.ones(n, dtype=bool) if feasible is None else feasible, None, self._resolvable, True)
        return NodeFilter(feasible, reasons, unresolvable if unresolvable is not None else self._resolvable)

    def predicate_nodes(self, task: Task) -> tuple[np.ndarray, FitErrors | None]:
        """Allocate's predicate: init request fits future idle, then the plugins. Fit errors when nothing passes."""
        fit = self.fit_future_idle.get(task.init_resreq.tobytes(), task.init_resreq)
        f = self.predicate(task)
        feasible = fit & f.feasible
        if feasible.any():
            return feasible, None
        fi = self.arrays.future_idle()
        errors = FitErrors(total=len(self.arrays))
        if len(self.arrays):
            short = self.arrays.insufficient(task.init_resreq, fi)
            names = self.resources.names
            for i in range(len(self.arrays)):
                if short[i] >= 0:
                    errors.reasons[f"Insufficient {names[short[i]]}"] += 1
                elif f.reasons is not None and f.reasons[i] is not None:
                    errors.reasons[f.reasons[i]] += 1
        return feasible, errors

    def node_scores(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        """Summed scores of the node-order plugins over `candidates` (indices), in plugin order. With plugins that
        say how far their scores of a task last (`NodeOrderReuse`), what they said is reused (`_reused_scores`)."""
        plugins = self._node_orders
        if self._score_reuse is not None:
            keys = tuple([r(task) for r in self._score_reuse])
            if any(keys):
                return self._reused_scores(task, candidates, keys)
        if len(plugins) == 1:  # the default conf: nodeorder alone; a copy, as the sum would be a fresh array
            return np.array(plugins[0].node_order(task, self.arrays, candidates), dtype=np.float64)
        total = np.zeros(len(candidates), dtype=np.float64)
        for p in plugins:
            total += p.node_order(task, self.arrays, candidates)
        return total

    def _reused_scores(self, task: Task, candidates: np.ndarray, keys: tuple[Any, ...]) -> np.ndarray:
        """`node_scores` from the scores kept for these reuse answers: a plugin that answered is asked only for
        the rows changed since (REUSE_ROWS) or never again (REUSE_STATIC); the others as always. The sum runs in
        plugin order, element by element as `node_scores` adds, so every total is the same to the bit: the
        leading plugins that answered are kept summed over all nodes (`head`), a zero score is not added (x + 0.0
        is x), the rest is added over the candidates."""
        arrays = self.arrays
        version = len(arrays.changes)
        entries = self._score_entries
        entry = entries.get(keys)
        if entry is None:
            entry = scorereuse.Scores(self._node_orders, arrays, task, keys)
            entries[keys] = entry
            if len(entries) > 64:
                entries.popitem(last=False)
        else:
            entries.move_to_end(keys)
            if entry.version != version:
                entry.refresh(self._node_orders, arrays, task)
        total = entry.head[candidates] if entry.head is not None else np.zeros(len(candidates), dtype=np.float64)
        for p, vec, uniform in entry.tail:
            if vec is not None:
                total += vec[candidates]
            elif uniform:
                total += p.node_order_uniform(task)
            else:
                total += p.node_order(task, arrays, candidates)
        return total

    def best_node(self, task: Task, candidates: np.ndarray) -> int:
        """Highest score wins; ties go to the first node in name order (Volcano picks randomly)."""
        if len(candidates) == 1:
            return int(candidates[0])
        scores = self.node_scores(task, candidates)
        for p in self._best_nodes:
            choice = p.best_node(task, candidates, scores)
            if choice is not None:
                return int(choice)
        return int(candidates[int(np.argmax(scores))])

    # --- the view, changed only through Statement (and backfill's direct allocate) ---------------------------------

    def place(self, task: Task, node: int, status: TaskStatus) -> None:
        job = self.jobs[task.job]
        job.update_status(task, status)
        task.node = node
        task.node_name = self.arrays.names[node]
        self.nodes[node].tasks[task.uid] = task
        self.arrays.add(node, task.resreq, node_kind(status))
        for h in self._handlers:
            h.on_allocate(task)

    def unplace(self, task: Task) -> None:
        job = self.jobs[task.job]
        self.arrays.remove(task.node, task.resreq, node_kind(task.status))
        self.nodes[task.node].tasks.pop(task.uid, None)
        job.update_status(task, TaskStatus.PENDING)
        task.node = -1
        task.node_name = ""
        for h in self._handlers:
            h.on_deallocate(task)

    def release(self, task: Task) -> None:
        job = self.jobs[task.job]
        if task.node >= 0:
            self.arrays.remove(task.node, task.resreq, node_kind(task.status))
            self.arrays.add(task.node, task.resreq, "releasing")
        job.update_status(task, TaskStatus.RELEASING)
        for h in self._handlers:
            h.on_deallocate(task)

    def unrelease(self, task: Task, previous: TaskStatus) -> None:
        job = self.jobs[task.job]
        if task.node >= 0:
            self.arrays.remove(task.node, task.resreq, "releasing")
            self.arrays.add(task.node, task.resreq, node_kind(previous))
        job.update_status(task, previous)
        for h in self._handlers:
            h.on_allocate(task)

    def statement(self) -> Statement:
        return Statement(self)

    def allocate(self, task: Task, node: int) -> None:
        """Allocate and commit at once (backfill: no gang)."""
        stmt = Statement(self)
        stmt.allocate(task, node)
        stmt.commit()

    def record_bind(self, task: Task) -> None:
        self.decisions.binds.append(Bind(task.namespace, task.name, task.uid, task.node_name, task.job))

    def record_eviction(self, task: Task, reason: str) -> None:
        self.decisions.evictions.append(Eviction(task.namespace, task.name, task.uid, reason, task.job))

    # --- PodGroup conditions and events (gang, enqueue) ------------------------------------------------------------

    def update_podgroup_condition(self, job: Job, condition: dict[str, Any]) -> None:
        """Replace the condition of the same type (Volcano UpdatePodGroupCondition)."""
        job.conditions[condition["type"]] = condition

    def record_podgroup_event(self, job: Job, type_: str, reason: str, message: str) -> None:
        job.events.append((type_, reason, message))

    # --- metrics ---------------------------------------------------------------------------------------------------

    def report_metrics(self) -> MetricsSink:
        """What every plugin reports for the metrics (before close: plugins drop their state there)."""
        sink = MetricsSink()
        for p in self.hooked("report_metrics"):
            p.report_metrics(sink)
        return sink

    # --- close ---------------------------------------------------------------------------------------------------

    def close(self) -> Decisions:
        """Run the plugins' `on_session_close`, then compute each job's PodGroup status and pod conditions.

        A job is settled when nothing it is closed from changed since the last session closed it: same tasks in the
        same statuses (`Job.version`), same stored PodGroup status, same phase, no fit errors or events this session,
        the same session-close plugins, and that close changed nothing (no status write, no events). Its result
        would be the same again, so it is reused: `self.closing` lists the other jobs, the only ones close plugins
        (gang's conditions) and the status computation look at."""
        key = self._close_key()
        closing: list[Job] = []
        settled: dict[str, PodGroupUpdate] = {}
        more: list[Closed] = []  # settled with pod conditions or pipelined tasks to report again
        for uid, job in self.jobs.items():
            c = job.closed
            if (c is not None and c.version == job.version and c.phase == job.phase and c.key is key
                    and c.status is job.podgroup.get("status") and not job.fit_errors and not job.events):
                settled[uid] = c.update
                if c.more:
                    more.append(c)
            else:
                closing.append(job)
        self.closing = closing
        for tier in self.tiers:
            for _, plugin in tier:
                if _implements(plugin, hooks.SessionClose):
                    t0 = time.perf_counter()
                    plugin.on_session_close(self)
                    self.plugin_seconds[f"{plugin.name}:OnSessionClose"] += time.perf_counter() - t0
        d = self.decisions
        d.podgroups.update(settled)
        for c in more:
            d.pod_conditions.extend(c.pod_conditions)
            d.pipelined.update(c.pipelined)
        for job in closing:
            self._close_job(job, key)
        self.snapshot.closed_jobs = closing
        self._queue_status()
        for key_, secs in self.plugin_seconds.items():
            d.timings[f"plugin:{key_}"] = secs
        d.counters["podgroups_settled"] = len(settled)
        return d

    def _close_key(self) -> tuple[str, ...]:
        """What besides the job itself decides its close: the session-close plugins (gang writes the conditions).
        One object per distinct key, so that settled jobs compare it by identity."""
        key = tuple(p.name for tier in self.tiers for _, p in tier if _implements(p, hooks.SessionClose))
        return _CLOSE_KEYS.setdefault(key, key)

    def _close_job(self, job: Job, key: tuple[str, ...]) -> None:
        """The job's status writes (`status.close_job`, pure) into the decisions; kept on the job for the next
        session to reuse when they wrote nothing and came from nothing only this session had."""
        got = close_job(job, self.uid)
        d = self.decisions
        if got.pipelined:
            d.pipelined.update(got.pipelined)
        d.podgroups[job.uid] = got.update
        d.pod_conditions.extend(got.conditions)
        if got.reusable:
            job.closed = Closed(job.version, key, job.phase, job.podgroup.get("status"), got.update,
                                tuple(got.conditions), got.pipelined, bool(got.conditions or got.pipelined))
        else:
            job.closed = None  # a write (with this session's times and ids), or inputs only this session had

    def _queue_status(self) -> None:
        """queue.status.allocated and the PodGroup counts per phase, from the phases this close computed
        (`status.queue_status`, pure)."""
        d = self.decisions
        phases = {uid: (upd.status.get("phase") or "") for uid, upd in d.podgroups.items()}
        allocated, counts, changed = queue_status(list(self.jobs.values()), self.queues, self.resources, phases)
        d.queues.update(allocated)
        d.queue_counts.update(counts)
        d.queues_changed.extend(changed)


_CLOSE_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _implements(plugin: Any, proto: type[Any]) -> bool:
    """`isinstance(plugin, proto)` for a runtime-checkable hook protocol (every member present, not None), without
    the protocol machinery's walk over the protocol's bases on every call. Hooks may be instance attributes."""
    return all(getattr(plugin, m, None) is not None for m in _members(proto))


@functools.lru_cache(maxsize=256)
def _members(proto: type[Any]) -> tuple[str, ...]:
    names: set[str] = set()
    for base in proto.__mro__:
        if base in (object, Protocol, Generic):
            continue
        names.update(n for n in vars(base) if not n.startswith("_"))
        names.update(getattr(base, "__annotations__", {}))
    return tuple(sorted(names))
