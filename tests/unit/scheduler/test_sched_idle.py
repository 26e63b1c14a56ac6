"""An idle session does next to no per-PodGroup work: `Session.close` reuses what it computed for a job whose inputs
did not change (settled), and that reuse gives exactly the decisions a session on a fresh snapshot computes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import hooks
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions, Session, _implements
from lahar.scheduler.incremental import KINDS, SnapshotInputs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.unit.scheduler.test_sched_cache_incremental import (
    CONF,
    REGISTRY,
    SESSION_CONF,
    base_objects,
    digest,
    full_build,
    key,
    node,
    op_st,
    pod,
    podgroup,
    queue,
)


def normal(d: Decisions) -> dict[str, Any]:
    """The decisions, order-free, without wall-clock times (two sessions given the same uid compare equal)."""

    def status(s: dict[str, Any]) -> dict[str, Any]:
        out = dict(s)
        if "conditions" in out:
            out["conditions"] = sorted(({k: v for k, v in c.items() if k != "lastTransitionTime"}
                                        for c in out["conditions"]), key=str)
        return out

    return {
        "binds": sorted((b.namespace, b.name, b.node) for b in d.binds),
        "evictions": sorted((e.namespace, e.name, e.reason) for e in d.evictions),
        "pipelined": dict(d.pipelined),
        "podgroups": {uid: (u.changed, status(u.status), sorted(u.events)) for uid, u in d.podgroups.items()},
        "pod_conditions": sorted((c.namespace, c.name, c.reason, c.message, c.nominated_node)
                                 for c in d.pod_conditions),
        "queues": d.queues,
        "queues_changed": sorted(d.queues_changed),
    }


def commit_back(objects: dict[str, dict[str, dict]], inputs: SnapshotInputs, d: Decisions) -> None:
    """What the cluster shows after the commit, as the informers deliver it: PodGroup status written, pods bound
    (and then Running), evicted pods gone, PodScheduled=False written on pods left pending."""
    by_name = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": k for k, p in objects["pods"].items()}
    for u in d.podgroups.values():
        k = f"{u.namespace}/{u.name}"
        if u.changed and k in objects["podgroups"]:
            objects["podgroups"][k] = pg = {**objects["podgroups"][k], "status": u.status}
            inputs.upsert("podgroups", pg)
    for e in d.evictions:
        gone = objects["pods"].pop(by_name.get(f"{e.namespace}/{e.name}", ""), None)
        if gone is not None:
            inputs.delete("pods", gone)
    for b in d.binds:
        k = by_name.get(f"{b.namespace}/{b.name}")
        if k in objects["pods"]:
            p = objects["pods"][k]
            objects["pods"][k] = p = {**p, "spec": {**p["spec"], "nodeName": b.node}, "status": {"phase": "Running"}}
            inputs.upsert("pods", p)
    for c in d.pod_conditions:
        k = by_name.get(f"{c.namespace}/{c.name}")
        if k in objects["pods"]:
            p = objects["pods"][k]
            cond = {"type": "PodScheduled", "status": "False", "reason": c.reason, "message": c.message}
            objects["pods"][k] = p = {**p, "status": {**p["status"], "conditions": [cond]}}
            inputs.upsert("pods", p)


def loaded(objects: dict[str, dict[str, dict]]) -> SnapshotInputs:
    """A cache fed `objects` as informers would hand them out."""
    inputs = SnapshotInputs()
    for kind, objs in objects.items():
        inputs.replace(kind, objs.values())
    return inputs


def settle(objects: dict[str, dict[str, dict]], conf: Any, rounds: int) -> SnapshotInputs:
    """`rounds` sessions, each one's binds and statuses written back: the cluster as it looks once settled."""
    inputs = loaded(objects)
    for _ in range(rounds):
        commit_back(objects, inputs, run_session(inputs.snapshot(), conf, registry=REGISTRY))
    return inputs


