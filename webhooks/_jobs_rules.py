"""The Volcano Job admission rules as pure functions: defaults (`/jobs/mutate`) and checks (`/jobs/validate`).

`webhooks.jobs` wraps them into handlers; `webhooks.cronjobs` reuses them on a CronJob's job template.

Everything follows `pkg/webhooks/admission/jobs/{mutate,validate}` of Volcano (spec §4.1, §4.2), texts included:
CREATE messages are concatenated into one string exactly as Volcano builds it (leading spaces, `;` separators; the
framework trims the result), an UPDATE answers with the first error only. Where Volcano's output is not
deterministic (Go map order in "valid events are [...]" and in the plugin loop) lahar uses the spec's order.
Policy errors are rendered the way hashicorp/go-multierror prints them ("1 error occurred:\\n\\t* ...\\n\\n").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from lahar.kube import podspec, quantity
from lahar.webhooks import _k8svalidation as k8s

__all__ = [
    "DEFAULT_MAX_RETRY",
    "KNOWN_PLUGINS",
    "VALID_ACTIONS",
    "VALID_EVENTS",
    "DeviceCheck",
    "QueueLookups",
    "apply_defaults",
    "default_patch",
    "int32_error",
    "is_dag",
    "job_queue_state",
    "mpi_task_names",
    "update_difference",
    "validate_create",
    "validate_io",
    "validate_policies",
    "validate_spec",
    "validate_update",
]

DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_SPEC = "default"
# pkg/webhooks/admission/jobs/validate/util.go policyEventMap / policyActionMap, the entries allowed to users
VALID_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
VALID_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                 "CompleteJob", "ResumeJob")
# pkg/controllers/job/plugins registry
KNOWN_PLUGINS = frozenset({"env", "svc", "ssh", "tensorflow", "mpi", "pytorch", "hcclrank", "ray"})
_SVC_IMPLIED_BY = ("tensorflow", "mpi", "pytorch", "ray")

NETWORK_TOPOLOGY_CONFLICT = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
NO_TASKS = "No task specified in job spec"
MPI_MASTER_MISSING = "The specified mpi master task was not found"
MIN_AVAILABLE_OVER_REPLICAS = " job 'minAvailable' should not be greater than total replicas in tasks;"
NOT_A_DAG = " job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"
ROOT_QUEUE = " can not submit job to root queue;"
UPDATE_ADD_REMOVE = "job updates may not add or remove tasks"
UPDATE_OTHER_FIELDS = ("job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
                       "and `PriorityClassName`")

# check_pod_spec(spec, *, config, annotations) -> list[str] (webhooks.devices), injected by the handler
DeviceCheck = Callable[..., list[str]]


class QueueLookups(Protocol):
    """What the queue rules read (a `webhooks.lookups.Lookups` satisfies it): `queue(name)` and `queues()` (and, when
    the look-ups have it, `child_queue_count(name)` instead of scanning `queues()`)."""

    def queue(self, name: str) -> dict | None: ...

    def queues(self) -> list[dict]: ...


# -- small readers -------------------------------------------------------------------------------------------------


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


INT32_MAX = 2**31 - 1

# the Job's integer fields that Volcano's Go types hold as int32: (path, Go struct the field decodes into)
_INT32_SPEC = (("minAvailable", "JobSpec"), ("maxRetry", "JobSpec"), ("ttlSecondsAfterFinished", "JobSpec"),
               ("minSuccess", "JobSpec"))
_INT32_TASK = (("replicas", "TaskSpec"), ("minAvailable", "TaskSpec"), ("maxRetry", "TaskSpec"))


def _int32_problem(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return None if -INT32_MAX - 1 <= value <= INT32_MAX else "number"
    if isinstance(value, float):
        return "number"
    return None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def int32_error(job: Mapping[str, Any]) -> str | None:
    """Volcano decodes a Job into Go structs whose counts are int32: a value past int32 (`replicas: 1e15`) or with a
    fraction is refused before any rule runs, with Go's decoding error naming the field; None when every count fits."""
    spec = _dict(job.get("spec"))
    for field, struct in _INT32_SPEC:
        value = spec.get(field)
        if _int32_problem(value):
            return (f"json: cannot unmarshal number {_number(value)} into Go struct field {struct}.spec.{field} of "
                    "type int32")
    for task in _tasks(spec):
        for field, struct in _INT32_TASK:
            value = task.get(field)
            if _int32_problem(value):
                return (f"json: cannot unmarshal number {_number(value)} into Go struct field "
                        f"{struct}.spec.tasks.{field} of type int32")
    return None


