"""Deletion as kube-apiserver and its garbage collector do it: finalizers and grace periods, ownerReference
cascading (background, foreground, orphan), and namespace lifecycle (open for content, terminating, finalized).

`Collector` is mixed into `kube.apiserver.store.Store` and runs under its lock; `Store.tick` finishes what waits
on others (owners gone, blocking dependents gone, terminating namespaces emptied).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from lahar.kube import errors
from lahar.kube.apiserver.defaulting import pod_grace
from lahar.kube.apiserver.indexes import FOREGROUND
from lahar.kube.apiserver.objects import (
    ADDED,
    DELETED,
    MODIFIED,
    conflict,
    copy_obj,
    invalid,
    not_found,
    owner_uids,
    qualified_kind,
    rfc3339,
    split_key,
)
from lahar.kube.apiserver.ports import Request
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["DEFAULT_NAMESPACES", "UNDELETABLE_NAMESPACES", "Collector", "check_preconditions"]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")


def check_preconditions(rt: ResourceType, name: str, cur: Obj, pre: dict[str, str] | None) -> None:
    """409 when a DELETE's preconditions (uid, resourceVersion) do not hold for the stored object."""
    if not pre:
        return
    # kube-apiserver checks DELETE preconditions before storage does (rest.BeforeDelete): its texts, and the
    # object's Kind where other conflicts name the resource.
    meta, kind = cur["metadata"], qualified_kind(rt)
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise conflict(rt, name, f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
                                 f"({meta.get('uid')}). The object might have been deleted and then recreated",
                       resource=kind)
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        raise conflict(rt, name, f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not "
                                 f"match the ResourceVersion in record ({meta.get('resourceVersion')}). The "
                                 "object might have been modified", resource=kind)


