"""Simulated pods that answer on their ports: which ports a pod declares (table), the listeners' HTTP and TCP
answers, and the kubelet opening them while a pod runs and closing them when it stops, so a JobFlow probe
(`controllers._flow_probes.network_checker`) passes against a Running simulated pod and fails after it.
"""

from __future__ import annotations

import datetime as dt
import socket

import pytest

from lahar.controllers import _flow_probes
from lahar.devcluster import kubelet, podports, runtime
from lahar.devcluster.kubelet import SimulatedKubelets
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store

PODS = {rt.plural: rt for rt in resources.core()}["pods"]
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pod(*containers: list[dict]) -> dict:
    return {"spec": {"containers": [{"name": f"c{i}", "ports": ports} for i, ports in enumerate(containers)]}}


@pytest.mark.parametrize(("pod", "ports"), [
    (_pod([{"containerPort": 8080}]), [8080]),
    (_pod([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]), [80]),
    (_pod([{"containerPort": 80}], [{"containerPort": 80}, {"containerPort": 9000, "protocol": "tcp"}]), [80, 9000]),
    (_pod([{"containerPort": 0}, {"containerPort": 70000}, {"containerPort": "80"}, {"containerPort": True}]), []),
    (_pod([]), []),
    ({"spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}]}},
     []),
    ({}, []),
], ids=["one", "udp-skipped", "distinct-in-order", "invalid-skipped", "no-ports", "init-ignored", "no-spec"])
def test_declared_ports(pod, ports):
    assert podports.declared_ports(pod) == ports


@pytest.mark.parametrize(("value", "on"), [
    (None, True), ("", True), ("1", True), ("on", True), ("0", False), ("false", False), ("OFF", False),
    ("no", False),
], ids=["unset", "empty", "one", "on", "zero", "false", "off-upper", "no"])
def test_pod_ports_switch(value, on):
    assert runtime.pod_ports_enabled(value) is on


def test_listener_answers_http_and_tcp_and_closes():
    server = podports.PortServer()
    port = _free_port()
    try:
        assert server.open(("ns", "p"), "127.244.0.9", [port]) == [port]
        http = _flow_probes.Endpoint("http", "127.244.0.9", port, "/healthz", (("X-Probe", "1"),))
        assert _flow_probes.network_checker(http)
        assert _flow_probes.network_checker(_flow_probes.Endpoint("tcp", "127.244.0.9", port))
        assert server.open(("ns", "p"), "127.244.0.9", [port]) == [port]  # idempotent
        server.close(("ns", "p"))
        assert not _flow_probes.network_checker(http)
    finally:
        server.stop()


def test_listener_limit_is_respected():
    server = podports.PortServer(limit=1)
    try:
        assert len(server.open(("ns", "a"), "127.244.0.10", [_free_port(), _free_port()])) == 1
        assert server.open(("ns", "b"), "127.244.0.11", [_free_port()]) == []
    finally:
        server.stop()


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.mark.parametrize("serve", [True, False], ids=["serving", "off"])
def test_kubelet_serves_a_running_pods_ports_until_it_finishes(serve):
    clock = Clock()
    client = MemoryClient(Store(registry=resources.Registry.of(resources.core()), clock=clock))
    kubelets = SimulatedKubelets(client, ["n0", "n1"], clock=clock, serve_ports=serve)
    port = _free_port()
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web", "namespace": "default", "annotations": {kubelet.DURATION_ANNOTATION: "5s"}},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "busybox", "ports": [{"containerPort": port}]}]}}
    try:
        client.create(PODS, pod)
        client.bind(namespace="default", name="web", node_name="n1")
        kubelets.sync()
        status = client.get(PODS, "web", namespace="default")["status"]
        assert status["phase"] == "Running"
        assert status["podIP"].startswith("127.244.1." if serve else "10.244.1.")
        ep = _flow_probes.Endpoint("http", status["podIP"], port)
        assert _flow_probes.network_checker(ep) is serve
        clock.now += dt.timedelta(seconds=6)
        kubelets.sync()
        assert client.get(PODS, "web", namespace="default")["status"]["phase"] == "Succeeded"
        assert not _flow_probes.network_checker(ep)
    finally:
        kubelets.stop()
        client.close()


def test_kubelet_skips_a_pod_ip_whose_port_is_taken():
    """Another devcluster on this machine holds 127.244.0.2:<port>: the pod gets the next address and is served."""
    clock = Clock()
    client = MemoryClient(Store(registry=resources.Registry.of(resources.core()), clock=clock))
    kubelets = SimulatedKubelets(client, ["n0"], clock=clock, serve_ports=True)
    port = _free_port()
    squatter = socket.socket()
    squatter.bind(("127.244.0.2", port))
    squatter.listen(1)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"restartPolicy": "Always", "containers": [
               {"name": "main", "image": "busybox", "ports": [{"containerPort": port}]}]}}
    try:
        client.create(PODS, pod)
        client.bind(namespace="default", name="web", node_name="n0")
        kubelets.sync()
        ip = client.get(PODS, "web", namespace="default")["status"]["podIP"]
        assert ip == "127.244.0.3"
        squatter.close()
        assert _flow_probes.network_checker(_flow_probes.Endpoint("tcp", ip, port))
    finally:
        squatter.close()
        kubelets.stop()
        client.close()
