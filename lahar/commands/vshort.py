"""Volcano's short entry points as console scripts: `vsub`, `vjobs`, `vqueues`, `vcancel`, `vsuspend`, `vresume`.

Each is a one-command Typer app (pyproject.toml [project.scripts]) over the functions of `lahar.commands.vc`, with
the short tools' own flags: unlike `vcctl job`, `-n` is the job's name and `-N` its namespace. vsub reads
VOLCANO_SCHEDULER_NAME / VOLCANO_DEFAULT_IMAGE / VOLCANO_DEFAULT_JOB_NAMESPACE for the flags left out.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from lahar.commands import vc
from lahar.commands.vc import _CONTEXT, _KUBECONFIG

__all__ = ["SCRIPTS", "VQUEUES_COLUMNS", "vcancel", "vjobs", "vqueues", "vresume", "vsub", "vsub_defaults",
           "vsuspend", "vqueue_rows"]

VQUEUES_COLUMNS = ("Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown")


def _app(help_text: str) -> typer.Typer:
    return typer.Typer(add_completion=False, help=help_text, context_settings={"help_option_names": ["-h", "--help"]})


vsub = _app("submit a job")
vjobs = _app("view job information")
vqueues = _app("view queue information")
vcancel = _app("cancel a job")
vsuspend = _app("suspend a job")
vresume = _app("resume a job")

SCRIPTS = {"vsub": vsub, "vjobs": vjobs, "vqueues": vqueues, "vcancel": vcancel, "vsuspend": vsuspend,
           "vresume": vresume}

_NAME = typer.Option("", "--name", "-n", help="The name of job.")
_NAMESPACE = typer.Option("default", "--namespace", "-N", help="The namespace of job.")


# --- pure ----------------------------------------------------------------------------------------------------------


def vsub_defaults(env: Mapping[str, str], *, image: str, namespace: str, scheduler: str) -> tuple[str, str, str]:
    """vsub's setDefaultArgs: a flag left empty takes its environment variable, else busybox / default / volcano."""
    return (image or env.get("VOLCANO_DEFAULT_IMAGE") or "busybox",
            namespace or env.get("VOLCANO_DEFAULT_JOB_NAMESPACE") or "default",
            scheduler or env.get("VOLCANO_SCHEDULER_NAME") or "volcano")


def vqueue_rows(queues: list[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """vqueues' table: Name, Weight, State, Inqueue, Pending, Running, Unknown (no Parent / Completed)."""
    rows = []
    for q in queues:
        spec, status = q.get("spec") or {}, q.get("status") or {}
        rows.append((q["metadata"]["name"], str(spec.get("weight") or 0), status.get("state") or "",
                     *(str(status.get(k) or 0) for k in ("inqueue", "pending", "running", "unknown"))))
    return VQUEUES_COLUMNS, rows


# --- the scripts ---------------------------------------------------------------------------------------------------


@vsub.command()
def vsub_run(ctx: typer.Context, name: str = _NAME,
             namespace: str = typer.Option("", "--namespace", "-N", help="The namespace of job, overwrites "
                                           "VOLCANO_DEFAULT_JOB_NAMESPACE (default \"default\")."),
             image: str = typer.Option("", "--image", "-i", help="The container image of job, overwrites "
                                       "VOLCANO_DEFAULT_IMAGE (default \"busybox\")."),
             min_available: int = typer.Option(1, "--min", "-m", help="The minimal available tasks of job."),
             replicas: int = typer.Option(1, "--replicas", "-r", help="The total tasks of job."),
             requests: str = typer.Option("cpu=1000m,memory=100Mi", "--requests", "-R",
                                          help="The resource request of the task."),
             limits: str = typer.Option("cpu=1000m,memory=100Mi", "--limits", "-L",
                                        help="The resource limit of the task."),
             scheduler: str = typer.Option("", "--scheduler", "-S", help="The scheduler for this job, overwrites "
                                           "VOLCANO_SCHEDULER_NAME (default \"volcano\")."),
             command: str = typer.Option("", "--command", "-c", help="The command of job."),
             kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Submit a job."""
    if not name:
        vc._fail("job name cannot be left blank")
    image, namespace, scheduler = vsub_defaults(os.environ, image=image, namespace=namespace, scheduler=scheduler)
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--command' / '-c'") from exc
    job = vc.flag_job(name=name, namespace=namespace, image=image, min_available=min_available, replicas=replicas,
                      requests=requests, limits=limits, scheduler=scheduler, command=argv)
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        created = client.create(vc._rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), job, namespace=namespace)
    typer.echo(f"run job {created['metadata']['name']} successfully")


@vjobs.command()
def vjobs_view(ctx: typer.Context, name: str = _NAME, namespace: str = _NAMESPACE,
               scheduler: str = typer.Option("", "--scheduler", "-S", help="List jobs with this scheduler name."),
               all_namespaces: bool = typer.Option(False, "--all-namespaces", help="List jobs in all namespaces."),
               selector: str = typer.Option("", "--selector", help="Fuzzy matching of the job name."),
               kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """View a job (with --name), else list jobs."""
    if name:
        vc.job_view(ctx, None, name=name, namespace=namespace, output=None, kubeconfig=kubeconfig, context=context)
        return
    vc.job_list(ctx, namespace=namespace, all_namespaces=all_namespaces, scheduler=scheduler, queue="",
                selector=selector, output=None, kubeconfig=kubeconfig, context=context)


@vqueues.command()
def vqueues_get(ctx: typer.Context, name: str = typer.Option("", "--name", "-n", help="The name of queue."),
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Show a queue (with --name), else list queues."""
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        rt = vc._rt(client, "scheduling.volcano.sh", "v1beta1", "queues")
        items = [client.get(rt, name)] if name else sorted(client.list(rt)["items"], key=lambda q: q["metadata"]["name"])
    if not items:
        typer.echo("No resources found")
        return
    vc._table(*vqueue_rows(items))


@vcancel.command()
def vcancel_job(ctx: typer.Context, name: str = _NAME, namespace: str = _NAMESPACE,
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Cancel (delete) a job."""
    if not name:
        vc._fail("job name is mandatory to cancel a particular job")
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        client.delete(vc._rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=namespace)
    typer.echo(f"cancel job {name} successfully")


def _bus(ctx: typer.Context, name: str, namespace: str, action: str, verb: str, kubeconfig: Path | None,
         context: str | None) -> None:
    """vsuspend / vresume: the bus Command of `vcctl job suspend|resume`; silent on success, as Volcano's tools."""
    if not name:
        vc._fail(f"job name is mandatory to {verb} a particular job")
    with vc._client(ctx, kubeconfig, context) as client, vc._api_errors():
        job = client.get(vc._rt(client, "batch.volcano.sh", "v1alpha1", "jobs"), name, namespace=namespace)
        vc._command(client, target=job, api_version=vc._JOB_API, namespace=namespace, action=action)


@vsuspend.command()
def vsuspend_job(ctx: typer.Context, name: str = _NAME, namespace: str = _NAMESPACE,
                 kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Suspend a job (bus Command AbortJob)."""
    _bus(ctx, name, namespace, "AbortJob", "suspend", kubeconfig, context)


@vresume.command()
def vresume_job(ctx: typer.Context, name: str = _NAME, namespace: str = _NAMESPACE,
                kubeconfig: Path | None = _KUBECONFIG, context: str | None = _CONTEXT) -> None:
    """Resume a job (bus Command ResumeJob)."""
    _bus(ctx, name, namespace, "ResumeJob", "resume", kubeconfig, context)
