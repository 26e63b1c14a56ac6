"""The real-cluster fixture itself: the pinned kube-apiserver answers with its auth and admission turned on, kwok's
nodes come up Ready and run pods, and stopping a cluster leaves none of its processes behind."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lahar.kube import errors, kubeconfig
from lahar.kube.resources import core
from lahar.kube.rest import RestClient
from tests.peers import build as peers
from tests.realcluster.cluster import NODES, RealCluster, missing
from tests.support import free_port, wait_for

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster")]

_TYPES = {rt.plural: rt for rt in core()}


@pytest.fixture
def client(real_cluster: RealCluster) -> Iterator[RestClient]:
    with RestClient(kubeconfig.load(real_cluster.kubeconfig)) as c:
        yield c


def test_server_is_the_pinned_version(real_cluster: RealCluster) -> None:
    version = json.loads(real_cluster.get("/version"))
    assert version["gitVersion"] == peers.PEERS[1].version == "v1.35.4"


def test_wrong_token_is_unauthorized(real_cluster: RealCluster) -> None:
    from kubernetes import client as k8s

    cfg = k8s.Configuration()
    cfg.host = real_cluster.url
    cfg.ssl_ca_cert = str(real_cluster.ca_path)
    cfg.api_key = {"authorization": "not-the-token"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    with RestClient(cfg) as c, pytest.raises(errors.Unauthorized):
        c.list(_TYPES["namespaces"])


def test_admission_webhooks_are_called(client: RestClient) -> None:
    """A Fail-policy webhook on a closed loopback port refuses the writes it matches: the API server runs the
    webhook admission plugins, so lahar's own webhooks can be registered the same way."""
    vwc = client.registry.get("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
    name = "probe-closed-port"
    client.create(vwc, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "closed.lahar.sh", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 2,
            "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/validate"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"], "scope": "Namespaced"}],
            "objectSelector": {"matchLabels": {"lahar.sh/webhook-probe": "yes"}},
        }],
    })
    cm = _TYPES["configmaps"]
    probe = {"metadata": {"name": "probe", "labels": {"lahar.sh/webhook-probe": "yes"}}}
    refused = None
    try:
        deadline = time.monotonic() + 20
        while refused is None and time.monotonic() < deadline:
            try:
                client.create(cm, probe, namespace="default")  # the configuration is not in force yet
                client.delete(cm, "probe", namespace="default")
                time.sleep(0.2)
            except errors.ApiError as e:
                refused = e
    finally:
        client.delete(vwc, name)
    assert refused is not None, "the webhook was never called"
    assert 'failed calling webhook "closed.lahar.sh"' in refused.message


def test_kwok_nodes_become_ready_and_run_pods(real_cluster: RealCluster, client: RestClient) -> None:
    if reason := missing("kwok"):
        pytest.skip(reason)
    nodes, pods = _TYPES["nodes"], _TYPES["pods"]
    for node in real_cluster.node_manifests():
        with contextlib.suppress(errors.AlreadyExists):
            client.create(nodes, node)

    def ready() -> bool:
        got = {n["metadata"]["name"]: n for n in client.list(nodes)["items"]}
        return all(any(c["type"] == "Ready" and c["status"] == "True"
                       for c in got.get(spec["name"], {}).get("status", {}).get("conditions", []))
                   for spec in NODES)

    wait_for("kwok's nodes to be Ready", ready, timeout=60)
    name = f"kwok-probe-{os.getpid()}"
    client.create(pods, {"metadata": {"name": name}, "spec": {
        "nodeName": NODES[0]["name"], "containers": [{"name": "c", "image": "busybox"}],
        "tolerations": [{"operator": "Exists"}]}}, namespace="default")
    wait_for("the pod to run on a kwok node",
             lambda: client.get(pods, name, namespace="default").get("status", {}).get("phase") == "Running",
             timeout=60)
    client.delete(pods, name, namespace="default", grace_period_seconds=0)


def test_stop_leaves_no_process_behind(tmp_path: Path) -> None:
    if reason := missing("etcd", "kube-apiserver"):
        pytest.skip(reason)
    cluster = RealCluster(tmp_path / "own", with_controllers=False, with_kwok=False).start()
    pids = cluster.pids()
    assert len(pids) == 2 and all(cluster.alive().values())
    cluster.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
