"""scheduling.volcano.sh/v1beta1: Queue and PodGroup, the scheduler's units of fairness and of gangs.

The scheduler reads both and writes their status; the job reconciler creates one PodGroup per Job.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from pydantic import Field

from lahar.kube.models._base import LEFT_TO_RIGHT, Bool, Int, Kind, ResourceList, VolcanoModel
from lahar.kube.models.topology import NetworkTopologySpec

__all__ = [
    "Affinity",
    "Cluster",
    "DequeueStrategy",
    "Guarantee",
    "NodeGroupAffinity",
    "NodeGroupAntiAffinity",
    "PodGroup",
    "PodGroupCondition",
    "PodGroupConditionDetail",
    "PodGroupConditionReason",
    "PodGroupConditionType",
    "PodGroupPhase",
    "PodGroupSpec",
    "PodGroupStatus",
    "Queue",
    "QueueSpec",
    "QueueState",
    "QueueStatus",
    "Reservation",
    "SubGroupPolicy",
]

GROUP_VERSION = "scheduling.volcano.sh/v1beta1"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"


class QueueState(enum.StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class DequeueStrategy(enum.StrEnum):
    FIFO = "fifo"
    TRAVERSE = "traverse"


class PodGroupPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


class PodGroupConditionType(enum.StrEnum):
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULED = "Scheduled"


class PodGroupConditionReason(enum.StrEnum):
    POD_FAILED = "PodFailed"
    POD_DELETED = "PodDeleted"
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    NOT_ENOUGH_TASKS = "NotEnoughTasks"
    NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


class PodGroupConditionDetail(enum.StrEnum):
    READY = "pod group is ready"
    NOT_READY = "pod group is not ready"


# --- Queue ---------------------------------------------------------------------------------------------------


class Guarantee(VolcanoModel):
    resource: ResourceList | None = None


class Reservation(VolcanoModel):
    nodes: list[str] | None = None
    resource: ResourceList | None = None


class Cluster(VolcanoModel):
    """An entry of `spec.extendClusters`."""

    name: str | None = None
    weight: Int | None = None
    capacity: ResourceList | None = None


class NodeGroupAffinity(VolcanoModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class NodeGroupAntiAffinity(VolcanoModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class Affinity(VolcanoModel):
    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAntiAffinity | None = None


class QueueSpec(VolcanoModel):
    weight: Int | None = None
    capability: ResourceList | None = None
    reclaimable: Bool | None = None
    extend_clusters: list[Cluster] | None = None
    guarantee: Guarantee | None = None
    affinity: Affinity | None = None
    type: str | None = None
    parent: str | None = None
    deserved: ResourceList | None = None
    priority: Int | None = None
    dequeue_strategy: Annotated[DequeueStrategy | str, LEFT_TO_RIGHT] | None = None


class QueueStatus(VolcanoModel):
    state: Annotated[QueueState | str, LEFT_TO_RIGHT] | None = None
    unknown: Int | None = None
    pending: Int | None = None
    running: Int | None = None
    inqueue: Int | None = None
    completed: Int | None = None
    reservation: Reservation | None = None
    allocated: ResourceList | None = None


class Queue(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "Queue"

    spec: QueueSpec | None = None
    status: QueueStatus | None = None


# --- PodGroup ------------------------------------------------------------------------------------------------


class SubGroupPolicy(VolcanoModel):
    name: str | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: Int | None = None
    min_sub_groups: Int | None = None
    label_selector: dict[str, Any] | None = None  # metav1.LabelSelector
    match_label_keys: list[str] | None = None


class PodGroupSpec(VolcanoModel):
    min_member: Int | None = None
    min_task_member: dict[str, Int] | None = None
    queue: str | None = None
    priority_class_name: str | None = None
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] | None = None


class PodGroupCondition(VolcanoModel):
    type: Annotated[PodGroupConditionType | str, LEFT_TO_RIGHT] | None = None
    status: str | None = None  # corev1.ConditionStatus: "True" | "False" | "Unknown"
    transition_id: str | None = Field(default=None, alias="transitionID")
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(VolcanoModel):
    phase: Annotated[PodGroupPhase | str, LEFT_TO_RIGHT] | None = None
    conditions: list[PodGroupCondition] | None = None
    running: Int | None = None
    succeeded: Int | None = None
    failed: Int | None = None


class PodGroup(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "PodGroup"

    spec: PodGroupSpec | None = None
    status: PodGroupStatus | None = None
