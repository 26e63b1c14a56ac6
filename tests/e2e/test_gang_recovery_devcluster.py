"""Gangs never stall, on devcluster (issue 20 item 4, volcano#5805): a running gang loses a node and one pod with it,
a fresh gang of the same queue and priority waits for the same room, the node comes back, and the first gang is
whole again within 2 sessions — before the fresh gang, although drf's share puts the fresh gang first.

An in-process `devcluster.runtime.Cluster` (HTTPS API server, simulated kubelets); the node is deleted with the real
kubectl; the test plays the job controller (it recreates the lost pod) and runs one scheduler session at a time
with `scheduler.session.run_once`, the session of `lahar scheduler` without its informer cache.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from lahar.kube import errors
from lahar.kube.rest import RestClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import podgroup, queue
from tests.support import scheduling_devcluster, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

# drf orders jobs by share: the half-run gang holds 4 CPUs, the fresh one none
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
NS = "default"
LOST = "cpu-small-1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, RestClient]]:
    with scheduling_devcluster(tmp_path_factory.mktemp("gangs") / "data") as both:
        yield both


def _pod(name: str, group: str) -> dict[str, Any]:
    """A whole cpu-small node's CPUs: one pod per node."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "4", "memory": "64Mi"}}}]}}


def test_gang_that_lost_a_node_is_whole_again_before_a_fresh_gang(cluster: tuple[Any, RestClient]) -> None:
    c, client = cluster
    reg = client.registry
    pods_rt, nodes_rt = reg.get("", "v1", "pods"), reg.get("", "v1", "nodes")
    pg_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)

    def session() -> None:
        _, result = run_once(client, conf, registry=registry)
        assert not result.bind_failures

    def node_of(name: str) -> str | None:
        try:
            return (client.get(pods_rt, name, namespace=NS).get("spec") or {}).get("nodeName")
        except errors.NotFound:
            return None

    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("q1").bare())
    client.create(pg_rt, podgroup("old", NS).min(2).queue("q1").bare(), namespace=NS)
    for i in range(2):
        client.create(pods_rt, _pod(f"old-{i}", "old"), namespace=NS)
    session()  # enqueue
    session()  # allocate: the whole gang
    assert {node_of("old-0"), node_of("old-1")} == {"cpu-small-0", LOST}
    wait_for("the gang to run", lambda: all(
        client.get(pods_rt, f"old-{i}", namespace=NS)["status"].get("phase") == "Running" for i in range(2)))

    # the node under old's second pod dies: kubectl deletes it, its pod goes with it (the pod GC's part), and the
    # job controller's part: the lost pod is created again, pending
    saved = copy.deepcopy(client.get(nodes_rt, LOST))
    lost_pod = "old-0" if node_of("old-0") == LOST else "old-1"
    env = {**os.environ, "KUBECONFIG": str(c.kubeconfig)}
    subprocess.run(["kubectl", "delete", "node", LOST, "--wait=false"], env=env, check=True, capture_output=True,
                   timeout=60)
    client.delete(pods_rt, lost_pod, namespace=NS, grace_period_seconds=0)
    wait_for("the lost pod to go", lambda: node_of(lost_pod) is None)
    client.create(pods_rt, _pod(lost_pod, "old"), namespace=NS)

    # a fresh gang of the same queue and priority wants the same room
    client.create(pg_rt, podgroup("fresh", NS).min(1).queue("q1").bare(), namespace=NS)
    client.create(pods_rt, _pod("fresh-0", "fresh"), namespace=NS)
    session()  # enqueue fresh; nothing fits
    assert node_of(lost_pod) is None and node_of("fresh-0") is None

    # the node comes back
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "deletionTimestamp"):
        saved["metadata"].pop(k, None)
    created = client.create(nodes_rt, saved)
    if not (created.get("status") or {}).get("allocatable"):
        created["status"] = saved["status"]
        client.update_status(nodes_rt, created)

    for _ in range(2):
        session()
        assert node_of("fresh-0") is None, "the fresh gang took the room back before the stalled one"
        if node_of(lost_pod):
            break
    assert node_of(lost_pod) == LOST
    assert node_of("fresh-0") is None
    wait_for("the gang to run whole", lambda: all(
        client.get(pods_rt, f"old-{i}", namespace=NS)["status"].get("phase") == "Running" for i in range(2)))
    assert client.get(pg_rt, "old", namespace=NS)["status"]["phase"] == "Running"
