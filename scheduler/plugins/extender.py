"""extender: Volcano's HTTP scheduler-extender protocol (`plugins/extender`), a plugin whose hooks are POSTs.

Each configured verb (`extender.predicateVerb`, `extender.prioritizeVerb`, ...) turns on one hook; the hook POSTs
Volcano's JSON request to `<extender.urlPrefix>/<verb>` within `extender.httpTimeout` (Go duration, default 1s) and
reads Volcano's JSON response. Tasks that request none of `extender.managedResources` (when set) are not sent.
An unreachable or failing extender never crashes the session: with `extender.ignorable: true` the hook is skipped
(abstains), otherwise it answers the safe "no" (predicate fails naming the extender, no victims, not ready,
overused). After a transport failure the extender counts as down for the rest of the session (no call per node).
The wire shapes and the response readings are pure functions; `_Transport` is the thin HTTP shell (httpx).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from lahar.kube import durations
from lahar.scheduler.framework.hooks import NodeFilter, Vote
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job, Node, Queue, Task

__all__ = [
    "Extender",
    "ExtenderConfig",
    "ExtenderError",
    "is_interested",
    "node_json",
    "parse_config",
    "predicate_verdict",
    "prioritize_scores",
    "resource_json",
    "task_json",
    "victims_of",
    "vote_of",
]

log = logging.getLogger(__name__)

PREFIX = "extender."
VERBS = ("onSessionOpen", "onSessionClose", "predicate", "prioritize", "preemptable", "reclaimable",
         "queueOverused", "jobEnqueueable", "jobEnqueued", "jobReady", "allocateFunc", "deallocateFunc")
DEFAULT_TIMEOUT = 1.0
MAX_BODY = 10 << 20  # upstream's maxBodySize (10 MiB)
# Volcano's api.StatusCode numbers → the predicate outcome (Success 0, Error 1, Unschedulable 2,
# UnschedulableAndUnresolvable 3, Wait 4, Skip 5)
UNRESOLVABLE_CODES = frozenset({3})


class ExtenderError(Exception):
    """A call that did not give an answer: transport failure, non-200 status, or a body that is not the shape."""


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str = ""
    http_timeout: float = DEFAULT_TIMEOUT
    verbs: Mapping[str, str] | None = None  # protocol name (VERBS) → the URL path configured for it
    ignorable: bool = False
    managed_resources: frozenset[str] = frozenset()

    def verb(self, name: str) -> str:
        return (self.verbs or {}).get(name, "")


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return value is True


def parse_config(arguments: Mapping[str, Any]) -> ExtenderConfig:
    """The plugin's arguments, read as upstream does: strings for the prefix and the verbs, a Go duration for the
    timeout (unparsable → the 1s default), a bool for `ignorable`, a list (or comma-separated string) of
    managed resource names."""
    verbs = {v: arguments[f"{PREFIX}{v}Verb"] for v in VERBS
             if isinstance(arguments.get(f"{PREFIX}{v}Verb"), str) and arguments[f"{PREFIX}{v}Verb"]}
    timeout = DEFAULT_TIMEOUT
    raw = arguments.get(f"{PREFIX}httpTimeout")
    if isinstance(raw, str) and raw:
        try:
            parsed = durations.parse(raw)
        except ValueError:
            parsed = 0.0
        timeout = parsed if parsed > 0 else DEFAULT_TIMEOUT
    managed = arguments.get(f"{PREFIX}managedResources")
    if isinstance(managed, str):
        managed = [m.strip() for m in managed.split(",")]
    names = frozenset(str(m) for m in managed or () if str(m)) if isinstance(managed, list | tuple | str) \
        else frozenset()
    prefix = arguments.get(f"{PREFIX}urlPrefix")
    return ExtenderConfig(url_prefix=prefix if isinstance(prefix, str) else "", http_timeout=timeout,
                          verbs=verbs, ignorable=_bool(arguments.get(f"{PREFIX}ignorable")),
                          managed_resources=names)


def is_interested(pod: Mapping[str, Any], managed: frozenset[str]) -> bool:
    """Upstream's IsInterested: no managed resources → every task; else a container or init container that
    requests or limits one of them."""
    if not managed:
        return True
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        res = c.get("resources") or {}
        if any(name in managed for part in ("requests", "limits") for name in (res.get(part) or {})):
            return True
    return False


# --- the wire shapes (Volcano's api.TaskInfo / NodeInfo / JobInfo / QueueInfo as Go marshals them) -----------------

def resource_json(vector: Iterable[float], names: Iterable[str]) -> dict[str, Any]:
    """Volcano's api.Resource: MilliCPU, Memory (bytes), ScalarResources (milli-units, as upstream keeps them)."""
    values = dict(zip(names, (float(v) for v in vector), strict=False))
    scalars = {n: v for n, v in values.items() if n not in ("cpu", "memory")}
    return {"MilliCPU": values.get("cpu", 0.0), "Memory": values.get("memory", 0.0),
            "ScalarResources": scalars or None}


