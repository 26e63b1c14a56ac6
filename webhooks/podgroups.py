"""/podgroups/mutate and /podgroups/validate: Volcano's PodGroup rules (spec §4.7–§4.8) and lahar's minMember checks.

Called by the route table (`webhooks.routes`) with a parsed review, the cluster look-ups and the admission config.

Volcano: on CREATE, a PodGroup in the default queue takes its namespace's `scheduling.volcano.sh/queue-name`
annotation; validation refuses a missing or not-Open queue and a networkTopology naming both tier fields
(messages joined with `; `, each trimmed, as Volcano does). There is no leaf-queue check for PodGroups upstream.

Beyond Volcano (Volcano users get groups Pending forever instead, volcano#5006, #3431), also
refused with messages naming the numbers: `minMember` < 0; a `minTaskMember` entry < 0; for a PodGroup owned by
a Volcano Job, `minTaskMember` naming a task the Job does not have, more members than the Job has replicas
(in total or per task); `minResources` above the capability of its queue or of an ancestor queue in any
resource (such a group can never be enqueued). These also run on UPDATE, for the fields the update changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.kube import quantity
from lahar.kube.models import labels
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import _jobs_rules
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["mutate", "owner_job", "validate"]

BATCH_GROUP = "batch.volcano.sh"
ROOT = "root"


def _meta(obj: Mapping[str, Any] | None) -> dict:
    return dict((obj or {}).get("metadata") or {})


def _spec(obj: Mapping[str, Any] | None) -> dict:
    return dict((obj or {}).get("spec") or {})


# --- /podgroups/mutate ---------------------------------------------------------------------------------------------


def mutate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE: a PodGroup in the default queue moves to its namespace's `scheduling.volcano.sh/queue-name`."""
    if req.operation != "CREATE":
        return Verdict.deny(f"invalid operation `{req.operation}`, expect operation to be `CREATE`")
    pg = req.object or {}
    spec = pg.get("spec")
    queue = str((spec or {}).get("queue") or "")
    if queue not in ("", config.default_queue):
        return Verdict.allow()
    namespace = str(_meta(pg).get("namespace") or req.namespace)
    ns = lookups.namespace(namespace) if namespace else None
    target = str((_meta(ns).get("annotations") or {}).get(labels.QUEUE_NAME_ANNOTATION) or "") if ns else ""
    if not target:
        if queue:
            return Verdict.allow()
        target = config.default_queue      # CRD defaulting would have done it; `lahar admit` objects may lack it
    ops: list[dict] = []
    if not isinstance(spec, dict):
        ops.append({"op": "add", "path": "/spec", "value": {}})
    ops.append({"op": "add", "path": "/spec/queue", "value": target})
    return Verdict.allow(patch=ops)


# --- /podgroups/validate -------------------------------------------------------------------------------------------


def _queue_state_error(queue_name: str, lookups: Lookups) -> str:
    if not queue_name:
        return ""
    queue = lookups.queue(queue_name)
    if queue is None:
        return f'unable to find queue: queue.scheduling.volcano.sh "{queue_name}" not found'
    parent_name = str((queue.get("spec") or {}).get("parent") or "")
    parent = lookups.queue(parent_name) if parent_name and not (queue.get("status") or {}).get("state") else None
    state = _jobs_rules.job_queue_state(queue, parent)   # a queue with no state yet counts as Open, as for Jobs
    if state != "Open":
        return (f"can only submit PodGroup to queue with state `Open`, queue `{queue_name}` status is `{state}`. ")
    return ""


def _both_tiers(topology: Any) -> bool:
    return (isinstance(topology, Mapping) and topology.get("highestTierAllowed") is not None
            and bool(topology.get("highestTierName")))


def _network_topology_error(spec: Mapping[str, Any]) -> str:
    errs: list[str] = []
    if _both_tiers(spec.get("networkTopology")):
        errs.append("must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously.")
    for policy in spec.get("subGroupPolicy") or ():
        if isinstance(policy, Mapping) and _both_tiers(policy.get("networkTopology")):
            errs.append(f"in subGroupPolicy '{policy.get('name', '')}': must not specify 'highestTierAllowed' and "
                        "'highestTierName' in networkTopology simultaneously.")
            break
    return " ".join(errs)


