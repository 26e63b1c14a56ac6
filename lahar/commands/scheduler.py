"""`lahar scheduler` (the Celery worker on queue `scheduling` that runs sessions) and `lahar simulate`
(sessions in-process on objects from a file)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import typer

from lahar.commands._options import celery_globals, init_logging, log_format_option, log_level_option

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command()
    def scheduler(
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
        metrics_port: int = typer.Option(0, help="Serve Prometheus metrics on this port (0 = off)."),
        once: bool = typer.Option(False, help="Run one session now and exit (no Celery, no lease)."),
        sync_timeout: float = typer.Option(600.0, "--sync-timeout", min=0,
                                           help="With --once: seconds to wait for the informers to sync."),
    ) -> None:
        """Run scheduling sessions: a Celery worker on queue `scheduling` (concurrency 1, informer cache in memory)."""
        import redis

        from lahar.kube import kubeconfig
        from lahar.kube.rest import RestClient
        from lahar.scheduler import tasks
        from lahar.settings import Settings

        s = Settings()
        level = init_logging(loglevel, log_format)
        log = logging.getLogger("lahar.scheduler")
        client = RestClient(kubeconfig.load(str(s.kubeconfig) if s.kubeconfig else None))
        lease = None
        if s.redis_url and not once:
            lease = tasks.RedisLease(redis.Redis.from_url(s.redis_url), ttl_seconds=tasks.lease_ttl(s.schedule_period))
        runner = tasks.Runner(client, lease=lease, conf_namespaces=tasks.conf_namespaces(s))
        if metrics_port:  # before the sync, so lahar_scheduler_cache_synced shows the wait
            from prometheus_client import start_http_server
            start_http_server(metrics_port, registry=runner.metrics.registry)
        if not runner.start():  # sessions wait for the sync (Runner.tick); say what is slow
            log.warning("scheduler informers not synced yet (%s); sessions start once they are",
                        ", ".join(runner.unsynced()))
        tasks.configure(runner)
        if once:
            if not runner.wait_synced(sync_timeout):
                typer.echo(f"error: informers not synced after {sync_timeout:g}s: {', '.join(runner.unsynced())}",
                           err=True)
                runner.stop()
                raise typer.Exit(1)
            typer.echo(json.dumps(runner.tick()))
            runner.stop()
            return
        from lahar.worker import app as celery_app
        from lahar.worker import register_session_task

        register_session_task()
        try:
            celery_app.worker_main([*celery_globals(), "worker", "-Q", "scheduling", "-c", "1", "-P", "solo", "-n", "scheduler@%h",
                                    "-l", level, "--without-gossip", "--without-mingle"])
        finally:
            runner.stop()

    @app.command()
    def simulate(
        snapshot: Path = typer.Option(None, "--snapshot", exists=True, dir_okay=False,
                                      help="YAML stream of objects: nodes, queues, podgroups, pods, priorityclasses."),
        workload: Path = typer.Option(None, "--workload", exists=True, dir_okay=False,
                                      help="A trace (cluster, queues, job arrivals) to replay in simulated time."),
        plot: Path = typer.Option(None, "--plot", dir_okay=False,
                                  help="With --workload: write a PNG of utilisation, queue shares and job waits "
                                       "(and, with HyperNodes, the tree's occupancy to NAME-tree.png / .svg)."),
        html_out: Path = typer.Option(None, "--html", dir_okay=False,
                                      help="With --workload: write a self-contained HTML page (inline SVG)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="With --workload: no progress bar."),
        compare_topology: bool = typer.Option(
            False, "--compare-topology",
            help="With --workload: replay twice, with the network-topology-aware plugin (and the jobs' "
                 "networkTopology) and without, and print both."),
        conf: Path = typer.Option(None, "--conf", exists=True, dir_okay=False,
                                  help="A volcano-scheduler.conf (default: Volcano's default with lahar's plugins)."),
        sessions: int = typer.Option(1, "--sessions", min=1, help="How many sessions to run."),
        output: str = typer.Option("json", "--output", "-o", help="json or yaml (with --workload also: table)."),
    ) -> None:
        """Run scheduling sessions in-process on the given objects and print the decisions."""
        import yaml

        from lahar.scheduler.framework import conf as confs
        from lahar.scheduler.registry import in_tree_registry
        from lahar.scheduler.simulate import load_objects
        from lahar.scheduler.simulate import simulate as run

        registry = in_tree_registry()
        try:
            c = registry.load_conf(conf.read_text()) if conf else None
        except confs.ConfError as e:
            typer.echo(f"error: {conf}: {e}", err=True)
            raise typer.Exit(2) from e
        if (snapshot is None) == (workload is None):
            typer.echo("error: give exactly one of --snapshot or --workload", err=True)
            raise typer.Exit(2)
        if workload is not None:
            _replay(workload, c, registry, output=output, plot=plot, html_out=html_out, quiet=quiet,
                    compare=compare_topology)
            return
        if html_out is not None or compare_topology:
            typer.echo("error: --html and --compare-topology go with --workload", err=True)
            raise typer.Exit(2)
        try:
            result = run(load_objects(snapshot.read_text()), c, sessions=sessions, registry=registry)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from e
        if plot is not None:
            _plot_snapshot_tree(result, plot, snapshot.name)
        if output == "yaml":
            sys.stdout.write(yaml.safe_dump(result, sort_keys=False))
        else:
            sys.stdout.write(json.dumps(result, indent=2) + "\n")


def _plot_snapshot_tree(result: dict, plot: Path, name: str) -> None:
    """`--snapshot --plot`: the HyperNode tree with its occupancy after the sessions."""
    if "topology" not in result:
        typer.echo("error: --plot with --snapshot draws the HyperNode tree: the snapshot has no HyperNodes", err=True)
        raise typer.Exit(2)
    from lahar.scheduler import plot as plots

    try:
        plots.write_tree(result["topology"]["occupancy"], plot, title=f"lahar simulate --snapshot {name}")
    except plots.PlotUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    typer.echo(f"wrote {plot}", err=True)


def _profile_nodes(name: str, count: int) -> list[dict]:
    """A devcluster profile's node objects (Node, Numatopology, Device) for `lahar simulate --workload`."""
    from lahar.devcluster import nodes, profiles

    return nodes.build(profiles.load(name), count or None)


