"""Transactional preemption and reclaim as properties (issue 20 item 3; volcano#5022, #5026, #5131): random small
clusters run through the real actions and plugins; no victim goes unless the preemptor's whole gang is placed in the
same session, and no victim gang is left below its minAvailable unless it is evicted whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import TaskStatus
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, priority_class, queue, tiers_conf

TIER1 = ["priority", "gang", "conformance"]
TIER2 = ["drf", "predicates", "proportion", "nodeorder"]
CONFS = {
    "preempt": tiers_conf("enqueue, allocate, preempt", TIER1, TIER2),
    "reclaim": tiers_conf("enqueue, allocate, reclaim", TIER1, TIER2),
    "preempt-reclaim": tiers_conf("enqueue, allocate, preempt, reclaim", TIER1, TIER2),
    "gangpreempt-gangreclaim": tiers_conf("enqueue, allocate, gangpreempt, gangreclaim", TIER1, TIER2),
}
PCS = [priority_class("low", 10), priority_class("high", 1000)]
PLACED = (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.ALLOCATED)


@dataclass(frozen=True)
class World:
    nodes: list[int]  # cpus per node
    queues: list[int]  # weight per queue
    # (queue index, priority class, minAvailable, [(cpu, node index or None for pending)])
    jobs: list[tuple[int, str, int, list[tuple[int, int | None]]]]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """Nodes mostly full of running tasks (each on the first node with room from a drawn one), mostly low priority;
    pending gangs mostly high priority, in any queue: enough pressure that most examples preempt or reclaim."""
    nodes = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3))
    queues = draw(st.lists(st.integers(1, 3), min_size=2, max_size=3))
    free = list(nodes)
    jobs = []
    for _ in range(draw(st.integers(1, 3))):  # running victims
        tasks: list[tuple[int, int | None]] = []
        for _ in range(draw(st.integers(1, 4))):
            cpu = draw(st.integers(1, 2))
            first = draw(st.integers(0, len(nodes) - 1))
            n = next((i % len(nodes) for i in range(first, first + len(nodes)) if free[i % len(nodes)] >= cpu), None)
            if n is not None:
                free[n] -= cpu
                tasks.append((cpu, n))
        if tasks:
            jobs.append((draw(st.integers(0, len(queues) - 1)), draw(st.sampled_from(["low", "low", "high"])),
                         draw(st.integers(1, len(tasks))), tasks))
    for _ in range(draw(st.integers(1, 2))):  # pending gangs
        tasks = [(draw(st.integers(1, 2)), None) for _ in range(draw(st.integers(1, 3)))]
        jobs.append((draw(st.integers(0, len(queues) - 1)), draw(st.sampled_from(["high", "high", "low"])),
                     draw(st.integers(1, len(tasks))), tasks))
    return World(nodes, queues, jobs)


def _objects(w: World) -> dict[str, list[Any]]:
    pods, pgs = [], []
    for j, (q, pc, min_available, tasks) in enumerate(w.jobs):
        running = any(n is not None for _, n in tasks)
        pgs.append(podgroup(f"j{j}").min(min_available).queue(f"q{q}").priority_class(pc)
                   .phase("Running" if running else "Inqueue"))
        for t, (cpu, n) in enumerate(tasks):
            p = pod(f"j{j}-{t}").req(str(cpu), "1G").group(f"j{j}")
            p.obj["spec"]["priorityClassName"] = pc
            p.obj["spec"]["priority"] = 1000 if pc == "high" else 10
            pods.append(p.on(f"n{n}") if n is not None else p)
    return {"pods": pods, "podgroups": pgs,
            "nodes": [node(f"n{i}").alloc(str(c), "64G") for i, c in enumerate(w.nodes)],
            "queues": [queue(f"q{i}").weight(wt) for i, wt in enumerate(w.queues)]}


def _session(w: World, conf: str) -> tuple[Session, dict[str, int]]:
    """Run the conf's actions on one session; return it open (its view) with each job's placed count before."""
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    o = _objects(w)
    snap = snapshots.build(pods=objs(o["pods"]), nodes=objs(o["nodes"]), podgroups=objs(o["podgroups"]),
                           queues=objs(o["queues"]), priority_classes=objs(PCS))
    before = {j.uid: j.count(*PLACED) for j in snap.jobs.values()}
    ssn = Session(snap, c, registry, uid="ssn-1")
    for name in c.actions:
        registry.action(name, c.action_arguments(name)).execute(ssn)
    return ssn, before


def violations(ssn: Session, before: dict[str, int]) -> list[str]:
    """What the session's view breaks of the transactional rule; [] when it holds."""
    out = []
    evicted = {e.uid for e in ssn.decisions.evictions}
    tasks = {t.uid: t for j in ssn.jobs.values() for t in j.tasks.values()}
    for uid, t in tasks.items():
        if t.status is TaskStatus.RELEASING and uid not in evicted:
            out.append(f"{t.name} is releasing in the view but its eviction was never committed")
    for uid in evicted:
        if tasks[uid].status is not TaskStatus.RELEASING:
            out.append(f"{tasks[uid].name} was evicted but is {tasks[uid].status} in the view")
    for job in ssn.jobs.values():
        if job.count(TaskStatus.PIPELINED) and not job.is_pipelined():
            out.append(f"{job.uid} has pipelined tasks but its gang is not placed")
    # task-level evictions free room for a pipelined task on their node; gangpreempt's whole bundles go everywhere
    by_task = {e.uid for e in ssn.decisions.evictions if e.reason in ("preempt", "reclaim")}
    for n, info in enumerate(ssn.nodes):
        victims = [t for t in info.tasks.values() if t.uid in by_task]
        if victims and not any(t.status is TaskStatus.PIPELINED for t in info.tasks.values()):
            out.append(f"{ssn.arrays.names[n]}: {[t.name for t in victims]} evicted, nothing pipelined there")
        used = sum((t.resreq for t in info.tasks.values() if t.status in PLACED or t.status is TaskStatus.PIPELINED),
                   np.zeros_like(ssn.arrays.allocatable[n]))
        if np.any(used > ssn.arrays.allocatable[n] + EPSILON):
            out.append(f"{ssn.arrays.names[n]}: pipelined beyond what its evictions free")
    if evicted and not any(j.count(TaskStatus.PIPELINED) for j in ssn.jobs.values()):
        out.append("evictions committed and nothing pipelined")
    for job in ssn.jobs.values():  # (b): a victim gang keeps minAvailable or goes whole
        if not any(t.uid in evicted for t in job.tasks.values()):
            continue
        left = job.count(*PLACED)
        if before[job.uid] >= job.min_available and 0 < left < job.min_available:
            out.append(f"{job.uid} left at {left} of minAvailable {job.min_available}")
    return out


@pytest.mark.parametrize("conf", list(CONFS), ids=list(CONFS))
@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=worlds())
def test_no_eviction_without_the_whole_gang(conf: str, w: World) -> None:
    ssn, before = _session(w, CONFS[conf])
    assert violations(ssn, before) == []
