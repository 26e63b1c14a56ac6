"""rescheduling: name victims for the shuffle action from rescheduling strategies (Volcano's `plugins/rescheduling`).

Arguments: `interval` (a Go duration, default 5m: the strategies run at most once per interval, the first time one
interval after the scheduler's first session, as upstream), `metricsPeriod` (read, unused: lahar's metrics source
has one value per node), `strategies` (`[{name, params}]`, default `lowNodeUtilization` with its defaults). The one
strategy upstream has, `lowNodeUtilization`, is the pure `low_node_utilization` over plain `NodeLoad`s and
`Candidate`s: when some nodes are under `thresholds` and others over `targetThresholds`, it evicts from the most
used of the latter, lowest priority and QoS first, while the node stays at or over a target threshold and the
under-used nodes keep room up to their targets. A node's use is its measured load (the `lahar.sh/node-usage`
annotation the usage plugin reads, when fresh) or else the requests placed on it, and its pod count.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import durations, podspec
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task

__all__ = [
    "DEFAULT_INTERVAL",
    "LOW_NODE_UTILIZATION",
    "Candidate",
    "LowNodeUtilization",
    "NodeLoad",
    "Rescheduling",
    "Victim",
    "due",
    "group_nodes",
    "low_node_utilization",
    "parse_interval",
    "parse_low_node_utilization",
]

DEFAULT_INTERVAL = 300.0
LOW_NODE_UTILIZATION = "lowNodeUtilization"
RESOURCES = ("cpu", "memory", "pods")
USAGE_ANNOTATION = "lahar.sh/node-usage"  # the usage plugin's metrics source
USAGE_ACTIVE = 300.0  # seconds: older measured load counts as unknown (as in the usage plugin)
_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


@dataclass(frozen=True, slots=True)
class LowNodeUtilization:
    """Percent thresholds per resource (`cpu`, `memory`, `pods`): under all of `thresholds` a node is under-used;
    over any of `targetThresholds` it is over-used. Upstream's defaults: 100 everywhere (so nothing moves)."""

    thresholds: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 100.0))
    target_thresholds: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 100.0))


def _thresholds(raw: Any) -> dict[str, float]:
    out = dict.fromkeys(RESOURCES, 100.0)
    if not isinstance(raw, Mapping):
        return out
    for key, value in raw.items():
        name = "pods" if key == "pod" else str(key)  # upstream reads `pod`, documents `pods`: both are taken
        if name in out and isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def parse_low_node_utilization(params: Any) -> LowNodeUtilization:
    """The strategy's `params`; a threshold that is not a number keeps its default, as upstream ignores it.
    `thresholdPriorityClassName` and `nodeFit` are accepted and, as upstream, not used."""
    p = params if isinstance(params, Mapping) else {}
    return LowNodeUtilization(_thresholds(p.get("thresholds")), _thresholds(p.get("targetThresholds")))


def parse_interval(value: Any) -> float:
    """`interval` in seconds; absent or not a positive Go duration: 5m (upstream's fallback)."""
    try:
        seconds = durations.parse(str(value))
    except ValueError:
        return DEFAULT_INTERVAL
    return seconds if seconds > 0 else DEFAULT_INTERVAL


def due(last: dt.datetime | None, now: dt.datetime, interval: float) -> tuple[bool, dt.datetime]:
    """Whether the strategies run now, and the time to remember: the first call only starts the clock; then they
    run once more than `interval` has passed since the last run (upstream's timeToRun)."""
    if last is None:
        return False, now
    if last + dt.timedelta(seconds=interval) < now:
        return True, now
    return False, last


