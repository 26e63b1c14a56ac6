"""`lahar policy`: users' AdmissionPolicies offline (`test`) and against a cluster's existing objects (`report`).

`test -p policies.yaml -f manifests.yaml` prints one verdict per object and exits 1 on any denial (a CI gate);
`report` is the background audit of Kyverno/Gatekeeper: every policy against every existing object it matches.
Thin shells over `policies.admission_policies` and `policies.loading`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

policy_app = typer.Typer(help="Users' AdmissionPolicies (CEL): test them on manifests, report violations in a "
                              "cluster.", no_args_is_help=True)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
_KUBECONFIG = typer.Option(None, "--kubeconfig", "-k", help="Path to the kubeconfig file (default: KUBECONFIG, "
                                                             "then ~/.kube/config).")


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")


def _files(paths: list[Path], hint: str) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if str(path) == "-":
            out.append(path)
        elif path.is_dir():
            out.extend(sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            raise typer.BadParameter(f"{path}: no such file or directory", param_hint=hint)
    return out


def _objects(paths: list[Path], hint: str) -> list[dict]:
    from lahar.commands.webhook import load_objects

    out: list[dict] = []
    for f in _files(paths, hint):
        try:
            out.extend(load_objects(f))
        except Exception as e:  # yaml.YAMLError, typer.BadParameter
            typer.echo(f"error: {f}: {e}", err=True)
            raise typer.Exit(2) from None
    return out


def _load_policies(paths: list[Path]) -> list[Any]:
    from lahar.policies import loading
    from lahar.policies.errors import ConfigError

    docs = _objects(paths, "-p")
    try:
        found = loading.policies_from_documents(docs, source=", ".join(str(p) for p in paths))
    except ConfigError as e:
        typer.echo(f"error: invalid policy: {e.source}", err=True)
        for path, reason in e.errors:
            typer.echo(f"  {path}: {reason}", err=True)
        raise typer.Exit(2) from None
    if not found:
        typer.echo(f"error: no AdmissionPolicy found in {', '.join(map(str, paths))}", err=True)
        raise typer.Exit(2)
    return found


def _label(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "<no name>")
    return f"{obj.get('kind') or '<no kind>'}/{name}"


def _by_name(objects: list[dict], kind: str) -> dict[str, dict]:
    return {(o.get("metadata") or {}).get("name"): o for o in objects if o.get("kind") == kind}


@policy_app.command("test")
def test(
    policy_files: list[Path] = typer.Option(..., "--policies", "-p", help="AdmissionPolicy documents, or the "
                                             "ConfigMaps holding them (files or directories; repeatable)."),
    manifests: list[Path] = typer.Option(..., "--filename", "-f", help="Objects to check (files, directories or "
                                          "'-'; repeatable). Each is reviewed as a CREATE."),
    state: list[Path] = typer.Option([], "--state", help="Existing objects the policies may look at (Queues "
                                     "for queueObject, Namespaces for namespaceSelector/namespaceObject)."),
    show_patch: bool = typer.Option(False, "--patch", help="Print the JSONPatch of mutating policies."),
) -> None:
    """Print `<kind>/<name>: allowed | warned: <message> | denied: <message>` per object; exit 1 on any denial."""
    import orjson

    from lahar.policies import admission_policies as ap

    policies = ap.PolicySet.of(_load_policies(policy_files))
    objects = _objects(manifests, "-f")
    known = [*_objects(state, "--state"), *objects]
    queues, namespaces = _by_name(known, "Queue"), _by_name(known, "Namespace")
    denied = False
    for obj in objects:
        request = ap.request_for_object(obj)
        stage = ap.policy_stage(policies, request, namespace_obj=namespaces.get(request["namespace"]),
                                queue_lookup=queues.get, budget_seconds=None)
        if stage.denials:
            denied = True
            line = "denied: " + "; ".join(r.denial() for r in stage.denials)
        elif stage.warnings:
            line = "warned: " + "; ".join(stage.warnings)
        else:
            line = "allowed"
        typer.echo(f"{_label(obj)}: {line}")
        if show_patch and stage.patches:
            typer.echo(f"  patch: {orjson.dumps(stage.patches).decode()}")
    raise typer.Exit(1 if denied else 0)


@contextmanager
def _client(ctx: typer.Context, kubeconfig: Path | None) -> Iterator[Any]:
    obj = ctx.find_root().obj or {}
    if isinstance(obj, dict) and obj.get("client") is not None:
        yield obj["client"]
        return
    from lahar.kube import kubeconfig as kc
    from lahar.kube.rest import RestClient

    client = RestClient(kc.load(kubeconfig))
    try:
        yield client
    finally:
        client.close()


def _cluster_policies(client: Any) -> tuple[list[Any], list[str]]:
    """Every policy ConfigMap in the cluster → (policies, errors of the ConfigMaps that were rejected)."""
    from lahar.policies import loading

    rt = client.registry.get("", "v1", "configmaps")
    cms = client.list(rt, label_selector=f"{loading.POLICY_LABEL}=true")["items"]
    loader = loading.PolicyLoader(param_lookup=lambda ns, name: _get(client, rt, ns, name))
    problems: list[str] = []
    for cm in cms:
        outcome = loader.apply(cm)
        if outcome.error is not None:
            problems.append(str(outcome.error))
    return list(loader.current()), problems


def _get(client: Any, rt: Any, namespace: str, name: str) -> dict | None:
    from lahar.kube import errors

    try:
        return client.get(rt, name, namespace=namespace or None)
    except errors.ApiError:
        return None


def _types_for(client: Any, policies: list[Any]) -> list[Any]:
    """The served resource types some policy's resourceRules can match (main resources, listable)."""
    from lahar.policies import admission_policies as ap

    out = []
    for rt in client.registry:
        if "list" not in rt.verbs:
            continue
        probe = ap.request_for_object({"apiVersion": rt.api_version, "kind": rt.kind,
                                       "metadata": {"name": "x", "namespace": "default" if rt.namespaced else ""}},
                                      registry=client.registry)
        probe["resource"]["resource"] = rt.plural
        if not rt.namespaced:
            probe["namespace"] = ""
        if any(rule.matches(ap.normalize(probe)) for p in policies
               for rule in p.spec.match_constraints.resource_rules):
            out.append(rt)
    return out


