"""/pods/mutate and /pods/validate: Volcano's pod rules (spec §4.3–§4.4) plus device request normalization.

Called by the route table (`webhooks.routes`) with a parsed review, the cluster look-ups and the admission config.

mutate (CREATE): the queue-allocation scheduling gate (feature `scheduling_gates_queue_admission`); the first
matching admission `resourceGroups` entry (nodeSelector merge, affinity only when the pod has none, tolerations
appended, schedulerName); then, for pods of lahar's scheduler names, `webhooks.devices.normalize_pod`.

validate (CREATE, only pods whose schedulerName is one of lahar's): Volcano's checks in Volcano's order and words
— a Job's pod needs its PodGroup (and that group's queue Open), a pod naming a queue needs it Open, and the
disruption-budget annotations `volcano.sh/jdb-min-available|max-unavailable` must be a positive integer or a
1–99 % percentage and not both — then `webhooks.devices.check_pod_spec`; all messages joined with `; `.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from lahar.kube import limits, wiretypes
from lahar.kube.models import labels
from lahar.policies.admission import AdmissionConfig, ResourceGroup
from lahar.webhooks import devices
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["kube_errors", "matching_resource_group", "mutate", "validate"]

DEFAULT_SCHEDULER = "default-scheduler"
JDB_KEYS = (labels.JDB_MIN_AVAILABLE_KEY, labels.JDB_MAX_UNAVAILABLE_KEY)
_GO_INT = re.compile(r"^[+-]?[0-9]+$")


def _meta(obj: Mapping[str, Any] | None) -> dict:
    return dict((obj or {}).get("metadata") or {})


def _spec(obj: Mapping[str, Any] | None) -> dict:
    return dict((obj or {}).get("spec") or {})


def _scheduler(pod: Mapping[str, Any]) -> str:
    return str(_spec(pod).get("schedulerName") or DEFAULT_SCHEDULER)


# --- /pods/mutate ----------------------------------------------------------------------------------------------------


def _group_annotations(group: ResourceGroup) -> dict[str, str]:
    """Volcano `getAnnotation`: each value is a YAML `key: value` map; merged, earlier keys win."""
    out: dict[str, str] = {}
    for raw in group.object.value:
        try:
            parsed = limits.safe_load(raw)
        except (yaml.YAMLError, limits.LimitError):
            continue
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            continue
        for k, v in parsed.items():
            out.setdefault(str(k), v)
    return out


def _belongs(pod: Mapping[str, Any], namespace: str, group: ResourceGroup) -> bool:
    if group.object.key == "namespace":
        return namespace in group.object.value
    annotations = _meta(pod).get("annotations") or {}
    if any(annotations.get(k, "") == v for k, v in _group_annotations(group).items()):
        return True
    return not group.object.key and annotations.get(labels.RESOURCE_GROUP_KEY) == group.resource_group


def matching_resource_group(pod: Mapping[str, Any], namespace: str, config: AdmissionConfig) -> ResourceGroup | None:
    """The first admission resource group the pod belongs to (Volcano stops at the first match)."""
    return next((g for g in config.resource_groups if _belongs(pod, namespace, g)), None)


def _resource_group_ops(pod: Mapping[str, Any], group: ResourceGroup) -> list[dict]:
    spec = _spec(pod)
    ops: list[dict] = []
    if group.labels:
        ops.append({"op": "add", "path": "/spec/nodeSelector",
                    "value": {**(spec.get("nodeSelector") or {}), **group.labels}})
    if group.affinity and spec.get("affinity") is None:
        ops.append({"op": "add", "path": "/spec/affinity", "value": group.affinity_object()})
    if group.tolerations:
        ops.append({"op": "add", "path": "/spec/tolerations",
                    "value": [*(spec.get("tolerations") or ()), *(dict(t) for t in group.tolerations)]})
    if group.scheduler_name:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": group.scheduler_name})
    return ops


def _gate_ops(pod: Mapping[str, Any]) -> list[dict]:
    gate = {"name": labels.QUEUE_ALLOCATION_GATE_KEY}
    gates = _spec(pod).get("schedulingGates")
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, Mapping) and g.get("name") == gate["name"] for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def mutate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE: scheduling gate, resource group, device normalization (see the module docstring)."""
    if req.operation != "CREATE":
        return Verdict.deny("expect operation to be 'CREATE' ")
    pod = req.object or {}
    namespace = str(_meta(pod).get("namespace") or req.namespace)
    ops: list[dict] = []
    if config.scheduling_gates_queue_admission and labels.QUEUE_ALLOCATION_GATE_KEY in (
            _meta(pod).get("annotations") or {}):
        ops += _gate_ops(pod)
    scheduler = _scheduler(pod)
    group = matching_resource_group(pod, namespace, config)
    if group is not None:
        ops += _resource_group_ops(pod, group)
        scheduler = group.scheduler_name or scheduler
    warnings: list[str] = []
    if scheduler in config.scheduler_names:
        device_ops, warnings = devices.normalize_pod(pod, config=config)
        ops += device_ops
    return Verdict.allow(patch=ops, warnings=warnings)


