"""Lifecycle-policy resolution for the job reconciler (Volcano `applyPolicies`, spec/volcano.md §2.2).

An inbox item (what happened) and the Job (its policies, its status.version) go in; the action to execute, its delay
(policy `timeout`) and its target (task, pod or partition) come out. Pure: no clock, no API.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from lahar.kube import durations

__all__ = [
    "ACTIONS",
    "EVENTS",
    "INTERNAL_ACTIONS",
    "JOB_SCOPED_ACTIONS",
    "Decision",
    "as_decision",
    "cancel_after",
    "cancel_for_item",
    "cancel_for_pods",
    "delay_id",
    "drop_stale",
    "due",
    "register",
    "resolve",
    "task_max_retry",
]

EVENTS = frozenset({"*", "PodFailed", "PodEvicted", "PodPending", "PodRunning", "Unknown", "TaskCompleted",
                    "OutOfSync", "CommandIssued", "JobUpdated", "TaskFailed"})
ACTIONS = frozenset({"AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                     "CompleteJob", "ResumeJob", "SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"})
INTERNAL_ACTIONS = frozenset({"SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"})
# Actions whose delayed siblings are all cancelled when they run (the whole job is their scope).
JOB_SCOPED_ACTIONS = frozenset({"AbortJob", "RestartJob", "TerminateJob", "CompleteJob", "ResumeJob"})
_SYNC_EVENTS = frozenset({"OutOfSync", "CommandIssued", "PodRunning"})


@dataclass(frozen=True)
class Decision:
    """What to do about one request: `action`, after `delay` seconds (0 = now), aimed at `task`/`pod`/`partition`."""

    action: str = "SyncJob"
    delay: float = 0.0
    task: str = ""
    pod: str = ""
    partition: str = ""
    event: str = ""

    @property
    def internal(self) -> bool:
        return self.action in INTERNAL_ACTIONS




def _events_of(policy: dict[str, Any]) -> list[str]:
    events = list(policy.get("events") or [])
    if policy.get("event"):
        events.append(policy["event"])
    return events


def _matches(policy: dict[str, Any], event: str, exit_code: int | None) -> bool:
    events = _events_of(policy)
    if events and event and (event in events or "*" in events):
        # A PodPending policy only makes sense with a timeout ("pending for too long"); Volcano skips it otherwise.
        return event != "PodPending" or bool(policy.get("timeout"))
    code = policy.get("exitCode")
    return code is not None and exit_code is not None and int(code) == int(exit_code)


def _decision(policy: dict[str, Any], item: dict[str, Any], event: str) -> Decision:
    return Decision(action=str(policy.get("action") or "SyncJob"), delay=max(0.0, _timeout(policy.get("timeout"))),
                    task=str(item.get("task") or ""), pod=str(item.get("pod") or ""),
                    partition=str(item.get("partition") or ""), event=event)


def _timeout(value: Any) -> float:
    """A policy `timeout` (metav1.Duration on the wire) in seconds; absent or empty means immediately."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    return durations.parse(str(value))


def resolve(job: dict[str, Any], item: dict[str, Any]) -> Decision:
    """applyPolicies: an explicit action (a bus Command) wins; internal events sync; stale requests (another job UID,
    or `jobVersion` below `status.version`) sync; then the task's policies, then the job's — first match wins."""
    event = str(item.get("event") or "")
    target = {"task": str(item.get("task") or ""), "pod": str(item.get("pod") or ""),
              "partition": str(item.get("partition") or "")}
    if item.get("action"):
        return Decision(action=str(item["action"]), event=event, **target)
    if event in _SYNC_EVENTS or not event:
        return Decision(event=event, **target)
    meta = job.get("metadata") or {}
    if item.get("jobUid") and item["jobUid"] != meta.get("uid"):
        return Decision(event=event, **target)
    version = int(((job.get("status") or {}).get("version")) or 0)
    if item.get("jobVersion") is not None and int(item["jobVersion"]) < version:
        return Decision(event=event, **target)
    exit_code = item.get("exitCode")
    spec = job.get("spec") or {}
    if target["task"]:
        for task in spec.get("tasks") or ():
            if task.get("name") == target["task"]:
                for policy in task.get("policies") or ():
                    if _matches(policy, event, exit_code):
                        return _decision(policy, item, event)
                break
    for policy in spec.get("policies") or ():
        if _matches(policy, event, exit_code):
            return _decision(policy, item, event)
    return Decision(event=event, **target)


