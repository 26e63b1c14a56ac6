"""The Job state machine as data: every phase × action → operation and status change (shapes of Volcano's
pkg/controllers/job/state/*_test.go, in our own words), then the UpdateStatus rules on pod counts."""

from __future__ import annotations

import pytest

from lahar.controllers import _job_state as st
from lahar.controllers._job_state import RETAIN_NONE, RETAIN_SOFT, Counts, Facts, Op

USER_ACTIONS = ["AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                "CompleteJob", "ResumeJob", "SyncJob", "EnqueueJob"]
KILL_TARGET = {"RestartTask", "RestartPod", "RestartPartition"}


def _expected(phase: str, action: str) -> tuple[Op, frozenset[str] | None, str | None, int]:
    """(op, retain (None: not a KillJob), phase set outright, retry increment) per spec/volcano.md §2.4."""
    if phase in ("Pending", "Running", ""):
        if action == "RestartJob":
            return Op.KILL_JOB, RETAIN_NONE, "Restarting", 1
        if action in KILL_TARGET:
            return Op.KILL_TARGET, None, "Restarting", 1
        if action in ("AbortJob", "CompleteJob", "TerminateJob"):
            return Op.KILL_JOB, RETAIN_SOFT, {"AbortJob": "Aborting", "CompleteJob": "Completing",
                                              "TerminateJob": "Terminating"}[action], 0
        return Op.SYNC, None, None, 0
    if phase == "Restarting":
        if action in ("SyncJob", "EnqueueJob"):
            return Op.SYNC, None, None, 0
        if action in KILL_TARGET:
            return Op.KILL_TARGET, None, None, 0
        return Op.KILL_JOB, RETAIN_NONE, None, 0
    if phase in ("Aborting", "Aborted"):
        if action == "ResumeJob":
            return Op.KILL_JOB, RETAIN_SOFT, "Restarting", 0  # volcano#3067 fixed: no retry consumed
        return Op.KILL_JOB, RETAIN_SOFT, None, 0
    return Op.KILL_JOB, RETAIN_SOFT, None, 0  # Completing, Terminating, Completed, Failed, Terminated


PHASES = ["", "Pending", "Running", "Restarting", "Aborting", "Aborted", "Completing", "Terminating", "Completed",
          "Failed", "Terminated"]
MATRIX = [(ph, a) for ph in PHASES for a in USER_ACTIONS]


@pytest.mark.parametrize(("phase", "action"), MATRIX, ids=[f"{p or 'empty'}-{a}" for p, a in MATRIX])
def test_every_phase_and_action(phase: str, action: str) -> None:
    step = st.state_for(phase).execute(action)
    op, retain, new_phase, retry = _expected(phase, action)
    assert step.op is op
    if retain is not None:
        assert step.retain == retain
    assert step.phase == new_phase
    assert step.retry == retry


FACTS = Facts(total_replicas=4, min_available=2, max_retry=3, status_min_available=2,
              task_min_available=(("a", 2), ("b", None)))


@pytest.mark.parametrize(
    ("phase", "action", "retry", "counts", "facts", "want"),
    [
        ("Pending", "SyncJob", 0, Counts(pending=4), FACTS, ("Pending", 0)),
        ("Pending", "SyncJob", 0, Counts(running=1, pending=3), FACTS, ("Pending", 0)),
        ("Pending", "SyncJob", 0, Counts(running=1, failed=1, pending=2), FACTS, ("Running", 0)),
        ("Pending", "RestartJob", 0, Counts(terminating=4), FACTS, ("Restarting", 1)),
        ("Pending", "AbortJob", 0, Counts(terminating=4), FACTS, ("Aborting", 0)),
        ("Running", "SyncJob", 0, Counts(running=4), FACTS, ("Running", 0)),
        ("Running", "SyncJob", 0, Counts(succeeded=4, task_succeeded={"a": 2, "b": 2}), FACTS, ("Completed", 0)),
        ("Running", "SyncJob", 0, Counts(succeeded=1, failed=3, task_succeeded={"a": 1}), FACTS, ("Failed", 0)),
        ("Running", "SyncJob", 0, Counts(succeeded=3, failed=1, task_succeeded={"a": 1, "b": 2}), FACTS,
         ("Failed", 0)),  # task a has an explicit minAvailable it did not reach
        ("Running", "SyncJob", 0, Counts(succeeded=2, failed=2, task_succeeded={"a": 2}), FACTS, ("Completed", 0)),
        ("Running", "SyncJob", 0, Counts(succeeded=1, running=3),
         Facts(total_replicas=4, min_available=2, min_success=1), ("Completed", 0)),
        ("Running", "SyncJob", 0, Counts(succeeded=1, failed=3),
         Facts(total_replicas=4, min_available=1, min_success=2), ("Failed", 0)),
        ("Running", "SyncJob", 0, Counts(), Facts(total_replicas=0, min_available=0), ("Running", 0)),
        ("Running", "RestartJob", 1, Counts(terminating=4), FACTS, ("Restarting", 2)),
        ("Running", "RestartPod", 0, Counts(running=3, terminating=1), FACTS, ("Restarting", 1)),
        ("Running", "CompleteJob", 0, Counts(succeeded=1, terminating=3), FACTS, ("Completing", 0)),
        ("Running", "TerminateJob", 0, Counts(terminating=4), FACTS, ("Terminating", 0)),
        ("Restarting", "SyncJob", 1, Counts(terminating=4), FACTS, ("Restarting", 1)),
        ("Restarting", "SyncJob", 1, Counts(terminating=2), FACTS, ("Pending", 1)),
        ("Restarting", "SyncJob", 3, Counts(), FACTS, ("Failed", 3)),
        ("Restarting", "RestartJob", 2, Counts(terminating=1), FACTS, ("Pending", 2)),
        ("Restarting", "SyncJob", 0, Counts(), Facts(total_replicas=1, min_available=1, max_retry=0),
         ("Pending", 0)),  # resumed with maxRetry 0: no retry was used
        ("Restarting", "SyncJob", 1, Counts(), Facts(total_replicas=1, min_available=1, max_retry=0), ("Failed", 1)),
        ("Aborting", "SyncJob", 0, Counts(terminating=1), FACTS, ("Aborting", 0)),
        ("Aborting", "SyncJob", 0, Counts(succeeded=2, failed=1), FACTS, ("Aborted", 0)),
        ("Aborting", "ResumeJob", 1, Counts(terminating=2), FACTS, ("Restarting", 1)),
        ("Aborted", "ResumeJob", 2, Counts(), FACTS, ("Restarting", 2)),
        ("Aborted", "SyncJob", 0, Counts(), FACTS, ("Aborted", 0)),
        ("Completing", "SyncJob", 0, Counts(running=1), FACTS, ("Completing", 0)),
        ("Completing", "SyncJob", 0, Counts(succeeded=1), FACTS, ("Completed", 0)),
        ("Terminating", "SyncJob", 0, Counts(pending=1), FACTS, ("Terminating", 0)),
        ("Terminating", "AbortJob", 0, Counts(failed=4), FACTS, ("Terminated", 0)),
        ("Completed", "RestartJob", 0, Counts(), FACTS, ("Completed", 0)),
        ("Failed", "ResumeJob", 0, Counts(), FACTS, ("Failed", 0)),
        ("Terminated", "SyncJob", 0, Counts(), FACTS, ("Terminated", 0)),
    ],
    ids=lambda v: None,
)
def test_next_status(phase: str, action: str, retry: int, counts: Counts, facts: Facts,
                     want: tuple[str, int]) -> None:
    step = st.state_for(phase).execute(action)
    assert st.next_status(step, phase=phase, retry_count=retry, counts=counts, facts=facts) == want


def test_resume_never_consumes_a_retry() -> None:
    for phase in ("Aborting", "Aborted"):
        step = st.state_for(phase).execute("ResumeJob")
        assert step.retry == 0 and step.phase == "Restarting"


def test_unknown_phase_is_pending() -> None:
    assert isinstance(st.state_for("Bogus"), st.PendingState)
    assert isinstance(st.state_for(""), st.PendingState)