def _tasks(spec: Mapping[str, Any]) -> list[dict]:
    tasks = spec.get("tasks")
    return [t if isinstance(t, dict) else {} for t in tasks] if isinstance(tasks, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _topology_conflict(nt: Any) -> bool:
    return isinstance(nt, dict) and nt.get("highestTierAllowed") is not None and bool(nt.get("highestTierName"))


def mpi_task_names(args: Any) -> tuple[str, str]:
    """(master, worker) task names from the mpi plugin's arguments, parsed like Go's `flag` package does."""
    values = {"master": "master", "worker": "worker"}
    argv = [str(a) for a in args] if isinstance(args, list) else []
    i = 0
    while i < len(argv):
        s = argv[i]
        if len(s) < 2 or s[0] != "-":
            break
        minuses = 2 if s[1] == "-" else 1
        if minuses == 2 and len(s) == 2:  # "--" terminates the flags
            break
        name = s[minuses:]
        if not name or name[0] in "-=":
            break
        if "=" in name:
            name, value = name.split("=", 1)
        elif i + 1 < len(argv):
            i += 1
            value = argv[i]
        else:
            break  # flag needs an argument
        if name not in ("master", "worker", "port"):
            break  # flag provided but not defined
        if name != "port":
            values[name] = value
        i += 1
    return values["master"], values["worker"]


# -- mutate (§4.1) -------------------------------------------------------------------------------------------------


def _task_min_available(task: Mapping[str, Any]) -> int:
    pp = _dict(task.get("partitionPolicy"))
    if _int(pp.get("minPartitions")) > 0:
        return _int(pp.get("minPartitions")) * _int(pp.get("partitionSize"))
    return _int(task.get("replicas"))


def _defaulted_tasks(tasks: list[dict]) -> list[dict] | None:
    """The tasks with Volcano's task defaults, or None when nothing changes (then no patch at all)."""
    out: list[dict] | None = None
    for index, task in enumerate(tasks):
        changes: dict[str, Any] = {}
        if not task.get("name"):
            changes["name"] = f"{DEFAULT_TASK_SPEC}{index}"
        pod_spec = _dict(_dict(task.get("template")).get("spec"))
        set_dns = bool(pod_spec.get("hostNetwork")) and not pod_spec.get("dnsPolicy")
        if task.get("minAvailable") is None:
            changes["minAvailable"] = _task_min_available(task)
        if _int(task.get("maxRetry")) == 0:
            changes["maxRetry"] = DEFAULT_MAX_RETRY
        if not changes and not set_dns:
            continue
        if out is None:
            out = list(tasks)
        new_task = {**task, **changes}
        if set_dns:
            template = copy.deepcopy(_dict(task.get("template")))
            template.setdefault("spec", {})["dnsPolicy"] = "ClusterFirstWithHostNet"
            new_task["template"] = template
        out[index] = new_task
    return out


def _defaulted_plugins(plugins: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(plugins)
    if any(p in plugins for p in _SVC_IMPLIED_BY) and "svc" not in out:
        out["svc"] = []
    if "mpi" in plugins and "ssh" not in out:
        out["ssh"] = []
    return out


def default_patch(job: Mapping[str, Any], *, scheduler_name: str, default_queue: str = "default") -> list[dict]:
    """Volcano's `createPatch`: the JSON-patch ops that give a new Job its defaults, in Volcano's order."""
    spec = _dict(job.get("spec"))
    ops: list[dict] = []
    if not spec.get("queue"):
        ops.append({"op": "add", "path": "/spec/queue", "value": default_queue})
    if not spec.get("schedulerName"):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler_name})
    if _int(spec.get("maxRetry")) == 0:
        ops.append({"op": "add", "path": "/spec/maxRetry", "value": DEFAULT_MAX_RETRY})
    tasks = _tasks(spec)
    new_tasks = _defaulted_tasks(tasks)
    if new_tasks is not None:
        ops.append({"op": "replace", "path": "/spec/tasks", "value": new_tasks})
        tasks = new_tasks
    if _int(spec.get("minAvailable")) == 0:
        total = sum(_int(t["minAvailable"]) if t.get("minAvailable") is not None else _int(t.get("replicas"))
                    for t in tasks)
        ops.append({"op": "add", "path": "/spec/minAvailable", "value": total})
    plugins = spec.get("plugins")
    if isinstance(plugins, dict):
        ops.append({"op": "replace", "path": "/spec/plugins", "value": _defaulted_plugins(plugins)})
    return ops


