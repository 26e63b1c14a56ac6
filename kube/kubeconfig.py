"""Finding the cluster the way kubectl does: an explicit file, `KUBECONFIG`, `~/.kube/config`, the service account.

Sits at the edge of `kube`: every process calls `kubeconfig.load()` once and hands the resulting official
`kubernetes.client.Configuration` to `kube.rest.RestClient`. Parsing is done by the official loaders.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import incluster_config

__all__ = ["SERVICE_ACCOUNT_DIR", "ClusterNotFound", "Source", "find", "load"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterNotFound(RuntimeError):
    """No kubeconfig and no in-cluster service account: the message lists every place looked at."""


@dataclass(frozen=True)
class Source:
    """Where the configuration comes from: `kind` is "explicit", "KUBECONFIG", "home" or "incluster"."""

    kind: str
    path: Path


def find(path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None,
         home: Path | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Source:
    """The first configuration source that exists, in kubectl's order; ClusterNotFound naming all tried."""
    env = os.environ if environ is None else environ
    tried: list[str] = []
    if path is not None:
        p = Path(path).expanduser()
        if p.is_file():
            return Source("explicit", p)
        raise ClusterNotFound(f"kubeconfig {p} (given explicitly) does not exist")
    kubeconfig_env = env.get("KUBECONFIG", "")
    if kubeconfig_env:
        candidates = [Path(c).expanduser() for c in kubeconfig_env.split(os.pathsep) if c]
        for c in candidates:
            if c.is_file():
                return Source("KUBECONFIG", c)
        tried.append(f"KUBECONFIG={kubeconfig_env} (no such file)")
    else:
        tried.append("KUBECONFIG (unset)")
    home_config = (home if home is not None else Path(env.get("HOME") or Path.home())) / ".kube" / "config"
    if home_config.is_file():
        return Source("home", home_config)
    tried.append(f"{home_config} (no such file)")
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token = service_account_dir / "token"
    if host and port and token.is_file():
        return Source("incluster", service_account_dir)
    missing = []
    if not host or not port:
        missing.append("KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset")
    if not token.is_file():
        missing.append(f"no {token}")
    tried.append(f"in-cluster service account ({', '.join(missing)})")
    raise ClusterNotFound("no Kubernetes cluster configuration found; tried: " + "; ".join(tried))


def load(path: str | os.PathLike[str] | None = None, *, context: str | None = None,
         environ: Mapping[str, str] | None = None, home: Path | None = None,
         service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> k8s_client.Configuration:
    """A fresh `kubernetes.client.Configuration` for the cluster `find()` picks (never the global default)."""
    source = find(path, environ=environ, home=home, service_account_dir=service_account_dir)
    configuration = k8s_client.Configuration()
    if source.kind == "incluster":
        env = dict(os.environ if environ is None else environ)
        loader = incluster_config.InClusterConfigLoader(
            token_filename=str(source.path / "token"), cert_filename=str(source.path / "ca.crt"), environ=env)
        loader.load_and_set(configuration)
    else:
        try:
            k8s_config.load_kube_config(config_file=str(source.path), context=context,
                                        client_configuration=configuration, persist_config=False)
        except k8s_config.ConfigException as e:
            raise ClusterNotFound(f"kubeconfig {source.path} ({source.kind}) is not usable: {e}") from e
    return configuration
