"""flow.volcano.sh/v1alpha1: JobFlow (a DAG of jobs) and JobTemplate (a named JobSpec it instantiates).

The jobflow reconciler creates `<jobflow>-<flow>` Jobs from templates as their dependencies complete.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from pydantic import Field

from lahar.kube.models._base import LEFT_TO_RIGHT, Int, Kind, VolcanoModel
from lahar.kube.models.batch import JobPhase, JobSpec, TaskState

__all__ = [
    "Flow",
    "FlowCondition",
    "FlowDependsOn",
    "FlowJobStatus",
    "FlowPatch",
    "FlowPhase",
    "FlowState",
    "FlowTarget",
    "FlowTaskStatus",
    "HttpGet",
    "JobFlow",
    "JobFlowSpec",
    "JobFlowStatus",
    "JobRunningHistory",
    "JobTemplate",
    "JobTemplateStatus",
    "Probe",
    "RetainPolicy",
    "TcpSocket",
]

GROUP_VERSION = "flow.volcano.sh/v1alpha1"


class RetainPolicy(enum.StrEnum):
    RETAIN = "retain"
    DELETE = "delete"


class FlowPhase(enum.StrEnum):
    SUCCEED = "Succeed"
    TERMINATING = "Terminating"
    FAILED = "Failed"
    RUNNING = "Running"
    PENDING = "Pending"


_JobPhase = Annotated[JobPhase | str, LEFT_TO_RIGHT]


class HttpGet(VolcanoModel):
    task_name: str | None = None
    path: str | None = None
    port: Int | None = None
    http_header: dict[str, Any] | None = None  # corev1.HTTPHeader


class TcpSocket(VolcanoModel):
    task_name: str | None = None
    port: Int | None = None


class FlowTaskStatus(VolcanoModel):
    task_name: str | None = None
    phase: str | None = None


class Probe(VolcanoModel):
    http_get_list: list[HttpGet] | None = None
    tcp_socket_list: list[TcpSocket] | None = None
    task_status_list: list[FlowTaskStatus] | None = None


class FlowTarget(VolcanoModel):
    name: str | None = None
    phase: _JobPhase | None = None


class FlowDependsOn(VolcanoModel):
    targets: list[str] | None = None
    probe: Probe | None = None
    targets_with_status: list[FlowTarget] | None = None


class FlowPatch(VolcanoModel):
    job_spec: JobSpec | None = None


class Flow(VolcanoModel):
    name: str | None = None
    depends_on: FlowDependsOn | None = None
    patch: FlowPatch | None = None


class JobFlowSpec(VolcanoModel):
    flows: list[Flow] | None = None
    job_retain_policy: Annotated[RetainPolicy | str, LEFT_TO_RIGHT] | None = None


class JobRunningHistory(VolcanoModel):
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    state: _JobPhase | None = None


class FlowJobStatus(VolcanoModel):
    name: str | None = None
    state: _JobPhase | None = None
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    restart_count: Int | None = None
    running_histories: list[JobRunningHistory] | None = None


class FlowCondition(VolcanoModel):
    phase: _JobPhase | None = None
    create_timestamp: str | None = Field(default=None, alias="createTime")
    running_duration: str | None = None
    task_status_count: dict[str, TaskState] | None = None


class FlowState(VolcanoModel):
    phase: Annotated[FlowPhase | str, LEFT_TO_RIGHT] | None = None


class JobFlowStatus(VolcanoModel):
    pending_jobs: list[str] | None = None
    running_jobs: list[str] | None = None
    failed_jobs: list[str] | None = None
    completed_jobs: list[str] | None = None
    terminated_jobs: list[str] | None = None
    un_know_jobs: list[str] | None = None
    job_status_list: list[FlowJobStatus] | None = None
    conditions: dict[str, FlowCondition] | None = None
    state: FlowState | None = None
    flow_status_map: dict[str, _JobPhase] | None = None


class JobFlow(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "JobFlow"

    spec: JobFlowSpec | None = None
    status: JobFlowStatus | None = None


class JobTemplateStatus(VolcanoModel):
    job_depends_on_list: list[str] | None = None


class JobTemplate(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "JobTemplate"

    spec: JobSpec | None = None
    status: JobTemplateStatus | None = None
