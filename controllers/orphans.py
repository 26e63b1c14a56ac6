"""Collection of orphaned PodGroups (volcano#3533, #2265: PodGroups whose owner or pods are gone keep holding their
queue's capacity, Inqueue for good).

dispatch routes every PodGroup (ADDED, the 30 s resync) and the deletion of a pod that names one to
`("PodGroupGC", ns, name)`. `orphaned` decides, as a pure function over what the shell read:

    owner gone   every ownerReference names an object that no longer exists (or exists with another UID):
                 deleted at once (kube's garbage collector would too, but only for owners it knows, and not when
                 the owner was deleted with `--cascade=orphan`);
    no pods      no pod names the PodGroup (`scheduling.k8s.io/group-name`) for its TTL: stamped
                 `lahar.sh/no-pods-since` when first seen empty, deleted once that is TTL old. The TTL is
                 `lahar.sh/no-pods-ttl-seconds` on the PodGroup, else 300 s. A PodGroup controlled by a Volcano Job that
                 exists is the Job controller's (a Pending Job has no pods by design) and is never collected here.

A deletion carries a UID precondition (a re-created PodGroup of the same name survives) and a Normal Event
`OrphanedPodGroupDeleted` naming the reason. The resync brings every PodGroup back within 30 s, so a PodGroup is
collected within 60 s of becoming orphaned (owner gone) or of its TTL running out.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.controllers import _meta, events
from lahar.controllers.context import Context, Result
from lahar.kube import errors
from lahar.kube.models import labels

__all__ = ["DEFAULT_TTL_SECONDS", "KIND", "NO_PODS_SINCE", "NO_PODS_TTL", "Decision", "orphaned", "reconcile"]

KIND = "PodGroupGC"
NO_PODS_SINCE = "lahar.sh/no-pods-since"
NO_PODS_TTL = "lahar.sh/no-pods-ttl-seconds"
DEFAULT_TTL_SECONDS = 300
REASON = "OrphanedPodGroupDeleted"
_VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")

OwnerState = str  # "present" | "gone" | "unknown" (a kind lahar cannot look up, or the look-up failed)


@dataclass(frozen=True)
class Decision:
    """What to do with one PodGroup: `delete` with `reason`, or set / clear the no-pods stamp, and when to look again."""

    delete: bool = False
    reason: str = ""
    stamp: str | None = None        # write `lahar.sh/no-pods-since` with this time
    clear_stamp: bool = False
    requeue_after: float | None = None


def _ttl(annotations: Mapping[str, str]) -> int:
    raw = annotations.get(NO_PODS_TTL)
    try:
        value = int(str(raw).strip()) if raw is not None else DEFAULT_TTL_SECONDS
    except ValueError:
        return DEFAULT_TTL_SECONDS
    return value if value >= 0 else DEFAULT_TTL_SECONDS


def orphaned(pg: Mapping[str, Any], *, owners: Sequence[OwnerState], controlled_by_job: bool, pods: int,
             now: dt.datetime) -> Decision:
    """The decision for one PodGroup. `owners`: the state of each of its ownerReferences; `controlled_by_job`: its
    controller is a Volcano Job that exists; `pods`: the pods that name it, in any phase."""
    meta = pg.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Decision()
    if owners and all(state == "gone" for state in owners):
        return Decision(delete=True, reason="its owner is gone")
    annotations = meta.get("annotations") or {}
    stamped = annotations.get(NO_PODS_SINCE)
    if pods > 0 or controlled_by_job:
        return Decision(clear_stamp=stamped is not None)
    ttl = _ttl(annotations)
    since = _meta.parse_time(stamped) if stamped else None
    if since is None:
        return Decision(stamp=_meta.format_time(now), requeue_after=float(ttl) if ttl else 0.001)
    left = (since + dt.timedelta(seconds=ttl) - now).total_seconds()
    if left > 0:
        return Decision(requeue_after=left)
    return Decision(delete=True, reason=f"it has had no pods for {ttl}s")


# --- the I/O shell -------------------------------------------------------------------------------------------------


def _owner_states(ctx: Context, namespace: str, pg: Mapping[str, Any]) -> tuple[list[OwnerState], bool]:
    states: list[OwnerState] = []
    controlled_by_job = False
    for ref in (pg.get("metadata") or {}).get("ownerReferences") or ():
        rt = ctx.client.registry.by_kind(ref.get("apiVersion") or "", ref.get("kind") or "")
        if rt is None or not ref.get("name"):
            states.append("unknown")
            continue
        try:
            owner = ctx.client.get(rt, ref["name"], namespace=namespace if rt.namespaced else None)
        except errors.NotFound:
            states.append("gone")
            continue
        except (errors.ApiError, LookupError):
            states.append("unknown")
            continue
        if ref.get("uid") and (owner.get("metadata") or {}).get("uid") != ref["uid"]:
            states.append("gone")
            continue
        states.append("present")
        if ref.get("controller") and (ref.get("apiVersion"), ref.get("kind")) == _VOLCANO_JOB:
            controlled_by_job = True
    return states, controlled_by_job


def _pod_count(ctx: Context, namespace: str, name: str) -> int:
    items = ctx.client.list(_meta.rt(ctx, "pods"), namespace=namespace)["items"]
    return sum(1 for p in items
               if ((p.get("metadata") or {}).get("annotations") or {}).get(labels.GROUP_NAME_ANNOTATION) == name)


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    pg_rt = _meta.rt(ctx, "podgroups")
    try:
        pg = ctx.client.get(pg_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    owners, controlled_by_job = _owner_states(ctx, namespace, pg)
    if controlled_by_job:  # a live Volcano Job's PodGroup is never collected: no need to count its pods
        return Result()
    pods = 0 if owners and all(s == "gone" for s in owners) else _pod_count(ctx, namespace, name)
    decision = orphaned(pg, owners=owners, controlled_by_job=controlled_by_job, pods=pods, now=ctx.clock())
    if decision.delete:
        with contextlib.suppress(errors.NotFound, errors.Conflict):
            ctx.client.delete(pg_rt, name, namespace=namespace, preconditions={"uid": pg["metadata"]["uid"]})
            events.record(ctx, pg, "Normal", REASON, f"PodGroup {namespace}/{name} deleted: {decision.reason}")
        return Result()
    if decision.stamp is not None or decision.clear_stamp:
        value = decision.stamp if decision.stamp is not None else None
        with contextlib.suppress(errors.NotFound):
            ctx.client.patch(pg_rt, name, {"metadata": {"annotations": {NO_PODS_SINCE: value}}},
                             namespace=namespace, patch_type="merge")
    return Result(requeue_after=decision.requeue_after)
