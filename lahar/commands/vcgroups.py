"""`lahar pod|podgroup|jobflow|jobtemplate ...`: the rest of vcctl's command groups (spec/volcano.md §6).

Beside `lahar.commands.vc` (job, queue), whose client, table and printer helpers they share. The row builders
(`pod_status`, `pod_rows`, `podgroup_rows`, `jobflow_rows`, `jobtemplate_rows`) are pure functions over API objects;
the commands are thin shells: flags as vcctl spells them, one API call, a table or kubectl's `-o json|yaml|wide|name`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
import yaml

from lahar.commands import vc
from lahar.commands.vc import _CONTEXT, _KUBECONFIG, _OUTPUT
from lahar.kube import durations

__all__ = ["JOBFLOW_COLUMNS", "JOBTEMPLATE_COLUMNS", "POD_COLUMNS", "PODGROUP_COLUMNS", "jobflow_rows",
           "describe_text", "jobtemplate_rows", "pod_rows", "pod_status", "podgroup_rows", "register", "select_pods",
           "yaml_docs"]

pod_app = typer.Typer(no_args_is_help=True, help="Pods created by Volcano Jobs: list (vcctl pod).")
podgroup_app = typer.Typer(no_args_is_help=True, help="PodGroups: list, get.")
jobflow_app = typer.Typer(no_args_is_help=True, help="JobFlows: create, list, get, describe, delete (vcctl jobflow).")
jobtemplate_app = typer.Typer(no_args_is_help=True,
                              help="JobTemplates: create, list, get, describe, delete (vcctl jobtemplate).")

POD_COLUMNS = ("Name", "Ready", "Status", "Restart", "Age")
PODGROUP_COLUMNS = ("Name", "Status", "MinMember", "Runnings", "Age")
JOBFLOW_COLUMNS = ("Name", "Namespace", "Phase", "Age")
JOBTEMPLATE_COLUMNS = ("Name", "Namespace")

_JOB_NAME = "volcano.sh/job-name"
_TASK_SPEC = "volcano.sh/task-spec"
_QUEUE_LABEL = "volcano.sh/queue-name"
_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
_FLOW = ("flow.volcano.sh", "v1alpha1")


def register(app: typer.Typer) -> None:
    app.add_typer(pod_app, name="pod")
    app.add_typer(podgroup_app, name="podgroup")
    app.add_typer(jobflow_app, name="jobflow")
    app.add_typer(jobtemplate_app, name="jobtemplate")


# --- pure formatting -----------------------------------------------------------------------------------------------


def _since(ts: str | None, now: dt.datetime) -> str:
    if not ts:
        return "<unknown>"
    return durations.human((now - dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))).total_seconds())


def _terminated_reason(term: Mapping[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _later(a: str, b: str | None) -> str:
    return b if b and b > a else a


def pod_status(pod: Mapping[str, Any], now: dt.datetime) -> tuple[str, str, str]:
    """kubectl's (and vcctl pod list's) Ready `n/m`, Status reason and Restart `n (age ago)` of one pod."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    conditions = status.get("conditions") or ()
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or ()}
    sidecar = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total, ready, restarts, sidecar_restarts = len(spec.get("containers") or ()) + len(sidecar), 0, 0, 0
    last, sidecar_last = "", ""
    reason = status.get("reason") or status.get("phase") or ""
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
        reason = "SchedulingGated"
    initializing = False
    inits = status.get("initContainerStatuses") or ()
    for i, c in enumerate(inits):
        state = c.get("state") or {}
        finished = ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        restarts += int(c.get("restartCount") or 0)
        last = _later(last, finished)
        if c.get("name") in sidecar:
            sidecar_restarts += int(c.get("restartCount") or 0)
            sidecar_last = _later(sidecar_last, finished)
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if c.get("name") in sidecar and c.get("started"):
            ready += 1 if c.get("ready") else 0
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts, last, has_running = sidecar_restarts, sidecar_last, False
        for c in reversed(status.get("containerStatuses") or ()):
            state = c.get("state") or {}
            restarts += int(c.get("restartCount") or 0)
            last = _later(last, ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated") is not None:
                reason = _terminated_reason(state["terminated"])
            elif c.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if ready_cond else "NotReady"
    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif status.get("phase") not in ("Succeeded", "Failed"):
            reason = "Terminating"
    shown = str(restarts) if not (restarts and last) else f"{restarts} ({_since(last, now)} ago)"
    return f"{ready}/{total}", reason, shown


def select_pods(pods: list[Mapping[str, Any]], *, job: str = "", task: str = "",
                queue: str = "") -> list[Mapping[str, Any]]:
    """vcctl pod list's selection: the pods of `job` (label volcano.sh/job-name), else of `queue` (the job label
    volcano.sh/queue-name or the annotation scheduling.volcano.sh/queue-name), else every pod of a Volcano Job;
    `task` (lahar's) keeps the pods of one task (volcano.sh/task-spec). Sorted by namespace, then name."""
    def labels(p: Mapping[str, Any]) -> Mapping[str, str]:
        return (p.get("metadata") or {}).get("labels") or {}

    if job:
        picked = [p for p in pods if labels(p).get(_JOB_NAME) == job]
    elif queue:
        picked = [p for p in pods if labels(p).get(_QUEUE_LABEL) == queue
                  or ((p.get("metadata") or {}).get("annotations") or {}).get(_QUEUE_ANNOTATION) == queue]
    else:
        picked = [p for p in pods if _JOB_NAME in labels(p)]
    if task:
        picked = [p for p in picked if labels(p).get(_TASK_SPEC) == task]
    return sorted(picked, key=lambda p: (p["metadata"].get("namespace") or "", p["metadata"]["name"]))


def pod_rows(pods: list[Mapping[str, Any]], now: dt.datetime, *, all_namespaces: bool = False,
             wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vcctl pod list: Name, Ready, Status, Restart, Age (Namespace first with --all-namespaces); `wide` adds the
    job, the task, the IP and the node."""
    header = (("Namespace",) if all_namespaces else ()) + POD_COLUMNS + (("Job", "Task", "IP", "Node") if wide else ())
    rows = []
    for p in pods:
        meta, labels = p.get("metadata") or {}, (p.get("metadata") or {}).get("labels") or {}
        row = (meta.get("name") or "", *pod_status(p, now), _since(meta.get("creationTimestamp"), now))
        if wide:
            row += (labels.get(_JOB_NAME) or "<none>", labels.get(_TASK_SPEC) or "<none>",
                    (p.get("status") or {}).get("podIP") or "<none>", (p.get("spec") or {}).get("nodeName") or "<none>")
        rows.append(((meta.get("namespace") or "",) if all_namespaces else ()) + row)
    return header, rows


def podgroup_rows(groups: list[Mapping[str, Any]], now: dt.datetime, *, all_namespaces: bool = False,
                  wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The PodGroup CRD's printer columns (STATUS, minMember, RUNNINGS, AGE; QUEUE at priority 1, so `wide`)."""
    header = (("Namespace",) if all_namespaces else ()) + PODGROUP_COLUMNS + (("Queue",) if wide else ())
    rows = []
    for g in groups:
        meta, spec, status = g.get("metadata") or {}, g.get("spec") or {}, g.get("status") or {}
        row = (meta.get("name") or "", status.get("phase") or "", str(spec.get("minMember") or 0),
               str(status.get("running") or 0), _since(meta.get("creationTimestamp"), now))
        if wide:
            row += (spec.get("queue") or "default",)
        rows.append(((meta.get("namespace") or "",) if all_namespaces else ()) + row)
    return header, rows


def jobflow_rows(flows: list[Mapping[str, Any]], now: dt.datetime, *,
                 wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vcctl jobflow list / get: Name, Namespace, Phase, Age; `wide` adds the steps and the retain policy."""
    rows = []
    for f in flows:
        meta, spec = f.get("metadata") or {}, f.get("spec") or {}
        row = (meta.get("name") or "", meta.get("namespace") or "",
               ((f.get("status") or {}).get("state") or {}).get("phase") or "",
               _since(meta.get("creationTimestamp"), now))
        if wide:
            steps = ",".join(s.get("name") or "" for s in spec.get("flows") or ())
            row += (steps or "<none>", spec.get("jobRetainPolicy") or "retain")
        rows.append(row)
    return JOBFLOW_COLUMNS + (("Flows", "RetainPolicy") if wide else ()), rows


def jobtemplate_rows(templates: list[Mapping[str, Any]], *,
                     wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vcctl jobtemplate list / get: Name, Namespace; `wide` adds the tasks and the Jobs created from it."""
    rows = []
    for t in templates:
        meta = t.get("metadata") or {}
        row = (meta.get("name") or "", meta.get("namespace") or "")
        if wide:
            tasks = ",".join(s.get("name") or "" for s in (t.get("spec") or {}).get("tasks") or ())
            jobs = ",".join((t.get("status") or {}).get("jobDependsOnList") or ())
            row += (tasks or "<none>", jobs or "<none>")
        rows.append(row)
    return JOBTEMPLATE_COLUMNS + (("Tasks", "Jobs") if wide else ()), rows


def yaml_docs(text: str, kind: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML file (vcctl's create -f / delete -f), namespace defaulted to `default`;
    a document that is not a mapping, or names another kind, is an error naming it."""
    out = []
    for i, doc in enumerate(yaml.safe_load_all(text)):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ValueError(f"document {i + 1}: expected a {kind} object, got {type(doc).__name__}")
        if doc.get("kind", kind) != kind:
            raise ValueError(f"document {i + 1}: kind is {doc.get('kind')!r}, expected {kind}")
        doc.setdefault("apiVersion", "flow.volcano.sh/v1alpha1")
        doc["kind"] = kind
        meta = doc.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError(f"document {i + 1}: metadata.name is required")
        meta["namespace"] = meta.get("namespace") or "default"
        out.append(doc)
    return out


def describe_text(objects: list[Mapping[str, Any]], fmt: str) -> str:
    """vcctl jobflow|jobtemplate describe: each object without its managedFields, as YAML (default) or JSON
    (2-space indent), separated by a blank line; any other format is an error naming the allowed ones."""
    if fmt not in ("yaml", "json"):
        raise ValueError(f"unsupported format {fmt!r}: use yaml or json")
    parts = []
    for obj in objects:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
        doc = {**obj, "metadata": meta}
        parts.append(json.dumps(doc, indent=2) + "\n" if fmt == "json"
                     else yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
    return "\n\n".join(parts)


# --- shells --------------------------------------------------------------------------------------------------------


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _print_list(items: list[Any], output: str | None, resource: str, rows: Any, *, single: bool = False) -> None:
    if output in ("json", "yaml", "name"):
        sys.stdout.write(vc.printed(items, output=output, resource=resource, single=single))
        return
    if not items:
        typer.echo("No resources found")
        return
    vc._table(*rows)


@pod_app.command("list")
def pod_list(ctx: typer.Context,
             namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of pod."),
             all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="List pods in all namespaces."),
             job: str = typer.Option("", "--job", "-j", help="List pods of this job."),
             task: str = typer.Option("", "--task", "-t", help="List pods of this task (with or without --job)."),
             queue: str = typer.Option("", "--queue", "-q", help="List pods in this queue."),
             output: str | None = _OUTPUT,
             kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """List the pods created by Volcano Jobs."""
    output = vc.check_output(output)
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        items = client.list(vc._rt(client, "", "v1", "pods"), namespace=None if all_namespaces else namespace)["items"]
    pods = select_pods(items, job=job, task=task, queue=queue)
    if job and queue and pods and any(((p["metadata"].get("labels") or {}).get(_QUEUE_LABEL)) != queue for p in pods):
        vc._fail(f"the input vcjob {job} does not match the queue {queue}")
    _print_list(pods, output, "pod", pod_rows(pods, _now(), all_namespaces=all_namespaces, wide=output == "wide"))


def _podgroups_rt(client: Any) -> Any:
    return vc._rt(client, "scheduling.volcano.sh", "v1beta1", "podgroups")


@podgroup_app.command("list")
def podgroup_list(ctx: typer.Context,
                  namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of podgroup."),
                  all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A",
                                                      help="List podgroups in all namespaces."),
                  queue: str = typer.Option("", "--queue", "-q", help="List podgroups in this queue."),
                  output: str | None = _OUTPUT,
                  kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """List podgroups."""
    output = vc.check_output(output)
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        items = client.list(_podgroups_rt(client), namespace=None if all_namespaces else namespace)["items"]
    items = sorted((g for g in items if not queue or ((g.get("spec") or {}).get("queue") or "default") == queue),
                   key=lambda g: (g["metadata"].get("namespace") or "", g["metadata"]["name"]))
    _print_list(items, output, "podgroup.scheduling.volcano.sh",
                podgroup_rows(items, _now(), all_namespaces=all_namespaces, wide=output == "wide"))


@podgroup_app.command("get")
def podgroup_get(ctx: typer.Context, pg_name: str | None = typer.Argument(None, metavar="[NAME]"),
                 name: str = typer.Option("", "--name", "-N", help="The name of podgroup."),
                 namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of podgroup."),
                 output: str | None = _OUTPUT,
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show one podgroup."""
    output = vc.check_output(output)
    name = vc._pick(pg_name, name, "name is mandatory to get the particular podgroup details")
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        group = client.get(_podgroups_rt(client), name, namespace=namespace)
    _print_list([group], output, "podgroup.scheduling.volcano.sh", podgroup_rows([group], _now(), wide=output == "wide"),
                single=True)


# --- jobflow / jobtemplate -----------------------------------------------------------------------------------------


def _read_docs(path: Path | None, kind: str) -> list[dict[str, Any]]:
    if path is None:
        vc._fail("the path to the YAML file (--file / -f) must be specified")
    try:
        return yaml_docs(path.read_text(), kind)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        vc._fail(f"failed to read {path}: {exc}")
    return []


def _create(ctx: typer.Context, path: Path | None, kind: str, plural: str, kubeconfig: Path | None,
            context: str | None) -> None:
    """vcctl's create -f: every document created in turn; a failure is printed and the rest still go (exit 1)."""
    from lahar.kube import errors

    docs, failed = _read_docs(path, kind), False
    with vc._client(ctx, kubeconfig, context) as client:
        rt = vc._rt(client, *_FLOW, plural)
        for doc in docs:
            ns = doc["metadata"]["namespace"]
            try:
                client.create(rt, doc, namespace=ns)
                typer.echo(f"Created {kind}: {ns}/{doc['metadata']['name']}")
            except errors.ApiError as exc:
                failed = True
                typer.echo(f"Failed to create {kind}: {exc}")
    if failed:
        raise typer.Exit(1)


def _delete(ctx: typer.Context, path: Path | None, positional: str | None, name: str, namespace: str, kind: str,
            plural: str, kubeconfig: Path | None, context: str | None, missing: str) -> None:
    """vcctl's delete: `-f FILE` deletes every object named in the file, else `--name` in `--namespace`."""
    from lahar.kube import errors

    targets = ([(d["metadata"]["namespace"], d["metadata"]["name"]) for d in _read_docs(path, kind)] if path
               else [(namespace, vc._pick(positional, name, missing))])
    failed = False
    with vc._client(ctx, kubeconfig, context) as client:
        rt = vc._rt(client, *_FLOW, plural)
        for ns, obj_name in targets:
            try:
                client.delete(rt, obj_name, namespace=ns)
                typer.echo(f"Deleted {kind}: {ns}/{obj_name}")
            except errors.ApiError as exc:
                if not path:
                    vc._fail(str(exc))
                failed = True
                typer.echo(f"Failed to delete {kind}: {exc}")
    if failed:
        raise typer.Exit(1)


_FILE = typer.Option(None, "--file", "-f", help="The path to the YAML file (one or more documents).")


@jobflow_app.command("create")
def jobflow_create(ctx: typer.Context, file: Path | None = _FILE,
                   kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Create the JobFlows of a YAML file."""
    _create(ctx, file, "JobFlow", "jobflows", kubeconfig, context)


@jobflow_app.command("list")
def jobflow_list(ctx: typer.Context,
                 namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of jobflow."),
                 all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A",
                                                     help="List jobflows in all namespaces."),
                 output: str | None = _OUTPUT,
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """List jobflows."""
    output = vc.check_output(output)
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        items = client.list(vc._rt(client, *_FLOW, "jobflows"), namespace=None if all_namespaces else namespace)["items"]
    items.sort(key=lambda f: (f["metadata"].get("namespace") or "", f["metadata"]["name"]))
    _print_list(items, output, "jobflow.flow.volcano.sh", jobflow_rows(items, _now(), wide=output == "wide"))


@jobflow_app.command("get")
def jobflow_get(ctx: typer.Context, flow_name: str | None = typer.Argument(None, metavar="[NAME]"),
                name: str = typer.Option("", "--name", "-N", help="The name of jobflow."),
                namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of jobflow."),
                output: str | None = _OUTPUT,
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show one jobflow."""
    output = vc.check_output(output)
    name = vc._pick(flow_name, name, "name is mandatory to get the particular jobflow details")
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        flow = client.get(vc._rt(client, *_FLOW, "jobflows"), name, namespace=namespace)
    _print_list([flow], output, "jobflow.flow.volcano.sh", jobflow_rows([flow], _now(), wide=output == "wide"),
                single=True)


@jobflow_app.command("delete")
def jobflow_delete(ctx: typer.Context, flow_name: str | None = typer.Argument(None, metavar="[NAME]"),
                   name: str = typer.Option("", "--name", "-N", help="The name of jobflow."),
                   namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of jobflow."),
                   file: Path | None = _FILE,
                   kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Delete a jobflow, or the jobflows of a YAML file."""
    _delete(ctx, file, flow_name, name, namespace, "JobFlow", "jobflows", kubeconfig, context,
            "jobflow name must be specified")


@jobtemplate_app.command("create")
def jobtemplate_create(ctx: typer.Context, file: Path | None = _FILE,
                       kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Create the JobTemplates of a YAML file."""
    _create(ctx, file, "JobTemplate", "jobtemplates", kubeconfig, context)


@jobtemplate_app.command("list")
def jobtemplate_list(ctx: typer.Context,
                     namespace: str = typer.Option("default", "--namespace", "-n",
                                                   help="The namespace of job template."),
                     all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A",
                                                         help="List job templates in all namespaces."),
                     output: str | None = _OUTPUT,
                     kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """List job templates."""
    output = vc.check_output(output)
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        items = client.list(vc._rt(client, *_FLOW, "jobtemplates"),
                            namespace=None if all_namespaces else namespace)["items"]
    items.sort(key=lambda t: (t["metadata"].get("namespace") or "", t["metadata"]["name"]))
    _print_list(items, output, "jobtemplate.flow.volcano.sh", jobtemplate_rows(items, wide=output == "wide"))


@jobtemplate_app.command("get")
def jobtemplate_get(ctx: typer.Context, template_name: str | None = typer.Argument(None, metavar="[NAME]"),
                    name: str = typer.Option("", "--name", "-N", help="The name of job template."),
                    namespace: str = typer.Option("default", "--namespace", "-n",
                                                  help="The namespace of job template."),
                    output: str | None = _OUTPUT,
                    kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show one job template."""
    output = vc.check_output(output)
    name = vc._pick(template_name, name, "name is mandatory to get the particular job template details")
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        template = client.get(vc._rt(client, *_FLOW, "jobtemplates"), name, namespace=namespace)
    _print_list([template], output, "jobtemplate.flow.volcano.sh", jobtemplate_rows([template], wide=output == "wide"),
                single=True)


@jobtemplate_app.command("delete")
def jobtemplate_delete(ctx: typer.Context, template_name: str | None = typer.Argument(None, metavar="[NAME]"),
                       name: str = typer.Option("", "--name", "-N", help="The name of job template."),
                       namespace: str = typer.Option("default", "--namespace", "-n",
                                                     help="The namespace of job template."),
                       file: Path | None = _FILE,
                       kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Delete a job template, or the job templates of a YAML file."""
    _delete(ctx, file, template_name, name, namespace, "JobTemplate", "jobtemplates", kubeconfig, context,
            "job template name must be specified")


def _describe(ctx: typer.Context, positional: str | None, name: str, namespace: str, fmt: str, kind: str,
              plural: str, kubeconfig: Path | None, context: str | None) -> None:
    """vcctl's describe: one object by name, else every one in the namespace, in full."""
    if fmt not in ("yaml", "json"):
        raise typer.BadParameter(f"unsupported format {fmt!r}: use yaml or json", param_hint="'--format' / '-o'")
    name = positional or name
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        rt = vc._rt(client, *_FLOW, plural)
        items = [client.get(rt, name, namespace=namespace)] if name else client.list(rt, namespace=namespace)["items"]
    if not items:
        typer.echo("No resources found")
        return
    for obj in items:
        obj.setdefault("apiVersion", "flow.volcano.sh/v1alpha1")
        obj.setdefault("kind", kind)
    sys.stdout.write(describe_text(sorted(items, key=lambda o: o["metadata"]["name"]), fmt))


_FORMAT = typer.Option("yaml", "--format", "-o", help="The format of output: yaml or json.")


@jobflow_app.command("describe")
def jobflow_describe(ctx: typer.Context, flow_name: str | None = typer.Argument(None, metavar="[NAME]"),
                     name: str = typer.Option("", "--name", "-N", help="The name of jobflow (default: all)."),
                     namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of jobflow."),
                     fmt: str = _FORMAT,
                     kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Print a jobflow (or every jobflow of the namespace) in full."""
    _describe(ctx, flow_name, name, namespace, fmt, "JobFlow", "jobflows", kubeconfig, context)


@jobtemplate_app.command("describe")
def jobtemplate_describe(ctx: typer.Context, template_name: str | None = typer.Argument(None, metavar="[NAME]"),
                         name: str = typer.Option("", "--name", "-N", help="The name of job template (default: all)."),
                         namespace: str = typer.Option("default", "--namespace", "-n",
                                                       help="The namespace of job template."),
                         fmt: str = _FORMAT,
                         kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Print a job template (or every one of the namespace) in full."""
    _describe(ctx, template_name, name, namespace, fmt, "JobTemplate", "jobtemplates", kubeconfig, context)
