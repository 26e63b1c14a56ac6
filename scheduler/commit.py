"""Apply one session's `Decisions` to the cluster: evictions, binds (concurrently, through `pods/binding`), PodGroup
status (a pod's ResourceClaims are allocated just before it), `PodScheduled=False` + `FailedScheduling` Events
for pods left pending, and each queue's `status.allocated` with its PodGroup counters. Only what `Session.close`
found changed is written (framework/status.py).

A pod with volume decisions is bound as kube-scheduler's VolumeBinding PreBind does it: its volumes are bound first
(a static PV's claimRef, a claim's selected-node annotation), then the pod waits until every claim is Bound
(`scheduler.volumebinding.readiness`, bounded by `volume_bind_timeout`). A pod that gives up is not bound, nor
are the other pods of its job in this commit (a gang is not bound half-way); the next session places them again.

The thin I/O shell after `run_session`; a failed bind undoes nothing — the gang's remaining pods are placed by the
next session, which sees the pods that did bind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import errors
from lahar.kube import events as kube_events
from lahar.kube.client import ClusterClient, Obj
from lahar.scheduler import volumebinding
from lahar.scheduler.framework.session import Bind, Decisions

__all__ = ["CLAIM_FINALIZER", "VOLUME_BIND_TIMEOUT", "CommitResult", "apply", "bind_claims", "bind_volumes", "record_event",
           "wait_for_volumes", "with_claim_finalizer"]

log = logging.getLogger(__name__)
COMPONENT = "volcano"
SELECTED_NODE = "volume.kubernetes.io/selected-node"  # the claim to provision for the pod's node
VOLUME_BIND_TIMEOUT = 30.0  # seconds a pod waits for its claims to be Bound (kube-scheduler: bindTimeoutSeconds)
VOLUME_POLL = 0.1  # seconds between two reads of the claims waited for


@dataclass
class CommitResult:
    bound: list[str] = field(default_factory=list)
    bind_failures: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    evict_failures: dict[str, str] = field(default_factory=dict)
    podgroups_written: int = 0
    pods_updated: int = 0
    events: int = 0
    queues_written: int = 0
    bind_seconds: list[float] = field(default_factory=list)  # per bind call (volcano_scheduling_stage{Bind})
    seconds: float = 0.0  # the whole commit (part of volcano_e2e_scheduling_latency)
    workers: int = 0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_event(client: ClusterClient, involved: Obj, type_: str, reason: str, message: str, *,
                 component: str = COMPONENT, now: Callable[[], str] = _now) -> bool:
    """A core/v1 Event about `involved`, written through the process's recorder (`kube.events`): a repeat of
    (object, reason, message) is one patch of `count`, nothing read back. Best effort."""
    meta = involved.get("metadata") or {}
    digest = hashlib.sha1(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:10]
    ts = now()
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{digest}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                           "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")},
        "type": type_, "reason": reason, "message": message, "source": {"component": component},
        "reportingComponent": component, "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
    }
    return kube_events.RECORDER.record(client, event) is not None


def bind_volumes(client: ClusterClient, actions: Iterable[Mapping[str, str]]) -> None:
    """kube-scheduler's BindPodVolumes, before the pod's bind: a chosen static PV gets its claimRef (the PV
    controller, or devcluster's provisioner, then binds the claim); a claim to provision gets
    `volume.kubernetes.io/selected-node`. An API error raises, so the pod is not bound (the next session retries)."""
    pv_rt = client.registry.get("", "v1", "persistentvolumes")
    pvc_rt = client.registry.get("", "v1", "persistentvolumeclaims")
    for a in actions:
        if a["kind"] == "bind" and pv_rt is not None:
            claim = client.get(pvc_rt, a["claim"], namespace=a["namespace"]) if pvc_rt is not None else {}
            ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": a["namespace"],
                   "name": a["claim"]}
            uid = (claim.get("metadata") or {}).get("uid")
            if uid:
                ref["uid"] = uid
            client.patch(pv_rt, a["volume"], {"spec": {"claimRef": ref}})
        elif a["kind"] == "provision" and pvc_rt is not None:
            client.patch(pvc_rt, a["claim"], {"metadata": {"annotations": {SELECTED_NODE: a["node"]}}},
                         namespace=a["namespace"])


CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"


def with_claim_finalizer(claim: Mapping[str, Any]) -> dict[str, Any]:
    """`claim` with CLAIM_FINALIZER among its finalizers (added once, the others kept in order)."""
    meta = dict(claim.get("metadata") or {})
    finalizers = list(meta.get("finalizers") or ())
    if CLAIM_FINALIZER not in finalizers:
        finalizers.append(CLAIM_FINALIZER)
    return {**claim, "metadata": {**meta, "finalizers": finalizers}}


def bind_claims(client: ClusterClient, actions: Iterable[Mapping[str, Any]]) -> None:
    """kube-scheduler's DynamicResources PreBind: each claim gets the session's `status.allocation` (unless it is
    allocated already) and the pod in `status.reservedFor`, written through the status subresource with the
    claim's resourceVersion. A claim allocated meanwhile to other devices, or any API error, raises, so the pod is
    not bound (the next session sees the claim as it is).

    Before allocating, the claim gets the finalizer `resource.kubernetes.io/delete-protection` (a plain update, as
    kube-scheduler writes it): kube-controller-manager's resourceclaim-controller clears an allocation nobody
    reserves any more only from claims carrying it, so without it a finished pod's devices stayed taken forever."""
    rt = client.registry.get("resource.k8s.io", "v1", "resourceclaims")
    for a in actions:
        if rt is None:
            raise errors.NotFound("the resource.k8s.io/v1 ResourceClaim kind is not served")
        claim = client.get(rt, a["claim"], namespace=a["namespace"])
        status = dict(claim.get("status") or {})
        if a.get("allocation") is not None:
            current = status.get("allocation")
            if current and current != a["allocation"]:
                raise errors.Conflict(f"resourceclaim {a['namespace']}/{a['claim']} was allocated meanwhile")
            if not current and CLAIM_FINALIZER not in (claim.get("metadata") or {}).get("finalizers", ()):
                claim = client.update(rt, with_claim_finalizer(claim), namespace=a["namespace"])
                status = dict(claim.get("status") or {})
            status["allocation"] = a["allocation"]
        elif not status.get("allocation"):
            raise errors.Conflict(f"resourceclaim {a['namespace']}/{a['claim']} is no longer allocated")
        reserved = list(status.get("reservedFor") or ())
        if not any(r.get("resource") == "pods" and r.get("name") == a["pod"] for r in reserved):
            entry = {"resource": "pods", "name": a["pod"]}
            if a.get("pod_uid"):
                entry["uid"] = a["pod_uid"]
            reserved.append(entry)
        status["reservedFor"] = reserved
        client.update_status(rt, {**claim, "status": status}, namespace=a["namespace"])


def _read(client: ClusterClient, rt: Any, name: str, namespace: str | None, into: dict[str, Any], key: str) -> None:
    """`into[key]` = the object, None when it is not found; left out when it could not be read."""
    try:
        into[key] = client.get(rt, name, namespace=namespace)
    except errors.NotFound:
        into[key] = None
    except errors.ApiError as exc:
        log.debug("reading %s: %s", key, exc)


def wait_for_volumes(client: ClusterClient, binds: Iterable[Bind], volumes: Mapping[str, list[dict[str, str]]], *,
                     timeout: float = VOLUME_BIND_TIMEOUT, poll: float = VOLUME_POLL,
                     sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                     map_: Callable[..., Iterable[Any]] = map) -> dict[str, str]:
    """Read the claims (and their PVs, and the pods' nodes) of `binds` until `volumebinding.readiness` says BIND or
    GIVE_UP for each; the pods that gave up, "namespace/name" → reason. `map_` reads the pods (a pool's map)."""
    pvc_rt = client.registry.get("", "v1", "persistentvolumeclaims")
    pv_rt = client.registry.get("", "v1", "persistentvolumes")
    node_rt = client.registry.get("", "v1", "nodes")
    nodes: dict[str, Any] = {}
    failed: dict[str, str] = {}
    pending = [b for b in binds if volumes.get(b.uid)]
    started = clock()
    if pvc_rt is None or pv_rt is None:
        return failed

    def check(b: Bind) -> tuple[Bind, volumebinding.Readiness]:
        actions = volumes[b.uid]
        if node_rt is not None and b.node not in nodes:
            _read(client, node_rt, b.node, None, nodes, b.node)
        claims: dict[str, Any] = {}
        pvs: dict[str, Any] = {}
        for a in actions:
            key = f"{a['namespace']}/{a['claim']}"
            _read(client, pvc_rt, a["claim"], a["namespace"], claims, key)
            claim = claims.get(key)
            for name in {a.get("volume") or "", ((claim or {}).get("spec") or {}).get("volumeName") or ""} - {""}:
                _read(client, pv_rt, name, None, pvs, name)
        return b, volumebinding.readiness(actions, node_name=b.node, claims=claims, pvs=pvs, node=nodes.get(b.node),
                                          elapsed=clock() - started, timeout=timeout)

    while pending:
        waiting: list[Bind] = []
        for b, got in map_(check, pending):
            if got.verdict is volumebinding.Verdict.GIVE_UP:
                failed[f"{b.namespace}/{b.name}"] = got.reason
            elif got.verdict is volumebinding.Verdict.WAIT:
                waiting.append(b)
        pending = waiting
        if pending:
            sleep(poll)
    return failed


def apply(client: ClusterClient, decisions: Decisions, *, workers: int = 16, events: bool = True,
          evict_grace_seconds: int | None = None, now: Callable[[], str] = _now,
          volume_bind_timeout: float | None = VOLUME_BIND_TIMEOUT,
          sleep: Callable[[float], None] = time.sleep) -> CommitResult:
    """Write the decisions; API errors are collected in the result, never raised. Evicted pods are deleted with
    their own grace period unless `evict_grace_seconds` is given (the simulator uses 0: no kubelet to confirm).
    `volume_bind_timeout=None` binds a pod right after its volume writes, without waiting for its claims (offline
    tools, where no PV controller runs); otherwise the conf's `volumebinding.bindTimeoutSeconds`
    (`decisions.volume_bind_timeout`), when it gives one, bounds the wait. `sleep` is what the wait for claims
    calls between two reads."""
    if volume_bind_timeout is not None and decisions.volume_bind_timeout is not None:
        volume_bind_timeout = decisions.volume_bind_timeout
    out = CommitResult(workers=max(1, workers))
    started = time.perf_counter()
    reg = client.registry
    pods_rt = reg.get("", "v1", "pods")
    pg_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    q_rt = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
    assert pods_rt is not None

    def evict(e: Any) -> tuple[str, str | None]:
        key = f"{e.namespace}/{e.name}"
        try:
            with contextlib.suppress(errors.ApiError):
                client.patch(pods_rt, e.name, {"status": {"conditions": [{
                    "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                    "message": f"{COMPONENT}: preempting to accommodate a higher priority pod ({e.reason})",
                    "lastTransitionTime": now()}]}}, namespace=e.namespace, patch_type="strategic",
                    subresource="status")
            client.delete(pods_rt, e.name, namespace=e.namespace, grace_period_seconds=evict_grace_seconds,
                          preconditions={"uid": e.uid} if e.uid != key else None)
            return key, None
        except errors.NotFound:
            return key, None
        except errors.ApiError as exc:
            return key, str(exc)

    def prebind(b: Any) -> tuple[str, str | None]:
        try:
            bind_volumes(client, decisions.volumes.get(b.uid) or ())
            return f"{b.namespace}/{b.name}", None
        except errors.ApiError as exc:
            return f"{b.namespace}/{b.name}", f"binding volumes: {exc}"

    def bind(b: Any) -> tuple[str, str | None]:
        key = f"{b.namespace}/{b.name}"
        t0 = time.perf_counter()
        try:
            if key in held:
                return key, held[key]
            bind_claims(client, decisions.claims.get(b.uid) or ())
            if volume_bind_timeout is None:
                bind_volumes(client, decisions.volumes.get(b.uid) or ())
            client.bind(namespace=b.namespace, name=b.name, node_name=b.node,
                        annotations=decisions.annotations.get(b.uid) or None)
            return key, None
        except errors.ApiError as exc:
            return key, str(exc)
        finally:
            out.bind_seconds.append(time.perf_counter() - t0)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="lahar-bind") as pool:
        for key, err in pool.map(evict, decisions.evictions):
            if err is None:
                out.evicted.append(key)
            else:
                out.evict_failures[key] = err
        held: dict[str, str] = {}  # pods not bound this commit: their volumes, or a gang-mate's, gave up
        if volume_bind_timeout is not None:
            with_volumes = [b for b in decisions.binds if decisions.volumes.get(b.uid)]
            for key, err in pool.map(prebind, with_volumes):
                if err is not None:
                    held[key] = err
            held.update(wait_for_volumes(client, [b for b in with_volumes if f"{b.namespace}/{b.name}" not in held],
                                         decisions.volumes, timeout=volume_bind_timeout, sleep=sleep,
                                         map_=pool.map))
            for b in decisions.binds:
                if f"{b.namespace}/{b.name}" in held and events:
                    record_event(client, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                        "name": b.name, "namespace": b.namespace, "uid": b.uid}}, "Warning", "FailedScheduling",
                        f'running PreBind plugin "VolumeBinding": {held[f"{b.namespace}/{b.name}"]}', now=now)
            gave_up = {b.job: f"{b.namespace}/{b.name}" for b in decisions.binds if f"{b.namespace}/{b.name}" in held}
            for b in decisions.binds:
                key = f"{b.namespace}/{b.name}"
                if b.job in gave_up and key not in held:
                    held[key] = f"not bound with its gang: the volumes of {gave_up[b.job]} are not bound"
        for key, err in pool.map(bind, decisions.binds):
            if err is None:
                out.bound.append(key)
            else:
                out.bind_failures[key] = err
                log.warning("bind %s failed: %s", key, err)

        def write_pg(item: tuple[str, Any]) -> int:
            _, upd = item
            if pg_rt is None:
                return 0
            n = 0
            if upd.changed:
                try:
                    if "status" in pg_rt.subresources:
                        client.patch(pg_rt, upd.name, {"status": upd.status}, namespace=upd.namespace,
                                     subresource="status")
                    else:
                        client.patch(pg_rt, upd.name, {"status": upd.status}, namespace=upd.namespace)
                    n += 1
                except errors.ApiError as exc:
                    log.warning("podgroup %s/%s status: %s", upd.namespace, upd.name, exc)
            if events and upd.events:
                involved = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                            "metadata": {"name": upd.name, "namespace": upd.namespace}}
                for type_, reason, message in upd.events:
                    record_event(client, involved, type_, reason, message, now=now)
            return n

        out.podgroups_written = sum(pool.map(write_pg, decisions.podgroups.items()))

        def annotate_pg(item: tuple[str, dict[str, str]]) -> None:
            uid, annotations = item
            namespace, _, name = uid.partition("/")
            if pg_rt is None or not name:
                return
            try:
                client.patch(pg_rt, name, {"metadata": {"annotations": annotations}}, namespace=namespace)
            except errors.ApiError as exc:
                log.warning("podgroup %s annotations: %s", uid, exc)

        list(pool.map(annotate_pg, decisions.podgroup_annotations.items()))

        def write_pod(c: Any) -> int:
            cond = {"type": "PodScheduled", "status": "False", "reason": c.reason, "message": c.message,
                    "lastTransitionTime": now()}
            status: dict[str, Any] = {"conditions": [cond]}
            if c.nominated_node:
                status["nominatedNodeName"] = c.nominated_node
            try:
                client.patch(pods_rt, c.name, {"status": status}, namespace=c.namespace, patch_type="strategic",
                              subresource="status")
            except errors.ApiError:
                return 0
            if events and c.reason == "Unschedulable":  # the per-reason node counts live here, not in the condition
                record_event(client, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": c.name, "namespace": c.namespace, "uid": c.uid}}, "Warning", "FailedScheduling",
                    c.event_message or c.message, now=now)
            return 1

        out.pods_updated = sum(pool.map(write_pod, decisions.pod_conditions))

    if q_rt is not None:
        for name in decisions.queues_changed:
            try:
                counts = decisions.queue_counts.get(name) or {}
                status = {"allocated": decisions.queues[name], **{k: (v or None) for k, v in counts.items()}}
                client.patch(q_rt, name, {"status": status},  # a zero counter is removed (omitempty)
                             subresource="status" if "status" in q_rt.subresources else None)
                out.queues_written += 1
            except errors.ApiError as exc:
                log.warning("queue %s status: %s", name, exc)
    out.seconds = time.perf_counter() - started
    return out
