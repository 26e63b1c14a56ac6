"""The Queue reconciler (Volcano's queue-controller, spec/volcano.md §3): Open / Closing / Closed per queue, close and
open propagated down the hierarchy, `spec.parent` defaulted to `root`, PodGroup counts per phase in the status.

dispatch enqueues `("Queue", "", name)` on queue changes (and should on PodGroup changes of that queue; a Closing
queue also polls itself); bus Commands `OpenQueue` / `CloseQueue` arrive through `execute()` from the command
reconciler. Decisions are pure (`next_state`, `counts`, `hierarchy_action`) and mirror `queue/state/*.go`:

    state \\ action   OpenQueue   CloseQueue                 SyncQueue
    Open / ""         Open        Closed if no PGs else Closing    Open
    Closing           Open        Closed if no PGs else Closing    Closed if no PGs else Closing
    Closed            Open        Closed                     Closed
    Unknown / other   Open        Closed if no PGs else Closing    Unknown

Hierarchy: closing a queue first closes its open children and marks them `volcano.sh/closed-by-parent=true`;
opening one re-opens the children so marked; a queue whose parent is Closed/Closing is closed (and marked) on sync,
and one marked closed-by-parent re-opens once its parent is Open. A queue cannot open under a Closed/Closing parent.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Mapping
from typing import Any

from lahar.controllers import _meta, events
from lahar.controllers.context import Context, Result
from lahar.kube import errors
from lahar.kube.models import labels

__all__ = [
    "BUILTIN_QUEUES",
    "CLOSING_POLL_SECONDS",
    "ROOT",
    "counts",
    "ensure_builtin_queues",
    "execute",
    "hierarchy_action",
    "next_state",
    "reconcile",
]

ROOT = "root"
OPEN, CLOSED, CLOSING, UNKNOWN = "Open", "Closed", "Closing", "Unknown"
OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE = "OpenQueue", "CloseQueue", "SyncQueue"
CLOSING_POLL_SECONDS = 5.0
_PHASE_COUNTERS = {"Pending": "pending", "Running": "running", "Unknown": "unknown", "Inqueue": "inqueue",
                   "Completed": "completed"}
BUILTIN_QUEUES: dict[str, dict[str, Any]] = {
    ROOT: {"weight": 1, "reclaimable": False},
    "default": {"weight": 1, "reclaimable": True, "parent": ROOT},
}


# --- pure decisions ------------------------------------------------------------------------------------------------


def next_state(current: str | None, action: str, podgroups: int) -> str:
    """The queue state after `action` (OpenQueue / CloseQueue / SyncQueue) with `podgroups` PodGroups in it."""
    state = current or OPEN
    drained = CLOSED if podgroups == 0 else CLOSING
    if action == OPEN_QUEUE:
        return OPEN
    if action == CLOSE_QUEUE:
        return CLOSED if state == CLOSED else drained
    if state == OPEN:
        return OPEN
    if state == CLOSING:
        return drained
    if state == CLOSED:
        return CLOSED
    return UNKNOWN


def counts(podgroups: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Status counters per PodGroup phase (zero counters are left out, as Volcano's omitempty does)."""
    out: dict[str, int] = {}
    for pg in podgroups:
        key = _PHASE_COUNTERS.get((pg.get("status") or {}).get("phase") or "")
        if key:
            out[key] = out.get(key, 0) + 1
    return out


def hierarchy_action(queue: Mapping[str, Any], parent: Mapping[str, Any] | None) -> str | None:
    """syncHierarchicalQueue: CloseQueue when the parent is Closed/Closing and this queue is not; OpenQueue when the
    parent is Open and this queue was closed by its parent; else None."""
    if parent is None or (queue.get("metadata") or {}).get("name") == ROOT:
        return None
    state = (queue.get("status") or {}).get("state") or OPEN
    parent_state = (parent.get("status") or {}).get("state") or OPEN
    closed_by_parent = _annotations(queue).get(labels.QUEUE_CLOSED_BY_PARENT_ANNOTATION) == "true"
    if parent_state in (CLOSED, CLOSING) and state not in (CLOSED, CLOSING):
        return CLOSE_QUEUE
    if parent_state == OPEN and state in (CLOSED, CLOSING) and closed_by_parent:
        return OPEN_QUEUE
    return None


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _state(obj: Mapping[str, Any] | None) -> str:
    return ((obj or {}).get("status") or {}).get("state") or ""


