"""usage: filter and score nodes by their real load (Volcano's `plugins/usage`).

A node's load is its average CPU and memory use in percent, with the time it was measured, read from the node's
`lahar.sh/node-usage` annotation (JSON `{"cpu": 30, "memory": 50, "time": "2024-01-01T00:00:00Z"}`), or, when the
conf's `metrics.type` is `metrics-server` / `metrics-api`, from the resource metrics API's NodeMetrics
(`scheduler.usagesource`, refreshed outside the session; unreadable → every node unknown). Load older than five minutes, or
without a time, counts as unknown: the node passes and scores 0. Otherwise a node above `thresholds.cpu` /
`thresholds.mem` is refused (UnschedulableAndUnresolvable), and a node scores
`((1 − cpu)·cpu.weight + (1 − mem)·memory.weight) / (cpu.weight + memory.weight) × 100 × usage.weight`, where
each share adds to the measured load a shadow estimate of the pods the metrics cannot see yet (placed in this
session, bound, or Running for less than the metrics interval, `metrics.interval` of the conf, default 30s): a
pod counts as `request·request_ratio + (limit − request)·burst_ratio`, × `risk_factor` once the node's composite
load reaches `risk_threshold`; a BestEffort pod as `be_cpu` / `be_mem`. The arithmetic is pure functions.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lahar.kube import durations, podspec, quantity
from lahar.scheduler.framework.hooks import REUSE_STATIC, NodeFilter
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Node, Task, TaskStatus
from lahar.scheduler.usagesource import Measured, node_size, percent, source_conf, source_for

__all__ = [
    "USAGE_ANNOTATION",
    "NodeUsage",
    "ShadowCache",
    "Usage",
    "applied_risk_factor",
    "composite",
    "estimate_pod",
    "metrics_usage",
    "node_score",
    "parse_usage",
    "tracked",
]

USAGE_ANNOTATION = "lahar.sh/node-usage"
METRICS_ACTIVE = 5 * 60.0  # seconds: older metrics are ignored (Volcano's MetricsActiveTime)
DEFAULT_INTERVAL = 30.0
MAX_NODE_SCORE = 100.0
CPU_OVER = "the CPU load of the node exceeds the upper limit."  # upstream's reasons
MEMORY_OVER = "the memory load of the node exceeds the upper limit."


@dataclass(frozen=True, slots=True)
class NodeUsage:
    cpu: float = 0.0  # percent
    memory: float = 0.0  # percent
    time: dt.datetime | None = None


def _time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def parse_usage(node: Mapping[str, Any]) -> NodeUsage:
    """The node's annotation; absent or malformed → no usage (time None: unknown)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(USAGE_ANNOTATION)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return NodeUsage()
    return NodeUsage(_number(data.get("cpu")), _number(data.get("memory")), _time(data.get("time")))


def metrics_usage(measured: Measured | None, size: tuple[float, float]) -> NodeUsage:
    """A node's load from its parsed NodeMetrics (percent of its allocatable size); none or no size → unknown."""
    got = percent(measured, size)
    return NodeUsage() if got is None else NodeUsage(*got)


def fresh(usage: NodeUsage, now: dt.datetime) -> bool:
    return usage.time is not None and (now - usage.time).total_seconds() <= METRICS_ACTIVE


# --- the estimator (upstream's estimator.go) --------------------------------------------------------------------

def load_composite(cpu: float, memory: float, cpu_weight: int, memory_weight: int) -> float:
    total = cpu_weight + memory_weight
    return 0.0 if total == 0 else (cpu * cpu_weight + memory * memory_weight) / total


def applied_risk_factor(load: float, threshold: float, factor: float) -> float:
    return 1.0 if factor < 1.0 or load < threshold else factor


def estimate_pod(request: float, limit: float, request_ratio: float, burst_ratio: float, risk: float) -> float:
    """request·request_ratio + burst·burst_ratio, × risk, within [0, the effective limit]."""
    request = max(request, 0.0)
    limit = request if limit <= 0 or limit < request else limit
    est = (request * request_ratio + (limit - request) * burst_ratio) * risk
    return min(max(est, 0.0), limit)


