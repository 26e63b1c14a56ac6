"""The scheduling-session framework (Volcano `pkg/scheduler/framework` + `api` + `conf`), on which actions and
plugins are built. It imports no action or plugin.

Flow of one session::

    objects ──snapshot.build()──▶ Snapshot ──Session(snapshot, conf, registry)──▶ plugins' on_session_open
        ──▶ actions in conf order (each: Statement.allocate/pipeline/evict → commit() or discard())
        ──▶ Session.close() ──▶ Decisions (binds, evictions, pipelined, PodGroup status, pod conditions, queues)

Pieces:

- `conf`: `load(yaml) -> SchedulerConf` (Volcano's `volcano-scheduler.conf`; frozen; unknown names are errors).
- `registry.Registry`: name → factory(arguments) for actions and plugins; the built-ins are listed in
  `scheduler.registry.in_tree_registry()`.
- `hooks`: one `typing.Protocol` per extension point (JobOrder, JobReady, JobPipelined, Predicate, NodeOrder, …),
  `Vote` (PERMIT/ABSTAIN/REJECT), `Status` (SUCCESS/UNSCHEDULABLE/UNSCHEDULABLE_AND_UNRESOLVABLE/ERROR + plugin),
  `NodeFilter` (a vectorised predicate answer). `hooks.HOOKS` maps each hook to its conf switch.
- `snapshot`: `Task`, `Job` (gang counters), `Queue`, `Node`, `Snapshot`, `build(...)`.
- `nodes`: `ResourceIndex` (cpu milli, memory bytes, scalars milli) and `NodeArrays` (node × resource numpy
  matrices: allocatable, idle, used, releasing, pipelined; pods vs max pods).
- `session.Session`: hook dispatch with Volcano's combination rules, the view mutations, `close()` → `Decisions`
  (a job nothing changed for since the last session closed it is settled: that result is reused); `state(key,
  factory)` per-session state plugins share (kube-scheduler's CycleState), `shared_state` what the session's owner
  keeps across sessions; `report_metrics()` collects the plugins' `MetricsReport` into a `hooks.MetricsSink`.
- `status`: the PodGroup, pod-condition and queue status writes computed from the session's result (pure).
- `statement.Statement`: the transaction; `discard()` restores the view exactly.

Writing a plugin: a class with `name = "myplugin"`, `__init__(self, arguments)`, optionally
`on_session_open(self, ssn)` / `on_session_close(self, ssn)`, and any hook methods named as in `hooks.HOOKS`
(e.g. `job_order(self, left, right) -> int`, `predicate(self, task, nodes) -> NodeFilter`). Register it with
`registry.add_plugin("myplugin", MyPlugin)` — in-tree: one line in `scheduler/registry.py`. A hook is called only
when the tier's switch for it (e.g. `enableJobOrder`) is not false. A node-order plugin may say with
`node_order_reuse(self, task)` (`hooks.NodeOrderReuse`) how long a task's scores last, so that the session keeps
them from task to task and asks again only for the rows that changed.
"""

from __future__ import annotations

from lahar.scheduler.framework.conf import ConfError, PluginOption, SchedulerConf, Tier, default_conf, load
from lahar.scheduler.framework.hooks import HOOKS, Code, MetricsSink, NodeFilter, QueueReport, Status, Vote
from lahar.scheduler.framework.nodes import NodeArrays, ResourceIndex
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.session import Bind, Decisions, Eviction, PodCondition, PodGroupUpdate, Session
from lahar.scheduler.framework.snapshot import FitErrors, Job, Node, Queue, Snapshot, Task, TaskStatus, build
from lahar.scheduler.framework.statement import Statement

__all__ = [
    "HOOKS",
    "Bind",
    "Code",
    "ConfError",
    "Decisions",
    "Eviction",
    "FitErrors",
    "Job",
    "MetricsSink",
    "Node",
    "NodeArrays",
    "NodeFilter",
    "PluginOption",
    "PodCondition",
    "PodGroupUpdate",
    "Queue",
    "QueueReport",
    "Registry",
    "ResourceIndex",
    "SchedulerConf",
    "Session",
    "Snapshot",
    "Statement",
    "Status",
    "Task",
    "TaskStatus",
    "Tier",
    "Vote",
    "build",
    "default_conf",
    "load",
]
