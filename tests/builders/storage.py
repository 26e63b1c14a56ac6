"""Storage objects the volume predicates read: CSIDriver and CSIStorageCapacity (storage.k8s.io/v1), as plain dicts
(`csidriver("lahar.sh/local")`, `storage_capacity("n1-local", "local", "10Gi", hostname="n1")`)."""

from __future__ import annotations

from typing import Any

HOSTNAME = "kubernetes.io/hostname"


def csidriver(name: str, *, storage_capacity: bool | None = True) -> dict[str, Any]:
    """A CSIDriver; `storage_capacity` None leaves `spec.storageCapacity` unset."""
    spec: dict[str, Any] = {"attachRequired": False}
    if storage_capacity is not None:
        spec["storageCapacity"] = storage_capacity
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def storage_capacity(name: str, storage_class: str, capacity: str | None, *, hostname: str | None = None,
                     labels: dict[str, str] | None = None, maximum_volume_size: str | None = None,
                     namespace: str = "kube-system") -> dict[str, Any]:
    """A CSIStorageCapacity of `storage_class` reachable from the nodes whose labels match `labels` (`{}`: every
    node) and, with `hostname`, only that node; neither: no nodeTopology (no node reaches it)."""
    o: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                         "metadata": {"name": name, "namespace": namespace}, "storageClassName": storage_class}
    match = dict(labels or {})
    if hostname is not None:
        match[HOSTNAME] = hostname
    if labels is not None or hostname is not None:
        o["nodeTopology"] = {"matchLabels": match}
    if capacity is not None:
        o["capacity"] = capacity
    if maximum_volume_size is not None:
        o["maximumVolumeSize"] = maximum_volume_size
    return o
