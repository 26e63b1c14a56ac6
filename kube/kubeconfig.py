"""Finding the cluster the way kubectl does: an explicit file, `KUBECONFIG`, `~/.kube/config`, the service account.

Sits at the edge of `kube`: every process calls `kubeconfig.load()` once and hands the resulting official
`kubernetes.client.Configuration` to `kube.rest.RestClient`. Parsing is done by the official loaders, and a
`KUBECONFIG` list is merged by the official `KubeConfigMerger` as kubectl merges it: every existing file in order, the
first definition of a cluster, user or context wins, and `current-context` comes from the first file that sets one
(the official merger lets the last file's win; `merged_current_context` supplies kubectl's rule). `context`
(kubectl's `--context`) picks another context of the merged configuration.

Credential refresh costs nothing when nothing can change: the official loaders install a `refresh_api_key_hook` that
runs before every request and rewrites the configuration (the `host` setter alone walks the whole environment for
proxy variables). `load()` drops it when the kubeconfig's credentials are static (a token, a token file read once,
a client certificate, basic auth: no `exec` plugin, no `auth-provider`, no expiry) and, in-cluster, replaces it by
`TokenFileRefresher`, which re-reads the service-account token once a minute as the official loader does and does
nothing in between. Exec plugins and expiring tokens keep the official hook.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import incluster_config, kube_config

__all__ = ["SERVICE_ACCOUNT_DIR", "TOKEN_REFRESH_PERIOD", "ClusterNotFound", "Source", "TokenFileRefresher",
           "credentials_can_change", "find", "load", "merged_current_context"]

TOKEN_REFRESH_PERIOD = 60.0  # seconds between re-reads of the service-account token (the official loader's minute)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterNotFound(RuntimeError):
    """No kubeconfig and no in-cluster service account: the message lists every place looked at."""


@dataclass(frozen=True)
class Source:
    """Where the configuration comes from: `kind` is "explicit", "KUBECONFIG", "home" or "incluster"; `paths` are
    every existing file of a KUBECONFIG list, in order (`path` is the first)."""

    kind: str
    path: Path
    paths: tuple[Path, ...] = ()

    @property
    def files(self) -> tuple[Path, ...]:
        return self.paths or (self.path,)


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
        existing = tuple(dict.fromkeys(c for c in candidates if c.is_file()))
        if existing:
            return Source("KUBECONFIG", existing[0], existing)
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
        token = source.path / "token"
        incluster = incluster_config.InClusterConfigLoader(
            token_filename=str(token), cert_filename=str(source.path / "ca.crt"), environ=env)
        incluster.load_and_set(configuration)
        configuration.refresh_api_key_hook = TokenFileRefresher(token)
        return configuration
    where = os.pathsep.join(str(p) for p in source.files)
    try:
        merger = kube_config.KubeConfigMerger(where)
        if merger.config is None:
            raise k8s_config.ConfigException("no configuration found")
        current = merged_current_context([merger.config_files.get(p) for p in merger.paths])
        if current:  # kubectl's rule, not the official merger's (there the last file's current-context wins)
            merger.config.value["current-context"] = current
        loader = kube_config.KubeConfigLoader(config_dict=merger.config, config_base_path=None,
                                              active_context=context)
        loader.load_and_set(configuration)  # what k8s_config.load_kube_config does, keeping the loader
    except k8s_config.ConfigException as e:
        raise ClusterNotFound(f"kubeconfig {where} ({source.kind}) is not usable: {e}") from e
    if not credentials_can_change(loader):
        configuration.refresh_api_key_hook = None
    return configuration


def merged_current_context(documents: list[dict | None]) -> str | None:
    """kubectl's rule for a KUBECONFIG list: the `current-context` of the first file that sets one."""
    for doc in documents:
        current = (doc or {}).get("current-context") if isinstance(doc, dict) else None
        if current:
            return str(current)
    return None


def credentials_can_change(loader: kube_config.KubeConfigLoader) -> bool:
    """Whether the official loader's refresh hook can ever change the configuration: only an `exec` plugin, an
    `auth-provider` or an expiring token is ever reloaded (a `tokenFile` is read once, at load). Anything this
    cannot tell keeps the hook."""
    try:
        user = loader._user
        if user is not None and ("exec" in user or "auth-provider" in user):
            return True
        return "expiry" in vars(loader)
    except Exception:  # noqa: BLE001 - another client version: keep the official behaviour
        return True


class TokenFileRefresher:
    """An in-cluster `refresh_api_key_hook`: re-reads the (projected, rotating) service-account token when
    `period` seconds have passed since the last read, like `InClusterConfigLoader`'s hook, and does nothing in
    between (the official hook also rewrites host and CA before every request, which never change). Thread-safe:
    when the period is over, one thread re-reads while the others wait for it."""

    _lahar_serialized = True  # kube.rest.RestClient need not wrap it in a lock of its own

    def __init__(self, token_file: str | os.PathLike[str], *, period: float = TOKEN_REFRESH_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.token_file = Path(token_file)
        self.period = period
        self._clock = clock
        self._next = clock() + period
        self._lock = threading.Lock()

    def __call__(self, configuration: k8s_client.Configuration) -> None:
        if self._clock() < self._next:
            return
        with self._lock:
            if self._clock() < self._next:
                return
            content = self.token_file.read_text().strip()
            if not content:
                raise k8s_config.ConfigException("Token file exists but empty.")
            configuration.api_key["BearerToken"] = "bearer " + content
            self._next = self._clock() + self.period
