"""A real Kubernetes control plane on loopback for the `real` test tier: etcd, kube-apiserver, and (when built)
kube-controller-manager and kwok with a few simulated nodes.

The binaries come from `tests/peers/build.py` (`make peers`). `RealCluster.start()` writes its own CA, serving
and ServiceAccount keys and a token file into a scratch directory, starts each process in its own process group,
waits until the API answers `/readyz`, and writes an admin kubeconfig; `stop()` ends exactly those processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import ssl
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lahar import certs
from tests.peers import build as peers
from tests.support import free_port

__all__ = ["NODES", "RealCluster", "missing"]

# kube-apiserver admission: the defaults (MutatingAdmissionWebhook and ValidatingAdmissionWebhook among them)
# minus ServiceAccount, which refuses pods until the controller has created the namespace's `default` account:
# a race in every fresh test namespace and nothing lahar's tests are about.
DISABLED_ADMISSION = ("ServiceAccount",)
# The controllers lahar relies on from kube-controller-manager; resourceclaim-controller creates a pod's claims from
# its ResourceClaimTemplates and names them in pod.status.resourceClaimStatuses (DRA, tests/realcluster/test_dra_real.py).
CONTROLLERS = ("namespace-controller", "garbage-collector-controller", "replicaset-controller", "job-controller",
               "serviceaccount-controller", "resourceclaim-controller")
KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")
# A few kwok nodes shaped like devcluster's small profile (CPU, memory, pods, one GPU node).
NODES: tuple[dict[str, str], ...] = (
    {"name": "kwok-cpu-0", "cpu": "16", "memory": "64Gi"},
    {"name": "kwok-cpu-1", "cpu": "16", "memory": "64Gi"},
    {"name": "kwok-gpu-0", "cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"},
)


def missing(*names: str) -> str | None:
    """None when every named peer is built, else the skip reason of the first one that is not."""
    for name in names:
        if peers.binary(name) is None:
            return peers.missing_reason(name)
    return None


def _service_account_keys() -> tuple[bytes, bytes]:
    """(private, public) PEM of a fresh P-256 key: kube-apiserver signs ServiceAccount tokens with the first and
    verifies them with the second (it reads no public key out of a PKCS#8 private key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


@dataclasses.dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


@dataclasses.dataclass
class RealCluster:
    """One control plane in `workdir`; `url`, `token`, `ca_path` and `kubeconfig` are set once started."""

    workdir: Path
    url: str = ""
    token: str = ""
    ca_path: Path = Path()
    kubeconfig: Path = Path()
    with_controllers: bool = True
    with_kwok: bool = True
    started: dict[str, float] = dataclasses.field(default_factory=dict)
    _procs: list[_Proc] = dataclasses.field(default_factory=list)

    # ----------------------------------------------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> RealCluster:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki = self.workdir / "pki"
        ca = certs.new_ca("lahar-real-ca")
        certs.write(ca, pki / "ca.crt", pki / "ca.key")
        serving = certs.issue(ca, common_name="kube-apiserver",
                              hosts=["127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                                     "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        certs.write(serving, pki / "apiserver.crt", pki / "apiserver.key")
        sa_key, sa_pub = pki / "sa.key", pki / "sa.pub"
        private, public = _service_account_keys()
        sa_key.write_bytes(private)
        sa_pub.write_bytes(public)
        self.token = uuid.uuid4().hex
        tokens = pki / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        self.ca_path = pki / "ca.crt"

        begin = time.monotonic()
        etcd_port, etcd_peer = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [
            str(peers.binary("etcd")), "--name=real", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=real=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--log-level=warn", "--listen-metrics-urls=",
        ])
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health"), timeout)
        self.started["etcd"] = time.monotonic() - begin

        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self._spawn("kube-apiserver", [
            str(peers.binary("kube-apiserver")), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            f"--disable-admission-plugins={','.join(DISABLED_ADMISSION)}",
            f"--cert-dir={pki}", "--profiling=false", "--v=1",
        ])
        self._wait("kube-apiserver", self._ready, timeout)
        self.started["kube-apiserver"] = time.monotonic() - begin
        self.kubeconfig = self.workdir / "kubeconfig"
        self._write_kubeconfig()

        if self.with_controllers and peers.binary("kube-controller-manager") is not None:
            self._spawn("kube-controller-manager", [
                str(peers.binary("kube-controller-manager")), f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
                f"--controllers={','.join(CONTROLLERS)}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}", f"--cert-dir={pki / 'kcm'}",
                "--use-service-account-credentials=false", "--concurrent-gc-syncs=5",
                f"--root-ca-file={pki / 'ca.crt'}", "--v=1",
            ])
            self.started["kube-controller-manager"] = time.monotonic() - begin
        if self.with_kwok and peers.binary("kwok") is not None:
            self._spawn("kwok", [
                str(peers.binary("kwok")), f"--kubeconfig={self.kubeconfig}", f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false", "--manage-nodes-with-label-selector=type=kwok",
                "--node-ip=127.0.0.1", f"--server-address=127.0.0.1:{free_port()}",
            ])
            self.started["kwok"] = time.monotonic() - begin

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "real",
            "clusters": [{"name": "real", "cluster": {"server": self.url, "certificate-authority": str(self.ca_path)}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def node_manifests(self) -> list[dict[str, Any]]:
        """The Node objects for NODES, labelled and annotated so kwok takes them over."""
        out = []
        for spec in NODES:
            capacity = {k: v for k, v in spec.items() if k != "name"} | {"pods": "110"}
            out.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": spec["name"], "labels": {"type": "kwok", "kubernetes.io/hostname": spec["name"]},
                             "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": []},
                "status": {"capacity": capacity, "allocatable": capacity},
            })
        return out

    # ----------------------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("wb")
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=self.workdir)
        self._procs.append(_Proc(name, popen, log, log_path))

    def _proc(self, name: str) -> _Proc:
        return next(p for p in self._procs if p.name == name)

    def _wait(self, name: str, ready: Any, timeout: float) -> None:
        proc = self._proc(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.popen.returncode}: {self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} not ready in {timeout:.0f} s: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        with contextlib.suppress(OSError, StopIteration):
            return "\n".join(self._proc(name).log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def get(self, path: str, *, timeout: float = 5.0) -> bytes:
        """GET `path` from the API server as the admin (raises urllib's errors)."""
        ctx = ssl.create_default_context(cafile=str(self.workdir / "pki" / "ca.crt"))
        req = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:  # noqa: S310 - loopback https
            return bytes(resp.read())

    def _ready(self) -> bool:
        with contextlib.suppress(OSError):
            return self.get("/readyz", timeout=2) == b"ok"
        return False

    def alive(self) -> dict[str, bool]:
        return {p.name: p.popen.poll() is None for p in self._procs}

    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs]

    def stop(self, grace: float = 10.0) -> None:
        """End every process this cluster started (its own process group, by id), newest first."""
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(grace)
            proc.log.close()
        self._procs.clear()


def _http_ok(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback http
        return bool(resp.status == 200)
    return False
