"""`lahar simulate --workload trace.yaml`: replay job arrivals and completions in simulated time (no sleeping), one
scheduling session (`run_session`) per tick on in-memory objects, and report per-job wait, queue shares and
cluster utilisation over time.

Pure over plain data: `load_trace(text)` → `Trace`; `replay(trace, conf)` → a JSON-able report; `scheduler.plot`
draws one. The CLI (lahar/commands/scheduler.py) turns a devcluster profile name into Node objects (`nodes=`).

A trace (YAML; durations are seconds or `500ms` / `30s` / `5m` / `1h`)::

    tick: 1s                  # simulated time between sessions (Volcano's schedulePeriod)
    horizon: 2h               # optional: stop here even if jobs remain
    cluster:
      profile: cpu-small      # a devcluster profile, `count` nodes of it ...
      count: 4
      nodes:                  # ... and/or explicit nodes (`count` copies named name-0, name-1, ...)
      - {name: gpu, count: 2, allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8"}}
      network: {nodesPerLeaf: 2, leavesPerSpine: 2}   # optional: tier-1 leaf-i / tier-2 spine-j HyperNodes over
      hypernodes:             # the nodes in order; or explicit ones (or whole HyperNode objects)
      - {name: rack-0, tier: 1, nodes: [gpu-0, gpu-1]}
      - {name: pod-0, tier: 2, hypernodes: [rack-0]}
    queues:
    - {name: research, weight: 2, capability: {cpu: "16"}}
    jobs:
    - name: train             # `repeat: N` copies train-0 .. train-(N-1), one every `every`
      queue: research
      arrival: 0s
      gang: 4                 # PodGroup minMember
      replicas: 4             # pods (default: gang)
      requests: {cpu: "2", memory: 4Gi}
      duration: 30s           # each pod runs this long once bound
      repeat: 3
      every: 20s
      networkTopology: {mode: hard, highestTierAllowed: 1}   # optional, the PodGroup's spec.networkTopology
      partitionPolicy: {partitionSize: 2, minPartitions: 2, networkTopology: {mode: hard, highestTierAllowed: 1}}
                              # optional, as a Volcano Job task's: pods k·size..(k+1)·size−1 form subgroup main-k

Model: at each tick, pods whose duration has elapsed succeed and a job whose pods all succeeded is done (and
removed, as a TTL would); jobs whose arrival has come get their PodGroup and pods; then one session runs and its
binds start pods at once (a perfect kubelet). Evicted pods go back to Pending (as if their job controller recreated
them). Between events nothing changes, so the clock jumps to the next arrival or completion on the tick grid.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import re
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from lahar.kube.models import labels as kube_labels
from lahar.scheduler import tierreport
from lahar.scheduler.framework import hypernodes as hypernodes_
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.conf import SchedulerConf, default_conf
from lahar.scheduler.framework.nodes import ResourceIndex
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session

__all__ = ["JobSpec", "NodeResolver", "Trace", "TraceError", "compare_table", "compare_topology", "leaf_spine", "load_trace",
           "parse_duration", "replay", "topology_diff"]

NAMESPACE = "trace"
_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"

# (profile name, count) → objects of the profile's nodes (Node, and optionally Numatopology / Device)
NodeResolver = Callable[[str, int], list[dict[str, Any]]]
# (simulated seconds, jobs finished, jobs in the trace) after every tick
ProgressFn = Callable[[float, int, int], None]


class TraceError(ValueError):
    """A trace that does not parse; the message names the field."""


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: Any, *, where: str = "duration") -> float:
    """Seconds from `30`, `2.5`, `500ms`, `30s`, `5m`, `1h`."""
    if isinstance(value, bool):
        raise TraceError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise TraceError(f"{where}: must not be negative")
        return float(value)
    m = _DURATION.match(str(value))
    if not m:
        raise TraceError(f"{where}: {value!r} is not a duration (like 30s, 5m, 1h)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


@dataclass(frozen=True)
class JobSpec:
    name: str
    queue: str
    arrival: float
    gang: int
    replicas: int
    requests: Mapping[str, str]
    duration: float
    priority_class: str = ""
    network_topology: Mapping[str, Any] | None = None
    partition: Mapping[str, Any] | None = None  # a Volcano Job task's partitionPolicy


@dataclass
class Trace:
    tick: float = 1.0
    horizon: float | None = None
    profile: str = ""
    count: int = 0
    nodes: list[dict[str, Any]] = field(default_factory=list)  # Node objects (explicit ones)
    hypernodes: list[dict[str, Any]] = field(default_factory=list)  # HyperNode objects
    network: tuple[int, int] | None = None  # (nodesPerLeaf, leavesPerSpine): leaf/spine HyperNodes over all nodes
    queues: list[dict[str, Any]] = field(default_factory=list)  # Queue objects
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[JobSpec] = field(default_factory=list)


def _node(name: str, allocatable: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    alloc = {k: str(v) for k, v in allocatable.items()}
    alloc.setdefault("pods", "110")
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {}, "status": {"allocatable": alloc, "capacity": dict(alloc),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TraceError(f"{where}: expected a mapping")
    return value


def load_trace(text: str) -> Trace:
    """Parse a trace (see the module docstring); errors name the offending field."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TraceError(f"not YAML: {e}") from e
    doc = _mapping(doc, "trace")
    unknown = set(doc) - {"tick", "horizon", "cluster", "queues", "jobs", "priorityClasses"}
    if unknown:
        raise TraceError(f"unknown field(s): {', '.join(sorted(unknown))}")
    tr = Trace(tick=parse_duration(doc.get("tick", 1), where="tick"))
    if tr.tick <= 0:
        raise TraceError("tick: must be positive")
    if doc.get("horizon") is not None:
        tr.horizon = parse_duration(doc["horizon"], where="horizon")
    cluster = _mapping(doc.get("cluster"), "cluster")
    tr.profile = str(cluster.get("profile") or "")
    tr.count = int(cluster.get("count") or 0) if tr.profile else 0
    for i, n in enumerate(cluster.get("nodes") or []):
        n = _mapping(n, f"cluster.nodes[{i}]")
        if not n.get("name") or not n.get("allocatable"):
            raise TraceError(f"cluster.nodes[{i}]: needs name and allocatable")
        count = n.get("count")
        names = [n["name"]] if count is None else [f"{n['name']}-{k}" for k in range(int(count))]
        tr.nodes.extend(_node(name, _mapping(n["allocatable"], f"cluster.nodes[{i}].allocatable"), n.get("labels"))
                        for name in names)
    if not tr.profile and not tr.nodes:
        raise TraceError("cluster: give a profile (with count) or nodes")
    tr.hypernodes = [_hypernode(h, f"cluster.hypernodes[{i}]") for i, h in enumerate(cluster.get("hypernodes") or [])]
    if cluster.get("network") is not None:
        net = _mapping(cluster["network"], "cluster.network")
        try:
            tr.network = (int(net.get("nodesPerLeaf", 0)), int(net.get("leavesPerSpine", 0)))
        except (TypeError, ValueError) as e:
            raise TraceError("cluster.network: nodesPerLeaf and leavesPerSpine must be integers") from e
        if min(tr.network) < 1:
            raise TraceError("cluster.network: nodesPerLeaf and leavesPerSpine must be at least 1")
    for i, q in enumerate(doc.get("queues") or [{"name": "default"}]):
        q = _mapping(q, f"queues[{i}]")
        if not q.get("name"):
            raise TraceError(f"queues[{i}]: needs a name")
        spec: dict[str, Any] = {"weight": int(q.get("weight", 1))}
        for key in ("capability", "deserved", "guarantee", "parent", "reclaimable", "priority"):
            if key in q:
                spec[key] = q[key]
        tr.queues.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                          "metadata": {"name": q["name"], "creationTimestamp": f"2024-01-01T00:00:{i % 60:02d}Z"},
                          "spec": spec, "status": {"state": "Open"}})
    queue_names = {q["metadata"]["name"] for q in tr.queues}
    for i, pc in enumerate(doc.get("priorityClasses") or []):
        pc = _mapping(pc, f"priorityClasses[{i}]")
        tr.priority_classes.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                    "metadata": {"name": pc["name"]}, "value": int(pc.get("value", 0))})
    seen: set[str] = set()
    for i, j in enumerate(doc.get("jobs") or []):
        where = f"jobs[{i}]"
        j = _mapping(j, where)
        name = str(j.get("name") or f"job-{i}")
        queue = str(j.get("queue") or next(iter(queue_names)))
        if queue not in queue_names:
            raise TraceError(f"{where}: unknown queue {queue!r}")
        gang = int(j.get("gang", 1))
        replicas = int(j.get("replicas", gang))
        if gang < 1 or replicas < gang:
            raise TraceError(f"{where}: need 1 <= gang <= replicas")
        requests = {k: str(v) for k, v in _mapping(j.get("requests"), f"{where}.requests").items()}
        arrival = parse_duration(j.get("arrival", 0), where=f"{where}.arrival")
        duration = parse_duration(j.get("duration", 60), where=f"{where}.duration")
        repeat = int(j.get("repeat", 1))
        every = parse_duration(j.get("every", 0), where=f"{where}.every")
        topo = j.get("networkTopology")
        if topo is not None:
            topo = _mapping(topo, f"{where}.networkTopology")
            if str(topo.get("mode", "hard")) not in ("hard", "soft"):
                raise TraceError(f"{where}.networkTopology.mode: must be hard or soft")
        partition = _partition(j.get("partitionPolicy"), f"{where}.partitionPolicy", replicas)
        for k in range(repeat):
            jname = name if repeat == 1 else f"{name}-{k}"
            if jname in seen:
                raise TraceError(f"{where}: duplicate job name {jname!r}")
            seen.add(jname)
            tr.jobs.append(JobSpec(jname, queue, arrival + k * every, gang, replicas, requests, duration,
                                   str(j.get("priorityClassName") or ""), topo, partition))
    tr.jobs.sort(key=lambda s: (s.arrival, s.name))
    return tr


