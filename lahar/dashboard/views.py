"""The dashboard's view models for queues, jobs and policies: pure functions from cluster objects (plain dicts, as
the informers hold them) to rows that `pages` renders. No I/O, no HTML.

Part of `lahar.dashboard`; `nodes` holds the node and HyperNode views, `pages` renders both.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

__all__ = [
    "Bar", "JobRow", "Placement", "PolicyCounter", "PolicyEvent", "PolicyRow", "QueueRow", "amount", "hypernode_tier",
    "job_rows", "jobs_by_phase", "placements", "pods_by_job", "shares", "pod_facts", "policy_counters", "policy_rows",
    "queue_rows", "why_pending",
]

Obj = dict[str, Any]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_NAME_LABEL = "volcano.sh/job-name"
TOPOLOGY_DECISION_ANNOTATION = "volcano.sh/topology-decision"
DEVICE_ALLOCATED_ANNOTATION = "scheduling.koordinator.sh/device-allocated"
PAIRS_ANNOTATION = "lahar.sh/gpu-rdma-pairs"
HYPERNODE_ANNOTATION = "volcano.sh/job-allocated-hypernode"
POLICY_LABEL = "lahar.sh/policy"
TERMINAL = ("Succeeded", "Failed")
JOB_PHASES = ("Pending", "Inqueue", "Running", "Restarting", "Completing", "Aborting", "Aborted", "Terminating",
              "Terminated", "Completed", "Failed")


@functools.lru_cache(maxsize=4096)
def amount(text: str | int | float | None) -> float:
    """A quantity as a float (cores, bytes, devices); 0 for None or a value that is no quantity."""
    if text is None:
        return 0.0
    if isinstance(text, int | float):
        return float(text)
    from lahar.kube import quantity

    try:
        return float(quantity.parse(text))
    except (ValueError, TypeError):
        return 0.0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def _ns(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "")


# -- queues -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One resource of a queue: allocated against deserved, capability and guarantee (None = not set)."""

    resource: str
    allocated: float
    deserved: float | None
    capability: float | None
    guarantee: float | None
    cluster: float | None = None  # what the cluster's nodes offer in all

    @property
    def scale(self) -> float:
        """The bar's full width: the cluster's total, or the largest of the four when larger (1 when all are 0)."""
        return max([self.allocated, *(v for v in (self.deserved, self.capability, self.guarantee, self.cluster)
                                      if v)], default=0) or 1

    def percent(self, value: float | None) -> float:
        return round(100.0 * (value or 0) / self.scale, 1)


@dataclass(frozen=True)
class QueueRow:
    name: str
    depth: int
    parent: str
    weight: int
    state: str
    bars: tuple[Bar, ...]
    podgroups: Mapping[str, int]  # Pending / Inqueue / Running / other phases -> count


BAR_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def _resources(rl: Mapping[str, Any] | None) -> dict[str, float]:
    return {k: amount(v) for k, v in (rl or {}).items()}


