"""devcluster.metricsapi: the simulated kubelets' usage (requests × the pod's `lahar.sh/sim-usage` factor,
BestEffort small, a node = its running pods + a system reserve) and the metrics.k8s.io documents."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.devcluster import metricsapi as m

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
MI = 1024 * 1024


def _pod(name: str = "p", *, node: str = "n1", phase: str = "Running", factor: Any = None,
         requests: list[dict[str, str]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "x"}}
    if factor is not None:
        meta["annotations"] = {m.SIM_USAGE_ANNOTATION: factor}
    containers = [{"name": f"c{i}", "resources": {"requests": r} if r else {}}
                  for i, r in enumerate(requests if requests is not None else [{"cpu": "1", "memory": "1Gi"}])]
    return {"metadata": meta, "spec": {"nodeName": node, "containers": containers}, "status": {"phase": phase}}


@pytest.mark.parametrize(("factor", "want"), [
    (None, m.DEFAULT_FACTOR), ("0.9", 0.9), ("0", 0.0), ("2.5", 2.5), ("50", m.MAX_FACTOR),
    ("-1", m.DEFAULT_FACTOR), ("lots", m.DEFAULT_FACTOR), ("nan", m.DEFAULT_FACTOR),
], ids=["default", "set", "zero", "above-one", "capped", "negative", "malformed", "nan"])
def test_pod_factor(factor: Any, want: float) -> None:
    assert m.pod_factor(_pod(factor=factor)) == want


@pytest.mark.parametrize(("requests", "factor", "want"), [
    ({"cpu": "2", "memory": "1Gi"}, 0.5, (1000.0, 512.0 * MI)),
    ({"cpu": "250m"}, 1.0, (250.0, m.BEST_EFFORT[1])),
    ({}, 0.9, m.BEST_EFFORT),
    ({"cpu": "bad", "memory": "64Mi"}, 1.0, (m.BEST_EFFORT[0], 64.0 * MI)),
], ids=["requests", "cpu-only", "best-effort", "malformed-cpu"])
def test_container_usage(requests: dict[str, str], factor: float, want: tuple[float, float]) -> None:
    assert m.container_usage({"resources": {"requests": requests}}, factor) == pytest.approx(want)


@pytest.mark.parametrize(("pod", "want"), [
    (_pod(factor="0.8"), [("c0", 800.0, 0.8 * 1024 * MI)]),
    (_pod(phase="Pending"), []),
    (_pod(node=""), []),
    (_pod(phase="Succeeded"), []),
    (_pod(requests=[{}, {"cpu": "1", "memory": "1Gi"}]), [("c0", *m.BEST_EFFORT), ("c1", 500.0, 512.0 * MI)]),
], ids=["running", "pending", "unbound", "finished", "two-containers"])
def test_pod_usage(pod: dict[str, Any], want: list[tuple[str, float, float]]) -> None:
    assert m.pod_usage(pod) == [pytest.approx(w) for w in want]


def test_node_usage_is_its_running_pods_plus_the_reserve() -> None:
    pods = [_pod("a", factor="1"), _pod("b"), _pod("c", phase="Pending"), _pod("d", node="n2")]
    cpu, mem = m.node_usage("n1", pods)
    assert (cpu, mem) == pytest.approx((m.SYSTEM_RESERVE[0] + 1500, m.SYSTEM_RESERVE[1] + 1.5 * 1024 * MI))
    assert m.node_usage("idle", pods) == m.SYSTEM_RESERVE


def test_documents() -> None:
    n = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
    doc = m.node_metrics(n, [_pod(factor="1")], NOW)
    assert doc == {"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                   "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T12:00:00Z", "labels": {"zone": "a"}},
                   "timestamp": "2026-01-01T12:00:00Z", "window": m.WINDOW,
                   "usage": {"cpu": "1100m", "memory": f"{(1024 + 256) * 1024}Ki"}}
    pm = m.pod_metrics(_pod(factor="1"), NOW)
    assert pm is not None and pm["metadata"]["namespace"] == "default"
    assert pm["containers"] == [{"name": "c0", "usage": {"cpu": "1000m", "memory": f"{1024 * 1024}Ki"}}]
    assert m.pod_metrics(_pod(phase="Pending"), NOW) is None
    kinds = {r["name"]: (r["kind"], r["namespaced"]) for r in m.api_resource_list()["resources"]}
    assert kinds == {"nodes": ("NodeMetrics", False), "pods": ("PodMetrics", True)}
    assert m.api_group()["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
