"""The controller table: each Volcano kind's `reconcile(ctx, namespace, name)`, and the one call that routes a key.

Called by the worker's task shell (`lahar.worker`); the reconcilers themselves live one module per kind beside this.
"GC" is keyed by the Job it may delete, "HyperNodeTree" is one key for the whole HyperNode tree, "PodGroup" by the plain pod that needs a PodGroup (spec/volcano.md §3), "PodGroupGC" by any PodGroup (orphans).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from lahar.controllers import (
    commands,
    cronjobs,
    gc,
    hypernodes,
    jobflows,
    jobs,
    jobtemplates,
    orphans,
    podgroups,
    queues,
)
from lahar.controllers.context import Context, PermanentError, Result

__all__ = ["RECONCILERS", "Reconciler", "reconcile"]

Reconciler = Callable[[Context, str, str], Result]

RECONCILERS: Mapping[str, Reconciler] = MappingProxyType({
    "Job": jobs.reconcile,
    "PodGroup": podgroups.reconcile,
    "Queue": queues.reconcile,
    "CronJob": cronjobs.reconcile,
    "Command": commands.reconcile,
    "GC": gc.reconcile,
    "JobFlow": jobflows.reconcile,
    "JobTemplate": jobtemplates.reconcile,
    hypernodes.KIND: hypernodes.reconcile,
    orphans.KIND: orphans.reconcile,
})


def reconcile(ctx: Context, kind: str, namespace: str, name: str, *,
              table: Mapping[str, Reconciler] = RECONCILERS) -> Result:
    """Run the reconciler of `kind`; a kind with no reconciler is a PermanentError (no retry)."""
    fn = table.get(kind)
    if fn is None:
        raise PermanentError(f"no reconciler for kind {kind!r}")
    return fn(ctx, namespace, name) or Result()
