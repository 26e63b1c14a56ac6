"""Extension points of a scheduling session: one `typing.Protocol` per hook, the vote and status vocabularies.

Plugins (scheduler/plugins) implement only the hooks they need; `Session` (framework/session.py) dispatches each
hook over the configured tiers with the combination rule written next to each protocol below (spec §5.2).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session
    from lahar.scheduler.framework.snapshot import Job, Queue, Task

__all__ = [
    "HOOKS",
    "Action",
    "Allocatable",
    "BestNode",
    "Code",
    "EventHandler",
    "HyperNodeGradient",
    "HyperNodeOrder",
    "JobEnqueueable",
    "JobEnqueued",
    "JobOrder",
    "JobPipelined",
    "JobReady",
    "JobStarving",
    "JobValid",
    "MetricsReport",
    "MetricsSink",
    "NodeFilter",
    "NodeOrder",
    "NodeOrderReuse",
    "Overused",
    "passing",
    "Plugin",
    "PrePredicate",
    "Predicate",
    "Preemptable",
    "Preemptive",
    "QueueOrder",
    "QueueReport",
    "REUSE_ROWS",
    "REUSE_STATIC",
    "REUSE_UNIFORM",
    "Reclaimable",
    "SessionClose",
    "SessionOpen",
    "Status",
    "TaskOrder",
    "VictimFilter",
    "VictimTasks",
    "Vote",
]


class Vote(enum.IntEnum):
    """A plugin's say on a job (Volcano's util.Permit/Abstain/Reject)."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


class Code(enum.Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Status:
    """A hook's answer, stamped with the plugin that gave it, so "why is my pod pending" names who said no."""

    code: Code = Code.SUCCESS
    reason: str = ""
    plugin: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @classmethod
    def success(cls, plugin: str = "") -> Status:
        return cls(Code.SUCCESS, "", plugin)


@dataclass(slots=True)
class NodeFilter:
    """A vectorised predicate answer over all nodes: `feasible[i]` and, for failed nodes, `reasons[i]` (and code)."""

    feasible: np.ndarray  # bool, shape (N,)
    reasons: np.ndarray | None = None  # object, shape (N,): reason text where infeasible, else None
    unresolvable: np.ndarray | None = None  # bool, shape (N,): failure is UNSCHEDULABLE_AND_UNRESOLVABLE
    # True: every node passed (`feasible` may be shared and read-only, `passing`): the session skips the answer
    all_feasible: bool = False


_PASSING: dict[int, NodeFilter] = {}


def passing(n: int) -> NodeFilter:
    """The shared answer "every one of `n` nodes passes" (read-only), for a plugin with nothing to check."""
    got = _PASSING.get(n)
    if got is None:
        feasible = np.ones(n, dtype=bool)
        feasible.flags.writeable = False
        if len(_PASSING) > 8:
            _PASSING.clear()
        got = _PASSING[n] = NodeFilter(feasible, all_feasible=True)
    return got


@runtime_checkable
class Plugin(Protocol):
    """Every plugin: a `name`; built by a registry factory from the tier's `arguments`."""

    name: str


@runtime_checkable
class Action(Protocol):
    """Every action (enqueue, allocate, ...): a `name` and `execute(ssn)`."""

    name: str

    def execute(self, ssn: Session) -> None: ...


# --- lifecycle ---------------------------------------------------------------------------------------------------

@runtime_checkable
class SessionOpen(Protocol):
    """Called tier by tier when the session opens; the place to read the snapshot and build plugin state."""

    def on_session_open(self, ssn: Session) -> None: ...


@dataclass(frozen=True, slots=True)
class QueueReport:
    """A queue's resources as a plugin sees them (vectors in the session's resource order; None = not known)."""

    allocated: Any = None
    request: Any = None
    deserved: Any = None
    real_capacity: Any = None
    inqueue: Any = None
    share: float = 0.0


@dataclass(slots=True)
class MetricsSink:
    """What plugins report for the session's metrics (`MetricsReport`); `scheduler.metrics.gather` reads it, so
    metrics never reach into a plugin's attributes. A queue's resources come from the first plugin (tier order)
    that reports the queue; job shares from the plugin that computes them (drf), with the cluster total."""

    queues: dict[str, QueueReport] = field(default_factory=dict)
    job_shares: dict[str, tuple[float, Any]] = field(default_factory=dict)  # job uid → (share, allocated vector)
    total: Any = None

    def queue(self, name: str, report: QueueReport) -> None:
        self.queues.setdefault(name, report)

    def job_share(self, uid: str, share: float, allocated: Any) -> None:
        self.job_shares.setdefault(uid, (share, allocated))


@runtime_checkable
class MetricsReport(Protocol):
    """Called before the session closes, to report queue and job figures into the sink (every plugin)."""

    def report_metrics(self, sink: MetricsSink) -> None: ...


@runtime_checkable
class SessionClose(Protocol):
    """Called when the session closes (gang writes PodGroup conditions here)."""

    def on_session_close(self, ssn: Session) -> None: ...


@runtime_checkable
class EventHandler(Protocol):
    """Told of every allocate/pipeline (`on_allocate`) and evict/undo (`on_deallocate`) in the session. Always on."""

    def on_allocate(self, task: Task) -> None: ...

    def on_deallocate(self, task: Task) -> None: ...


# --- orders: first non-zero compare wins, tier by tier; fallbacks in Session ----------------------------------------

@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, left: Job, right: Job) -> int: ...


