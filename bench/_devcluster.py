"""For the benches: `lahar devcluster` in its own process with `nodes` cpu-small nodes (4 cpu, 8Gi) and Volcano's
PodGroup and Queue CRDs applied, as a context manager yielding a client over HTTPS (and stopping the process).

Imported by `bench/scheduler.py` and `bench/status_writes.py` (run as scripts: `bench/` is on `sys.path`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _wait(what: str, fn: Callable[[], Any], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if fn():
                return
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}; see {log}")


@contextlib.contextmanager
def devcluster(nodes: int, *, prefix: str = "lahar-bench-", timeout: float = 180.0) -> Iterator[Any]:
    from lahar.kube import errors, kubeconfig
    from lahar.kube.rest import RestClient

    work = Path(tempfile.mkdtemp(prefix=prefix))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = work / "devcluster.log"
    log = open(log_path, "ab")  # noqa: SIM115 - the child keeps its own descriptor
    proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "devcluster", "--port", str(port), "--data-dir",
                             str(work / "dc"), "--profile", "cpu-small", "--nodes", str(nodes)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), LAHAR_LOG_LEVEL="WARNING"))
    log.close()
    try:
        _wait("devcluster's kubeconfig", lambda: (work / "dc" / "kubeconfig").exists(), log_path, timeout)
        client = RestClient(kubeconfig.load(work / "dc" / "kubeconfig"), pool_size=64)
        reg = client.registry
        _wait(f"{nodes} nodes", lambda: len(client.list(reg.get("", "v1", "nodes"))["items"]) >= nodes, log_path,
              timeout)
        crd_rt = reg.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for name in ("scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml"):
            with contextlib.suppress(errors.AlreadyExists):
                client.create(crd_rt, yaml.safe_load((ROOT / "deploy" / "crds" / name).read_text()))
        _wait("the PodGroup CRD", lambda: client.list(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"))
              is not None, log_path, timeout)
        yield client
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
