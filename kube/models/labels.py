"""Annotation and label keys Volcano puts on pods, jobs, podgroups, queues and nodes (spec §1.7).

Shared by the job reconciler (which stamps them), the webhooks and the scheduler (which read them).
"""

from __future__ import annotations

__all__ = [
    "BURST_NAME_KEY",
    "CONTROLLER_OUT_OF_SYNC_KEY",
    "COOLDOWN_TIME_KEY",
    "CREATED_BY_JOB_FLOW_KEY",
    "CREATED_BY_JOB_TEMPLATE_KEY",
    "CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION",
    "DEFAULT_TASK_SPEC",
    "FORWARD_CLUSTER_KEY",
    "GROUP_MIN_MEMBER_ANNOTATION",
    "GROUP_MIN_RESOURCES_ANNOTATION",
    "GROUP_NAME_ANNOTATION",
    "HIERARCHY_ANNOTATION",
    "HIERARCHY_WEIGHTS_ANNOTATION",
    "JDB_MAX_UNAVAILABLE_KEY",
    "JDB_MIN_AVAILABLE_KEY",
    "JOB_FORWARDING_KEY",
    "JOB_NAMESPACE_KEY",
    "JOB_NAME_KEY",
    "JOB_RETRY_COUNT_KEY",
    "JOB_TYPE_KEY",
    "JOB_VERSION_KEY",
    "NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION",
    "NETWORK_TOPOLOGY_MODE_ANNOTATION",
    "NODE_GROUP_LABEL_KEY",
    "NODE_GROUP_RESOURCE_LIMITS_ANNOTATION",
    "NODE_VGPU_REGISTER_KEY",
    "NOUSE_GPU_TYPE_KEY",
    "NUMA_POLICY_KEY",
    "PARTITION_ID_KEY",
    "PODGROUP_NAME_PREFIX",
    "POD_TEMPLATE_KEY",
    "PREEMPTABLE_KEY",
    "QOS_LEVEL_KEY",
    "QUEUE_ALLOCATION_GATE_KEY",
    "QUEUE_CLOSED_BY_PARENT_ANNOTATION",
    "QUEUE_NAME_ANNOTATION",
    "QUEUE_NAME_KEY",
    "RESERVATION_NAME_KEY",
    "RESOURCE_GROUP_KEY",
    "RESOURCE_STRATEGY_SCORING_TYPE_KEY",
    "RESOURCE_STRATEGY_WEIGHT_KEY",
    "REVOCABLE_ZONE_KEY",
    "SILO_RESOURCE_KEY",
    "SLA_WAITING_TIME_KEY",
    "TASK_INDEX_KEY",
    "TASK_SPEC_KEY",
    "TASK_TOPOLOGY_AFFINITY_KEY",
    "TASK_TOPOLOGY_ANTI_AFFINITY_KEY",
    "TASK_TOPOLOGY_ORDER_KEY",
    "TOPOLOGY_DECISION_ANNOTATION",
    "USE_GPU_TYPE_KEY",
    "VGPU_MODE_KEY",
    "VGPU_NOUSE_GPU_UUID_KEY",
    "VGPU_PODGROUP_POLICY_KEY",
    "VGPU_USE_GPU_UUID_KEY",
    "VOLCANO_GROUP_NAME_ANNOTATION",
]

# --- batch (pkg/apis/batch/v1alpha1/labels.go): stamped on every pod of a Job -----------------------------------
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_VERSION_KEY = "volcano.sh/job-version"
JOB_TYPE_KEY = "volcano.sh/job-type"
JOB_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
POD_TEMPLATE_KEY = "volcano.sh/template-uid"  # value `<job>-<task>`
RESERVATION_NAME_KEY = "volcano.sh/reservation-name"
JOB_FORWARDING_KEY = "volcano.sh/job-forwarding"
FORWARD_CLUSTER_KEY = "volcano.sh/forward-cluster"
BURST_NAME_KEY = "volcano.sh/burst-name"
SILO_RESOURCE_KEY = "volcano.sh/silo-resource"
CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION = "volcano.sh/cronjob-scheduled-timestamp"
PARTITION_ID_KEY = "volcano.sh/partition-id"
CONTROLLER_OUT_OF_SYNC_KEY = "volcano.sh/controller-out-of-sync"
DEFAULT_TASK_SPEC = "default"
PODGROUP_NAME_PREFIX = "podgroup-"

# --- scheduling (pkg/apis/scheduling/v1beta1/labels.go) ------------------------------------------------------
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"  # `<job>-<jobUID>` on a Job's pods
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.volcano.sh/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
GROUP_MIN_RESOURCES_ANNOTATION = "scheduling.volcano.sh/group-min-resources"
QUEUE_ALLOCATION_GATE_KEY = "scheduling.volcano.sh/queue-allocation-gate"
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"  # e.g. root/sci/dev
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"  # e.g. 1/2/8
QUEUE_CLOSED_BY_PARENT_ANNOTATION = "volcano.sh/closed-by-parent"
PREEMPTABLE_KEY = "volcano.sh/preemptable"  # annotation first, then label; default true
COOLDOWN_TIME_KEY = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE_KEY = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY = "volcano.sh/jdb-max-unavailable"
NUMA_POLICY_KEY = "volcano.sh/numa-topology-policy"
TOPOLOGY_DECISION_ANNOTATION = "volcano.sh/topology-decision"
NODE_GROUP_LABEL_KEY = "volcano.sh/nodegroup-name"
NODE_GROUP_RESOURCE_LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
SLA_WAITING_TIME_KEY = "volcano.sh/sla-waiting-time"
QOS_LEVEL_KEY = "volcano.sh/qos-level"
RESOURCE_GROUP_KEY = "volcano.sh/resource-group"
TASK_TOPOLOGY_AFFINITY_KEY = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_ORDER_KEY = "volcano.sh/task-topology-task-order"
RESOURCE_STRATEGY_SCORING_TYPE_KEY = "volcano.sh/resource-strategy-scoring-type"
RESOURCE_STRATEGY_WEIGHT_KEY = "volcano.sh/resource-strategy-weight"

# --- topology (pkg/apis/topology/v1alpha1/labels.go) ---------------------------------------------------------
NETWORK_TOPOLOGY_MODE_ANNOTATION = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"

# --- flow --------------------------------------------------------------------------------------------------------
CREATED_BY_JOB_TEMPLATE_KEY = "volcano.sh/createdByJobTemplate"
CREATED_BY_JOB_FLOW_KEY = "volcano.sh/createdByJobFlow"

# --- devices -----------------------------------------------------------------------------------------------------
VGPU_MODE_KEY = "volcano.sh/vgpu-mode"
VGPU_PODGROUP_POLICY_KEY = "volcano.sh/vgpu-podgroup-policy"
USE_GPU_TYPE_KEY = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE_KEY = "nvidia.com/nouse-gputype"
VGPU_USE_GPU_UUID_KEY = "volcano.sh/vgpu-use-gpuuuid"
VGPU_NOUSE_GPU_UUID_KEY = "volcano.sh/vgpu-nouse-gpuuuid"
NODE_VGPU_REGISTER_KEY = "volcano.sh/node-vgpu-register"
