"""Simulated kubelets: pod lifecycle (Running, sim-duration, exit codes, restarts, graceful deletion) and heartbeats.

Driven with `SimulatedKubelets.sync()` and a fake clock over `kube.apiserver.memory.MemoryClient`; one test runs the
threads.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from lahar.devcluster import kubelet
from lahar.devcluster.kubelet import SimulatedKubelets
from lahar.kube import errors, podspec, resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store

RT = {rt.plural: rt for rt in resources.core()}
PODS, NODES, LEASES = RT["pods"], RT["nodes"], RT["leases"]
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def client(clock):
    c = MemoryClient(Store(registry=resources.Registry.of(resources.core()), clock=clock))
    yield c
    c.close()


@pytest.fixture
def kubelets(client, clock):
    return SimulatedKubelets(client, ["n0", "n1"], clock=clock)


def pod(name, *, duration=None, exit_code=None, restart="Never", containers=("main",)):
    annotations = {}
    if duration is not None:
        annotations[kubelet.DURATION_ANNOTATION] = duration
    if exit_code is not None:
        annotations[kubelet.EXIT_CODE_ANNOTATION] = str(exit_code)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"restartPolicy": restart, "schedulerName": "volcano",
                     "containers": [{"name": c, "image": "busybox:1.36",
                                     "resources": {"requests": {"cpu": "1"}}} for c in containers]}}


def run(client, kubelets, p, node="n0"):
    client.create(PODS, p)
    client.bind(namespace="default", name=p["metadata"]["name"], node_name=node)
    kubelets.sync()
    return client.get(PODS, p["metadata"]["name"], namespace="default")


def get(client, name):
    return client.get(PODS, name, namespace="default")


QOS_CASES = [
    ("best-effort", {}, "BestEffort"),
    ("burstable", {"requests": {"cpu": "1"}}, "Burstable"),
    ("guaranteed", {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1Gi"}},
     "Guaranteed"),
    ("limits-only-guaranteed", {"limits": {"cpu": "2", "memory": "1Gi"}}, "Guaranteed"),
    # kube counts positive quantities only: a zero request is no request (the kubelet's own copy said Burstable)
    ("zero-request-best-effort", {"requests": {"cpu": "0"}}, "BestEffort"),
]


@pytest.mark.parametrize(("res", "qos"), [c[1:] for c in QOS_CASES], ids=[c[0] for c in QOS_CASES])
def test_qos_class(res, qos):
    """A pod the API server left without status.qosClass gets kube's class (podspec.qos_class) when it starts."""
    p = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "resources": res}]},
         "status": {"phase": "Pending"}}
    action = kubelet.plan(p, now=T0, host_ip="10.0.0.2", pod_ip="10.244.0.2")
    assert action.status is not None
    assert action.status["qosClass"] == podspec.qos_class(p) == qos


def test_nodes_registered_ready_with_lease(client, kubelets, clock):
    kubelets.sync()
    node = client.get(NODES, "n0")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastHeartbeatTime"] == "2026-01-01T12:00:00Z"
    lease = client.get(LEASES, "n0", namespace="kube-node-lease")
    assert lease["spec"]["holderIdentity"] == "n0" and lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["spec"]["renewTime"] == "2026-01-01T12:00:00.000000Z"
    assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"
    clock.advance(10)
    kubelets.sync()
    lease = client.get(LEASES, "n0", namespace="kube-node-lease")
    assert lease["spec"]["renewTime"] == "2026-01-01T12:00:10.000000Z"


def test_bound_pod_runs(client, kubelets):
    p = run(client, kubelets, pod("p1"))
    status = p["status"]
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True",
        "PodScheduled": "True"}
    assert status["podIP"].startswith("10.244.0.") and status["hostIP"] == "10.0.0.2"
    assert status["startTime"] == "2026-01-01T12:00:00Z"
    (cs,) = status["containerStatuses"]
    assert cs["ready"] and cs["started"] and cs["restartCount"] == 0
    assert cs["state"] == {"running": {"startedAt": "2026-01-01T12:00:00Z"}}
    assert cs["containerID"].startswith("containerd://")


def test_unbound_and_foreign_pods_are_left_alone(client, kubelets):
    client.create(PODS, pod("pending"))
    client.create(PODS, pod("elsewhere"))
    client.bind(namespace="default", name="elsewhere", node_name="other-node")
    kubelets.sync()
    assert "phase" not in (get(client, "pending").get("status") or {}) or get(client, "pending")["status"][
        "phase"] == "Pending"
    assert (get(client, "elsewhere").get("status") or {}).get("phase") != "Running"


def test_pod_ips_are_distinct(client, kubelets):
    for name in ("a", "b", "c"):
        client.create(PODS, pod(name))
        client.bind(namespace="default", name=name, node_name="n1")
    kubelets.sync()
    ips = {get(client, n)["status"]["podIP"] for n in ("a", "b", "c")}
    assert len(ips) == 3 and all(ip.startswith("10.244.1.") for ip in ips)


