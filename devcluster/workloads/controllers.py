"""The shell of devcluster's workload controllers: `WorkloadControllers` re-reads the world and applies one plan
per key (level-based, idempotent), binds default-scheduler pods, and runs from store watches in background threads.

Top of `devcluster.workloads`: uses the plan modules (`replicasets`, `deployments`, `statefulsets`, `jobs`,
`volumes`, `claims`) and `scheduler`; talks only through the `kube.client.ClusterClient` port.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lahar.devcluster.workloads._objects import (
    DEFAULT_SCHEDULER,
    DESIRED_ANNOTATION,
    MAX_ANNOTATION,
    Clock,
    Plan,
    _int,
    _meta,
    _name,
    _owned,
    _spec,
    _status,
    _utcnow,
    controller_of,
    is_active,
    is_terminal,
)
from lahar.devcluster.workloads.claims import (
    CLAIM_FINALIZER,
    claim_names,
    pending_templates,
    released_status,
    template_claims,
)
from lahar.devcluster.workloads.deployments import deployment_plan
from lahar.devcluster.workloads.jobs import job_plan
from lahar.devcluster.workloads.replicasets import replicaset_plan
from lahar.devcluster.workloads.scheduler import choose_node
from lahar.devcluster.workloads.statefulsets import statefulset_plan
from lahar.devcluster.workloads.volumes import claim_plan
from lahar.kube import errors, selectors
from lahar.kube.client import ClusterClient, Obj
from lahar.kube.resources import ResourceType

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (kind, namespace, name); kind "Schedule" = a scheduling pass


def _rt(client: ClusterClient, group: str, version: str, plural: str, kind: str) -> ResourceType:
    registry = getattr(client, "registry", None)
    found = registry.get(group, version, plural) if registry is not None else None
    return found or ResourceType(group=group, version=version, kind=kind, plural=plural,
                                 namespaced=kind not in ("Node", "PersistentVolume", "StorageClass"))


@dataclass
class WorkloadControllers:
    """Deployment, ReplicaSet, StatefulSet and Job controllers plus the default-scheduler over one cluster client.

    `reconcile(kind, namespace, name)` / `schedule()` are single level-based passes; `sync()` runs every key until
    nothing changes (tests); `start()` watches the store and reconciles in a background thread, resyncing every
    `resync_seconds`; `stop()` ends it.
    """

    client: ClusterClient
    clock: Clock = _utcnow
    default_scheduler: bool = True
    resync_seconds: float = 5.0
    _queue: queue.Queue = field(init=False, default_factory=queue.Queue)
    _pending: set[Key] = field(init=False, default_factory=set)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _threads: list[threading.Thread] = field(init=False, default_factory=list)
    _watches: dict[str, Any] = field(init=False, default_factory=dict)
    _unplaced: int = field(init=False, default=0)  # pods the last scheduling pass could not place

    def __post_init__(self) -> None:
        c = self.client
        self.rts: dict[str, ResourceType] = {
            "Deployment": _rt(c, "apps", "v1", "deployments", "Deployment"),
            "ReplicaSet": _rt(c, "apps", "v1", "replicasets", "ReplicaSet"),
            "StatefulSet": _rt(c, "apps", "v1", "statefulsets", "StatefulSet"),
            "Job": _rt(c, "batch", "v1", "jobs", "Job"),
        }
        self.pod_rt = _rt(c, "", "v1", "pods", "Pod")
        self.node_rt = _rt(c, "", "v1", "nodes", "Node")
        self.pvc_rt = _rt(c, "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
        self.pv_rt = _rt(c, "", "v1", "persistentvolumes", "PersistentVolume")
        self.sc_rt = _rt(c, "storage.k8s.io", "v1", "storageclasses", "StorageClass")
        self.rc_rt = _rt(c, "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
        self.rct_rt = _rt(c, "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate")
        self._read_only: dict[str, bool] = {"read_only": True} if hasattr(c, "peek_all") else {}

    def _all(self, rt: ResourceType) -> list[Obj]:
        """Every object of `rt` to read: the stored objects themselves where the client serves them (devcluster's
        own store, `peek_all`), else a list's copies. A resync and a scheduling pass read every pod: copying them
        all every few seconds was most of an idle devcluster's CPU with thousands of pods."""
        peek = getattr(self.client, "peek_all", None)
        return peek(rt) if peek is not None else self.client.list(rt)["items"]

    # one pass ---------------------------------------------------------------------------------------------------

    def _pods_for(self, owner: Obj) -> list[Obj]:
        ns = _meta(owner).get("namespace")
        selector = _spec(owner).get("selector") or {}
        try:
            text = str(selectors.from_label_selector(selector)) if selector else ""
        except selectors.SelectorError:
            text = ""
        items = self.client.list(self.pod_rt, namespace=ns, label_selector=text or None)["items"]
        if selector and not _owned(items, owner):  # a Job whose selector is not defaulted yet, an odd selector
            items = self.client.list(self.pod_rt, namespace=ns)["items"]
        return items

    def plan(self, kind: str, obj: Obj) -> Plan:
        """The plan for one owner, read from the cluster as it is now."""
        now = self.clock()
        if kind == "Deployment":
            rss = self.client.list(self.rts["ReplicaSet"], namespace=_meta(obj).get("namespace"))["items"]
            return deployment_plan(obj, rss, now=now)
        pods = self._pods_for(obj)
        if kind == "ReplicaSet":
            return replicaset_plan(obj, pods)
        if kind == "StatefulSet":
            return statefulset_plan(obj, pods)
        return job_plan(obj, pods, now=now)

    def reconcile(self, kind: str, namespace: str, name: str) -> Plan | None:
        """Re-read `kind` namespace/name and apply its plan; None when it is gone."""
        rt = self.rts[kind]
        try:
            obj = self.client.get(rt, name, namespace=namespace)
        except errors.NotFound:
            return None
        plan = self.plan(kind, obj)
        self._apply(kind, rt, obj, plan)
        return plan

    def reconcile_claim(self, namespace: str, name: str) -> bool:
        """The provisioner and PV binder for one claim (`volumes.claim_plan`); True when it wrote something."""
        try:
            pvc = self.client.get(self.pvc_rt, name, namespace=namespace)
        except errors.NotFound:
            return False
        classes = {_name(o): o for o in self.client.list(self.sc_rt)["items"]}
        pvs = {_name(o): o for o in self.client.list(self.pv_rt)["items"]}
        nodes = {_name(o): o for o in self.client.list(self.node_rt)["items"]}
        plan = claim_plan(pvc, classes=classes, pvs=pvs, nodes=nodes)
        if plan.create_pv is not None:
            with contextlib.suppress(errors.AlreadyExists):
                self.client.create(self.pv_rt, {**plan.create_pv, "status": {}})
        if plan.pv_patch is not None:
            pv_name, patch = plan.pv_patch
            self.client.patch(self.pv_rt, pv_name, {"spec": patch["spec"]})
            self.client.patch(self.pv_rt, pv_name, {"status": patch["status"]}, subresource="status")
        if plan.claim_patch:
            self.client.patch(self.pvc_rt, name, plan.claim_patch, namespace=namespace)
        if plan.claim_status is not None:
            self.client.patch(self.pvc_rt, name, {"status": plan.claim_status}, namespace=namespace,
                              subresource="status")
        return bool(plan.create_pv or plan.pv_patch or plan.claim_patch or plan.claim_status)

    def reconcile_pod_claims(self, namespace: str, name: str) -> bool:
        """ResourceClaims for the pod's template entries (`claims.template_claims`); True when it wrote something."""
        try:
            pod = self.client.get(self.pod_rt, name, namespace=namespace)
        except errors.NotFound:
            return False
        templates: dict[str, Obj] = {}
        for _, template_name in pending_templates(pod):
            with contextlib.suppress(errors.NotFound):
                templates[template_name] = self.client.get(self.rct_rt, template_name, namespace=namespace)
        plan = template_claims(pod, templates)
        for claim in plan.create:
            with contextlib.suppress(errors.AlreadyExists):
                self.client.create(self.rc_rt, claim, namespace=namespace)
        if plan.statuses is not None:
            self.client.patch(self.pod_rt, name, {"status": {"resourceClaimStatuses": plan.statuses}},
                              namespace=namespace, subresource="status")
        return bool(plan.create or plan.statuses)

    def release_claim(self, namespace: str, name: str) -> bool:
        """Drop gone or finished pods from a ResourceClaim's reservedFor, deallocating it when none is left."""
        try:
            claim = self.client.get(self.rc_rt, name, namespace=namespace)
        except errors.NotFound:
            return False
        pods = {_name(p): p for p in self.client.list(self.pod_rt, namespace=namespace)["items"]}
        status = released_status(claim, pods)
        if status is None:
            return False
        try:
            claim = self.client.update_status(self.rc_rt, {**claim, "status": status}, namespace=namespace)
            finalizers = list(_meta(claim).get("finalizers") or ())
            if "allocation" not in status and CLAIM_FINALIZER in finalizers:  # deallocated: no longer protected
                finalizers.remove(CLAIM_FINALIZER)
                self.client.update(self.rc_rt, {**claim, "metadata": {**_meta(claim), "finalizers": finalizers}},
                                   namespace=namespace)
        except errors.Conflict:
            self._enqueue(("ResourceClaim", namespace, name))
            return False
        return True

    def _resource_claims(self) -> list[Obj]:
        try:
            return list(self.client.list(self.rc_rt)["items"])
        except errors.NotFound:  # a client whose registry lacks resource.k8s.io
            return []

    def _apply(self, kind: str, rt: ResourceType, obj: Obj, plan: Plan) -> None:
        ns, name = _meta(obj).get("namespace"), _name(obj)
        if plan.owner_patch:
            obj = self.client.patch(rt, name, plan.owner_patch, namespace=ns)
        child_rt = self.rts["ReplicaSet"] if kind == "Deployment" else self.pod_rt
        failures: list[str] = []
        for child in plan.create:
            try:
                self.client.create(child_rt, child, namespace=ns)
            except errors.AlreadyExists:
                continue
            except errors.ApiError as exc:
                failures.append(f"create {child_rt.kind}: {exc}")
                break  # a webhook or quota refusal will refuse the others too; retried on the next pass
        for child_name in plan.delete:
            with contextlib.suppress(errors.NotFound):
                self.client.delete(child_rt, child_name, namespace=ns, propagation_policy="Background")
        for rs_name, replicas in plan.scale:
            with contextlib.suppress(errors.NotFound):
                self.client.patch(self.rts["ReplicaSet"], rs_name, {
                    "metadata": {"annotations": {DESIRED_ANNOTATION: str(_int(_spec(obj).get("replicas"), 1)),
                                                 MAX_ANNOTATION: str(_int(_spec(obj).get("replicas"), 1))}},
                    "spec": {"replicas": replicas}}, namespace=ns)
        if plan.status is not None and plan.status != dict(_status(obj)):
            body = {**obj, "status": plan.status}
            try:
                self.client.update_status(rt, body, namespace=ns)
            except errors.Conflict:
                self._enqueue((kind, ns or "", name))
        if failures:
            raise errors.ApiError("; ".join(failures))

    def schedule(self) -> int:
        """Bind every pending default-scheduler pod that fits somewhere (oldest first); returns how many. The pods
        and nodes are read, never changed (a bound pod is added to `pods` as a new object)."""
        pods = self._all(self.pod_rt)
        waiting = sorted((p for p in pods if _spec(p).get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
                          and not _spec(p).get("nodeName") and is_active(p)),
                         key=lambda p: (_meta(p).get("creationTimestamp") or "", _name(p)))
        self._unplaced = len(waiting)
        if not waiting:
            return 0
        nodes = self._all(self.node_rt)
        bound = 0
        for pod in waiting:
            node = choose_node(pod, nodes, pods)
            if node is None:
                continue
            try:
                self.client.bind(namespace=_meta(pod)["namespace"], name=_name(pod), node_name=node)
            except (errors.NotFound, errors.Conflict):
                continue
            pods = [*pods, {**pod, "spec": {**_spec(pod), "nodeName": node}}]
            bound += 1
        self._unplaced = len(waiting) - bound
        return bound

    def keys(self) -> list[Key]:
        out: list[Key] = []
        for kind, rt in self.rts.items():
            for obj in self._all(rt):
                out.append((kind, _meta(obj).get("namespace") or "", _name(obj)))
        for obj in self._claims():
            out.append(("PersistentVolumeClaim", _meta(obj).get("namespace") or "", _name(obj)))
        for obj in self._all(self.pod_rt):
            if pending_templates(obj):
                out.append(("PodClaims", _meta(obj).get("namespace") or "", _name(obj)))
        for obj in self._resource_claims():
            if _status(obj).get("reservedFor"):
                out.append(("ResourceClaim", _meta(obj).get("namespace") or "", _name(obj)))
        return out

    def _claims(self) -> list[Obj]:
        try:
            return list(self.client.list(self.pvc_rt)["items"])
        except errors.NotFound:  # a client whose registry lacks PVCs
            return []

    def sync(self, *, max_rounds: int = 20) -> None:
        """Reconcile every object (and schedule) until a round changes nothing: a deterministic pass for tests."""
        for _ in range(max_rounds):
            before = self.client.list(self.pod_rt)["metadata"].get("resourceVersion")
            for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
                for k, ns, name in self.keys():
                    if k == kind:
                        self.reconcile(k, ns, name)
            for obj in self._claims():
                self.reconcile_claim(_meta(obj).get("namespace") or "", _name(obj))
            for k, ns, name in self.keys():
                if k == "PodClaims":
                    self.reconcile_pod_claims(ns, name)
                elif k == "ResourceClaim":
                    self.release_claim(ns, name)
            if self.default_scheduler:
                self.schedule()
            after = self.client.list(self.pod_rt)["metadata"].get("resourceVersion")
            if before == after:
                return

    # threads ----------------------------------------------------------------------------------------------------

    def _enqueue(self, key: Key) -> None:
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
        self._queue.put(key)

    def _keys_for_event(self, kind: str, obj: Obj, event: str = "ADDED") -> list[Key]:
        ns = _meta(obj).get("namespace") or ""
        out: list[Key] = []
        if kind == "PersistentVolumeClaim":
            return [(kind, ns, _name(obj))] if event != "DELETED" else []
        if kind == "PersistentVolume":
            ref = _spec(obj).get("claimRef") or {}
            return [("PersistentVolumeClaim", str(ref.get("namespace") or ""), str(ref["name"]))] \
                if ref.get("name") and event != "DELETED" else []
        if kind in self.rts:
            out.append((kind, ns, _name(obj)))
        if kind == "Pod" and event != "DELETED" and pending_templates(obj):
            out.append(("PodClaims", ns, _name(obj)))
        if kind == "Pod" and (event == "DELETED" or is_terminal(obj)):
            out.extend(("ResourceClaim", ns, claim) for claim in claim_names(obj))
        ref = controller_of(obj)
        if ref is not None:
            owner_kind = ref.get("kind")
            group = str(ref.get("apiVersion") or "").split("/")[0]
            if (owner_kind, group) in (("ReplicaSet", "apps"), ("StatefulSet", "apps"), ("Deployment", "apps"),
                                       ("Job", "batch")) and owner_kind in self.rts:
                out.append((str(owner_kind), ns, str(ref.get("name"))))
        if self.default_scheduler and kind in ("Node", "Pod"):
            freed = kind == "Node" or event == "DELETED" or is_terminal(obj)
            waiting = kind == "Pod" and not _spec(obj).get("nodeName") and is_active(obj) and _spec(obj).get(
                "schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
            if waiting or (freed and self._unplaced):
                out.append(("Schedule", "", ""))  # a pod to place, or room freed for one that waits
        return out

    def _watch_loop(self, kind: str, rt: ResourceType) -> None:
        while not self._stop.is_set():
            try:
                listing = self.client.list(rt)
                for obj in listing["items"]:
                    for key in self._keys_for_event(kind, obj):
                        self._enqueue(key)
                # events are only read (`_keys_for_event`): the stored objects themselves where the client can
                watch = self.client.watch(rt, resource_version=listing["metadata"].get("resourceVersion"),
                                          allow_bookmarks=True, **self._read_only)
                self._watches[kind] = watch
                if self._stop.is_set():
                    watch.stop()
                    return
                for event in watch:
                    if self._stop.is_set():
                        return
                    if event["type"] == "BOOKMARK":
                        continue
                    for key in self._keys_for_event(kind, event["object"], event["type"]):
                        self._enqueue(key)
            except errors.Gone:
                continue
            except Exception as exc:  # noqa: BLE001 — keep watching; relist after a pause
                if self._stop.is_set():
                    return
                log.warning("workloads: %s watch failed: %s; relisting", kind, exc)
                self._stop.wait(1.0)

    def _work_loop(self) -> None:
        while not self._stop.is_set():
            try:
                key = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if key is None:
                return
            with self._lock:
                self._pending.discard(key)
            kind, ns, name = key
            try:
                if kind == "Schedule":
                    self.schedule()
                elif kind == "PersistentVolumeClaim":
                    self.reconcile_claim(ns, name)
                elif kind == "PodClaims":
                    self.reconcile_pod_claims(ns, name)
                elif kind == "ResourceClaim":
                    self.release_claim(ns, name)
                else:
                    self.reconcile(kind, ns, name)
            except Exception as exc:  # noqa: BLE001 — the resync retries it
                if self._stop.is_set():
                    return
                log.warning("workloads: %s %s/%s: %s", kind, ns, name, exc)

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_seconds):
            try:
                for key in self.keys():
                    self._enqueue(key)
                if self.default_scheduler:
                    self._enqueue(("Schedule", "", ""))
            except Exception as exc:  # noqa: BLE001
                log.warning("workloads: resync failed: %s", exc)

    def start(self) -> WorkloadControllers:
        self._stop.clear()
        watched = [*self.rts.items(), ("Pod", self.pod_rt), ("PersistentVolumeClaim", self.pvc_rt),
                   ("PersistentVolume", self.pv_rt)]
        if self.default_scheduler:
            watched.append(("Node", self.node_rt))
        targets: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            (f"workloads-watch-{kind.lower()}", self._watch_loop, (kind, rt)) for kind, rt in watched]
        targets += [("workloads-worker", self._work_loop, ()), ("workloads-resync", self._resync_loop, ())]
        for name, target, args in targets:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(None)
        for watch in list(self._watches.values()):
            with contextlib.suppress(Exception):
                watch.stop()
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []
        self._watches = {}

    def __enter__(self) -> WorkloadControllers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


