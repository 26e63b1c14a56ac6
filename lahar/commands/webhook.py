"""`lahar webhook`: serve Volcano's admission paths over HTTPS (FastAPI on uvicorn).

Thin shell: builds the look-ups (informers on the cluster, or a static state file), the admission configuration
and the app (`webhooks.app`), then `webhooks.server.serve` until SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

__all__ = ["admission_config", "load_objects", "register"]


def admission_config() -> Any:
    """lahar's admission configuration with its built-in defaults (the ConfigMap comes with the policy issue)."""
    try:
        from policies.admission import AdmissionConfig
    except ImportError:  # policies.admission not installed yet: handlers get None
        logging.getLogger(__name__).warning("policies.admission is not available; admission rules get no config")
        return None
    return AdmissionConfig()


def load_objects(path: Path) -> list[dict]:
    """Every object in a YAML/JSON file of one or more documents (`kind: List` and `*List` items unpacked);
    `-` reads standard input."""
    import sys

    import yaml

    out: list[dict] = []
    with (open(sys.stdin.fileno(), closefd=False) if str(path) == "-" else path.open()) as f:
        for doc in yaml.safe_load_all(f):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise typer.BadParameter(f"{path}: every document must be a Kubernetes object, got {type(doc).__name__}")
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                out.extend(item for item in doc["items"] if isinstance(item, dict))
            else:
                out.append(doc)
    return out


def webhook(
    port: int = typer.Option(8443, help="HTTPS port (Volcano's webhook-manager uses 8443)."),
    host: str = typer.Option("0.0.0.0", help="Address to listen on."),
    cert: Path = typer.Option(..., "--cert", exists=True, dir_okay=False, help="Serving certificate (PEM); "
                                                                               "reloaded when it changes."),
    key: Path = typer.Option(..., "--key", exists=True, dir_okay=False, help="Its private key (PEM)."),
    kubeconfig: Path = typer.Option(None, "--kubeconfig", help="Cluster to watch (default: as kubectl finds it)."),
    state: Path = typer.Option(None, "--state", exists=True, dir_okay=False,
                               help="Serve from the objects in this file instead of a cluster (tests, benchmarks); "
                                    "builtin `root` and `default` queues exist."),
    http: str = typer.Option("httptools", help="HTTP parser: httptools (faster) or h11."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
    sync_timeout: float = typer.Option(30.0, "--sync-timeout", help="Seconds to wait for the informers before "
                                                                     "listening (then /readyz says 503 until synced)."),
) -> None:
    """Serve lahar's admission webhooks (Volcano's paths, /healthz, /readyz, /metrics) over HTTPS."""
    from webhooks import app as webhook_app
    from webhooks import lookups as webhook_lookups
    from webhooks import server

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client = None
    if state is not None:
        lookups: Any = webhook_lookups.StaticLookups(load_objects(state))
    else:
        from kube import kubeconfig as kubeconfig_mod
        from kube.rest import RestClient

        client = RestClient(kubeconfig_mod.load(kubeconfig))
        lookups = webhook_lookups.InformerLookups(client).start()
        # answering before the caches are filled would deny jobs for "missing" queues: wait for them first
        if not lookups.wait_for_sync(sync_timeout):
            logging.getLogger(__name__).warning("informers not synced after %.0fs; serving, /readyz reports 503",
                                                sync_timeout)
    try:
        app = webhook_app.create_app(lookups=lookups, config=admission_config())
        server.serve(app, host=host, port=port, certfile=cert, keyfile=key, http=http, log_level=log_level)
    finally:
        if client is not None:
            lookups.stop()
            client.close()


def register(app: typer.Typer) -> None:
    app.command()(webhook)