def task_json(task: Task, names: Iterable[str]) -> dict[str, Any]:
    names = tuple(names)
    return {"UID": task.uid, "Job": task.job, "Name": task.name, "Namespace": task.namespace,
            "TaskRole": task.role, "Resreq": resource_json(task.resreq, names),
            "InitResreq": resource_json(task.init_resreq, names), "NodeName": task.node_name,
            "Status": str(task.status), "Priority": task.priority, "Preemptable": task.preemptable,
            "BestEffort": bool(task.best_effort), "SchGated": task.sch_gated, "Pod": task.pod}


def node_json(node: Node, arrays: NodeArrays) -> dict[str, Any]:
    i, names = node.index, arrays.resources.names
    return {"Name": node.name, "Node": node.node, "State": {"Phase": "Ready"},
            "Idle": resource_json(arrays.idle[i], names), "Used": resource_json(arrays.used[i], names),
            "Releasing": resource_json(arrays.releasing[i], names),
            "Pipelined": resource_json(arrays.pipelined[i], names),
            "Allocatable": resource_json(arrays.allocatable[i], names),
            "Capability": resource_json(arrays.allocatable[i], names)}


def job_json(job: Job, names: Iterable[str]) -> dict[str, Any]:
    names = tuple(names)
    return {"UID": job.uid, "Name": job.name, "Namespace": job.namespace, "Queue": job.queue,
            "Priority": job.priority, "MinAvailable": job.min_available, "PodGroup": job.podgroup,
            "Tasks": {uid: task_json(t, names) for uid, t in job.tasks.items()}}


def queue_json(queue: Queue) -> dict[str, Any]:
    return {"UID": queue.uid, "Name": queue.name, "Weight": queue.weight, "Queue": queue.queue}


# --- reading the answers (pure) ------------------------------------------------------------------------------------

def predicate_verdict(body: Mapping[str, Any]) -> tuple[bool, str, bool]:
    """(fits, reason, unresolvable) from a PredicateResponse `{"status": message, "code": int}`: an empty message
    fits; a message with code 0 (old extenders) counts as Error, as upstream keeps it."""
    message = body.get("status") or ""
    if not isinstance(message, str):
        raise ExtenderError(f"predicate response: 'status' must be a string, got {type(message).__name__}")
    if not message:
        return True, "", False
    code = body.get("code")
    return False, message, isinstance(code, int) and code in UNRESOLVABLE_CODES


def prioritize_scores(body: Mapping[str, Any], node_names: list[str]) -> np.ndarray:
    """Scores in `node_names` order from a PrioritizeResponse `{"nodeScore": {name: score}, "errorMessage": ""}`;
    an error message, or no nodeScore, is an ExtenderError (upstream's errors.New(errorMessage))."""
    scores = body.get("nodeScore")
    error = body.get("errorMessage") or ""
    if error or not isinstance(scores, dict):
        raise ExtenderError(f"prioritize: {error or 'no nodeScore in the response'}")
    out = np.zeros(len(node_names))
    for i, name in enumerate(node_names):
        value = scores.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ExtenderError(f"prioritize: nodeScore[{name!r}] must be a number, got {value!r}")
        out[i] = float(value)
    return out


def vote_of(value: Any) -> Vote:
    """Volcano's util.Permit (1) / Abstain (0) / Reject (-1); anything else is an ExtenderError."""
    if isinstance(value, bool) or value not in (-1, 0, 1):
        raise ExtenderError(f"'status' must be -1, 0 or 1, got {value!r}")
    return Vote(value)


