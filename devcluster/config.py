"""devcluster's data directory: where its PKI, admin token, SQLite state and the kubeconfig it writes live.

Sits at the edge of devcluster: `server.DevCluster` calls `ensure_pki`, `ensure_token` and `write_kubeconfig` on
start; everything is created on first start and reused on restart, so clients keep trusting the same CA.
"""

from __future__ import annotations

import base64
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from lahar.certs import authority

__all__ = ["CONTEXT", "DataDir", "ensure_pki", "ensure_token", "kubeconfig_dict", "secure", "write_kubeconfig"]

CONTEXT = "lahar"
USER = "lahar-admin"


@dataclass(frozen=True)
class DataDir:
    """The layout under one devcluster data directory."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def ca_cert(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.pki / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.pki / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.pki / "apiserver.key"

    @property
    def token(self) -> Path:
        return self.root / "token"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def database(self) -> Path:
        return self.root / "state.db"

    def create(self) -> None:
        """Make the directory (owner-only) and tighten what an older version left readable."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.pki.mkdir(mode=0o700, exist_ok=True)
        secure(self.root)


DIR_MODE, FILE_MODE = 0o700, 0o600


def secure(root: Path) -> None:
    """Owner-only modes under a data directory: every folder 0700, every file 0600 (state.db and its -wal and
    -shm, keys, token, kubeconfig). Called on create and on every reopen, so modes an older version or a
    permissive umask left behind are repaired; symlinks are not followed."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = DIR_MODE if path.is_dir() else FILE_MODE
        if path.stat().st_mode & 0o777 != mode:
            os.chmod(path, mode)


def _hosts_of(cert_pem: bytes) -> set[str]:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(v) for v in san.get_values_for_type(x509.DNSName)} | {
        str(v) for v in san.get_values_for_type(x509.IPAddress)}


def ensure_pki(data: DataDir, *, hosts: list[str] | tuple[str, ...] = ("localhost", "127.0.0.1")) -> None:
    """The CA and the serving certificate: made on first start, reused afterwards (reissued if `hosts` grew)."""
    data.create()
    if data.ca_cert.is_file() and data.ca_key.is_file():
        ca = authority.load(data.ca_cert, data.ca_key)
    else:
        ca = authority.new_ca("lahar-devcluster-ca")
        authority.write(ca, data.ca_cert, data.ca_key)
        secure(data.root)
    wanted = list(dict.fromkeys(["localhost", "127.0.0.1", *hosts]))
    if (data.serving_cert.is_file() and data.serving_key.is_file()
            and set(wanted) <= _hosts_of(data.serving_cert.read_bytes())):
        return
    serving = authority.issue(ca, common_name="lahar-apiserver", hosts=wanted, days=3650)
    authority.write(serving, data.serving_cert, data.serving_key)
    secure(data.root)


def ensure_token(data: DataDir) -> str:
    """The admin bearer token: random on first start, then read back."""
    data.create()
    if data.token.is_file():
        token = data.token.read_text().strip()
        if token:
            return token
    token = secrets.token_urlsafe(32)
    fd = os.open(data.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def kubeconfig_dict(*, server: str, ca_pem: bytes, token: str, namespace: str = "default") -> dict:
    """A kubeconfig with one cluster, one bearer-token user and the context `lahar` selected."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": CONTEXT, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
        }}],
        "users": [{"name": USER, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": USER, "namespace": namespace}}],
        "current-context": CONTEXT,
    }


def write_kubeconfig(data: DataDir, *, server: str, token: str) -> Path:
    """Write `<data_dir>/kubeconfig` (owner-only) and return its path."""
    doc = kubeconfig_dict(server=server, ca_pem=data.ca_cert.read_bytes(), token=token)
    tmp = data.kubeconfig.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    tmp.replace(data.kubeconfig)
    return data.kubeconfig