# --- /pods/validate --------------------------------------------------------------------------------------------------


def _job_queue_error(queue_name: str, lookups: Lookups) -> str:
    """Volcano `checkQueueState` of the pod webhook (its own wording, with the leading space and `;`)."""
    if not queue_name:
        return ""
    queue = lookups.queue(queue_name)
    if queue is None:
        return f' unable to find job queue: queues.scheduling.volcano.sh "{queue_name}" not found;'
    state = str((queue.get("status") or {}).get("state") or "")
    if state != "Open":
        return f" can only submit job to queue with state `Open`, queue `{queue_name}` status is `{state}`;"
    return ""


def _go_atoi(text: str) -> tuple[int | None, str]:
    """strconv.Atoi: (value, "") or (None, Go's error text)."""
    if not _GO_INT.match(text):
        return None, f'strconv.Atoi: parsing "{text}": invalid syntax'
    value = int(text)
    if not -(2**63) <= value < 2**63:
        return None, f'strconv.Atoi: parsing "{text}": value out of range'
    return value, ""


def _int_or_percentage_error(key: str, value: str) -> str:
    """Volcano `validateIntPercentageStr` (intstr.Parse: an Atoi-able value is an int, anything else a string)."""
    n, _ = _go_atoi(value)
    if n is not None:
        if n <= 0:
            return f'invalid value <"{value}"> for {key}, it must be a positive integer'
        return ""
    v, err = _go_atoi(value.replace("%", ""))
    if v is None:
        return f"invalid value {err} for {key}"
    if v <= 0 or v >= 100:
        return f'invalid value <"{value}"> for {key}, it must be a valid percentage which between 1% ~ 99%'
    return ""


def _annotation_error(annotations: Mapping[str, str]) -> str:
    found = 0
    for key in JDB_KEYS:
        if key in annotations:
            found += 1
            if err := _int_or_percentage_error(key, str(annotations[key])):
                return err
    if found > 1:
        return f"not allow configure multiple annotations <[{' '.join(JDB_KEYS)}]> at same time"
    return ""


def _volcano_error(pod: Mapping[str, Any], namespace: str, lookups: Lookups) -> str:
    """Volcano `validatePod` for a pod of one of our schedulers."""
    annotations = _meta(pod).get("annotations") or {}
    name = str(_meta(pod).get("name") or "")
    pg_name = str(annotations.get(labels.GROUP_NAME_ANNOTATION) or "")
    if pg_name:
        pg = lookups.podgroup(namespace, pg_name)
        if pg is None:
            return (f"failed to get PodGroup for pod <{namespace}/{name}>: "
                    f'podgroups.scheduling.volcano.sh "{pg_name}" not found')
        if err := _job_queue_error(str(_spec(pg).get("queue") or ""), lookups):
            return f"failed : {err};"
        return ""
    queue_name = str(annotations.get(labels.QUEUE_NAME_ANNOTATION) or "")
    if queue_name and (err := _job_queue_error(queue_name, lookups)):
        return err
    return _annotation_error(annotations)


def kube_errors(pod: Mapping[str, Any]) -> str:
    """What kube-apiserver refuses in a pod before any validating webhook runs (JSON types and int32 ranges from
    the official client's models, label keys and values, unparsable quantities such as `cpu: "lots"`), in its
    `Pod "<name>" is invalid: <field>: <detail>` form; "" when none. A webhook called by a server that skipped
    those checks (a test cluster, `lahar admit`) still refuses what kube would."""
    meta = pod.get("metadata")
    name = str((meta.get("name") or meta.get("generateName") or "") if isinstance(meta, Mapping) else "")
    model = wiretypes.model_for("", "v1", "Pod")
    problems = wiretypes.decode_problems(model, dict(pod)).type_errors if model is not None else []
    if not problems:
        problems = [f"{fld}: {detail}" for fld, detail in wiretypes.meta_problems(dict(pod), pod=True)]
    if not problems:
        return ""
    return f'Pod "{name}" is invalid: ' + (problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")


def validate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE: kube-apiserver's own pod checks (`kube_errors`) for every pod; then, for pods of lahar's
    schedulers only, Volcano's PodGroup/queue/JDB checks and the device checks."""
    if req.operation != "CREATE":
        return Verdict.deny("expect operation to be 'CREATE'")
    pod = req.object or {}
    if not isinstance(pod, Mapping):
        return Verdict.deny("the pod must be an object")
    if err := kube_errors(pod):
        return Verdict.deny(err)
    if _scheduler(pod) not in config.scheduler_names:
        return Verdict.allow()
    namespace = str(_meta(pod).get("namespace") or req.namespace)
    msgs: list[str] = []
    if err := _volcano_error(pod, namespace, lookups).strip():
        msgs.append(err)
    annotations = _meta(pod).get("annotations") or {}
    msgs += devices.check_pod_spec(_spec(pod), config=config, annotations=annotations)
    return Verdict.deny("; ".join(msgs)) if msgs else Verdict.allow()
