"""Plain workloads in devcluster: minimal Deployment, ReplicaSet, StatefulSet and batch/v1 Job controllers (and a
tiny default-scheduler), the part of kube-controller-manager and kube-scheduler a single-machine cluster needs.

Beside the simulated kubelets in `devcluster.runtime.Cluster`; talks only through the `kube.client.ClusterClient`
port (a `kube.apiserver.memory.MemoryClient` over the server's store). The decisions are pure functions over dicts:
`replicaset_plan`, `deployment_plan`, `statefulset_plan`, `job_plan` (owner + what it owns → a `Plan`: objects to
create, names to delete, scale changes, the new status) and `choose_node` (the default-scheduler's placement).
`WorkloadControllers` is the shell: `reconcile(kind, namespace, name)` re-reads the world and applies one plan
(level-based, idempotent); `sync()` runs every key once (tests); `start()`/`stop()` drive it from store watches in
background threads, with a periodic resync.

One module per controller: `replicasets`, `deployments`, `statefulsets`, `jobs`, `volumes` (the PV binder and a
simulated provisioner, WaitForFirstConsumer included: `claim_plan`), `claims` (a pod's ResourceClaims from
templates: `template_claims`); `scheduler` is the default-scheduler,
`controllers` the shell, `_objects` what they share (labels, readers, `Plan`).

Deliberately small: a Deployment rolls out by Recreate whatever its strategy says (old ReplicaSets go to 0, then the
new one is scaled up); no ControllerRevisions, PVC templates, pod failure policies or TTL-after-finished.
Pods with `schedulerName: default-scheduler` (what `kubectl create deployment` makes) are bound to the least
loaded node that fits their requests, node selector and taints; every other scheduler name is left to its scheduler
(lahar's own for `volcano`).
"""

from __future__ import annotations

from lahar.devcluster.workloads._objects import (
    CONTROLLER_UID_LABEL,
    JOB_INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    STS_POD_NAME_LABEL,
    STS_REVISION_LABEL,
    Plan,
    controller_of,
    is_active,
    template_hash,
)
from lahar.devcluster.workloads.controllers import WorkloadControllers
from lahar.devcluster.workloads.deployments import deployment_plan
from lahar.devcluster.workloads.jobs import job_plan
from lahar.devcluster.workloads.replicasets import replicaset_plan
from lahar.devcluster.workloads.scheduler import choose_node, node_fits
from lahar.devcluster.workloads.statefulsets import statefulset_plan

__all__ = [
    "CONTROLLER_UID_LABEL",
    "JOB_INDEX_ANNOTATION",
    "JOB_NAME_LABEL",
    "POD_TEMPLATE_HASH_LABEL",
    "REVISION_ANNOTATION",
    "STS_POD_NAME_LABEL",
    "STS_REVISION_LABEL",
    "Plan",
    "WorkloadControllers",
    "choose_node",
    "controller_of",
    "deployment_plan",
    "is_active",
    "job_plan",
    "node_fits",
    "replicaset_plan",
    "statefulset_plan",
    "template_hash",
]
