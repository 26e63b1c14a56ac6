"""`lahar explain pod NS/NAME`: why a pending pod is (not) placed — per node, each topology hint provider's hints,
the merged hint, the Topology Manager's admit decision and the first reason the node was rejected.

Thin shell: lists the cluster once, opens a scheduling session on it (no action runs, nothing is written) and
prints `scheduler.placement.explain` for the pod.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

__all__ = ["register", "render"]


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
                c = confs.load(conf.read_text(), actions=registry.action_names, plugins=registry.plugin_names)
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