def apply_defaults(spec: Mapping[str, Any], *, scheduler_name: str = "volcano",
                   default_queue: str = "default") -> dict:
    """A copy of a JobSpec with the `/jobs/mutate` defaults applied (used on CronJob job templates)."""
    out = dict(spec)
    for op in default_patch({"spec": spec}, scheduler_name=scheduler_name, default_queue=default_queue):
        out[op["path"].rsplit("/", 1)[1]] = op["value"]
    return out


# -- validate helpers (util.go) ------------------------------------------------------------------------------------


def _multierror(errors: list[str]) -> str:
    if len(errors) == 1:
        return f"1 error occurred:\n\t* {errors[0]}\n\n"
    points = "\n\t".join(f"* {e}" for e in errors)
    return f"{len(errors)} errors occurred:\n\t{points}\n\n"


def _policy_events(policy: Mapping[str, Any]) -> list[str]:
    events = [str(e) for e in policy.get("events") or []]
    if policy.get("event"):
        events.append(str(policy["event"]))
    return list(dict.fromkeys(events))


def validate_policies(policies: Any, path: str) -> str | None:
    """`validatePolicies`: None when fine, else the multierror text (stops at the first bad policy)."""
    errs: list[str] = []
    seen_events: set[str] = set()
    exit_codes: set[int] = set()
    for policy in policies if isinstance(policies, list) else []:
        policy = _dict(policy)
        has_event = bool(policy.get("event")) or bool(policy.get("events"))
        exit_code = policy.get("exitCode")
        if has_event and exit_code is not None:
            errs.append("must not specify event and exitCode simultaneously")
            break
        if not has_event and exit_code is None:
            errs.append("either event and exitCode should be specified")
            break
        if has_event:
            bad = False
            for event in _policy_events(policy):
                if event not in VALID_EVENTS:
                    errs.append(k8s.field_invalid(path, event, "invalid policy event"))
                    bad = True
                    break
                action = str(policy.get("action") or "")
                if action not in VALID_ACTIONS:
                    errs.append(k8s.field_invalid(path, action, "invalid policy action"))
                    bad = True
                    break
                if event in seen_events:
                    errs.append(f"duplicate event {event}  across different policy")
                    bad = True
                    break
                seen_events.add(event)
            if bad:
                break
        else:
            code = _int(exit_code)
            if code == 0:
                errs.append("0 is not a valid error code")
                break
            if code in exit_codes:
                errs.append(f"duplicate exitCode {code}")
                break
            exit_codes.add(code)
    if "*" in seen_events and len(seen_events) > 1:
        errs.append("if there's * here, no other policy should be here")
    return _multierror(errs) if errs else None


def _valid_events_actions() -> str:
    return f" valid events are {k8s.go_list(VALID_EVENTS)}, valid actions are {k8s.go_list(VALID_ACTIONS)};"