@policy_app.command("report")
def report(
    ctx: typer.Context,
    policy_files: list[Path] = typer.Option([], "--policies", "-p", help="Check these policies instead of the "
                                            "cluster's policy ConfigMaps."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Only objects in this namespace."),
    kubeconfig: Path | None = _KUBECONFIG,
) -> None:
    """Evaluate every policy against the existing objects it matches and print a table of violations."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from lahar.kube import errors
    from lahar.policies import admission_policies as ap

    console = Console(width=200, soft_wrap=True)
    with _client(ctx, kubeconfig) as client:
        try:
            if policy_files:
                found, problems = _load_policies(policy_files), []
            else:
                found, problems = _cluster_policies(client)
            for text in problems:
                typer.echo(f"warning: policy ConfigMap rejected: {text}", err=True)
            policies = ap.PolicySet.of(found)
            rows: list[tuple[str, str, str, str]] = []
            checked = 0
            ns_rt = client.registry.get("", "v1", "namespaces")
            namespaces = {n["metadata"]["name"]: n for n in client.list(ns_rt)["items"]} if ns_rt else {}
            q_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")
            queues = {q["metadata"]["name"]: q for q in client.list(q_rt)["items"]} if q_rt else {}
            for rt in _types_for(client, list(policies)):
                items = client.list(rt, namespace=namespace if rt.namespaced else None)["items"]
                for obj in items:
                    obj = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
                    checked += 1
                    request = ap.request_for_object(obj, registry=client.registry)
                    results = ap.evaluate(policies, request, namespace_obj=namespaces.get(request["namespace"]),
                                          queue_lookup=queues.get)
                    meta = obj.get("metadata") or {}
                    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
                    for r in results:
                        if r.kind == "mutation":
                            continue
                        actions = ",".join(a.value for a in r.actions)
                        rows.append((r.policy, actions, f"{rt.kind} {where}", r.message))
        except errors.ApiError as e:
            typer.echo(f"Error: {e}", err=True)
            raise typer.Exit(1) from None
    if rows:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for col in ("POLICY", "ACTIONS", "OBJECT", "MESSAGE"):
            table.add_column(col, overflow="fold")
        for row in sorted(rows):
            table.add_row(*row)
        console.print(table)
    console.print(f"{len(rows)} violation(s) in {checked} object(s) checked against {len(policies)} policies")