def _pods_requests(pods: Iterable[PodFacts]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for facts in pods:
        for r, v in facts.requests.items():
            out[r] += v
    return out


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the pages read of a pod: its node ("" while pending), phase and effective requests as floats."""

    node: str
    phase: str
    requests: Mapping[str, float]

    @property
    def occupying(self) -> bool:
        return bool(self.node) and self.phase not in TERMINAL


_FACTS: dict[tuple[str, str], PodFacts] = {}
_FACTS_MAX = 200_000


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """`PodFacts` of a pod, remembered per (uid, resourceVersion): an unchanged pod is read once, however many
    renders follow (the informers hand out the same objects until the pod changes). Pods without both are read
    each time."""
    meta = pod.get("metadata") or {}
    key = (meta.get("uid"), meta.get("resourceVersion"))
    if key[0] and key[1]:
        hit = _FACTS.get(key)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    status = pod.get("status") or {}
    facts = PodFacts(str((pod.get("spec") or {}).get("nodeName") or ""), str(status.get("phase") or "Pending"),
                     pod_requests(pod))
    if key[0] and key[1]:
        if len(_FACTS) >= _FACTS_MAX:
            _FACTS.clear()
        _FACTS[key] = facts  # type: ignore[index]
    return facts


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """The pod's effective requests (sum over containers, max with each init container), as floats."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = defaultdict(float)
    for c in spec.get("containers") or ():
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[r] += amount(v)
    for c in spec.get("initContainers") or ():
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[r] = max(total[r], amount(v))
    return total


def queue_rows(queues: Sequence[Obj], podgroups: Sequence[Obj], *, pods: Sequence[Obj] = (),
               cluster: Mapping[str, float] | None = None) -> list[QueueRow]:
    """The queue tree depth-first (root first, children by name), each with its bars (scaled to `cluster`, the
    nodes' allocatable in all, when given) and PodGroup counts.

    Allocated is `status.allocated` when the scheduler wrote it, else the requests of the queue's bound, unfinished
    pods (through their PodGroups). A queue whose parent does not exist hangs under the top level."""
    by_name = {_name(q): q for q in queues}
    children: dict[str, list[str]] = defaultdict(list)
    for name, q in by_name.items():
        parent = (q.get("spec") or {}).get("parent") or ("root" if name != "root" and "root" in by_name else "")
        if parent and parent not in by_name:
            parent = ""
        children[parent].append(name)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    queue_of_group: dict[tuple[str, str], str] = {}
    for pg in podgroups:
        q = (pg.get("spec") or {}).get("queue") or "default"
        counts[q][(pg.get("status") or {}).get("phase") or "Pending"] += 1
        queue_of_group[(_ns(pg), _name(pg))] = q
    used: dict[str, list[PodFacts]] = defaultdict(list)
    if not all((q.get("status") or {}).get("allocated") for q in queues):
        for pod in pods:
            meta = pod.get("metadata") or {}
            q = queue_of_group.get((meta.get("namespace") or "", (meta.get("annotations") or {}).get(
                GROUP_NAME_ANNOTATION) or ""))
            if q and (facts := pod_facts(pod)).occupying:
                used[q].append(facts)
    rows: list[QueueRow] = []
    seen: set[str] = set()

    def walk(name: str, depth: int, parent: str) -> None:
        if name in seen:  # a cycle in spec.parent: shown once
            return
        seen.add(name)
        q = by_name[name]
        spec, status = q.get("spec") or {}, q.get("status") or {}
        allocated = _resources(status.get("allocated")) if status.get("allocated") else _pods_requests(used[name])
        deserved, capability = _resources(spec.get("deserved")), _resources(spec.get("capability"))
        guarantee = _resources((spec.get("guarantee") or {}).get("resource"))
        names = [r for r in BAR_RESOURCES if r in {*allocated, *deserved, *capability, *guarantee} or r != "nvidia.com/gpu"]
        bars = tuple(Bar(r, allocated.get(r, 0.0), deserved.get(r), capability.get(r), guarantee.get(r),
                         (cluster or {}).get(r)) for r in names)
        rows.append(QueueRow(name, depth, parent, int(spec.get("weight") or 1), str(status.get("state") or "Open"),
                             bars, dict(counts[name])))
        for child in sorted(children.get(name, ())):
            walk(child, depth + 1, name)

    for top in sorted(children.get("", ())):
        walk(top, 0, "")
    for name in sorted(set(by_name) - seen):  # only cycles are left
        walk(name, 0, "")
    return rows


def shares(rows: Sequence[QueueRow]) -> dict[str, float]:
    """Each queue's dominant share (DRF's): the largest allocated / cluster total over its bars, 0..1; 0 for bars
    without a cluster total."""
    return {r.name: max((b.allocated / b.cluster for b in r.bars if b.cluster), default=0.0) for r in rows}


# -- jobs ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where one pod landed: its node, NUMA nodes, GPUs (minor or UUID) and GPU/VF pairs."""

    pod: str
    node: str
    numa: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()  # (GPU, VF bus id)
    vfs: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobRow:
    namespace: str
    name: str
    phase: str
    queue: str
    min_available: int
    running: int
    pending: int
    succeeded: int
    failed: int
    why: tuple[str, ...] = ()
    hypernode: str = ""
    placements: tuple[Placement, ...] = field(default=())
    tier: int | None = None  # the tier of `hypernode` in the HyperNode tree (None: no such HyperNode, or no tier)


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def placements(pod: Mapping[str, Any]) -> Placement:
    """The decision annotations of one bound pod read back: `volcano.sh/topology-decision` (NUMA ids),
    `scheduling.koordinator.sh/device-allocated` (GPU minors, RDMA VFs) and `lahar.sh/gpu-rdma-pairs`. Malformed
    annotations are left out, not raised."""
    ann = _meta(pod).get("annotations") or {}
    decision = _json(ann.get(TOPOLOGY_DECISION_ANNOTATION))
    numa = tuple(sorted(decision["numa"], key=str)) if isinstance(decision, dict) and isinstance(
        decision.get("numa"), dict) else ()
    allocated = _json(ann.get(DEVICE_ALLOCATED_ANNOTATION))
    gpus: list[str] = []
    vfs: list[str] = []
    if isinstance(allocated, dict):
        for entry in allocated.get("gpu") or ():
            if isinstance(entry, dict) and "minor" in entry:
                gpus.append(str(entry["minor"]))
        for entry in allocated.get("rdma") or ():
            if isinstance(entry, dict):
                for vf in ((entry.get("extension") or {}).get("vfs") or ()):
                    if isinstance(vf, dict) and vf.get("busID"):
                        vfs.append(str(vf["busID"]))
    pairs_doc = _json(ann.get(PAIRS_ANNOTATION))
    pairs = tuple((str(p.get("gpu")), str(p.get("vf"))) for p in pairs_doc if isinstance(p, dict)) \
        if isinstance(pairs_doc, list) else ()
    return Placement(_name(pod), str((pod.get("spec") or {}).get("nodeName") or ""), numa, tuple(gpus), pairs,
                     tuple(vfs))


def why_pending(*, job: Mapping[str, Any], podgroup: Mapping[str, Any] | None, queue: Mapping[str, Any] | None,
                events: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Why a job waits, most decisive first: its queue is missing or not Open, the queue's capability is below the
    gang's minResources (the queue limit), the enqueue vote (the PodGroup's Unschedulable condition), then the
    FailedScheduling / Unschedulable Event texts, grouped and counted (`3× 0/6 nodes are available: ...`)."""
    out: list[str] = []
    qname = (job.get("spec") or {}).get("queue") or "default"
    if queue is None:
        out.append(f"queue {qname} does not exist")
    else:
        state = (queue.get("status") or {}).get("state") or "Open"
        if state != "Open":
            out.append(f"queue {qname} is {state}")
        capability = _resources((queue.get("spec") or {}).get("capability"))
        need = _resources(((podgroup or {}).get("spec") or {}).get("minResources"))
        over = [f"{r} {_short(need[r], r)} > capability {_short(capability[r], r)}" for r in sorted(need)
                if r in capability and need[r] > capability[r]]
        if over:
            out.append(f"queue {qname} limit: " + ", ".join(over))
    if podgroup is None:
        out.append("no PodGroup yet (the job controller has not made it)")
    else:
        for c in (podgroup.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Unschedulable" and c.get("status") == "True":
                out.append(f"enqueue vote: {c.get('reason') or 'Unschedulable'}: {c.get('message') or ''}".rstrip(": "))
    grouped: Counter[str] = Counter()
    for e in events:
        if e.get("reason") in ("FailedScheduling", "Unschedulable") and e.get("message"):
            grouped[str(e["message"])] += int(e.get("count") or 1)
    out += [f"{n}× {msg}" if n > 1 else msg for msg, n in sorted(grouped.items(), key=lambda kv: (-kv[1], kv[0]))]
    return tuple(out)


def _short(value: float, resource: str) -> str:
    if resource == "memory" or resource.endswith("memory") or resource == "ephemeral-storage":
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                return f"{value / size:.4g}{unit}"
        return f"{value:.0f}"
    return f"{value:.4g}"


DETAILS_PER_PHASE = 200


def pods_by_job(pods: Iterable[Obj]) -> dict[tuple[str, str], list[Obj]]:
    """Pods by (namespace, `volcano.sh/job-name` label): what `job_rows` reads; `live.Hub` keeps the same as an
    informer index instead of regrouping every render."""
    out: dict[tuple[str, str], list[Obj]] = defaultdict(list)
    for pod in pods:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        if job:
            out[(meta.get("namespace") or "", job)].append(pod)
    return out


def job_rows(*, jobs: Sequence[Obj], podgroups: Sequence[Obj],
             pods: Sequence[Obj] | Mapping[tuple[str, str], Sequence[Obj]], queues: Sequence[Obj] = (),
             events: Sequence[Obj] = (), details: int | None = None,
             hypernodes: Sequence[Obj] = ()) -> list[JobRow]:
    """One row per Volcano Job (namespace, name order): its gang's minAvailable against its running and pending
    pods (the Job's status counts, which the job controller keeps), and either why it waits (Pending, Inqueue, or
    Running with pods pending) or where its pods landed — for the first `details` jobs of each phase (all when
    None; the Jobs page shows no more than that many per phase), with the HyperNode its PodGroup was allocated in
    (`volcano.sh/job-allocated-hypernode`) and that HyperNode's tier from `hypernodes`. `pods` is a list, or
    already `pods_by_job`."""
    tiers = {_name(h): hypernode_tier(h) for h in hypernodes}
    groups: dict[tuple[str, str], Obj] = {}
    for pg in podgroups:
        owner = next((r.get("name") for r in _meta(pg).get("ownerReferences") or () if r.get("kind") == "Job"), None)
        groups[(_ns(pg), owner or _name(pg))] = pg
    pods_of = pods if isinstance(pods, Mapping) else pods_by_job(pods)
    events_of: dict[tuple[str, str], list[Obj]] = defaultdict(list)
    for e in events:
        if e.get("reason") in ("FailedScheduling", "Unschedulable"):
            inv = e.get("involvedObject") or {}
            events_of[(str(inv.get("namespace") or _ns(e)), str(inv.get("name") or ""))].append(e)
    queue_by_name = {_name(q): q for q in queues}
    rows: list[JobRow] = []
    shown: Counter[str] = Counter()
    for job in sorted(jobs, key=lambda j: (_ns(j), _name(j))):
        meta = job.get("metadata") or {}
        ns, name = meta.get("namespace") or "", meta.get("name") or ""
        spec, status = job.get("spec") or {}, job.get("status") or {}
        phase = str((status.get("state") or {}).get("phase") or "Pending")
        pending = int(status.get("pending") or 0)
        why: tuple[str, ...] = ()
        placed: tuple[Placement, ...] = ()
        hypernode = ""
        shown[phase] += 1
        if details is None or shown[phase] <= details:
            pg = groups.get((ns, name))
            mine = pods_of.get((ns, name), ())
            if phase in ("Pending", "Inqueue") or (phase == "Running" and pending):
                related = [e for key in [(ns, name), *((ns, _name(p)) for p in mine if _pending(p))]
                           for e in events_of.get(key, ())]
                if pg is not None:
                    related += events_of.get((ns, _name(pg)), [])
                why = why_pending(job=job, podgroup=pg, queue=queue_by_name.get(spec.get("queue") or "default"),
                                  events=related)
            if phase != "Pending":
                placed = tuple(placements(p) for p in sorted(mine, key=_name) if not _pending(p))
            hypernode = (_meta(pg).get("annotations") or {}).get(HYPERNODE_ANNOTATION, "") if pg else ""
        rows.append(JobRow(ns, name, phase, str(spec.get("queue") or "default"), int(spec.get("minAvailable") or 0),
                           int(status.get("running") or 0), pending, int(status.get("succeeded") or 0),
                           int(status.get("failed") or 0), why, hypernode, placed, tiers.get(hypernode)))
    return rows


def hypernode_tier(hn: Mapping[str, Any]) -> int | None:
    """A HyperNode's `spec.tier` as an int; None when missing or not a whole number."""
    tier = (hn.get("spec") or {}).get("tier")
    if isinstance(tier, bool):
        return None
    if isinstance(tier, int):
        return tier
    return int(tier) if isinstance(tier, str) and tier.strip().isdigit() else None


def _pending(pod: Mapping[str, Any]) -> bool:
    return not (pod.get("spec") or {}).get("nodeName")


def jobs_by_phase(rows: Sequence[JobRow]) -> list[tuple[str, list[JobRow]]]:
    """Rows grouped by phase in the job state machine's order (phases lahar does not know last, by name)."""
    grouped: dict[str, list[JobRow]] = defaultdict(list)
    for r in rows:
        grouped[r.phase].append(r)
    order = {p: i for i, p in enumerate(JOB_PHASES)}
    return sorted(grouped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))


