"""proportion: Volcano's plugins/proportion/proportion_test.go as data: enqueue and allocate against deserved and
capability per resource dimension, queue-priority order, no double counting of an Inqueue job's bound tasks, and
no phantom reservation for a job another plugin refused."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.conf import SWITCHES
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

OFF = {s: False for s in SWITCHES if s != "enableHierarchy"}


def _proportion(actions: str, *on: str, extra: list[dict[str, Any]] | None = None) -> str:
    """Upstream's Go-built tier: proportion with only the switches named on (an unset switch is off there)."""
    return tiers_conf(actions, [{"name": "proportion", **OFF, **dict.fromkeys(on, True)}, *(extra or [])])


ALL = ("enabledAllocatable", "enabledOverused", "enableJobEnqueued")

# TestEnqueueAndAllocable: two 2-CPU 2G nodes; q1 (capability 2 CPU 2G) runs pod1 (1 CPU 2G), q2 (capability
# 3 CPU 3G) runs pod2 (2 CPU 1G); each new job's minResources equals its one pod's request.
_RUNNING = [pod("pod1", "ns1").req("1", "2G").group("pg1").on("n1"), pod("pod2", "ns1").req("2", "1G").group("pg2").on("n2")]
_RUNNING_PGS = [podgroup("pg1", "ns1").queue("q1").min(1).phase("Running").min_resources(cpu="1", memory="2G"),
                podgroup("pg2", "ns1").queue("q2").min(1).phase("Running").min_resources(cpu="2", memory="1G")]


def _new_job(name: str, q: str, cpu: str, mem: str) -> tuple[pod, podgroup]:
    return (pod(f"pod{name[-1]}", "ns1").req(cpu, mem).group(name),
            podgroup(name, "ns1").queue(q).min(1).phase("Pending").min_resources(cpu=cpu, memory=mem))


ENQUEUE_ALLOCATABLE: list[dict[str, Any]] = [
    dict(id="memory-over-deserved-cpu-only-job-enqueued-and-allocated", job=_new_job("pg3", "q1", "1", "0G"),
         on=ALL, binds={"ns1/pod3": "n1"}),
    dict(id="cpu-over-deserved-memory-only-job-enqueued-and-allocated", job=_new_job("pg4", "q2", "0", "1G"),
         on=ALL, binds={"ns1/pod4": "n2"}),
    dict(id="over-capability-not-enqueued", job=_new_job("pg5", "q1", "1", "1G"), on=("enableJobEnqueued",),
         binds={}),
    dict(id="over-deserved-not-allocated", job=_new_job("pg5", "q1", "1", "1G"), on=("enabledAllocatable",),
         binds={}),
]


@pytest.mark.parametrize("case", ENQUEUE_ALLOCATABLE, ids=[c["id"] for c in ENQUEUE_ALLOCATABLE])
def test_enqueue_and_allocatable_upstream(case: dict[str, Any]) -> None:
    p, pg = case["job"]
    d = run(pods=[*_RUNNING, p], podgroups=[*_RUNNING_PGS, pg],
            nodes=[node("n1").alloc("2", "2G", 10), node("n2").alloc("2", "2G", 10)],
            queues=[queue("q1").capability(cpu="2", memory="2G"), queue("q2").capability(cpu="3", memory="3G")],
            conf=_proportion("enqueue, allocate", *case["on"]))
    assert d.bind_map() == case["binds"]


def test_queue_not_open_not_enqueued_upstream() -> None:
    p, pg = _new_job("pg6", "q3", "1", "1G")
    d = run(pods=[p], podgroups=[pg], nodes=[node("n1").alloc("2", "2G", 10), node("n2").alloc("2", "2G", 10)],
            queues=[queue("q3").capability(cpu="3", memory="3G").state("Closed")],
            conf=_proportion("enqueue, allocate", "enableJobEnqueued"))
    assert d.bind_map() == {}
    assert d.podgroups["ns1/pg6"].status["phase"] == "Pending"


