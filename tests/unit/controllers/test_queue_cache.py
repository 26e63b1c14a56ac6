"""The Queue reconciler's world from the worker's informers (`controllers.caches.JobCache.queue_world`): a cache that
has reached what the dispatcher routed to the Queue and our own Queue writes serves every Queue and PodGroup without a
LIST; one behind either, after a Conflict, or without the dispatcher's versions is not trusted and the API is listed."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.controllers import caches, queues
from lahar.controllers.context import Context
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from tests.unit.controllers.test_job_reconcile_calls import Counting
from tests.unit.controllers.test_job_reconciler import Clock

READS = {("list", "queues"), ("list", "podgroups"), ("get", "queues"), ("get", "podgroups")}


class Cluster:
    def __init__(self, *, routed: bool = True) -> None:
        self.inner = MemoryClient.with_crds(Store(clock=Clock()))
        self.client = Counting(self.inner)
        reg = self.inner.registry
        self.q_rt = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
        self.pg_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        types = {"Job": reg.get("batch.volcano.sh", "v1alpha1", "jobs"), "Pod": reg.get("", "v1", "pods"),
                 "PodGroup": self.pg_rt, "Queue": self.q_rt}
        self.seen: dict[str, str] = {}
        self.cache = caches.JobCache(self.inner, types, wait=5.0,
                                     queue_seen=(lambda _name: self.seen) if routed else None).start(5.0)
        self.ctx = Context(client=self.client, cache=self.cache)  # type: ignore[arg-type]
        for name in ("root", "q1"):
            q = self.inner.create(self.q_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                              "metadata": {"name": name}, "spec": {"weight": 1}})
        self.seen["Queue"] = q["metadata"]["resourceVersion"]  # the dispatcher routed q1's ADDED

    def add_pg(self, name: str, phase: str) -> None:
        """A PodGroup of q1, and the dispatcher noting the event it routed to Queue q1."""
        pg = self.inner.create(self.pg_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                            "metadata": {"name": name, "namespace": "default"},
                                            "spec": {"minMember": 1, "queue": "q1"}, "status": {"phase": phase}},
                               namespace="default")
        self.seen["PodGroup"] = pg["metadata"]["resourceVersion"]

    def reconcile(self) -> set[tuple[str, str]]:
        self.client.calls.clear()
        queues.reconcile(self.ctx, "", "q1")
        return set(self.client.calls) & READS

    def status(self) -> dict[str, Any]:
        return self.inner.get(self.q_rt, "q1").get("status") or {}


@pytest.fixture
def cluster() -> Any:
    c = Cluster()
    yield c
    c.cache.stop()


def test_a_fresh_cache_serves_the_queue_world(cluster: Cluster) -> None:
    assert cluster.reconcile() == set()  # the informers reached the routed Queue
    assert cluster.status()["state"] == "Open"
    cluster.add_pg("pg1", "Inqueue")
    assert cluster.reconcile() == set()  # ... the routed PodGroup and our own status write
    assert (cluster.status()["state"], cluster.status()["inqueue"]) == ("Open", 1)
    assert cluster.reconcile() == set()  # steady state: not one GET or LIST


def test_a_cache_behind_the_dispatcher_is_not_trusted(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.reconcile()
    cluster.cache.informers["PodGroup"].stop()  # frozen: it will not see the next PodGroup
    cluster.cache.wait = 0.05
    cluster.add_pg("pg2", "Running")
    assert cluster.reconcile() == {("list", "queues"), ("list", "podgroups")}
    assert cluster.status()["running"] == 1  # counted from the API, not from the stale cache


def test_a_cache_behind_our_own_queue_write_is_not_trusted(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.reconcile()
    cluster.cache.informers["Queue"].stop()  # it will not see our next status write
    cluster.cache.wait = 0.05
    cluster.add_pg("pg1", "Pending")  # the status changes: one write
    cluster.reconcile()
    assert cluster.reconcile() == {("list", "queues"), ("list", "podgroups")}


def test_a_conflict_sends_the_retry_to_the_api(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.reconcile()
    cluster.cache.informers["Queue"].stop()
    cluster.cache.wait = 0.05
    q = cluster.inner.get(cluster.q_rt, "q1")
    q["metadata"].setdefault("annotations", {})["x"] = "y"  # another writer, not routed to this reconcile
    cluster.inner.update(cluster.q_rt, q)
    cluster.add_pg("pg1", "Pending")
    with pytest.raises(errors.Conflict):
        cluster.reconcile()  # the cached Queue's resourceVersion loses
    assert cluster.reconcile() == {("list", "queues"), ("list", "podgroups")}
    assert cluster.status()["pending"] == 1


def test_without_the_dispatchers_versions_the_api_is_listed() -> None:
    c = Cluster(routed=False)
    try:
        c.reconcile()
        assert c.reconcile() == {("list", "queues"), ("list", "podgroups")}
    finally:
        c.cache.stop()


def test_a_bus_command_lists_from_the_api(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.reconcile()
    cluster.client.calls.clear()
    queues.execute(cluster.ctx, "q1", "CloseQueue")
    assert {("list", "queues"), ("list", "podgroups")} <= set(cluster.client.calls)
    assert cluster.status()["state"] == "Closed"


def test_a_queue_the_cache_does_not_hold_is_listed_from_the_api(cluster: Cluster) -> None:
    cluster.cache.informers["Queue"].stop()
    q = cluster.inner.create(cluster.q_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                            "metadata": {"name": "q2"}, "spec": {"weight": 1}})
    cluster.client.calls.clear()
    queues.reconcile(cluster.ctx, "", "q2")  # its ADDED not routed yet: the cache cannot know it is behind
    assert ("list", "queues") in cluster.client.calls
    assert cluster.inner.get(cluster.q_rt, "q2")["status"]["state"] == "Open"
    assert q["metadata"]["name"] == "q2"