def composite(real_percent: float, shadow: float, capacity: float) -> float:
    """The measured share plus the shadow estimate over capacity, within [0, 1]."""
    if capacity <= 0:
        return 0.0
    return min(max((real_percent / 100.0 * capacity + shadow) / capacity, 0.0), 1.0)


def node_score(cpu: float, memory: float, cpu_weight: int, memory_weight: int, usage_weight: int) -> float:
    total = cpu_weight + memory_weight
    if total == 0:
        return 0.0
    return ((1.0 - cpu) * cpu_weight + (1.0 - memory) * memory_weight) / total * MAX_NODE_SCORE * usage_weight


def tracked(status: TaskStatus, node_name: str, start_time: dt.datetime | None, now: dt.datetime,
            delay: float) -> bool:
    """Does the metrics source not see this pod yet? Placed (Allocated, Binding, Bound), or Running for less than
    `delay` seconds (or without a start time)."""
    if not node_name:
        return False
    if status in (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND):
        return True
    if status is TaskStatus.RUNNING:
        return start_time is None or (now - start_time).total_seconds() < delay
    return False


class ShadowCache:
    """Per node, the estimated use of the pods the metrics do not show; each pod's share is kept so it is taken
    back exactly (upstream's ShadowLoadCache)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.memory: dict[str, float] = {}
        self.pods: dict[str, tuple[str, float, float]] = {}

    def add(self, node: str, uid: str, cpu: float, memory: float) -> None:
        self.sub(uid)
        self.cpu[node] = self.cpu.get(node, 0.0) + cpu
        self.memory[node] = self.memory.get(node, 0.0) + memory
        self.pods[uid] = (node, cpu, memory)

    def sub(self, uid: str) -> None:
        got = self.pods.pop(uid, None)
        if got is None:
            return
        node, cpu, memory = got
        self.cpu[node] = max(0.0, self.cpu.get(node, 0.0) - cpu)
        self.memory[node] = max(0.0, self.memory.get(node, 0.0) - memory)

    def node(self, name: str) -> tuple[float, float]:
        return self.cpu.get(name, 0.0), self.memory.get(name, 0.0)


# --- arguments (Volcano Arguments.GetInt / GetFloat64: a string keeps the default) ----------------------------

def _int(args: Mapping[str, Any], key: str, default: int) -> int:
    v = args.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _float(args: Mapping[str, Any], key: str, default: float) -> float:
    v = args.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


def _be(value: Any, default: float, *, memory: bool) -> float:
    """be_cpu in milli-CPU / be_mem in bytes: a quantity string, or an integer (milli-CPU; MiB for memory)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return default if value < 0 else float(value) * (1024 * 1024 if memory else 1)
    if isinstance(value, str):
        try:
            q = quantity.parse(value)
        except ValueError:
            return default
        if q < quantity.Quantity():
            return default
        return float(q.value() if memory else q.milli_value())
    return default


def _in(value: float, lo: float, hi: float | None, default: float) -> float:
    return value if value >= lo and (hi is None or value <= hi) else default