@runtime_checkable
class QueueOrder(Protocol):
    def queue_order(self, left: Queue, right: Queue) -> int: ...


@runtime_checkable
class TaskOrder(Protocol):
    def task_order(self, left: Task, right: Task) -> int: ...


# --- job verdicts ----------------------------------------------------------------------------------------------

@runtime_checkable
class JobValid(Protocol):
    """First failing Status wins; None = valid."""

    def job_valid(self, job: Job) -> Status | None: ...


@runtime_checkable
class JobReady(Protocol):
    """AND over every enabled plugin."""

    def job_ready(self, job: Job) -> bool: ...


@runtime_checkable
class JobPipelined(Protocol):
    """Vote: any REJECT → False; a tier with a PERMIT → True; all abstain → next tier; default True."""

    def job_pipelined(self, job: Job) -> Vote: ...


@runtime_checkable
class JobEnqueueable(Protocol):
    """Vote, same rule as JobPipelined (switch `enableJobEnqueued`)."""

    def job_enqueueable(self, job: Job) -> Vote: ...


@runtime_checkable
class JobEnqueued(Protocol):
    """Told when a job is moved to Inqueue (switch `enableJobEnqueued`)."""

    def job_enqueued(self, job: Job) -> None: ...


@runtime_checkable
class JobStarving(Protocol):
    """The first tier with a registered plugin decides, AND within it; default False."""

    def job_starving(self, job: Job) -> bool: ...


# --- victims: per tier, intersect the lists of non-abstaining plugins; first tier with an answer decides ---------

@runtime_checkable
class Preemptable(Protocol):
    """None = abstain; a list = the victims this plugin allows."""

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None: ...


@runtime_checkable
class Reclaimable(Protocol):
    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None: ...


@runtime_checkable
class VictimTasks(Protocol):
    """Victims a plugin proposes among running tasks, for shuffle (switch `enabledVictim`): the union within a
    tier; the first tier with a non-empty union decides (Volcano's VictimTasks)."""

    def victim_tasks(self, tasks: list[Task]) -> list[Task]: ...


@runtime_checkable
class VictimFilter(Protocol):
    """The proposed victims a plugin lets go, in their order (switch `enabledVictim`): each plugin narrows, over
    every tier (AND). pdb and cdp protect pods here; Volcano's pdb proposes its allowed pods instead (see
    docs/compatibility.md)."""

    def victim_filter(self, victims: list[Task]) -> list[Task]: ...


# --- queue verdicts ----------------------------------------------------------------------------------------------

@runtime_checkable
class Overused(Protocol):
    """OR over plugins."""

    def overused(self, queue: Queue) -> bool: ...


@runtime_checkable
class Allocatable(Protocol):
    """AND over plugins (switch `enabledAllocatable`)."""

    def allocatable(self, queue: Queue, task: Task) -> bool: ...


@runtime_checkable
class Preemptive(Protocol):
    """AND over plugins: may this queue take `task`'s request by reclaiming?"""

    def preemptive(self, queue: Queue, task: Task) -> bool: ...


# --- nodes -------------------------------------------------------------------------------------------------------

@runtime_checkable
class PrePredicate(Protocol):
    """All must pass (switch `enablePredicate`)."""

    def pre_predicate(self, task: Task) -> Status: ...