@dataclass(slots=True)
class NodeLoad:
    """A node's capacity and use per resource (same units for both; `pods` in pods)."""

    name: str
    capacity: dict[str, float]
    used: dict[str, float]
    unschedulable: bool = False

    def percent(self) -> dict[str, float]:
        return {r: (100.0 * self.used.get(r, 0.0) / c if c > 0 else 0.0) for r, c in self.capacity.items()}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running task that may be evicted: where it runs, its priority and QoS class, and its requests."""

    uid: str
    node: str
    priority: int = 0
    qos: str = "BestEffort"
    request: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Victim:
    uid: str
    reason: str


def _over(percent: Mapping[str, float], limits: Mapping[str, float]) -> list[str]:
    return [f"{r} {percent[r]:.0f}% >= {limits[r]:.0f}%" for r in RESOURCES if r in percent and percent[r] >= limits[r]]


def group_nodes(nodes: Sequence[NodeLoad], conf: LowNodeUtilization) -> tuple[list[NodeLoad], list[NodeLoad]]:
    """(under-used, over-used): under-used is schedulable and under every threshold; over-used is not under-used
    and over some target threshold. Both empty when nothing is to move: no node of either kind, or every node
    under-used."""
    low, high = [], []
    for n in nodes:
        pct = n.percent()
        if not n.unschedulable and all(pct.get(r, 0.0) < conf.thresholds[r] for r in RESOURCES if r in n.capacity):
            low.append(n)
        elif any(pct.get(r, 0.0) > conf.target_thresholds[r] for r in RESOURCES if r in n.capacity):
            high.append(n)
    if not low or len(low) == len(nodes) or not high:
        return [], []
    return low, high


def low_node_utilization(nodes: Sequence[NodeLoad], candidates: Sequence[Candidate],
                         conf: LowNodeUtilization) -> list[Victim]:
    """Upstream's lowNodeUtilization over plain data.

    Nothing moves unless `group_nodes` finds both under- and over-used nodes. The room is, summed over under-used
    nodes, target minus use per resource. Over-used nodes go most used first (cpu% + memory%); on each, candidates
    go lowest priority first, then BestEffort before Burstable before Guaranteed; evicting one takes its requests
    off the node and off the room, and eviction stops on the node once it is under every target or the room of a
    resource is used up (upstream stops only at exactly zero)."""
    low, high = group_nodes(nodes, conf)
    if not high:
        return []
    pct = {n.name: n.percent() for n in (*low, *high)}
    room = dict.fromkeys(RESOURCES, 0.0)
    for n in low:
        for r in RESOURCES:
            cap = n.capacity.get(r, 0.0)
            room[r] += (conf.target_thresholds[r] - pct[n.name].get(r, 0.0)) * cap / 100.0
    by_node: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_node.setdefault(c.node, []).append(c)
    high.sort(key=lambda n: -(pct[n.name].get("cpu", 0.0) + pct[n.name].get("memory", 0.0)))
    victims: list[Victim] = []
    for n in high:
        use = pct[n.name]
        for c in sorted(by_node.get(n.name, ()), key=lambda c: (c.priority, _QOS_RANK.get(c.qos, 2))):
            over = _over(use, conf.target_thresholds)
            if not over or any(room[r] <= 0 for r in RESOURCES):
                break
            victims.append(Victim(c.uid, f"rescheduling {LOW_NODE_UTILIZATION}: node {n.name} over "
                                         f"targetThresholds ({', '.join(over)})"))
            for r in RESOURCES:
                amount = c.request.get(r, 0.0)
                room[r] -= amount
                cap = n.capacity.get(r, 0.0)
                if cap > 0:
                    use[r] = use.get(r, 0.0) - 100.0 * amount / cap
    return victims


def _time(text: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _qos(pod: Mapping[str, Any], cache: dict[str, str]) -> str:
    """The pod's QoS class, remembered by what decides it (the pod's and its containers' resources): a job's pods
    share a template, and parsing every pod's quantities would cost more than the strategy itself."""
    spec = pod.get("spec") or {}
    key = repr((spec.get("resources"), [c.get("resources") for c in spec.get("containers") or ()],
                [c.get("resources") for c in spec.get("initContainers") or ()]))
    qos = cache.get(key)
    if qos is None:
        if len(cache) >= 4096:
            cache.clear()
        qos = cache[key] = podspec.qos_class(pod)
    return qos


