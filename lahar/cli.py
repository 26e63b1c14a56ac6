"""The `lahar` command line: one sub-command per process of ARCHITECTURE.md's table.

Thin shells only: each command reads `Settings`, wires the layers and runs; no decisions live here.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path

import typer
from rich.console import Console

from lahar import __version__, commands
from lahar.commands._options import init_logging, log_format_option, log_level_option
from lahar.settings import Settings

__all__ = ["app", "decorated"]

def decorated() -> bool:
    """Colour, boxes and rich help only on a terminal (and not under NO_COLOR); piped output is plain text."""
    return sys.stdout.isatty() and sys.stderr.isatty() and not os.environ.get("NO_COLOR")


app = typer.Typer(add_completion=False, no_args_is_help=True, help="lahar: Volcano-compatible batch scheduling.",
                  rich_markup_mode="rich" if decorated() else None, pretty_exceptions_enable=decorated())
console = Console(stderr=True)


def _wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass


def _banner(cluster, *, title: str) -> None:  # noqa: ANN001 - devcluster.runtime.Cluster
    kubeconfig = Path(cluster.kubeconfig).resolve()
    console.print(f"[bold green]{title}[/] API server at {cluster.url}")
    console.print(f"  nodes: {len(cluster.node_names)} ({cluster.profile_name})")
    console.print("  point kubectl at it:")
    console.print(f"    [bold]kubectl --kubeconfig {kubeconfig} get nodes[/]")
    console.print(f"    or: export KUBECONFIG={kubeconfig}")
    console.print("  Ctrl-C stops it; the state stays in the data dir for the next start.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                         help="Print lahar's version and exit.")) -> None:
    """lahar: Volcano-compatible batch scheduling."""


@app.command()
def version() -> None:
    """Print lahar's version."""
    typer.echo(__version__)


@app.command()
def devcluster(
    port: int = typer.Option(None, help="HTTPS port on loopback (default 6443, 0 = any free port)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    data_dir: Path = typer.Option(None, "--data-dir", help="State, certificates and kubeconfig (default .lahar)."),
    profile: str = typer.Option(None, help="Cluster profile: cpu-small, dgx-h100, dgx-h100-superpod, mixed, or a YAML file."),
    nodes: int = typer.Option(None, help="Number of simulated nodes."),
    sim_default_duration: str = typer.Option(None, "--sim-default-duration", metavar="DURATION",
                                             help="How long a simulated pod with restartPolicy Never/OnFailure "
                                                  "and no lahar.sh/sim-duration annotation runs, e.g. 3s "
                                                  "(default: until deleted)."),
    log_level: str = log_level_option(),
    log_format: str = log_format_option(),
) -> None:
    """Run the embedded Kubernetes-compatible API server with simulated nodes."""
    from lahar import logs
    from lahar.devcluster import runtime
    from lahar.up import parse_sim_duration

    init_logging(log_level, log_format)

    try:
        sim_default = parse_sim_duration(sim_default_duration)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--sim-default-duration") from e

    settings = Settings()
    cluster = runtime.Cluster(
        data_dir=data_dir or settings.data_dir,
        host=host,
        port=settings.devcluster_port if port is None else port,
        profile=profile or settings.profile,
        nodes=settings.nodes if nodes is None else nodes,
        sim_default_duration=sim_default,
    )
    cluster.start()
    json_logs = logs.check_format(None) == "json"
    log = logging.getLogger("lahar.devcluster")
    try:
        if json_logs:
            log.warning("lahar devcluster is up", extra={"api": cluster.url, "kubeconfig": str(cluster.kubeconfig),
                                                         "nodes": len(cluster.node_names),
                                                         "profile": cluster.profile_name})
        else:
            _banner(cluster, title="lahar devcluster is up.")
        _wait_for_signal()
    finally:
        log.warning("stopping") if json_logs else console.print("stopping…")
        cluster.stop()


commands.register_all(app)


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
