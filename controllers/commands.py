"""bus.volcano.sh Commands (`vcctl job suspend`, `lahar queue close`, ...): spec/volcano.md §1.0, §3.

A Command names a target (an ownerReference) and an action. Like Volcano, the Command is deleted first — so an
action runs at most once even when the reconcile is delivered twice — and only then acted on:

    target batch.volcano.sh Job      -> inbox item {"event": "CommandIssued", "action": ..., "command": ...} for the
                                        Job's key, a due timer to reconcile it, Event `CommandIssued` on the Job
    target scheduling.volcano.sh Queue -> `queues.execute(OpenQueue | CloseQueue)` right here (other actions: sync)
    any other target                 -> left alone (not ours)
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from lahar.controllers import _meta, events, queues
from lahar.controllers.context import Context, Result
from lahar.kube import errors

__all__ = ["JOB_ACTIONS", "QUEUE_ACTIONS", "reconcile", "target_kind"]

JOB_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
               "CompleteJob", "ResumeJob")
QUEUE_ACTIONS = ("OpenQueue", "CloseQueue")


def target_kind(command: Mapping[str, Any]) -> str | None:
    """"Job" or "Queue" when the Command targets a Volcano Job or Queue (IsJobReference / IsQueueReference)."""
    target = command.get("target") or {}
    group = (target.get("apiVersion") or "").split("/")[0]
    if target.get("kind") == "Job" and group == "batch.volcano.sh" and target.get("name"):
        return "Job"
    if target.get("kind") == "Queue" and group == "scheduling.volcano.sh" and target.get("name"):
        return "Queue"
    return None


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    cmd_rt = _meta.rt(ctx, "commands")
    try:
        command = ctx.client.get(cmd_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    kind = target_kind(command)
    if kind is None:
        return Result()
    try:
        ctx.client.delete(cmd_rt, name, namespace=namespace,
                          preconditions={"uid": command["metadata"]["uid"]})
    except (errors.NotFound, errors.Conflict):
        return Result()  # another delivery consumed it
    action = str(command.get("action") or "")
    target = command["target"]["name"]

    if kind == "Job":
        ctx.inbox.push("Job", namespace, target, {"event": "CommandIssued", "action": action, "command": name})
        ctx.timers.after(0, "Job", namespace, target, token=f"command:{name}")
        with contextlib.suppress(errors.NotFound):
            job = ctx.client.get(_meta.rt(ctx, "vcjobs"), target, namespace=namespace)
            events.record(ctx, job, "Normal", "CommandIssued",
                          f"Start to execute command {action}, and clean it up to make sure executed not more "
                          f"than once.")
        return Result()

    queues.execute(ctx, target, action if action in QUEUE_ACTIONS else queues.SYNC_QUEUE)
    return Result()
