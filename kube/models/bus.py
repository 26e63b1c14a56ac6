"""bus.volcano.sh/v1alpha1: Command, and the Event / Action vocabulary of job and queue lifecycles.

Users (vcctl) create Commands; the job and queue controllers consume and delete them; policies name events.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from lahar.kube.models._base import LEFT_TO_RIGHT, Kind

__all__ = ["Action", "Command", "Event"]

GROUP_VERSION = "bus.volcano.sh/v1alpha1"


class Event(enum.StrEnum):
    """What happened to a job (`pkg/apis/bus/v1alpha1/events.go`)."""

    ANY = "*"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    POD_PENDING = "PodPending"
    POD_RUNNING = "PodRunning"
    UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    # internal
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    JOB_UPDATED = "JobUpdated"


class Action(enum.StrEnum):
    """What a controller does about it (`pkg/apis/bus/v1alpha1/actions.go`)."""

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    RESTART_PARTITION = "RestartPartition"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    # internal
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"
    SYNC_QUEUE = "SyncQueue"
    OPEN_QUEUE = "OpenQueue"
    CLOSE_QUEUE = "CloseQueue"


class Command(Kind):
    """`{action, target: OwnerReference, reason, message}` at the top level (no spec)."""

    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "Command"

    action: Annotated[Action | str, LEFT_TO_RIGHT] | None = None
    target: dict[str, Any] | None = None  # metav1.OwnerReference
    reason: str | None = None
    message: str | None = None
