"""`lahar explain job -f job.yaml` against devcluster (volcano#4738): admitted, enqueued, placed, and what blocks a
Job that is not, answered without submitting anything.

One devcluster with Volcano's CRDs, Open queues `root`, `default` and `small` (capability cpu 1), and one Ready
node with 4 CPUs (published by hand: no simulated nodes run here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.builders import pod_template

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"


def _node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from lahar.devcluster.server import DevCluster
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube import resources
    from lahar.kube.rest import RestClient

    dc = DevCluster(tmp_path_factory.mktemp("explain-job") / "cluster").start()
    client = RestClient(kubeconfigs.load(dc.kubeconfig))
    try:
        reg = client.registry
        for path in sorted(CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                client.create(reg.get("apiextensions.k8s.io", "v1", "customresourcedefinitions"), doc)
        client.close()
        client = RestClient(kubeconfigs.load(dc.kubeconfig), registry=resources.in_tree())
        q_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")
        for name, spec in (("root", {}), ("default", {"parent": "root"}),
                           ("small", {"parent": "root", "capability": {"cpu": "1"}})):
            q = builders.queue(name).bare()
            q["spec"] = {**q.get("spec", {}), **spec}
            created = _retry(lambda q=q: client.create(q_rt, q))
            created["status"] = {"state": "Open"}
            client.update_status(q_rt, created)
        n_rt = client.registry.get("", "v1", "nodes")
        node = client.create(n_rt, _node("n1", "4"))
        node["status"] = _node("n1", "4")["status"]
        client.update_status(n_rt, node)
        yield dc
    finally:
        client.close()
        dc.stop()


def _retry(fn: Any) -> Any:
    import time

    from lahar.kube import errors

    for _ in range(100):
        try:
            return fn()
        except errors.NotFound:  # the CRD is not served yet
            time.sleep(0.1)
    return fn()


def explain(cluster: Any, tmp_path: Path, job: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    proc = subprocess.run([sys.executable, "-m", "lahar.cli", "explain", "job", "-f", str(path), "-o", "json",
                           "--kubeconfig", str(cluster.kubeconfig)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def job(name: str, *, cpu: str = "1", replicas: int = 2, **spec: Any) -> dict[str, Any]:
    template = pod_template(restart_policy="Never")
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return builders.vcjob(name, namespace="default").task("t", replicas, template=template).spec(**spec).build()


def test_a_job_that_fits_is_admitted_enqueued_and_placed_and_nothing_is_stored(cluster, tmp_path) -> None:
    code, out = explain(cluster, tmp_path, job("fits"))
    assert code == 0, out
    assert out | {"blocked_by": ""} == {"job": "default/fits", "admitted": True, "enqueued": True, "placed": True,
                                        "blocked_by": "", "bound": 2, "min_available": 2}
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube import resources
    from lahar.kube.rest import RestClient

    client = RestClient(kubeconfigs.load(cluster.kubeconfig), registry=resources.in_tree())
    try:
        for group, version, plural in (("batch.volcano.sh", "v1alpha1", "jobs"), ("", "v1", "pods"),
                                       ("scheduling.volcano.sh", "v1beta1", "podgroups")):
            assert client.list(client.registry.get(group, version, plural), namespace="default")["items"] == []
    finally:
        client.close()


def test_a_denied_job_names_the_webhooks_message(cluster, tmp_path) -> None:
    code, out = explain(cluster, tmp_path, job("bad", minAvailable=5))
    assert code == 1
    assert (out["admitted"], out["enqueued"], out["placed"]) == (False, False, False)
    assert "should not be greater than total replicas" in out["blocked_by"], out


def test_a_queue_capability_is_named(cluster, tmp_path) -> None:
    code, out = explain(cluster, tmp_path, job("capped", queue="small"))
    assert code == 1
    assert (out["admitted"], out["enqueued"]) == (True, False), out
    assert out["blocked_by"].startswith("queue small capability cpu: 1 < allocated 0 + requested 2"), out


def test_a_job_too_big_for_the_nodes_is_not_placed(cluster, tmp_path) -> None:
    code, out = explain(cluster, tmp_path, job("huge", cpu="3"))
    assert code == 1
    assert (out["admitted"], out["enqueued"], out["placed"]) == (True, False, False), out  # 6 CPUs, 4 in the cluster
    assert "resource in cluster is overused" in out["blocked_by"], out
