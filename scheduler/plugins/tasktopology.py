"""task-topology: affinity and anti-affinity between the tasks of one job, by buckets (Volcano's
`plugins/task-topology`).

A PodGroup names its tasks (pod annotation `volcano.sh/task-spec`) in `volcano.sh/task-topology-affinity` and
`volcano.sh/task-topology-anti-affinity` (groups split by `;`, tasks by `,`: `ps,worker;ps,chief`; a group of one
is the task with itself) and `volcano.sh/task-topology-task-order` (`ps,worker`). At session open each job with
pending tasks gets a `JobManager` that sorts its topology tasks (bound first, by node; then by task order and
affinity kind) and packs them into buckets: a task goes to the bucket its affinities pull it into most, a new one
when it is repelled. Tasks of fuller buckets go first; a node scores by the bucket's tasks already there, minus
anti-affinity with what is bound on it, plus the bucket's pending tasks, less one for each of them the node could
not also hold; × `task-topology.weight` × 100 / the largest bucket. All of it is pure over the session's tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from lahar.kube.models import labels as keys
from lahar.scheduler.framework.hooks import REUSE_STATIC
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task, TaskStatus

__all__ = ["Bucket", "JobManager", "TaskTopology", "Topology", "parse_topology"]

WEIGHT = "task-topology.weight"
MAX_NODE_SCORE = 100.0

# the kinds of topology a task can have, and how strongly each orders it (upstream's affinityPriority)
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1


class Topology:
    """A job's parsed annotations: groups of task names (blanks kept, as upstream keeps them) and the task order."""

    __slots__ = ("affinity", "anti_affinity", "task_order")

    def __init__(self, affinity: list[list[str]] | None = None, anti_affinity: list[list[str]] | None = None,
                 task_order: list[str] | None = None) -> None:
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        self.task_order = task_order

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and (self.affinity, self.anti_affinity, self.task_order) == (
            other.affinity, other.anti_affinity, other.task_order)

    def __repr__(self) -> str:
        return f"Topology({self.affinity!r}, {self.anti_affinity!r}, {self.task_order!r})"


def _check(groups: list[list[str]], roles: Iterable[str], where: str) -> None:
    known = set(roles)
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in known:
                raise ValueError(f"task {name} do not exist in job <{where}>")
            if name in seen:
                raise ValueError(f"task {name} is duplicate in job <{where}>")
            seen.add(name)


def parse_topology(annotations: Mapping[str, str] | None, roles: Iterable[str], where: str) -> Topology | None:
    """The job's topology from its PodGroup annotations (None without any of the three); ValueError with
    upstream's text when a group names a task the job does not have, or one task twice."""
    ann = annotations or {}
    keys_ = (keys.TASK_TOPOLOGY_AFFINITY_KEY, keys.TASK_TOPOLOGY_ANTI_AFFINITY_KEY, keys.TASK_TOPOLOGY_ORDER_KEY)
    if not any(k in ann for k in keys_):
        return None
    roles = list(roles)
    out = Topology()
    for key, attr in ((keys_[0], "affinity"), (keys_[1], "anti_affinity")):
        if key in ann:
            groups = [g.split(",") for g in str(ann[key]).split(";")]
            _check(groups, roles, where)
            setattr(out, attr, groups)
    if keys_[2] in ann:
        out.task_order = str(ann[keys_[2]]).split(",")
        _check([out.task_order], roles, where)
    return out


def req_score(resreq: np.ndarray) -> float:
    """Upstream's bucket weight of a request: milli-CPU + memory in MiB + every scalar (milli)."""
    return float(resreq[0] + resreq[1] / 1024 / 1024 + resreq[2:].sum())


class Bucket:
    """Tasks meant to land together: the pending ones (with their summed request) and where the bound ones are."""

    __slots__ = ("index", "tasks", "names", "req_score", "request", "bound", "nodes")

    def __init__(self, index: int, dims: int) -> None:
        self.index = index
        self.tasks: dict[str, Task] = {}  # pending tasks by uid, in the order they came
        self.names: dict[str, int] = {}  # task name → how many of the bucket's tasks carry it
        self.req_score = 0.0
        self.request = np.zeros(dims)
        self.bound = 0
        self.nodes: dict[str, int] = {}  # node → bound tasks of the bucket there

    def add(self, name: str, task: Task) -> None:
        self.names[name] = self.names.get(name, 0) + 1
        if task.node_name:
            self.nodes[task.node_name] = self.nodes.get(task.node_name, 0) + 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self.req_score += req_score(task.resreq)
        self.request = self.request + task.resreq

    def bind(self, task: Task, node: str) -> None:
        self.nodes[node] = self.nodes.get(node, 0) + 1
        self.bound += 1
        if self.tasks.pop(task.uid, None) is not None:
            self.req_score -= req_score(task.resreq)
            self.request = self.request - task.resreq

    def unbind(self, task: Task, node: str) -> None:
        self.nodes[node] -= 1
        self.bound -= 1
        self.tasks[task.uid] = task
        self.req_score += req_score(task.resreq)
        self.request = self.request + task.resreq


