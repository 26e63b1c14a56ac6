"""nodegroup: keep a queue's tasks on the node groups its `spec.affinity` names (Volcano's `plugins/nodegroup`).

A node's group is its `volcano.sh/nodegroup-name` label. A queue's `spec.affinity.nodeGroupAffinity` and
`nodeGroupAntiAffinity` each list groups as `requiredDuringSchedulingIgnoredDuringExecution` and
`preferredDuringSchedulingIgnoredDuringExecution`. The predicate admits a group that is required or preferred, unless
it is anti-required; anti-preferred admits it again (upstream's order). The score is 100 for a required group, plus
50 for a preferred one (or 50·(n-i)/n by list position with `enablePreferredOrder`), and -1 for an anti-preferred
group. A node without the label, or a labelled node for a queue without rules, is refused; with `strict: false` an
unlabelled node is allowed for a queue without rules. With `enableHierarchy` a queue without affinity takes its
nearest ancestor's. The decisions are pure functions (`admits`, `score`); the plugin caches them per queue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import REUSE_STATIC, NodeFilter
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, ResourceIndex
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Queue, Task

__all__ = [
    "BASE_SCORE",
    "NODE_GROUP_LABEL",
    "GroupAffinity",
    "NodeGroup",
    "admits",
    "exceeded",
    "parse_affinity",
    "parse_limits",
    "score",
]

NODE_GROUP_LABEL = "volcano.sh/nodegroup-name"  # Volcano's schedulingv1beta1.NodeGroupNameKey
LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"  # NodeGroupResourceLimitsAnnotationKey
BASE_SCORE = 100.0
ROOT = "root"

# Upstream's fit-error reasons (plugins/nodegroup/errors.go), all UnschedulableAndUnresolvable.
NO_AFFINITY = "node group affinity not specified"
NO_LABEL = "node group label not found"
UNSATISFIED = "node does not satisfy the node group affinity"
LIMIT_INVALID = "node group resource limit annotation invalid"
LIMIT_EXCEEDED = "node group resource limit exceeded"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class GroupAffinity:
    """A queue's four group lists (preferred keeps its order, for `enablePreferredOrder`)."""

    __slots__ = ("required", "preferred", "anti_required", "anti_preferred")

    def __init__(self, required: tuple[str, ...] = (), preferred: tuple[str, ...] = (),
                 anti_required: tuple[str, ...] = (), anti_preferred: tuple[str, ...] = ()) -> None:
        self.required = frozenset(required)
        self.preferred = tuple(dict.fromkeys(preferred))
        self.anti_required = frozenset(anti_required)
        self.anti_preferred = frozenset(anti_preferred)

    @property
    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def __repr__(self) -> str:
        return (f"GroupAffinity(required={sorted(self.required)}, preferred={list(self.preferred)}, "
                f"anti_required={sorted(self.anti_required)}, anti_preferred={sorted(self.anti_preferred)})")


def _names(term: Any, key: str) -> tuple[str, ...]:
    """A list of group names; anything that is not a list of strings counts as no names."""
    if not isinstance(term, Mapping):
        return ()
    raw = term.get(key)
    if not isinstance(raw, list):
        return ()
    return tuple(g for g in raw if isinstance(g, str) and g)


def parse_affinity(spec: Mapping[str, Any] | None) -> GroupAffinity | None:
    """`spec.affinity` of a Queue; None when the queue has none (then hierarchy may lend an ancestor's)."""
    affinity = (spec or {}).get("affinity")
    if not isinstance(affinity, Mapping):
        return None
    pos, neg = affinity.get("nodeGroupAffinity"), affinity.get("nodeGroupAntiAffinity")
    return GroupAffinity(_names(pos, _REQUIRED), _names(pos, _PREFERRED), _names(neg, _REQUIRED),
                         _names(neg, _PREFERRED))


def admits(affinity: GroupAffinity | None, group: str | None, strict: bool) -> str | None:
    """The predicate for one node group (None = the node has no label): None when it fits, else the reason."""
    unset = affinity is None or affinity.empty
    if group is None:
        return None if (not strict and unset) else NO_LABEL
    if unset:
        return NO_AFFINITY
    assert affinity is not None
    ok = group in affinity.required or group in affinity.preferred
    if group in affinity.anti_required:
        ok = False
    if group in affinity.anti_preferred:
        ok = True
    return None if ok else UNSATISFIED