class Usage:
    name = "usage"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = self.arguments = dict(arguments or {})
        self.usage_weight = w if (w := _int(args, "usage.weight", 5)) >= 0 else 5
        self.cpu_weight = w if (w := _int(args, "cpu.weight", 1)) >= 0 else 1
        self.memory_weight = w if (w := _int(args, "memory.weight", 1)) >= 0 else 1
        th = args.get("thresholds") if isinstance(args.get("thresholds"), Mapping) else {}
        self.cpu_threshold = float(_in(_int(th, "cpu", 80), 0, 100, 80))
        self.memory_threshold = float(_in(_int(th, "mem", 80), 0, 100, 80))
        est = args.get("estimator") if isinstance(args.get("estimator"), Mapping) else {}
        self.request_ratio = _in(_float(est, "request_ratio", 0.7), 0, 1, 0.7)
        self.burst_ratio = _in(_float(est, "burst_ratio", 0.0), 0, 1, 0.0)
        self.risk_threshold = _in(_float(est, "risk_threshold", 0.6), 0, 1, 0.6)
        self.risk_factor = _in(_float(est, "risk_factor", 1.2), 1, None, 1.2)
        self.be_cpu = _be(est.get("be_cpu"), 250.0, memory=False)
        self.be_memory = _be(est.get("be_mem"), 200.0 * 1024 * 1024, memory=True)
        self.interval = DEFAULT_INTERVAL
        self.shadow = ShadowCache()
        self.now = dt.datetime.now(dt.UTC)
        self.usage: list[NodeUsage] = []
        self.capacity: list[tuple[float, float]] = []  # (milli-CPU, bytes) per node row
        self._rows: dict[str, int] = {}
        self._names: list[str] = []
        self._real = self._cap = np.zeros((0, 2))
        self._fresh = np.zeros(0, dtype=bool)
        self._any_fresh = False
        self._filter: NodeFilter | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.now = _time(ssn.timestamp) or dt.datetime.now(dt.UTC)
        interval = (ssn.conf.metrics or {}).get("interval")
        try:
            seconds = durations.parse(str(interval)) if interval is not None else 0.0
        except ValueError:
            seconds = 0.0
        self.interval = seconds if seconds > 0 else DEFAULT_INTERVAL
        self.shadow = ShadowCache()
        source = source_conf(ssn.conf.metrics)
        metrics: dict[str, Measured | None] | None = None
        if source is not None:
            metrics, age = source_for(source).snapshot()
            if age is None or age > METRICS_ACTIVE:  # never fetched, failing, or not refreshed for too long
                metrics = {}
            sizes: dict[str, tuple[Any, tuple[tuple[float, float], tuple[float, float]]]] = ssn.shared_state(
                (self.name, "sizes"), dict)
        # parsed per node and kept across sessions while the node's annotation and capacity stay the same
        parsed: dict[str, tuple[Any, Any, NodeUsage, tuple[float, float]]] = ssn.shared_state(
            (self.name, "parsed"), dict)
        self.usage, self.capacity = [], []
        for n in ssn.nodes:
            raw = ((n.node.get("metadata") or {}).get("annotations") or {}).get(USAGE_ANNOTATION)
            cap = (n.node.get("status") or {}).get("capacity")
            if metrics is not None:  # the metrics API only: its absence is unknown load, not the annotation's
                status = n.node.get("status") or {}
                key = (status.get("allocatable"), status.get("capacity"))
                got = sizes.get(n.name)
                if got is None or got[0] != key:
                    got = sizes[n.name] = (key, (node_size(n.node), _capacity(n)))
                size, cap = got[1]
                self.usage.append(metrics_usage(metrics.get(n.name), size))
                self.capacity.append(cap)
                continue
            hit = parsed.get(n.name)
            if hit is None or hit[0] != raw or hit[1] != cap:
                hit = parsed[n.name] = (raw, cap, parse_usage(n.node), _capacity(n))
            self.usage.append(hit[2])
            self.capacity.append(hit[3])
        self._rows = {n.name: n.index for n in ssn.nodes}
        self._names = [n.name for n in ssn.nodes]
        self._real = np.array([(u.cpu, u.memory) for u in self.usage], dtype=np.float64).reshape(-1, 2)
        self._cap = np.array(self.capacity, dtype=np.float64).reshape(-1, 2)
        self._fresh = np.array([fresh(u, self.now) for u in self.usage], dtype=bool)
        self._any_fresh = bool(self._fresh.any())
        self._filter = None
        for n in ssn.nodes:
            for t in (*n.tasks.values(), *n.others):
                start = _time((t.pod.get("status") or {}).get("startTime"))
                if tracked(t.status, n.name, start, self.now, self.interval):
                    self._add(t, n.index)

    def on_session_close(self, ssn: Session) -> None:
        self.shadow = ShadowCache()

    def _shares(self, row: int) -> tuple[float, float]:
        usage, (cpu_cap, mem_cap) = self.usage[row], self.capacity[row]
        cpu_est, mem_est = self.shadow.node(self._names[row])
        return composite(usage.cpu, cpu_est, cpu_cap), composite(usage.memory, mem_est, mem_cap)

    def _add(self, task: Task, row: int) -> None:
        if not self._fresh[row]:
            return  # an unmeasured node scores 0 whatever its estimates: none are gathered for it
        cpu, mem = self._shares(row)
        risk = applied_risk_factor(load_composite(cpu, mem, self.cpu_weight, self.memory_weight),
                                   self.risk_threshold, self.risk_factor)
        if task.best_effort:
            est_cpu, est_mem = self.be_cpu * risk, self.be_memory * risk
        else:
            req, lim = podspec.pod_requests(task.pod), podspec.pod_limits(task.pod)
            zero = quantity.Quantity()
            est_cpu = estimate_pod(float(req.get("cpu", zero).milli_value()), float(lim.get("cpu", zero).milli_value()),
                                   self.request_ratio, self.burst_ratio, risk)
            est_mem = estimate_pod(float(req.get("memory", zero).value()), float(lim.get("memory", zero).value()),
                                   self.request_ratio, self.burst_ratio, risk)
        self.shadow.add(self._names[row], task.uid, est_cpu, est_mem)

    def on_allocate(self, task: Task) -> None:
        row = self._rows.get(task.node_name)
        if row is not None:
            self._add(task, row)

    def on_deallocate(self, task: Task) -> None:
        self.shadow.sub(task.uid)

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        """The same for every task (the load does not change within a session): built once."""
        if self._filter is None:
            reasons = np.array([None if not fresh(u, self.now) else (
                CPU_OVER if u.cpu > self.cpu_threshold else MEMORY_OVER if u.memory > self.memory_threshold else None)
                for u in self.usage], dtype=object)
            feasible = np.array([r is None for r in reasons], dtype=bool)
            self._filter = NodeFilter(feasible, reasons, ~feasible, all_feasible=bool(feasible.all()))
        return self._filter

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Zero everywhere when no node has fresh usage (fixed when the session opens)."""
        return None if self._any_fresh else (REUSE_STATIC, None)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """`node_score` over the candidates, numpy over the node rows; unmeasured nodes score 0 (all of them when no
        candidate is measured: then the shadow estimates are not gathered at all)."""
        c = candidates
        if not self._fresh[c].any():
            return np.zeros(len(c))
        est_cpu, est_mem = np.zeros(len(self._names)), np.zeros(len(self._names))
        for name, v in self.shadow.cpu.items():
            est_cpu[self._rows[name]] = v
        for name, v in self.shadow.memory.items():
            est_mem[self._rows[name]] = v
        cpu = _composite_v(self._real[c, 0], est_cpu[c], self._cap[c, 0])
        mem = _composite_v(self._real[c, 1], est_mem[c], self._cap[c, 1])
        total = self.cpu_weight + self.memory_weight
        if total == 0:
            return np.zeros(len(c))
        score = ((1.0 - cpu) * self.cpu_weight + (1.0 - mem) * self.memory_weight) / total * MAX_NODE_SCORE
        return np.where(self._fresh[c], score * self.usage_weight, 0.0)


def _composite_v(real: np.ndarray, shadow: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """`composite` over arrays (0 where the capacity is not positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (real / 100.0 * capacity + shadow) / capacity
    return np.where(capacity > 0, np.clip(share, 0.0, 1.0), 0.0)


def _capacity(node: Node) -> tuple[float, float]:
    status = node.node.get("status") or {}
    rl = status.get("capacity") or status.get("allocatable") or {}
    try:
        cpu = float(quantity.parse(rl["cpu"]).milli_value()) if "cpu" in rl else 0.0
        mem = float(quantity.parse(rl["memory"]).value()) if "memory" in rl else 0.0
    except ValueError:
        return 0.0, 0.0
    return cpu, mem