def victims_of(body: Mapping[str, Any], candidates: list[Task]) -> list[Task] | None:
    """A PreemptableResponse `{"status": vote, "victims": [TaskInfo]}`: abstain → None; otherwise the candidates
    whose UID the extender lists (a reject lists none: no victims)."""
    vote = vote_of(body.get("status", 0))
    if vote is Vote.ABSTAIN:
        return None
    if vote is Vote.REJECT:
        return []
    listed = {v.get("UID") for v in body.get("victims") or () if isinstance(v, dict)}
    return [t for t in candidates if t.uid in listed]


# --- the HTTP shell ------------------------------------------------------------------------------------------------

class _Transport:
    """POST JSON to `<prefix>/<verb>`; one keep-alive client per session. A transport failure marks it down."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.prefix = config.url_prefix.rstrip("/")
        self.timeout = config.http_timeout
        self.client: httpx.Client | None = None
        self.down = ""  # the first transport failure of this session
        self.calls = 0

    def send(self, verb: str, payload: Any, *, want_body: bool = True) -> dict[str, Any]:
        if self.down:
            raise ExtenderError(self.down)
        url = f"{self.prefix}/{verb}"
        if self.client is None:
            self.client = httpx.Client(timeout=self.timeout)
        self.calls += 1
        try:
            resp = self.client.post(url, json=payload)
        except httpx.HTTPError as e:
            self.down = f"extender at {url} unreachable: {type(e).__name__}: {e}"
            raise ExtenderError(self.down) from e
        except Exception as e:  # a payload that does not serialise, a bad URL: never crash the session
            raise ExtenderError(f"extender call {verb} failed: {e}") from e
        if resp.status_code != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status_code}")
        if not want_body:
            return {}
        if len(resp.content) > MAX_BODY:
            raise ExtenderError(f"extender {verb} response larger than {MAX_BODY} bytes")
        try:
            body = resp.json()
        except ValueError as e:
            raise ExtenderError(f"extender {verb} response is not JSON: {e}") from e
        if not isinstance(body, dict):
            raise ExtenderError(f"extender {verb} response must be a JSON object")
        return body

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class Extender:
    """The hooks are instance attributes, set only for the verbs configured (the session sees no others)."""

    name = "extender"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.config = parse_config(arguments or {})
        self.transport = _Transport(self.config)
        self._ssn: Session | None = None
        self.errors: list[str] = []  # what failed this session, in order (the first 100, for tests and logs)
        self.last_error = ""
        hooks = {"predicate": self._predicate, "prioritize": self._node_order, "preemptable": self._preemptable,
                 "reclaimable": self._reclaimable, "jobEnqueueable": self._job_enqueueable,
                 "jobEnqueued": self._job_enqueued, "queueOverused": self._overused, "jobReady": self._job_ready}
        names = {"prioritize": "node_order", "jobEnqueueable": "job_enqueueable", "jobEnqueued": "job_enqueued",
                 "queueOverused": "overused", "jobReady": "job_ready"}
        for verb, fn in hooks.items():
            if self.config.verb(verb):
                setattr(self, names.get(verb, verb), fn)
        if self.config.verb("allocateFunc") or self.config.verb("deallocateFunc"):
            self.on_allocate = self._on_allocate
            self.on_deallocate = self._on_deallocate

    # --- calls --------------------------------------------------------------------------------------------------

    def _call(self, verb: str, payload: Any, *, want_body: bool = True) -> dict[str, Any] | None:
        """The answer, or None after logging the failure (the caller picks the ignorable / safe outcome)."""
        try:
            return self.transport.send(self.config.verb(verb), payload, want_body=want_body)
        except ExtenderError as e:
            self._failed(verb, str(e))
            return None

    def _failed(self, verb: str, reason: str) -> None:
        self.last_error = f"{verb}: {reason}"
        if len(self.errors) < 100:
            self.errors.append(f"{verb}: {reason}")
        log.warning("extender %s failed: %s", verb, reason)

    def _names(self) -> tuple[str, ...]:
        assert self._ssn is not None
        return self._ssn.resources.names

    # --- lifecycle ----------------------------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        if not self.config.verb("onSessionOpen"):
            return
        names = self._names()
        payload = {"Jobs": {uid: job_json(j, names) for uid, j in ssn.jobs.items()},
                   "Nodes": {n.name: node_json(n, ssn.arrays) for n in ssn.nodes},
                   "Queues": {name: queue_json(q) for name, q in ssn.queues.items()},
                   "NamespaceInfo": {}, "RevocableNodes": {}, "NodeList": [n.name for n in ssn.nodes]}
        self._call("onSessionOpen", payload, want_body=False)

    def on_session_close(self, ssn: Session) -> None:
        if self.config.verb("onSessionClose") and not self.transport.down:
            self._call("onSessionClose", {}, want_body=False)
        self.transport.close()

    # --- nodes --------------------------------------------------------------------------------------------------

    def _predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        n = len(nodes.names)
        feasible = np.ones(n, dtype=bool)
        if not is_interested(task.pod, self.config.managed_resources):
            return NodeFilter(feasible)
        assert self._ssn is not None
        reasons = np.full(n, None, dtype=object)
        unresolvable = np.zeros(n, dtype=bool)
        tj = task_json(task, self._names())
        for node in self._ssn.nodes:
            i = node.index
            fits, reason, hard = self._fits(self._call("predicate", {"task": tj, "node": node_json(node, nodes)}))
            if not fits:
                feasible[i], reasons[i], unresolvable[i] = False, reason, hard
        return NodeFilter(feasible, reasons, unresolvable)

    def _fits(self, body: dict[str, Any] | None) -> tuple[bool, str, bool]:
        """One node's answer; no answer → fits when ignorable, else fails naming the extender's error."""
        if body is not None:
            try:
                return predicate_verdict(body)
            except ExtenderError as e:
                self._failed("predicate", str(e))
        if self.config.ignorable:
            return True, "", False
        return False, f"extender {self.last_error or 'gave no answer'}", False

    def _node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        """Upstream's batch node order; a failure (ignorable or not) scores 0 everywhere, logged."""
        zeros = np.zeros(len(candidates))
        if not is_interested(task.pod, self.config.managed_resources) or not len(candidates):
            return zeros
        assert self._ssn is not None
        rows = [int(c) for c in candidates]
        body = self._call("prioritize", {"task": task_json(task, self._names()),
                                         "nodes": [node_json(self._ssn.nodes[r], nodes) for r in rows]})
        if body is None:
            return zeros
        try:
            return prioritize_scores(body, [nodes.names[r] for r in rows])
        except ExtenderError as e:
            self._failed("prioritize", str(e))
            return zeros

    # --- victims ------------------------------------------------------------------------------------------------

    def _victims(self, verb: str, actor: Task, candidates: list[Task]) -> list[Task] | None:
        if not is_interested(actor.pod, self.config.managed_resources):
            return None
        names = self._names()
        body = self._call(verb, {"evictor": task_json(actor, names),
                                 "evictees": [task_json(t, names) for t in candidates]})
        try:
            if body is not None:
                return victims_of(body, candidates)
        except ExtenderError as e:
            self._failed(verb, str(e))
        return None if self.config.ignorable else []

    def _preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        return self._victims("preemptable", preemptor, preemptees)

    def _reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        return self._victims("reclaimable", reclaimer, reclaimees)

    # --- jobs and queues ----------------------------------------------------------------------------------------

    def _job_enqueueable(self, job: Job) -> Vote:
        body = self._call("jobEnqueueable", {"job": job_json(job, self._names())})
        try:
            if body is not None:
                return vote_of(body.get("status", 0))
        except ExtenderError as e:
            self._failed("jobEnqueueable", str(e))
        return Vote.ABSTAIN if self.config.ignorable else Vote.REJECT

    def _job_enqueued(self, job: Job) -> None:
        self._call("jobEnqueued", {"job": job_json(job, self._names())}, want_body=False)

    def _overused(self, queue: Queue) -> bool:
        body = self._call("queueOverused", {"queue": queue_json(queue)})
        if body is None:
            return not self.config.ignorable
        return body.get("overused") is True

    def _job_ready(self, job: Job) -> bool:
        body = self._call("jobReady", {"job": job_json(job, self._names())})
        if body is None:
            return self.config.ignorable
        return body.get("status") is True

    # --- events: told, not asked (lahar's event handlers cannot veto an allocation) --------------------------------

    def _event(self, verb: str, task: Task) -> None:
        if self.config.verb(verb) and is_interested(task.pod, self.config.managed_resources):
            body = self._call(verb, {"task": task_json(task, self._names())})
            if body and body.get("errorMessage"):
                self._failed(verb, str(body["errorMessage"]))

    def _on_allocate(self, task: Task) -> None:
        self._event("allocateFunc", task)

    def _on_deallocate(self, task: Task) -> None:
        self._event("deallocateFunc", task)
