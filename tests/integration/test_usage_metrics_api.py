"""The usage plugin on real load, end to end: devcluster serves metrics.k8s.io from its simulated kubelets,
`kubectl top nodes` / `kubectl top pods` show it, and a session whose conf reads the metrics API
(`metrics.type: metrics-api`) keeps a pod off the node that is over the cpu threshold."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lahar.kube import kubeconfig
from lahar.kube.rest import RestClient
from lahar.scheduler import usagesource
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import podgroup, queue
from tests.support import install_crds

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

CONF = """actions: "enqueue, allocate"
metrics: {type: metrics-api, interval: 1s}
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: usage, arguments: {thresholds: {cpu: 80, mem: 80}}}]
"""


def _kubectl(kcfg: Path, home: Path, *args: str) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", str(kcfg), "--cache-dir", str(home / "cache"), *args],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _kubectl_fails(kcfg: Path, home: Path, *args: str) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", str(kcfg), "--cache-dir", str(home / "cache"), *args],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)})
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def _pod(name: str, *, node: str | None = None, factor: str | None = None, group: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": {}}
    if factor is not None:
        meta["annotations"]["lahar.sh/sim-usage"] = factor
    if group is not None:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, RestClient, Path]]:
    from lahar.devcluster.runtime import Cluster

    tmp = tmp_path_factory.mktemp("usage-metrics")
    c = Cluster(data_dir=tmp / "data", port=0, profile="cpu-small", nodes=2).start()
    client = RestClient(kubeconfig.load(str(c.kubeconfig)))
    try:
        yield c, client, tmp / "home"
    finally:
        client.close()
        c.stop()


def _running(client: RestClient, names: list[str], within: float = 20.0) -> None:
    pods_rt = client.registry.get("", "v1", "pods")
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        phases = [client.get(pods_rt, n, namespace="default").get("status", {}).get("phase") for n in names]
        if all(p == "Running" for p in phases):
            return
        time.sleep(0.1)
    raise AssertionError(f"pods {names} not Running within {within} s: {phases}")


def test_kubectl_top_and_a_session_avoid_the_hot_node(cluster: tuple[Any, RestClient, Path]) -> None:
    c, client, home = cluster
    reg = client.registry
    pods_rt = reg.get("", "v1", "pods")
    nodes = sorted(n["metadata"]["name"] for n in client.list(reg.get("", "v1", "nodes"))["items"])
    hot, cool = nodes
    client.create(pods_rt, _pod("hot", node=hot, factor="3.5"), namespace="default")   # 3500m + reserve of 4 CPUs
    client.create(pods_rt, _pod("calm", node=cool, factor="0.3"), namespace="default")  # same requests, 300m
    _running(client, ["hot", "calm"])

    top = _kubectl(Path(c.kubeconfig), home, "top", "nodes", "--no-headers")
    use = {line.split()[0]: line.split() for line in top.splitlines()}
    print(top)
    assert use[hot][1] == "3600m" and use[cool][1] == "400m"
    assert int(use[hot][2].rstrip("%")) > 80 > int(use[cool][2].rstrip("%"))
    pods_top = _kubectl(Path(c.kubeconfig), home, "top", "pods", "-n", "default", "--no-headers")
    assert {line.split()[0]: line.split()[1] for line in pods_top.splitlines()} == {"hot": "3500m", "calm": "300m"}

    served = _kubectl(Path(c.kubeconfig), home, "api-resources", "--api-group=metrics.k8s.io", "--no-headers")
    assert sorted(line.split()[-1] for line in served.splitlines()) == ["NodeMetrics", "PodMetrics"]
    one = _kubectl(Path(c.kubeconfig), home, "top", "node", hot, "--no-headers")
    assert one.split()[:2] == [hot, "3600m"]
    assert "3500m" in _kubectl(Path(c.kubeconfig), home, "top", "pod", "hot", "-n", "default", "--containers")

    install_crds(client, "scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml")
    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("q1").bare())
    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
                  podgroup("new", "default").min(1).queue("q1").bare(status=True), namespace="default")
    client.create(pods_rt, _pod("new-0", group="new"), namespace="default")
    registry = in_tree_registry()
    conf = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    usagesource.use_client(client)
    try:
        decisions, result = run_once(client, conf, registry=registry)
        assert sorted(result.bound) and client.get(pods_rt, "new-0", namespace="default")["spec"]["nodeName"] == cool
    finally:
        usagesource.stop_all()
        usagesource.use_client(None)


@pytest.mark.parametrize(("args", "says"), [
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/nope"), "NotFound"),
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope"), "NotFound"),
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/nodes"), "NotFound"),
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta2/nodes"), "NotFound"),
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes?watch=true"), "MethodNotAllowed"),
    (("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=a%3D%3D%3Db"), "BadRequest"),
    (("create", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes", "-f", "/dev/null"), "MethodNotAllowed"),
], ids=["missing-node", "missing-pod", "nodes-in-a-namespace", "unknown-version", "watch", "bad-selector", "post"])
def test_the_metrics_api_refuses_with_a_4xx(cluster: tuple[Any, RestClient, Path], args: tuple[str, ...],
                                            says: str) -> None:
    c, _, home = cluster
    assert says in _kubectl_fails(Path(c.kubeconfig), home, *args)