class JobManager:
    """One job's topology, its buckets, and what of it is bound where (upstream's JobManager)."""

    def __init__(self, topology: Topology, dims: int) -> None:
        self.dims = dims
        self.buckets: list[Bucket] = []
        self.in_bucket: dict[str, int] = {}  # task uid → bucket index (absent: out of any bucket)
        self.names: dict[str, str] = {}  # task uid → task name
        self.priority: dict[str, int] = {}  # task name → its strongest kind of topology
        self.order: dict[str, int] = {}  # task name → rank in task-order (higher first)
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        self.node_names: dict[str, dict[str, int]] = {}  # node → task name → tasks of the job bound there
        self._apply(topology)

    def _mark(self, name: str, kind: int) -> None:
        if kind > self.priority.get(name, 0):
            self.priority[name] = kind

    def _apply(self, topo: Topology) -> None:
        for groups, selfs, inter, self_kind, inter_kind in (
                (topo.affinity, self.self_affinity, self.inter_affinity, SELF_AFFINITY, INTER_AFFINITY),
                (topo.anti_affinity, self.self_anti, self.inter_anti, SELF_ANTI, INTER_ANTI)):
            for group in groups or ():
                if len(group) == 1:
                    selfs.add(group[0])
                    self._mark(group[0], self_kind)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        inter.setdefault(src, set()).add(dst)
                        inter.setdefault(dst, set()).add(src)
                    self._mark(src, inter_kind)
        order = topo.task_order or []
        for i, name in enumerate(order):
            self.order[name] = len(order) - i

    def affinity_order(self, left: Task, right: Task) -> int:
        """1 when `left`'s task ranks higher (task order, then kind of topology), -1 lower, 0 the same."""
        ln, rn = self.names.get(left.uid, ""), self.names.get(right.uid, "")
        if ln == rn:
            return 0
        for table in (self.order, self.priority):
            lo, ro = table.get(ln, 0), table.get(rn, 0)
            if lo != ro:
                return 1 if lo > ro else -1
        return 0

    def set_affinity(self, name: str, counts: Mapping[str, int], *, only_anti: bool) -> int:
        """How much a set of task names (with counts) pulls `name` in: + affinities (unless `only_anti`),
        − anti-affinities."""
        if not name:
            return 0
        total = 0
        for other, count in counts.items():
            same = other == name
            if not only_anti and (name in self.self_affinity if same
                                  else other in self.inter_affinity.get(name, ())):
                total += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                total -= count
        return total

    def _less(self, left: Task, right: Task) -> bool:
        """Upstream's TaskOrder.Less (the buckets are built in the reverse of it)."""
        if left.node_name or right.node_name:
            if bool(left.node_name) != bool(right.node_name):
                return not left.node_name
            return left.node_name > right.node_name
        result = self.affinity_order(left, right)
        return left.name > right.name if result == 0 else result < 0

    def build(self, tasks: Iterable[Task]) -> None:
        """Put every task whose name has a topology into a bucket."""
        mine = []
        for t in tasks:
            if t.role and t.role in self.priority:
                self.names[t.uid] = t.role
                mine.append(t)
        mine.sort(key=functools.cmp_to_key(lambda a, b: -1 if self._less(b, a) else (1 if self._less(a, b) else 0)))
        by_node: dict[str, Bucket] = {}
        for t in mine:
            chosen: Bucket | None = None
            best = -(2**31)
            if t.node_name:
                best, chosen = 0, by_node.get(t.node_name)
            else:
                for b in self.buckets:
                    aff = self.set_affinity(t.role, b.names, only_anti=False)
                    if aff > best:
                        best, chosen = aff, b
                    elif aff == best and chosen is not None and b.req_score < chosen.req_score:
                        chosen = b
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets), self.dims)
                self.buckets.append(chosen)
                if t.node_name:
                    by_node[t.node_name] = chosen
            self.in_bucket[t.uid] = chosen.index
            chosen.add(t.role, t)
            self.max_size = max(self.max_size, len(chosen.tasks) + chosen.bound)

    def bucket(self, task: Task) -> Bucket | None:
        i = self.in_bucket.get(task.uid)
        return None if i is None else self.buckets[i]

    def bound(self, task: Task, node: str) -> None:
        if task.role:
            counts = self.node_names.setdefault(node, {})
            counts[task.role] = counts.get(task.role, 0) + 1
        b = self.bucket(task)
        if b is not None:
            b.bind(task, node)

    def unbound(self, task: Task, node: str) -> None:
        if task.role and node in self.node_names:
            self.node_names[node][task.role] -= 1
        b = self.bucket(task)
        if b is not None:
            b.unbind(task, node)

    def score(self, task: Task, node: str, room: np.ndarray) -> int:
        """The bucket score of `task` on `node` with `room` = its idle + releasing (0 outside any bucket)."""
        return int(self.scores(task, np.array([0]), room[None, :], {node: 0})[0])

    def scores(self, task: Task, rows: np.ndarray, room: np.ndarray, index: Mapping[str, int]) -> np.ndarray:
        """`score` for the node rows `rows` at once (`room`: one row each; `index`: node name → row): the bucket's
        members already on the node, minus anti-affinity with the job's tasks bound there, plus the bucket's
        pending tasks, less one for each other pending task (in the order they joined) that has to be left out
        before the rest fit the room."""
        b = self.bucket(task)
        if b is None:
            return np.zeros(len(rows))
        s = np.full(len(rows), float(len(b.tasks)))
        pos = np.full(int(rows.max()) + 1 if len(rows) else 0, -1)
        pos[rows] = np.arange(len(rows))

        def at(name: str) -> int:
            r = index.get(name)
            return -1 if r is None or r >= len(pos) else int(pos[r])

        for name, count in b.nodes.items():
            if (k := at(name)) >= 0:
                s[k] += count
        for name, counts in self.node_names.items():
            if counts and (k := at(name)) >= 0:
                s[k] += min(0, self.set_affinity(task.role, counts, only_anti=True))
        short = ~(b.request <= room + EPSILON).all(axis=1)
        if short.any():
            others = [t.resreq for uid, t in b.tasks.items() if uid != task.uid]
            if others:
                remains = b.request - np.cumsum(np.array(others), axis=0)  # after leaving out 1, 2, ... of them
                fits = (remains[None, :, :] <= room[short][:, None, :] + EPSILON).all(axis=2)
                s[short] -= np.where(fits.any(axis=1), fits.argmax(axis=1) + 1, len(others))
        return s


