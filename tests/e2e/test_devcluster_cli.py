"""`lahar devcluster` as a user runs it: the CLI in its own process, the real kubectl, kill -9 and a restart.

Walks the Foundation's "done when" list: CRDs then Volcano's manifests apply, nodes of a profile show their GPUs,
a schema violation is refused naming the field, and state plus watch history survive a SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_port as _free_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "volcano-examples"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]


class Devcluster:
    def __init__(self, data_dir: Path, *, profile: str, nodes: int) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.args = [sys.executable, "-m", "lahar.cli", "devcluster", "--port", str(self.port), "--data-dir",
                     str(data_dir), "--profile", profile, "--nodes", str(nodes)]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.kubeconfig.exists() and self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"devcluster exited: {self.proc.stdout.read().decode() if self.proc.stdout else ''}")
            time.sleep(0.2)
        raise AssertionError("devcluster did not become ready in 60 s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        out = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=60, input=input)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Devcluster]:
    dc = Devcluster(tmp_path / "state", profile="dgx-h100", nodes=4)
    dc.start()
    try:
        yield dc
    finally:
        dc.stop()


def test_profile_nodes_show_their_gpus(cluster: Devcluster) -> None:
    out = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)
    gpus = {n["metadata"]["name"]: n["status"]["capacity"].get("nvidia.com/gpu") for n in out["items"]}
    assert gpus == {f"dgx-h100-{i}": "8" for i in range(4)}
    table = cluster.kubectl("get", "nodes").stdout
    assert table.count(" Ready ") == 4


def test_crds_then_volcano_manifests_and_schema_errors(cluster: Devcluster) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh", "--timeout=20s")
    if EXAMPLES.is_dir():
        cluster.kubectl("apply", "-f", str(EXAMPLES / "job.yaml"))
        cluster.kubectl("apply", "-f", str(EXAMPLES / "hierarchical-jobs" / "queues.yaml"))
    else:
        cluster.kubectl("apply", "-f", str(REPO / "examples" / "queues.yaml"), "-f", str(REPO / "examples" / "job.yaml"))
    listing = cluster.kubectl("get", "vcjob,queue,nodes").stdout
    assert "job.batch.volcano.sh/" in listing
    assert "queue.scheduling.volcano.sh/" in listing
    assert "node/dgx-h100-0" in listing

    bad = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bad-job}
spec:
  minAvailable: -1
  tasks:
    - name: t
      replicas: 1
      template: {spec: {containers: [{name: c, image: busybox}]}}
"""
    refused = cluster.kubectl("apply", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert "spec.minAvailable" in refused.stderr
    assert "greater than or equal to 0" in refused.stderr


def test_kill9_and_restart_keeps_objects_and_watch_history(cluster: Devcluster) -> None:
    cluster.kubectl("create", "namespace", "durable")
    for i in range(5):
        cluster.kubectl("create", "configmap", f"cm-{i}", "-n", "durable", f"--from-literal=i={i}")
    # `kubectl get -o json` builds its own List without a resourceVersion; the raw LIST carries the server's.
    listing = json.loads(cluster.kubectl("get", "--raw", "/api/v1/namespaces/durable/configmaps").stdout)
    seen_rv = listing["metadata"]["resourceVersion"]
    # Writes after the version the watcher saw, then a SIGKILL before anyone reads them.
    cluster.kubectl("label", "configmap", "cm-1", "-n", "durable", "after=yes")
    cluster.kubectl("delete", "configmap", "cm-2", "-n", "durable")
    cluster.kill9()

    cluster.start()
    names = cluster.kubectl("get", "configmaps", "-n", "durable", "-o", "name").stdout.split()
    assert sorted(n for n in names if "cm-" in n) == ["configmap/cm-0", "configmap/cm-1", "configmap/cm-3",
                                                       "configmap/cm-4"]
    raw = cluster.kubectl(
        "get", "--raw",
        f"/api/v1/namespaces/durable/configmaps?watch=true&resourceVersion={seen_rv}&timeoutSeconds=2",
    ).stdout
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    got = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert got == [("MODIFIED", "cm-1"), ("DELETED", "cm-2")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] != "BOOKMARK"]
    assert rvs == sorted(rvs) and rvs[0] > int(seen_rv)

    # resourceVersions keep increasing across the restart.
    cluster.kubectl("create", "configmap", "cm-new", "-n", "durable")
    new_rv = json.loads(cluster.kubectl("get", "configmap", "cm-new", "-n", "durable", "-o", "json").stdout)
    assert int(new_rv["metadata"]["resourceVersion"]) > rvs[-1]
