"""Simulated kubelets for devcluster (the idea of kwok): node heartbeats and the lifecycle of pods bound to them.

Sits beside the API server: it talks to the cluster only through the `kube.client.ClusterClient` port (in devcluster a
`kube.apiserver.memory.MemoryClient` over the server's store). `plan(pod, ...)` is the pure decision "what would a
kubelet write next for this pod"; `SimulatedKubelets` is the shell: `sync()` runs one deterministic pass (tests drive
it with a fake clock), `start()` runs passes in a thread, woken by a pod watch. Reporting a node Ready also does
the node lifecycle controller's part: the `not-ready` taint the store's admission put on a new Node comes off
(`devcluster.admission.builtin.condition_taints`).

Pod annotations understood: `lahar.sh/sim-duration` (Go duration, e.g. `5s`, `1m30s`; absent → the kubelets'
`default_duration` for restartPolicy Never/OnFailure pods, by default none: runs until deleted) and
`lahar.sh/sim-exit-code` (default 0). Exit 0 → Succeeded; non-zero → Failed (reason Error) with restartPolicy Never,
else the container restarts (restartCount+1, lastState.terminated) like a kubelet; restartPolicy Always also restarts
after exit 0. A pod with a deletionTimestamp gets its containers terminated and is then deleted with grace 0.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lahar.devcluster import podports
from lahar.devcluster.admission import builtin
from lahar.kube import durations, errors, podspec
from lahar.kube.client import ClusterClient, Obj
from lahar.kube.resources import ResourceType

__all__ = [
    "DURATION_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "Action",
    "SimulatedKubelets",
    "plan",
]

log = logging.getLogger(__name__)

DURATION_ANNOTATION = "lahar.sh/sim-duration"
EXIT_CODE_ANNOTATION = "lahar.sh/sim-exit-code"
LEASE_SECONDS = 40
HEARTBEAT_SECONDS = 10.0
STATUS_REPORT_SECONDS = 60.0

Clock = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_ts(s: str | None) -> dt.datetime | None:
    if not s:
        return None
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------------------------------------------
# the pure decision


@dataclass(frozen=True)
class Action:
    """What the kubelet writes next: a new `status` (merge-patched on pods/status), then maybe a grace-0 delete."""

    status: Obj | None = None
    delete: bool = False
    wake_at: dt.datetime | None = None  # when to look at this pod again (a sim-duration timer)


def _condition(kind: str, status: str, now: str, reason: str | None = None) -> Obj:
    out: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        out["reason"] = reason
    return out


def _container_id(pod: Mapping[str, Any], name: str, restarts: int) -> str:
    uid = (pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name") or ""
    return "containerd://" + hashlib.sha256(f"{uid}/{name}/{restarts}".encode()).hexdigest()


def _image_id(image: str) -> str:
    ref = image if "/" in image else f"docker.io/library/{image}"
    repo = ref.split("@")[0].rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref.split("@")[0]
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _exit_code(pod: Mapping[str, Any]) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXIT_CODE_ANNOTATION, "0")
    try:
        return int(str(raw).strip())
    except ValueError:
        return 1


def _duration(pod: Mapping[str, Any], default: float | None = None) -> float | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(DURATION_ANNOTATION)
    if raw is None:
        # a default run time is for pods that end (Never/OnFailure); a restartPolicy Always pod is a service
        return default if (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure") else None
    try:
        return max(0.0, durations.parse(str(raw)))
    except ValueError:
        log.warning("pod %s: bad %s %r; running until deleted", (pod.get("metadata") or {}).get("name"),
                    DURATION_ANNOTATION, raw)
        return None


def _running_status(pod: Mapping[str, Any], *, now: dt.datetime, host_ip: str, pod_ip: str) -> Obj:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    t = _ts(now)
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    conditions = [
        _condition("PodReadyToStartContainers", "True", t),
        _condition("Initialized", "True", t),
        _condition("Ready", "True", t),
        _condition("ContainersReady", "True", t),
        scheduled or _condition("PodScheduled", "True", t),
    ]
    out: Obj = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": status.get("startTime") or t,
        "qosClass": status.get("qosClass") or podspec.qos_class(pod),
        "containerStatuses": [_container_running(pod, c, t, 0, None) for c in spec.get("containers") or []],
    }
    if spec.get("initContainers"):
        out["initContainerStatuses"] = [{
            "name": c.get("name"), "image": c.get("image", ""), "imageID": _image_id(c.get("image", "")),
            "containerID": _container_id(pod, c.get("name", ""), 0), "ready": True, "started": False,
            "restartCount": 0, "lastState": {},
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t, "finishedAt": t,
                                     "containerID": _container_id(pod, c.get("name", ""), 0)}},
        } for c in spec["initContainers"]]
    return out


def _container_running(pod: Mapping[str, Any], c: Mapping[str, Any], t: str, restarts: int,
                       last: Obj | None) -> Obj:
    image = c.get("image", "")
    return {"name": c.get("name"), "image": image, "imageID": _image_id(image),
            "containerID": _container_id(pod, c.get("name", ""), restarts), "ready": True, "started": True,
            "restartCount": restarts, "lastState": last or {}, "state": {"running": {"startedAt": t}}}


def _terminated(cs: Mapping[str, Any], *, exit_code: int, reason: str, now: str) -> Obj:
    running = (cs.get("state") or {}).get("running") or {}
    out = dict(cs)
    out["ready"] = False
    out["started"] = False
    out["state"] = {"terminated": {"exitCode": exit_code, "reason": reason,
                                   "startedAt": running.get("startedAt") or now, "finishedAt": now,
                                   "containerID": cs.get("containerID", "")}}
    return out


def _finished_status(pod: Mapping[str, Any], *, exit_code: int, now: dt.datetime, reason_all: str | None = None) -> Obj:
    status = dict(pod.get("status") or {})
    t = _ts(now)
    phase = "Succeeded" if exit_code == 0 else "Failed"
    reason = reason_all or ("Completed" if exit_code == 0 else "Error")
    cond_reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    conditions = []
    for c in status.get("conditions") or []:
        if c.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
            c = {**c, "status": "False", "lastTransitionTime": t}
            if c["type"] != "PodReadyToStartContainers":
                c["reason"] = cond_reason
        conditions.append(c)
    status["conditions"] = conditions
    status["phase"] = phase
    status["containerStatuses"] = [
        cs if (cs.get("state") or {}).get("terminated") else _terminated(cs, exit_code=exit_code, reason=reason, now=t)
        for cs in status.get("containerStatuses") or []
    ]
    return status


def _restarted_status(pod: Mapping[str, Any], *, exit_code: int, now: dt.datetime) -> Obj:
    status = dict(pod.get("status") or {})
    t = _ts(now)
    out = []
    for cs in status.get("containerStatuses") or []:
        restarts = int(cs.get("restartCount") or 0) + 1
        last = _terminated(cs, exit_code=exit_code, reason="Completed" if exit_code == 0 else "Error", now=t)["state"]
        spec_c = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == cs.get("name")),
                      {"name": cs.get("name"), "image": cs.get("image", "")})
        out.append(_container_running(pod, spec_c, t, restarts, last))
    status["containerStatuses"] = out
    return status


def _run_started(pod: Mapping[str, Any]) -> dt.datetime | None:
    """When the current run of the containers started (the latest running.startedAt)."""
    starts = [_parse_ts(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
              for cs in (pod.get("status") or {}).get("containerStatuses") or []]
    starts = [s for s in starts if s is not None]
    return max(starts) if starts else None


def plan(pod: Mapping[str, Any], *, now: dt.datetime, host_ip: str, pod_ip: str,
         default_duration: float | None = None) -> Action:
    """The kubelet's next write for a pod bound to this node (pure; no action → `Action()`). `default_duration`:
    the run time of a restartPolicy Never/OnFailure pod without `lahar.sh/sim-duration` (None → until deleted)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if meta.get("deletionTimestamp"):
        if phase in ("Succeeded", "Failed"):
            return Action(delete=True)
        if not status.get("containerStatuses"):
            return Action(delete=True)
        return Action(status=_finished_status(pod, exit_code=137, now=now, reason_all="Error"), delete=True)
    if phase in ("Succeeded", "Failed"):
        return Action()
    if phase != "Running" or not status.get("containerStatuses"):
        new = _running_status(pod, now=now, host_ip=host_ip, pod_ip=pod_ip)
        duration = _duration(pod, default_duration)
        wake = now + dt.timedelta(seconds=duration) if duration is not None else None
        return Action(status=new, wake_at=wake)
    duration = _duration(pod, default_duration)
    started = _run_started(pod)
    if duration is None or started is None:
        return Action()
    due = started + dt.timedelta(seconds=duration)
    if now < due:
        return Action(wake_at=due)
    code = _exit_code(pod)
    policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    if policy == "Always" or (policy == "OnFailure" and code != 0):
        return Action(status=_restarted_status(pod, exit_code=code, now=now), wake_at=now + dt.timedelta(
            seconds=duration))
    return Action(status=_finished_status(pod, exit_code=code, now=now))


