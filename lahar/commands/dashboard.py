"""`lahar dashboard`: serve the read-only web dashboard (`lahar.dashboard`) on uvicorn, from the cluster of the
kubeconfig (found the way kubectl finds it), on 127.0.0.1 with a token printed like a kubeconfig credential."""

from __future__ import annotations

from pathlib import Path

import typer

from lahar.commands._options import init_logging, log_format_option, log_level_option

__all__ = ["register", "url_of"]


def url_of(host: str, port: int, token: str) -> str:
    """The address to open: the token rides once in the query, the dashboard turns it into a cookie."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default; the token guards "
                                                    "every page anyway)."),
        port: int = typer.Option(8470, help="Port to listen on (0: any free port)."),
        kubeconfig: Path = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: KUBECONFIG, else "
                                                                   "~/.kube/config, else in-cluster)."),
        token_file: Path = typer.Option(None, "--token-file", dir_okay=False,
                                        help="Keep the token in this file (0600; made when missing). Default: "
                                             "LAHAR_DATA_DIR/dashboard-token when LAHAR_DATA_DIR is set, else a "
                                             "new token each start."),
        webhook_metrics: str = typer.Option(None, "--webhook-metrics",
                                            help="The webhook's /metrics address: the Policies page shows its "
                                                 "policy counters (scraped every 15 s)."),
        webhook_ca: Path = typer.Option(None, "--webhook-ca", dir_okay=False, exists=True,
                                        help="CA file of the webhook's serving certificate (default: the system's)."),
        loglevel: str = log_level_option(),
        log_format: str = log_format_option(),
    ) -> None:
        """Serve the dashboard: queues, jobs and why they wait, nodes, policies; live over server-sent events."""
        import os
        import secrets
        import socket

        import uvicorn

        from lahar import credentials, logs
        from lahar.dashboard.app import create_app
        from lahar.dashboard.live import Hub, WebhookMetrics
        from lahar.kube import kubeconfig as kc
        from lahar.kube.rest import RestClient

        if webhook_metrics is not None and not webhook_metrics.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{webhook_metrics!r} is no http(s) address", param_hint="--webhook-metrics")
        level = init_logging(loglevel, log_format)
        if token_file is None and os.environ.get("LAHAR_DATA_DIR"):
            token_file = Path(os.environ["LAHAR_DATA_DIR"]) / credentials.DASHBOARD_FILE
        kept = token_file
        token = credentials.dashboard_token(token_file) if token_file is not None else secrets.token_urlsafe(24)
        try:
            client = RestClient(kc.load(str(kubeconfig) if kubeconfig else None))
        except Exception as e:  # noqa: BLE001 - no cluster: a usage error, not a traceback
            raise typer.BadParameter(f"no cluster to show: {e}", param_hint="--kubeconfig") from e
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            raise typer.BadParameter(f"cannot listen on {host}:{port}: {e.strerror}", param_hint="--port") from e
        bound = sock.getsockname()[1]
        scrape = WebhookMetrics(webhook_metrics, verify=str(webhook_ca) if webhook_ca else True) \
            if webhook_metrics else None
        hub = Hub(client, webhook_metrics=scrape).start()
        logs.announce(f"dashboard: {url_of(host, bound, token)}", "lahar.dashboard")
        logs.announce(f"  token: {token}" + (f"  (kept in {kept})" if kept else "  (new each start; --token-file "
                                                                              "keeps one)"), "lahar.dashboard")
        config = uvicorn.Config(create_app(hub, token=token, host=host), log_level=level.lower(), log_config=None,
                                access_log=False, timeout_graceful_shutdown=1)
        try:
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            hub.stop()