def validate_io(volumes: Any) -> str | None:
    """`validateIO`: the first volume error, or None."""
    seen: set[str] = set()
    for volume in volumes if isinstance(volumes, list) else []:
        volume = _dict(volume)
        mount = str(volume.get("mountPath") or "")
        if not mount:
            return " mountPath is required;"
        if mount in seen:
            return f" duplicated mountPath: {mount};"
        claim_name = str(volume.get("volumeClaimName") or "")
        if volume.get("volumeClaim") is None and not claim_name:
            return " either VolumeClaim or VolumeClaimName must be specified;"
        if claim_name:
            if volume.get("volumeClaim") is not None:
                return ("conflict: If you want to use an existing PVC, just specify VolumeClaimName."
                        "If you want to create a new PVC, you do not need to specify VolumeClaimName")
            errs = podspec.is_dns1123_subdomain(claim_name)
            if errs:
                return f"invalid VolumeClaimName {claim_name} : {k8s.go_list(errs)}"
        seen.add(mount)
    return None


def is_dag(tasks: list[dict]) -> bool:
    """Kahn's topological sort over `dependsOn.name`, as Volcano's `topoSort` (unknown targets break it)."""
    graph: dict[str, set[str]] = {}
    in_degree: dict[str, int] = {}
    task_list: list[str] = []
    for task in tasks:
        name = str(task.get("name") or "")
        task_list.append(name)
        in_degree[name] = 0
    for task in tasks:  # Volcano resets the degree per task in the same loop; names are unique after the check
        name = str(task.get("name") or "")
        for dep in _dict(task.get("dependsOn")).get("name") or []:
            graph.setdefault(str(dep), set()).add(name)
            in_degree[name] = in_degree.get(name, 0) + 1
    stack = [t for t, d in in_degree.items() if d == 0]
    done = 0
    while stack:
        node = stack.pop()
        done += 1
        for nxt in graph.pop(node, set()):
            in_degree[nxt] -= 1
            if in_degree[nxt] == 0:
                stack.append(nxt)
    return done == len(task_list)


def _partition_error(task: Mapping[str, Any], job_name: str) -> str | None:
    pp = task.get("partitionPolicy")
    if not isinstance(pp, dict):
        return None
    where = f"in task: {task.get('name') or ''}, job: {job_name}"
    total, size = _int(pp.get("totalPartitions")), _int(pp.get("partitionSize"))
    if total <= 0:
        return f"'TotalPartitions' must be greater than 0 {where}"
    if size <= 0:
        return f"'PartitionSize' must be greater than 0 {where}"
    if _int(task.get("replicas")) != total * size:
        return f"'Replicas' are not equal to TotalPartitions*PartitionSize {where}"
    min_partitions = _int(pp.get("minPartitions"))
    if task.get("minAvailable") is not None and min_partitions > 0 \
            and _int(task.get("minAvailable")) != min_partitions * size:
        return f"'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"
    return None


def _cpu_is_integer(container: Mapping[str, Any]) -> bool:
    res = _dict(container.get("resources"))
    requests = _dict(res.get("requests")) or _dict(res.get("limits"))
    raw = requests.get("cpu")
    if raw is None:
        return False
    try:
        q = quantity.parse(raw)
    except (quantity.QuantityError, ValueError, TypeError):
        return False
    return q.milli_value() % 1000 == 0 and q.milli_value() != 0


def _task_topology_error(task: Mapping[str, Any], index: int) -> str:
    policy = task.get("topologyPolicy") or ""
    if policy in ("", "none"):
        return ""
    pod_spec = _dict(_dict(task.get("template")).get("spec"))
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]
    for j, container in enumerate(containers):
        if not _cpu_is_integer(_dict(container)):
            return f"the cpu request isn't  an integer in spec.task[{index}] container[{j}]."
    return ""


