"""Statement: operations change the session view at once; discard() after any sequence restores it exactly,
including plugin state kept through event handlers (proportion's allocated)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import TaskStatus, build
from lahar.scheduler.registry import in_tree_registry
from tests.builders import ALLOCATE_CONF, node, pod, podgroup, queue


def make_session() -> Session:
    objs: dict[str, Any] = dict(
        nodes=[node(f"n{i}").alloc("8", "16Gi", pods=20).build() for i in range(3)],
        queues=[queue("c1").build(), queue("c2").build()],
        podgroups=[podgroup("run").min(1).phase("Running").build(), podgroup("pg1").min(2).build(),
                   podgroup("pg2").min(1).queue("c2").build()],
        pods=[*(pod(f"r{i}").req("1", "1Gi").group("run").on(f"n{i % 3}").build() for i in range(4)),
              *(pod(f"a{i}").req("1", "2Gi").group("pg1").build() for i in range(4)),
              *(pod(f"b{i}").req("2", "1Gi").group("pg2").build() for i in range(3))])
    reg = in_tree_registry()
    return Session(build(**objs), confs.load(ALLOCATE_CONF), reg)


def fingerprint(ssn: Session) -> Any:
    a = ssn.arrays
    tasks = sorted((t.uid, str(t.status), t.node, t.node_name) for j in ssn.jobs.values() for t in j.tasks.values())
    index = sorted((j.uid, str(s), tuple(sorted(b))) for j in ssn.jobs.values() for s, b in j.index.items() if b)
    allocated = sorted((j.uid, tuple(j.allocated)) for j in ssn.jobs.values())
    on_nodes = [tuple(sorted(n.tasks)) for n in ssn.nodes]
    prop = ssn.plugins["proportion"]
    queues = sorted((k, tuple(np.round(v.allocated, 6)), round(v.share, 9)) for k, v in prop.attrs.items())
    return (a.idle.tobytes(), a.used.tobytes(), a.releasing.tobytes(), a.pipelined.tobytes(), a.pods.tobytes(),
            tasks, index, allocated, on_nodes, queues)


ops = st.lists(st.tuples(st.sampled_from(["allocate", "pipeline", "evict"]), st.integers(0, 50), st.integers(0, 2)),
               max_size=12)


@settings(max_examples=80, deadline=None)
@given(ops)
def test_discard_restores_the_snapshot(sequence: list[tuple[str, int, int]]) -> None:
    ssn = make_session()
    before = fingerprint(ssn)
    stmt = ssn.statement()
    for kind, pick, node_i in sequence:
        if kind == "evict":
            running = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()
                              if t.status in (TaskStatus.RUNNING, TaskStatus.ALLOCATED)), key=lambda t: t.uid)
            if running:
                stmt.evict(running[pick % len(running)], "test")
        else:
            pending = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()
                              if t.status is TaskStatus.PENDING), key=lambda t: t.uid)
            if pending:
                getattr(stmt, kind)(pending[pick % len(pending)], node_i)
    stmt.discard()
    assert fingerprint(ssn) == before
    assert len(stmt) == 0


def test_operations_change_the_view_at_once_and_commit_records_decisions() -> None:
    ssn = make_session()
    job = ssn.jobs["c1/pg1"]
    a0 = job.tasks["c1-a0"]
    idle = ssn.arrays.idle[1].copy()
    stmt = ssn.statement()
    stmt.allocate(a0, 1)
    assert a0.status is TaskStatus.ALLOCATED and a0.node_name == "n1"
    assert np.allclose(ssn.arrays.idle[1], idle - a0.resreq)
    victim = ssn.jobs["c1/run"].tasks["c1-r0"]
    stmt.evict(victim, "preempt")
    assert victim.status is TaskStatus.RELEASING
    assert np.allclose(ssn.arrays.releasing[0], victim.resreq)
    a1 = job.tasks["c1-a1"]
    stmt.pipeline(a1, 0)
    assert a1.status is TaskStatus.PIPELINED and np.allclose(ssn.arrays.pipelined[0], a1.resreq)
    assert stmt.commit() == []
    assert [(b.name, b.node) for b in ssn.decisions.binds] == [("a0", "n1")]
    assert [(e.name, e.reason) for e in ssn.decisions.evictions] == [("r0", "preempt")]