# -- policies -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyRow:
    name: str
    source: str  # namespace/configmap
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    violations: int
    error: str = ""


@dataclass(frozen=True)
class PolicyEvent:
    namespace: str
    object: str
    type: str
    reason: str
    message: str
    count: int
    last: str


POLICY_EVENT_REASONS = ("PolicyViolation", "PolicyWarning", "PolicyDenied")


def policy_rows(configmaps: Sequence[Obj], events: Sequence[Obj]) -> tuple[list[PolicyRow], list[PolicyEvent]]:
    """The AdmissionPolicies loaded from ConfigMaps labelled `lahar.sh/policy: "true"` (each data value a YAML
    stream), with their violation counts, and the recent policy Events (newest first, at most 50). A value that
    does not parse is a row with its error, not an exception."""
    recent = sorted((e for e in events if e.get("reason") in POLICY_EVENT_REASONS),
                    key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""), reverse=True)
    per_policy: Counter[str] = Counter()
    for e in recent:
        msg = str(e.get("message") or "")
        if msg.startswith("AdmissionPolicy '"):
            per_policy[msg[len("AdmissionPolicy '"):].split("'", 1)[0]] += int(e.get("count") or 1)
    rows: list[PolicyRow] = []
    for cm in sorted(configmaps, key=lambda c: (_ns(c), _name(c))):
        if (_meta(cm).get("labels") or {}).get(POLICY_LABEL) != "true":
            continue
        source = f"{_ns(cm)}/{_name(cm)}"
        for key, text in sorted((cm.get("data") or {}).items()):
            try:
                docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
            except yaml.YAMLError as e:
                rows.append(PolicyRow(key, source, (), (), 0, f"not YAML: {str(e).splitlines()[0]}"))
                continue
            for doc in docs:
                if doc.get("kind") != "AdmissionPolicy":
                    continue
                spec = doc.get("spec") or {}
                name = str((doc.get("metadata") or {}).get("name") or key)
                rules = ((spec.get("matchConstraints") or {}).get("resourceRules") or ())
                resources = tuple(sorted({str(r) for rule in rules if isinstance(rule, dict)
                                          for r in rule.get("resources") or ()}))
                actions = tuple(spec.get("validationActions") or ()) + (("Mutate",) if spec.get("mutations") else ())
                rows.append(PolicyRow(name, source, actions, resources, per_policy[name]))
    shown = [PolicyEvent(_ns(e), f"{(e.get('involvedObject') or {}).get('kind', '')}/"
                                 f"{(e.get('involvedObject') or {}).get('name', '')}",
                         str(e.get("type") or ""), str(e.get("reason") or ""), str(e.get("message") or ""),
                         int(e.get("count") or 1), str(e.get("lastTimestamp") or e.get("eventTime") or ""))
             for e in recent[:50]]
    return rows, shown


