"""Policy resolution (Volcano applyPolicies, spec/volcano.md §2.2) and delayed-action bookkeeping as tables; the
shapes follow job_controller_util_test.go's TestApplyPolicies cases, in our own words."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.controllers import _job_policies as pol
from tests.builders import task, vcjob


def job(policies: list[dict[str, Any]] | None = None, task_policies: list[dict[str, Any]] | None = None,
        version: int = 0) -> dict[str, Any]:
    j = vcjob("j", namespace=None).uid("uid-1").policies(*(policies or [])).status(version=version)
    return j.tasks(task("worker", 2, policies=task_policies or []), task("ps", 1)).build()


CASES = [
    ("explicit-action-wins", job([{"event": "PodFailed", "action": "RestartJob"}]),
     {"event": "CommandIssued", "action": "AbortJob"}, "AbortJob", 0.0),
    ("out-of-sync-syncs", job([{"event": "*", "action": "RestartJob"}]), {"event": "OutOfSync"}, "SyncJob", 0.0),
    ("command-issued-without-action-syncs", job([{"event": "*", "action": "RestartJob"}]),
     {"event": "CommandIssued"}, "SyncJob", 0.0),
    ("pod-running-syncs", job([{"event": "*", "action": "RestartJob"}]),
     {"event": "PodRunning", "task": "worker", "jobVersion": 0}, "SyncJob", 0.0),
    ("stale-version-syncs", job([{"event": "PodFailed", "action": "RestartJob"}], version=2),
     {"event": "PodFailed", "task": "worker", "jobVersion": 1}, "SyncJob", 0.0),
    ("other-job-uid-syncs", job([{"event": "PodFailed", "action": "RestartJob"}]),
     {"event": "PodFailed", "jobUid": "uid-0", "jobVersion": 0}, "SyncJob", 0.0),
    ("job-level-event", job([{"event": "PodEvicted", "action": "RestartJob"}]),
     {"event": "PodEvicted", "task": "worker", "jobVersion": 0}, "RestartJob", 0.0),
    ("job-level-events-list", job([{"events": ["PodEvicted", "PodFailed"], "action": "AbortJob"}]),
     {"event": "PodFailed", "task": "worker", "jobVersion": 0}, "AbortJob", 0.0),
    ("task-level-overrides-job", job([{"event": "PodFailed", "action": "RestartJob"}],
                                     [{"event": "PodFailed", "action": "RestartTask"}]),
     {"event": "PodFailed", "task": "worker", "jobVersion": 0}, "RestartTask", 0.0),
    ("other-task-falls-back-to-job", job([{"event": "PodFailed", "action": "RestartJob"}],
                                         [{"event": "PodFailed", "action": "RestartTask"}]),
     {"event": "PodFailed", "task": "ps", "jobVersion": 0}, "RestartJob", 0.0),
    ("any-event", job([{"event": "*", "action": "TerminateJob"}]),
     {"event": "Unknown", "jobVersion": 0}, "TerminateJob", 0.0),
    ("exit-code", job([{"exitCode": 137, "action": "RestartPod"}]),
     {"event": "PodFailed", "task": "worker", "exitCode": 137, "jobVersion": 0}, "RestartPod", 0.0),
    ("exit-code-mismatch", job([{"exitCode": 137, "action": "RestartPod"}]),
     {"event": "PodFailed", "task": "worker", "exitCode": 1, "jobVersion": 0}, "SyncJob", 0.0),
    ("first-match-wins", job([{"event": "PodFailed", "action": "AbortJob"},
                              {"event": "PodFailed", "action": "RestartJob"}]),
     {"event": "PodFailed", "jobVersion": 0}, "AbortJob", 0.0),
    ("pod-pending-needs-timeout", job([{"event": "PodPending", "action": "RestartJob"}]),
     {"event": "PodPending", "task": "worker", "jobVersion": 0}, "SyncJob", 0.0),
    ("pod-pending-with-timeout", job([{"event": "PodPending", "action": "RestartJob", "timeout": "10m"}]),
     {"event": "PodPending", "task": "worker", "jobVersion": 0}, "RestartJob", 600.0),
    ("timeout-is-the-delay", job([{"event": "PodFailed", "action": "RestartJob", "timeout": "1m30s"}]),
     {"event": "PodFailed", "jobVersion": 0}, "RestartJob", 90.0),
    ("task-completed", job(task_policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
     {"event": "TaskCompleted", "task": "worker", "jobVersion": 0}, "CompleteJob", 0.0),
    ("no-policy", job(), {"event": "PodFailed", "task": "worker", "jobVersion": 0}, "SyncJob", 0.0),
]


@pytest.mark.parametrize(("name", "the_job", "item", "action", "delay"), CASES, ids=[c[0] for c in CASES])
def test_resolve(name: str, the_job: dict[str, Any], item: dict[str, Any], action: str, delay: float) -> None:
    decision = pol.resolve(the_job, item)
    assert (decision.action, decision.delay) == (action, delay)


def test_resolve_carries_the_target() -> None:
    d = pol.resolve(job([{"event": "PodFailed", "action": "RestartPartition"}]),
                    {"event": "PodFailed", "task": "worker", "pod": "j-worker-1", "partition": "0", "jobVersion": 0})
    assert (d.task, d.pod, d.partition) == ("worker", "j-worker-1", "0")


# --- delayed actions -------------------------------------------------------------------------------------------------

def entry(event: str, action: str = "RestartJob", *, pod: str = "p0", uid: str = "u0", task: str = "worker",
          partition: str = "", version: int = 0, due: float = 100.0) -> dict[str, Any]:
    d = pol.Decision(action=action, delay=10, task=task, pod=pod, partition=partition, event=event)
    return pol.register([], d, {"pod": pod, "podUID": uid, "task": task, "jobVersion": version}, now=due - 10,
                        version=version)[0]


def test_register_is_idempotent_and_keeps_the_first_deadline() -> None:
    d = pol.Decision(action="RestartJob", delay=10, pod="p0", event="PodFailed")
    item = {"pod": "p0", "podUID": "u0", "jobVersion": 1}
    first = pol.register([], d, item, now=0, version=1)
    again = pol.register(first, d, item, now=5, version=1)
    assert again == first and first[0]["due"] == 10


CANCEL_ITEM = [
    ("running-cancels-pending-delay", [entry("PodPending")], {"event": "PodRunning", "pod": "p0", "podUID": "u0"}, 0),
    ("pending-again-keeps-it", [entry("PodPending")], {"event": "PodPending", "pod": "p0", "podUID": "u0"}, 1),
    ("other-pod-keeps-it", [entry("PodPending")], {"event": "PodFailed", "pod": "p1", "podUID": "u1"}, 1),
    ("running-cancels-failed-delay", [entry("PodFailed")], {"event": "PodRunning", "pod": "p0", "podUID": "u9"}, 0),
    ("running-cancels-evicted-delay", [entry("PodEvicted")], {"event": "PodRunning", "pod": "p0", "podUID": "u9"},
     0),
    ("failed-keeps-failed-delay", [entry("PodFailed")], {"event": "PodFailed", "pod": "p0", "podUID": "u0"}, 1),
]


@pytest.mark.parametrize(("name", "entries", "item", "left"), CANCEL_ITEM, ids=[c[0] for c in CANCEL_ITEM])
def test_cancel_for_item(name: str, entries: list[dict[str, Any]], item: dict[str, Any], left: int) -> None:
    assert len(pol.cancel_for_item(entries, item)) == left


def pod(name: str, uid: str, phase: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


CANCEL_PODS = [
    ("pending-pod-still-pending", [entry("PodPending")], [pod("p0", "u0", "Pending")], 1),
    ("pending-pod-now-running", [entry("PodPending")], [pod("p0", "u0", "Running")], 0),
    ("pending-pod-gone", [entry("PodPending")], [], 0),
    ("evicted-pod-replaced-and-running", [entry("PodEvicted")], [pod("p0", "u5", "Running")], 0),
    ("evicted-pod-replaced-but-pending", [entry("PodEvicted")], [pod("p0", "u5", "Pending")], 1),
    ("failed-pod-still-there", [entry("PodFailed")], [pod("p0", "u0", "Failed")], 1),
]


@pytest.mark.parametrize(("name", "entries", "pods", "left"), CANCEL_PODS, ids=[c[0] for c in CANCEL_PODS])
def test_cancel_for_pods(name: str, entries: list[dict[str, Any]], pods: list[dict[str, Any]], left: int) -> None:
    assert len(pol.cancel_for_pods(entries, pods)) == left


SCOPE = [
    ("job-scope-clears-all", pol.Decision(action="AbortJob"), 0),
    ("task-scope", pol.Decision(action="RestartTask", task="worker"), 1),
    ("pod-scope", pol.Decision(action="RestartPod", pod="p0"), 2),
    ("partition-scope", pol.Decision(action="RestartPartition", task="worker", partition="0"), 2),
    ("internal-keeps-all", pol.Decision(action="SyncJob"), 3),
]


@pytest.mark.parametrize(("name", "decision", "left"), SCOPE, ids=[c[0] for c in SCOPE])
def test_cancel_after_an_action(name: str, decision: pol.Decision, left: int) -> None:
    entries = [entry("PodFailed", pod="p0", uid="u0", partition="0"),
               entry("PodFailed", pod="p1", uid="u1", partition="1"),
               entry("PodFailed", pod="q0", uid="v0", task="ps")]
    assert len(pol.cancel_after(entries, decision)) == left


def test_due_and_stale() -> None:
    early, late = entry("PodFailed", pod="a", uid="a", due=50), entry("PodEvicted", pod="b", uid="b", due=80)
    assert pol.due([late, early], 60) == early
    assert pol.due([late, early], 40) is None
    assert pol.drop_stale([early, entry("PodFailed", pod="c", uid="c", version=2)], 2)[0]["pod"] == "c"
