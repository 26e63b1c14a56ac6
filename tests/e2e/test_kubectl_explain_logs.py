"""What a kubectl user meets on devcluster beyond create/get: `kubectl explain` on built-in kinds and on Volcano's
CRDs, `kubectl apply` still validating server-side, and `kubectl logs` (`-f`, `--tail`) of a simulated pod.

An in-process `devcluster.runtime.Cluster` (server + one simulated node + its kubelet), Volcano's CRDs applied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(home / "cache")]
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True,
                 timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True, env=self.env,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, str]]:
    from lahar.devcluster.runtime import Cluster

    tmp = tmp_path_factory.mktemp("explain-logs")
    running = Cluster(data_dir=tmp / "data", port=0, profile="cpu-small", nodes=1).start()
    try:
        kubectl = Kubectl(running.kubeconfig, tmp / "home")
        kubectl("apply", "-f", str(CRDS))
        kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh", "--timeout=30s")
        kubectl("api-resources")     # refreshes kubectl's discovery cache, which `kubectl explain` does not
        yield kubectl, running.node_names[0]
    finally:
        running.stop()


# --- kubectl explain -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("what", "expected"), [
    ("pod.spec.containers", ["KIND:       Pod", "FIELD: containers <[]Container>", "List of containers belonging to the pod",
                             "image\t<string>"]),
    ("deployment", ["GROUP:      apps", "KIND:       Deployment",
                    "Deployment enables declarative updates for Pods and ReplicaSets", "spec\t<DeploymentSpec>"]),
    ("vcjob.spec", ["GROUP:      batch.volcano.sh", "KIND:       Job", "FIELD: spec <Object>", "minAvailable\t<integer>",
                    "tasks\t<[]Object>"]),
    ("node.status.allocatable", ["KIND:       Node", "FIELD: allocatable <map[string]"]),
], ids=["pod-containers", "deployment", "vcjob-spec", "node-allocatable"])
def test_kubectl_explain(cluster: tuple[Kubectl, str], what: str, expected: list[str]) -> None:
    kubectl, _ = cluster
    out = kubectl("explain", what).stdout
    for text in expected:
        assert text in out, out


def test_kubectl_apply_still_validates_server_side(cluster: tuple[Kubectl, str]) -> None:
    kubectl, _ = cluster
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"tasks": [{"replicas": 1, "name": "t", "bogusField": 1,
                               "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}
    proc = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(job), check=False)
    assert proc.returncode != 0 and "bogusField" in proc.stderr, proc.stderr
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "merge", "namespace": "default"},
           "spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))
    pod["spec"]["containers"][0]["image"] = "busybox:2"     # a strategic merge patch by container name
    assert "pod/merge configured" in kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod)).stdout
    images = kubectl("get", "pod", "merge", "-o", "jsonpath={.spec.containers[*].image}").stdout
    assert images == "busybox:2 busybox", images


# --- kubectl logs --------------------------------------------------------------------------------------------

def _pod(name: str, node: str, duration: str, exit_code: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"lahar.sh/sim-duration": duration, "lahar.sh/sim-exit-code": exit_code}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}})


def _wait_running(kubectl: Kubectl, name: str) -> None:
    deadline = time.monotonic() + 30
    while kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}").stdout != "Running":
        assert time.monotonic() < deadline, f"pod {name} never ran"
        time.sleep(0.2)


def test_kubectl_logs_follow_and_tail(cluster: tuple[Kubectl, str]) -> None:
    kubectl, node = cluster
    kubectl("apply", "-f", "-", stdin=_pod("sim", node, "3s", "2"))
    _wait_running(kubectl, "sim")
    running = kubectl("logs", "sim").stdout.splitlines()
    assert running == ['lahar simulated container "main" (image busybox) started on node ' + node,
                       running[1]] and running[1].startswith("lahar.sh/sim-duration=3s, lahar.sh/sim-exit-code=2"), running
    followed = kubectl("logs", "-f", "sim", timeout=30).stdout.splitlines()   # returns once the container ended
    assert followed[:2] == running and followed[2] == "exited with code 2 (Error)", followed
    assert kubectl("get", "pod", "sim", "-o", "jsonpath={.status.phase}").stdout == "Failed"
    assert kubectl("logs", "sim", "--tail=1").stdout == "exited with code 2 (Error)\n"
    stamped = kubectl("logs", "sim", "--tail=1", "--timestamps").stdout
    assert stamped.endswith("Z exited with code 2 (Error)\n") and stamped[:4].isdigit(), stamped


def test_kubectl_logs_refusals_name_the_reason(cluster: tuple[Kubectl, str]) -> None:
    kubectl, node = cluster
    kubectl("apply", "-f", "-", stdin=_pod("plain", node, "1m", "0"))
    _wait_running(kubectl, "plain")
    bad = kubectl("logs", "plain", "-c", "nope", check=False)
    assert bad.returncode != 0 and "container nope is not valid for pod plain" in bad.stderr, bad.stderr
    previous = kubectl("logs", "plain", "--previous", check=False)
    assert previous.returncode != 0 and 'previous terminated container "main" in pod "plain" not found' in \
        previous.stderr, previous.stderr
    kubectl("delete", "pod", "plain", "--wait=false")
