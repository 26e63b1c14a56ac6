"""resource-strategy-fit: per-resource LeastAllocated / MostAllocated scoring, scarce-resource avoidance (`sra`) and
the `proportional` reserve predicate — Volcano's `plugins/resource-strategy-fit`.

Score: for each resource the task requests that `resources` configures (exact name, else the longest `prefix*`
pattern), LeastAllocated gives (alloc - used - req) / alloc and MostAllocated (used + req) / alloc, times the
resource's weight; the sum over the weights, × 100 × `resourceStrategyFitWeight` (default 10). A node the request
overflows on a configured resource scores 0. A pod may pick its own type and weights with the annotations
`volcano.sh/resource-strategy-scoring-type` and `volcano.sh/resource-strategy-weight` (JSON {resource: weight}).
`sra` lowers nodes that carry scarce resources (`sra.resources`) for tasks that do not need them: 1 - (weight of the
scarce resources the node has) / (their total weight), × 100 × `sra.weight`; a node lacking something the task
requests scores 0. `proportional` refuses a node to a task without the listed resource when the node's idle cpu or
memory would fall below `resourceProportion` (`<res>.cpu` cores and `<res>.memory` GB per unit of it still idle).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import REUSE_ROWS, REUSE_STATIC, NodeFilter, passing
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task

__all__ = [
    "DEFAULT_WEIGHT",
    "LEAST",
    "MOST",
    "Proportion",
    "ResourceStrategyFit",
    "Scoring",
    "Sra",
    "Strategy",
    "find_strategy",
    "parse_proportional",
    "parse_sra",
    "parse_strategy",
    "proportional_filter",
    "sra_scores",
    "strategy_score",
    "valid_pattern",
]

DEFAULT_WEIGHT = 10
MAX_NODE_SCORE = 100.0
LEAST, MOST = "LeastAllocated", "MostAllocated"
TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
_UNSET = object()
_FEW = 8  # rows recomputed at most, for the per-row float path (numpy's per-call cost dominates below it)


def _int(v: Any) -> int | None:
    """A whole number from the conf (YAML int, or a float without fraction); None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _float(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


class Strategy:
    """The plugin weight and {resource or `prefix*`: (type, weight)}."""

    __slots__ = ("weight", "resources")

    def __init__(self, weight: int, resources: dict[str, tuple[str, int]]) -> None:
        self.weight = weight
        self.resources = resources

    def __repr__(self) -> str:
        return f"Strategy(weight={self.weight}, resources={self.resources})"


def valid_pattern(key: str) -> bool:
    """A plain name, or one `*` at the end of a non-empty prefix (a bare `*` is refused, as upstream)."""
    if "*" not in key:
        return True
    return key != "*" and key.endswith("*") and key.count("*") == 1


def parse_strategy(args: Mapping[str, Any]) -> Strategy:
    """Upstream calculateWeight: weight missing or negative → 10; `resources` missing or empty → cpu and memory
    LeastAllocated with weight 1; a weight ≤ 0 → 1; a type other than the two → LeastAllocated; bad patterns
    dropped. An entry that is not a mapping is dropped too (upstream would drop the whole list)."""
    weight = _int(args.get("resourceStrategyFitWeight"))
    if weight is None or weight < 0:
        weight = DEFAULT_WEIGHT
    raw = args.get("resources")
    if not isinstance(raw, Mapping) or not raw:
        return Strategy(weight, {"cpu": (LEAST, 1), "memory": (LEAST, 1)})
    resources: dict[str, tuple[str, int]] = {}
    for key, entry in raw.items():
        if not isinstance(key, str) or not valid_pattern(key) or not isinstance(entry, Mapping):
            continue
        w = _int(entry.get("weight"))
        kind = entry.get("type")
        resources[key] = (kind if kind in (LEAST, MOST) else LEAST, w if w is not None and w > 0 else 1)
    return Strategy(weight, resources)


def find_strategy(name: str, resources: Mapping[str, tuple[str, int]]) -> tuple[str, int] | None:
    """The exact entry, else the `prefix*` entry with the longest prefix of `name`."""
    if name in resources:
        return resources[name]
    best, found = -1, None
    for key, value in resources.items():
        if key.endswith("*"):
            prefix = key[:-1]
            if name.startswith(prefix) and len(prefix) > best:
                best, found = len(prefix), value
    return found


def pod_strategy(pod: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None | bool:
    """The pod's own scoring from its annotations: None when it sets none, False when the weights are missing or
    not a JSON object of whole numbers (the pod then scores 0 everywhere, as upstream)."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    kind = ann.get(TYPE_ANNOTATION)
    if not kind:
        return None
    try:
        raw = json.loads(ann.get(WEIGHT_ANNOTATION) or "")
    except ValueError:
        return False
    if not isinstance(raw, dict):
        return False
    weights: dict[str, int] = {}
    for name, w in raw.items():
        wi = _int(w)
        if wi is None:
            return False
        weights[name] = wi
    return str(kind), weights


class Scoring:
    """What `strategy_score` derives from a request, the conf and the pod's annotations alone, worked out once: the
    resources scored (their columns, requests, weights and whether MostAllocated) and the weight sum."""

    __slots__ = ("zero", "cols", "req", "w", "most", "weight_sum", "scale", "scalar")

    def __init__(self, request: np.ndarray, names: tuple[str, ...], strategy: Strategy,
                 pod: tuple[str, dict[str, int]] | None | bool = None) -> None:
        self.zero = pod is False
        cols: list[int] = []
        kinds: list[bool] = []
        weights: list[int] = []
        weight_sum = 0
        for r, name in enumerate(names) if not self.zero else ():
            if float(request[r]) < EPSILON:
                continue
            if isinstance(pod, tuple):
                if name not in pod[1]:
                    continue
                kind, w = pod[0], pod[1][name]
            else:
                found = find_strategy(name, strategy.resources)
                if found is None:
                    continue
                kind, w = found
            weight_sum += w
            if w == 0 or kind not in (LEAST, MOST):
                continue  # counts in the sum, scores nothing
            cols.append(r)
            kinds.append(kind == MOST)
            weights.append(w)
        self.cols = np.array(cols, dtype=np.intp)
        self.req = np.asarray(request, dtype=np.float64)[self.cols]
        self.w = np.array(weights, dtype=np.float64)
        self.most = np.array(kinds, dtype=bool)
        self.weight_sum = weight_sum
        self.scale = MAX_NODE_SCORE * strategy.weight
        # (column, request, weight, most) as floats, for the few-rows path: with at most two resources, plain
        # float arithmetic in numpy's order gives numpy's results to the bit (a sum of two is the same either way)
        self.scalar = ([(int(c), float(q), float(x), bool(m)) for c, q, x, m in
                        zip(self.cols, self.req, self.w, self.most, strict=True)] if len(self.cols) <= 2 else None)

    def scores(self, allocatable: np.ndarray, used: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Over every node (`rows` None) or over `rows`."""
        n = len(allocatable) if rows is None else len(rows)
        if self.zero:
            return np.zeros(n)
        if not len(self.cols):
            return np.zeros(n)
        if rows is not None and n <= _FEW and self.scalar is not None:
            return np.array([self._row(allocatable, used, row) for row in rows.tolist()], dtype=np.float64)
        if rows is None:
            cap, final = allocatable[:, self.cols], used[:, self.cols] + self.req
        else:
            sel = np.ix_(rows, self.cols)
            cap, final = allocatable[sel], used[sel] + self.req
        live = cap != 0
        overflow = (live & (final > cap)).any(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(self.most, final, cap - final) * self.w / cap
        total = np.where(live, part, 0.0).sum(axis=1)
        if self.weight_sum > 0:
            total = total / self.weight_sum
        return np.where(overflow, 0.0, total * self.scale)


    def _row(self, allocatable: np.ndarray, used: np.ndarray, row: int) -> float:
        total = 0.0
        for c, req, w, most in self.scalar or ():
            cap = allocatable.item(row, c)
            final = used.item(row, c) + req
            if cap != 0:
                if final > cap:
                    return 0.0
                total += (final if most else cap - final) * w / cap
        if self.weight_sum > 0:
            total = total / self.weight_sum
        return total * self.scale


def strategy_score(request: np.ndarray, allocatable: np.ndarray, used: np.ndarray, names: tuple[str, ...],
                   strategy: Strategy, pod: tuple[str, dict[str, int]] | None | bool = None) -> np.ndarray:
    """Upstream Score over nodes (rows of `allocatable` / `used`), for a request vector in `names` order."""
    return Scoring(request, names, strategy, pod).scores(allocatable, used)


class Sra:
    """`sra`: its weight and {scarce resource: weight}."""

    __slots__ = ("weight", "resources")

    def __init__(self, weight: int, resources: dict[str, int]) -> None:
        self.weight = weight
        self.resources = resources

    @property
    def weight_sum(self) -> int:
        return sum(self.resources.values())

    def __repr__(self) -> str:
        return f"Sra(weight={self.weight}, resources={self.resources})"


def parse_sra(args: Mapping[str, Any]) -> Sra | None:
    """None unless `sra.enable` is true. `sra.weight` missing counts as 0 (no score, as upstream); a resource
    weight missing or negative → 1."""
    cfg = args.get("sra")
    if not isinstance(cfg, Mapping) or cfg.get("enable") is not True:
        return None
    weight = _int(cfg.get("weight")) or 0
    listed = cfg.get("resources")
    per = cfg.get("resourceWeight") if isinstance(cfg.get("resourceWeight"), Mapping) else {}
    resources: dict[str, int] = {}
    for name in (listed.split(",") if isinstance(listed, str) else []):
        name = name.strip()
        if not name:
            continue
        w = _int(per.get(name))
        resources[name] = 1 if w is None or w < 0 else w
    return Sra(weight, resources)


def sra_scores(request: np.ndarray, allocatable: np.ndarray, names: tuple[str, ...], sra: Sra) -> np.ndarray:
    """Upstream sraScore over nodes: the fewer (weighted) scarce resources a node has, the higher."""
    n = len(allocatable)
    lacking = np.zeros(n, dtype=bool)
    for r in range(len(names)):
        if request[r] >= EPSILON:
            lacking |= allocatable[:, r] == 0
    has = np.zeros(n)
    pos = {name: i for i, name in enumerate(names)}
    for name, w in sra.resources.items():
        i = pos.get(name)
        if i is not None:
            has += np.where(allocatable[:, i] > 0, float(w), 0.0)
    total = sra.weight_sum
    score = 1.0 - has / total if total > 0 else has
    return np.where(lacking, 0.0, score * MAX_NODE_SCORE * sra.weight)


class Proportion:
    __slots__ = ("cpu", "memory")

    def __init__(self, cpu: float, memory: float) -> None:
        self.cpu, self.memory = cpu, memory

    def __repr__(self) -> str:
        return f"Proportion(cpu={self.cpu}, memory={self.memory})"


def parse_proportional(args: Mapping[str, Any]) -> dict[str, Proportion] | None:
    """None unless `proportional.enable` is true; each listed resource's `<res>.cpu` / `<res>.memory` rate, missing
    or negative → 1."""
    cfg = args.get("proportional")
    if not isinstance(cfg, Mapping) or cfg.get("enable") is not True:
        return None
    listed = cfg.get("resources")
    rates = cfg.get("resourceProportion") if isinstance(cfg.get("resourceProportion"), Mapping) else {}
    out: dict[str, Proportion] = {}
    for name in (listed.split(",") if isinstance(listed, str) else []):
        name = name.strip()
        if not name:
            continue
        cpu, mem = _float(rates.get(f"{name}.cpu")), _float(rates.get(f"{name}.memory"))
        out[name] = Proportion(1.0 if cpu is None or cpu < 0 else cpu, 1.0 if mem is None or mem < 0 else mem)
    return out


def proportional_filter(request: np.ndarray, idle: np.ndarray, allocatable: np.ndarray, names: tuple[str, ...],
                        proportional: Mapping[str, Proportion]) -> np.ndarray | None:
    """Per node, the first listed resource (by name) whose reserve the task would eat into, or None everywhere.
    A task that requests any listed resource passes. Units: cpu milli, memory bytes, the resource in milli."""
    n = len(idle)
    reasons = np.full(n, None, dtype=object)
    pos = {name: i for i, name in enumerate(names)}
    if any(request[pos[r]] > 0 for r in proportional if r in pos):
        return reasons
    for name in sorted(proportional):
        i = pos.get(name)
        if i is None:
            continue
        rate = proportional[name]
        present = allocatable[:, i] > 0
        short = present & ((idle[:, 0] - request[0] < idle[:, i] * rate.cpu)
                           | (idle[:, 1] - request[1] < idle[:, i] * rate.memory * 1e6))
        reasons[short & (reasons == None)] = f"proportional of resource {name} check failed"  # noqa: E711
    return reasons


class ResourceStrategyFit:
    name = "resource-strategy-fit"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.strategy = parse_strategy(self.arguments)
        self.sra = parse_sra(self.arguments)
        self.proportional = parse_proportional(self.arguments)
        self.names: tuple[str, ...] = ()
        self._cache: RowCache | None = None
        self._scorings: dict[tuple[bytes, str | None], Scoring] = {}  # per request and pod scoring, this session
        self._pods: dict[tuple[Any, Any], Any] = {}  # (scoring-type, weight annotations) → pod_strategy

    def on_session_open(self, ssn: Session) -> None:
        self.names = ssn.resources.names
        self._scorings = {}
        self._pods = {}
        nodes = ssn.arrays
        self._cache = RowCache(nodes, lambda arg, rows: self._score(nodes, arg, rows))  # type: ignore[arg-type]

    def _score(self, nodes: NodeArrays, arg: tuple[np.ndarray, Scoring], rows: np.ndarray | None) -> np.ndarray:
        request, scoring = arg
        if rows is None:
            total = np.zeros(len(nodes.allocatable))
        else:
            total = np.zeros(len(rows))
        if self.strategy.weight > 0:
            total += scoring.scores(nodes.allocatable, nodes.used, rows)
        if self.sra is not None and self.sra.weight > 0:
            alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
            total += sra_scores(request, alloc, self.names, self.sra)
        return total

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        n = len(nodes)
        if not self.proportional:
            return passing(n)
        reasons = proportional_filter(task.resreq, nodes.idle, nodes.allocatable, self.names, self.proportional)
        assert reasons is not None
        feasible = np.equal(reasons, None)
        return NodeFilter(feasible, reasons, ~feasible)

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """A node's score reads its rows and the request and pod scoring annotations alone (`node_order`'s key)."""
        if self.strategy.weight <= 0 and (self.sra is None or self.sra.weight <= 0):
            return REUSE_STATIC, None
        if self._cache is None:
            return None
        pod = self._pod_strategy(task.pod)
        return REUSE_ROWS, (task.resreq.tobytes(), None if pod is None else repr(pod))

    def node_order_rows(self, task: Task) -> Callable[[np.ndarray], np.ndarray]:
        assert self._cache is not None
        _, arg = self._scoring(task)
        return functools.partial(self._score, self._cache.arrays, arg)

    def _scoring(self, task: Task) -> tuple[tuple[bytes, str | None], tuple[np.ndarray, Scoring]]:
        pod = self._pod_strategy(task.pod)
        key = (task.resreq.tobytes(), None if pod is None else repr(pod))
        scoring = self._scorings.get(key)
        if scoring is None:
            scoring = self._scorings[key] = Scoring(task.resreq, self.names, self.strategy, pod)
        return key, (task.resreq, scoring)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """Zero when both weights are 0 (upstream registers no NodeOrderFn then). Cached per request and pod
        scoring annotations, recomputed only on the nodes changed since (as binpack)."""
        if self.strategy.weight <= 0 and (self.sra is None or self.sra.weight <= 0):
            return np.zeros(len(candidates))
        key, arg = self._scoring(task)
        if self._cache is None or self._cache.arrays is not nodes:
            return self._score(nodes, arg, None)[candidates]
        return self._cache.get(key, arg)[candidates]

    def _pod_strategy(self, pod: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None | bool:
        """`pod_strategy`, parsed once per pair of annotation values (most pods set neither)."""
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        raw = (ann.get(TYPE_ANNOTATION), ann.get(WEIGHT_ANNOTATION))
        if not raw[0]:
            return None
        if not all(isinstance(v, str | None) for v in raw):
            return pod_strategy(pod)
        got = self._pods.get(raw, _UNSET)
        if got is _UNSET:
            got = self._pods[raw] = pod_strategy(pod)
        return got  # type: ignore[return-value]