@runtime_checkable
class Predicate(Protocol):
    """All must pass, vectorised over the node arrays (switch `enablePredicate`)."""

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter: ...


@runtime_checkable
class NodeOrder(Protocol):
    """Scores over candidate node indices, summed across plugins (switch `enableNodeOrder`)."""

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray: ...


# `NodeOrderReuse` answers: how far the session may reuse a plugin's scores of one task for another
REUSE_ROWS = "rows"  # a node's score changes only when its row does (NodeArrays.changes)
REUSE_STATIC = "static"  # no node's score changes for the rest of the session
REUSE_UNIFORM = "uniform"  # the same score on every node, `node_order_uniform(task)`, asked every time


@runtime_checkable
class NodeOrderReuse(Protocol):
    """Optional beside NodeOrder: `(kind, key)` when every task with the same answer gets the same score on a node,
    whatever the other candidates, and the score changes only as `kind` says (`REUSE_ROWS`: when the node's row
    changes; `REUSE_STATIC`: never, this session); `(REUSE_UNIFORM, None)` when this task's score is one number on
    every node, which the plugin's `node_order_uniform(task)` gives (as `node_order` would compute each entry);
    None when the session must ask `node_order` for this task. With it the session keeps the scores per answer
    and recomputes only changed rows (`Session.node_scores`).

    A plugin may also give, for a `REUSE_ROWS` answer, `node_order_rows(task)`: a function of row indices that
    scores those rows as `node_order` would, for every task with the same answer this session (asked once per
    answer; without it the session asks `node_order` with the changed rows as candidates)."""

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None: ...


@runtime_checkable
class BestNode(Protocol):
    """First non-None answer wins (switch `enableBestNode`)."""

    def best_node(self, task: Task, candidates: np.ndarray, scores: np.ndarray) -> int | None: ...


# --- HyperNodes (network topology, framework/hypernodes.py) ---------------------------------------------------------

@runtime_checkable
class HyperNodeGradient(Protocol):
    """The HyperNodes a job with a networkTopology may land in, grouped by tier, lowest first; the first plugin
    that answers wins (switch `enabledHyperNodeGradient`). No plugin: the job is placed as if unconstrained."""

    def hypernode_gradient(self, job: Job) -> list[list[str]] | None: ...


@runtime_checkable
class HyperNodeOrder(Protocol):
    """Scores of candidate HyperNodes for a job, summed across plugins (switch `enabledHyperNodeOrder`)."""

    def hypernode_order(self, job: Job, hypernodes: list[str]) -> np.ndarray: ...


# hook method → (protocol, conf switch that gates it, or None = always on)
HOOKS: dict[str, tuple[type[Any], str | None]] = {
    "on_session_open": (SessionOpen, None),
    "on_session_close": (SessionClose, None),
    "on_allocate": (EventHandler, None),
    "report_metrics": (MetricsReport, None),
    "job_order": (JobOrder, "enableJobOrder"),
    "queue_order": (QueueOrder, "enableQueueOrder"),
    "task_order": (TaskOrder, "enableTaskOrder"),
    "job_valid": (JobValid, None),
    "job_ready": (JobReady, "enableJobReady"),
    "job_pipelined": (JobPipelined, "enableJobPipelined"),
    "job_enqueueable": (JobEnqueueable, "enableJobEnqueued"),
    "job_enqueued": (JobEnqueued, "enableJobEnqueued"),
    "job_starving": (JobStarving, "enableJobStarving"),
    "preemptable": (Preemptable, "enablePreemptable"),
    "reclaimable": (Reclaimable, "enableReclaimable"),
    "victim_tasks": (VictimTasks, "enabledVictim"),
    "victim_filter": (VictimFilter, "enabledVictim"),
    "overused": (Overused, "enabledOverused"),
    "allocatable": (Allocatable, "enabledAllocatable"),
    "preemptive": (Preemptive, "enablePreemptive"),
    "pre_predicate": (PrePredicate, "enablePredicate"),
    "predicate": (Predicate, "enablePredicate"),
    "node_order": (NodeOrder, "enableNodeOrder"),
    "node_order_reuse": (NodeOrderReuse, "enableNodeOrder"),
    "best_node": (BestNode, "enableBestNode"),
    "hypernode_gradient": (HyperNodeGradient, "enabledHyperNodeGradient"),
    "hypernode_order": (HyperNodeOrder, "enabledHyperNodeOrder"),
}