def _same_json(a: Any, b: Any) -> bool:
    """`a == b` as JSON sees it (Python's `==` takes `1`, `1.0` and `true` for one value; messages do not)."""
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except (TypeError, orjson.JSONEncodeError):
        return False


class _TemplateChecks:
    """The per-template checks of one Job (`ValidatePodTemplate`'s subset and the device checks), each run once
    per distinct template: tasks often share one (equal dicts), and both checks read nothing but the template
    (plus the Job's namespace and the configuration, the same for every task)."""

    _MAX_SEEN = 16                 # distinct templates remembered; a Job with more simply checks the rest

    def __init__(self, namespace: str, device_check: DeviceCheck | None, config: Any) -> None:
        self.namespace, self.device_check, self.config = namespace, device_check, config
        self._seen: list[list[Any]] = []

    def _entry(self, template: Any) -> list[Any]:
        for entry in self._seen:
            if entry[0] is template or (entry[0] == template and _same_json(entry[0], template)):
                return entry
        entry = [template, None, None]       # template, its errors, its device errors (filled when first needed)
        if len(self._seen) < self._MAX_SEEN:
            self._seen.append(entry)
        return entry

    def errors(self, task: Mapping[str, Any], index: int) -> tuple[str, str]:
        """(template errors — else the topology error —, device errors) of a task, in Volcano's wording and in
        the order the checks ran before (template, topology, devices)."""
        entry = self._entry(task.get("template"))
        if entry[1] is None:
            entry[1] = k8s.pod_template_errors(entry[0])
        errs = k8s.pod_template_meta_errors(str(task.get("name") or ""), self.namespace) + entry[1]
        template_msg = (f"spec.task[{index}]." + "".join(e + ". " for e in errs) if errs
                        else _task_topology_error(task, index))
        if self.device_check is None:
            return template_msg, ""
        if entry[2] is None:
            template = _dict(entry[0])
            annotations = _dict(_dict(template.get("metadata")).get("annotations"))
            entry[2] = list(self.device_check(_dict(template.get("spec")), config=self.config,
                                              annotations=annotations) or ())
        return template_msg, "".join(f" spec.task[{index}].template: {e};" for e in entry[2])


_CLOSING_STATES = ("Closed", "Closing")


def job_queue_state(queue: Mapping[str, Any], parent: Mapping[str, Any] | None = None) -> str:
    """The state a job's queue has for admission: its `status.state`; a queue with no state yet counts as `Open`
    (lahar, beyond Volcano: a Queue and its Job applied from one file), unless it is being closed — deleted, or
    under a Closed/Closing parent (the queue controller closes it on its first sync) — then it stays ``."""
    state = str(_dict(queue.get("status")).get("state") or "")
    if state:
        return state
    if _dict(queue.get("metadata")).get("deletionTimestamp"):
        return ""
    if parent is not None and str(_dict(parent.get("status")).get("state") or "") in _CLOSING_STATES:
        return ""
    return "Open"


def _queue_errors(queue_name: str, lookups: QueueLookups) -> str:
    queue = lookups.queue(queue_name)
    if queue is None:
        return f' unable to find job queue: queue.scheduling.volcano.sh "{queue_name}" not found;'
    msg = ""
    parent_name = str(_dict(queue.get("spec")).get("parent") or "")
    parent = lookups.queue(parent_name) if parent_name and not _dict(queue.get("status")).get("state") else None
    state = job_queue_state(queue, parent)
    name = str(_dict(queue.get("metadata")).get("name") or queue_name)
    if state != "Open":
        msg += f" can only submit job to queue with state `Open`, queue `{name}` status is `{state}`;"
    if name == "root":
        return msg + ROOT_QUEUE
    count = getattr(lookups, "child_queue_count", None)   # an index in lahar's look-ups; else a scan
    children = count(name) if count is not None else sum(
        1 for q in lookups.queues() if _dict(q.get("spec")).get("parent") == name)
    if children:
        msg += f" can only submit job to leaf queue, queue `{name}` has {children} child queues;"
    return msg


