"""The TTL garbage collector of finished Volcano Jobs (Volcano's gc-controller, spec/volcano.md §3).

`reconcile(ctx, ns, name)` (kind "GC", keyed by the Job): a Job with `spec.ttlSecondsAfterFinished` whose phase is
Completed / Failed / Terminated expires at `status.state.lastTransitionTime + ttl`; expired → deleted with background
propagation and a UID precondition (so a re-created Job of the same name survives); not yet → requeued at expiry.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from typing import Any

from lahar.controllers import _meta
from lahar.controllers.context import Context, Result
from lahar.kube import errors

__all__ = ["FINISHED_PHASES", "PROPAGATION_POLICY", "expires_at", "reconcile", "time_left"]

FINISHED_PHASES = ("Completed", "Failed", "Terminated")
PROPAGATION_POLICY = "Background"


def expires_at(job: Mapping[str, Any]) -> dt.datetime | None:
    """When the Job may be deleted; None when it does not need cleanup (no TTL, not finished, being deleted)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    state = (job.get("status") or {}).get("state") or {}
    if ttl is None or state.get("phase") not in FINISHED_PHASES:
        return None
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return None
    finished = _meta.parse_time(state.get("lastTransitionTime")) or dt.datetime(1, 1, 1, tzinfo=dt.UTC)
    return finished + dt.timedelta(seconds=int(ttl))


def time_left(job: Mapping[str, Any], now: dt.datetime) -> float | None:
    """Seconds until expiry (≤ 0: expired); None when the Job does not need cleanup."""
    at = expires_at(job)
    return None if at is None else (at - now).total_seconds()


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    jobs_rt = _meta.rt(ctx, "vcjobs")
    try:
        job = ctx.client.get(jobs_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    left = time_left(job, ctx.clock())
    if left is None:
        return Result()
    if left > 0:
        return Result(requeue_after=left)
    with contextlib.suppress(errors.NotFound):
        ctx.client.delete(jobs_rt, name, namespace=namespace, propagation_policy=PROPAGATION_POLICY,
                          preconditions={"uid": job["metadata"]["uid"]})
    return Result()