@dataclass(frozen=True)
class PolicyCounter:
    """One of the webhook's policy counters: a policy, what it did (deny, warn, mutate; audit: the Audit kind),
    and how many times since the webhook started."""

    policy: str
    action: str
    count: int


# the webhook's policy counters (`webhooks.policystage.DECISIONS`, `policies.metrics.AUDITS`): name -> action label
POLICY_METRICS = {"lahar_policy_decisions_total": "action", "lahar_policy_audit_total": "kind"}
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\}\s+(?P<value>\S+)')
_ESCAPE = re.compile(r"\\(.)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def policy_counters(text: str) -> list[PolicyCounter]:
    """The policy counters of a Prometheus text exposition (the webhook's `/metrics`), largest first: decisions
    by policy and action, and Audit results as action `audit/<kind>`. Other metrics, comments and samples that do
    not parse are skipped; several workers' samples of one series add up."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m is None or m["name"] not in POLICY_METRICS:
            continue
        labels = {k: _ESCAPE.sub(lambda x: "\n" if x[1] == "n" else x[1], v) for k, v in _LABEL.findall(m["labels"])}
        try:
            value = float(m["value"])
        except ValueError:
            continue
        if "policy" not in labels or value != value or value <= 0:  # no policy, NaN or nothing counted
            continue
        action = labels.get(POLICY_METRICS[m["name"]], "")
        if m["name"] == "lahar_policy_audit_total":
            action = f"audit/{action}" if action else "audit"
        counts[(labels["policy"], action)] += int(value)
    return [PolicyCounter(p, a, n) for (p, a), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
