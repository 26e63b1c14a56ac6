"""The simulated resource metrics API (`metrics.k8s.io/v1beta1`, what metrics-server serves): NodeMetrics and
PodMetrics computed from the pods the simulated kubelets run.

A running pod's container uses its requests times the pod's factor, the annotation `lahar.sh/sim-usage` (a number
≥ 0, e.g. `"0.9"`; absent or malformed → `DEFAULT_FACTOR`); a container without requests (BestEffort) uses a small
fixed amount. A node uses the sum over its running pods plus a small system reserve. Pure functions; `devcluster.server`
serves the documents (list and get, label selectors) and the discovery entries, so `kubectl top` works.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.kube import quantity

__all__ = ["GROUP", "SIM_USAGE_ANNOTATION", "VERSION", "api_group", "api_resource_list", "container_usage",
           "group_doc", "metrics_list", "node_metrics", "node_usage", "pod_factor", "pod_metrics", "pod_usage",
           "running"]

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
SIM_USAGE_ANNOTATION = "lahar.sh/sim-usage"
DEFAULT_FACTOR = 0.5
MAX_FACTOR = 10.0
BEST_EFFORT = (5.0, 8.0 * 1024 * 1024)  # milli-CPU, bytes per container without requests
SYSTEM_RESERVE = (100.0, 256.0 * 1024 * 1024)  # milli-CPU, bytes per node (kubelet, runtime)
WINDOW = "30s"

Obj = dict[str, Any]


def pod_factor(pod: Mapping[str, Any]) -> float:
    """The pod's `lahar.sh/sim-usage` factor, within [0, MAX_FACTOR]; absent, malformed or negative → default."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(SIM_USAGE_ANNOTATION)
    try:
        factor = float(raw) if raw is not None else DEFAULT_FACTOR
    except (TypeError, ValueError):
        return DEFAULT_FACTOR
    if factor != factor or factor < 0:  # NaN or negative
        return DEFAULT_FACTOR
    return min(factor, MAX_FACTOR)


def _request(requests: Mapping[str, Any], name: str, *, milli: bool) -> float | None:
    if name not in requests:
        return None
    try:
        q = quantity.parse(requests[name])
    except ValueError:
        return None
    return float(q.milli_value() if milli else q.value())


def container_usage(container: Mapping[str, Any], factor: float) -> tuple[float, float]:
    """(milli-CPU, bytes): the requests times the factor; a resource without a request uses the BestEffort amount."""
    requests = (container.get("resources") or {}).get("requests") or {}
    cpu = _request(requests, "cpu", milli=True)
    mem = _request(requests, "memory", milli=False)
    return (BEST_EFFORT[0] if cpu is None else cpu * factor, BEST_EFFORT[1] if mem is None else mem * factor)


def running(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running"


def pod_usage(pod: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """Per container (name, milli-CPU, bytes) of a running pod; [] for a pod that does not run."""
    if not running(pod):
        return []
    factor = pod_factor(pod)
    return [(c.get("name", ""), *container_usage(c, factor)) for c in (pod.get("spec") or {}).get("containers") or ()]


def node_usage(node_name: str, pods: Iterable[Mapping[str, Any]]) -> tuple[float, float]:
    """(milli-CPU, bytes): the system reserve plus every running pod bound to the node."""
    cpu, mem = SYSTEM_RESERVE
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != node_name:
            continue
        for _, c, m in pod_usage(pod):
            cpu, mem = cpu + c, mem + m
    return cpu, mem


def _cpu(milli: float) -> str:
    return f"{round(milli)}m"


def _memory(value: float) -> str:
    return f"{round(value / 1024)}Ki"


def _stamp(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any], now: dt.datetime) -> Obj:
    meta = obj.get("metadata") or {}
    out: Obj = {"name": meta.get("name", ""), "creationTimestamp": _stamp(now)}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def node_metrics(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: dt.datetime) -> Obj:
    cpu, mem = node_usage((node.get("metadata") or {}).get("name", ""), pods)
    return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(node, now),
            "timestamp": _stamp(now), "window": WINDOW, "usage": {"cpu": _cpu(cpu), "memory": _memory(mem)}}


def pod_metrics(pod: Mapping[str, Any], now: dt.datetime) -> Obj | None:
    """The pod's PodMetrics, or None when it does not run (metrics-server has none for it)."""
    if not running(pod):
        return None
    containers = [{"name": n, "usage": {"cpu": _cpu(c), "memory": _memory(m)}} for n, c, m in pod_usage(pod)]
    return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(pod, now),
            "timestamp": _stamp(now), "window": WINDOW, "containers": containers}


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    return {"kind": f"{kind}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}


def group_doc() -> Obj:
    gv = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
    return {"name": GROUP, "versions": [gv], "preferredVersion": gv}


def api_group() -> Obj:
    return {"kind": "APIGroup", "apiVersion": "v1", **group_doc()}


def api_resource_list() -> Obj:
    verbs = ["get", "list"]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}", "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": verbs},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": verbs},
    ]}
