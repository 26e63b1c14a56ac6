"""The incrementally updated snapshot (`scheduler.incremental.SnapshotInputs`, behind `SchedulerCache`) equals a full
`snapshot.build` of the same objects after any sequence of object changes and sessions — including sessions that
placed, pipelined or evicted tasks whose binds never reached the cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.cache import SchedulerCache
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.incremental import KINDS, SnapshotInputs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import list_objects, run_session

CONF = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
REGISTRY = in_tree_registry()
SESSION_CONF = confs.load(CONF, actions=REGISTRY.action_names, plugins=REGISTRY.plugin_names)


def digest(snap: snapshots.Snapshot) -> dict[str, Any]:
    """Everything a session reads, order-free."""
    a = snap.arrays

    def task(t: snapshots.Task) -> tuple:
        return (t.key, t.uid, t.job, str(t.status), t.node, t.node_name, tuple(t.resreq), t.priority)

    return {
        "resources": snap.resources.names,
        "nodes": [(n.name, n.index, n.labels, n.taints, n.unschedulable, sorted(n.tasks),
                   sorted(t.key for t in n.others)) for n in snap.nodes],
        "arrays": {k: getattr(a, k).tolist() for k in ("allocatable", "idle", "used", "releasing", "pipelined",
                                                       "pods", "max_pods")},
        "names": a.names,
        "total": snap.total.tolist(),
        "jobs": {uid: (j.queue, j.min_available, j.priority, j.phase, sorted(task(t) for t in j.tasks.values()),
                       {str(s): sorted(b) for s, b in j.index.items() if b}, j.allocated.tolist(),
                       j.best_effort_pending, j.fit_errors, j.job_fit_error, j.conditions, j.events)
                 for uid, j in snap.jobs.items()},
        "tasks": sorted(snap.tasks),
        "queues": {k: (q.queue, q.weight, q.capability.tolist()) for k, q in snap.queues.items()},
        "priority_classes": snap.priority_classes,
        "extras": {k: dict(v) for k, v in snap.extras.items() if v},
    }


def full_build(objects: dict[str, dict[str, dict]]) -> snapshots.Snapshot:
    return snapshots.build(**{k: list(v.values()) for k, v in objects.items()})


# --- object builders over a small universe, so random changes collide ------------------------------------------------

NODE_NAMES = ["n0", "n1", "n2", "n3"]
QUEUE_NAMES = ["q0", "q1"]
GROUPS = ["g0", "g1", "g2"]
POD_NAMES = [f"p{i}" for i in range(10)]


def node(name: str, *, ready: bool = True, cpu: str = "4", gpu: bool = False, taint: bool = False,
         pods: str | None = "110") -> dict:
    alloc = {"cpu": cpu, "memory": "8Gi"}
    if pods is not None:
        alloc["pods"] = pods
    if gpu:
        alloc["nvidia.com/gpu"] = "2"
    spec: dict = {}
    if taint:
        spec["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": name[-1]}},
            "spec": spec, "status": {"allocatable": alloc,
                                     "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def queue(name: str, *, weight: int = 1, cap: str | None = None) -> dict:
    spec: dict = {"weight": weight}
    if cap:
        spec["capability"] = {"cpu": cap}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": spec, "status": {"state": "Open"}}


def podgroup(name: str, *, queue_name: str = "q0", min_member: int = 2, phase: str = "Inqueue",
             pc: str | None = None) -> dict:
    spec: dict = {"minMember": min_member, "queue": queue_name}
    if pc:
        spec["priorityClassName"] = pc
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": spec, "status": {"phase": phase}}


def pod(name: str, *, group: str | None = "g0", node_name: str | None = None, phase: str = "Pending",
        cpu: str = "1", extra: str | None = None, scheduler: str = "volcano", deleting: bool = False,
        recreated: bool = False) -> dict:
    req = {"cpu": cpu, "memory": "1Gi"}
    if extra:
        req[extra] = "1"
    meta: dict = {"name": name, "namespace": "ns", "uid": f"uid-{name}{'-2' if recreated else ''}",
                  "creationTimestamp": "2024-01-01T00:00:00Z"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:01:00Z"
    spec: dict = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": {"requests": req}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def key(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


nodes_st = st.builds(node, st.sampled_from(NODE_NAMES), ready=st.sampled_from([True, True, False]),
                     cpu=st.sampled_from(["2", "4", "8"]), gpu=st.booleans(), taint=st.booleans(),
                     pods=st.sampled_from(["110", "3", None]))
queues_st = st.builds(queue, st.sampled_from(QUEUE_NAMES), weight=st.integers(1, 3),
                      cap=st.sampled_from([None, "6", "100"]))
podgroups_st = st.builds(podgroup, st.sampled_from(GROUPS), queue_name=st.sampled_from([*QUEUE_NAMES, "missing"]),
                         min_member=st.integers(1, 3), phase=st.sampled_from(["Pending", "Inqueue", "Running"]),
                         pc=st.sampled_from([None, "high"]))
pods_st = st.builds(pod, st.sampled_from(POD_NAMES), group=st.sampled_from([*GROUPS, None]),
                    node_name=st.sampled_from([None, None, *NODE_NAMES, "gone"]),
                    phase=st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]),
                    cpu=st.sampled_from(["1", "2", "500m"]), extra=st.sampled_from([None, None, "nvidia.com/gpu",
                                                                                     "example.com/foo"]),
                    scheduler=st.sampled_from(["volcano", "volcano", "default-scheduler"]), deleting=st.booleans(),
                    recreated=st.booleans())
pcs_st = st.builds(lambda v, d: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": "high"}, "value": v, "globalDefault": d},
                   st.integers(0, 1000), st.booleans())
namespaces_st = st.builds(lambda n: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}},
                          st.sampled_from(["ns", "other"]))

KIND_STRATEGIES = {"nodes": nodes_st, "queues": queues_st, "podgroups": podgroups_st, "pods": pods_st,
                   "priority_classes": pcs_st, "namespaces": namespaces_st}
op_st = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(["pods"] * 5 + ["podgroups"] * 2 + ["nodes", "queues",
                                                                                   "priority_classes",
                                                                                   "namespaces"]))
    .flatmap(lambda t: st.tuples(st.just(t[0]), st.just(t[1]), KIND_STRATEGIES[t[1]])),
    st.tuples(st.just("delete"), st.sampled_from(["pods", "pods", "podgroups", "nodes", "queues"]),
              st.integers(0, 9)),
    st.tuples(st.just("snapshot"), st.booleans(), st.none()),
)


def base_objects() -> dict[str, dict[str, dict]]:
    objs: dict[str, dict[str, dict]] = {k: {} for k in KINDS}
    for o in [node("n0"), node("n1", gpu=True), node("n2"), queue("q0"), queue("q1", weight=2),
              podgroup("g0"), podgroup("g1", queue_name="q1", min_member=1),
              pod("p0", node_name="n0", phase="Running"), pod("p1"), pod("p2", group="g1"),
              pod("p3", group=None, node_name="n1", phase="Running", scheduler="default-scheduler")]:
        kind = {"Node": "nodes", "Queue": "queues", "PodGroup": "podgroups", "Pod": "pods"}[o["kind"]]
        objs[kind][key(o)] = o
    return objs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_st, min_size=1, max_size=25))
def test_incremental_equals_full_build(ops: list[tuple[str, str, Any]]) -> None:
    objects = base_objects()
    inputs = SnapshotInputs()
    for kind, objs in objects.items():
        for o in objs.values():
            inputs.upsert(kind, o)
    snap = inputs.snapshot()
    assert digest(snap) == digest(full_build(objects))
    for op, kind, arg in ops:
        if op == "upsert":
            objects[kind][key(arg)] = arg
            inputs.upsert(kind, arg)
        elif op == "delete":
            keys = sorted(objects[kind])
            if keys:
                gone = objects[kind].pop(keys[arg % len(keys)])
                inputs.delete(kind, gone)
        else:
            snap = inputs.snapshot()
            assert digest(snap) == digest(full_build(objects))
            if kind:  # a session mutates the snapshot (its binds never reach these objects)
                run_session(snap, SESSION_CONF, registry=REGISTRY)
    assert digest(inputs.snapshot()) == digest(full_build(objects))


def test_idle_ticks_do_not_rebuild() -> None:
    objects = base_objects()
    inputs = SnapshotInputs()
    for kind, objs in objects.items():
        inputs.replace(kind, objs.values())
    first = inputs.snapshot()
    for _ in range(3):
        d = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY)
    assert inputs.snapshot() is first
    assert inputs.stats["full_builds"] == 1 and inputs.stats["incremental"] == 4
    assert d.binds  # p1/p2 were placed in every session (never committed): undone before the next
    assert inputs.stats["session_repairs"] >= 3
    assert digest(inputs.snapshot()) == digest(full_build(objects))


@pytest.mark.parametrize(("change", "full"), [
    (lambda i: i.upsert("pods", pod("p1", cpu="2")), False),
    (lambda i: i.upsert("podgroups", podgroup("g0", min_member=3)), False),
    (lambda i: i.upsert("nodes", node("n0", cpu="8", taint=True)), False),
    (lambda i: i.upsert("queues", queue("q0", weight=5, cap="3")), False),
    (lambda i: i.upsert("nodes", node("n9")), True),
    (lambda i: i.upsert("nodes", node("n0", ready=False)), True),
    (lambda i: i.upsert("queues", queue("q9")), True),
    (lambda i: i.upsert("pods", pod("p9", extra="example.com/new")), True),
    (lambda i: i.upsert("priority_classes", {"metadata": {"name": "high"}, "value": 5}), True),
], ids=["pod-update", "podgroup-update", "node-labels-allocatable", "queue-update", "node-added",
        "node-not-ready", "queue-added", "new-resource-name", "priorityclass"])
def test_what_rebuilds_in_full(change: Callable[[SnapshotInputs], None], full: bool) -> None:
    inputs = SnapshotInputs()
    for kind, objs in base_objects().items():
        inputs.replace(kind, objs.values())
    inputs.snapshot()
    change(inputs)
    inputs.snapshot()
    assert inputs.stats["full_builds"] == (2 if full else 1)


def test_scheduler_cache_follows_informers() -> None:
    client = MemoryClient.with_crds()
    reg = client.registry
    rts = {"nodes": reg.get("", "v1", "nodes"), "queues": reg.get("scheduling.volcano.sh", "v1beta1", "queues"),
           "podgroups": reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), "pods": reg.get("", "v1", "pods")}

    def create(kind: str, obj: dict) -> dict:
        ns = obj["metadata"].get("namespace")
        made = client.create(rts[kind], obj, namespace=ns)
        if obj.get("status") and "status" in rts[kind].subresources:
            made["status"] = obj["status"]
            made = client.update_status(rts[kind], made, namespace=ns)
        return made

    client.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": "ns"}})
    for kind, objs in base_objects().items():
        for o in objs.values():
            create(kind, o)
    cache = SchedulerCache(client)
    try:
        assert cache.start(10)

        def settled() -> bool:
            namespaces = client.list(reg.get("", "v1", "namespaces"))["items"]
            return digest(cache.snapshot()) == digest(snapshots.build(**list_objects(client), namespaces=namespaces))

        deadline = time.monotonic() + 10
        while not settled():
            assert time.monotonic() < deadline, "cache never matched the cluster"
            time.sleep(0.02)
        d = run_session(cache.snapshot(), SESSION_CONF, registry=REGISTRY)
        assert d.binds
        client.delete(rts["pods"], "p1", namespace="ns")
        create("pods", pod("p5", group="g1", node_name="n2", phase="Running"))
        deadline = time.monotonic() + 10
        while not settled():
            assert time.monotonic() < deadline, "cache never caught up with the changes"
            time.sleep(0.02)
        assert cache.inputs.stats["full_builds"] == 1
        assert np.all(cache.snapshot().arrays.used >= 0)
    finally:
        cache.stop()