# --- the I/O shell -------------------------------------------------------------------------------------------------


class _World:
    """One read of what a queue decision needs: every queue and every PodGroup, by queue name — from the worker's
    informers when they have reached what the dispatcher routed to queue `cached_for` (`controllers.caches`),
    else listed from the API. Queue writes go through `wrote`, so the next reconcile here waits for them."""

    def __init__(self, ctx: Context, cached_for: str | None = None) -> None:
        self.ctx = ctx
        self.q_rt = _meta.rt(ctx, "queues")
        served = ctx.cache.queue_world(cached_for) if ctx.cache is not None and cached_for is not None else None
        if served is not None and any(q["metadata"]["name"] == cached_for for q in served[0]):  # else: new or gone
            queues, pgs = copy.deepcopy(served[0]), served[1]  # Queues are written from; PodGroups only counted
        else:
            listed = ctx.client.list(self.q_rt)
            if ctx.cache is not None:
                ctx.cache.listed_queues((listed.get("metadata") or {}).get("resourceVersion"))
            queues, pgs = listed["items"], ctx.client.list(_meta.rt(ctx, "podgroups"))["items"]
        self.queues = {q["metadata"]["name"]: q for q in queues}
        self.podgroups: dict[str, list[dict[str, Any]]] = {}
        for pg in pgs:
            self.podgroups.setdefault((pg.get("spec") or {}).get("queue") or "default", []).append(pg)

    def wrote(self, answer: dict[str, Any]) -> dict[str, Any]:
        if self.ctx.cache is not None:
            self.ctx.cache.wrote_queue(answer)
        return answer

    def children(self, name: str) -> list[dict[str, Any]]:
        return sorted((q for q in self.queues.values() if (q.get("spec") or {}).get("parent") == name),
                      key=lambda q: q["metadata"]["name"])

    def annotate(self, queue: dict[str, Any], value: str) -> dict[str, Any]:
        """updateQueueAnnotation(closed-by-parent): no write when already so."""
        if _annotations(queue).get(labels.QUEUE_CLOSED_BY_PARENT_ANNOTATION) == value:
            return queue
        name = queue["metadata"]["name"]
        patch = {"metadata": {"annotations": {labels.QUEUE_CLOSED_BY_PARENT_ANNOTATION: value}}}
        updated = self.wrote(self.ctx.client.patch(self.q_rt, name, patch, patch_type="merge"))
        self.queues[name] = updated
        return updated