def _replay(path: Path, conf: object, registry: object, *, output: str, plot: Path | None, html_out: Path | None,
            quiet: bool, compare: bool = False) -> None:
    """`lahar simulate --workload`: replay in simulated time with a progress bar (stderr), report on stdout."""
    import yaml
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lahar.devcluster.profiles import ProfileError
    from lahar.scheduler import workload

    if plot is not None or html_out is not None:  # fail before the replay, not after it
        try:
            import matplotlib  # noqa: F401
        except ImportError as e:
            from lahar.scheduler.plot import INSTALL_HINT
            typer.echo(f"error: {INSTALL_HINT}", err=True)
            raise typer.Exit(2) from e
    try:
        trace = workload.load_trace(path.read_text())
        extra = _profile_nodes(trace.profile, trace.count) if trace.profile else []
    except (workload.TraceError, ProfileError) as e:
        typer.echo(f"error: {path}: {e}", err=True)
        raise typer.Exit(2) from e
    console = Console(stderr=True)
    with Progress(TextColumn("[bold]replay[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("jobs done"), TimeElapsedColumn(), console=console, disable=quiet,
                  transient=False) as bar:
        task = bar.add_task("t=0s", total=len(trace.jobs))

        def progress(t: float, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"t={t:,.0f}s")

        both = None
        if compare:
            on = workload.replay(trace, conf, registry=registry, nodes=extra, progress=progress,  # type: ignore[arg-type]
                                 topology=True)
            bar.update(task, completed=0, description="t=0s (without topology)")
            off = workload.replay(trace, conf, registry=registry, nodes=extra, progress=progress,  # type: ignore[arg-type]
                                  topology=False)
            both = {"with": on, "without": off, **workload.topology_diff(on, off)}
            report = on
        else:
            report = workload.replay(trace, conf, registry=registry, nodes=extra, progress=progress)  # type: ignore[arg-type]
    if plot is not None or html_out is not None:
        from lahar.scheduler import plot as plots

        title = f"lahar simulate --workload {path.name}"
        if plot is not None:
            plots.write_png(report, plot, title=title)
            typer.echo(f"wrote {plot}", err=True)
            if "occupancy" in report:
                tree_out = plot.with_name(f"{plot.stem}-tree{plot.suffix or '.png'}")
                plots.write_tree(report["occupancy"], tree_out, title=title)
                typer.echo(f"wrote {tree_out}", err=True)
        if html_out is not None:
            plots.write_html(report, html_out, title=title)
            typer.echo(f"wrote {html_out}", err=True)
    if both is not None and output in ("yaml", "json"):
        report = both
    if output == "yaml":
        sys.stdout.write(yaml.safe_dump(report, sort_keys=False))
    elif output == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif both is not None:
        for line in workload.compare_table(both):
            typer.echo(line)
    else:  # a short table
        s = report["summary"]
        w = s["wait_s"]
        typer.echo(f"{s['jobs_finished']}/{s['jobs']} jobs finished in {s['simulated_s']:.0f} simulated s "
                   f"({s['sessions']} sessions); wait mean {w['mean']} s p50 {w['p50']} s p90 {w['p90']} s "
                   f"max {w['max']} s")
        for j in report["jobs"]:
            where = f"  {j['hypernode'] or '-'} (tier {j['tier']})" if "hypernode" in j else ""
            if j.get("subgroups"):  # each subgroup's HyperNode
                where += " [" + ", ".join(f"{g} {v['hypernode'] or '-'}" for g, v in j["subgroups"].items()) + "]"
            typer.echo(f"  {j['name']:<24} {j['queue']:<12} arrival {j['arrival']:>8.0f}  wait "
                       f"{'-' if j['wait_s'] is None else format(j['wait_s'], '.0f'):>6}{where}")
        for tier, share in ((s.get("tiers") or {}).get("mean_whole_share") or {}).items():
            typer.echo(f"tier {tier}: {100 * share:.0f}% of HyperNodes whole on average")
