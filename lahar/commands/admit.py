"""`lahar admit`: lahar's admission rules offline, the gate a CI pipeline runs on manifests.

`--review review.json` answers one AdmissionReview (from the handler of `--path`, else the whole chain of its
resource); `-f manifests.yaml` sends each object through mutate then validate as a CREATE and prints one line per
object, exiting 1 if any is denied. Thin shell over `webhooks.routes` with `StaticLookups` from `--state`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _manifest_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if str(path) == "-":
            out.append(path)
        elif path.is_dir():
            out.extend(sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            raise typer.BadParameter(f"{path}: no such file or directory", param_hint="-f")
    return out


def _objects(path: Path) -> list[dict]:
    from lahar.commands.webhook import load_objects

    return load_objects(path)


def _label(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "<no name>")
    return f"{obj.get('kind') or '<no kind>'}/{name}"


def _review_mode(review_file: Path, path: str | None, lookups: Any, config: Any) -> None:
    import orjson
    import yaml

    from lahar.webhooks import review, routes

    try:
        data = yaml.safe_load(review_file.read_text())
        parsed = review.parse(data)
    except (yaml.YAMLError, review.ReviewError) as e:
        typer.echo(f"error: {review_file}: {e}", err=True)
        raise typer.Exit(2) from None
    table = routes.default_routes()
    req = parsed.request
    if path is not None:
        route = table.get(path)
        if route is None:
            typer.echo(f"error: no admission webhook at {path}; lahar serves {', '.join(sorted(table))}", err=True)
            raise typer.Exit(2)
        verdict, _ = routes.admit(route, req, lookups, config)
    else:
        mutators, validators = routes.chain(req.resource, table)
        if not mutators and not validators:
            typer.echo(f"error: no lahar webhook admits {req.resource!r}; use --path to pick one", err=True)
            raise typer.Exit(2)
        verdict = routes.run_chain(req, lookups, config, mutators, validators)
    typer.echo(orjson.dumps(review.response(parsed.api_version, req.uid, verdict), option=orjson.OPT_INDENT_2))
    if not verdict.allowed:
        raise typer.Exit(1)


def _manifest_mode(files: list[Path], lookups: Any, config: Any, output: str) -> None:
    import orjson

    from lahar.webhooks import routes

    table = routes.default_routes()
    results: list[dict] = []
    denied = 0
    for file in _manifest_files(files):
        for obj in _objects(file):
            label = _label(obj)
            outcome = routes.admit_object(obj, lookups, config, table)
            if outcome is None:  # no lahar webhook for this kind: the API server would not ask us
                results.append({"object": label, "allowed": True, "message": "", "warnings": [], "patch": []})
                continue
            req, verdict = outcome
            if verdict.allowed and hasattr(lookups, "add"):
                import jsonpatch

                # later objects see this one, as they would after `kubectl apply` of the same file
                lookups.add(jsonpatch.apply_patch(req.object, list(verdict.patch)) if verdict.patch else req.object)
            denied += not verdict.allowed
            results.append({"object": label, "namespace": req.namespace, "allowed": verdict.allowed,
                            "message": verdict.message.strip(), "warnings": list(verdict.warnings),
                            "patch": list(verdict.patch)})
    if output == "json":
        typer.echo(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    else:
        for r in results:
            for w in r["warnings"]:
                typer.echo(f"Warning: {r['object']}: {w}", err=True)
            typer.echo(f"{r['object']}: allowed" if r["allowed"] else f"{r['object']}: denied: {r['message']}")
    if denied:
        raise typer.Exit(1)


def admit(
    review_file: Path = typer.Option(None, "--review", exists=True, dir_okay=False,
                                     help="An AdmissionReview (JSON or YAML) to answer; prints the response."),
    path: str = typer.Option(None, "--path", help="With --review: only this webhook path (e.g. /jobs/validate); "
                                                  "default: every mutating then validating webhook of the resource."),
    files: list[Path] = typer.Option([], "-f", "--filename", help="Manifests (files, directories, or - for stdin) "
                                                                  "to admit as CREATE; repeatable."),
    state: Path = typer.Option(None, "--state", exists=True, dir_okay=False,
                               help="Cluster objects the rules look up (queues, namespaces, jobs, podgroups, "
                                    "priorityclasses); without it, builtin `root` and `default` queues exist."),
    output: str = typer.Option("text", "-o", "--output", help="With -f: text or json (json includes the patches)."),
) -> None:
    """Run lahar's admission rules offline: exit 0 when everything is allowed, 1 when anything is denied."""
    from lahar.commands.webhook import admission_config, load_objects
    from lahar.webhooks.lookups import StaticLookups

    if (review_file is None) == (not files):
        raise typer.BadParameter("give exactly one of --review or -f")
    if output not in ("text", "json"):
        raise typer.BadParameter("must be text or json", param_hint="-o")
    if path is not None and review_file is None:
        raise typer.BadParameter("--path goes with --review", param_hint="--path")
    lookups = StaticLookups(load_objects(state) if state is not None else ())
    config = admission_config()
    if review_file is not None:
        _review_mode(review_file, path, lookups, config)
    else:
        _manifest_mode(files, lookups, config, output)


def register(app: typer.Typer) -> None:
    app.command()(admit)