def _run(world: _World, name: str, action: str, seen: set[str]) -> Result:
    """Apply `action` to queue `name` (and, for hierarchy, to its children), writing its status at most once."""
    ctx = world.ctx
    if name in seen:  # a cycle in spec.parent: stop rather than loop
        return Result()
    seen.add(name)
    queue = world.queues.get(name)
    if queue is None:
        return Result()

    if name != ROOT and not (queue.get("spec") or {}).get("parent"):
        queue = world.wrote(ctx.client.patch(world.q_rt, name, [{"op": "add", "path": "/spec/parent", "value": ROOT}],
                                             patch_type="json"))
        world.queues[name] = queue
    parent_name = (queue.get("spec") or {}).get("parent")
    parent = world.queues.get(parent_name) if parent_name and name != ROOT else None
    state = _state(queue)

    if action == SYNC_QUEUE:
        derived = hierarchy_action(queue, parent)
        if derived == CLOSE_QUEUE:
            queue = world.annotate(queue, "true")
            action = CLOSE_QUEUE
        elif derived == OPEN_QUEUE:
            action = OPEN_QUEUE

    if action == OPEN_QUEUE and state != OPEN and parent_name and parent_name != ROOT \
            and parent is not None and _state(parent) in (CLOSED, CLOSING):
        events.record(ctx, queue, "Warning", OPEN_QUEUE,
                      f"Failed to open queue {name} because its parent queue {parent_name} is closing or "
                      f"closed. Open the parent queue first.")
        action = SYNC_QUEUE
    if action == CLOSE_QUEUE and name == ROOT:
        events.record(ctx, queue, "Warning", CLOSE_QUEUE, "Root queue cannot be closed")
        action = SYNC_QUEUE

    if action == CLOSE_QUEUE and state not in (CLOSED, CLOSING):
        for child in world.children(name):
            if _state(child) not in (CLOSED, CLOSING):
                world.annotate(child, "true")
                _run(world, child["metadata"]["name"], CLOSE_QUEUE, seen)
    queue = world.queues[name]  # children may have written to it (a cycle in spec.parent)
    if action == OPEN_QUEUE:
        queue = world.annotate(queue, "false")

    pgs = world.podgroups.get(name, [])
    new_state = next_state(state, action, len(pgs))
    status = {k: v for k, v in (queue.get("status") or {}).items() if k not in _PHASE_COUNTERS.values()}
    status.update(counts(pgs))
    status["state"] = new_state
    if status != (queue.get("status") or {}):
        written = dict(queue)
        written["status"] = status
        queue = world.wrote(ctx.client.update_status(world.q_rt, written))  # resourceVersion precondition: 409
        world.queues[name] = queue
    if new_state != state and action == OPEN_QUEUE:
        events.record(ctx, queue, "Normal", OPEN_QUEUE, "Open queue succeed")
    elif new_state != state and action == CLOSE_QUEUE:
        events.record(ctx, queue, "Normal", CLOSE_QUEUE, "Close queue succeed")

    if action == OPEN_QUEUE:
        for child in world.children(name):
            if _annotations(child).get(labels.QUEUE_CLOSED_BY_PARENT_ANNOTATION) == "true" \
                    and _state(child) in (CLOSED, CLOSING):
                _run(world, child["metadata"]["name"], OPEN_QUEUE, seen)
    return Result(requeue_after=CLOSING_POLL_SECONDS if new_state == CLOSING else None)


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    """SyncQueue for `name` (Queues are cluster-scoped; `namespace` is ignored)."""
    try:
        return _run(_World(ctx, cached_for=name), name, SYNC_QUEUE, set())
    except errors.Conflict:
        if ctx.cache is not None:
            ctx.cache.wrote_queue(None)  # someone wrote first: the retry lists from the API
        raise


def execute(ctx: Context, name: str, action: str) -> Result:
    """OpenQueue / CloseQueue from a bus Command (the command reconciler deleted the Command already)."""
    if action not in (OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE):
        raise ValueError(f"not a queue action: {action}")
    return _run(_World(ctx), name, action, set())


def ensure_builtin_queues(ctx: Context) -> list[str]:
    """Create `root` and the default queue (ctx.default_queue) when missing, Open; returns the names created."""
    q_rt = _meta.rt(ctx, "queues")
    created: list[str] = []
    wanted = {ROOT: BUILTIN_QUEUES[ROOT], ctx.default_queue: BUILTIN_QUEUES["default"]}
    for name, spec in wanted.items():
        body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                "spec": dict(spec)}
        try:
            obj = ctx.client.create(q_rt, body)
        except errors.AlreadyExists:
            continue
        created.append(name)
        if not _state(obj):
            obj["status"] = {**(obj.get("status") or {}), "state": OPEN}
            with contextlib.suppress(errors.Conflict, errors.NotFound):
                ctx.client.update_status(q_rt, obj)
    return created
