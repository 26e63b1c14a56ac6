"""The session runner of `lahar scheduler`: informer-fed snapshot, ConfigMap hot reload keeping the last good
configuration (with an Event and a metric), ticks dropped while a session runs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.cache import CONFIGMAP_KEY, CONFIGMAP_NAME
from lahar.scheduler.tasks import Runner
from tests.builders import node, pod, podgroup, queue


def _wait(pred, timeout: float = 5.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.fixture
def client() -> MemoryClient:
    c = MemoryClient.with_crds()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c1"}})
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "lahar-system"}})
    n = c.create(reg.get("", "v1", "nodes"), node("n1").alloc("4", "8Gi").build())
    n["status"] = node("n1").alloc("4", "8Gi").build()["status"]
    c.update_status(reg.get("", "v1", "nodes"), n)
    c.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("c1").build())
    return c


@pytest.fixture
def runner(client: MemoryClient) -> Iterator[Runner]:
    r = Runner(client, workers=2)
    assert r.start(5)
    yield r
    r.stop()


def _cm(client: MemoryClient, text: str) -> None:
    rt = client.registry.get("", "v1", "configmaps")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP_NAME, "namespace": "lahar-system"},
            "data": {CONFIGMAP_KEY: text}}
    try:
        cur = client.get(rt, CONFIGMAP_NAME, namespace="lahar-system")
        cur["data"] = body["data"]
        client.update(rt, cur, namespace="lahar-system")
    except Exception:  # noqa: BLE001
        client.create(rt, body, namespace="lahar-system")


def test_tick_schedules_from_the_informer_cache(client: MemoryClient, runner: Runner) -> None:
    reg = client.registry
    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), podgroup("pg1").min(2).build(),
                  namespace="c1")
    for i in range(2):
        client.create(reg.get("", "v1", "pods"), pod(f"p{i}").req("1", "1Gi").group("pg1").build(), namespace="c1")
    _wait(lambda: len(runner.cache.informers["pods"].list()) == 2 and runner.cache.informers["podgroups"].list())
    out = runner.tick()
    assert out["bound"] == 2 and out["conf"] == "default"


def test_conf_hot_reload_keeps_last_good(client: MemoryClient, runner: Runner) -> None:
    _cm(client, 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    _wait(lambda: runner.conf.current().source != "default")
    assert runner.conf.current().conf.actions == ("enqueue", "allocate")
    _cm(client, 'actions: "enqueue, allocat"\n')
    _wait(lambda: runner.conf.current().error != "")
    state = runner.conf.current()
    assert state.conf.actions == ("enqueue", "allocate") and "failed to find Action allocat" in state.error
    assert runner.metrics.conf_errors._value.get() == 1
    events = client.list(client.registry.get("", "v1", "events"), namespace="lahar-system")["items"]
    assert any(e["reason"] == "InvalidConfiguration" for e in events)


def test_tick_during_a_session_is_dropped(runner: Runner) -> None:
    assert runner._local.acquire()
    try:
        assert runner.tick() == {"skipped": "session running in this process"}
    finally:
        runner._local.release()