def _partition(value: Any, where: str, replicas: int) -> dict[str, Any] | None:
    """A job's partitionPolicy (Volcano Job task field): partitionSize ≥ 1 dividing `replicas`, minPartitions
    between 0 and the partitions, an optional networkTopology."""
    if value is None:
        return None
    value = _mapping(value, where)
    if unknown := set(value) - {"partitionSize", "minPartitions", "networkTopology"}:
        raise TraceError(f"{where}: unknown field(s): {', '.join(sorted(unknown))}")
    try:
        size = int(value.get("partitionSize", 0))
        least = int(value.get("minPartitions", 0))
    except (TypeError, ValueError) as e:
        raise TraceError(f"{where}: partitionSize and minPartitions must be integers") from e
    if size < 1 or replicas % size:
        raise TraceError(f"{where}.partitionSize: must be at least 1 and divide replicas ({replicas})")
    if not 0 <= least <= replicas // size:
        raise TraceError(f"{where}.minPartitions: must be between 0 and replicas / partitionSize")
    out: dict[str, Any] = {"partitionSize": size, "minPartitions": least}
    topo = _mapping(value.get("networkTopology"), f"{where}.networkTopology")
    if str(topo.get("mode", "hard")) not in ("hard", "soft"):
        raise TraceError(f"{where}.networkTopology.mode: must be hard or soft")
    return {**out, "networkTopology": dict(topo)} if topo else out


