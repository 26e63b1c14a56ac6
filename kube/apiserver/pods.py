"""The pods/binding and pods/eviction subresources: a scheduler binds a pod to a node, an evictor deletes it
through the eviction API (admission first, then preconditions and the pod's grace).

`PodSubresources` is mixed into `kube.apiserver.store.Store` and runs under its lock.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

from lahar.kube.apiserver.gc import check_preconditions
from lahar.kube.apiserver.objects import MODIFIED, conflict, copy_obj, invalid, not_found, rfc3339, status_success
from lahar.kube.apiserver.ports import Request
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["PodSubresources"]


class PodSubresources:
    """Mixed into `Store`: `bind` and `evict`."""

    # what this part uses of the others (set or defined by `Store` and its other parts), named for readers
    clock: Callable[[], datetime]
    _txn: Callable[[], AbstractContextManager[None]]
    _find: Callable[[ResourceType, str | None, str], tuple[str, Obj | None]]
    _rt_for: Callable[..., ResourceType]
    _commit: Callable[[str, str, Obj, Obj | None], Obj]
    _admit: Callable[..., Obj | None]
    _admit_validate: Callable[..., None]
    _delete_locked: Callable[..., Obj]

    def _pods(self) -> ResourceType:
        return self._rt_for(("", "pods"))

    def bind(self, namespace: str, name: str, binding: Obj, *, req: Request | None = None) -> Obj:
        req = req or Request()
        rt = self._pods()
        binding = copy_obj(binding)
        target = binding.get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid(rt, name, [("FieldValueRequired", "target.name", "Required value")])
        binding = self._admit("CREATE", rt, "binding", namespace, name, binding, None, req) or binding
        self._admit_validate("CREATE", rt, "binding", namespace, name, binding, None, req)
        annotations = (binding.get("metadata") or {}).get("annotations") or {}
        with self._txn():
            key, pod = self._find(rt, namespace, name)
            if pod is None:
                raise not_found(rt, name)
            pre_uid = (binding.get("metadata") or {}).get("uid")
            if pre_uid and pre_uid != pod["metadata"].get("uid"):
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {pre_uid}, UID in object "
                                         f"meta: {pod['metadata'].get('uid')}", resource="pods/binding")
            if pod["metadata"].get("deletionTimestamp"):
                raise conflict(rt, name, f"pod {name} is being deleted, cannot be assigned to a host",
                               resource="pods/binding")
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound:
                raise conflict(rt, name, f'pod {name} is already assigned to node "{bound}"', resource="pods/binding")
            if req.dry_run:
                return status_success()
            new = copy_obj(pod)
            new.setdefault("spec", {})["nodeName"] = node
            if annotations:
                new["metadata"].setdefault("annotations", {}).update(annotations)
            status = new.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": rfc3339(self.clock())})
            status["conditions"] = conditions
            self._commit(MODIFIED, key, new, pod)
        return status_success()

    def evict(self, namespace: str, name: str, eviction: Obj, *, req: Request | None = None) -> Obj:
        req = req or Request()
        rt = self._pods()
        eviction = copy_obj(eviction or {})
        eviction = self._admit("CREATE", rt, "eviction", namespace, name, eviction, None, req) or eviction
        self._admit_validate("CREATE", rt, "eviction", namespace, name, eviction, None, req)
        opts = eviction.get("deleteOptions") or {}
        with self._txn():
            key, pod = self._find(rt, namespace, name)
            if pod is None:
                raise not_found(rt, name)
            check_preconditions(rt, name, pod, opts.get("preconditions"))
            if req.dry_run:
                return status_success()
            self._delete_locked(rt, key, pod, opts.get("propagationPolicy"), opts.get("gracePeriodSeconds"))
        return status_success()