def cluster() -> dict[str, dict[str, dict]]:
    """Running gangs, a gang that fits (binds in the first session), one that never fits, one waiting to enqueue."""
    objs: dict[str, dict[str, dict]] = {k: {} for k in KINDS}
    items = [node("n0"), node("n1"), node("n2", gpu=True), queue("q0"), queue("q1", weight=2),
             podgroup("run", phase="Running"), pod("r0", group="run", node_name="n0", phase="Running"),
             pod("r1", group="run", node_name="n1", phase="Running"),
             podgroup("fits", queue_name="q1"), pod("f0", group="fits"), pod("f1", group="fits"),
             podgroup("wide", min_member=3), *(pod(f"w{i}", group="wide", cpu="3") for i in range(3)),
             podgroup("later", phase="Pending", min_member=1), pod("l0", group="later", cpu="500m")]
    for o in items:
        kind = {"Node": "nodes", "Queue": "queues", "PodGroup": "podgroups", "Pod": "pods"}[o["kind"]]
        objs[kind][key(o)] = o
    return objs


def test_idle_session_changes_nothing_and_repeats_its_decisions() -> None:
    objects = cluster()
    inputs = loaded(objects)
    first = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY)
    assert first.binds and any(u.changed for u in first.podgroups.values())
    commit_back(objects, inputs, first)
    for _ in range(4):  # bound pods report Running, the status writes come back: the cluster settles
        d = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY)
        commit_back(objects, inputs, d)
    idle = [run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid="idle") for _ in range(2)]
    for d in idle:
        assert not d.binds and not d.evictions and not d.pod_conditions
        assert not [uid for uid, u in d.podgroups.items() if u.changed or u.events]
        assert set(d.podgroups) == set(inputs.snapshot().jobs)
    assert normal(idle[0]) == normal(idle[1])
    # everything but the gang that never fits (allocate tries it every session: fit errors) is settled
    assert idle[1].counters["podgroups_settled"] == len(idle[1].podgroups) - 1
    assert idle[1].podgroups["ns/wide"].status["phase"] == "Inqueue"
    fresh = run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid="idle")
    assert fresh.counters["podgroups_settled"] == 0
    assert normal(fresh) == normal(idle[1])


def test_a_changed_pod_unsettles_only_its_job() -> None:
    objects = cluster()
    inputs = settle(objects, SESSION_CONF, 5)
    before = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY).counters["podgroups_settled"]
    failed = {**objects["pods"]["ns/r0"], "status": {"phase": "Failed"}}
    objects["pods"]["ns/r0"] = failed
    inputs.upsert("pods", failed)
    d = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid="after")
    assert d.counters["podgroups_settled"] == before - 1
    assert d.podgroups["ns/run"].changed and d.podgroups["ns/run"].status["failed"] == 1
    assert normal(d) == normal(run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid="after"))


commit_op_st = st.tuples(st.just("commit"), st.integers(0, 3), st.none())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(op_st, commit_op_st, commit_op_st), min_size=1, max_size=25))
def test_settled_close_equals_fresh_close(ops: list[tuple[str, Any, Any]]) -> None:
    """Over random object changes, sessions and their commits: a session on the incrementally kept snapshot (with
    settled jobs reused) decides exactly what a session on a fresh full build decides."""
    objects = base_objects()
    inputs = loaded(objects)
    last: Decisions | None = None
    for n, (op, kind, arg) in enumerate(ops):
        if op == "upsert":
            objects[kind][key(arg)] = arg
            inputs.upsert(kind, arg)
        elif op == "delete":
            keys = sorted(objects[kind])
            if keys:
                inputs.delete(kind, objects[kind].pop(keys[arg % len(keys)]))
        elif op == "commit":  # the last session's commit, then `kind` more sessions, each committed: settling
            for k in range(kind + 1):
                if last is not None:
                    commit_back(objects, inputs, last)
                    last = None
                if k < kind:
                    uid = f"s{n}.{k}"
                    last = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid=uid)
                    fresh = run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid=uid)
                    assert normal(last) == normal(fresh)
        else:
            uid = f"s{n}"
            last = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid=uid)
            assert normal(last) == normal(run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid=uid))
    for n in range(2):
        uid = f"end{n}"
        d = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid=uid)
        assert normal(d) == normal(run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid=uid))