# -- validate (§4.2) -----------------------------------------------------------------------------------------------


def validate_spec(spec: Mapping[str, Any], *, job_name: str, namespace: str, check_names: bool = True,
                  lookups: QueueLookups | None = None, device_check: DeviceCheck | None = None,
                  config: Any = None) -> str:
    """The CREATE checks of a JobSpec, Volcano's concatenated message ("" = allowed).

    `check_names=False` skips the job-name and pod-name checks, `lookups=None` the queue checks (both for a
    CronJob's job template, whose jobs get their names and queues later).
    """
    tasks = _tasks(spec)
    if not tasks:
        return NO_TASKS
    plugins = spec.get("plugins")
    if isinstance(plugins, dict) and "mpi" in plugins:
        master, _worker = mpi_task_names(plugins["mpi"])
        if not any(t.get("name") == master for t in tasks):
            return MPI_MASTER_MISSING
    msg = ""
    if _topology_conflict(spec.get("networkTopology")):
        msg += f" {NETWORK_TOPOLOGY_CONFLICT};"
    seen: set[str] = set()
    total_replicas = 0
    has_dependencies = False
    templates = _TemplateChecks(namespace, device_check, config)
    for index, task in enumerate(tasks):
        name = str(task.get("name") or "")
        if task.get("dependsOn") is not None:
            has_dependencies = True
        replicas = _int(task.get("replicas"))
        if task.get("minAvailable") is not None and _int(task.get("minAvailable")) > replicas:
            msg += f" 'minAvailable' is greater than 'replicas' in task: {name}, job: {job_name};"
        total_replicas += replicas
        if name in seen:
            msg += f" duplicated task name {name};"
            break
        seen.add(name)
        policy_err = validate_policies(task.get("policies"), "spec.tasks.policies")
        if policy_err:
            msg += policy_err + _valid_events_actions()
        if check_names:
            pod_name = f"{job_name}-{name}-{index}"
            errs = podspec.is_qualified_name(pod_name)
            if errs:
                msg += f"create pod with name {pod_name} validate failed {k8s.go_list(errs)};"
        template_msg, device_msg = templates.errors(task, index)
        msg += template_msg + device_msg
        partition_err = _partition_error(task, job_name)
        if partition_err:
            msg += f" {partition_err};"
        if _topology_conflict(_dict(task.get("partitionPolicy")).get("networkTopology")):
            msg += f" {NETWORK_TOPOLOGY_CONFLICT};"
    if check_names:
        errs = podspec.is_qualified_name(job_name)
        if errs:
            msg += f"create job with name {job_name} validate failed {k8s.go_list(errs)}"
    if total_replicas < _int(spec.get("minAvailable")):
        msg += MIN_AVAILABLE_OVER_REPLICAS
    policy_err = validate_policies(spec.get("policies"), "spec.policies")
    if policy_err:
        msg += policy_err + _valid_events_actions()
    if isinstance(plugins, dict):
        for plugin in plugins:
            if plugin not in KNOWN_PLUGINS:
                msg += f" unable to find job plugin: {plugin};"
    io_err = validate_io(spec.get("volumes"))
    if io_err:
        msg += io_err
    if lookups is not None:
        msg += _queue_errors(str(spec.get("queue") or ""), lookups)
    if has_dependencies and not is_dag(tasks):
        msg += NOT_A_DAG
    return msg


def validate_create(job: Mapping[str, Any], *, lookups: QueueLookups, namespace: str = "",
                    device_check: DeviceCheck | None = None, config: Any = None) -> str:
    """`validateJobCreate` over a Job dict: "" when allowed, else Volcano's concatenated message."""
    meta = _dict(job.get("metadata"))
    return validate_spec(_dict(job.get("spec")), job_name=str(meta.get("name") or ""),
                         namespace=str(meta.get("namespace") or namespace), lookups=lookups,
                         device_check=device_check, config=config)


_ZERO = (None, "", 0, False)