FINISH_CASES = [
    ("success", 0, "Never", "Succeeded", 0, "Completed"),
    ("failure", 3, "Never", "Failed", 3, "Error"),
    ("onfailure-success", 0, "OnFailure", "Succeeded", 0, "Completed"),
]


@pytest.mark.parametrize(("code", "restart", "phase", "exit_code", "reason"), [c[1:] for c in FINISH_CASES],
                         ids=[c[0] for c in FINISH_CASES])
def test_pod_finishes_after_duration(client, kubelets, clock, code, restart, phase, exit_code, reason):
    run(client, kubelets, pod("p", duration="1m30s", exit_code=code, restart=restart))
    clock.advance(89)
    kubelets.sync()
    assert get(client, "p")["status"]["phase"] == "Running"
    clock.advance(1)
    kubelets.sync()
    status = get(client, "p")["status"]
    assert status["phase"] == phase
    term = status["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (exit_code, reason)
    assert term["startedAt"] == "2026-01-01T12:00:00Z" and term["finishedAt"] == "2026-01-01T12:01:30Z"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


@pytest.mark.parametrize("restart", ["OnFailure", "Always"])
def test_nonzero_exit_restarts_container(client, kubelets, clock, restart):
    run(client, kubelets, pod("p", duration="10s", exit_code=2, restart=restart))
    for expected in (1, 2):
        clock.advance(10)
        kubelets.sync()
        status = get(client, "p")["status"]
        assert status["phase"] == "Running"
        cs = status["containerStatuses"][0]
        assert cs["restartCount"] == expected
        assert cs["lastState"]["terminated"]["exitCode"] == 2 and cs["lastState"]["terminated"]["reason"] == "Error"
        assert cs["state"]["running"]["startedAt"] == kubelet._ts(clock.now)


def test_no_duration_runs_until_deleted(client, kubelets, clock):
    run(client, kubelets, pod("p"))
    clock.advance(3600)
    kubelets.sync()
    assert get(client, "p")["status"]["phase"] == "Running"


def test_graceful_deletion_terminates_then_removes(client, kubelets, clock):
    run(client, kubelets, pod("p"))
    deleting = client.delete(PODS, "p", namespace="default")
    assert deleting["metadata"].get("deletionTimestamp")
    kubelets.sync()
    with pytest.raises(errors.NotFound):
        get(client, "p")


def test_finished_pod_deleted_gracefully_is_removed(client, kubelets, clock):
    run(client, kubelets, pod("p", duration="1s"))
    clock.advance(1)
    kubelets.sync()
    client.delete(PODS, "p", namespace="default")
    kubelets.sync()
    with pytest.raises(errors.NotFound):
        get(client, "p")


def test_plan_is_pure_and_idempotent():
    p = {"metadata": {"name": "x", "uid": "u"}, "spec": {"nodeName": "n0", "containers": [{"name": "c",
                                                                                            "image": "i"}]}}
    first = kubelet.plan(p, now=T0, host_ip="10.0.0.2", pod_ip="10.244.0.2")
    assert first.status["phase"] == "Running" and first.wake_at is None
    running = {**p, "status": first.status}
    assert kubelet.plan(running, now=T0 + dt.timedelta(hours=1), host_ip="h", pod_ip="p") == kubelet.Action()


def test_threads_drive_pods_and_stop_cleanly(client):
    kubelets = SimulatedKubelets(client, ["n0"], tick_seconds=0.05)
    kubelets.start()
    try:
        client.create(PODS, pod("live"))
        client.bind(namespace="default", name="live", node_name="n0")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (get(client, "live").get("status") or {}).get("phase") == "Running":
                break
            time.sleep(0.02)
        assert get(client, "live")["status"]["phase"] == "Running"
    finally:
        kubelets.stop()
    assert not kubelets._threads


def test_registers_profile_nodes_and_uses_their_pod_cidr(client, clock):
    from lahar.devcluster import nodes, profiles

    built = [o for o in nodes.build(profiles.load("cpu-small"), 2) if o["kind"] == "Node"]
    kubelets = SimulatedKubelets(client, nodes.node_names(built), clock=clock, nodes=built)
    client.create(PODS, pod("p"))
    client.bind(namespace="default", name="p", node_name="cpu-small-1")
    kubelets.sync()
    node = client.get(NODES, "cpu-small-1")
    assert node["status"]["capacity"]["cpu"] == "4"
    assert {c["type"] for c in node["status"]["conditions"]} >= {"Ready", "MemoryPressure"}
    status = get(client, "p")["status"]
    assert status["hostIP"] == "10.0.0.3" and status["podIP"].startswith("10.244.1.")
