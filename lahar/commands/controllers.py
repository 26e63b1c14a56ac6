"""`lahar worker | dispatch | beat | flower`: the processes that run the controllers on Celery.

Thin shells over `lahar.worker` (the Celery app) and `lahar.dispatcher`; each reads `Settings` (REDIS_URL,
KUBECONFIG, LAHAR_*) and runs until SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

import typer

from lahar.commands._options import celery_globals, init_logging, log_format_option, log_level_option

__all__ = ["WORKER_HELP", "register", "worker_argv"]

WORKER_HELP = "\n\n".join((
    "Run a Celery worker for the controllers (queue `reconcile`).",
    "Supervised by default: the Celery worker runs as a child process and is started again when it exits "
    "unexpectedly (a Redis restart can make a Celery worker exit with `Unrecoverable error: AttributeError(...)`; "
    "an OOM kill), after 1 s, 2 s, 4 s ... up to 30 s (back to 1 s once it ran 30 s); each restart is logged with "
    "the exit code. An exit 0 (a `shutdown` remote-control command) and usage errors end `lahar worker` instead.",
    "SIGTERM or SIGINT stop it cleanly: the signal goes to the Celery worker (warm shutdown: running reconciles "
    "finish); it is killed after 25 s or on a second signal, and no process is left behind.",
    "--no-supervise runs Celery in this process, for a supervisor of your own (systemd with Restart=, a "
    "Kubernetes Deployment, `lahar up`).",
))


def worker_argv(python: str, *, concurrency: int | None = None, queues: str = "reconcile", pool: str = "prefork",
                hostname: str | None = None, loglevel: str | None = None, log_format: str | None = None,
                metrics_port: int = 0) -> list[str]:
    """The supervised child's command line: this same command, unsupervised, with the same options."""
    argv = [python, "-m", "lahar.cli", "worker", "--no-supervise", "-Q", queues, "-P", pool]
    if concurrency:
        argv += ["-c", str(concurrency)]
    if metrics_port:
        argv += ["--metrics-port", str(metrics_port)]
    if hostname:
        argv += ["--hostname", hostname]
    if loglevel:
        argv += ["--log-level", loglevel]
    if log_format:
        argv += ["--log-format", log_format]
    return argv


def worker_metrics_dir(port: int, *, given: str | None = None, tmp: str | None = None) -> str:
    """Where the pool's processes write their metric files: PROMETHEUS_MULTIPROC_DIR when set, else
    `<tmp>/lahar-worker-metrics-<port>`, emptied first: a restarted worker (a container restart keeps its emptyDir
    /tmp) starts from zero like any restarted process, and a crash loop cannot fill /tmp with old directories."""
    import shutil
    import tempfile

    if given:
        return given
    path = os.path.join(tmp or tempfile.gettempdir(), f"lahar-worker-metrics-{port}")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)
    return path


def _serve_worker_metrics(port: int) -> None:
    """Serve the reconcile metrics of every pool process (prefork children, threads or solo) on `port`.

    prometheus_client's multiprocess mode: each process writes its values to files in PROMETHEUS_MULTIPROC_DIR
    (`worker_metrics_dir`), which this process adds up at each scrape, so a counter's total stays right across
    pool children, including children that exited. Set before the pool forks.
    """
    path = worker_metrics_dir(port, given=os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    from prometheus_client import CollectorRegistry, start_http_server, values
    from prometheus_client.multiprocess import MultiProcessCollector

    values.ValueClass = values.get_value_class()  # prometheus_client may have been imported before the variable
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)
    start_http_server(port, registry=registry)


