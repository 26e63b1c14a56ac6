"""tests.builders: the Kubernetes- and Volcano-shaped objects every test layer builds (unit, integration, e2e).

One module per kind: `pods` (Pod, PriorityClass), `nodes`, `podgroups`, `queues`, `vcjobs` (Volcano Job, its tasks and
pod templates), `reviews` (admission requests and AdmissionReviews), plus `sessions` (one scheduler session over
builders). Fluent and table-friendly: `pod("p1").req(cpu="1", memory="1Gi").group("pg1")`; `.obj` is the plain dict,
`.build()` a copy. `storage` holds the CSIDriver and CSIStorageCapacity dicts of the volume tests.
"""

from ._base import Builder, objs
from .nodes import node
from .podgroups import podgroup
from .pods import container, guaranteed_pod, pod, priority_class
from .queues import queue
from .reviews import admission_review, create, delete, update
from .sessions import ALLOCATE_CONF, run, tiers_conf
from .storage import csidriver, storage_capacity
from .vcjobs import pod_template, simulated_job, task, vcjob

__all__ = [
    "ALLOCATE_CONF", "Builder", "admission_review", "container", "create", "csidriver", "delete", "guaranteed_pod", "node", "objs",
    "pod", "pod_template", "podgroup", "priority_class", "queue", "run", "simulated_job", "storage_capacity", "task", "tiers_conf",
    "update", "vcjob",
]
