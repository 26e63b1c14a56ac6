"""Plain workloads on devcluster with the real kubectl: Deployments, scaling, StatefulSets and batch/v1 Jobs.

An in-process `devcluster.runtime.Cluster` (server + simulated nodes + kubelets + workload controllers); kubectl
creates, scales and waits exactly as a user would on a real cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / ".." / "shared" / "volcano-examples"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, check: bool = True, input: str | None = None,
                 timeout: float = 90) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(["kubectl", *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                             input=input)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)

    def pods(self, ns: str, selector: str | None = None) -> list[dict]:
        args = ["get", "pods", "-n", ns] + (["-l", selector] if selector else [])
        return [p for p in self.json(*args)["items"] if not p["metadata"].get("deletionTimestamp")]

    def wait_for(self, what: str, check: Any, *, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    from lahar.devcluster.runtime import Cluster

    cluster = Cluster(data_dir=tmp_path_factory.mktemp("workloads") / "data", port=0, profile="cpu-small",
                      nodes=2).start()
    try:
        yield Kubectl(cluster.kubeconfig)
    finally:
        cluster.stop()


_counter = iter(range(1000))


@pytest.fixture
def ns(kubectl: Kubectl) -> str:
    name = f"wl-{next(_counter)}"
    kubectl("create", "namespace", name)
    return name


def _owner(obj: dict) -> dict:
    (ref,) = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
    return ref


def test_create_deployment_scale_and_rollout(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", ns)
    kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
    pods = kubectl.pods(ns, "app=web")
    assert len(pods) == 2
    (rs,) = kubectl.json("get", "replicasets", "-n", ns)["items"]
    assert _owner(rs)["kind"] == "Deployment"
    assert {(_owner(p)["kind"], _owner(p)["uid"]) for p in pods} == {("ReplicaSet", rs["metadata"]["uid"])}
    assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in pods)
    assert rs["metadata"]["name"] == f"web-{rs['metadata']['labels']['pod-template-hash']}"

    kubectl("scale", "deployment/web", "--replicas=4", "-n", ns)
    kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
    assert len(kubectl.pods(ns, "app=web")) == 4
    kubectl("scale", "deployment/web", "--replicas=1", "-n", ns)
    kubectl.wait_for("one pod", lambda: len(kubectl.pods(ns, "app=web")) == 1)
    status = kubectl.wait_for("status of 1", lambda: (s := kubectl.json("get", "deployment", "web", "-n", ns)[
        "status"]).get("replicas") == 1 and s)
    assert (status["readyReplicas"], status["availableReplicas"]) == (1, 1)

    kubectl("set", "image", "deployment/web", "nginx=nginx:1.27", "-n", ns)
    kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
    (pod,) = kubectl.wait_for("the new pod", lambda: [p for p in kubectl.pods(ns, "app=web")
                                                      if p["spec"]["containers"][0]["image"] == "nginx:1.27"])
    assert len(kubectl.json("get", "replicasets", "-n", ns)["items"]) == 2


def test_delete_deployment_collects_its_replicasets_and_pods(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "deployment", "gone", "--image=nginx", "--replicas=2", "-n", ns)
    kubectl.wait_for("pods", lambda: len(kubectl.pods(ns, "app=gone")) == 2)
    kubectl("delete", "deployment", "gone", "-n", ns, "--wait=true", "--timeout=60s")
    kubectl.wait_for("nothing left", lambda: not kubectl.json("get", "replicasets", "-n", ns)["items"]
                     and not kubectl.pods(ns, "app=gone"))


JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  completions: {completions}
  parallelism: 2
  backoffLimit: {backoff}
  template:
    metadata:
      annotations:
        lahar.sh/sim-duration: 1s
        lahar.sh/sim-exit-code: "{code}"
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          resources:
            requests:
              cpu: 100m
"""


def test_batch_job_runs_to_complete(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=JOB.format(name="pi", completions=3, backoff=6, code=0))
    kubectl("wait", "--for=condition=complete", "job/pi", "-n", ns, "--timeout=60s")
    job = kubectl.json("get", "job", "pi", "-n", ns)
    assert job["status"]["succeeded"] == 3
    assert job["status"].get("completionTime")
    pods = kubectl.json("get", "pods", "-n", ns, "-l", "job-name=pi")["items"]
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    uid = job["metadata"]["uid"]
    assert {p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] for p in pods} == {uid}
    assert {_owner(p)["uid"] for p in pods} == {uid}
    assert "pi" in kubectl("get", "jobs", "-n", ns).stdout


def test_batch_job_fails_after_backoff_limit(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=JOB.format(name="bad", completions=1, backoff=1, code=3))
    kubectl("wait", "--for=condition=failed", "job/bad", "-n", ns, "--timeout=60s")
    job = kubectl.json("get", "job", "bad", "-n", ns)
    (cond,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert cond["reason"] == "BackoffLimitExceeded"
    assert job["status"]["failed"] == 2


STS = """
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 3
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
        - name: db
          image: redis
"""


def test_statefulset_ordinal_pods(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=STS)
    kubectl("rollout", "status", "statefulset/db", "-n", ns, "--timeout=60s")
    pods = kubectl.pods(ns, "app=db")
    assert sorted(p["metadata"]["name"] for p in pods) == ["db-0", "db-1", "db-2"]
    assert {_owner(p)["kind"] for p in pods} == {"StatefulSet"}
    kubectl("scale", "statefulset/db", "--replicas=1", "-n", ns)
    kubectl.wait_for("db-0 only", lambda: [p["metadata"]["name"] for p in kubectl.pods(ns, "app=db")] == ["db-0"])


def test_volcano_deployment_example_gets_owned_pods(kubectl: Kubectl, ns: str) -> None:
    folder = EXAMPLES / "deployment"
    if not folder.is_dir():
        pytest.skip("Volcano's examples are not next to this checkout")
    kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    kubectl.wait_for("the Queue kind", lambda: kubectl("get", "queues", check=False).returncode == 0)
    kubectl("apply", "-f", str(folder / "queue.yaml"))
    kubectl("apply", "-n", ns, "-f", str(folder / "deployment.yaml"))
    (pod,) = kubectl.wait_for("the pod", lambda: kubectl.pods(ns, "app=nginx"))
    assert _owner(pod)["kind"] == "ReplicaSet"
    assert pod["spec"]["schedulerName"] == "volcano"  # left to lahar's scheduler: the default-scheduler skips it
    assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "test"
    assert not pod["spec"].get("nodeName")
