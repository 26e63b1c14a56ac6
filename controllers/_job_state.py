"""The Job state machine (Volcano `pkg/controllers/job/state`, spec/volcano.md §2.4): one state object per phase.

`state_for(phase).execute(action)` says which primitive operation to run (SyncJob, KillJob with a retain set, or
KillTarget) and how the status changes; `next_status(step, ...)` applies that change to the pod counts observed after
the operation. Pure: the reconciler in `controllers.jobs` does the I/O around it.

Deliberate difference from Volcano (volcano#3067): ResumeJob does not consume a retry (see docs/compatibility.md).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "FINISHED",
    "RETAIN_NONE",
    "RETAIN_SOFT",
    "Counts",
    "Facts",
    "Op",
    "Rule",
    "State",
    "Step",
    "next_status",
    "state_for",
    "stores_intent",
]

RETAIN_NONE: frozenset[str] = frozenset()
RETAIN_SOFT: frozenset[str] = frozenset({"Succeeded", "Failed"})
FINISHED = frozenset({"Completed", "Failed", "Terminated"})


class Op(enum.StrEnum):
    SYNC = "SyncJob"
    KILL_JOB = "KillJob"
    KILL_TARGET = "KillTarget"


class Rule(enum.StrEnum):
    """Which UpdateStatusFn runs on the counts after the operation."""

    NONE = "none"
    PENDING = "pending"
    RUNNING = "running"
    RESTARTING = "restarting"
    ABORTING = "aborting"
    COMPLETING = "completing"
    TERMINATING = "terminating"


@dataclass(frozen=True)
class Counts:
    """Pods of the job by phase after the operation (`terminating` = deletion requested)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    task_succeeded: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """What the spec says: Σ replicas, minAvailable (spec and status), minSuccess, each task's explicit minAvailable."""

    total_replicas: int
    min_available: int
    max_retry: int = 3
    status_min_available: int | None = None
    min_success: int | None = None
    task_min_available: tuple[tuple[str, int | None], ...] = ()

    @property
    def total_task_min_available(self) -> int:
        return sum(m for _, m in self.task_min_available if m is not None)


@dataclass(frozen=True)
class Step:
    """The operation to run and the status change: `phase` set outright, `retry` added to retryCount, then `rule`."""

    op: Op
    retain: frozenset[str] = RETAIN_NONE
    phase: str | None = None
    retry: int = 0
    rule: Rule = Rule.NONE


class State:
    phase = "Pending"

    def execute(self, action: str) -> Step:  # pragma: no cover - every phase overrides
        raise NotImplementedError


def _kill_or_target(action: str) -> Step | None:
    """The four actions Pending and Running share."""
    if action == "RestartJob":
        return Step(Op.KILL_JOB, RETAIN_NONE, phase="Restarting", retry=1)
    if action in ("RestartTask", "RestartPod", "RestartPartition"):
        return Step(Op.KILL_TARGET, phase="Restarting", retry=1)
    if action == "AbortJob":
        return Step(Op.KILL_JOB, RETAIN_SOFT, phase="Aborting")
    if action == "CompleteJob":
        return Step(Op.KILL_JOB, RETAIN_SOFT, phase="Completing")
    if action == "TerminateJob":
        return Step(Op.KILL_JOB, RETAIN_SOFT, phase="Terminating")
    return None


class PendingState(State):
    phase = "Pending"

    def execute(self, action: str) -> Step:
        return _kill_or_target(action) or Step(Op.SYNC, rule=Rule.PENDING)


class RunningState(State):
    phase = "Running"

    def execute(self, action: str) -> Step:
        return _kill_or_target(action) or Step(Op.SYNC, rule=Rule.RUNNING)


class RestartingState(State):
    phase = "Restarting"

    def execute(self, action: str) -> Step:
        if action in ("SyncJob", "EnqueueJob"):
            return Step(Op.SYNC, rule=Rule.RESTARTING)
        if action in ("RestartTask", "RestartPod", "RestartPartition"):
            return Step(Op.KILL_TARGET, rule=Rule.RESTARTING)
        return Step(Op.KILL_JOB, RETAIN_NONE, rule=Rule.RESTARTING)


class AbortingState(State):
    phase = "Aborting"

    def execute(self, action: str) -> Step:
        if action == "ResumeJob":
            return Step(Op.KILL_JOB, RETAIN_SOFT, phase="Restarting")  # volcano#3067: no retry consumed
        return Step(Op.KILL_JOB, RETAIN_SOFT, rule=Rule.ABORTING)


