"""A gang with WaitForFirstConsumer PVCs runs on devcluster (issue 17 item 3), through the real kubectl.

`kubectl apply` a StorageClass (WaitForFirstConsumer), two PVCs and a Volcano Job of two pods, each mounting one
claim. The test plays lahar's job controller (`controllers.jobs.reconcile`) and runs scheduler sessions one at a time
(`scheduler.session.run_once`); devcluster's own provisioner and simulated kubelets do the rest. Both pods run, and
each claim is Bound to a PV whose node affinity names the pod's node.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from lahar.kube import errors
from lahar.kube.rest import RestClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import pod_template, queue, vcjob
from tests.support import scheduling_devcluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
NS = "default"
STORAGE = [
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-wffc"},
     "provisioner": "lahar.sh/local", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    *({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"data-{i}", "namespace": NS},
       "spec": {"storageClassName": "local-wffc", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}} for i in range(2)),
]


def _job() -> dict[str, Any]:
    """Two tasks of one pod, each a whole cpu-small node's CPUs (one pod per node), each mounting its claim."""
    b = vcjob("train", NS).spec(minAvailable=2, schedulerName="volcano", queue="default")
    for i in range(2):
        template = pod_template(requests={"cpu": "4", "memory": "64Mi"}, restart_policy="Never",
                                volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{i}"}}])
        template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        template["metadata"] = {"annotations": {"lahar.sh/sim-duration": "600s"}}
        b.task(f"w{i}", 1, template=template)
    return b.obj


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, RestClient]]:
    with scheduling_devcluster(tmp_path_factory.mktemp("volumes") / "data", crds=("batch.volcano.sh_jobs.yaml",)) as both:
        yield both


def _kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out.stdout


def test_gang_with_wait_for_first_consumer_claims_runs(cluster: tuple[Any, RestClient]) -> None:
    from lahar.controllers import jobs
    from lahar.controllers.context import Context

    c, client = cluster
    env = dict(os.environ, KUBECONFIG=str(c.kubeconfig))
    reg = client.registry
    with contextlib.suppress(errors.AlreadyExists):
        client.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("default").bare())
    manifest = yaml.safe_dump_all([*STORAGE, _job()])
    _kubectl(env, "apply", "-f", "-", stdin=manifest)

    def phases() -> set[str]:
        items = json.loads(_kubectl(env, "get", "pvc", "-n", NS, "-o", "json"))["items"]
        return {(p.get("status") or {}).get("phase") or "" for p in items}

    wait_for("the claims to be Pending", lambda: phases() == {"Pending"}, 20, 0.2)  # waiting for a consumer

    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    ctx = Context(client=client)
    pods: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        jobs.reconcile(ctx, NS, "train")
        _, result = run_once(client, conf, registry=registry)
        assert not result.bind_failures, result.bind_failures
        pods = json.loads(_kubectl(env, "get", "pods", "-n", NS, "-l", "volcano.sh/job-name=train",
                                   "-o", "json"))["items"]
        if len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods):
            break
        time.sleep(0.5)
    assert [p["status"].get("phase") for p in pods] == ["Running", "Running"], \
        _kubectl(env, "describe", "pods", "-n", NS)

    node_of_claim = {v["persistentVolumeClaim"]["claimName"]: p["spec"]["nodeName"]
                     for p in pods for v in p["spec"]["volumes"] if v.get("persistentVolumeClaim")}
    assert sorted(node_of_claim) == ["data-0", "data-1"]
    claims = {p["metadata"]["name"]: p for p in json.loads(_kubectl(env, "get", "pvc", "-n", NS, "-o", "json"))["items"]}
    volumes = {v["metadata"]["name"]: v for v in json.loads(_kubectl(env, "get", "pv", "-o", "json"))["items"]}
    for name, node_name in node_of_claim.items():
        claim = claims[name]
        assert claim["status"]["phase"] == "Bound"
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_name
        volume = volumes[claim["spec"]["volumeName"]]
        assert volume["status"]["phase"] == "Bound"
        exprs = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
        assert {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]} in exprs
    assert len(set(node_of_claim.values())) == 2  # one pod per node: each PV follows its own pod
