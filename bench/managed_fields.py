"""Benchmark what field ownership costs a write: the in-memory store with and without managedFields tracking.

One Pod (3 containers, ports, env) written again and again: a metadata merge patch (kubectl-style), a status patch
(a kubelet's), and a server-side apply of the whole Pod with `force`. Prints CPU time per write (process time, so
robust to a shared machine) for each, untracked vs tracked (devcluster runs tracked).
Run: `python bench/managed_fields.py [writes]`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from lahar.kube import resources
from lahar.kube.apiserver import store
from lahar.kube.resources import Registry

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x", "tier": "y"}},
    "spec": {"containers": [{"name": f"c{i}", "image": "nginx", "ports": [{"containerPort": 80 + i}],
                             "env": [{"name": f"E{j}", "value": "v"} for j in range(5)],
                             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}} for i in range(3)]}}


def per_write(n: int, write: Callable[[int], object]) -> float:
    start = time.process_time()
    for i in range(n):
        write(i)
    return (time.process_time() - start) / n * 1e6


def run(track: bool, n: int) -> dict[str, float]:
    s = store.Store(registry=Registry.of(resources.core()), track_managed_fields=track)
    pods = s.registry.get("", "v1", "pods")
    assert pods is not None
    s.create(pods, "default", POD, req=store.Request(field_manager="kubectl-create"))
    return {
        "metadata patch": per_write(n, lambda i: s.patch(
            pods, "default", "p", {"metadata": {"annotations": {"a": str(i)}}}, patch_type="merge",
            req=store.Request(field_manager="kubectl-annotate"))),
        "status patch": per_write(n, lambda i: s.patch(
            pods, "default", "p", {"status": {"phase": "Running", "message": str(i)}}, patch_type="merge",
            subresource="status", req=store.Request(field_manager="kubelet"))),
        "server-side apply": per_write(n // 4, lambda i: s.patch(
            pods, "default", "p", {**POD, "metadata": {**POD["metadata"], "annotations": {"b": str(i)}}},
            patch_type="apply", req=store.Request(field_manager="kubectl", force=True))),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    plain, tracked = run(False, n), run(True, n)
    for name in plain:
        print(f"{name:18s} untracked {plain[name]:7.0f} us/write   tracked {tracked[name]:7.0f} us/write   "
              f"x{tracked[name] / plain[name]:.1f}")


if __name__ == "__main__":
    main()