def _serve_dispatch_metrics(port: int, dispatcher: object, metrics: object, redis_url: str) -> object:
    """Serve the dispatcher's metrics: its watch events and job phases, its counters, and the queue depth read
    from Redis at each scrape (a client that fails fast: a scrape while Redis is away says redis_up 0)."""
    import redis
    from prometheus_client import start_http_server
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from lahar.controllers import metrics as ctrl_metrics

    scrape = redis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=2, socket_connect_timeout=1,
                                  retry=Retry(NoBackoff(), 0))
    registry = metrics.registry  # type: ignore[attr-defined]
    registry.register(ctrl_metrics.DispatchStats(dispatcher))
    registry.register(ctrl_metrics.QueueDepth(scrape))
    server, _ = start_http_server(port, addr="0.0.0.0", registry=registry)
    return server


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def register(app: typer.Typer) -> None:
    @app.command(help=WORKER_HELP)
    def worker(
        concurrency: int = typer.Option(None, "--concurrency", "-c", help="Worker processes/threads (default: CPUs)."),
        queues: str = typer.Option("reconcile", "--queues", "-Q", help="Comma-separated queues to consume."),
        pool: str = typer.Option("prefork", "--pool", "-P", help="Celery pool: prefork, threads or solo."),
        hostname: str = typer.Option(None, "--hostname", help="Node name (default lahar@<host>)."),
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
        metrics_port: int = typer.Option(
            0, "--metrics-port", help="Serve Prometheus metrics (reconciles, latency, lock waits) on this port "
                                      "(0 = off), summed over the pool's processes."),
        supervise: bool = typer.Option(
            True, "--supervise/--no-supervise",
            help="Run the Celery worker as a child process and start it again when it exits unexpectedly "
                 "(backoff 1 s to 30 s). --no-supervise runs Celery in this process (for a supervisor of your own)."),
    ) -> None:
        level = init_logging(loglevel, log_format)
        if supervise:
            from lahar.supervisor import Supervisor

            sup = Supervisor(worker_argv(sys.executable, concurrency=concurrency, queues=queues, pool=pool,
                                         hostname=hostname, loglevel=loglevel, log_format=log_format,
                                         metrics_port=metrics_port))
            sup.install_signal_handlers()
            raise typer.Exit(sup.run())

        if metrics_port:
            _serve_worker_metrics(metrics_port)
        from lahar.worker import SCHEDULING_QUEUE, register_session_task
        from lahar.worker import app as celery_app

        if SCHEDULING_QUEUE in (q.strip() for q in queues.split(",")):
            register_session_task()
        argv = [*celery_globals(), "worker", "-Q", queues, "-P", pool, "-E", "-l", level,
                "-n", hostname or "lahar@%h", "--without-mingle"]
        if concurrency:
            argv += ["-c", str(concurrency)]
        celery_app.worker_main(argv)

    @app.command()
    def dispatch(
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
        metrics_port: int = typer.Option(0, "--metrics-port", help="Serve Prometheus metrics (watch events, "
                                         "Volcano's job-phase counters, queue depth, timers) on this port (0 = off)."),
    ) -> None:
        """Watch the cluster and enqueue reconcile tasks (one active dispatcher; others wait as standby)."""
        from lahar import worker as celery_worker
        from lahar.dispatcher import Dispatcher
        from lahar.kube import kubeconfig
        from lahar.kube.rest import RestClient

        s = celery_worker.settings
        init_logging(loglevel, log_format)
        rt = celery_worker.runtime()
        client = RestClient(kubeconfig.load(s.kubeconfig))
        metrics = None
        if metrics_port:
            from lahar.controllers import metrics as ctrl_metrics

            metrics = ctrl_metrics.DispatchMetrics(default_queue=s.default_queue)
        d = Dispatcher(client, rt.redis, send=lambda key: celery_worker.enqueue(key, rt=rt),
                       scheduler_names=tuple(s.scheduler_names), lease_ttl=s.dispatch_lease_ttl,
                       timer_poll_interval=s.timer_poll_interval,
                       on_event=metrics.observe if metrics is not None else None)
        if metrics is not None:
            _serve_dispatch_metrics(metrics_port, d, metrics, s.redis_url or celery_worker.DEFAULT_REDIS_URL)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            d.run(stop)
        finally:
            client.close()

    @app.command()
    def beat(
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
    ) -> None:
        """Run Celery beat (resync every key; the scheduler's session tick). Only one runs: a Redis lease."""
        from lahar import worker as celery_worker
        from lahar.controllers import workqueue

        s = celery_worker.settings
        level = init_logging(loglevel, log_format, capture_stdout=True)
        rt = celery_worker.runtime()
        lease = workqueue.Lease(rt.redis, "beat", ttl=s.dispatch_lease_ttl)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.is_set() and not _try(lease.acquire):
            stop.wait(max(0.2, lease.ttl / 5))
        if stop.is_set():
            return

        def keep() -> None:
            last_ok = time.monotonic()
            while not stop.wait(lease.ttl / 3):
                if _try(lease.acquire):
                    last_ok = time.monotonic()
                elif time.monotonic() - last_ok > lease.ttl:
                    logging.getLogger(__name__).error("beat lease lost; exiting so a standby takes over")
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

        threading.Thread(target=keep, name="beat-lease", daemon=True).start()
        s.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            celery_worker.app.Beat(loglevel=level,
                                   schedule=str(s.data_dir / "celerybeat-schedule")).run()
        finally:
            stop.set()
            _try(lease.release)

    @app.command()
    def flower(
        port: int = typer.Option(None, help="HTTP port (default LAHAR_FLOWER_PORT, 5555)."),
        address: str = typer.Option("127.0.0.1", help="Address to listen on."),
        basic_auth: str = typer.Option(None, help="user:password[,user:password] (Flower's --basic-auth; default "
                                                  "LAHAR_FLOWER_BASIC_AUTH, else a login generated once in "
                                                  "<data-dir>/flower-auth, mode 0600)."),
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
    ) -> None:
        """Run Flower on the Celery app: workers, reconcile and session tasks with arguments and outcomes.

        Flower always asks for a login, on loopback too, and refuses cross-site requests, so a web page cannot
        drive its task API."""
        from lahar import credentials
        from lahar import worker as celery_worker

        s = celery_worker.settings
        init_logging(loglevel, log_format, capture_stdout=True)
        try:
            if basic_auth or s.flower_basic_auth:
                login = credentials.check_login(basic_auth or s.flower_basic_auth or "")
            else:
                login, path = credentials.flower_login(s.data_dir)
                logging.getLogger(__name__).warning("flower: login %s, password in %s", login.split(":", 1)[0], path)
        except credentials.CredentialsError as e:
            raise typer.BadParameter(str(e), param_hint="--basic-auth") from e
        os.environ.pop("FLOWER_UNAUTHENTICATED_API", None)  # the API asks for the login like the UI
        argv = [*celery_globals(), "flower", f"--port={port or s.flower_port}", f"--address={address}",
                f"--basic_auth={login}", "--logging=none"]  # tornado adds no handler: lahar.logs has the root
        celery_worker.app.start(argv)


def _try(fn) -> bool:  # noqa: ANN001 - a Redis call that may fail while Redis restarts
    try:
        return bool(fn())
    except Exception:  # noqa: BLE001
        return False
