"""`lahar explain pod NS/NAME`: why a pending pod is (not) placed — per node, each topology hint provider's hints,
the merged hint, the Topology Manager's admit decision and the first reason the node was rejected.

`lahar explain job -f job.yaml` (volcano#4738): without submitting it, whether a Volcano Job would be admitted
(lahar's webhooks, with the cluster's queues), enqueued and placed now, and if not what blocks it (the denial, the
queue's state or capability, the enqueue vote, the resource a pod lacks). It lists the cluster once, copies it
into an in-memory cluster and runs the job controller and two scheduling sessions there: nothing is written to the
cluster. `explain_job` is the pure verdict over what that run saw.

Thin shells: both list the cluster once; `pod` opens a scheduling session on it (no action runs, nothing is
written) and prints `scheduler.placement.explain` for the pod.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import typer

__all__ = ["JobExplanation", "explain_job", "queue_blocker", "register", "render", "render_job"]


@dataclass(frozen=True)
class JobExplanation:
    """The three answers of `lahar explain job` and, for the first "no", what blocks it."""

    admitted: bool
    enqueued: bool
    placed: bool
    blocked_by: str = ""
    bound: int = 0
    min_available: int = 0


def queue_blocker(queue_name: str, queue: Mapping[str, Any] | None, *, requested: Mapping[str, str],
                  allocated: Mapping[str, str]) -> str:
    """Why the queue cannot take `requested` (the PodGroup's minResources) now, or "": missing, not Open, or a
    resource whose `spec.capability` is below what the queue holds plus the request."""
    from lahar.kube import quantity

    if queue is None:
        return f"queue {queue_name} does not exist"
    state = (queue.get("status") or {}).get("state") or "Open"
    if state != "Open":
        return f"queue {queue_name} is {state}"
    capability = (queue.get("spec") or {}).get("capability") or {}
    for res in sorted(requested):
        if res not in capability:
            continue
        want = quantity.parse(allocated.get(res, "0")) + quantity.parse(requested[res])
        if want > quantity.parse(capability[res]):
            return (f"queue {queue_name} capability {res}: {capability[res]} < allocated {allocated.get(res, '0')} "
                    f"+ requested {requested[res]}")
    return ""


def explain_job(*, denial: str | None, queue_block: str, phase: str, pg_message: str, bound: int,
                min_available: int, pod_reasons: Sequence[str] = ()) -> JobExplanation:
    """The verdict: admitted unless denied; enqueued when the PodGroup left Pending; placed when at least
    minAvailable pods were bound. `blocked_by` names the first "no": the denial, the queue, the scheduler's
    PodGroup message (the enqueue vote or the gang), or the first reason a pod was not placed."""
    if denial is not None:
        return JobExplanation(False, False, False, f"admission: {denial}", 0, min_available)
    enqueued = phase not in ("", "Pending")
    if not enqueued:
        why = queue_block or pg_message or "the enqueue vote: not enough idle resources in the cluster or the queue"
        return JobExplanation(True, False, False, why, bound, min_available)
    if bound >= min_available:
        return JobExplanation(True, True, True, "", bound, min_available)
    why = next((r for r in pod_reasons if r), "") or pg_message or queue_block or "no node fits the gang"
    return JobExplanation(True, True, False, why, bound, min_available)


def render_job(name: str, e: JobExplanation) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"
    lines = [f"job {name}", f"  admitted: {yes(e.admitted)}", f"  enqueued: {yes(e.enqueued)}",
             f"  placed:   {yes(e.placed)} ({e.bound}/{e.min_available} pods bound)"]
    if e.blocked_by:
        lines.append(f"  blocked by: {e.blocked_by}")
    return "\n".join(lines) + "\n"


def _hint(h: dict[str, Any] | None) -> str:
    if not h:
        return "-"
    aff = h.get("affinity")
    nodes = "nil" if aff is None else "{" + ",".join(map(str, aff)) + "}"
    return f"{nodes}{'' if h.get('preferred') else ' (not preferred)'}"


def render(pod: str, entries: list[dict[str, Any]]) -> str:
    """A human-readable table of `explain` entries."""
    lines = [f"pod {pod}"]
    for e in entries:
        verdict = "ok" if not e.get("rejected") else f"rejected: {e['rejected']}"
        policy = f" policy={e['policy']}" if e.get("policy") else ""
        lines.append(f"  node {e['node']}: {verdict}{policy}")
        for m in e.get("merges") or ():
            lines.append(f"    merge {m['container']}: hint {_hint(m.get('hint'))}, "
                         f"admit {'yes' if m.get('admit') else 'no'}")
            for res, hints in (m.get("providers") or {}).items():
                shown = "no preference" if hints is None else (", ".join(_hint(h) for h in hints) or "[] (cannot)")
                lines.append(f"      {res}: {shown}")
        if e.get("numa"):
            lines.append(f"    numa {e['numa']} cpus {e.get('cpus') or {}}")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    explain_app = typer.Typer(help="Explain scheduling decisions.", no_args_is_help=True)
    app.add_typer(explain_app, name="explain")

    @explain_app.command("job")
    def job(
        filename: Path = typer.Option(..., "--filename", "-f", help="The Volcano Job manifest ('-': stdin)."),
        namespace: str = typer.Option(None, "--namespace", "-n", help="Namespace (default: the manifest's, else "
                                                                      "default)."),
        kubeconfig: Path = typer.Option(None, "--kubeconfig", "-k",
                                        help="Path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config)."),
        conf: Path = typer.Option(None, "--conf", exists=True, dir_okay=False,
                                  help="A volcano-scheduler.conf (default: Volcano's default)."),
        output: str = typer.Option("text", "--output", "-o", help="text or json."),
    ) -> None:
        """Would this Job be admitted, enqueued and placed now, and if not what blocks it. Submits nothing."""
        import jsonpatch

        from lahar.kube import kubeconfig as kc
        from lahar.kube.resources import ResourceType, in_tree
        from lahar.kube.rest import RestClient
        from lahar.scheduler.framework import conf as confs
        from lahar.scheduler.registry import in_tree_registry
        from lahar.scheduler.session import list_objects
        from lahar.webhooks import routes
        from lahar.webhooks.lookups import StaticLookups

        try:
            manifest = _load_job(filename)
        except (OSError, ValueError) as e:
            typer.echo(f"error: {filename}: {e}", err=True)
            raise typer.Exit(2) from e
        meta = dict(manifest.get("metadata") or {})
        meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name"):
            typer.echo(f"error: {filename}: metadata.name is required", err=True)
            raise typer.Exit(2)
        manifest = {**manifest, "metadata": meta}
        registry = in_tree_registry()
        try:
            c = (registry.load_conf(conf.read_text()) if conf is not None
                 else confs.default_conf(registry.plugin_names))
        except confs.ConfError as e:
            typer.echo(f"error: {conf}: {e}", err=True)
            raise typer.Exit(2) from e
        kinds = in_tree()
        if kinds.get("scheduling.koordinator.sh", "v1alpha1", "devices") is None:
            kinds.add(ResourceType("scheduling.koordinator.sh", "v1alpha1", "Device", "devices", False))
        client = RestClient(kc.load(str(kubeconfig) if kubeconfig else None), registry=kinds)
        try:
            objects = list_objects(client)
            ns_rt = client.registry.get("", "v1", "namespaces")
            namespaces = list(client.list(ns_rt)["items"]) if ns_rt is not None else []
        finally:
            client.close()
        lookups = StaticLookups([*objects["queues"], *objects["podgroups"], *namespaces,
                                 *objects["priority_classes"]], builtin_queues=False)
        from lahar.commands.webhook import admission_config

        outcome = routes.admit_object(manifest, lookups, admission_config())
        denial = None
        admitted = manifest
        if outcome is not None:
            _, verdict = outcome
            if not verdict.allowed:
                denial = verdict.message
            elif verdict.patch:
                admitted = jsonpatch.apply_patch(manifest, list(verdict.patch))
        name = f"{meta['namespace']}/{meta['name']}"
        if denial is not None:
            result = explain_job(denial=denial, queue_block="", phase="", pg_message="", bound=0,
                                 min_available=int((manifest.get("spec") or {}).get("minAvailable") or 0))
        else:
            seen = _what_if(objects, admitted, c, registry)
            queue_name = (admitted.get("spec") or {}).get("queue") or "default"
            queue = next((q for q in objects["queues"] if q["metadata"]["name"] == queue_name), None)
            block = queue_blocker(queue_name, queue, requested=seen["min_resources"],
                                  allocated=((queue or {}).get("status") or {}).get("allocated") or {})
            result = explain_job(denial=None, queue_block=block, phase=seen["phase"], pg_message=seen["pg_message"],
                                 bound=seen["bound"], pod_reasons=seen["pod_reasons"],
                                 min_available=int((admitted.get("spec") or {}).get("minAvailable") or 0))
        if output == "json":
            sys.stdout.write(json.dumps({"job": name, **asdict(result)}, indent=2) + "\n")
        else:
            sys.stdout.write(render_job(name, result))
        if not result.placed:
            raise typer.Exit(1)

    @explain_app.command("pod")
    def pod(
        name: str = typer.Argument(..., help="NAMESPACE/NAME of the pod."),
        kubeconfig: Path = typer.Option(None, "--kubeconfig", "-k",
                                        help="Path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config)."),
        conf: Path = typer.Option(None, "--conf", exists=True, dir_okay=False,
                                  help="A volcano-scheduler.conf (default: Volcano's default plus numa-aware and "
                                       "deviceshare)."),
        output: str = typer.Option("text", "--output", "-o", help="text or json."),
    ) -> None:
        """Per node: the hints of each provider, the merged hint, admit, and the first reason the node was rejected."""
        from lahar.kube import kubeconfig as kc
        from lahar.kube.rest import RestClient
        from lahar.scheduler.framework import conf as confs
        from lahar.scheduler.framework import snapshot as snapshots
        from lahar.scheduler.framework.session import Session
        from lahar.scheduler.placement import explain
        from lahar.scheduler.registry import in_tree_registry
        from lahar.scheduler.session import list_objects

        namespace, _, pod_name = name.rpartition("/")
        namespace = namespace or "default"
        registry = in_tree_registry()
        try:
            if conf is not None:
                c = registry.load_conf(conf.read_text())
            else:
                c = _with_topology(confs.default_conf(registry.plugin_names), registry)
        except confs.ConfError as e:
            typer.echo(f"error: {conf}: {e}", err=True)
            raise typer.Exit(2) from e
        from lahar.kube.resources import ResourceType, in_tree

        kinds = in_tree()
        if kinds.get("scheduling.koordinator.sh", "v1alpha1", "devices") is None:  # Koordinator Device inventory
            kinds.add(ResourceType("scheduling.koordinator.sh", "v1alpha1", "Device", "devices", False))
        client = RestClient(kc.load(str(kubeconfig) if kubeconfig else None), registry=kinds)
        try:
            snap = snapshots.build(**list_objects(client))
        finally:
            client.close()
        task = next((t for t in snap.tasks.values() if t.namespace == namespace and t.name == pod_name), None)
        if task is None:
            typer.echo(f"error: pod {namespace}/{pod_name} is not a pending pod of a PodGroup this scheduler "
                       "serves", err=True)
            raise typer.Exit(1)
        ssn = Session(snap, c, registry, uid="explain")
        entries = explain(ssn, task)
        if output == "json":
            sys.stdout.write(json.dumps({"pod": task.key, "nodes": entries}, indent=2) + "\n")
        else:
            sys.stdout.write(render(task.key, entries))


_SERVER_FIELDS = ("resourceVersion", "managedFields", "selfLink", "generation")
_SEED_ORDER = ("priority_classes", "queues", "nodes", "numatopologies", "devices", "hypernodes",
               "poddisruptionbudgets", "storageclasses", "csinodes", "csidrivers",
               "csistoragecapacities", "persistentvolumes", "persistentvolumeclaims",
               "podgroups", "pods")


def _seed(mem: Any, objects: Mapping[str, list[dict[str, Any]]]) -> None:
    """Copy the listed cluster into the in-memory one (server-set fields dropped, statuses kept)."""
    import contextlib

    from lahar.kube import errors

    ns_rt = mem.registry.get("", "v1", "namespaces")
    made: set[str] = set()
    for key in _SEED_ORDER:
        for obj in objects.get(key) or ():
            rt = mem.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
            if rt is None:
                continue
            meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
            ns = meta.get("namespace") if rt.namespaced else None
            if ns and ns not in made:
                made.add(ns)
                with contextlib.suppress(errors.AlreadyExists):
                    mem.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            with contextlib.suppress(errors.ApiError):
                created = mem.create(rt, {**obj, "metadata": meta}, namespace=ns)
                if obj.get("status") and "status" in rt.subresources:
                    created["status"] = obj["status"]
                    mem.update_status(rt, created, namespace=ns)


def _what_if(objects: Mapping[str, list[dict[str, Any]]], job: dict[str, Any], conf: Any,
             registry: Any) -> dict[str, Any]:
    """The job controller and two sessions (enqueue, then allocate) on an in-memory copy of the cluster."""
    from lahar.controllers import jobs
    from lahar.controllers.context import Context
    from lahar.kube.apiserver.memory import MemoryClient
    from lahar.kube.models import labels
    from lahar.kube.resources import ResourceType
    from lahar.scheduler.session import run_once

    mem = MemoryClient.with_crds()
    if mem.registry.get("scheduling.koordinator.sh", "v1alpha1", "devices") is None:
        mem.store.register_type(ResourceType("scheduling.koordinator.sh", "v1alpha1", "Device", "devices", False))
    _seed(mem, objects)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    ns_rt = mem.registry.get("", "v1", "namespaces")
    if not any(n["metadata"]["name"] == ns for n in mem.list(ns_rt)["items"]):
        mem.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    job_rt = mem.registry.get("batch.volcano.sh", "v1alpha1", "jobs")
    mem.create(job_rt, job, namespace=ns)
    ctx = Context(client=mem)
    for _ in range(2):  # enqueue, then allocate; the job controller creates the PodGroup, then the pods
        for _ in range(2):
            jobs.reconcile(ctx, ns, name)
        run_once(mem, conf, registry=registry, workers=2)
    pg_rt = mem.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    pgs = [p for p in mem.list(pg_rt, namespace=ns)["items"]
           if any(r.get("kind") == "Job" and r.get("name") == name for r in p["metadata"].get("ownerReferences") or ())]
    pg = pgs[0] if pgs else {}
    pods = [p for p in mem.list(mem.registry.get("", "v1", "pods"), namespace=ns)["items"]
            if ((p["metadata"].get("annotations") or {}).get(labels.GROUP_NAME_ANNOTATION) == pg.get("metadata", {})
                .get("name"))]
    reasons = [c.get("message") or c.get("reason") or "" for p in pods if not p["spec"].get("nodeName")
               for c in (p.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"]
    status = pg.get("status") or {}
    message = next((c.get("message") or c.get("reason") or "" for c in reversed(status.get("conditions") or [])
                    if c.get("status") == "True" and c.get("type") == "Unschedulable"), "")
    return {"phase": status.get("phase", ""), "pg_message": message, "min_resources": dict(
        (pg.get("spec") or {}).get("minResources") or {}), "bound": sum(1 for p in pods if p["spec"].get("nodeName")),
        "pod_reasons": reasons}


def _load_job(path: Path) -> dict[str, Any]:
    import yaml

    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    jobs = [d for d in docs if d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith("batch.volcano.sh/")]
    if len(jobs) != 1:
        raise ValueError(f"expected one batch.volcano.sh Job, found {len(jobs)}")
    return jobs[0]


def _with_topology(conf: Any, registry: Any) -> Any:
    """The default configuration with numa-aware and deviceshare appended to its last tier when missing."""
    import yaml

    from lahar.scheduler.framework import conf as confs

    tiers = [[{"name": p.name, **({"arguments": dict(p.arguments)} if p.arguments else {})} for p in t.plugins]
             for t in conf.tiers]
    have = {p["name"] for t in tiers for p in t}
    for name in ("numa-aware", "deviceshare"):
        if name not in have:
            tiers[-1].append({"name": name})
    text = yaml.safe_dump({"actions": ", ".join(conf.actions), "tiers": [{"plugins": t} for t in tiers]})
    return confs.load(text, actions=registry.action_names, plugins=registry.plugin_names)
