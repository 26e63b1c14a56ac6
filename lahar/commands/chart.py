"""`lahar chart render`: the Helm chart's objects (deploy/helm/lahar) as YAML, rendered without the helm binary.

Thin shell over `lahar.chart.render_objects`; values as helm takes them (`-f values.yaml`, `--set a.b=c`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

chart_app = typer.Typer(no_args_is_help=True, help="lahar's Helm chart, rendered without helm.")


def parse_set(item: str) -> dict[str, Any]:
    """`a.b=c` -> {"a": {"b": c}}, the value read as YAML (true, 3, [x]) like helm's --set for simple values."""
    import yaml

    key, sep, raw = item.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise typer.BadParameter(f"--set {item!r}: expected key.path=value")
    value: Any = yaml.safe_load(raw) if raw else ""
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


@chart_app.command()
def render(
    values: list[Path] = typer.Option([], "--values", "-f", exists=True, dir_okay=False, help="Values files."),
    sets: list[str] = typer.Option([], "--set", help="key.path=value (after the values files)."),
    include_crds: bool = typer.Option(True, "--include-crds/--no-crds", help="Also print crds/."),
    chart_dir: Path = typer.Option(None, "--chart", file_okay=False, exists=True,
                                   help="Chart folder (default: the chart shipped with lahar)."),
) -> None:
    """Print every object the chart renders, in install order."""
    import yaml

    from lahar import chart as charts
    from lahar import data

    merged: dict[str, Any] = {}
    for path in values:
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise typer.BadParameter(f"{path}: a values file must be a mapping")
        merged = charts.merge(merged, loaded)
    for item in sets:
        merged = charts.merge(merged, parse_set(item))
    try:
        objs = charts.render_objects(chart_dir or data.deploy("helm", "lahar"), values=merged,
                                     include_crds=include_crds)
    except charts.ChartError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(chart_app, name="chart")
