"""batch.volcano.sh/v1alpha1: Job and CronJob, with their specs, policies and status.

The job reconciler, the /jobs admission webhooks and the cronjob reconciler read and write these.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from lahar.kube.models._base import LEFT_TO_RIGHT, Bool, Int, Kind, ObjectMeta, VolcanoModel
from lahar.kube.models.bus import Action, Event
from lahar.kube.models.topology import NetworkTopologySpec

__all__ = [
    "ConcurrencyPolicy",
    "CronJob",
    "CronJobSpec",
    "CronJobStatus",
    "DependsOn",
    "Iteration",
    "Job",
    "JobCondition",
    "JobEvent",
    "JobPhase",
    "JobSpec",
    "JobState",
    "JobStatus",
    "JobTemplateSpec",
    "LifecyclePolicy",
    "NumaPolicy",
    "PartitionPolicy",
    "TaskSpec",
    "TaskState",
    "VolumeSpec",
]

GROUP_VERSION = "batch.volcano.sh/v1alpha1"


class JobPhase(enum.StrEnum):
    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


class JobEvent(enum.StrEnum):
    """Reasons of the Kubernetes Events recorded on a Job."""

    COMMAND_ISSUED = "CommandIssued"
    PLUGIN_ERROR = "PluginError"
    PVC_ERROR = "PVCError"
    POD_GROUP_ERROR = "PodGroupError"
    EXECUTE_ACTION = "ExecuteAction"
    JOB_STATUS_ERROR = "JobStatusError"
    POD_GROUP_PENDING = "PodGroupPending"


class NumaPolicy(enum.StrEnum):
    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class Iteration(enum.StrEnum):
    ANY = "any"
    ALL = "all"


class ConcurrencyPolicy(enum.StrEnum):
    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


_Action = Annotated[Action | str, LEFT_TO_RIGHT]
_Event = Annotated[Event | str, LEFT_TO_RIGHT]
_Phase = Annotated[JobPhase | str, LEFT_TO_RIGHT]


class VolumeSpec(VolcanoModel):
    mount_path: str | None = None
    volume_claim_name: str | None = None
    volume_claim: dict[str, Any] | None = None  # corev1.PersistentVolumeClaimSpec


class LifecyclePolicy(VolcanoModel):
    """`event`/`events` or `exitCode` → `action`, after an optional `timeout` (a Go duration string)."""

    action: _Action | None = None
    event: _Event | None = None
    events: list[_Event] | None = None
    exit_code: Int | None = None
    timeout: str | None = None


class DependsOn(VolcanoModel):
    name: list[str] | None = None
    iteration: Annotated[Iteration | str, LEFT_TO_RIGHT] | None = None


class PartitionPolicy(VolcanoModel):
    total_partitions: Int | None = None
    partition_size: Int | None = None
    network_topology: NetworkTopologySpec | None = None
    min_partitions: Int | None = None


class TaskSpec(VolcanoModel):
    name: str | None = None
    replicas: Int | None = None
    min_available: Int | None = None
    template: dict[str, Any] | None = None  # corev1.PodTemplateSpec
    policies: list[LifecyclePolicy] | None = None
    topology_policy: Annotated[NumaPolicy | str, LEFT_TO_RIGHT] | None = None
    max_retry: Int | None = None
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class JobSpec(VolcanoModel):
    scheduler_name: str | None = None
    min_available: Int | None = None
    volumes: list[VolumeSpec] | None = None
    tasks: list[TaskSpec] | None = None
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, list[str] | None] | None = None
    running_estimate: str | None = None
    queue: str | None = None
    max_retry: Int | None = None
    ttl_seconds_after_finished: Int | None = None
    priority_class_name: str | None = None
    min_success: Int | None = None
    network_topology: NetworkTopologySpec | None = None


class JobState(VolcanoModel):
    phase: _Phase | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class TaskState(VolcanoModel):
    phase: dict[str, Int] | None = None  # PodPhase -> count


class JobCondition(VolcanoModel):
    status: _Phase | None = None
    last_transition_time: str | None = None


class JobStatus(VolcanoModel):
    state: JobState | None = None
    min_available: Int | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: Int | None = None
    running: Int | None = None
    succeeded: Int | None = None
    failed: Int | None = None
    terminating: Int | None = None
    unknown: Int | None = None
    version: Int | None = None
    retry_count: Int | None = None
    running_duration: str | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None


class Job(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "Job"

    spec: JobSpec | None = None
    status: JobStatus | None = None


class JobTemplateSpec(VolcanoModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(VolcanoModel):
    schedule: str | None = None
    time_zone: str | None = None
    starting_deadline_seconds: Int | None = None
    concurrency_policy: Annotated[ConcurrencyPolicy | str, LEFT_TO_RIGHT] | None = None
    suspend: Bool | None = None
    job_template: JobTemplateSpec | None = None
    successful_jobs_history_limit: Int | None = None
    failed_jobs_history_limit: Int | None = None


class CronJobStatus(VolcanoModel):
    active: list[dict[str, Any]] | None = None  # corev1.ObjectReference
    last_schedule_time: str | None = None
    last_successful_time: str | None = None


class CronJob(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "CronJob"

    spec: CronJobSpec | None = None
    status: CronJobStatus | None = None
