"""`lahar job ...` and `lahar queue ...`: vcctl's commands (spec/volcano.md §6) over the cluster client port.

Thin shells: flags as vcctl spells them, one API call or two, a rich table. suspend / resume / open / close create
bus Commands exactly as vcctl does (AbortJob / ResumeJob / OpenQueue / CloseQueue) for the controllers to execute.
The cluster client comes from `--kubeconfig` (else KUBECONFIG, a list merged as kubectl merges it, else
~/.kube/config) and `--context`; tabular commands take kubectl's `-o json|yaml|wide|name`; tests hand one in through the
Click context object: `CliRunner().invoke(app, args, obj={"client": client})`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from lahar.kube import durations

__all__ = ["OUTPUTS", "check_output", "filter_jobs", "flag_job", "job_rows", "printed", "queue_rows", "register"]

job_app = typer.Typer(no_args_is_help=True, help="Volcano Jobs: run, list, view, suspend, resume, delete (vcctl job).")
queue_app = typer.Typer(no_args_is_help=True, help="Queues: create, list, get, delete, open, close, update (vcctl queue).")

_JOB_API = "batch.volcano.sh/v1alpha1"
_QUEUE_API = "scheduling.volcano.sh/v1beta1"
_KUBECONFIG = typer.Option(None, "--kubeconfig", "-k", help="Path to the kubeconfig file (default: KUBECONFIG, "
                                                              "else ~/.kube/config).")
_CONTEXT = typer.Option(None, "--context", help="The kubeconfig context to use (default: its current-context).")
_OUTPUT = typer.Option(None, "--output", "-o", metavar="FORMAT", help="json, yaml, wide or name (default: a table).")
OUTPUTS = ("json", "yaml", "wide", "name")


def register(app: typer.Typer) -> None:
    app.add_typer(job_app, name="job")
    app.add_typer(queue_app, name="queue")


# --- pure formatting -----------------------------------------------------------------------------------------------


JOB_COLUMNS = ("Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running", "Succeeded",
               "Failed", "Unknown", "RetryCount")
QUEUE_COLUMNS = ("Name", "Weight", "State", "Parent", "Inqueue", "Pending", "Running", "Unknown", "Completed")


def check_output(output: str | None) -> str | None:
    """The `-o` value (None: the table); anything else is kubectl's error naming the allowed formats."""
    if output is None or output in OUTPUTS:
        return output
    raise typer.BadParameter(f'unable to match a printer suitable for the output format "{output}", allowed formats '
                             f"are: {','.join(sorted(OUTPUTS))}", param_hint="'--output' / '-o'")


def filter_jobs(jobs: list[Mapping[str, Any]], *, scheduler: str = "", queue: str = "",
                selector: str = "") -> list[Mapping[str, Any]]:
    """vcctl job list's --scheduler / --queue / --selector (substring of the name) filters."""
    out = []
    for job in jobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        if scheduler and spec.get("schedulerName") != scheduler:
            continue
        if queue and (spec.get("queue") or "default") != queue:
            continue
        if selector not in (meta.get("name") or ""):
            continue
        out.append(job)
    return out


def printed(objects: list[Mapping[str, Any]], *, output: str, resource: str, single: bool = False) -> str:
    """kubectl's json / yaml / name printers: one object as itself (`get NAME`), several as a `v1` List; `name` is
    `<plural>.<group>/<name>` per line (e.g. `job.batch.volcano.sh/j1`, kubectl's singular resource name)."""
    if output == "name":
        return "".join(f"{resource}/{(o.get('metadata') or {}).get('name', '')}\n" for o in objects)
    doc: Any = objects[0] if single and len(objects) == 1 else {
        "apiVersion": "v1", "kind": "List", "items": list(objects), "metadata": {"resourceVersion": ""}}
    if output == "json":
        return json.dumps(doc, indent=4) + "\n"
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def job_rows(jobs: list[Mapping[str, Any]], *, all_namespaces: bool = False, scheduler: str = "", queue: str = "",
             selector: str = "", wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vcctl job list: (header, rows) after the --scheduler / --queue / --selector (substring of name) filters;
    `wide` adds the queue and the scheduler, as kubectl's `-o wide` adds columns."""
    header = (("Namespace",) if all_namespaces else ()) + JOB_COLUMNS + (("Queue", "Scheduler") if wide else ())
    rows = []
    for job in filter_jobs(jobs, scheduler=scheduler, queue=queue, selector=selector):
        meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
        replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or ())
        row = (meta.get("name") or "", (meta.get("creationTimestamp") or "")[:10],
               (status.get("state") or {}).get("phase") or "",
               (meta.get("labels") or {}).get("volcano.sh/job-type") or "Batch", str(replicas),
               str(status.get("minAvailable") or 0), *(str(status.get(k) or 0) for k in
                                                      ("pending", "running", "succeeded", "failed", "unknown",
                                                       "retryCount")))
        if wide:
            row += (spec.get("queue") or "default", spec.get("schedulerName") or "")
        rows.append(((meta.get("namespace") or "",) if all_namespaces else ()) + row)
    return header, rows


