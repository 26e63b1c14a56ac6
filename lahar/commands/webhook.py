"""`lahar webhook`: serve Volcano's admission paths over HTTPS (FastAPI on uvicorn).

Thin shell: builds the look-ups (informers on the cluster, or a static state file), the admission configuration
and the app (`webhooks.app`), then `webhooks.server.serve` until SIGINT/SIGTERM. On a cluster, `live_admission`
also watches lahar's ConfigMaps (`policies.loading.ConfigMapWatch`): `lahar-admission-config` and the
AdmissionPolicy ConfigMaps are applied to the running app as their watch events arrive (swapped atomically with
`webhooks.app.update_admission`), a bad version keeps the last good one (Event, log line, metric), and Audit
results leave Events (`webhooks.policystage.AuditEvents`).

`--workers N` (N > 1): the port is bound once and N spawned processes serve it (`webhooks.server.serve_workers`);
each builds its own app with `worker_app()` from `WorkerOptions` passed as JSON in `OPTIONS_ENV`, so each has its
own informers, ConfigMap watch and certificate reloader; the supervisor kills a worker stuck in one review past
`--review-timeout` and starts another.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from lahar.commands._options import init_logging, log_format_option, log_level_option

__all__ = ["OPTIONS_ENV", "LiveAdmission", "WorkerOptions", "admission_config", "build_app", "live_admission",
           "load_objects", "register", "worker_app"]

log = logging.getLogger(__name__)


def admission_config() -> Any:
    """lahar's admission configuration with its built-in defaults (`lahar-admission-config` overrides it live)."""
    from lahar.policies.admission import AdmissionConfig

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


@dataclass
class LiveAdmission:
    """The admission app wired to a live cluster; `stop()` ends its watches and threads."""

    app: Any                   # FastAPI, served by webhooks.server
    lookups: Any               # webhooks.lookups.InformerLookups
    watch: Any                 # policies.loading.ConfigMapWatch
    config: Any                # policies.loading.Loader[AdmissionConfig]
    policies: Any              # policies.loading.PolicyLoader
    audits: Any                # webhooks.policystage.AuditEvents
    policy_webhooks: Any = None  # webhooks.registration.PolicyWebhooks, or None

    def stop(self) -> None:
        if self.policy_webhooks is not None:
            self.policy_webhooks.stop()
        self.watch.stop()
        self.audits.stop()
        self.lookups.stop()


def live_admission(client: Any, *, namespace: str = "lahar-system", all_namespaces: bool = False,
                   sync_timeout: float = 30.0, probe_interval: float = 5.0,
                   register_policy_webhooks: bool = True) -> LiveAdmission:
    """Informer look-ups, the app, and the ConfigMap watch that keeps its configuration and policies current:
    `lahar-admission-config` in `namespace`, policy ConfigMaps (`lahar.sh/policy: "true"`) in `namespace` (or in
    every namespace with `all_namespaces`). With `register_policy_webhooks`, the policy-only webhook entries are
    registered while a policy in force could use them (`webhooks.registration`), updated on every policy change."""
    from lahar import data, validators
    from lahar.certs import bundles
    from lahar.policies import loading
    from lahar.policies.admission import AdmissionConfig
    from lahar.webhooks import app as webhook_app
    from lahar.webhooks import lookups as webhook_lookups
    from lahar.webhooks import policystage, registration

    validators.register()
    lookups = webhook_lookups.InformerLookups(client, probe_interval=probe_interval).start()
    audits = policystage.AuditEvents(client).start()
    watch = registrar = None
    try:
        # answering before the caches are filled would deny jobs for "missing" queues: wait for them first
        if not lookups.wait_for_sync(sync_timeout):
            log.warning("informers not synced after %.0fs; serving, /readyz reports 503", sync_timeout)
        app = webhook_app.create_app(lookups=lookups, config=AdmissionConfig(), audits=audits)
        watch = loading.ConfigMapWatch(client, namespace=None if all_namespaces else namespace,
                                       component="lahar-webhook")
        config = watch.watch(loading.Loader(loading.parse_admission_config, default=AdmissionConfig()),
                             namespace=namespace, name=loading.ADMISSION_CONFIGMAP)
        policies = watch.watch_policies()
        config.on_change(lambda value: webhook_app.update_admission(app, config=value))
        policies.on_change(lambda value: webhook_app.update_admission(app, policies=value))
        watch.start(timeout=sync_timeout)
        webhook_app.update_admission(app, config=config.current, policies=policies.current())
        if register_policy_webhooks:
            # after the app's swap (on_change runs in order): an entry is registered once this process enforces
            registrar = registration.PolicyWebhooks(
                client, bundles.load_templates(data.webhooks()),
                lambda: app.state.admission.policies.demand())
            policies.on_change(registrar.kick)
            registrar.start()
    except BaseException:
        if watch is not None:
            watch.stop()
        audits.stop()
        lookups.stop()
        raise
    return LiveAdmission(app=app, lookups=lookups, watch=watch, config=config, policies=policies, audits=audits,
                         policy_webhooks=registrar)


