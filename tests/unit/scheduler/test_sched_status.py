"""The status writes of a session's result (`framework.status`, pure): PodGroup phase and counts (Volcano
jobStatus), what counts as a change, the Unschedulable / Scheduled events, pod conditions, reuse, and queue
`status.allocated` rolled up the parent chain. Tables over snapshot jobs."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework import status
from lahar.scheduler.framework.snapshot import FitErrors, Job
from tests.builders import node, pod, podgroup, queue

SSN = "ssn-1"


def _job(phases: list[str], *, min_member: int = 2, pg_phase: str = "Inqueue",
         stored: dict[str, Any] | None = None) -> Job:
    pods = []
    for i, ph in enumerate(phases):
        p = pod(f"p{i}").req(cpu="1").group("pg1")
        pods.append((p.on("n1", ph) if ph != "Pending" else p).build())
    pg = podgroup("pg1").min(min_member).queue("q1").phase(pg_phase).build()
    if stored is not None:
        pg["status"] = stored
    snap = snapshots.build(pods=pods, nodes=[node("n1").alloc(cpu="8", memory="8Gi").build()], podgroups=[pg],
                           queues=[queue("q1").build()])
    (job,) = snap.jobs.values()
    return job


def _unschedulable(transition: str) -> dict[str, Any]:
    return {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "1/2 tasks",
            "transitionID": transition, "lastTransitionTime": "2024-01-01T00:00:00Z"}


PHASES = [
    ("gang-running", ["Running", "Running"], 2, "Inqueue", {}, "Running", (2, 0, 0)),
    ("short-of-min-stays-inqueue", ["Running", "Pending"], 2, "Inqueue", {}, "Inqueue", (1, 0, 0)),
    ("short-of-min-not-inqueue-is-pending", ["Pending", "Pending"], 2, "Pending", {}, "Pending", (0, 0, 0)),
    ("all-terminated-is-completed", ["Succeeded", "Failed"], 2, "Running", {}, "Completed", (0, 1, 1)),
    ("running-with-this-sessions-unschedulable-is-unknown", ["Running", "Pending"], 2, "Inqueue",
     {"Unschedulable": _unschedulable(SSN)}, "Unknown", (1, 0, 0)),
]


@pytest.mark.parametrize(("phases", "min_member", "pg_phase", "conditions", "want", "counts"),
                         [c[1:] for c in PHASES], ids=[c[0] for c in PHASES])
def test_job_status_phase_and_counts(phases: list[str], min_member: int, pg_phase: str,
                                     conditions: dict[str, Any], want: str, counts: tuple[int, int, int]) -> None:
    job = _job(phases, min_member=min_member, pg_phase=pg_phase)
    job.conditions.update(conditions)
    got = status.job_status(job, {}, SSN)
    assert got["phase"] == want
    assert (got["running"], got["failed"], got["succeeded"]) == counts


def test_an_older_sessions_unschedulable_condition_does_not_make_it_unknown() -> None:
    job = _job(["Running", "Pending"])
    old = {"conditions": [_unschedulable("ssn-0")]}
    assert status.job_status(job, old, SSN)["phase"] == "Inqueue"


def test_this_sessions_condition_replaces_the_stored_one_of_its_type() -> None:
    job = _job(["Running", "Running"])
    other = {"type": "Scheduled", "status": "True"}
    job.conditions["Unschedulable"] = _unschedulable(SSN)
    got = status.job_status(job, {"conditions": [_unschedulable("ssn-0"), other]}, SSN)
    assert got["conditions"] == [_unschedulable(SSN), other]


CHANGES = [
    ("same", {"phase": "Running", "running": 2}, {"phase": "Running", "running": 2}, False),
    ("phase", {"phase": "Running"}, {"phase": "Inqueue"}, True),
    ("count", {"phase": "Running", "running": 2}, {"phase": "Running", "running": 1}, True),
    ("missing-count-is-zero", {"phase": "Running", "failed": 0}, {"phase": "Running"}, False),
    ("condition-added", {"conditions": [{"type": "Scheduled"}]}, {}, True),
    ("only-transition-time-and-id-differ", {"conditions": [_unschedulable("a")]},
     {"conditions": [{**_unschedulable("b"), "lastTransitionTime": "2025-01-01T00:00:00Z"}]}, False),
    ("condition-message-differs", {"conditions": [_unschedulable("a")]},
     {"conditions": [{**_unschedulable("a"), "message": "2/2 tasks"}]}, True),
]


@pytest.mark.parametrize(("new", "old", "changed"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_status_changed(new: dict[str, Any], old: dict[str, Any], changed: bool) -> None:
    assert status.status_changed(new, old) is changed


POD_CONDITIONS = [
    ("no-condition-yet", [], True),
    ("same-reason-and-message", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                  "message": "m"}], False),
    ("other-message", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "x"}],
     True),
    ("scheduled-true", [{"type": "PodScheduled", "status": "True"}], True),
]


@pytest.mark.parametrize(("conditions", "changed"), [c[1:] for c in POD_CONDITIONS],
                         ids=[c[0] for c in POD_CONDITIONS])
def test_pod_condition_changed(conditions: list[dict[str, Any]], changed: bool) -> None:
    assert status.pod_condition_changed({"status": {"conditions": conditions}}, "Unschedulable", "m") is changed


def test_a_gang_left_pending_with_fit_errors_gets_unschedulable_event_and_pod_conditions() -> None:
    job = _job(["Pending", "Pending"], stored={"phase": "Inqueue", "running": 1})  # a pod went away
    t0 = next(iter(job.tasks.values()))
    job.fit_errors[t0.uid] = FitErrors(total=1, reasons=None, error="")
    job.fit_errors[t0.uid].reasons["Insufficient cpu"] += 1
    got = status.close_job(job, SSN)
    assert got.update.changed and got.update.status["phase"] == "Inqueue"
    assert [e[1] for e in got.update.events] == ["Unschedulable"]
    assert "2/2 tasks in gang unschedulable" in got.update.events[0][2]
    by_name = {c.name: c for c in got.conditions}
    assert by_name[t0.name].message == "no node is available: Insufficient cpu."  # no node counts (volcano#3072)
    assert by_name[t0.name].event_message == "0/1 nodes are available: 1 Insufficient cpu."  # the Event has them
    assert all(c.reason == "Unschedulable" for c in got.conditions)
    assert not got.reusable


@pytest.mark.parametrize(("stored", "events", "reusable"), [
    ({"phase": "Inqueue"}, ["Scheduled"], False),
    ({"phase": "Running", "running": 2, "failed": 0, "succeeded": 0}, [], True),
], ids=["turns-running-scheduled-event", "settled-nothing-to-write-reusable"])
def test_close_job_events_and_reuse(stored: dict[str, Any], events: list[str], reusable: bool) -> None:
    job = _job(["Running", "Running"], pg_phase=stored["phase"], stored=stored)
    got = status.close_job(job, SSN)
    assert [e[1] for e in got.update.events] == events
    assert got.reusable is reusable
    assert got.update.status == (stored if reusable else got.update.status)


def test_queue_allocated_rolls_up_the_parent_chain_and_reports_changes() -> None:
    pods = [pod(f"p{i}").req(cpu="1", memory="1Gi").group("pg1").on("n1").build() for i in range(2)]
    leaf = queue("leaf").parent("mid").build()
    mid = queue("mid").parent("root").build()
    mid["status"]["allocated"] = {"cpu": "2", "memory": "2Gi"}  # already as computed
    snap = snapshots.build(pods=pods, nodes=[node("n1").alloc(cpu="8", memory="8Gi").build()],
                           podgroups=[podgroup("pg1").min(2).queue("leaf").phase("Running").build()],
                           queues=[queue("root").build(), mid, leaf, queue("other").build()])
    allocated, changed = status.queue_allocated(list(snap.jobs.values()), snap.queues, snap.resources)
    for name in ("leaf", "mid", "root"):
        assert snap.resources.vector(allocated[name])[0] == pytest.approx(2000)  # cpu in milli
    assert snap.resources.vector(allocated["other"]).sum() == 0
    assert sorted(changed) == ["leaf", "root"]
