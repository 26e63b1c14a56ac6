"""Run one scheduling session: `run_session(snapshot, conf)` is pure (snapshot in, `Decisions` out);
`run_once(client, conf)` lists the cluster, runs a session and commits it.

Called by the `scheduler.session` Celery task (`scheduler.tasks`), `lahar simulate` and the tests.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from lahar.kube import errors
from lahar.kube.client import ClusterClient
from lahar.scheduler import commit as commits
from lahar.scheduler import metrics
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.conf import SchedulerConf
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.session import Decisions, Session
from lahar.scheduler.registry import in_tree_registry

__all__ = ["list_objects", "run_once", "run_session"]

_OPTIONAL = frozenset({"numatopologies", "devices", "hypernodes", "poddisruptionbudgets", "resourcequotas",
                       "persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes",
                       "csidrivers", "csistoragecapacities", "resourceclaims", "resourceslices", "deviceclasses"})


def run_session(snapshot: snapshots.Snapshot, conf: SchedulerConf, *, registry: Registry | None = None,
                uid: str | None = None, shared: dict[Hashable, Any] | None = None) -> Decisions:
    """Open a session on `snapshot` (mutated in place), run `conf.actions` in order, close it into decisions.
    `shared`: what the caller keeps across its sessions (`Session.shared_state`; the scheduler cache's)."""
    registry = registry if registry is not None else in_tree_registry()
    enabled = gc.isenabled()
    gc.disable()  # a session allocates many short-lived objects among ~10^6 long-lived ones: no full GC passes
    try:
        return _run(snapshot, conf, registry, uid, shared)
    finally:
        if enabled:
            gc.enable()


def _run(snapshot: snapshots.Snapshot, conf: SchedulerConf, registry: Registry, uid: str | None,
         shared: dict[Hashable, Any] | None) -> Decisions:
    t0 = time.perf_counter()
    ssn = Session(snapshot, conf, registry, uid=uid, shared=shared)
    t1 = time.perf_counter()
    timings = {"open": t1 - t0}
    for name in conf.actions:
        action = registry.action(name, conf.action_arguments(name))
        ta = time.perf_counter()
        action.execute(ssn)
        timings[f"action:{name}"] = time.perf_counter() - ta
    tc = time.perf_counter()
    samples = metrics.gather(ssn)  # plugins drop their state on close
    decisions = ssn.close()
    decisions.counters.update(samples)
    timings["close"] = time.perf_counter() - tc
    timings["total"] = time.perf_counter() - t0
    decisions.timings.update(timings)
    return decisions


def list_objects(client: ClusterClient) -> dict[str, list[dict]]:
    """Everything a snapshot needs, listed once (the informer cache does this incrementally)."""
    reg = client.registry
    out: dict[str, list[dict]] = {}
    for key, (group, version, plural) in {
        "pods": ("", "v1", "pods"), "nodes": ("", "v1", "nodes"),
        "podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
        "queues": ("scheduling.volcano.sh", "v1beta1", "queues"),
        "priority_classes": ("scheduling.k8s.io", "v1", "priorityclasses"),
        "numatopologies": ("nodeinfo.volcano.sh", "v1alpha1", "numatopologies"),
        "devices": ("scheduling.koordinator.sh", "v1alpha1", "devices"),
        "hypernodes": ("topology.volcano.sh", "v1alpha1", "hypernodes"),
        "poddisruptionbudgets": ("policy", "v1", "poddisruptionbudgets"),
        "resourcequotas": ("", "v1", "resourcequotas"),
        "persistentvolumeclaims": ("", "v1", "persistentvolumeclaims"),
        "persistentvolumes": ("", "v1", "persistentvolumes"),
        "storageclasses": ("storage.k8s.io", "v1", "storageclasses"),
        "csinodes": ("storage.k8s.io", "v1", "csinodes"),
        "csidrivers": ("storage.k8s.io", "v1", "csidrivers"),
        "csistoragecapacities": ("storage.k8s.io", "v1", "csistoragecapacities"),
        "resourceclaims": ("resource.k8s.io", "v1", "resourceclaims"),
        "resourceslices": ("resource.k8s.io", "v1", "resourceslices"),
        "deviceclasses": ("resource.k8s.io", "v1", "deviceclasses"),
    }.items():
        rt = reg.get(group, version, plural)
        if rt is None:
            out[key] = []
            continue
        try:
            out[key] = list(client.list(rt)["items"])
        except errors.NotFound:
            if key not in _OPTIONAL:
                raise
            out[key] = []  # an optional kind whose CRD is not installed
    return out


def run_once(client: ClusterClient, conf: SchedulerConf, *, registry: Registry | None = None,
             scheduler_names: Iterable[str] = snapshots.DEFAULT_SCHEDULER_NAMES,
             workers: int = 16, evict_grace_seconds: int | None = None, volume_bind_timeout: float | None = None,
             sleep: Callable[[float], None] = time.sleep) -> tuple[Decisions, commits.CommitResult]:
    """List, schedule, commit — one session without an informer cache (tests, `lahar simulate`). Pods are bound
    without waiting for their claims unless `volume_bind_timeout` is given (`commit.apply`)."""
    snap = snapshots.build(**list_objects(client), scheduler_names=scheduler_names)
    decisions = run_session(snap, conf, registry=registry)
    result = commits.apply(client, decisions, workers=workers, evict_grace_seconds=evict_grace_seconds,
                           volume_bind_timeout=volume_bind_timeout, sleep=sleep)
    return decisions, result