def _static_policies(paths: list[Path]) -> list[Any]:
    from lahar.commands.policy import _load_policies

    return _load_policies(paths)


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker process needs to build its app (JSON in `OPTIONS_ENV`)."""

    state: str | None = None
    policies: tuple[str, ...] = ()
    kubeconfig: str | None = None
    config_namespace: str = "lahar-system"
    all_namespaces: bool = False
    sync_timeout: float = 30.0
    log_level: str = "warning"
    log_format: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerOptions:
        data = json.loads(text)
        return cls(**{**data, "policies": tuple(data.get("policies") or ())})


OPTIONS_ENV = "LAHAR_WEBHOOK_WORKER_OPTIONS"
DEFAULT_FACTORY = "lahar.commands.webhook:worker_app"


def build_app(options: WorkerOptions) -> tuple[Any, Any]:
    """The admission app for `options` and what to call to stop its watches (None for static state)."""
    from lahar.webhooks import app as webhook_app
    from lahar.webhooks import lookups as webhook_lookups

    if options.state is not None:
        paths = [Path(p) for p in options.policies]
        app = webhook_app.create_app(lookups=webhook_lookups.StaticLookups(load_objects(Path(options.state))),
                                     config=admission_config(), policies=_static_policies(paths) if paths else None)
        return app, None
    from lahar.kube import kubeconfig as kubeconfig_mod
    from lahar.kube.rest import RestClient

    client = RestClient(kubeconfig_mod.load(Path(options.kubeconfig) if options.kubeconfig else None))
    try:
        live = live_admission(client, namespace=options.config_namespace, all_namespaces=options.all_namespaces,
                              sync_timeout=options.sync_timeout)
    except BaseException:
        client.close()
        raise

    def stop() -> None:
        live.stop()
        client.close()

    return live.app, stop


def worker_app() -> Any:
    """The app factory each worker process of `lahar webhook --workers N` calls (options from `OPTIONS_ENV`);
    its watches live as long as the process."""
    options = WorkerOptions.from_json(os.environ[OPTIONS_ENV])
    init_logging(options.log_level, options.log_format)
    app, _stop = build_app(options)
    return app


def webhook(
    port: int = typer.Option(8443, help="HTTPS port (Volcano's webhook-manager uses 8443)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (loopback by default; in a pod pass "
                                               "--host 0.0.0.0 and admit only the API server with a NetworkPolicy)."),
    cert: Path = typer.Option(..., "--cert", exists=True, dir_okay=False, help="Serving certificate (PEM); "
                                                                               "reloaded when it changes."),
    key: Path = typer.Option(..., "--key", exists=True, dir_okay=False, help="Its private key (PEM)."),
    kubeconfig: Path = typer.Option(None, "--kubeconfig", help="Cluster to watch (default: as kubectl finds it)."),
    state: Path = typer.Option(None, "--state", exists=True, dir_okay=False,
                               help="Serve from the objects in this file instead of a cluster (tests, benchmarks); "
                                    "builtin `root` and `default` queues exist."),
    http: str = typer.Option("httptools", help="HTTP parser: httptools (faster) or h11."),
    log_level: str = log_level_option("warning", help_text="Log level: debug, info, warning, error (default warning)."),
    log_format: str = log_format_option(),
    sync_timeout: float = typer.Option(30.0, "--sync-timeout", help="Seconds to wait for the informers before "
                                                                     "listening (then /readyz says 503 until synced)."),
    config_namespace: str = typer.Option("lahar-system", "--config-namespace",
                                         help="Namespace of lahar-admission-config and of the policy ConfigMaps."),
    all_namespaces_policies: bool = typer.Option(False, "--policies-from-all-namespaces",
                                                 help="Load policy ConfigMaps from every namespace (trust every "
                                                      "namespace's ConfigMap writers with cluster-wide rules)."),
    policies: list[Path] = typer.Option([], "--policies", help="With --state: AdmissionPolicy documents or policy "
                                                               "ConfigMaps (files or directories) to enforce."),
    workers: int = typer.Option(1, "--workers", min=1, max=64,
                                help="Worker processes sharing the port; with 2 or more a supervisor replaces a "
                                     "worker that dies or is stuck in one review past --review-timeout."),
    review_timeout: float = typer.Option(5.0, "--review-timeout", min=0.0,
                                         help="With --workers 2 or more: seconds one review may run before its "
                                              "worker is killed and replaced (0: never)."),
    app_factory: str = typer.Option(DEFAULT_FACTORY, "--app-factory", hidden=True,
                                    help="module:function building each worker's app (tests wrap the default)."),
) -> None:
    """Serve lahar's admission webhooks (Volcano's paths, /healthz, /readyz, /metrics) over HTTPS."""
    from lahar.webhooks import server

    log_level = init_logging(log_level, log_format).lower()
    if policies and state is None:
        raise typer.BadParameter("only with --state; on a cluster, policies come from ConfigMaps",
                                 param_hint="--policies")
    if app_factory != DEFAULT_FACTORY and workers < 2:
        # the factory is named for uvicorn, which imports it in each spawned worker; one process builds its app here
        raise typer.BadParameter("only with --workers 2 or more", param_hint="--app-factory")
    options = WorkerOptions(state=str(state) if state is not None else None, policies=tuple(map(str, policies)),
                            kubeconfig=str(kubeconfig) if kubeconfig is not None else None,
                            config_namespace=config_namespace, all_namespaces=all_namespaces_policies,
                            sync_timeout=sync_timeout, log_level=log_level, log_format=log_format)
    if workers > 1:
        os.environ[OPTIONS_ENV] = options.to_json()       # the spawned workers inherit it
        server.serve_workers(app_factory, workers=workers, host=host, port=port, certfile=cert, keyfile=key,
                             review_timeout=review_timeout, http=http, log_level=log_level)
        return
    app, stop = build_app(options)
    try:
        server.serve(app, host=host, port=port, certfile=cert, keyfile=key, http=http, log_level=log_level)
    finally:
        if stop is not None:
            stop()


def register(app: typer.Typer) -> None:
    app.command()(webhook)
