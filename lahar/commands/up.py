"""`lahar up`: everything on this machine — devcluster, Redis, the webhook, dispatch, workers, scheduler, beat,
Flower and the dashboard — supervised, with a live status; `--demo` applies `examples/` and shows the jobs flow to Completed.

Thin shell over `lahar.up.Stack`: reads flags and `Settings`, installs the signal handlers, starts, runs, stops.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import typer

from lahar.commands._options import init_logging, log_format_option, log_level_option

__all__ = ["register"]

DEMO_PROFILE = "demo"


def up(
    profile: str = typer.Option(None, help="Cluster profile: cpu-small, dgx-h100, dgx-h100-superpod, mixed, demo, or a YAML file "
                                           "(default cpu-small; demo with --demo)."),
    nodes: int = typer.Option(None, help="Number of simulated nodes (default: the profile's own counts)."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Where all state lives (default .lahar)."),
    port: int = typer.Option(None, help="API server port (default 6443; 0 = any free port)."),
    demo: bool = typer.Option(False, "--demo", help="Apply examples/ once everything is up and show the jobs run."),
    workers: int = typer.Option(1, "--workers", min=1, help="Controller worker processes."),
    concurrency: int = typer.Option(2, "--concurrency", min=1, help="Reconciles in parallel per worker."),
    dashboard_port: int = typer.Option(8470, "--dashboard-port", min=0, envvar="LAHAR_DASHBOARD_PORT",
                                       help="Port of `lahar dashboard` (another free one when taken; 0: no dashboard)."),
    live: bool = typer.Option(None, "--live/--plain", help="Live status view or log lines (default: live on a TTY)."),
    sim_default_duration: str = typer.Option(None, "--sim-default-duration", metavar="DURATION",
                                             help="How long a simulated pod with restartPolicy Never/OnFailure "
                                                  "and no lahar.sh/sim-duration annotation runs, e.g. 3s "
                                                  "(default: until deleted)."),
    log_level: str = log_level_option(help_text="Log level of every process: debug, info, warning, error "
                                                "(default LAHAR_LOG_LEVEL, info; `lahar up` itself logs warnings)."),
    log_format: str = log_format_option(),
) -> None:
    """Run everything on this machine: the embedded cluster, Redis and lahar's processes, until Ctrl-C."""
    from lahar import logs
    from lahar import up as ups
    from lahar.settings import Settings

    try:
        sim_default = ups.parse_sim_duration(sim_default_duration)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--sim-default-duration") from e
    s = Settings()
    children_level = init_logging(log_level, log_format)
    json_logs = logs.check_format(None) == "json"
    if log_level is None:  # up's own log: warnings; its status lines are its output; the children log at the level
        logging.getLogger().setLevel(logging.WARNING)
    opts = ups.Options(
        data_dir=data_dir or s.data_dir,
        port=s.devcluster_port if port is None else port,
        profile=profile or (DEMO_PROFILE if demo else s.profile),
        nodes=nodes if nodes is not None or demo else s.nodes,
        redis_url=s.redis_url,
        workers=workers,
        concurrency=concurrency,
        demo=demo,
        flower_port=s.flower_port,
        dashboard_port=dashboard_port,
        log_level=children_level,
        live=False if json_logs else live,
        sim_default_duration=sim_default,
    )
    status = logging.getLogger("lahar.up.status")
    status.setLevel(logging.INFO)
    stack = ups.Stack(opts, out=(lambda msg: status.info("%s", msg)) if json_logs else None)
    stopping = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)
        stack.stop_event.set()
        if len(stopping) == 1:
            raise KeyboardInterrupt  # interrupt a start in progress; run() just returns

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        try:
            stack.start()
        except ups.RedisMissing as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from e
        except (RuntimeError, OSError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from e
        stack.run()
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean stop short
        say = (lambda msg: status.info("%s", msg)) if json_logs else (lambda msg: typer.echo(msg, err=True))
        say("stopping lahar: processes, then devcluster, then Redis…")
        stack.stop()
        say("stopped.")


def register(app: typer.Typer) -> None:
    app.command()(up)