class Collector:
    """Mixed into `Store`: DELETE and everything it sets off, by the indexes of owners and namespaces."""

    # what this part uses of the others (set or defined by `Store` and its other parts), named for readers
    _lock: threading.RLock
    clock: Callable[[], datetime]
    _by_type: dict[tuple[str, str], dict[str, Obj]]
    _by_ns: dict[str, set[str]]
    _uids: dict[str, str]
    _dependents: dict[str, set[str]]
    _foreground: set[str]
    _txn: Callable[[], AbstractContextManager[None]]
    _find: Callable[[ResourceType, str | None, str], tuple[str, Obj | None]]
    _obj: Callable[[str], Obj | None]
    _rt_for: Callable[..., ResourceType]
    _out: Callable[[ResourceType, Obj], Obj]
    _commit: Callable[[str, str, Obj, Obj | None], Obj]
    _admit_validate: Callable[..., None]
    _unregister_crd: Callable[[Obj], None]

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *, propagation_policy: str | None = None,
               preconditions: dict[str, str] | None = None, grace_period_seconds: int | None = None,
               req: Request | None = None) -> Obj:
        req = req or Request()
        ns = namespace if rt.namespaced else None
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise invalid(rt, name, [("FieldValueNotSupported", "propagationPolicy",
                                      f'Unsupported value: "{propagation_policy}": supported values: "Foreground", '
                                      '"Background", "Orphan", "nil"')])
        if rt.group == "" and rt.plural == "namespaces" and name in UNDELETABLE_NAMESPACES:
            raise errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                                   details={"name": name, "kind": "namespaces"})
        with self._lock:
            _, cur = self._find(rt, ns, name)
        if cur is None:
            raise not_found(rt, name)
        check_preconditions(rt, name, cur, preconditions)
        self._admit_validate("DELETE", rt, None, ns, name, None, self._out(rt, cur), req,
                             {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                              "propagationPolicy": propagation_policy, "gracePeriodSeconds": grace_period_seconds})
        if req.dry_run:
            return self._out(rt, cur)
        with self._txn():
            key, cur = self._find(rt, ns, name)
            if cur is None:
                raise not_found(rt, name)
            check_preconditions(rt, name, cur, preconditions)
            result = self._delete_locked(rt, key, cur, propagation_policy, grace_period_seconds)
        return self._out(rt, result)

    def _delete_locked(self, rt: ResourceType, key: str, cur: Obj, policy: str | None, grace: int | None) -> Obj:
        """Delete one object under the lock with kube's rules; returns the object as now stored or as deleted."""
        meta = cur["metadata"]
        gp = (rt.group, rt.plural)
        if gp == ("", "namespaces"):
            return self._delete_namespace(key, cur)
        grace = pod_grace(cur, grace) if gp == ("", "pods") else 0
        uid = meta.get("uid", "")
        if policy == "Orphan":
            self._orphan_dependents(uid)
        finalizers = list(meta.get("finalizers") or [])
        blocking = policy == "Foreground" and bool(self._dependents.get(uid))
        if blocking and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if meta.get("deletionTimestamp"):
            current_grace = meta.get("deletionGracePeriodSeconds") or 0
            if finalizers == list(meta.get("finalizers") or []) and grace >= current_grace:
                return cur
            new = copy_obj(cur)
            new["metadata"]["finalizers"] = finalizers
            if grace < current_grace:
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                new["metadata"]["deletionTimestamp"] = rfc3339(self.clock() + timedelta(seconds=grace))
            if not finalizers and not new["metadata"]["deletionGracePeriodSeconds"]:
                return self._remove(rt, key, cur, new)
            stored = self._commit(MODIFIED, key, new, cur)
            if blocking:
                self._delete_dependents(uid)
                self._maybe_release_foreground(key)
            return self._by_type.get(gp, {}).get(key, stored)
        if finalizers or grace > 0:
            new = copy_obj(cur)
            nmeta = new["metadata"]
            nmeta["deletionTimestamp"] = rfc3339(self.clock() + timedelta(seconds=grace))
            nmeta["deletionGracePeriodSeconds"] = grace
            nmeta["generation"] = nmeta.get("generation", 1) + 1
            if finalizers:
                nmeta["finalizers"] = finalizers
            stored = self._commit(MODIFIED, key, new, cur)
            if blocking:
                self._delete_dependents(uid)
                self._maybe_release_foreground(key)
                return self._by_type.get(gp, {}).get(key, stored)
            return stored
        return self._remove(rt, key, cur, cur)

    def _remove(self, rt: ResourceType, key: str, cur: Obj, last: Obj) -> Obj:
        """Remove the object for good (DELETED event with its last state), then cascade."""
        deleted = self._commit(DELETED, key, last, cur)
        gp, ns, name = split_key(key)
        uid = cur["metadata"].get("uid", "")
        if gp == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._unregister_crd(cur)
        self._collect_dependents(uid)
        for owner_uid in owner_uids(cur):
            owner_key = self._uids.get(owner_uid)
            if owner_key in self._foreground:
                self._maybe_release_foreground(owner_key)
        if ns:
            self._maybe_finalize_namespace(ns)
        return deleted

    def _collect_dependents(self, owner_uid: str) -> None:
        """GC: delete (background) every dependent of `owner_uid` none of whose owners is left."""
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None or dep["metadata"].get("deletionTimestamp"):
                continue
            if any(u in self._uids for u in owner_uids(dep)):
                continue
            self._delete_locked(self._rt_for(split_key(dkey)[0], dep), dkey, dep, None, None)

    def _delete_dependents(self, owner_uid: str) -> None:
        """Foreground: delete every dependent now (they may linger on their own finalizers / grace)."""
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None or dep["metadata"].get("deletionTimestamp"):
                continue
            self._delete_locked(self._rt_for(split_key(dkey)[0], dep), dkey, dep, None, None)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for dkey in sorted(self._dependents.get(owner_uid, ())):
            dep = self._obj(dkey)
            if dep is None:
                continue
            new = copy_obj(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit(MODIFIED, dkey, new, dep)

    def _blocking(self, owner_uid: str) -> bool:
        for dkey in self._dependents.get(owner_uid, ()):
            dep = self._obj(dkey)
            if dep is None:
                continue
            for ref in dep["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return True
        return False

    def _maybe_release_foreground(self, key: str) -> None:
        owner = self._obj(key)
        if owner is None:
            return
        meta = owner["metadata"]
        if FOREGROUND not in (meta.get("finalizers") or ()) or self._blocking(meta.get("uid", "")):
            return
        new = copy_obj(owner)
        rest = [f for f in meta.get("finalizers") or [] if f != FOREGROUND]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        rt = self._rt_for(split_key(key)[0], owner)
        if not rest and not meta.get("deletionGracePeriodSeconds"):
            self._remove(rt, key, owner, new)
        else:
            self._commit(MODIFIED, key, new, owner)

    def _check_namespace_open(self, ns: str) -> None:
        nsobj = self._by_type.get(("", "namespaces"), {}).get(f"/namespaces//{ns}")
        if nsobj is None:
            raise errors.NotFound(f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"})
        if nsobj["metadata"].get("deletionTimestamp") or (nsobj.get("status") or {}).get("phase") == "Terminating":
            raise errors.Forbidden(f"unable to create new content in namespace {ns} because it is being terminated",
                                   details={"name": ns, "kind": "namespaces",
                                            "causes": [{"reason": "NamespaceTerminating",
                                                        "message": f"namespace {ns} is being terminated",
                                                        "field": "metadata.namespace"}]})

    def _ensure_namespaces(self) -> None:
        for name in DEFAULT_NAMESPACES:
            key = f"/namespaces//{name}"
            if key in self._by_type.get(("", "namespaces"), {}):
                continue
            obj = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(self.clock()),
                                "labels": {"kubernetes.io/metadata.name": name}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            self._commit(ADDED, key, obj, None)

    def _delete_namespace(self, key: str, cur: Obj) -> Obj:
        meta = cur["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            self._maybe_finalize_namespace(name)
            return self._obj(key) or cur
        new = copy_obj(cur)
        new["metadata"]["deletionTimestamp"] = rfc3339(self.clock())
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
        new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        stored = self._commit(MODIFIED, key, new, cur)
        self._delete_namespace_contents(name)
        self._maybe_finalize_namespace(name)
        return self._obj(key) or stored

    def _delete_namespace_contents(self, ns: str) -> None:
        for dkey in sorted(self._by_ns.get(ns, ())):
            obj = self._obj(dkey)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            self._delete_locked(self._rt_for(split_key(dkey)[0], obj), dkey, obj, None, None)

    def _maybe_finalize_namespace(self, ns: str) -> None:
        key = f"/namespaces//{ns}"
        nsobj = self._obj(key)
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp") or self._by_ns.get(ns):
            return
        rt = self._rt_for(("", "namespaces"), nsobj)
        spec_finalizers = list((nsobj.get("spec") or {}).get("finalizers") or [])
        rest = [f for f in spec_finalizers if f != "kubernetes"]
        if rest or nsobj["metadata"].get("finalizers"):
            if rest != spec_finalizers:  # the namespace controller's part is done; others still hold it
                new = copy_obj(nsobj)
                new.setdefault("spec", {})["finalizers"] = rest
                self._commit(MODIFIED, key, new, nsobj)
            return
        new = copy_obj(nsobj)
        new.setdefault("spec", {})["finalizers"] = []
        self._remove(rt, key, nsobj, new)

    def tick(self) -> None:
        """Finish deferred work: GC of dependents whose owners are all gone, foreground owners whose blocking
        dependents are gone, terminating namespaces that are empty."""
        with self._txn():
            for owner_uid in [u for u in self._dependents if u not in self._uids]:
                self._collect_dependents(owner_uid)
            for key in sorted(self._foreground):
                self._maybe_release_foreground(key)
            for _key, nsobj in sorted(self._by_type.get(("", "namespaces"), {}).items()):
                if nsobj["metadata"].get("deletionTimestamp"):
                    name = nsobj["metadata"]["name"]
                    self._delete_namespace_contents(name)
                    self._maybe_finalize_namespace(name)
