"""HTTPS serving of the admission app: uvicorn with a certificate that hot-reloads when it is renewed.

`lahar webhook` calls `serve(app, ...)`; tests and the benchmark use `WebhookServer(...).start()` (a thread) and
`.stop()`. With several workers, `serve_workers("module:factory", workers=N, ...)` binds the port once and runs
`Supervisor` (uvicorn's `Multiprocess`): N spawned processes share the socket, each builds its own app from the
factory (its own informers, policy loader and certificate reloader), a dead or unresponsive one is replaced, and one
whose review in progress has run past `review_timeout` is killed and replaced (`webhooks.watchdog`). The live `ssl.SSLContext` uvicorn serves from is `WebhookServer.ssl_context`; when `certs.rotation`
is installed a `CertReloader` watches the certificate files and moves new handshakes onto a renewed pair while
open connections go on with the old one (no dropped in-flight reviews).

Throughput settings (measured by `bench/admission.py`): httptools parser (about 1.5x h11's throughput here), uvloop,
no access log, no proxy-headers middleware, no `server` and `date` headers, lifespan off, `gc.freeze()` of
everything alive at start; answers are encoded with orjson by `webhooks.app`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
import ssl
import tempfile
import threading
import time
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from lahar.certs import rotation, serving
from lahar.webhooks import watchdog

__all__ = ["DEFAULT_REVIEW_TIMEOUT", "Supervisor", "WebhookServer", "WorkerConfig", "serve", "serve_workers"]

log = logging.getLogger(__name__)


def _reloader(ssl_context: ssl.SSLContext, certfile: str, keyfile: str, interval: float) -> Any | None:
    return rotation.CertReloader(ssl_context, certfile, keyfile, interval=interval)


class WebhookServer:
    """uvicorn over HTTPS for one ASGI app; `run()` blocks, `start()` runs it in a thread, `stop()` ends it."""

    def __init__(self, app: Any, *, host: str = "0.0.0.0", port: int = 8443,
                 certfile: str | os.PathLike[str], keyfile: str | os.PathLike[str], http: str = "httptools",
                 loop: str = "auto", log_level: str = "warning", reload_interval: float | None = 1.0,
                 backlog: int = 2048, graceful_timeout: float = 10.0,
                 limits: serving.Limits = serving.DEFAULT_LIMITS) -> None:
        self.config = uvicorn.Config(
            app, host=host, port=port, ssl_certfile=str(certfile), ssl_keyfile=str(keyfile), loop=loop,
            **serving.uvicorn_options(http, limits),  # header/body deadlines and a connection limit: slow clients
            log_level=log_level, log_config=None, access_log=False, server_header=False, date_header=False, lifespan="off",
            proxy_headers=False,   # the API server calls the webhook directly: no X-Forwarded-* to trust or parse
            backlog=backlog, timeout_graceful_shutdown=graceful_timeout,
        )
        self.config.load()  # creates config.ssl: the context every handshake starts from
        assert self.config.ssl is not None
        self.ssl_context: ssl.SSLContext = self.config.ssl
        self.server = uvicorn.Server(self.config)
        self.reloader = (_reloader(self.ssl_context, str(certfile), str(keyfile), reload_interval)
                         if reload_interval else None)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0), once started."""
        return self.server.servers[0].sockets[0].getsockname()[1]

    def run(self) -> None:
        # what exists now (modules, app, config, static state) lives as long as the process: move it out of the
        # collector's generations so full collections stay short and do not show in the latency tail
        gc.collect()
        gc.freeze()
        if self.reloader is not None:
            self.reloader.start()
        try:
            self.server.run()
        finally:
            if self.reloader is not None:
                self.reloader.stop()

    def start(self, timeout: float = 10.0) -> WebhookServer:
        self._thread = threading.Thread(target=self.run, name="lahar-webhook-server", daemon=True)
        self._thread.start()
        done = threading.Event()
        waited = 0.0
        while not self.server.started and self._thread.is_alive() and waited < timeout:
            done.wait(0.01)
            waited += 0.01
        if not self.server.started:
            self.stop()
            raise RuntimeError("the webhook server did not start")
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(app: Any, *, host: str, port: int, certfile: str | os.PathLike[str], keyfile: str | os.PathLike[str],
          **options: Any) -> None:
    """Serve `app` over HTTPS until SIGINT/SIGTERM (uvicorn's handlers), reloading renewed certificates."""
    # uvicorn re-raises the SIGINT it shut down on; by then the shutdown was graceful
    with contextlib.suppress(KeyboardInterrupt):
        WebhookServer(app, host=host, port=port, certfile=certfile, keyfile=keyfile, **options).run()


# -- several worker processes ------------------------------------------------------------------------------------

DEFAULT_REVIEW_TIMEOUT = 5.0   # seconds; below the 10 s timeoutSeconds of lahar's webhook configurations