class TaskTopology:
    name = "task-topology"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        w = self.arguments.get(WEIGHT, 1)
        self.weight = w if isinstance(w, int) and not isinstance(w, bool) else 1
        self.managers: dict[str, JobManager] = {}
        self.errors: dict[str, str] = {}  # job uid → why its annotations were not taken
        self._ssn: Session | None = None
        self._nodes: dict[str, str] = {}  # task uid → the node its bound() counted it on

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self.managers, self.errors, self._nodes = {}, {}, {}
        dims = len(ssn.resources)
        for uid, job in ssn.jobs.items():
            if not job.count(TaskStatus.PENDING):
                continue
            ann = (job.podgroup.get("metadata") or {}).get("annotations") or {}
            try:
                topo = parse_topology(ann, (t.role for t in job.tasks.values()), f"{job.namespace}/{job.name}")
            except ValueError as e:
                self.errors[uid] = str(e)
                continue
            if topo is None:
                continue
            manager = JobManager(topo, dims)
            manager.build(job.tasks.values())
            self.managers[uid] = manager

    def on_session_close(self, ssn: Session) -> None:
        self._ssn = None
        self.managers, self._nodes = {}, {}

    def task_order(self, left: Task, right: Task) -> int:
        lm, rm = self.managers.get(left.job), self.managers.get(right.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket(left), rm.bucket(right)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if left.job != right.job or lb is None or rb is None:
            return 0
        if len(lb.tasks) != len(rb.tasks):
            return -1 if len(lb.tasks) > len(rb.tasks) else 1
        if lb.index == rb.index:
            return -lm.affinity_order(left, right)
        return -1 if lb.index < rb.index else 1

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Zero everywhere for a task of a job without a topology."""
        return (REUSE_STATIC, None) if task.job not in self.managers else None

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        manager = self.managers.get(task.job)
        out = np.zeros(len(candidates))
        if manager is None or manager.bucket(task) is None:
            return out
        room = nodes.idle[candidates] + nodes.releasing[candidates]
        fits = ~(room + EPSILON < task.resreq).any(axis=1)
        if not fits.any():
            return out
        scale = MAX_NODE_SCORE / manager.max_size if manager.max_size else 1.0
        out[fits] = manager.scores(task, candidates[fits], room[fits], nodes.index) * self.weight * scale
        return out

    def on_allocate(self, task: Task) -> None:
        manager = self.managers.get(task.job)
        if manager is None or not task.node_name or task.uid in self._nodes:
            return
        self._nodes[task.uid] = task.node_name
        manager.bound(task, task.node_name)

    def on_deallocate(self, task: Task) -> None:
        node = self._nodes.pop(task.uid, None)
        manager = self.managers.get(task.job)
        if manager is not None and node is not None:
            manager.unbound(task, node)

