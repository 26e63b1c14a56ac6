"""HTTPS serving of the admission app: uvicorn with a certificate that hot-reloads when it is renewed.

`lahar webhook` calls `serve(app, ...)`; tests and the benchmark use `WebhookServer(...).start()` (a thread) and
`.stop()`. The live `ssl.SSLContext` uvicorn serves from is `WebhookServer.ssl_context`; when `certs.rotation`
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
import ssl
import threading
from typing import Any

import uvicorn

from lahar.certs import rotation, serving

__all__ = ["WebhookServer", "serve"]

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
