"""`lahar scheduler` (the Celery worker on queue `scheduling` that runs sessions) and `lahar simulate`
(sessions in-process on objects from a file)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command()
    def scheduler(
        loglevel: str = typer.Option(None, "--loglevel", "-l", help="Log level (default LAHAR_LOG_LEVEL)."),
        metrics_port: int = typer.Option(0, help="Serve Prometheus metrics on this port (0 = off)."),
        once: bool = typer.Option(False, help="Run one session now and exit (no Celery, no lease)."),
    ) -> None:
        """Run scheduling sessions: a Celery worker on queue `scheduling` (concurrency 1, informer cache in memory)."""
        import redis

        from kube import kubeconfig
        from kube.rest import RestClient
        from lahar.settings import Settings
        from scheduler import tasks

        s = Settings()
        level = (loglevel or s.log_level).upper()
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        client = RestClient(kubeconfig.load(str(s.kubeconfig) if s.kubeconfig else None))
        lease = None
        if s.redis_url and not once:
            lease = tasks.RedisLease(redis.Redis.from_url(s.redis_url), ttl_seconds=max(60.0, 10 * s.schedule_period))
        runner = tasks.Runner(client, lease=lease)
        runner.start()
        tasks.configure(runner)
        if metrics_port:
            from prometheus_client import start_http_server
            start_http_server(metrics_port, registry=runner.metrics.registry)
        if once:
            typer.echo(json.dumps(runner.tick()))
            runner.stop()
            return
        from lahar.worker import app as celery_app
        try:
            celery_app.worker_main(["worker", "-Q", "scheduling", "-c", "1", "-P", "solo", "-n", "scheduler@%h",
                                    "-l", level, "--without-gossip", "--without-mingle"])
        finally:
            runner.stop()

    @app.command()
    def simulate(
        snapshot: Path = typer.Option(..., "--snapshot", exists=True, dir_okay=False,
                                      help="YAML stream of objects: nodes, queues, podgroups, pods, priorityclasses."),
        conf: Path = typer.Option(None, "--conf", exists=True, dir_okay=False,
                                  help="A volcano-scheduler.conf (default: Volcano's default with lahar's plugins)."),
        sessions: int = typer.Option(1, "--sessions", min=1, help="How many sessions to run."),
        output: str = typer.Option("json", "--output", "-o", help="json or yaml."),
    ) -> None:
        """Run scheduling sessions in-process on the given objects and print the decisions."""
        import yaml

        from scheduler.framework import conf as confs
        from scheduler.registry import in_tree_registry
        from scheduler.simulate import load_objects
        from scheduler.simulate import simulate as run

        registry = in_tree_registry()
        try:
            c = confs.load(conf.read_text(), actions=registry.action_names,
                           plugins=registry.plugin_names) if conf else None
        except confs.ConfError as e:
            typer.echo(f"error: {conf}: {e}", err=True)
            raise typer.Exit(2) from e
        try:
            result = run(load_objects(snapshot.read_text()), c, sessions=sessions, registry=registry)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from e
        if output == "yaml":
            sys.stdout.write(yaml.safe_dump(result, sort_keys=False))
        else:
            sys.stdout.write(json.dumps(result, indent=2) + "\n")