def test_allocate_in_queue_priority_order_upstream() -> None:
    """TestAllocate: three queues of capability 2 CPU 4Gi and priorities 5, 1, 10; q1's job holds n1; of the two
    waiting jobs, q3's (the highest priority) takes n2. Actions allocate then reclaim, proportion's queue order only."""
    d = run(pods=[pod("p1", "ns1").req("2", "4Gi").group("pg1").on("n1"),
                  pod("p2", "ns1").req("2", "4Gi").group("pg2"), pod("p3", "ns1").req("2", "4Gi").group("pg3")],
            podgroups=[podgroup("pg1", "ns1").queue("q1").min(1).phase("Running"),
                       podgroup("pg2", "ns1").queue("q2").min(1), podgroup("pg3", "ns1").queue("q3").min(1)],
            nodes=[node("n1").alloc("2", "4Gi", 10), node("n2").alloc("2", "4Gi", 10)],
            queues=[queue(f"q{i}").priority(prio).capability(cpu="2", memory="4Gi")
                    for i, prio in ((1, 5), (2, 1), (3, 10))],
            conf=_proportion("allocate, reclaim", "enableQueueOrder"))
    assert d.bind_map() == {"ns1/p3": "n2"}


def test_no_double_counting_for_inqueue_job_with_bound_tasks_upstream() -> None:
    """TestNoDoubleCountingForInqueueJobWithBindingTasks: pgA (minResources 3 CPU) is still Inqueue though its three
    1-CPU pods are bound; they count once, so pgB (1 CPU) fits q1's 4 CPU and is enqueued and bound."""
    d = run(pods=[*(pod(f"pA{i}", "ns1").req("1", "1Gi").group("pgA").on("n1", "Pending") for i in (1, 2, 3)),
                  pod("pB1", "ns1").req("1", "1Gi").group("pgB")],
            podgroups=[podgroup("pgA", "ns1").queue("q1").min(3).phase("Inqueue").min_resources(cpu="3", memory="3Gi"),
                       podgroup("pgB", "ns1").queue("q1").min(1).phase("Pending").min_resources(cpu="1", memory="1Gi")],
            nodes=[node("n1").alloc("4", "8Gi", 10)], queues=[queue("q1").capability(cpu="4", memory="8Gi")],
            conf=_proportion("enqueue, allocate", *ALL))
    assert d.bind_map() == {"ns1/pB1": "n1"}


def test_no_phantom_reservation_for_a_job_another_plugin_refused_upstream() -> None:
    """TestJobEnqueuedOnOtherPluginsReject: q1 has room for one 1-CPU job; another plugin refuses pgA, so proportion
    must not reserve pgA's minResources, and pgB is enqueued."""

    class Rejecter:
        name = "test-rejecter"

        def __init__(self, arguments: object = None) -> None:
            pass

        def job_enqueueable(self, job: Any) -> Vote:  # noqa: ANN401
            return Vote.REJECT if job.name == "pgA" else Vote.PERMIT

    registry = in_tree_registry().copy().add_plugin("test-rejecter", Rejecter)
    text = tiers_conf("enqueue", [{"name": "proportion", **OFF, "enableJobEnqueued": True},
                                  {"name": "test-rejecter", **OFF, "enableJobEnqueued": True}])
    conf = confs.load(text, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(
        pods=[pod("podA", "ns1").req("1", "1G").group("pgA").build(), pod("podB", "ns1").req("1", "1G").group("pgB").build()],
        podgroups=[podgroup(n, "ns1").queue("q1").min(1).phase("Pending").min_resources(cpu="1", memory="1G").build()
                   for n in ("pgA", "pgB")],
        nodes=[node("n1").alloc("4", "4G", 10).build()], queues=[queue("q1").capability(cpu="1", memory="4G").build()])
    d = run_session(snap, conf, registry=registry)
    assert d.podgroups["ns1/pgB"].status["phase"] == "Inqueue"