SUBGROUP_POLICY = "main"  # the subGroupPolicy name of a trace job's partitions (subgroups main-0, main-1, ...)


def _hypernode(h: Any, where: str) -> dict[str, Any]:
    """A HyperNode object from a trace entry: a whole object (with `kind`) as is, or {name, tier, nodes | hypernodes}
    (exactMatch members)."""
    h = _mapping(h, where)
    if h.get("kind") == "HyperNode":
        return dict(h)
    if not h.get("name") or h.get("tier") is None:
        raise TraceError(f"{where}: needs name and tier")
    members = [{"type": "Node", "selector": {"exactMatch": {"name": str(n)}}} for n in h.get("nodes") or []]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": str(n)}}} for n in h.get("hypernodes") or []]
    if not members:
        raise TraceError(f"{where}: needs nodes or hypernodes")
    try:
        tier = int(h["tier"])
    except (TypeError, ValueError) as e:
        raise TraceError(f"{where}.tier: must be an integer") from e
    return hypernode_object(str(h["name"]), tier, members)


def hypernode_object(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def leaf_spine(node_names: list[str], nodes_per_leaf: int, leaves_per_spine: int) -> list[dict[str, Any]]:
    """Tier-1 `leaf-i` HyperNodes over consecutive runs of `nodes_per_leaf` nodes, tier-2 `spine-j` over runs of
    `leaves_per_spine` leaves."""
    leaves = [node_names[i:i + nodes_per_leaf] for i in range(0, len(node_names), nodes_per_leaf)]
    out = [hypernode_object(f"leaf-{i}", 1, [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in grp])
           for i, grp in enumerate(leaves)]
    for j in range(0, len(leaves), leaves_per_spine):
        out.append(hypernode_object(f"spine-{j // leaves_per_spine}", 2, [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf-{i}"}}}
            for i in range(j, min(j + leaves_per_spine, len(leaves)))]))
    return out


# --- the replay ----------------------------------------------------------------------------------------------------

@dataclass
class _Run:
    spec: JobSpec
    pods: list[str]
    bound: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)
    bound_at: float | None = None
    finished_at: float | None = None
    hypernode: str = ""
    tier: int | None = None
    subgroups: dict[str, dict[str, Any]] = field(default_factory=dict)  # subgroup → where it landed


