"""HAMi-style GPU requests on devcluster `dgx-h100` nodes over HTTPS (issue 13 item 2): a pod asking for
`nvidia.com/gpu: 1, nvidia.com/gpumem: 4000, nvidia.com/gpucores: 30` (or a memory percentage) binds under the
default scheduler configuration; one asking for more GPUs than a node has stays pending, and its condition and
`FailedScheduling` Event give the reason per node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lahar.kube import kubeconfig
from lahar.kube.rest import RestClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import container, pod, podgroup
from tests.support import create_queue, install_crds

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestClient]:
    from lahar.devcluster.runtime import Cluster

    c = Cluster(data_dir=tmp_path_factory.mktemp("hami") / "data", port=0, profile="dgx-h100", nodes=4).start()
    client = RestClient(kubeconfig.load(str(c.kubeconfig)))
    try:
        install_crds(client, "scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml")
        create_queue(client)
        yield client
    finally:
        client.close()
        c.stop()


def _job(client: RestClient, name: str, gpu_requests: dict[str, str]) -> None:
    reg = client.registry
    res = {"cpu": "2", "memory": "8Gi", **gpu_requests}
    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
                  podgroup(name, "default").min(1).queue("q1").min_resources(**res).bare(), namespace="default")
    client.create(reg.get("", "v1", "pods"), pod(name, "default").group(name).containers(
        container("main", "cuda", requests=res, limits=res)).bare(), namespace="default")


def _pod(client: RestClient, name: str) -> dict[str, Any]:
    return client.get(client.registry.get("", "v1", "pods"), name, namespace="default")


def test_hami_requests_schedule_and_pending_pods_say_why(cluster: RestClient) -> None:
    client = cluster
    _job(client, "vgpu", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "30"})
    _job(client, "vgpu-pct", {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})
    _job(client, "too-many", {"nvidia.com/gpu": "9", "nvidia.com/gpumem": "4000"})
    registry = in_tree_registry()
    _, result = run_once(client, confs.default_conf(registry.plugin_names), registry=registry)
    assert not result.bind_failures
    assert _pod(client, "vgpu")["spec"].get("nodeName", "").startswith("dgx-h100-")
    assert _pod(client, "vgpu-pct")["spec"].get("nodeName", "").startswith("dgx-h100-")

    pending = _pod(client, "too-many")
    assert not pending["spec"].get("nodeName")
    per_node = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    cond = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable",
                                                                 "no node is available: Insufficient nvidia.com/gpu.")
    events = client.list(client.registry.get("", "v1", "events"), namespace="default")["items"]
    failed = [e for e in events if e["involvedObject"]["name"] == "too-many" and e["reason"] == "FailedScheduling"]
    assert [e["message"] for e in failed] == [per_node]
    gang = [e["message"] for e in events
            if e["involvedObject"]["kind"] == "PodGroup" and e["involvedObject"]["name"] == "too-many"]
    assert gang and all("Undetermined" not in m for m in gang)
    assert any(m.endswith(f"Origin reason is too-many: {per_node}") for m in gang)