class AbortedState(State):
    phase = "Aborted"

    def execute(self, action: str) -> Step:
        if action == "ResumeJob":
            return Step(Op.KILL_JOB, RETAIN_SOFT, phase="Restarting")  # volcano#3067: no retry consumed
        return Step(Op.KILL_JOB, RETAIN_SOFT)


class CompletingState(State):
    phase = "Completing"

    def execute(self, action: str) -> Step:
        return Step(Op.KILL_JOB, RETAIN_SOFT, rule=Rule.COMPLETING)


class TerminatingState(State):
    phase = "Terminating"

    def execute(self, action: str) -> Step:
        return Step(Op.KILL_JOB, RETAIN_SOFT, rule=Rule.TERMINATING)


class FinishedState(State):
    """Completed, Failed, Terminated: policies no longer apply; leftover pods are cleaned up softly."""

    phase = "Completed"

    def execute(self, action: str) -> Step:
        return Step(Op.KILL_JOB, RETAIN_SOFT)


_STATES: dict[str, State] = {
    "Pending": PendingState(),
    "Running": RunningState(),
    "Restarting": RestartingState(),
    "Aborting": AbortingState(),
    "Aborted": AbortedState(),
    "Completing": CompletingState(),
    "Terminating": TerminatingState(),
    "Completed": FinishedState(),
    "Failed": FinishedState(),
    "Terminated": FinishedState(),
}


def stores_intent(step: Step, phase: str) -> bool:
    """Whether `step` changes the phase with a kill (RestartJob, AbortJob, ResumeJob, ...): then its new phase,
    retryCount and version are written before any pod is deleted, so a process dying mid-kill leaves the Job in the
    phase whose state finishes the kill (Restarting, Aborting, ...), never in the old phase with its pods gone."""
    return step.op is not Op.SYNC and step.phase is not None and step.phase != (phase or "Pending")


def state_for(phase: str) -> State:
    """NewState: the state object of `phase`; unknown or empty phases are Pending."""
    return _STATES.get(phase or "Pending", _STATES["Pending"])


def _alive(c: Counts) -> bool:
    return bool(c.terminating or c.pending or c.running)


def _running_rule(c: Counts, f: Facts) -> str | None:
    if f.total_replicas == 0:
        return None  # scaled down to zero: keep the phase
    if f.min_success is not None and c.succeeded >= f.min_success:
        return "Completed"
    if c.succeeded + c.failed == f.total_replicas:
        if f.min_available >= f.total_task_min_available:
            for name, task_min in f.task_min_available:
                if task_min is not None and name in c.task_succeeded and c.task_succeeded[name] < task_min:
                    return "Failed"
        if f.min_success is not None and c.succeeded < f.min_success:
            return "Failed"
        return "Completed" if c.succeeded >= f.min_available else "Failed"
    return None


def _restarting_rule(c: Counts, f: Facts, retry_count: int) -> str | None:
    # `retry_count > 0`: only a restart can exhaust the budget; a resumed job (retryCount untouched, #3067) with
    # maxRetry 0 goes on to Pending instead of Failed.
    if retry_count >= f.max_retry and retry_count > 0:
        return "Failed"
    status_min = f.status_min_available if f.status_min_available is not None else f.min_available
    if f.total_replicas - c.terminating >= status_min:
        return "Pending"
    return None


def next_status(step: Step, *, phase: str, retry_count: int, counts: Counts, facts: Facts) -> tuple[str, int]:
    """(phase, retryCount) after `step`, given the pod counts observed once its operation ran."""
    phase = phase or "Pending"
    retry_count += step.retry
    if step.phase is not None:
        phase = step.phase
    new: str | None = None
    if step.rule is Rule.PENDING:
        if facts.min_available <= counts.running + counts.succeeded + counts.failed:
            new = "Running"
    elif step.rule is Rule.RUNNING:
        new = _running_rule(counts, facts)
    elif step.rule is Rule.RESTARTING:
        new = _restarting_rule(counts, facts, retry_count)
    elif step.rule is Rule.ABORTING:
        new = None if _alive(counts) else "Aborted"
    elif step.rule is Rule.COMPLETING:
        new = None if _alive(counts) else "Completed"
    elif step.rule is Rule.TERMINATING:
        new = None if _alive(counts) else "Terminated"
    return (new or phase), retry_count