def _measured(node: Mapping[str, Any], now: dt.datetime) -> dict[str, float] | None:
    """cpu and memory percent from the node-usage annotation when it is fresh, else None."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(USAGE_ANNOTATION)
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
        at = _time(data["time"]) if isinstance(data, dict) and isinstance(data.get("time"), str) else None
        if at is None or (now - at).total_seconds() > USAGE_ACTIVE:
            return None
        return {"cpu": float(data["cpu"]), "memory": float(data["memory"])}
    except (ValueError, TypeError, KeyError):
        return None


class Rescheduling:
    name = "rescheduling"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.interval = parse_interval(self.arguments.get("interval", "5m"))
        self.strategies: list[tuple[str, Any]] = [(LOW_NODE_UTILIZATION, {})]
        raw = self.arguments.get("strategies")
        if isinstance(raw, list) and raw:  # upstream: a non-empty list replaces the default
            self.strategies = [(str(s.get("name") or ""), s.get("params")) for s in raw if isinstance(s, Mapping)]
        self.run = False
        self._ssn: Session | None = None
        self._reasons: dict[str, str] = {}

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self._reasons = {}
        clock: dict[str, dt.datetime] = ssn.shared_state((self.name, "last-run"), dict)
        self.run, clock["at"] = due(clock.get("at"), _time(ssn.timestamp), self.interval)

    def on_session_close(self, ssn: Session) -> None:
        self._ssn = None
        self._reasons = {}

    def _loads(self, ssn: Session) -> list[NodeLoad]:
        arrays, now = ssn.arrays, _time(ssn.timestamp)
        cpu, mem = ssn.resources.cpu, ssn.resources.memory
        out = []
        for i, n in enumerate(ssn.nodes):
            cap = {"cpu": float(arrays.allocatable[i, cpu]), "memory": float(arrays.allocatable[i, mem]),
                   "pods": float(arrays.max_pods[i])}
            used = {"cpu": float(arrays.used[i, cpu]), "memory": float(arrays.used[i, mem]),
                    "pods": float(arrays.pods[i])}
            measured = _measured(n.node, now)
            if measured is not None:
                used["cpu"] = measured["cpu"] * cap["cpu"] / 100.0
                used["memory"] = measured["memory"] * cap["memory"] / 100.0
            out.append(NodeLoad(n.name, cap, used, n.unschedulable))
        return out

    def victim_tasks(self, tasks: list[Task]) -> list[Task]:
        """The victims of every configured strategy (upstream's one: lowNodeUtilization; other names are
        skipped, as upstream skips them), when the interval has come round."""
        if not self.run or self._ssn is None:
            return []
        ssn = self._ssn
        cpu, mem = ssn.resources.cpu, ssn.resources.memory
        loads = self._loads(ssn)
        out: list[Task] = []
        for name, params in self.strategies:
            if name != LOW_NODE_UTILIZATION:
                continue
            conf = parse_low_node_utilization(params)
            _, high = group_nodes(loads, conf)
            hot = {n.name for n in high}
            if not hot:
                continue
            by_uid = {t.uid: t for t in tasks if t.node_name in hot and t.preemptable}
            qos: dict[str, str] = ssn.shared_state((self.name, "qos"), dict)
            candidates = [Candidate(t.uid, t.node_name, t.priority, _qos(t.pod, qos),
                                    {"cpu": float(t.resreq[cpu]), "memory": float(t.resreq[mem]), "pods": 1.0})
                          for t in by_uid.values()]
            for v in low_node_utilization(loads, candidates, conf):
                if v.uid not in self._reasons:
                    self._reasons[v.uid] = v.reason
                    out.append(by_uid[v.uid])
        return out

    def victim_reason(self, task: Task) -> str:
        return self._reasons.get(task.uid, self.name)