def owner_job(pg: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Volcano Job owning the PodGroup (its controller ownerReference, else any)."""
    refs = [r for r in _meta(pg).get("ownerReferences") or () if isinstance(r, Mapping)
            and r.get("kind") == "Job" and str(r.get("apiVersion") or "").startswith(BATCH_GROUP + "/")]
    if not refs:
        return None
    ref = next((r for r in refs if r.get("controller")), refs[0])
    return str(_meta(pg).get("namespace") or ""), str(ref.get("name") or "")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return None


def _job_tasks(job: Mapping[str, Any]) -> dict[str, int]:
    tasks: dict[str, int] = {}
    for i, task in enumerate(_spec(job).get("tasks") or ()):
        if isinstance(task, Mapping):
            tasks[str(task.get("name") or f"default{i}")] = _int(task.get("replicas")) or 0
    return tasks


def _member_errors(pg: Mapping[str, Any], namespace: str, lookups: Lookups) -> list[str]:
    spec = _spec(pg)
    errs: list[str] = []
    min_member = _int(spec.get("minMember"))
    if min_member is not None and min_member < 0:
        errs.append(f"minMember must be >= 0, got {min_member}")
    min_task = {str(k): _int(v) for k, v in (spec.get("minTaskMember") or {}).items()}
    for task in sorted(min_task):
        n = min_task[task]
        if n is not None and n < 0:
            errs.append(f"minTaskMember[{task}] must be >= 0, got {n}")
    owner = owner_job(pg)
    if owner is None:
        return errs
    job = lookups.job(owner[0] or namespace, owner[1])
    if job is None:
        return errs
    where = f"job {owner[0] or namespace}/{owner[1]}"
    tasks = _job_tasks(job)
    total = sum(tasks.values())
    if min_member is not None and min_member > total:
        errs.append(f"minMember {min_member} is more than the {total} replicas of {where}; the PodGroup could "
                    "never be scheduled")
    for task in sorted(min_task):
        n = min_task[task]
        if task not in tasks:
            errs.append(f'minTaskMember names task "{task}" which {where} does not have '
                        f"(its tasks: {', '.join(sorted(tasks)) or 'none'})")
        elif n is not None and n > tasks[task]:
            errs.append(f"minTaskMember[{task}]={n} is more than the {tasks[task]} replicas of task {task} of {where}")
    return errs


def _min_resources_errors(pg: Mapping[str, Any], queue_name: str, lookups: Lookups) -> list[str]:
    min_resources = _spec(pg).get("minResources") or {}
    if not min_resources or not queue_name:
        return []
    errs: list[str] = []
    for name in sorted(min_resources):
        try:
            want = quantity.parse(min_resources[name])
        except (quantity.QuantityError, TypeError, ValueError):
            continue
        current, seen = queue_name, set()
        while current and current not in seen:
            seen.add(current)
            queue = lookups.queue(current)
            if queue is None:
                break
            cap = (_spec(queue).get("capability") or {}).get(name)
            if cap is not None:
                try:
                    limit = quantity.parse(cap)
                except (quantity.QuantityError, TypeError, ValueError):
                    limit = None
                if limit is not None and want > limit:
                    whose = f"queue {current}" if current == queue_name else (
                        f"queue {current} (an ancestor of queue {queue_name})")
                    errs.append(f"minResources {name}={want} is more than the capability {name}={limit} of {whose}; "
                                "the PodGroup could never be enqueued")
                    break
            parent = str(_spec(queue).get("parent") or "")
            current = "" if parent == ROOT else parent
    return errs


def validate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE: the queue exists and is Open, networkTopology tier fields exclusive, lahar's minMember checks.

    UPDATE (lahar registers the webhook for it, Volcano does not): only what the update changes is checked —
    the member checks when minMember/minTaskMember change, minResources when it or the queue changes, the tier
    fields when networkTopology/subGroupPolicy change — so metadata-only updates and groups in a queue closed
    since creation are never blocked.
    """
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.deny(f"unsupported operation {req.operation}")
    pg = req.object or {}
    spec = _spec(pg)
    namespace = str(_meta(pg).get("namespace") or req.namespace)
    queue_name = str(spec.get("queue") or "")
    if req.operation == "CREATE":
        changed = {"queue", "minMember", "minTaskMember", "minResources", "networkTopology", "subGroupPolicy"}
    else:
        old = _spec(req.old_object)
        changed = {k for k in ("queue", "minMember", "minTaskMember", "minResources", "networkTopology",
                               "subGroupPolicy") if old.get(k) != spec.get(k)}
    msgs: list[str] = []
    if req.operation == "CREATE" and (err := _queue_state_error(queue_name, lookups).strip()):
        msgs.append(err)
    if changed & {"networkTopology", "subGroupPolicy"} and (err := _network_topology_error(spec).strip()):
        msgs.append(err)
    if changed & {"minMember", "minTaskMember"}:
        msgs += _member_errors(pg, namespace, lookups)
    if changed & {"minResources", "queue"}:
        msgs += _min_resources_errors(pg, queue_name or config.default_queue, lookups)
    return Verdict.deny("; ".join(msgs)) if msgs else Verdict.allow()