def queue_rows(queues: list[Mapping[str, Any]], *, wide: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vcctl queue list / get: (header, rows); `wide` adds reclaimable and the capability."""
    rows = []
    for q in queues:
        spec, status = q.get("spec") or {}, q.get("status") or {}
        row = (q["metadata"]["name"], str(spec.get("weight") or 0), status.get("state") or "",
               spec.get("parent") or "", *(str(status.get(k) or 0) for k in
                                            ("inqueue", "pending", "running", "unknown", "completed")))
        if wide:
            capability = ",".join(f"{k}={v}" for k, v in sorted((spec.get("capability") or {}).items()))
            row += (str(spec.get("reclaimable", True)).lower(), capability or "<none>")
        rows.append(row)
    return QUEUE_COLUMNS + (("Reclaimable", "Capability") if wide else ()), rows


def resource_list(spec: str) -> dict[str, str]:
    """populateResourceListV1: `cpu=1000m,memory=100Mi` → a ResourceList; errors name the bad statement."""
    from lahar.kube import quantity

    out: dict[str, str] = {}
    if not spec:
        return out
    for statement in spec.split(","):
        parts = statement.split("=")
        if len(parts) != 2:
            raise typer.BadParameter(f"invalid argument syntax {statement}, expected <resource>=<value>")
        try:
            out[parts[0]] = quantity.parse(parts[1]).canonical
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    return out


def flag_job(*, name: str, namespace: str, image: str, min_available: int, replicas: int, requests: str,
             limits: str, scheduler: str, queue: str = "", command: list[str] | None = None) -> dict[str, Any]:
    """The Job that `job run` (and vsub) builds from its flags: one task `default0` of `replicas` pods, one container
    named after the job, restartPolicy Never; `command` (vsub's -c, split as a shell splits it) when given."""
    container: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                                 "resources": {"requests": resource_list(requests), "limits": resource_list(limits)}}
    if command:
        container["command"] = list(command)
    spec: dict[str, Any] = {"minAvailable": min_available, "schedulerName": scheduler}
    if queue:
        spec["queue"] = queue
    spec["tasks"] = [{"name": "default0", "replicas": replicas, "template": {
        "metadata": {"name": name, "labels": {"job.volcano.sh": name}},
        "spec": {"restartPolicy": "Never", "containers": [container]}}}]
    return {"apiVersion": _JOB_API, "kind": "Job", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


# --- shells --------------------------------------------------------------------------------------------------------


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    return console


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A table as kubectl prints one: on a terminal with a rule under the header, piped as plain columns."""
    console = _console()
    table = Table(box=box.SIMPLE_HEAD if console.is_terminal else None, show_edge=False, pad_edge=False,
                  padding=(0, 1) if console.is_terminal else (0, 3, 0, 0))
    for col in header:
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console.print(table)


@contextmanager
def _client(ctx: typer.Context, kubeconfig: Path | None, context: str | None = None) -> Iterator[Any]:
    obj = ctx.find_root().obj or {}
    if isinstance(obj, dict) and obj.get("client") is not None:
        yield obj["client"]
        return
    from lahar.kube import kubeconfig as kc
    from lahar.kube.rest import RestClient

    try:
        configuration = kc.load(kubeconfig, context=context)
    except kc.ClusterNotFound as e:
        _fail(str(e))
    client = RestClient(configuration)
    try:
        yield client
    finally:
        client.close()


def _rt(client: Any, group: str, version: str, plural: str) -> Any:
    found = client.registry.get(group, version, plural)
    if found is None:
        _fail(f"the cluster does not serve {plural}.{group}")
    return found


def _fail(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(1)


@contextmanager
def _api_errors() -> Iterator[None]:
    from lahar.kube import errors

    try:
        yield
    except errors.ApiError as exc:
        _fail(str(exc))


def _pick(positional: str | None, option: str, what: str) -> str:
    name = positional or option
    if not name:
        _fail(what)
    return name


def _command(client: Any, *, target: Mapping[str, Any], api_version: str, namespace: str, action: str) -> dict:
    """vcctl's createJobCommand / createQueueCommand: generateName `<target>-<action lowercased>-`, owned by and
    targeting the object through a controller reference."""
    meta = target["metadata"]
    ref = {"apiVersion": api_version, "kind": target.get("kind") or ("Job" if "batch" in api_version else "Queue"),
           "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
    body = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": namespace,
                         "ownerReferences": [ref]},
            "target": ref, "action": action}
    return client.create(_rt(client, "bus.volcano.sh", "v1alpha1", "commands"), body, namespace=namespace)


# --- lahar job -----------------------------------------------------------------------------------------------------


@job_app.command("run")
def job_run(ctx: typer.Context,
            name: str = typer.Option("", "--name", "-N", help="The name of job."),
            namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
            image: str = typer.Option("busybox", "--image", "-i", help="The container image of job."),
            min_available: int = typer.Option(1, "--min", "-m", help="The minimal available tasks of job."),
            replicas: int = typer.Option(1, "--replicas", "-r", help="The total tasks of job."),
            requests: str = typer.Option("cpu=1000m,memory=100Mi", "--requests", "-R",
                                         help="The resource request of the task."),
            limits: str = typer.Option("cpu=1000m,memory=100Mi", "--limits", "-L",
                                       help="The resource limit of the task."),
            scheduler: str = typer.Option("volcano", "--scheduler", "-S", help="The scheduler for this job."),
            queue: str = typer.Option("default", "--queue", "-q", help="The queue of job."),
            filename: Path | None = typer.Option(None, "--filename", "-f", help="The yaml file of job."),
            kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Run a job: one task from the flags, or the Job in a YAML file."""
    if filename is not None:
        if filename.suffix not in (".yaml", ".yml"):
            _fail("only support yaml file")
        try:
            job = yaml.safe_load(filename.read_text())
        except (OSError, yaml.YAMLError) as exc:
            _fail(f"failed to read file, err: {exc}")
        if not isinstance(job, dict):
            _fail(f"failed to unmarshal file, err: {filename} holds a {type(job).__name__}, not a Job object")
        job.setdefault("apiVersion", _JOB_API)
        job.setdefault("kind", "Job")
        job.setdefault("metadata", {})
        if name:
            job["metadata"]["name"] = name
        job["metadata"]["namespace"] = job["metadata"].get("namespace") or namespace
    else:
        if not name:
            _fail("job name cannot be left blank")
        job = flag_job(name=name, namespace=namespace, image=image, min_available=min_available, replicas=replicas,
                       requests=requests, limits=limits, scheduler=scheduler, queue=queue)
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        created = client.create(_rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), job,
                                namespace=job["metadata"]["namespace"])
    typer.echo(f"run job {created['metadata']['name']} successfully")


@job_app.command("list")
def job_list(ctx: typer.Context,
             namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
             all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="List jobs in all namespaces."),
             scheduler: str = typer.Option("", "--scheduler", "-S", help="List jobs with this scheduler name."),
             queue: str = typer.Option("", "--queue", "-q", help="List jobs in this queue."),
             selector: str = typer.Option("", "--selector", help="Fuzzy matching of the job name."),
             output: str | None = _OUTPUT,
             kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """List jobs."""
    output = check_output(output)
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        items = client.list(_rt(client, "batch.volcano.sh", "v1alpha1", "jobs"),
                            namespace=None if all_namespaces else namespace)["items"]
    items.sort(key=lambda j: (j["metadata"].get("namespace") or "", j["metadata"]["name"]))
    if output in ("json", "yaml", "name"):
        picked = filter_jobs(items, scheduler=scheduler, queue=queue, selector=selector)
        sys.stdout.write(printed(picked, output=output, resource="job.batch.volcano.sh"))
        return
    if not items:
        typer.echo("No resources found")
        return
    _table(*job_rows(items, all_namespaces=all_namespaces, scheduler=scheduler, queue=queue, selector=selector,
                     wide=output == "wide"))


def _events_for(client: Any, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = obj["metadata"]
    rt = client.registry.get("", "v1", "events")
    if rt is None:
        return []
    found = [e for e in client.list(rt, namespace=meta.get("namespace"))["items"]
             if (e.get("involvedObject") or {}).get("uid") == meta.get("uid")
             or ((e.get("involvedObject") or {}).get("kind") == obj.get("kind")
                 and (e.get("involvedObject") or {}).get("name") == meta["name"])]
    return sorted(found, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                        e["metadata"]["name"]))


def _age(ts: str | None, now: dt.datetime) -> str:
    if not ts:
        return "<unknown>"
    parsed = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return durations.human((now - parsed).total_seconds())


def _job_info(job: Mapping[str, Any]) -> list[str]:
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    lines = [f"Name:        {meta.get('name')}", f"Namespace:   {meta.get('namespace')}",
             f"Labels:      {json.dumps(meta['labels'], sort_keys=True) if meta.get('labels') else '<none>'}",
             f"Annotations: {json.dumps(meta['annotations'], sort_keys=True) if meta.get('annotations') else '<none>'}",
             f"API Version: {job.get('apiVersion')}", f"Kind:        {job.get('kind')}", "Metadata:",
             f"  Creation Timestamp: {meta.get('creationTimestamp')}",
             f"  Generation:         {meta.get('generation')}",
             f"  Resource Version:   {meta.get('resourceVersion')}",
             f"  UID:                {meta.get('uid')}", "Spec:",
             f"  Min Available:      {spec.get('minAvailable', 0)}",
             f"  Queue:              {spec.get('queue') or 'default'}",
             f"  Scheduler Name:     {spec.get('schedulerName') or ''}",
             f"  Max Retry:          {spec.get('maxRetry', 3)}"]
    if spec.get("plugins"):
        lines.append("  Plugins:")
        lines += [f"    {k}: {v}" for k, v in sorted(spec["plugins"].items())]
    lines.append("  Tasks:")
    for task in spec.get("tasks") or ():
        lines += [f"    Name:     {task.get('name')}", f"    Replicas: {task.get('replicas', 0)}"]
        for c in ((task.get("template") or {}).get("spec") or {}).get("containers") or ():
            res = c.get("resources") or {}
            lines += [f"      Container: {c.get('name')}  Image: {c.get('image')}",
                      f"        Requests: {res.get('requests') or {}}  Limits: {res.get('limits') or {}}"]
    lines.append("Status:")
    for key, label in (("succeeded", "Succeeded"), ("pending", "Pending"), ("running", "Running"),
                       ("failed", "Failed"), ("terminating", "Terminating"), ("unknown", "Unknown"),
                       ("retryCount", "RetryCount"), ("minAvailable", "Min Available"), ("version", "Version")):
        if status.get(key):
            lines.append(f"  {label + ':':<14}{status[key]}")
    lines += ["  State:", f"    Phase: {(status.get('state') or {}).get('phase') or ''}"]
    if status.get("controlledResources"):
        lines.append("  Controlled Resources:")
        lines += [f"    {k}: {v}" for k, v in sorted(status["controlledResources"].items())]
    if status.get("conditions"):
        lines.append("  Conditions:")
        lines += [f"    {c.get('status')}  {c.get('lastTransitionTime')}" for c in status["conditions"]]
    return lines


@job_app.command("view")
def job_view(ctx: typer.Context, job_name: str | None = typer.Argument(None, metavar="[NAME]"),
             name: str = typer.Option("", "--name", "-N", help="The name of job."),
             namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
             output: str | None = _OUTPUT,
             kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show a job's spec, status and Events."""
    output = check_output(output)
    name = _pick(job_name, name, "job name (specified by --name or -N) is mandatory to view a particular job")
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        job = client.get(_rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=namespace)
        if output in ("json", "yaml", "name"):
            sys.stdout.write(printed([job], output=output, resource="job.batch.volcano.sh", single=True))
            return
        found = _events_for(client, job)
    console = _console()
    for line in _job_info(job):
        console.print(line, highlight=False, markup=False)
    if not found:
        console.print("Events:  <none>", highlight=False)
        return
    now = dt.datetime.now(dt.UTC)
    console.print("Events:", highlight=False)
    rows = []
    for e in found:
        age = _age(e.get("firstTimestamp"), now)
        if int(e.get("count") or 1) > 1:
            age = f"{_age(e.get('lastTimestamp'), now)} (x{e['count']} over {_age(e.get('firstTimestamp'), now)})"
        rows.append((e.get("type") or "", e.get("reason") or "", age,
                     ((e.get("source") or {}).get("component") or ""), (e.get("message") or "").strip()))
    _table(("Type", "Reason", "Age", "From", "Message"), rows)


def _job_command(ctx: typer.Context, positional: str | None, name: str, namespace: str, kubeconfig: Path | None,
                 action: str, verb: str, *, context: str | None = None) -> None:
    name = _pick(positional, name, f"job name is mandatory to {verb} a particular job")
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        job = client.get(_rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=namespace)
        _command(client, target=job, api_version=_JOB_API, namespace=job["metadata"]["namespace"], action=action)
    typer.echo(f"{verb} job {name} successfully")


@job_app.command("suspend")
def job_suspend(ctx: typer.Context, job_name: str | None = typer.Argument(None, metavar="[NAME]"),
                name: str = typer.Option("", "--name", "-N", help="The name of job."),
                namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Suspend a job (bus Command AbortJob)."""
    _job_command(ctx, job_name, name, namespace, kubeconfig, "AbortJob", "suspend", context=context)


@job_app.command("resume")
def job_resume(ctx: typer.Context, job_name: str | None = typer.Argument(None, metavar="[NAME]"),
               name: str = typer.Option("", "--name", "-N", help="The name of job."),
               namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
               kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Resume a suspended job (bus Command ResumeJob)."""
    _job_command(ctx, job_name, name, namespace, kubeconfig, "ResumeJob", "resume", context=context)


@job_app.command("delete")
def job_delete(ctx: typer.Context, job_name: str | None = typer.Argument(None, metavar="[NAME]"),
               name: str = typer.Option("", "--name", "-N", help="The name of job."),
               namespace: str = typer.Option("default", "--namespace", "-n", help="The namespace of job."),
               kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Delete a job."""
    name = _pick(job_name, name, "job name is mandatory to delete a particular job")
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        client.delete(_rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=namespace)
    typer.echo(f"delete job {name} successfully")


# --- lahar queue ---------------------------------------------------------------------------------------------------


def _queues_rt(client: Any) -> Any:
    return _rt(client, "scheduling.volcano.sh", "v1beta1", "queues")


@queue_app.command("create")
def queue_create(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
                 name: str = typer.Option("test", "--name", "-n", help="The name of queue."),
                 weight: int = typer.Option(1, "--weight", "-w", help="The weight of the queue."),
                 state: str = typer.Option("Open", "--state", "-S", help="The state of queue."),
                 parent: str = typer.Option("", "--parent", "-p", help="The parent queue (default root)."),
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Create a queue."""
    name = queue_name or name
    spec: dict[str, Any] = {"weight": weight}
    if parent:
        spec["parent"] = parent
    body = {"apiVersion": _QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec,
            "status": {"state": state}}
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        created = client.create(_queues_rt(client), body)
        if state and (created.get("status") or {}).get("state") != state:  # the status subresource dropped it
            created["status"] = {**(created.get("status") or {}), "state": state}
            client.update_status(_queues_rt(client), created)
    typer.echo(f"create queue {name} successfully")


@queue_app.command("list")
def queue_list(ctx: typer.Context, output: str | None = _OUTPUT, kubeconfig: Path | None = _KUBECONFIG,
               context: str | None = _CONTEXT) -> None:
    """List queues."""
    output = check_output(output)
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        items = sorted(client.list(_queues_rt(client))["items"], key=lambda q: q["metadata"]["name"])
    if output in ("json", "yaml", "name"):
        sys.stdout.write(printed(items, output=output, resource="queue.scheduling.volcano.sh"))
        return
    if not items:
        typer.echo("No resources found")
        return
    _table(*queue_rows(items, wide=output == "wide"))


@queue_app.command("get")
def queue_get(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
              name: str = typer.Option("", "--name", "-n", help="The name of queue."),
              output: str | None = _OUTPUT,
              kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show one queue."""
    output = check_output(output)
    name = _pick(queue_name, name, "name is mandatory to get the particular queue details")
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        queue = client.get(_queues_rt(client), name)
    if output in ("json", "yaml", "name"):
        sys.stdout.write(printed([queue], output=output, resource="queue.scheduling.volcano.sh", single=True))
        return
    _table(*queue_rows([queue], wide=output == "wide"))


@queue_app.command("delete")
def queue_delete(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
                 name: str = typer.Option("", "--name", "-n", help="The name of queue."),
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Delete a queue."""
    name = _pick(queue_name, name, "queue name must be specified")
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        client.delete(_queues_rt(client), name)
    typer.echo(f"delete queue {name} successfully")


def _operate(ctx: typer.Context, name: str, action: str, weight: int, kubeconfig: Path | None, *,
             context: str | None = None) -> None:
    """vcctl queue operate: open / close create a bus Command in `default`; update merge-patches spec.weight."""
    if not name:
        _fail("queue name must be specified")
    if action == "update":
        if weight <= 0:
            _fail(f"when update queue {name}, weight must be specified, the value must be greater than 0")
        with _client(ctx, kubeconfig, context) as client, _api_errors():
            client.patch(_queues_rt(client), name, {"spec": {"weight": weight}}, patch_type="merge")
        typer.echo(f"update queue {name} successfully")
        return
    if not action:
        _fail("action can not be null")
    if action not in ("open", "close"):
        _fail(f"action {action} invalid, valid actions are open, close and update")
    bus_action = "OpenQueue" if action == "open" else "CloseQueue"
    with _client(ctx, kubeconfig, context) as client, _api_errors():
        queue = client.get(_queues_rt(client), name)
        _command(client, target=queue, api_version=_QUEUE_API, namespace="default", action=bus_action)
    typer.echo(f"{action} queue {name} successfully")


@queue_app.command("open")
def queue_open(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
               name: str = typer.Option("", "--name", "-n", help="The name of queue."),
               kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Open a queue (bus Command OpenQueue)."""
    _operate(ctx, queue_name or name, "open", 0, kubeconfig, context=context)


@queue_app.command("close")
def queue_close(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
                name: str = typer.Option("", "--name", "-n", help="The name of queue."),
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Close a queue (bus Command CloseQueue)."""
    _operate(ctx, queue_name or name, "close", 0, kubeconfig, context=context)


@queue_app.command("update")
def queue_update(ctx: typer.Context, queue_name: str | None = typer.Argument(None, metavar="[NAME]"),
                 name: str = typer.Option("", "--name", "-n", help="The name of queue."),
                 weight: int = typer.Option(0, "--weight", "-w", help="The new weight of the queue."),
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Change a queue's weight."""
    _operate(ctx, queue_name or name, "update", weight, kubeconfig, context=context)


@queue_app.command("operate")
def queue_operate(ctx: typer.Context, name: str = typer.Option("", "--name", "-n", help="The name of queue."),
                  action: str = typer.Option("", "--action", "-a", help="open, close or update."),
                  weight: int = typer.Option(0, "--weight", "-w", help="The weight, for update."),
                  kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """vcctl's form: `queue operate -n NAME -a open|close|update [-w WEIGHT]`."""
    _operate(ctx, name, action, weight, kubeconfig, context=context)