def score(affinity: GroupAffinity | None, group: str | None, preferred_order: bool) -> float:
    """The node-order score for one node group (0 for an unlabelled node or a queue without affinity)."""
    if affinity is None or group is None:
        return 0.0
    s = BASE_SCORE if group in affinity.required else 0.0
    if group in affinity.preferred:
        if preferred_order:
            n = len(affinity.preferred)
            s += 0.5 * BASE_SCORE * (n - affinity.preferred.index(group)) / n
        else:
            s += 0.5 * BASE_SCORE
    if group in affinity.anti_preferred:
        s = -1.0
    return s


Limits = dict[str, tuple[np.ndarray, np.ndarray]]  # group → (limit vector, mask of the resources it names)


def parse_limits(queue: Mapping[str, Any], resources: ResourceIndex) -> Limits | None:
    """The queue's per-group limits (None without the annotation); ValueError naming the annotation and the reason
    when it is not a JSON object of resource lists with valid quantities. Names outside the session's resources
    are dropped (nothing requests them, so they cannot be exceeded)."""
    raw = ((queue.get("metadata") or {}).get("annotations") or {}).get(LIMITS_ANNOTATION)
    if not raw:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"parse annotation {LIMITS_ANNOTATION}: {e}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ValueError(f"parse annotation {LIMITS_ANNOTATION}: want {{group: {{resource: quantity}}}}")
    out: Limits = {}
    for group, rl in parsed.items():
        mask = np.zeros(len(resources), dtype=bool)
        for name, value in rl.items():
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError(f"parse annotation {LIMITS_ANNOTATION}: {group}.{name}: not a quantity")
            i = resources.pos.get(name)
            if i is not None:
                mask[i] = True
        try:
            vec = resources.vector(rl)
        except ValueError as e:
            raise ValueError(f"parse annotation {LIMITS_ANNOTATION}: {group}: {e}") from None
        out[group] = (vec, mask)
    return out


