"""`lahar certs generate|ensure`: the webhook's TLS material, made once or kept fresh in the cluster.

Thin shells over `certs.authority` (generate) and `certs.bundles.ensure` (Secret + webhook configurations + files).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from urllib.parse import urlsplit

import typer

from lahar import data

__all__ = ["register"]

DEFAULT_MANIFESTS = data.webhooks()

certs_app = typer.Typer(no_args_is_help=True, help="Certificates for lahar's admission webhooks.")


@certs_app.command()
def generate(
    service: str = typer.Option("lahar-webhook", help="The webhook Service name."),
    namespace: str = typer.Option("lahar-system", help="The webhook Service namespace."),
    out: Path = typer.Option(..., "--out", help="Directory for ca.crt, tls.crt and tls.key."),
    days: int = typer.Option(365, help="Serving certificate lifetime in days."),
    ca_days: int = typer.Option(3650, "--ca-days", help="CA lifetime in days."),
    host: list[str] = typer.Option([], "--host", help="Extra SAN (DNS name or IP); repeatable."),
) -> None:
    """A new CA and a serving certificate for SERVICE.NAMESPACE(.svc(.cluster.local)), localhost and 127.0.0.1."""
    from lahar.certs import authority, bundles

    hosts = list(dict.fromkeys([*authority.serving_hosts(service, namespace), *host]))
    ca = authority.new_ca(bundles.CA_COMMON_NAME, days=ca_days)
    serving = authority.issue(ca, common_name=f"{service}.{namespace}.svc", hosts=hosts, days=days)
    bundles.write_files(bundles.Material(ca=ca, serving=serving), out)
    typer.echo(f"wrote {out / 'ca.crt'}, {out / 'tls.crt'}, {out / 'tls.key'} (SANs: {', '.join(hosts)})")


@certs_app.command()
def ensure(
    kubeconfig: Path = typer.Option(None, "--kubeconfig", help="Cluster to use (default: as kubectl finds it)."),
    namespace: str = typer.Option("lahar-system", help="Namespace of the Secret and the webhook Service."),
    secret: str = typer.Option("lahar-webhook-certs", help="Secret holding the CA and serving certificate."),
    url: str = typer.Option(None, help="Register the webhooks at this base URL (https://127.0.0.1:PORT) "
                                       "instead of the Service: for devcluster and a local `lahar webhook`."),
    service: str = typer.Option("lahar-webhook", help="The webhook Service name."),
    out: Path = typer.Option(None, "--out", help="Also write ca.crt, tls.crt, tls.key here for the webhook server."),
    manifests: Path = typer.Option(DEFAULT_MANIFESTS, help="Directory of the webhook configurations to register."),
    no_webhooks: bool = typer.Option(False, "--no-webhooks", help="Only the Secret (and --out); "
                                                                  "leave the webhook configurations alone."),
    scheduler_name: list[str] = typer.Option([], "--scheduler-name",
                                             help="Scheduler names whose pods go through lahar (default volcano)."),
    days: int = typer.Option(365, help="Serving certificate lifetime in days."),
    ca_days: int = typer.Option(3650, "--ca-days", help="CA lifetime in days."),
    host: list[str] = typer.Option([], "--host", help="Extra SAN (DNS name or IP); repeatable."),
    every: float = typer.Option(0.0, help="Keep running and check again every N seconds (0: once)."),
    all_namespaces_policies: bool = typer.Option(
        False, "--policies-from-all-namespaces",
        help="Count the policy ConfigMaps of every namespace, as `lahar webhook --policies-from-all-namespaces` "
             "loads them (give both the same flag, or the two would register different policy entries)."),
) -> None:
    """Keep the CA and serving certificate in a Secret, renewing them in time, and register lahar's webhooks.

    Renews when less than a third of a certificate's lifetime remains; writes `caBundle` into the configurations
    of --manifests (creating them if absent). The entries that only run AdmissionPolicies (/policies/mutate,
    /policies/validate) are registered only as far as the policy ConfigMaps in --namespace (every namespace with
    --policies-from-all-namespaces) could match; the
    webhook keeps them so as policies come and go. Safe to run from several replicas at once.
    """
    from lahar.certs import authority, bundles
    from lahar.kube import errors
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube.rest import RestClient
    from lahar.webhooks import policystage

    hosts = authority.serving_hosts(service, namespace)
    if url:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise typer.BadParameter("must be https://HOST[:PORT]", param_hint="--url")
        hosts.append(parts.hostname)
    hosts = list(dict.fromkeys([*hosts, *host]))
    templates = [] if no_webhooks else bundles.load_templates(manifests)
    client = RestClient(kubeconfigs.load(kubeconfig))
    stop = threading.Event()
    if every > 0:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    try:
        while True:
            try:
                result = bundles.ensure(client, namespace=namespace, secret_name=secret, hosts=hosts,
                                        templates=templates, url=url, service=None if url else service,
                                        out_dir=out, days=days, ca_days=ca_days,
                                        scheduler_names=scheduler_name or None,
                                        policies=policystage.cluster_demand(
                                            client, namespace=None if all_namespaces_policies else namespace)
                                        if templates else None)
            except errors.ApiError as exc:
                typer.echo(f"error: {exc}", err=True)
                if every <= 0:
                    raise typer.Exit(1) from exc
            else:
                for line in result.summary():
                    typer.echo(line)
            if every <= 0 or stop.wait(every):
                break
    finally:
        client.close()


def register(app: typer.Typer) -> None:
    app.add_typer(certs_app, name="certs")