# ---------------------------------------------------------------------------------------------------------------
# the shell


def _rt(client: ClusterClient, group: str, version: str, plural: str, kind: str, namespaced: bool) -> ResourceType:
    registry = getattr(client, "registry", None)
    found = registry.get(group, version, plural) if registry is not None else None
    return found or ResourceType(group=group, version=version, kind=kind, plural=plural, namespaced=namespaced)


@dataclass
class _NodeState:
    name: str
    index: int
    host_ip: str
    uid: str = ""
    pod_prefix: str = ""  # first three octets of the node's podCIDR (a /24)
    next_ip: int = 2
    last_lease: dt.datetime | None = None
    last_status: dt.datetime | None = None


@dataclass
class _PodSlot:
    ip: str
    wake_at: dt.datetime | None = None


@dataclass
class SimulatedKubelets:
    """Kubelets for `node_names`: keep the nodes Ready (Lease + status heartbeats) and run their pods.

    `nodes` (optional full Node objects, e.g. from `devcluster.nodes.build`) are created when missing; otherwise a
    missing node gets a minimal Ready Node. `sync()` is one deterministic pass; `start()`/`stop()` run it in a thread.
    """

    client: ClusterClient
    node_names: Iterable[str]
    clock: Clock = _utcnow
    nodes: Iterable[Obj] | None = None
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    status_seconds: float = STATUS_REPORT_SECONDS
    tick_seconds: float = 0.5
    default_duration: float | None = None  # run time of pods without lahar.sh/sim-duration (None: until deleted)
    serve_ports: bool = False  # loopback pod IPs and listeners on declared TCP ports of Running pods (podports)
    port_limit: int = podports.DEFAULT_LIMIT
    _nodes: dict[str, _NodeState] = field(init=False, default_factory=dict)
    _pods: dict[tuple[str, str], Obj] = field(init=False, default_factory=dict)
    _slots: dict[tuple[str, str], _PodSlot] = field(init=False, default_factory=dict)
    _dirty: set[tuple[str, str]] = field(init=False, default_factory=set)
    _lock: threading.RLock = field(init=False, default_factory=threading.RLock)
    _events: queue.Queue = field(init=False, default_factory=queue.Queue)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _threads: list[threading.Thread] = field(init=False, default_factory=list)
    _watch: Any = field(init=False, default=None)
    _registered: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.node_names = list(self.node_names)
        self._templates = {(n.get("metadata") or {}).get("name"): n for n in (self.nodes or [])}
        for i, name in enumerate(self.node_names):
            self._nodes[name] = _NodeState(name=name, index=i, host_ip=self._address(name, i))
        self._pod_rt = _rt(self.client, "", "v1", "pods", "Pod", True)
        self._node_rt = _rt(self.client, "", "v1", "nodes", "Node", False)
        self._lease_rt = _rt(self.client, "coordination.k8s.io", "v1", "leases", "Lease", True)
        self._ports = podports.PortServer(self.port_limit) if self.serve_ports else None

    # public -------------------------------------------------------------------------------------------------

    def sync(self) -> None:
        """One pass: register missing nodes, heartbeat what is due, relist pods and act on every one of ours."""
        self.register()
        self.heartbeat()
        listing = self.client.list(self._pod_rt)
        with self._lock:
            self._pods.clear()
            for pod in listing.get("items") or []:
                self._track(pod)
            self._dirty = set(self._pods)
        self._process()

    def start(self) -> None:
        """Register the nodes and run in background threads until `stop()`."""
        if self._threads:
            return
        self._stop.clear()
        self.register()
        self.heartbeat()
        threads = [threading.Thread(target=self._watch_loop, name="sim-kubelet-watch", daemon=True),
                   threading.Thread(target=self._main_loop, name="sim-kubelet", daemon=True)]
        self._threads = threads
        for t in threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        self._events.put(None)
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []
        if self._ports is not None:
            self._ports.stop()

    def __enter__(self) -> SimulatedKubelets:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # nodes --------------------------------------------------------------------------------------------------

    def _address(self, name: str, index: int) -> str:
        tpl = self._templates.get(name) or {}
        for addr in (tpl.get("status") or {}).get("addresses") or []:
            if addr.get("type") == "InternalIP":
                return str(addr["address"])
        return f"10.0.{index // 250}.{index % 250 + 2}"

    def register(self) -> None:
        """Create nodes that do not exist yet (from their templates, else minimal); remember their uids."""
        if self._registered:
            return
        for name, state in self._nodes.items():
            try:
                node = self.client.get(self._node_rt, name)
            except errors.NotFound:
                template = _without_server_fields(self._templates.get(name) or self._minimal_node(name, state))
                node = self.client.create(self._node_rt, template)
                if template.get("status") and not (node.get("status") or {}).get("capacity"):
                    node = self.client.patch(self._node_rt, name, {"status": template["status"]},
                                             subresource="status")
            state.uid = (node.get("metadata") or {}).get("uid") or ""
            cidr = str((node.get("spec") or {}).get("podCIDR") or "")
            if cidr.endswith(".0/24"):
                state.pod_prefix = cidr.removesuffix(".0/24")
            for addr in (node.get("status") or {}).get("addresses") or []:
                if addr.get("type") == "InternalIP":
                    state.host_ip = str(addr["address"])
        self._registered = True

    def _minimal_node(self, name: str, state: _NodeState) -> Obj:
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                      "kubernetes.io/arch": "amd64", "type": "lahar-sim"}},
                "spec": {},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                           "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                           "addresses": [{"type": "InternalIP", "address": state.host_ip},
                                         {"type": "Hostname", "address": name}]}}

    def heartbeat(self) -> None:
        """Renew each node's Lease every `heartbeat_seconds`; rewrite its conditions every `status_seconds`."""
        now = self.clock()
        for state in self._nodes.values():
            if state.last_lease is None or (now - state.last_lease).total_seconds() >= self.heartbeat_seconds:
                try:
                    self._renew_lease(state, now)
                    state.last_lease = now
                except errors.ApiError as exc:
                    log.warning("lease for node %s: %s", state.name, exc)
            if state.last_status is None or (now - state.last_status).total_seconds() >= self.status_seconds:
                try:
                    self._report_status(state, now)
                    state.last_status = now
                except errors.ApiError as exc:
                    log.warning("status of node %s: %s", state.name, exc)

    def _renew_lease(self, state: _NodeState, now: dt.datetime) -> None:
        spec = {"holderIdentity": state.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _micro(now)}
        try:
            self.client.patch(self._lease_rt, state.name, {"spec": spec}, namespace="kube-node-lease")
        except errors.NotFound:
            lease: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": {"name": state.name, "namespace": "kube-node-lease"}, "spec": spec}
            if state.uid:
                lease["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": state.name,
                                                         "uid": state.uid}]
            self.client.create(self._lease_rt, lease, namespace="kube-node-lease")

    def _report_status(self, state: _NodeState, now: dt.datetime) -> None:
        t = _ts(now)
        node = self.client.get(self._node_rt, state.name)
        old = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}

        def cond(kind: str, status: str, reason: str, message: str) -> Obj:
            prev = old.get(kind) or {}
            since = prev.get("lastTransitionTime") if prev.get("status") == status else None
            return {"type": kind, "status": status, "lastHeartbeatTime": t, "lastTransitionTime": since or t,
                    "reason": reason, "message": message}

        conditions = [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ]
        node = self.client.patch(self._node_rt, state.name, {"status": {"conditions": conditions}},
                                 subresource="status")
        self._lift_condition_taints(node, "True")

    def _lift_condition_taints(self, node: Obj, ready: str) -> None:
        """The node lifecycle controller's part: once Ready is reported, set the condition taints to match
        (`builtin.condition_taints`: `not-ready` / `unreachable` come off); one spec patch, only on a change."""
        taints = (node.get("spec") or {}).get("taints") or []
        want = builtin.condition_taints(taints, ready)
        if want == taints:
            return
        meta = node.get("metadata") or {}
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"taints": want or None}}
        try:
            self.client.patch(self._node_rt, str(meta.get("name")), patch)
        except errors.Conflict:
            log.debug("taints of node %s changed meanwhile; the next status report retries", meta.get("name"))

    # pods ---------------------------------------------------------------------------------------------------

    def _track(self, pod: Obj) -> bool:
        """Cache a pod if it is bound to one of our nodes; True when it is ours."""
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in self._nodes:
            self._pods.pop(key, None)
            return False
        self._pods[key] = pod
        return True

    def _forget(self, key: tuple[str, str]) -> None:
        self._pods.pop(key, None)
        self._slots.pop(key, None)
        self._dirty.discard(key)
        if self._ports is not None:
            self._ports.close(key)

    def _sync_ports(self, key: tuple[str, str], pod: Obj) -> None:
        """A Running pod listens on its declared TCP ports (when `serve_ports`); any other phase closes them."""
        if self._ports is None:
            return
        status = pod.get("status") or {}
        ip = str(status.get("podIP") or "")
        if status.get("phase") == "Running" and ip.startswith(podports.LOOPBACK_PREFIX + ".") \
                and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            ports = podports.declared_ports(pod)
            if ports:
                self._ports.open(key, ip, ports)
        else:
            self._ports.close(key)

    def _pod_ip(self, key: tuple[str, str], pod: Obj) -> str:
        slot = self._slots.get(key)
        if slot is None:
            existing = (pod.get("status") or {}).get("podIP")
            if existing:
                slot = _PodSlot(ip=existing)
            else:
                state = self._nodes[(pod.get("spec") or {}).get("nodeName")]
                if self.serve_ports:  # reachable on this machine: 127.0.0.0/8 is all loopback on Linux
                    prefix = f"{podports.LOOPBACK_PREFIX}.{state.index % 256}"
                else:
                    prefix = state.pod_prefix or f"10.244.{state.index % 256}"
                ports = podports.declared_ports(pod) if self.serve_ports else []
                for _ in range(253):  # skip an address whose ports something else on this machine holds
                    n = state.next_ip
                    state.next_ip = n + 1 if n < 254 else 2
                    if not ports or podports.can_listen(f"{prefix}.{n}", ports):
                        break
                slot = _PodSlot(ip=f"{prefix}.{n}")
            self._slots[key] = slot
        return slot.ip

    def _process(self) -> None:
        now = self.clock()
        with self._lock:
            due = {k for k, s in self._slots.items() if s.wake_at is not None and s.wake_at <= now}
            keys = sorted(self._dirty | due)
            self._dirty.clear()
            work = [(k, self._pods[k]) for k in keys if k in self._pods]
        for key, pod in work:
            node = self._nodes[(pod.get("spec") or {}).get("nodeName")]
            with self._lock:
                ip = self._pod_ip(key, pod)
            action = plan(pod, now=now, host_ip=node.host_ip, pod_ip=ip, default_duration=self.default_duration)
            with self._lock:
                slot = self._slots.get(key)
                if slot is not None:
                    slot.wake_at = action.wake_at
            self._apply(key, pod, action)

    def _apply(self, key: tuple[str, str], pod: Obj, action: Action) -> None:
        ns, name = key
        try:
            if action.status is not None:
                updated = self.client.patch(self._pod_rt, name, {"status": action.status}, namespace=ns,
                                            subresource="status")
                with self._lock:
                    if key in self._pods:
                        self._pods[key] = updated
                self._sync_ports(key, updated)
            else:
                self._sync_ports(key, pod)  # e.g. a pod already Running when this kubelet started
            if action.delete:
                self.client.delete(self._pod_rt, name, namespace=ns, grace_period_seconds=0)
                with self._lock:
                    self._forget(key)
        except errors.NotFound:
            with self._lock:
                self._forget(key)
        except errors.ApiError as exc:  # conflict or a transient failure: look again on the next pass
            log.warning("pod %s/%s: %s", ns, name, exc)
            with self._lock:
                self._dirty.add(key)

    # threads ------------------------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                listing = self.client.list(self._pod_rt)
                self._events.put(("LIST", listing.get("items") or []))
                rv = (listing.get("metadata") or {}).get("resourceVersion")
                self._watch = self.client.watch(self._pod_rt, resource_version=rv, allow_bookmarks=True)
                if self._stop.is_set():
                    self._watch.stop()
                    return
                for event in self._watch:
                    if self._stop.is_set():
                        return
                    if event["type"] != "BOOKMARK":
                        self._events.put((event["type"], event["object"]))
            except errors.Gone:
                continue
            except Exception as exc:  # noqa: BLE001 — keep the kubelet alive; relist after a pause
                if self._stop.is_set():
                    return
                log.warning("pod watch failed: %s; relisting", exc)
                self._stop.wait(1.0)

    def _main_loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._events.get(timeout=self.tick_seconds)
            except queue.Empty:
                item = ()
            while item is not None:
                if item:
                    self._on_event(*item)
                try:
                    item = self._events.get_nowait()
                except queue.Empty:
                    break
            if self._stop.is_set():
                return
            try:
                self.heartbeat()
                self._process()
            except Exception:  # noqa: BLE001
                log.exception("simulated kubelet pass failed")

    def _on_event(self, kind: str, payload: Any) -> None:
        with self._lock:
            if kind == "LIST":
                self._pods.clear()
                for pod in payload:
                    if self._track(pod):
                        meta = pod.get("metadata") or {}
                        self._dirty.add((meta.get("namespace") or "", meta.get("name") or ""))
                return
            meta = payload.get("metadata") or {}
            key = (meta.get("namespace") or "", meta.get("name") or "")
            if kind == "DELETED":
                self._forget(key)
            elif self._track(payload):
                self._dirty.add(key)


def _without_server_fields(node: Obj) -> Obj:
    """A node template to create: drop any resourceVersion/uid/creationTimestamp a caller left in."""
    return {**node, "metadata": {k: v for k, v in (node.get("metadata") or {}).items()
                                 if k not in ("resourceVersion", "uid", "creationTimestamp")}}
