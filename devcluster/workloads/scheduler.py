"""The tiny default-scheduler: `node_fits` (selector, required node affinity, taints, Ready, requests, pod count)
and `choose_node` (the least requested node that fits) for pods with `schedulerName: default-scheduler`.

Part of `devcluster.workloads` (pure, over `_objects`); `WorkloadControllers.schedule` binds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar.devcluster.workloads._objects import _meta, _name, _spec, _status, is_terminal
from lahar.kube import podspec, quantity
from lahar.kube.client import Obj


def _node_term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        have = labels.get(key)
        ok = {"In": have in values, "NotIn": have not in values, "Exists": key in labels,
              "DoesNotExist": key not in labels}.get(op)
        if ok is None and op in ("Gt", "Lt") and have is not None and values:
            try:
                ok = int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])
            except ValueError:
                ok = False
        if not ok:
            return False
    return True


def node_fits(pod: Mapping[str, Any], node: Mapping[str, Any], used: Mapping[str, quantity.Quantity],
              pod_count: int) -> bool:
    """Node selector, required node affinity, NoSchedule/NoExecute taints, unschedulable, Ready, requests and pods."""
    labels = _meta(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in (_spec(pod).get("nodeSelector") or {}).items()):
        return False
    required = ((((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
    if required and not any(_node_term_matches(term, labels) for term in required):
        return False
    if _spec(node).get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not podspec.tolerates(pod, t)
           for t in _spec(node).get("taints") or []):
        return False
    if any(c.get("type") == "Ready" and c.get("status") != "True" for c in _status(node).get("conditions") or []):
        return False
    allocatable = _status(node).get("allocatable") or {}
    if "pods" in allocatable and pod_count + 1 > quantity.parse(allocatable["pods"]).value():
        return False
    free = quantity.sub(allocatable, used)
    return not quantity.fits(podspec.pod_requests(pod), free)


_NON_ZERO = {"cpu": quantity.parse("100m"), "memory": quantity.parse("200Mi")}  # kube-scheduler's scoring defaults


def _scored_requests(pod: Mapping[str, Any]) -> dict[str, quantity.Quantity]:
    """Requests for scoring: a container without cpu/memory requests counts as 100m / 200Mi (`GetNonzeroRequests`)."""
    return {**_NON_ZERO, **{k: v for k, v in podspec.pod_requests(pod).items() if v.milli_value() > 0}}


def choose_node(pod: Mapping[str, Any], nodes: Sequence[Obj], pods: Sequence[Obj]) -> str | None:
    """The node for `pod`: among the nodes it fits, the least requested (cpu and memory shares, requests without
    cpu/memory counted as kube-scheduler does), then the fewest pods, then by name."""
    used: dict[str, dict[str, quantity.Quantity]] = {}
    scored: dict[str, dict[str, quantity.Quantity]] = {}
    count: dict[str, int] = {}
    for p in pods:
        node = _spec(p).get("nodeName")
        if node and not is_terminal(p):
            used[node] = quantity.add(used.get(node), podspec.pod_requests(p))
            scored[node] = quantity.add(scored.get(node), _scored_requests(p))
            count[node] = count.get(node, 0) + 1
    best: tuple[float, int, str] | None = None
    for node in nodes:
        name = _name(node)
        if not node_fits(pod, node, used.get(name, {}), count.get(name, 0)):
            continue
        allocatable = quantity.resource_list(_status(node).get("allocatable"))
        shares = []
        for res in ("cpu", "memory"):
            cap = allocatable.get(res)
            if cap is not None and cap.milli_value() > 0:
                shares.append(scored.get(name, {}).get(res, quantity.Quantity()).milli_value() / cap.milli_value())
        score = (sum(shares) / len(shares) if shares else 0.0, count.get(name, 0), name)
        if best is None or score < best:
            best = score
    return best[2] if best else None