def exceeded(allocated: np.ndarray, request: np.ndarray, limit: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """The limited resources (indices) that `allocated + request` goes over by at least the minimum resource."""
    vec, mask = limit
    over = allocated + request - vec
    return [int(i) for i in np.flatnonzero(mask & (over > 0) & (over >= EPSILON))]


def _bool(args: Mapping[str, Any], key: str, default: bool) -> bool:
    """Volcano Arguments.GetBool: a bool (or "true"/"false") is taken, anything else keeps the default."""
    v = args.get(key)
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return default


def queue_affinities(queues: Mapping[str, Queue], hierarchy: bool) -> dict[str, GroupAffinity | None]:
    """Each queue's own affinity; with `hierarchy`, a queue without one takes its nearest ancestor's (the parent
    of a queue without `spec.parent` is `root`; a cycle or a missing parent stops the walk)."""
    own = {name: parse_affinity(q.queue.get("spec")) for name, q in queues.items()}
    if not hierarchy:
        return own
    out: dict[str, GroupAffinity | None] = {}
    for name in queues:
        seen = {name}
        current, found = name, own[name]
        while found is None and current != ROOT:
            parent = queues[current].parent or ROOT
            if parent in seen or parent not in queues:
                break
            seen.add(parent)
            current, found = parent, own[parent]
        out[name] = found
    return out


class NodeGroup:
    name = "nodegroup"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.strict = _bool(self.arguments, "strict", True)
        self.preferred_order = _bool(self.arguments, "enablePreferredOrder", False)
        self.affinities: dict[str, GroupAffinity | None] = {}
        self.groups: list[str | None] = []
        self._ssn: Session | None = None
        self._filters: dict[str, NodeFilter] = {}
        self._scores: dict[str, np.ndarray] = {}
        self._scoring: dict[str, bool] = {}  # queue → its scores are not 0 everywhere
        self.limits: dict[str, Limits | None] = {}
        self.limit_errors: dict[str, str] = {}
        self.allocated: dict[tuple[str, str], np.ndarray] = {}  # (queue, group) → what its tasks hold there
        self._held: dict[str, tuple[str, str]] = {}  # task uid → the (queue, group) it is counted in

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        hierarchy = any(p is self and opt.enabled("enableHierarchy") for tier in ssn.tiers for opt, p in tier)
        self.affinities = queue_affinities(ssn.queues, hierarchy)
        self.groups = [n.labels.get(NODE_GROUP_LABEL) for n in ssn.nodes]
        self._filters, self._scores, self._scoring = {}, {}, {}
        self.limits, self.limit_errors, self.allocated, self._held = {}, {}, {}, {}
        for name, q in ssn.queues.items():
            try:
                self.limits[name] = parse_limits(q.queue, ssn.resources)
            except ValueError as e:
                self.limit_errors[name] = str(e)
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if task.status in ALLOCATED:
                    self._account(task, 1.0)

    def _account(self, task: Task, sign: float) -> None:
        """Add (or, on deallocate, take back) what the task holds in its queue's group; the group is remembered
        per task, as a deallocated task may already have lost its node."""
        assert self._ssn is not None
        if sign < 0:
            key = self._held.pop(task.uid, None)
            if key is not None:
                self.allocated[key] -= task.resreq
            return
        job = self._ssn.jobs.get(task.job)
        row = self._ssn.arrays.index.get(task.node_name) if task.node_name else None
        group = None if row is None else self.groups[row]
        if job is None or group is None or task.uid in self._held:
            return
        key = self._held[task.uid] = (job.queue, group)
        held = self.allocated.get(key)
        if held is None:
            held = self.allocated[key] = np.zeros(len(task.resreq))
        held += task.resreq

    def on_allocate(self, task: Task) -> None:
        self._account(task, 1.0)

    def on_deallocate(self, task: Task) -> None:
        self._account(task, -1.0)

    def _queue(self, task: Task) -> str | None:
        assert self._ssn is not None
        job = self._ssn.jobs.get(task.job)
        return None if job is None else job.queue

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        """Refuses every node for a task whose job is not in the session (upstream does the same)."""
        queue = self._queue(task)
        if queue is None:
            return NodeFilter(np.zeros(len(nodes), dtype=bool), np.full(len(nodes), f"job {task.job} not found in "
                              "session", dtype=object), np.ones(len(nodes), dtype=bool))
        n = len(nodes)
        if queue in self.limit_errors:
            return NodeFilter(np.zeros(n, dtype=bool), np.full(n, LIMIT_INVALID, dtype=object), np.ones(n, dtype=bool))
        f = self._filters.get(queue)
        if f is None:
            affinity = self.affinities.get(queue)
            reasons = np.array([admits(affinity, g, self.strict) for g in self.groups], dtype=object)
            feasible = np.array([r is None for r in reasons], dtype=bool)
            f = self._filters[queue] = NodeFilter(feasible, reasons, ~feasible, all_feasible=bool(feasible.all()))
        limits = self.limits.get(queue)
        if not limits:
            return f
        full = [g for g, lim in limits.items()
                if exceeded(self.allocated.get((queue, g), np.zeros_like(task.resreq)), task.resreq, lim)]
        if not full:
            return f
        hit = f.feasible & np.array([g in full for g in self.groups], dtype=bool)
        reasons = f.reasons.copy() if f.reasons is not None else np.full(n, None, dtype=object)
        reasons[hit] = LIMIT_EXCEEDED
        feasible = f.feasible & ~hit
        return NodeFilter(feasible, reasons, ~feasible)

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """The queue's scores, fixed for the session (one answer for every queue that scores 0 everywhere)."""
        queue = self._queue(task)
        if queue is None:
            return REUSE_STATIC, None
        scoring = self._scoring.get(queue)
        if scoring is None:
            self._queue_scores(queue)
            scoring = self._scoring[queue]
        return REUSE_STATIC, (queue if scoring else None)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        queue = self._queue(task)
        if queue is None:
            return np.zeros(len(candidates))
        return self._queue_scores(queue)[candidates]

    def _queue_scores(self, queue: str) -> np.ndarray:
        s = self._scores.get(queue)
        if s is None:
            affinity = self.affinities.get(queue)
            s = self._scores[queue] = np.array([score(affinity, g, self.preferred_order) for g in self.groups],
                                               dtype=np.float64)
            self._scoring[queue] = bool(s.any())
        return s

    def on_session_close(self, ssn: Session) -> None:
        self._ssn = None
        self._filters, self._scores, self._scoring, self.allocated, self._held = {}, {}, {}, {}, {}
