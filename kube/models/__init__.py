"""Pydantic models of Volcano's API kinds (batch, scheduling, bus, topology, flow, nodeinfo).

The wire format in and out: `from_object(d)` picks the model by apiVersion/kind, `.to_dict()` gives `d` back.
Core Kubernetes types inside them (pod templates, ObjectMeta, ResourceLists, selectors) stay loose dicts.
"""

from __future__ import annotations

from typing import Any

from lahar.kube.models import labels
from lahar.kube.models._base import Kind, ObjectMeta, VolcanoModel
from lahar.kube.models.batch import (
    ConcurrencyPolicy,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    DependsOn,
    Iteration,
    Job,
    JobCondition,
    JobEvent,
    JobPhase,
    JobSpec,
    JobState,
    JobStatus,
    JobTemplateSpec,
    LifecyclePolicy,
    NumaPolicy,
    PartitionPolicy,
    TaskSpec,
    TaskState,
    VolumeSpec,
)
from lahar.kube.models.bus import Action, Command, Event
from lahar.kube.models.flow import (
    Flow,
    FlowCondition,
    FlowDependsOn,
    FlowJobStatus,
    FlowPatch,
    FlowPhase,
    FlowState,
    FlowTarget,
    FlowTaskStatus,
    HttpGet,
    JobFlow,
    JobFlowSpec,
    JobFlowStatus,
    JobRunningHistory,
    JobTemplate,
    JobTemplateStatus,
    Probe,
    RetainPolicy,
    TcpSocket,
)
from lahar.kube.models.nodeinfo import (
    CPUInfo,
    MemoryNode,
    MemoryTable,
    Numatopology,
    NumatopoSpec,
    PolicyName,
    ResourceInfo,
)
from lahar.kube.models.scheduling import (
    Affinity,
    Cluster,
    DequeueStrategy,
    Guarantee,
    NodeGroupAffinity,
    NodeGroupAntiAffinity,
    PodGroup,
    PodGroupCondition,
    PodGroupConditionDetail,
    PodGroupConditionReason,
    PodGroupConditionType,
    PodGroupPhase,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    QueueState,
    QueueStatus,
    Reservation,
    SubGroupPolicy,
)
from lahar.kube.models.topology import (
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    HyperNodeStatus,
    MemberSelector,
    MemberSpec,
    MemberType,
    NetworkTopologyMode,
    NetworkTopologySpec,
    RegexMatch,
)

__all__ = [
    "KINDS",
    "Action",
    "Affinity",
    "CPUInfo",
    "Cluster",
    "Command",
    "ConcurrencyPolicy",
    "CronJob",
    "CronJobSpec",
    "CronJobStatus",
    "DependsOn",
    "DequeueStrategy",
    "Event",
    "ExactMatch",
    "Flow",
    "FlowCondition",
    "FlowDependsOn",
    "FlowJobStatus",
    "FlowPatch",
    "FlowPhase",
    "FlowState",
    "FlowTarget",
    "FlowTaskStatus",
    "Guarantee",
    "HttpGet",
    "HyperNode",
    "HyperNodeSpec",
    "HyperNodeStatus",
    "Iteration",
    "Job",
    "JobCondition",
    "JobEvent",
    "JobFlow",
    "JobFlowSpec",
    "JobFlowStatus",
    "JobPhase",
    "JobRunningHistory",
    "JobSpec",
    "JobState",
    "JobStatus",
    "JobTemplate",
    "JobTemplateSpec",
    "JobTemplateStatus",
    "Kind",
    "LifecyclePolicy",
    "MemberSelector",
    "MemberSpec",
    "MemberType",
    "MemoryNode",
    "MemoryTable",
    "NetworkTopologyMode",
    "NetworkTopologySpec",
    "NodeGroupAffinity",
    "NodeGroupAntiAffinity",
    "NumaPolicy",
    "NumatopoSpec",
    "Numatopology",
    "ObjectMeta",
    "PartitionPolicy",
    "PodGroup",
    "PodGroupCondition",
    "PodGroupConditionDetail",
    "PodGroupConditionReason",
    "PodGroupConditionType",
    "PodGroupPhase",
    "PodGroupSpec",
    "PodGroupStatus",
    "PolicyName",
    "Probe",
    "Queue",
    "QueueSpec",
    "QueueState",
    "QueueStatus",
    "RegexMatch",
    "Reservation",
    "ResourceInfo",
    "RetainPolicy",
    "SubGroupPolicy",
    "TaskSpec",
    "TaskState",
    "TcpSocket",
    "UnknownKindError",
    "VolcanoModel",
    "VolumeSpec",
    "from_object",
    "labels",
]

_KIND_CLASSES: tuple[type[Kind], ...] = (
    Job,
    CronJob,
    Queue,
    PodGroup,
    Command,
    HyperNode,
    JobFlow,
    JobTemplate,
    Numatopology,
)

KINDS: dict[tuple[str, str], type[Kind]] = {(cls.API_VERSION, cls.KIND): cls for cls in _KIND_CLASSES}
"""(apiVersion, kind) → model class, for every Volcano kind lahar models."""


class UnknownKindError(ValueError):
    """`from_object` was given an apiVersion/kind that is not a modelled Volcano kind."""


def from_object(obj: dict[str, Any]) -> Kind:
    """Validate a wire object into the model its apiVersion/kind names."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    cls = KINDS.get(key)  # type: ignore[arg-type]
    if cls is None:
        raise UnknownKindError(f"no Volcano model for apiVersion {key[0]!r}, kind {key[1]!r}")
    return cls.model_validate(obj)
