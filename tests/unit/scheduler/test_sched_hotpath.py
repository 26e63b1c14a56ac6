"""The default-conf session's hot path (allocate, predicates, nodeorder, proportion): the shortcuts it takes give
the answers of the long way, and every cache it keeps follows a node's state as the session changes it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from lahar.scheduler.actions.allocate import Allocate
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import session as session_mod
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.nodes import EPSILON, NodeArrays, ResourceIndex, RowCache
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import proportion
from lahar.scheduler.plugins._podview import PodProfile
from lahar.scheduler.plugins.gang import Progress
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, tiers_conf

RES = ResourceIndex(["cpu", "memory", "nvidia.com/gpu"])


def _arrays(n: int = 4) -> NodeArrays:
    alloc = np.tile(np.array([4000.0, 8.0 * 2**30, 0.0]), (n, 1))
    return NodeArrays(RES, [f"n{i}" for i in range(n)], alloc, np.full(n, 110))


# --- NodeArrays.dirty_since ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "since", "want"), [
    ([], 0, []),
    ([2], 0, [2]),
    ([3, 1, 3, 0], 1, [0, 1, 3]),
    ([1, 2], 2, []),
    ([i % 7 for i in range(200)], 10, list(range(7))),  # a long tail: the numpy way
], ids=["none", "one", "repeats-sorted", "nothing-new", "long-tail"])
def test_dirty_since_lists_each_changed_row_once_in_order(changes: list[int], since: int, want: list[int]) -> None:
    a = _arrays(8)
    a.changes = list(changes)
    got = a.dirty_since(since)
    assert got.dtype == np.int64
    assert got.tolist() == want


def test_dirty_since_is_shared_until_a_node_changes() -> None:
    a = _arrays(8)
    a.add(3, np.array([1.0, 0.0, 0.0]), "used")
    first = a.dirty_since(0)
    assert a.dirty_since(0) is first and not first.flags.writeable  # the caches of a session ask in turn
    a.add(5, np.array([1.0, 0.0, 0.0]), "used")
    assert a.dirty_since(0).tolist() == [3, 5]
    a.reset_version()
    assert a.dirty_since(0).tolist() == []


# --- NodeArrays.future_is_idle: the shortcut allocate takes when nothing is pipelined or releasing --------------

REQ = np.array([1000.0, 2.0**30, 0.0])


@pytest.mark.parametrize(("steps", "want"), [
    ([], True),
    ([("add", "used")], True),
    ([("add", "pipelined")], False),
    ([("add", "releasing")], False),
    ([("add", "pipelined"), ("remove", "pipelined")], True),
    ([("add", "releasing"), ("add", "used"), ("remove", "releasing")], True),
    ([("add", "pipelined"), ("add", "pipelined"), ("remove", "pipelined")], False),
], ids=["fresh", "used-only", "pipelined", "releasing", "pipelined-undone", "releasing-undone", "one-left"])
def test_future_is_idle_follows_pipelined_and_releasing_bookings(steps: list[tuple[str, str]], want: bool) -> None:
    a = _arrays()
    assert a.future_is_idle()
    for op, kind in steps:
        getattr(a, op)(1, REQ, kind)
    assert a.future_is_idle() is want
    assert want == bool(np.array_equal(a.future_idle(), a.idle))
    assert a.copy().future_is_idle() is want


def test_future_is_idle_is_false_while_a_residue_is_left() -> None:
    """Adding and taking back amounts that do not cancel exactly in floating point leaves a residue: future idle
    then differs from idle in the last bits, and the shortcut is not taken."""
    a = _arrays()
    for v in (0.1, 0.2):
        a.add(0, np.array([v, 0.0, 0.0]), "pipelined")
    for v in (0.2, 0.1):
        a.remove(0, np.array([v, 0.0, 0.0]), "pipelined")
    assert a.futures == 0
    assert a.pipelined[0, 0] != 0.0
    assert not a.future_is_idle()


# --- PodProfile keys: the constant texts equal json.dumps' -----------------------------------------------------

@pytest.mark.parametrize("spec", [
    {},
    {"containers": [{"name": "c", "image": "busybox"}]},
    {"containers": [{"name": "c", "image": "a:1"}, {"name": "d", "image": "b"}], "initContainers": [
        {"name": "i", "image": "c:2"}]},
    {"nodeSelector": {"zone": "a"}},
    {"tolerations": [{"key": "k", "operator": "Exists"}]},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
    {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]}}},
], ids=["empty", "one-image", "images", "node-selector", "tolerations", "required-affinity", "preferred-affinity"])
def test_profile_keys_are_the_json_texts(spec: dict[str, Any]) -> None:
    prof = PodProfile({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    assert prof.static_key == json.dumps([prof.node_selector, prof.required_terms, prof.tolerations],
                                         sort_keys=True, separators=(",", ":"))
    assert prof.score_key == json.dumps([prof.preferred_terms, prof.tolerations, prof.images], sort_keys=True,
                                        separators=(",", ":"))


# --- proportion's per-task comparisons in Python floats --------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "dims"), [
    ([1.0, 2.0, 0.0], [1.0, 2.0, 0.0], [1.0, 1.0, 0.0]),
    ([1.05, 2.0, 9.0], [1.0, 2.0, 0.0], [1.0, 1.0, 0.0]),
    ([1.2, 2.0, 0.0], [1.0, 2.0, 0.0], [1.0, 1.0, 0.0]),
    ([0.0, 0.0, 5.0], [0.0, 0.0, 4.0], [0.0, 0.0, 1.0]),
    ([3.0, 1.0, 1.0], [np.inf, np.inf, np.inf], [1.0, 1.0, 1.0]),
    ([3.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
], ids=["equal", "within-epsilon-unasked-dim", "over", "scalar-over", "unbounded", "no-dims"])
def test_le_dims_matches_the_vector_form(a: list[float], b: list[float], dims: list[float]) -> None:
    va, vb, vd = np.array(a), np.array(b), np.array(dims)
    mask = vd > EPSILON
    assert proportion._le_dims(va, vb, vd) is bool(np.all(va[mask] <= vb[mask] + EPSILON))


# --- the session's predicate with one plugin ---------------------------------------------------------------------

def _node(name: str, zone: str) -> dict[str, Any]:
    n = node(name).alloc(cpu="4", memory="8Gi").build()
    n["metadata"]["labels"]["zone"] = zone
    return n


def _session(nodes: list[dict[str, Any]]) -> Session:
    registry = in_tree_registry()
    c = confs.load(tiers_conf("allocate", ["gang"], ["predicates", "nodeorder"]), actions=registry.action_names,
                   plugins=registry.plugin_names)
    p = pod("p-0").req(cpu="1").group("pg").selector(zone="a").build()
    snap = snapshots.build(pods=[p], nodes=nodes, podgroups=[podgroup("pg").min(1).queue("default").build()],
                           queues=[queue("default").build()])
    return Session(snap, c, registry, uid="s")


def test_single_predicate_plugin_answer_keeps_reasons_and_unresolvable() -> None:
    ssn = _session([_node("n0", "a"), _node("n1", "b")])
    task = next(iter(ssn.snapshot.tasks.values()))
    f = ssn.predicate(task)
    assert f.feasible.tolist() == [True, False] and not f.all_feasible
    assert f.reasons is not None and f.reasons[0] is None and "affinity" in str(f.reasons[1]).lower()
    assert f.unresolvable is not None and f.unresolvable.tolist() == [False, True]


def test_single_predicate_plugin_passing_everywhere_answers_a_fresh_mask() -> None:
    ssn = _session([_node("n0", "a"), _node("n1", "a")])
    task = next(iter(ssn.snapshot.tasks.values()))
    f = ssn.predicate(task)
    assert f.feasible.tolist() == [True, True] and f.reasons is None and f.all_feasible
    assert f.unresolvable is not None and not f.unresolvable.any()
    assert not f.unresolvable.flags.writeable  # one shared "nothing unresolvable": read-only
    f.feasible[0] = False  # a caller writing into the answer does not change the next one
    assert ssn.predicate(task).feasible.tolist() == [True, True]


# --- fits future idle: idle alone when it is the same ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["none", "pipelined", "releasing"])
@pytest.mark.parametrize("rows", [None, [1], [0, 2]], ids=["all", "one-row", "two-rows"])
def test_fits_future_idle_is_the_definition(kind: str, rows: list[int] | None) -> None:
    a = _arrays()
    big = np.array([3500.0, 2.0**30, 0.0])
    a.add(1, big, "used")
    if kind != "none":
        a.add(1, big, kind)  # pipelined books future idle; releasing hands it back
    req = np.array([1000.0, 2.0**30, 0.0])
    r = None if rows is None else np.array(rows)
    want = (req <= a.future_idle() + EPSILON).all(axis=1)
    got = session_mod._fits_future_idle(a, req, r)
    assert got.tolist() == (want if r is None else want[r]).tolist()


# --- allocate's gang check keeps per-request slot counts, invalidated by placements ------------------------------

def test_cannot_be_ready_sees_a_placement_made_after_its_first_answer() -> None:
    registry = in_tree_registry()
    c = confs.load(tiers_conf("allocate", ["gang"], ["predicates", "nodeorder"]), actions=registry.action_names,
                   plugins=registry.plugin_names)
    pods = [pod(f"a-{i}").req(cpu="1", memory="1Gi").group("a").build() for i in range(4)]
    pods.append(pod("b-0").req(cpu="2", memory="1Gi").group("b").build())
    snap = snapshots.build(pods=pods, nodes=[node("n0").alloc(cpu="4", memory="8Gi").build()],
                           podgroups=[podgroup("a").min(4).queue("default").build(),
                                      podgroup("b").min(1).queue("default").build()],
                           queues=[queue("default").build()])
    ssn = Session(snap, c, registry, uid="s")
    job_a, job_b = ssn.jobs["c1/a"], ssn.jobs["c1/b"]
    tasks_a = list(job_a.tasks.values())
    assert not Allocate._cannot_be_ready(ssn, job_a, tasks_a)  # 4 slots of 1 cpu for 4 tasks
    stmt = ssn.statement()
    stmt.allocate(next(iter(job_b.tasks.values())), 0)  # 2 of the 4 cpus go
    assert Allocate._cannot_be_ready(ssn, job_a, tasks_a)
    stmt.discard()
    job_a.fit_errors.clear()
    assert not Allocate._cannot_be_ready(ssn, job_a, tasks_a)


# --- gang's job order keeps each job's progress until the job changes --------------------------------------------

def test_gang_progress_is_recomputed_when_the_job_changes_in_the_session() -> None:
    registry = in_tree_registry()
    c = confs.load(tiers_conf("allocate", ["gang"], ["predicates", "nodeorder"]), actions=registry.action_names,
                   plugins=registry.plugin_names)
    pods = [pod(f"a-{i}").req(cpu="1", memory="1Gi").group("a").build() for i in range(2)]
    pods.append(pod("b-0").req(cpu="1", memory="1Gi").group("b").build())
    snap = snapshots.build(pods=pods, nodes=[node("n0").alloc(cpu="4", memory="8Gi").build()],
                           podgroups=[podgroup("a").min(2).queue("default").build(),
                                      podgroup("b").min(2).queue("default").build()],
                           queues=[queue("default").build()])
    ssn = Session(snap, c, registry, uid="s")
    g = ssn.plugins["gang"]
    a, b = ssn.jobs["c1/a"], ssn.jobs["c1/b"]
    assert g.progress(a) is Progress.WAITING and g.job_order(a, b) == 0
    stmt = ssn.statement()
    for t in list(a.tasks.values()):
        stmt.allocate(t, 0)
    assert g.progress(a) is Progress.READY  # ready jobs go last
    assert g.job_order(a, b) == 1 and g.job_order(b, a) == -1
    stmt.discard()
    assert g.progress(a) is Progress.WAITING and g.job_order(a, b) == 0


# --- RowCache: answers follow the node rows the session changed ---------------------------------------------------

@pytest.mark.parametrize(("changed", "want_rows"), [
    ([], "none"),
    ([2], [2]),
    ([3, 1, 3], [1, 3]),
    ([0, 1, 2, 3, 4, 5, 6, 7, 0, 1], "all"),  # more changes than an eighth of the nodes: all again
], ids=["unchanged", "one-node", "two-nodes", "many"])
def test_row_cache_recomputes_only_the_changed_nodes(changed: list[int], want_rows: Any) -> None:
    a = _arrays(64)
    asked: list[Any] = []

    def compute(req: Any, rows: np.ndarray | None) -> np.ndarray:
        asked.append("all" if rows is None else rows.tolist())
        return (req <= (a.idle if rows is None else a.idle[rows]) + EPSILON).all(axis=1)

    cache = RowCache(a, compute)
    req = np.array([3000.0, 2.0**30, 0.0])
    assert cache.get("k", req).all()
    asked.clear()
    for i in changed:
        a.add(i, np.array([2000.0, 0.0, 0.0]), "used")
    got = cache.get("k", req)
    assert asked == ([] if want_rows == "none" else [want_rows])
    assert got.tolist() == (req <= a.idle + EPSILON).all(axis=1).tolist()
