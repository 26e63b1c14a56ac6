"""A gang with WaitForFirstConsumer PVCs runs on `lahar up` (issue 17 item 3), through the real kubectl.

`kubectl apply` a StorageClass (WaitForFirstConsumer, devcluster's simulated provisioner), four PVCs and a Volcano
Job of four pods (minAvailable 4), each mounting its own claim and taking most of a cpu-small node. The stack does
the rest: the job controller creates the pods, the scheduler picks the nodes, writes the claims' selected-node and
binds each pod once its claim is Bound. Every pod runs, every claim is Bound to a PV whose node affinity names its
pod's node. A second gang whose class admits one node only (`allowedTopologies`) binds nothing — not even the pods
that would fit there — and its pods say why (kube-scheduler's "didn't find available persistent volumes to bind").
A third Job's `spec.volumes[].volumeClaim` (one claim the job controller creates for all its pods) puts both its
pods on the node that claim was provisioned for. The time from apply to all Running is printed.

Uses `Up` of `test_lahar_up` (the whole stack in its own process on a temporary data dir).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from tests.builders import pod_template, vcjob
from tests.e2e import test_lahar_up as base
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark
up = base.up

NS = "default"
HOSTNAME = "kubernetes.io/hostname"


def storage_class(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "lahar.sh/local", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
            **fields}


def claim(name: str, cls: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def gang(name: str, claims: list[str], cpu: str, memory: str = "64Mi") -> dict[str, Any]:
    """One task of one pod per claim (each pod its own PVC), minAvailable = all of them, running for 10 minutes."""
    b = vcjob(name, NS).spec(minAvailable=len(claims), schedulerName="volcano", queue="default")
    for i, claim_name in enumerate(claims):
        template = pod_template(requests={"cpu": cpu, "memory": memory}, restart_policy="Never",
                                annotations={"lahar.sh/sim-duration": "600s"},
                                volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])
        template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        b.task(f"w{i}", 1, template=template)
    return b.obj


def shared(name: str, cpu: str) -> dict[str, Any]:
    """Two pods of one task and the job's own claim (`spec.volumes[].volumeClaim`: the job controller creates one
    PVC that every pod mounts)."""
    template = pod_template(requests={"cpu": cpu, "memory": "64Mi"}, restart_policy="Never",
                            annotations={"lahar.sh/sim-duration": "600s"})
    return vcjob(name, NS).spec(minAvailable=2, schedulerName="volcano", queue="default", volumes=[{
        "mountPath": "/ckpt", "volumeClaim": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-wffc",
                                              "resources": {"requests": {"storage": "1Gi"}}}}]).task(
        "w", 2, template=template).obj


def apply(up: Up, tmp_path: Path, name: str, objs: list[dict[str, Any]]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    up.kubectl("apply", "-f", str(path))


def items(up: Up, *args: str) -> list[dict[str, Any]]:
    return json.loads(up.kubectl("get", *args, "-o", "json").stdout)["items"]


def test_gang_with_wait_for_first_consumer_claims_runs_and_one_that_cannot_binds_nothing(up: Up,
                                                                                         tmp_path: Path) -> None:
    up.start()
    log = up.data_dir / "logs" / "scheduler.log"  # time the gang, not the scheduler's start
    wait_for("the scheduler's sessions to start", lambda: "sessions start" in log.read_text(errors="replace"), 60)
    data = [f"data-{i}" for i in range(4)]
    scratch = [f"scratch-{i}" for i in range(4)]
    only = sorted(n["metadata"]["name"] for n in items(up, "nodes"))[0]
    one_node = storage_class("one-node", allowedTopologies=[{"matchLabelExpressions": [
        {"key": HOSTNAME, "values": [only]}]}])
    started = time.monotonic()
    # train: 3 of a node's 4 CPUs per pod (one per node); ckpt: a quarter CPU per pod; stuck: its class admits one
    # node, where at most three of its 2.5Gi pods fit (a node has 8Gi): it stays whole and unbound. The queue holds
    # all three (enqueue counts their minResources against the cluster's 16 CPUs)
    apply(up, tmp_path, "gangs", [storage_class("local-wffc"), one_node, *(claim(n, "local-wffc") for n in data),
                                  *(claim(n, "one-node") for n in scratch), gang("train", data, cpu="3"),
                                  gang("stuck", scratch, cpu="100m", memory="2560Mi"), shared("ckpt", cpu="250m")])
    marks: dict[str, float] = {}

    def running() -> list[dict[str, Any]] | None:
        pods = items(up, "pods", "-n", NS, "-l", "volcano.sh/job-name=train")
        if len(pods) == 4:
            marks.setdefault("created", time.monotonic())
            if all(p["spec"].get("nodeName") for p in pods):
                marks.setdefault("bound", time.monotonic())
        return pods if len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods) else None

    try:
        pods = wait_for("the four pods of train to be Running", running, 60, 0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{up.kubectl('describe', 'pods', '-n', NS).stdout[-3000:]}") from None
    done = time.monotonic()
    print(f"\nvolume gang (4 pods, 4 WaitForFirstConsumer claims): apply -> 4 pods created "
          f"{marks.get('created', done) - started:.2f} s, -> all bound {marks.get('bound', done) - started:.2f} s, "
          f"-> all Running {done - started:.2f} s")

    node_of_claim = {v["persistentVolumeClaim"]["claimName"]: p["spec"]["nodeName"]
                     for p in pods for v in p["spec"]["volumes"] if v.get("persistentVolumeClaim")}
    assert sorted(node_of_claim) == data
    assert len(set(node_of_claim.values())) == 4  # one pod per node: each PV follows its own pod
    claims = {c["metadata"]["name"]: c for c in items(up, "pvc", "-n", NS)}
    volumes = {v["metadata"]["name"]: v for v in items(up, "pv")}
    for name, node_name in node_of_claim.items():
        got = claims[name]
        assert got["status"]["phase"] == "Bound", got
        assert got["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_name
        volume = volumes[got["spec"]["volumeName"]]
        assert volume["status"]["phase"] == "Bound"
        exprs = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
        assert {"key": HOSTNAME, "operator": "In", "values": [node_name]} in exprs

    # ckpt: the job controller's claim, provisioned where the first pod went, and both pods there
    def ckpt() -> tuple[set[str], dict[str, Any]] | None:
        pods = items(up, "pods", "-n", NS, "-l", "volcano.sh/job-name=ckpt")
        mine = [c for c in items(up, "pvc", "-n", NS) if c["metadata"]["name"].startswith("ckpt-pvc-")]
        if len(pods) != 2 or not all(p["status"].get("phase") == "Running" for p in pods) or len(mine) != 1:
            return None
        return {p["spec"]["nodeName"] for p in pods}, mine[0]

    ckpt_nodes, ckpt_claim = wait_for("the two pods of ckpt to be Running", ckpt, 30, 0.3)
    assert len(ckpt_nodes) == 1 and ckpt_claim["status"]["phase"] == "Bound", (ckpt_nodes, ckpt_claim)
    assert ckpt_claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] in ckpt_nodes

    def reasons() -> list[str] | None:
        pods = items(up, "pods", "-n", NS, "-l", "volcano.sh/job-name=stuck")
        if len(pods) != 4:
            return None
        events = [e for e in items(up, "events", "-n", NS) if e["involvedObject"].get("kind") == "Pod"
                  and e["involvedObject"]["name"].startswith("stuck-") and e.get("reason") == "FailedScheduling"]
        messages = [e.get("message") or "" for e in events]
        return messages if any("didn't find available persistent volumes to bind" in m for m in messages) else None

    messages = wait_for("a FailedScheduling reason naming the volumes of stuck", reasons, 30, 0.5)
    print("stuck:", next(m for m in messages if "persistent volumes" in m))
    time.sleep(2)  # two more sessions: still nothing bound
    stuck = items(up, "pods", "-n", NS, "-l", "volcano.sh/job-name=stuck")
    assert [p["spec"].get("nodeName") for p in stuck] == [None] * 4, messages
    for c in items(up, "pvc", "-n", NS):
        if c["metadata"]["name"] in scratch:
            assert c["status"]["phase"] == "Pending", c
            assert "volume.kubernetes.io/selected-node" not in (c["metadata"].get("annotations") or {}), c
    # every pod bound was bound at its first try: no claim timed out or was asked for two nodes
    failures = [line for line in log.read_text(errors="replace").splitlines() if "lahar.scheduler.commit: bind " in line]
    assert failures == [], failures
    assert up.interrupt() == 0, up.output()