def task_max_retry(task: dict[str, Any]) -> int:
    """The restart budget behind the TaskFailed event: 0 (unset) means 3, -1 means unlimited (returns -1)."""
    value = int(task.get("maxRetry") or 0)
    return 3 if value == 0 else value


# --- delayed actions (policy `timeout`) ---------------------------------------------------------------------------
# A delayed action is a plain dict kept durably on the Job (annotation `lahar.sh/pending-actions`, a JSON list):
#   {"id", "action", "event", "task", "pod", "podUID", "partition", "jobVersion", "due" (epoch seconds)}

_POD_DISRUPTIONS = frozenset({"PodFailed", "PodEvicted"})


def delay_id(decision: Decision, item: dict[str, Any]) -> str:
    """One pending delay per (event, pod or task, action): a replayed item re-registers the same one."""
    scope = item.get("podUID") or item.get("pod") or item.get("task") or ""
    return hashlib.sha1(f"{decision.event}/{scope}/{decision.action}".encode()).hexdigest()[:16]


def register(entries: list[dict[str, Any]], decision: Decision, item: dict[str, Any], *, now: float,
             version: int) -> list[dict[str, Any]]:
    """Add the delayed `decision` unless the same one is already pending (its first deadline stands)."""
    ident = delay_id(decision, item)
    if any(e.get("id") == ident for e in entries):
        return entries
    entry = {"id": ident, "action": decision.action, "event": decision.event, "task": decision.task,
             "pod": decision.pod, "podUID": str(item.get("podUID") or ""), "partition": decision.partition,
             "jobVersion": int(item["jobVersion"]) if item.get("jobVersion") is not None else version,
             "due": now + decision.delay, "delay": decision.delay}
    return [*entries, entry]


def cancel_for_item(entries: list[dict[str, Any]], item: dict[str, Any]) -> list[dict[str, Any]]:
    """§2.2.5: a non-Pending event for a pod cancels its PodPending delay; PodRunning cancels PodFailed/PodEvicted."""
    event = str(item.get("event") or "")
    uid, pod = item.get("podUID"), item.get("pod")
    out = []
    for e in entries:
        if uid and e.get("event") == "PodPending" and e.get("podUID") == uid and event != "PodPending":
            continue
        if event == "PodRunning" and pod and e.get("event") in _POD_DISRUPTIONS and e.get("pod") == pod:
            continue
        out.append(e)
    return out


def cancel_for_pods(entries: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same rules read from the pods as they are now (an event the inbox lost still cancels)."""
    by_uid = {(p.get("metadata") or {}).get("uid"): p for p in pods}
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    out = []
    for e in entries:
        if e.get("event") == "PodPending" and e.get("podUID"):
            pod = by_uid.get(e["podUID"])
            if pod is None or ((pod.get("status") or {}).get("phase") or "Pending") != "Pending":
                continue
        if e.get("event") in _POD_DISRUPTIONS and e.get("pod"):
            pod = by_name.get(e["pod"])
            if (pod is not None and not (pod.get("metadata") or {}).get("deletionTimestamp")
                    and (pod.get("status") or {}).get("phase") == "Running"
                    and (pod.get("metadata") or {}).get("uid") != e.get("podUID")):
                continue
        out.append(e)
    return out


def cancel_after(entries: list[dict[str, Any]], decision: Decision) -> list[dict[str, Any]]:
    """Once a user action ran, the delayed actions of the same scope (job / task / pod / partition) are void."""
    if decision.internal:
        return entries
    if decision.action in JOB_SCOPED_ACTIONS:
        return []
    if decision.action == "RestartTask":
        return [e for e in entries if e.get("task") != decision.task]
    if decision.action == "RestartPod":
        return [e for e in entries if e.get("pod") != decision.pod]
    if decision.action == "RestartPartition":
        return [e for e in entries if not (e.get("task") == decision.task and e.get("partition") == decision.partition)]
    return entries


def drop_stale(entries: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """Delays registered before the job was last killed (status.version moved on) no longer apply."""
    return [e for e in entries if int(e.get("jobVersion") or 0) >= version]


def due(entries: list[dict[str, Any]], now: float) -> dict[str, Any] | None:
    ready = sorted((e for e in entries if float(e.get("due") or 0) <= now), key=lambda e: (e["due"], e["id"]))
    return ready[0] if ready else None


def as_decision(entry: dict[str, Any]) -> Decision:
    return Decision(action=str(entry["action"]), task=str(entry.get("task") or ""), pod=str(entry.get("pod") or ""),
                    partition=str(entry.get("partition") or ""), event=str(entry.get("event") or ""))
