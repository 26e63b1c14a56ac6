"""task-topology: Volcano's plugins/task-topology/topology_test.go annotation cases as data, the bucket building
and scoring rules as tables, and allocate sessions where affinity packs and anti-affinity spreads a job's tasks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import tasktopology as tt
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, queue, run, tiers_conf

AFF, ANTI, ORDER = ("volcano.sh/task-topology-affinity", "volcano.sh/task-topology-anti-affinity",
                    "volcano.sh/task-topology-task-order")
ROLES6 = ["ps", "ps", "worker", "worker", "chief", "evaluator"]
ROLES4 = ["ps", "ps", "worker", "worker"]
DASHED = ["ps-some", "ps-some", "worker-another-some", "worker-another-some", "chief-kk", "evaluator-tt"]

# Volcano's Test_readTopologyFromPgAnnotations.
UPSTREAM = [
    dict(id="correct-annotation", roles=ROLES6,
         ann={AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief", ORDER: "ps,worker,chief,evaluator"},
         want=tt.Topology([["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]],
                          ["ps", "worker", "chief", "evaluator"])),
    dict(id="task-names-with-dashes", roles=DASHED,
         ann={AFF: "ps-some,worker-another-some;ps-some,chief-kk", ANTI: "ps-some;worker-another-some,chief-kk",
              ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt"},
         want=tt.Topology([["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
                          [["ps-some"], ["worker-another-some", "chief-kk"]],
                          ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"])),
    dict(id="nil-annotation", roles=[], ann=None, want=None),
    dict(id="invalid-annotation", roles=ROLES6,
         ann={AFF: "$%GF$^trtqwrg^", ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;", ORDER: "ps,worker,chief,evaluator,,,"},
         error="task $%GF$^trtqwrg^ do not exist in job <default/job1>"),
    dict(id="invalid-task-name", roles=ROLES4, ann={AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"},
         error="task chief do not exist in job <default/job1>"),
    dict(id="duplicate-task-name", roles=ROLES4, ann={AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"},
         error="task ps is duplicate in job <default/job1>"),
    dict(id="redundant-punctuations", roles=ROLES6,
         ann={AFF: "ps,worker;ps,,chief,;", ANTI: "ps;worker,chief;;;", ORDER: "ps,worker,chief,evaluator,,,"},
         want=tt.Topology([["ps", "worker"], ["ps", "", "chief", ""], [""]],
                          [["ps"], ["worker", "chief"], [""], [""], [""]],
                          ["ps", "worker", "chief", "evaluator", "", "", ""])),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_upstream_parse(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(ValueError) as exc:
            tt.parse_topology(case["ann"], case["roles"], "default/job1")
        assert str(exc.value) == case["error"]
    else:
        assert tt.parse_topology(case["ann"], case["roles"], "default/job1") == case["want"]


def _session(pods: list[Any], ann: dict[str, str], nodes: list[Any] | None = None,
             arguments: dict[str, Any] | None = None) -> Session:
    registry = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "task-topology", "arguments": arguments or {}}]}]}),
        actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(pods), nodes=objs(nodes or [node("n1").alloc("8", "8Gi", pods=10),
                                                                   node("n2").alloc("8", "8Gi", pods=10)]),
                           podgroups=objs([podgroup("pg1").annotate(**ann)]), queues=objs([queue("c1")]))
    return Session(snap, conf, registry, uid="ssn-1")


def _pods(*roles: str, req: str = "1") -> list[Any]:
    seen: dict[str, int] = {}
    out = []
    for r in roles:
        i = seen[r] = seen.get(r, -1) + 1
        out.append(pod(f"job1-{r}-{i}").req(req, "1Gi").group("pg1").role(r))
    return out


def _buckets(ssn: Session) -> list[list[str]]:
    m = ssn.plugins["task-topology"].managers["c1/pg1"]
    names = {t.uid: t.name for t in ssn.snapshot.tasks.values()}
    return [sorted(names[u] for u in b.tasks) for b in m.buckets]


@pytest.mark.parametrize(("roles", "ann", "want"), [
    (["ps", "worker", "worker"], {AFF: "ps,worker"}, [["job1-ps-0", "job1-worker-0", "job1-worker-1"]]),
    (["worker", "worker", "worker"], {ANTI: "worker"}, [["job1-worker-0"], ["job1-worker-1"], ["job1-worker-2"]]),
    (["ps", "ps", "worker", "worker"], {AFF: "ps,worker", ANTI: "ps"},
     [["job1-ps-0", "job1-worker-0"], ["job1-ps-1", "job1-worker-1"]]),  # a tie goes to the lighter bucket
    (["ps", "evaluator"], {AFF: "ps"}, [["job1-ps-0"]]),  # no topology: out of every bucket
], ids=["affinity-packs", "self-anti-spreads", "anti-ps-balances-workers", "only-named-tasks"])
def test_buckets(roles: list[str], ann: dict[str, str], want: list[list[str]]) -> None:
    assert _buckets(_session(_pods(*roles), ann)) == want


def test_task_order_puts_bucketed_and_fuller_buckets_first() -> None:
    ssn = _session(_pods("ps", "ps", "worker", "evaluator"), {AFF: "ps,worker", ANTI: "ps"})
    assert _buckets(ssn) == [["job1-ps-0", "job1-worker-0"], ["job1-ps-1"]]
    p = ssn.plugins["task-topology"]
    t = {x.name: x for x in ssn.snapshot.tasks.values()}
    assert p.task_order(t["job1-ps-1"], t["job1-evaluator-0"]) == -1  # in a bucket beats out of one
    assert p.task_order(t["job1-ps-0"], t["job1-ps-1"]) == -1  # the fuller bucket first
    assert p.task_order(t["job1-ps-0"], t["job1-worker-0"]) == -1  # same bucket: stronger topology (self-anti)


def test_task_order_annotation_wins_inside_a_bucket() -> None:
    ssn = _session(_pods("ps", "ps", "worker"), {AFF: "ps,worker", ANTI: "ps", ORDER: "worker,ps"})
    assert _buckets(ssn) == [["job1-ps-0", "job1-ps-1", "job1-worker-0"]]  # the worker pulls both in first
    p = ssn.plugins["task-topology"]
    t = {x.name: x for x in ssn.snapshot.tasks.values()}
    assert p.task_order(t["job1-worker-0"], t["job1-ps-0"]) == -1 and p.task_order(t["job1-ps-0"], t["job1-ps-1"]) == 0


def test_node_score_follows_the_bound_bucket_members() -> None:
    pods = [pod("job1-ps-0").req("1", "1Gi").group("pg1").role("ps").on("n2"),
            *_pods("worker", "worker")]
    ssn = _session(pods, {AFF: "ps,worker"})
    task = next(t for t in ssn.snapshot.tasks.values() if t.name == "job1-worker-0")
    scores = ssn.node_scores(task, np.arange(2))
    # bucket of 3 (1 bound on n2, 2 pending): n1 = 0 + 2, n2 = 1 + 2; × 100 / 3
    assert scores.tolist() == pytest.approx([200 / 3, 100.0])


def test_node_score_counts_down_what_the_node_cannot_also_hold() -> None:
    ssn = _session(_pods("worker", "worker", "worker", req="3"), {AFF: "worker"},
                   nodes=[node("n1").alloc("4", "8Gi", pods=10), node("n2").alloc("12", "12Gi", pods=10)],
                   arguments={"task-topology.weight": 2})
    task = next(iter(ssn.snapshot.tasks.values()))
    # n1 holds one of the three (9 cpu asked): 3 pending − 2 others it cannot hold = 1; n2 holds all: 3
    assert ssn.node_scores(task, np.arange(2)).tolist() == pytest.approx([1 * 2 * 100 / 3, 3 * 2 * 100 / 3])


def test_node_too_small_for_the_task_scores_zero() -> None:
    ssn = _session(_pods("worker", req="6"), {AFF: "worker"},
                   nodes=[node("n1").alloc("4", "8Gi", pods=10), node("n2").alloc("8", "8Gi", pods=10)])
    task = next(iter(ssn.snapshot.tasks.values()))
    assert ssn.node_scores(task, np.arange(2)).tolist() == [0.0, 100.0]


def test_bad_annotations_are_ignored_with_the_reason_kept() -> None:
    ssn = _session(_pods("ps"), {AFF: "ps,chief"})
    p = ssn.plugins["task-topology"]
    assert p.managers == {} and p.errors == {"c1/pg1": "task chief do not exist in job <c1/pg1>"}


CONF = tiers_conf("allocate", ["gang"], ["predicates", "task-topology"])
# nodeorder's least-requested score alone spreads the tasks; task-topology's affinity outweighs it
SPREADING = tiers_conf("allocate", ["gang"], ["predicates", "nodeorder",
                                              {"name": "task-topology", "arguments": {"task-topology.weight": 2}}])


def test_allocate_spreads_self_anti_affine_workers() -> None:
    d = run(nodes=[node("n1").alloc("8", "8Gi", pods=10), node("n2").alloc("8", "8Gi", pods=10)],
            podgroups=[podgroup("pg1").min(2).annotate(**{ANTI: "worker"})], pods=_pods("worker", "worker"),
            queues=[queue("c1")], conf=CONF)
    assert sorted(d.bind_map().values()) == ["n1", "n2"]


def test_allocate_packs_affine_tasks() -> None:
    d = run(nodes=[node("n1").alloc("8", "8Gi", pods=10), node("n2").alloc("8", "8Gi", pods=10)],
            podgroups=[podgroup("pg1").min(3).annotate(**{AFF: "ps,worker"})], pods=_pods("ps", "worker", "worker"),
            queues=[queue("c1")], conf=SPREADING)
    assert len(d.bind_map()) == 3 and len(set(d.bind_map().values())) == 1


def test_discarded_allocation_is_taken_back() -> None:
    ssn = _session(_pods("worker", "worker"), {AFF: "worker"})
    p = ssn.plugins["task-topology"]
    task = next(iter(ssn.snapshot.tasks.values()))
    (bucket,) = p.managers["c1/pg1"].buckets
    stmt = ssn.statement()
    stmt.allocate(task, 0)
    assert bucket.nodes == {"n1": 1} and len(bucket.tasks) == 1
    stmt.discard()
    assert bucket.nodes == {"n1": 0} and len(bucket.tasks) == 2 and bucket.bound == 0