class _Stub:
    name = "stub"

    def __init__(self, hooks_: dict[str, Any]) -> None:
        for name, fn in hooks_.items():
            setattr(self, name, fn)


@pytest.mark.parametrize("plugin", [
    *(in_tree_registry().plugin(name, {}) for name in in_tree_registry().plugin_names),
    _Stub({}), _Stub({"job_order": lambda a, b: 0}), _Stub({"on_allocate": lambda t: None}),
    _Stub({"on_allocate": lambda t: None, "on_deallocate": lambda t: None}), _Stub({"job_ready": None}),
], ids=[*in_tree_registry().plugin_names, "stub-none", "stub-instance-hook", "stub-half-protocol",
        "stub-whole-protocol", "stub-hook-none"])
def test_hook_check_agrees_with_isinstance(plugin: Any) -> None:
    for proto, _ in hooks.HOOKS.values():
        assert _implements(plugin, proto) == isinstance(plugin, proto), proto.__name__


SUMS = [
    ("no-jobs", [], ["q0"], [[0.0, 0.0]]),
    ("one-queue", [("q0", [1.0, 2.0]), ("q0", [3.0, 4.0])], ["q0"], [[4.0, 6.0]]),
    ("queue-without-jobs", [("q1", [1.0, 2.0])], ["q0", "q1"], [[0.0, 0.0], [1.0, 2.0]]),
    ("unlisted-queue-left-out", [("q9", [5.0, 5.0]), ("q0", [1.0, 0.5])], ["q0"], [[1.0, 0.5]]),
]


@pytest.mark.parametrize(("jobs", "queues", "want"), [(j, q, w) for _, j, q, w in SUMS], ids=[s[0] for s in SUMS])
def test_sum_by_queue(jobs: list[tuple[str, list[float]]], queues: list[str], want: list[list[float]]) -> None:
    class J:
        def __init__(self, q: str, v: list[float]) -> None:
            self.queue, self.allocated = q, np.array(v)

    got = snapshots.sum_by_queue([J(q, v) for q, v in jobs], queues, 2)  # type: ignore[arg-type]
    assert got.tolist() == want


def test_fit_errors_of_this_session_unsettle_a_job() -> None:
    """A job settled while nothing tried to place it (a conf without allocate) is closed again once allocate records
    why its tasks fit nowhere: its condition and its pods' PodScheduled messages change."""
    enqueue_only = confs.load(CONF.replace("enqueue, allocate, preempt, reclaim, backfill", "enqueue"),
                              actions=REGISTRY.action_names, plugins=REGISTRY.plugin_names)
    assert enqueue_only.actions == ("enqueue",)
    objects = cluster()
    inputs = settle(objects, enqueue_only, 3)
    d = run_session(inputs.snapshot(), enqueue_only, registry=REGISTRY)
    assert not [u for u in d.podgroups.values() if u.changed] and not d.pod_conditions
    assert d.counters["podgroups_settled"] == len(d.podgroups)
    d = run_session(inputs.snapshot(), SESSION_CONF, registry=REGISTRY, uid="alloc")
    assert d.counters["podgroups_settled"] < len(d.podgroups)
    assert {c.name for c in d.pod_conditions} >= {"w0", "w1", "w2"}  # now with the reason they fit nowhere
    assert normal(d) == normal(run_session(full_build(objects), SESSION_CONF, registry=REGISTRY, uid="alloc"))


def test_a_session_that_never_closed_is_undone_on_every_job() -> None:
    """The next snapshot resets per-session fields only on the jobs the last session closed — on all of them when
    it did not close (an action raised): what it left behind must not reach the next session."""
    objects = cluster()
    inputs = settle(objects, SESSION_CONF, 3)
    ssn = Session(inputs.snapshot(), SESSION_CONF, REGISTRY)
    for name in ("enqueue", "allocate"):
        REGISTRY.action(name, {}).execute(ssn)
    assert ssn.jobs["ns/wide"].fit_errors  # and no close()
    assert digest(inputs.snapshot()) == digest(full_build(objects))
