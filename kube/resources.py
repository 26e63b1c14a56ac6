"""The resource registry: group, version, kind, plural, scope and short names of every type lahar touches.

Clients map kinds to URL paths with it, devcluster serves discovery from it, and CRDs add to it at run time.
`core()` lists the built-in Kubernetes types, `volcano()` Volcano's CRD kinds, `koordinator()` the Device
inventory kind, `in_tree()` all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["Registry", "ResourceType", "core", "in_tree", "koordinator", "volcano"]


@dataclass(frozen=True)
class ResourceType:
    """One served resource (a group/version/plural), as discovery describes it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    singular: str = ""
    subresources: frozenset[str] = frozenset()  # e.g. {"status", "binding", "eviction", "scale"}
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path: `/api/v1/namespaces/ns/pods/name/status`, `/apis/g/v/queues`, ..."""
        parts = [f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


@dataclass
class Registry:
    """Explicit name → ResourceType table; thread-safe; a duplicate (group, version, plural) raises unless replaced."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @classmethod
    def of(cls, types: Iterable[ResourceType]) -> Registry:
        reg = cls()
        for rt in types:
            reg.add(rt)
        return reg

    def add(self, rt: ResourceType, *, replace: bool = False) -> None:
        key = (rt.group, rt.version, rt.plural)
        with self._lock:
            if key in self._types and not replace and self._types[key] != rt:
                raise ValueError(f"resource {rt.plural}.{rt.group or 'core'}/{rt.version} is already registered")
            self._types[key] = rt

    def remove(self, group: str, version: str, plural: str) -> None:
        with self._lock:
            self._types.pop((group, version, plural), None)

    def __iter__(self) -> Iterator[ResourceType]:
        with self._lock:
            return iter(list(self._types.values()))

    def __len__(self) -> int:
        return len(self._types)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self:
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def lookup(self, name: str) -> ResourceType | None:
        """Resolve what a user types (`pods`, `pod`, `po`, `vcjob`, `jobs.batch.volcano.sh`, `Queue`)."""
        name = name.strip()
        base, _, group = name.partition(".")
        lowered = base.lower()
        for rt in sorted(self, key=lambda r: (r.group != "", r.group)):
            if group and rt.group != group:
                continue
            if lowered in (rt.plural, rt.singular_name, rt.kind.lower()) or lowered in rt.short_names:
                return rt
        return None

    def groups(self) -> dict[str, list[str]]:
        """group → served versions (core group is "")."""
        out: dict[str, list[str]] = {}
        for rt in self:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return sorted((rt for rt in self if rt.group == group and rt.version == version), key=lambda r: r.plural)


def _rt(group: str, version: str, kind: str, plural: str, namespaced: bool, short: tuple[str, ...] = (),
        sub: Iterable[str] = (), categories: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(group=group, version=version, kind=kind, plural=plural, namespaced=namespaced,
                        short_names=short, subresources=frozenset(sub), categories=categories)


def core() -> list[ResourceType]:
    """The built-in Kubernetes types lahar and devcluster serve."""
    return [
        _rt("", "v1", "Namespace", "namespaces", False, ("ns",), ("status", "finalize")),
        _rt("", "v1", "Pod", "pods", True, ("po",), ("status", "binding", "eviction", "log"), ("all",)),
        _rt("", "v1", "Node", "nodes", False, ("no",), ("status",)),
        _rt("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
        _rt("", "v1", "Secret", "secrets", True),
        _rt("", "v1", "Service", "services", True, ("svc",), ("status",), ("all",)),
        _rt("", "v1", "Endpoints", "endpoints", True, ("ep",)),
        _rt("", "v1", "Event", "events", True, ("ev",)),
        _rt("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), ("status",)),
        _rt("", "v1", "PersistentVolume", "persistentvolumes", False, ("pv",), ("status",)),
        _rt("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
        _rt("", "v1", "LimitRange", "limitranges", True, ("limits",)),
        _rt("", "v1", "ResourceQuota", "resourcequotas", True, ("quota",), ("status",)),
        _rt("events.k8s.io", "v1", "Event", "events", True, ("ev",)),
        _rt("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",)),
        _rt("storage.k8s.io", "v1", "CSINode", "csinodes", False),
        _rt("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
        _rt("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True),
        _rt("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
        # Dynamic Resource Allocation, structured parameters (scheduler/devices/dra.py allocates the claims)
        _rt("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
        _rt("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
        _rt("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, (), ("status",)),
        _rt("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
        _rt("coordination.k8s.io", "v1", "Lease", "leases", True),
        _rt("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, ("netpol",)),
        _rt("apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status", "scale"), ("all",)),
        _rt("apps", "v1", "StatefulSet", "statefulsets", True, ("sts",), ("status", "scale"), ("all",)),
        _rt("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status", "scale"), ("all",)),
        _rt("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",), ("status",), ("all",)),
        _rt("batch", "v1", "Job", "jobs", True, (), ("status",), ("all",)),
        _rt("batch", "v1", "CronJob", "cronjobs", True, ("cj",), ("status",), ("all",)),
        _rt("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)),
        _rt("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
        _rt("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
        _rt("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
        _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
        _rt("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations", False),
        _rt("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations", False),
        _rt("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
            ("crd", "crds"), ("status",)),
    ]


def volcano() -> list[ResourceType]:
    """Volcano's CRD kinds (spec/volcano.md §1.0). devcluster serves them only once their CRDs are applied."""
    return [
        _rt("batch.volcano.sh", "v1alpha1", "Job", "jobs", True, ("vcjob", "vj"), ("status",)),
        _rt("batch.volcano.sh", "v1alpha1", "CronJob", "cronjobs", True, ("cronvcjob", "cronvj"), ("status",)),
        _rt("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", True, ("pg", "podgroup-v1beta1")),
        _rt("scheduling.volcano.sh", "v1beta1", "Queue", "queues", False, ("q", "queue-v1beta1"), ("status",)),
        _rt("bus.volcano.sh", "v1alpha1", "Command", "commands", True),
        _rt("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes", False, ("hn",), ("status",)),
        _rt("flow.volcano.sh", "v1alpha1", "JobFlow", "jobflows", True, ("jf",), ("status",)),
        _rt("flow.volcano.sh", "v1alpha1", "JobTemplate", "jobtemplates", True, ("jt",), ("status",)),
        _rt("nodeinfo.volcano.sh", "v1alpha1", "Numatopology", "numatopologies", False, ("numatopo",)),
    ]


def koordinator() -> list[ResourceType]:
    """Koordinator's `Device` (per-node GPU + RDMA inventory with PCIe topology), which lahar's deviceshare reads."""
    return [_rt("scheduling.koordinator.sh", "v1alpha1", "Device", "devices", False, (), ("status",))]


def in_tree() -> Registry:
    """A fresh registry with the core types, Volcano's kinds and Koordinator's Device."""
    return Registry.of([*core(), *volcano(), *koordinator()])