class WorkerConfig(uvicorn.Config):
    """uvicorn's Config for spawned workers: pickled to each child unloaded (the slow-client protocol class is built
    there, from `http` and `limits`), and `load()` in the child also starts that child's certificate reloader and
    freezes what the app holds out of the collector's generations."""

    def __init__(self, app: str, *, limits: serving.Limits = serving.DEFAULT_LIMITS, http: str = "httptools",
                 reload_interval: float | None = 1.0, **options: Any) -> None:
        super().__init__(app, http=http, **options)
        self.http_name, self.limits, self.reload_interval = http, limits, reload_interval
        self.reloader: Any = None

    def load(self) -> None:
        self.http = serving.protocol(self.http_name, self.limits)   # type: ignore[assignment]
        super().load()
        if self.reload_interval and self.ssl is not None and self.reloader is None:
            self.reloader = _reloader(self.ssl, str(self.ssl_certfile), str(self.ssl_keyfile), self.reload_interval)
            # a worker may start while the pair is being renewed: serve what is on disk now, not what the context
            # was read from a moment ago (else the reloader would take the new pair for the one already served)
            self.reloader.check(force=True)
            self.reloader.start()
        gc.collect()
        gc.freeze()


class Supervisor(Multiprocess):
    """uvicorn's worker supervisor with the review watchdog. Every half second, for each worker: one whose review
    in progress began more than `review_timeout` seconds ago is killed (SIGKILL: it may hold the GIL in the CEL
    engine) and replaced, its open connections cut (the API server answers those reviews with the webhook's
    failurePolicy); one that has exited, or that is idle and does not answer uvicorn's ping within
    `timeout_worker_healthcheck`, is replaced as uvicorn does. A busy worker is judged by the watchdog alone (its
    ping would block the loop while the GIL is held). `kills` counts the watchdog's kills."""

    def __init__(self, config: uvicorn.Config, sockets: list[Any], *, review_timeout: float,
                 watch_dir: str) -> None:
        super().__init__(config, sockets)
        self.review_timeout, self.watch_dir = review_timeout, watch_dir
        self.kills = 0

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        started = {p.pid: watchdog.started_at(self.watch_dir, p.pid) for p in self.processes if p.pid is not None}
        stuck = set(watchdog.overdue(started, now=time.monotonic(), limit=self.review_timeout))
        for idx, process in enumerate(self.processes):
            if process.pid in stuck:
                log.error("webhook worker %s has been in one review for more than %.1fs (--review-timeout): "
                          "killed, starting another", process.pid, self.review_timeout)
                self.kills += 1
            elif process.process.is_alive() and (started.get(process.pid) is not None
                                                 or process.ping(self.config.timeout_worker_healthcheck)
                                                 # a review that began after `started` was read holds the GIL
                                                 # the ping waited for: busy, the watchdog's to judge
                                                 or watchdog.started_at(self.watch_dir, process.pid) is not None):
                continue
            process.kill()
            process.join()
            if process.pid is not None:
                watchdog.forget(self.watch_dir, process.pid)
            if process.exitcode == STARTUP_FAILURE:
                # it never served: the app, TLS or the socket is broken and a new one would fail the same way
                log.error("webhook worker %s failed to start; stopping", process.pid)
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            if process.pid not in stuck:
                log.warning("webhook worker %s died or stopped answering; starting another", process.pid)
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[idx] = replacement


def serve_workers(factory: str, *, workers: int, host: str, port: int, certfile: str | os.PathLike[str],
                  keyfile: str | os.PathLike[str], review_timeout: float = DEFAULT_REVIEW_TIMEOUT,
                  http: str = "httptools", log_level: str = "warning", backlog: int = 2048,
                  graceful_timeout: float = 10.0, limits: serving.Limits = serving.DEFAULT_LIMITS,
                  reload_interval: float | None = 1.0, healthcheck_timeout: int = 5) -> None:
    """Serve the app `factory` ("module:function", called with no arguments in each worker; it reads its options
    from the environment) from `workers` processes sharing one HTTPS port, until SIGINT/SIGTERM."""
    config = WorkerConfig(
        factory, factory=True, host=host, port=port, ssl_certfile=str(certfile), ssl_keyfile=str(keyfile),
        http=http, limits=limits, reload_interval=reload_interval, workers=workers,
        limit_concurrency=limits.max_connections, h11_max_incomplete_event_size=limits.max_header_bytes,
        log_level=log_level, log_config=None, access_log=False, server_header=False, date_header=False,
        lifespan="off", proxy_headers=False, backlog=backlog, timeout_graceful_shutdown=graceful_timeout,
        timeout_worker_healthcheck=healthcheck_timeout)
    watch_dir = tempfile.mkdtemp(prefix="lahar-webhook-watch-")
    os.environ[watchdog.WATCH_DIR_ENV] = watch_dir      # the spawned workers inherit it
    try:
        sock = config.bind_socket()
        with contextlib.suppress(KeyboardInterrupt):
            Supervisor(config, [sock], review_timeout=review_timeout, watch_dir=watch_dir).run()
    finally:
        os.environ.pop(watchdog.WATCH_DIR_ENV, None)
        shutil.rmtree(watch_dir, ignore_errors=True)