def _normalized(value: Any) -> Any:
    """Go's view of decoded JSON for `Semantic.DeepEqual`: absent, null, zero and empty are all the same."""
    if isinstance(value, dict):
        out = {k: _normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in _ZERO and v != {} and v != []}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _comparable_spec(spec: Mapping[str, Any]) -> Any:
    spec = dict(spec)
    for key in ("minAvailable", "priorityClassName"):
        spec.pop(key, None)
    spec["tasks"] = [{k: v for k, v in t.items() if k not in ("replicas", "minAvailable")} for t in _tasks(spec)]
    volumes = spec.get("volumes")
    if isinstance(volumes, list):  # the job controller fills volumeClaimName for a volumeClaim
        spec["volumes"] = [{k: v for k, v in _dict(vol).items()
                            if not (k == "volumeClaimName" and _dict(vol).get("volumeClaim") is not None)}
                           for vol in volumes]
    return _normalized(spec)


def _first_difference(old: Any, new: Any, path: str) -> str | None:
    """The path of the first place two normalized JSON values differ (`spec.tasks[0].template...`), or None."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                return f"{path}.{key}"
            found = _first_difference(old[key], new[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return path
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if _same_json(old, new) else path


def update_difference(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any], *, scheduler_name: str = "volcano",
                      default_queue: str = "default") -> str | None:
    """The first field outside what Volcano lets an update change (`minAvailable`, task `replicas` and
    `minAvailable`, `priorityClassName`) that differs between two JobSpecs, or None.

    Both sides are compared with the `/jobs/mutate` defaults applied (lahar, beyond Volcano): the defaults the
    webhook filled in on CREATE are in the stored object but not in the user's manifest, so a re-applied manifest
    (`kubectl apply` twice, `kubectl diff`, a GitOps sync) compares equal to what is stored."""
    def comparable(spec: Mapping[str, Any]) -> Any:
        return _comparable_spec(apply_defaults(spec, scheduler_name=scheduler_name, default_queue=default_queue))

    return _first_difference(comparable(old_spec), comparable(new_spec), "spec")


def validate_update(old: Mapping[str, Any], new: Mapping[str, Any], *, scheduler_name: str = "volcano",
                    default_queue: str = "default") -> str | None:
    """`validateJobUpdate`: the first error, or None when the change is allowed; a change Volcano forbids is
    refused with Volcano's message and the field that changed (`...: spec.queue changed`)."""
    old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
    job_name = str(_dict(new.get("metadata")).get("name") or "")
    total = 0
    for task in _tasks(new_spec):
        name = str(task.get("name") or "")
        replicas = _int(task.get("replicas"))
        if replicas < 0:
            return f"'replicas' must be >= 0 in task: {name}"
        if task.get("minAvailable") is not None:
            if _int(task.get("minAvailable")) < 0:
                return f"'minAvailable' must be >= 0 in task: {name}"
            if _int(task.get("minAvailable")) > replicas:
                return f"'minAvailable' must be <= 'replicas' in task: {name}"
        partition_err = _partition_error(task, job_name)
        if partition_err:
            return partition_err
        if _topology_conflict(_dict(task.get("partitionPolicy")).get("networkTopology")):
            return NETWORK_TOPOLOGY_CONFLICT
        total += replicas
    min_available = _int(new_spec.get("minAvailable"))
    if min_available > total:
        return "job 'minAvailable' must not be greater than total replicas"
    if min_available < 0:
        return "job 'minAvailable' must be >= 0"
    if _topology_conflict(new_spec.get("networkTopology")):
        return NETWORK_TOPOLOGY_CONFLICT
    if len(_tasks(old_spec)) != len(_tasks(new_spec)):
        return UPDATE_ADD_REMOVE
    changed = update_difference(old_spec, new_spec, scheduler_name=scheduler_name, default_queue=default_queue)
    if changed:
        return f"{UPDATE_OTHER_FIELDS}: {changed} changed"
    return None