def _timestamp(seconds: float) -> str:
    """A creationTimestamp that orders like the simulated clock (session ordering uses it)."""
    return (_EPOCH + dt.timedelta(seconds=int(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _objects(spec: JobSpec, now: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    created = _timestamp(now)
    pg_spec: dict[str, Any] = {"minMember": spec.gang, "queue": spec.queue}
    if spec.priority_class:
        pg_spec["priorityClassName"] = spec.priority_class
    if spec.network_topology:
        pg_spec["networkTopology"] = dict(spec.network_topology)
    if spec.partition:  # as the job controller writes a partitioned task's subGroupPolicy
        policy: dict[str, Any] = {"name": SUBGROUP_POLICY, "subGroupSize": spec.partition["partitionSize"],
                                  "minSubGroups": spec.partition["minPartitions"],
                                  "matchLabelKeys": [kube_labels.PARTITION_ID_KEY]}
        if spec.partition.get("networkTopology"):
            policy["networkTopology"] = dict(spec.partition["networkTopology"])
        pg_spec["subGroupPolicy"] = [policy]
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": spec.name, "namespace": NAMESPACE, "creationTimestamp": created}, "spec": pg_spec,
          "status": {"phase": "Pending"}}
    pods = []
    size = spec.partition["partitionSize"] if spec.partition else 0
    for k in range(spec.replicas):
        name = f"{spec.name}-{k}"
        pod_spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [
            {"name": "main", "image": "sim", "resources": {"requests": dict(spec.requests)}}]}
        if spec.priority_class:
            pod_spec["priorityClassName"] = spec.priority_class
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"{NAMESPACE}/{name}",
                                  "annotations": {GROUP_ANNOTATION: spec.name}, "creationTimestamp": created,
                                  **({"labels": {kube_labels.PARTITION_ID_KEY: str(k // size)}} if size else {})},
                     "spec": pod_spec, "status": {"phase": "Pending"}})
    return pg, pods


def _grid(t: float, target: float, tick: float) -> float:
    """The first session time on the tick grid at or after `target` (sessions run at t, t + tick, ...)."""
    if target <= t:
        return t + tick
    return t + math.ceil((target - t) / tick - 1e-9) * tick


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p90": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {"mean": round(float(a.mean()), 3), "p50": round(float(np.percentile(a, 50)), 3),
            "p90": round(float(np.percentile(a, 90)), 3), "max": round(float(a.max()), 3)}


def replay(trace: Trace, conf: SchedulerConf | None = None, *, registry: Registry | None = None,
           nodes: Iterable[Mapping[str, Any]] = (), progress: ProgressFn | None = None,
           max_sessions: int = 1_000_000, topology: bool | None = None) -> dict[str, Any]:
    """Replay `trace` (plus `nodes`, e.g. a resolved devcluster profile) and return the report:

        {"summary": {...}, "jobs": [{"name", "queue", "arrival", "bound_at", "wait_s", "finished_at", ...}],
         "timeline": {"t": [...], "utilisation": {"cpu": [...]}, "queue_share": {"q": [...]},
                      "pending_pods": [...], "running_pods": [...]}}

    Queue share = the queue's dominant share (its largest fraction of any cluster resource) at that time; the
    timeline is a step function sampled after every session that ran.

    With HyperNodes (`trace.hypernodes`, `trace.network`, or HyperNode objects in `nodes`) each job also says the
    HyperNode and tier it landed in, `timeline.tiers` gives per tier the share of HyperNodes left whole and the free
    amount of the counted resource (GPUs if any, else cpu; `scheduler.tierreport`), `summary.tiers` their time
    means and `occupancy` each HyperNode's use at the busiest moment. `topology` True / False: run with the
    network-topology-aware plugin on / off (off also drops the jobs' networkTopology); None: as `conf` says.
    """
    registry = registry if registry is not None else in_tree_registry()
    conf = conf if conf is not None else default_conf(registry.plugin_names)
    if topology is not None:
        conf = tierreport.with_topology(conf, topology)
    extra_nodes = [dict(o) for o in nodes]
    node_objs = [o for o in extra_nodes if o.get("kind") == "Node"] + list(trace.nodes)
    numatopologies = [o for o in extra_nodes if o.get("kind") == "Numatopology"]
    devices = [o for o in extra_nodes if o.get("kind") == "Device"]
    if not node_objs:
        raise TraceError("cluster: no nodes")
    hn_objs = [o for o in extra_nodes if o.get("kind") == "HyperNode"] + list(trace.hypernodes)
    if trace.network is not None:
        hn_objs += leaf_spine([(n.get("metadata") or {}).get("name", "") for n in node_objs], *trace.network)
    tree = hypernodes_.build(hn_objs, node_objs) if hn_objs else None

    names: set[str] = set()
    for n in node_objs:
        names.update(((n.get("status") or {}).get("allocatable") or {}).keys())
    for s in trace.jobs:
        names.update(s.requests)
    res = ResourceIndex(names)
    capacity = res.zeros()
    for n in node_objs:
        capacity += res.vector((n.get("status") or {}).get("allocatable"))
    requested = {name for s in trace.jobs for name in s.requests}
    shown = [i for i, name in enumerate(res.names) if capacity[i] > 0 and (i < 2 or name in requested)]
    request = {s.name: res.vector(s.requests) for s in trace.jobs}
    node_cap = {(n.get("metadata") or {}).get("name", ""): res.vector((n.get("status") or {}).get("allocatable"))
                for n in node_objs}
    tier_res = tierreport.resource_of({"": {n: float(capacity[i]) for i, n in enumerate(res.names)}})
    tier_i = res.names.index(tier_res) if tier_res in res.names else 0
    tier_cap = {k: float(v[tier_i]) / 1000 for k, v in node_cap.items()}  # cpu and GPUs are kept in milli-units
    tl_tiers: dict[str, dict[str, list[Any]]] = {}
    tier_area: dict[str, float] = {}
    peak: tuple[float, dict[str, Any]] = (-1.0, {})

    queues = [dict(q, status=dict(q.get("status") or {})) for q in trace.queues]
    podgroups: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}
    runs: dict[str, _Run] = {}
    pod_job: dict[str, str] = {}
    arrivals = list(trace.jobs)
    next_arrival = 0
    ends: list[tuple[float, str, int]] = []  # (end time, pod key, generation)
    generation: dict[str, int] = {}
    running: dict[str, np.ndarray] = {}
    running_queue: dict[str, str] = {}
    finished = 0
    sessions = binds = evictions = 0
    compute_s = 0.0
    shared: dict[Hashable, Any] = {}  # kept across the ticks, as the scheduler cache keeps it (Session.shared_state)
    tl_t: list[float] = []
    tl_util: dict[str, list[float]] = {res.names[i]: [] for i in shown}
    tl_share: dict[str, list[float]] = {q["metadata"]["name"]: [] for q in queues}
    tl_pending: list[int] = []
    tl_running: list[int] = []
    util_area = np.zeros(len(res))
    share_area = dict.fromkeys(tl_share, 0.0)
    last_t = 0.0
    stuck = False

    t = arrivals[0].arrival if arrivals else 0.0
    t = math.floor(t / trace.tick) * trace.tick
    while True:
        # completions
        while ends and ends[0][0] <= t + 1e-9:
            end, key, gen = heapq.heappop(ends)
            if generation.get(key) != gen or key not in pods:
                continue
            pods[key]["status"] = {"phase": "Succeeded"}
            running.pop(key, None)
            running_queue.pop(key, None)
            run = runs[pod_job[key]]
            run.succeeded.add(key)
            if len(run.succeeded) == len(run.pods):
                run.finished_at = end
                finished += 1
                pg_key = f"{NAMESPACE}/{run.spec.name}"
                podgroups.pop(pg_key, None)
                for p in run.pods:
                    pods.pop(p, None)
        # arrivals
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= t + 1e-9:
            spec = arrivals[next_arrival]
            next_arrival += 1
            pg, job_pods = _objects(spec if topology is not False else _no_topology(spec), spec.arrival)
            podgroups[f"{NAMESPACE}/{spec.name}"] = pg
            keys = []
            for p in job_pods:
                key = f"{NAMESPACE}/{p['metadata']['name']}"
                pods[key] = p
                pod_job[key] = spec.name
                keys.append(key)
            runs[spec.name] = _Run(spec, keys)

        pending = sum(1 for p in pods.values() if p["status"].get("phase") == "Pending"
                      and not p["spec"].get("nodeName"))
        changed = False
        if pending:
            snap = snapshots.build(pods=pods.values(), nodes=node_objs, podgroups=podgroups.values(), queues=queues,
                                   priority_classes=trace.priority_classes, numatopologies=numatopologies,
                                   devices=devices, hypernodes=hn_objs)
            c0 = time.perf_counter()
            decisions = run_session(snap, conf, registry=registry, uid=f"tick-{sessions}", shared=shared)
            compute_s += time.perf_counter() - c0
            sessions += 1
            for e in decisions.evictions:
                key = f"{e.namespace}/{e.name}"
                pod = pods.get(key)
                if pod is None:
                    continue
                pod["spec"].pop("nodeName", None)
                pod["status"] = {"phase": "Pending"}
                generation[key] = generation.get(key, 0) + 1
                running.pop(key, None)
                running_queue.pop(key, None)
                runs[pod_job[key]].bound.discard(key)
                evictions += 1
                changed = True
            for b in decisions.binds:
                key = f"{b.namespace}/{b.name}"
                pod = pods[key]
                pod["spec"]["nodeName"] = b.node
                pod["status"] = {"phase": "Running"}
                gen = generation[key] = generation.get(key, 0) + 1
                run = runs[pod_job[key]]
                heapq.heappush(ends, (t + run.spec.duration, key, gen))
                running[key] = request[run.spec.name]
                running_queue[key] = run.spec.queue
                run.bound.add(key)
                if run.bound_at is None and len(run.bound) == len(run.pods):
                    run.bound_at = t
                    if tree is not None:
                        run.hypernode, run.tier = tierreport.landed(
                            tree, (pods[p]["spec"]["nodeName"] for p in run.pods))
                        if run.spec.partition:
                            part = {p: (pods[p]["metadata"].get("labels") or {}).get(kube_labels.PARTITION_ID_KEY)
                                    for p in run.pods}
                            run.subgroups = tierreport.placements(
                                tree, {p: pods[p]["spec"]["nodeName"] for p in run.pods},
                                {p: f"{SUBGROUP_POLICY}-{v}" for p, v in part.items()})
                binds += 1
                changed = True
            for uid, upd in decisions.podgroups.items():
                if upd.changed and uid in podgroups:
                    old_phase = (podgroups[uid].get("status") or {}).get("phase")
                    podgroups[uid]["status"] = upd.status
                    changed = changed or upd.status.get("phase") != old_phase
            for q in queues:
                alloc = decisions.queues.get(q["metadata"]["name"])
                if alloc is not None:
                    q["status"]["allocated"] = alloc
            pending = sum(1 for p in pods.values() if p["status"].get("phase") == "Pending"
                          and not p["spec"].get("nodeName"))

        # sample the state that holds from t until the next session
        used = res.zeros()
        by_queue = {name: res.zeros() for name in tl_share}
        for key, vec in running.items():
            used += vec
            by_queue[running_queue[key]] += vec
        util = {res.names[i]: round(float(used[i] / capacity[i]), 4) for i in shown}
        share = {}
        for name, vec in by_queue.items():
            fr = [vec[i] / capacity[i] for i in shown]
            share[name] = round(float(max(fr)) if fr else 0.0, 4)
        if tl_t:
            dt_ = t - last_t
            util_area += dt_ * np.array([tl_util[res.names[i]][-1] if i in shown else 0.0 for i in range(len(res))])
            for name in share_area:
                share_area[name] += dt_ * tl_share[name][-1]
        last_t = t
        tl_t.append(round(t, 6))
        for name, v in util.items():
            tl_util[name].append(v)
        for name, v in share.items():
            tl_share[name].append(v)
        tl_pending.append(pending)
        tl_running.append(len(running))
        if tree is not None:
            node_used: dict[str, float] = {}
            for key, vec in running.items():
                node = pods[key]["spec"].get("nodeName", "")
                node_used[node] = node_used.get(node, 0.0) + float(vec[tier_i]) / 1000
            frag = tierreport.fragmentation(tree, node_used, tier_cap)
            for tier, row in frag.items():
                if len(tl_t) > 1 and tier in tl_tiers:
                    tier_area[tier] = tier_area.get(tier, 0.0) + (t - tl_t[-2]) * (tl_tiers[tier]["whole_share"][-1]
                                                                                 or 0.0)
                col = tl_tiers.setdefault(tier, {"whole_share": [], "whole": [], "free": []})
                col["whole_share"].append(row["whole_share"])
                col["whole"].append(row["whole"])
                col["free"].append(row["free"])
            total = sum(node_used.values())
            if total > peak[0]:
                peak = (total, {"t": round(t, 6), "resource": tier_res,
                                "hypernodes": tierreport.occupancy(tree, node_used, tier_cap)})
        if progress is not None:
            progress(t, finished, len(arrivals))

        # advance
        if finished == len(arrivals):
            break
        upcoming = []
        if next_arrival < len(arrivals):
            upcoming.append(arrivals[next_arrival].arrival)
        if ends:
            upcoming.append(ends[0][0])
        if changed and pending:
            nxt = t + trace.tick
        elif upcoming:
            nxt = _grid(t, min(upcoming), trace.tick)
        else:
            stuck = True  # pending pods that no session can place and nothing left to free resources
            break
        if (trace.horizon is not None and nxt > trace.horizon + 1e-9) or sessions >= max_sessions:
            break
        t = nxt

    jobs_out = []
    waits = []
    for spec in trace.jobs:
        run = runs.get(spec.name)
        bound_at = run.bound_at if run else None
        wait = None if bound_at is None else round(bound_at - spec.arrival, 6)
        if wait is not None:
            waits.append(wait)
        jobs_out.append({"name": spec.name, "queue": spec.queue, "arrival": spec.arrival, "gang": spec.gang,
                         "replicas": spec.replicas, "requests": dict(spec.requests), "duration": spec.duration,
                         "bound_at": bound_at, "wait_s": wait,
                         "finished_at": run.finished_at if run else None,
                         **({"hypernode": run.hypernode if run else "", "tier": run.tier if run else None}
                            if tree is not None else {}),
                         **({"subgroups": dict(run.subgroups) if run else {}}
                            if tree is not None and spec.partition else {})})
    span = last_t - (tl_t[0] if tl_t else 0.0)
    mean_util = {res.names[i]: round(float(util_area[i] / span), 4) if span > 0 else None for i in shown}
    mean_share = {n: round(v / span, 4) if span > 0 else None for n, v in share_area.items()}
    summary = {
        "nodes": len(node_objs), "jobs": len(arrivals), "jobs_finished": finished,
        "jobs_never_bound": [s.name for s in trace.jobs if runs.get(s.name) is None or runs[s.name].bound_at is None],
        "stuck": stuck, "simulated_s": round(last_t, 6), "tick_s": trace.tick, "sessions": sessions,
        "binds": binds, "evictions": evictions, "wait_s": _quantiles(waits),
        "mean_utilisation": mean_util, "mean_queue_share": mean_share,
        "capacity": {res.names[i]: res.to_list(capacity, all_dims=True)[res.names[i]] for i in shown},
        "session_compute_s": round(compute_s, 4),  # wall clock spent in sessions (varies run to run)
    }
    out = {"summary": summary, "jobs": jobs_out,
           "timeline": {"t": tl_t, "utilisation": tl_util, "queue_share": tl_share, "pending_pods": tl_pending,
                        "running_pods": tl_running}}
    if tree is not None:
        summary["tiers"] = {"resource": tier_res, "mean_whole_share": {
            tier: round(tier_area.get(tier, 0.0) / span, 4) if span > 0 else col["whole_share"][-1]
            for tier, col in tl_tiers.items()}}
        out["timeline"]["tiers"] = tl_tiers
        out["occupancy"] = peak[1] or {"t": 0.0, "resource": tier_res,
                                       "hypernodes": tierreport.occupancy(tree, {}, tier_cap)}
    return out


def _no_topology(spec: JobSpec) -> JobSpec:
    return JobSpec(spec.name, spec.queue, spec.arrival, spec.gang, spec.replicas, spec.requests, spec.duration,
                   spec.priority_class)


def compare_topology(trace: Trace, conf: SchedulerConf | None = None, **kw: Any) -> dict[str, Any]:
    """The same trace twice, with the network-topology-aware plugin (and the jobs' networkTopology) and without:
    {"with": report, "without": report, "waits": {job: {"with", "without"}}, "summary": {...}}."""
    on = replay(trace, conf, topology=True, **kw)
    off = replay(trace, conf, topology=False, **kw)
    return {"with": on, "without": off, **topology_diff(on, off)}


def topology_diff(on: Mapping[str, Any], off: Mapping[str, Any]) -> dict[str, Any]:
    """Per-job waits and the wait / whole-HyperNode summaries of two replays of one trace side by side."""
    off_jobs = {j["name"]: j for j in off["jobs"]}
    waits = {j["name"]: {"with": j["wait_s"], "without": off_jobs.get(j["name"], {}).get("wait_s")}
             for j in on["jobs"]}

    def tiers(r: Mapping[str, Any]) -> dict[str, Any]:
        return dict((r["summary"].get("tiers") or {}).get("mean_whole_share") or {})

    return {"waits": waits, "summary": {
        "wait_s": {"with": on["summary"]["wait_s"], "without": off["summary"]["wait_s"]},
        "mean_whole_share": {"with": tiers(on), "without": tiers(off)},
        "jobs_never_bound": {"with": on["summary"]["jobs_never_bound"],
                             "without": off["summary"]["jobs_never_bound"]}}}


def compare_table(both: Mapping[str, Any]) -> list[str]:
    """`--compare-topology -o table`: the wait summaries, each job's wait and HyperNode with and without, and the
    mean share of whole HyperNodes per tier."""

    def q(w: Mapping[str, Any]) -> str:
        return f"mean {w['mean']} s p50 {w['p50']} s p90 {w['p90']} s max {w['max']} s"

    def f(v: float | None) -> str:
        return "-" if v is None else format(v, ".0f")

    s = both["summary"]
    lines = [f"with topology:    wait {q(s['wait_s']['with'])}", f"without topology: wait {q(s['wait_s']['without'])}"]
    where = {side: {j["name"]: j for j in both[side]["jobs"]} for side in ("with", "without")}
    lines.append(f"  {'job':<24} {'wait with':>10} {'without':>8}  hypernode with / without")
    for name, w in both["waits"].items():
        a, b = where["with"].get(name, {}), where["without"].get(name, {})
        lines.append(f"  {name:<24} {f(w['with']):>10} {f(w['without']):>8}  {a.get('hypernode') or '-'} / "
                     f"{b.get('hypernode') or '-'}")
    ws = s["mean_whole_share"]
    for tier in sorted(set(ws["with"]) | set(ws["without"])):
        lines.append(f"tier {tier}: whole HyperNodes on average {_pct(ws['with'].get(tier))} with, "
                     f"{_pct(ws['without'].get(tier))} without")
    return lines


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"
