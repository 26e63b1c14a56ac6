"""lahar on a real control plane, for the real tier's e2e tests: Volcano's CRDs (deploy/crds), the Open `root` and
`default` queues, kwok's nodes, `lahar webhook` over HTTPS registered through `lahar certs ensure --url`, and on
request Redis with lahar's dispatch, worker, scheduler and beat as processes on loopback.

`LaharStack` owns its own `RealCluster` (registering Fail-policy webhooks must not touch the session cluster the
conformance and differential tests share) and ends exactly the processes it started. The webhook configurations
name the Service lahar-webhook.lahar-system in a real deployment; a loopback kube-apiserver has no cluster DNS or
kube-proxy to resolve it, so the stack registers them as a user running `lahar webhook` outside the cluster would:
`lahar certs ensure --url https://127.0.0.1:PORT`, which rewrites each clientConfig into a `url:` (same paths)
and injects the caBundle of the CA it keeps in the lahar-system/lahar-webhook-certs Secret.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import IO

import yaml

from tests.e2e.test_admission_kubectl import Kubectl, lahar, queue
from tests.realcluster.cluster import RealCluster, missing
from tests.support import free_port, wait_for

__all__ = ["CRDS", "REPO", "LaharStack"]

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "deploy" / "crds"


def _tls_answers(port: int, ca: Path) -> bool:
    """The webhook server completes a TLS handshake with a certificate lahar's CA signed, for 127.0.0.1."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
        return True
    return False


@dataclasses.dataclass
class _Child:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


@dataclasses.dataclass
class LaharStack:
    """One real cluster with lahar's CRDs and webhook; `start_controllers()` adds the scheduling side."""

    workdir: Path
    cluster: RealCluster = dataclasses.field(init=False)
    kubectl: Kubectl = dataclasses.field(init=False)
    webhook_url: str = ""
    registration: str = ""  # what `lahar certs ensure --url` printed
    redis_url: str = ""
    _children: list[_Child] = dataclasses.field(default_factory=list)
    _redis: object | None = None

    def start(self) -> LaharStack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def certs_dir(self) -> Path:
        return self.workdir / "certs"

    def _start(self) -> None:
        self.cluster = RealCluster(self.workdir / "cluster").start()
        self.kubectl = Kubectl(self.cluster.kubeconfig, self.workdir / "home")
        self.kubectl("apply", "-f", str(CRDS))
        self.kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh",
                     "crd/queues.scheduling.volcano.sh", "crd/podgroups.scheduling.volcano.sh", "--timeout=60s")
        self.kubectl.apply(yaml.safe_dump_all([queue("root"), queue("default")]))
        self.kubectl.open_queues("root", "default")
        if missing("kwok") is None:  # without kwok the nodes never turn Ready; the tests that need them skip
            self.kubectl.apply(yaml.safe_dump_all(self.cluster.node_manifests()))
            self._untaint_ready_nodes()
        # the Secret (and the files the server reads) first, the registration once the server answers
        lahar("certs", "ensure", "--no-webhooks", "--out", str(self.certs_dir), kubeconfig=self.cluster.kubeconfig)
        port = free_port()
        self._spawn("webhook", ["webhook", "--host", "127.0.0.1", "--port", str(port),
                                "--cert", str(self.certs_dir / "tls.crt"), "--key", str(self.certs_dir / "tls.key"),
                                "--kubeconfig", str(self.cluster.kubeconfig)])
        wait_for("lahar webhook to serve TLS", lambda: self._alive("webhook") and _tls_answers(
            port, self.certs_dir / "ca.crt"), timeout=60)
        self.webhook_url = f"https://127.0.0.1:{port}"
        self.registration = lahar("certs", "ensure", "--url", self.webhook_url, "--out", str(self.certs_dir),
                                  kubeconfig=self.cluster.kubeconfig).stdout

    def _untaint_ready_nodes(self) -> None:
        """The real server's TaintNodesByCondition admission gives every new Node `node.kubernetes.io/not-ready:
        NoSchedule`; kube-controller-manager's node lifecycle controller (not run here: it would also mark kwok's
        nodes unreachable without kubelet leases) takes it off once the node is Ready. Do that part of its job."""
        def ready() -> bool:
            nodes = self.kubectl.json("get", "nodes", "-l", "type=kwok")["items"]
            return len(nodes) == len(self.cluster.node_manifests()) and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
                for n in nodes)

        wait_for("kwok's nodes to be Ready", ready, timeout=60)
        self.kubectl("taint", "nodes", "-l", "type=kwok", "node.kubernetes.io/not-ready:NoSchedule-", check=False)
        wait_for("the not-ready taints to be gone", lambda: not any(
            n["spec"].get("taints") for n in self.kubectl.json("get", "nodes", "-l", "type=kwok")["items"]),
            timeout=30)

    def start_controllers(self) -> None:
        """Redis, then lahar's dispatch, worker, scheduler and beat against the real API server."""
        if self._redis is not None:
            return
        from lahar.up.redis import EmbeddedRedis

        redis = EmbeddedRedis(self.workdir / "redis", log_path=self.workdir / "redis.log").start()
        self._redis = redis
        self.redis_url = redis.url
        self._spawn("dispatch", ["dispatch"])
        self._spawn("worker", ["worker", "--no-supervise", "-c", "2", "--hostname", "real-worker@%h"])
        self._spawn("scheduler", ["scheduler"])
        self._spawn("beat", ["beat"])

    # ----------------------------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG")}
        env.update(KUBECONFIG=str(self.cluster.kubeconfig), PYTHONUNBUFFERED="1", LAHAR_LOG_LEVEL="info",
                   LAHAR_DATA_DIR=str(self.workdir / "data"), HOME=str(self.workdir / "home"))
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("ab")
        popen = subprocess.Popen([sys.executable, "-m", "lahar.cli", *args], cwd=REPO, env=self._env(),
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self._children.append(_Child(name, popen, log, log_path))

    def _alive(self, name: str) -> bool:
        child = next(c for c in self._children if c.name == name)
        if child.popen.poll() is not None:
            raise AssertionError(f"lahar {name} exited with {child.popen.returncode}:\n{self.log_tail(name)}")
        return True

    def log_tail(self, name: str, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / f"{name}.log").read_text(errors="replace")[-chars:]
        return ""

    def stop(self) -> None:
        """SIGTERM each child's process group (by its id), SIGKILL what is still there after 15 s; then Redis and
        the cluster."""
        for child in reversed(self._children):
            if child.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.popen.pid, signal.SIGTERM)
        for child in reversed(self._children):
            try:
                child.popen.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.popen.pid, signal.SIGKILL)
                child.popen.wait(10)
            child.log.close()
        self._children.clear()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.stop()  # type: ignore[attr-defined]
            self._redis = None
        if hasattr(self, "cluster"):
            self.cluster.stop()
