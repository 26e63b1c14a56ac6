"""The job reconciler's informer reads (`controllers.caches`) on the in-memory cluster: a fresh cache serves the Job,
its pods and its PodGroup without an API call; a cache behind our own write, behind what the dispatcher saw, or after a
Conflict is not trusted and the API is read instead."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.controllers import _fanout, caches, jobs
from lahar.controllers.context import Context, MemoryInbox, MemoryTimers
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from tests.unit.controllers.test_job_reconcile_calls import Counting
from tests.unit.controllers.test_job_reconciler import NS, Clock, vcjob

READS = {("get", "jobs"), ("list", "pods"), ("get", "podgroups")}


@pytest.mark.parametrize(("synced", "watched", "needed", "want"), [
    (False, "10", [], False),
    (True, None, [], True),
    (True, "10", [None, None], True),
    (True, "10", ["10", "7"], True),
    (True, "10", ["11"], False),
    (True, "10", ["force"], False),
    (True, None, ["3"], False),
    (True, "x", ["3"], False),
    (True, "10", ["not-a-number"], False),
], ids=["not-synced", "nothing-needed", "nones", "reached", "behind", "forced", "no-watch-yet", "opaque-watched",
        "opaque-needed"])
def test_fresh_enough(synced: bool, watched: str | None, needed: list[Any], want: bool) -> None:
    assert caches.fresh_enough(synced=synced, watched=watched, needed=needed) is want


class Cluster:
    def __init__(self) -> None:
        self.clock = Clock()
        self.inner = MemoryClient.with_crds(Store(clock=self.clock))
        self.client = Counting(self.inner)
        reg = self.inner.registry
        self.types = {"Job": reg.get("batch.volcano.sh", "v1alpha1", "jobs"), "Pod": reg.get("", "v1", "pods"),
                      "PodGroup": reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")}
        self.seen: dict[str, str] = {}
        self.cache = caches.JobCache(self.inner, self.types, seen=lambda ns, name: self.seen, wait=5.0).start(5.0)
        self.ctx = Context(client=self.client, clock=self.clock, timers=MemoryTimers(clock=self.clock),  # type: ignore[arg-type]
                           inbox=MemoryInbox(), cache=self.cache)
        self.inner.create(self.types["Job"], vcjob("job1"), namespace=NS)

    def reconcile(self) -> set[tuple[str, str]]:
        self.client.calls.clear()
        jobs.reconcile(self.ctx, NS, "job1")
        return set(self.client.calls) & READS

    def enqueue(self) -> None:
        """The scheduler's enqueue, and the dispatcher noting the event it routed to the Job."""
        (pg,) = self.inner.list(self.types["PodGroup"], namespace=NS)["items"]
        pg["status"] = {"phase": "Inqueue"}
        pg = self.inner.update(self.types["PodGroup"], pg, namespace=NS)
        self.seen["PodGroup"] = pg["metadata"]["resourceVersion"]

    def job(self) -> dict[str, Any]:
        return self.inner.get(self.types["Job"], "job1", namespace=NS)

    def freeze(self, kind: str) -> None:
        """Stop one informer once it has seen every write so far (it sees nothing after)."""
        self.cache.begin(NS, "job1")
        assert self.cache._ready(kind, NS, "job1") is not None
        self.cache.informers[kind].stop()
        self.cache.wait = 0.05


@pytest.fixture
def cluster() -> Any:
    c = Cluster()
    yield c
    c.cache.stop()
    _fanout.shutdown()


def test_a_fresh_cache_serves_every_read(cluster: Cluster) -> None:
    cluster.reconcile()  # creates the PodGroup
    cluster.enqueue()
    cluster.reconcile()  # creates the pods
    assert len(cluster.inner.list(cluster.types["Pod"], namespace=NS)["items"]) == 2
    assert cluster.reconcile() == set()  # nothing read from the API: the cache reached our own writes
    assert cluster.job()["status"]["pending"] == 2
    assert cluster.cache.stats["hits"] > 0


def test_a_cache_behind_our_own_write_is_not_trusted(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.cache.informers["Pod"].stop()  # frozen: it will never see the pods we create
    cluster.cache.wait = 0.05
    cluster.enqueue()
    cluster.reconcile()  # creates the pods
    reads = cluster.reconcile()
    assert ("list", "pods") in reads
    assert cluster.job()["status"]["pending"] == 2
    assert len(cluster.inner.list(cluster.types["Pod"], namespace=NS)["items"]) == 2  # no duplicate creates


def test_a_cache_behind_the_dispatcher_is_not_trusted(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.enqueue()
    cluster.reconcile()
    cluster.freeze("Pod")
    pod = cluster.inner.get(cluster.types["Pod"], "job1-worker-0", namespace=NS)
    pod["status"] = {"phase": "Succeeded"}
    cluster.inner.update_status(cluster.types["Pod"], pod, namespace=NS)
    pod = cluster.inner.get(cluster.types["Pod"], "job1-worker-1", namespace=NS)
    pod["status"] = {"phase": "Succeeded"}
    done = cluster.inner.update_status(cluster.types["Pod"], pod, namespace=NS)
    cluster.seen = {"Pod": done["metadata"]["resourceVersion"]}  # the event the dispatcher routed
    assert ("list", "pods") in cluster.reconcile()
    assert cluster.job()["status"]["succeeded"] == 2  # counted from the pods as they are, not as cached
    cluster.reconcile()
    assert cluster.job()["status"]["state"]["phase"] == "Completed"


def test_a_conflict_sends_the_retry_to_the_api(cluster: Cluster) -> None:
    cluster.reconcile()
    cluster.freeze("Job")
    job = cluster.job()
    job["status"]["unknown"] = 0  # another worker's status write: not routed, the dispatcher notes nothing
    job["status"]["pending"] = 7
    cluster.inner.update_status(cluster.types["Job"], job, namespace=NS)
    cluster.enqueue()
    with pytest.raises(errors.Conflict):
        cluster.reconcile()  # the stale cached Job's resourceVersion loses
    assert ("get", "jobs") in cluster.reconcile()
    assert cluster.job()["status"]["pending"] == 2


def test_wrote_keeps_the_newest_version_and_forces_on_unknown(cluster: Cluster) -> None:
    c = cluster.cache
    c.wrote("Pod", NS, "j", {"metadata": {"resourceVersion": "5"}})
    c.wrote("Pod", NS, "j", {"metadata": {"resourceVersion": "3"}})
    c.begin(NS, "j")
    assert c._needs[(NS, "j")]["Pod"] == [None, "5"]
    c.wrote("Pod", NS, "j", None)  # an answer without a version
    c.begin(NS, "j")
    assert c._needs[(NS, "j")]["Pod"][1] == "force"
    c.covered("Pod", NS, "j", "9")  # an API list at 9 covers it
    c.begin(NS, "j")
    assert c._needs[(NS, "j")]["Pod"][1] == "9"


# --- the Queue and PriorityClasses a Job names ---------------------------------------------------------------------

NAMED = {("get", "queues"), ("get", "priorityclasses")}


def _named_world(*, cached: bool) -> tuple[Cluster, list[set[tuple[str, str]]]]:
    """A Job whose task names PriorityClass `high`, reconciled to its pods and once more (steady state); returns the
    cluster and each reconcile's GETs and LISTs."""
    c = Cluster()
    reg = c.inner.registry
    c.inner.create(reg.get("scheduling.k8s.io", "v1", "priorityclasses"),
                   {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                    "value": 1000})
    c.inner.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"),
                   {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                    "spec": {"weight": 1}})
    job = c.job()
    job["spec"]["tasks"][0]["template"]["spec"]["priorityClassName"] = "high"
    c.inner.update(c.types["Job"], job, namespace=NS)
    c.cache.stop()
    types = {**c.types, "Queue": reg.get("scheduling.volcano.sh", "v1beta1", "queues"),
             "PriorityClass": reg.get("scheduling.k8s.io", "v1", "priorityclasses")}
    c.cache = caches.JobCache(c.inner, types, seen=lambda ns, name: c.seen, wait=5.0).start(5.0)
    c.ctx.cache = c.cache if cached else None
    reads = []
    for step in ("podgroup", "pods", "steady"):
        c.client.calls.clear()
        jobs.reconcile(c.ctx, NS, "job1")
        reads.append({call for call in c.client.calls if call[0] in ("get", "list")})
        if step == "podgroup":
            c.enqueue()
    return c, reads


@pytest.mark.parametrize(("cached", "want"), [
    (False, [{("get", "priorityclasses")}, NAMED, {("get", "priorityclasses")}]),
    (True, [set(), set(), set()]),
], ids=["api-reads-them-every-reconcile", "informers-serve-them"])
def test_the_queue_and_priorityclasses_come_from_informers(cached: bool, want: list[set[tuple[str, str]]]) -> None:
    c, reads = _named_world(cached=cached)
    try:
        assert [r & NAMED for r in reads] == want
        if cached:
            assert reads[2] == set()  # steady state: not one GET or LIST, Events included
        assert len(c.inner.list(c.types["Pod"], namespace=NS)["items"]) == 2
    finally:
        c.cache.stop()
        _fanout.shutdown()


def test_a_name_the_informer_does_not_hold_is_asked_of_the_api() -> None:
    c = Cluster()
    try:
        reg = c.inner.registry
        queues = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
        c.cache.stop()
        c.cache = caches.JobCache(c.inner, {**c.types, "Queue": queues}, wait=5.0).start(5.0)
        c.ctx.cache = c.cache
        assert c.cache.named("Queue", "later") is None  # not created yet
        assert c.cache.named("PriorityClass", "high") is None  # no informer for the kind
        c.cache.informers["Queue"].stop()  # it will not see the Queue created next
        c.inner.create(queues, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                "metadata": {"name": "later"}, "spec": {"extendClusters": [{"name": "c2"}]}})
        c.client.calls.clear()
        assert jobs._forwarding(c.ctx, jobs._Types.of(c.ctx), {"spec": {"queue": "later"}}) is True
        assert c.client.calls == [("get", "queues")]
        assert jobs._forwarding(c.ctx, jobs._Types.of(c.ctx), {"spec": {"queue": "gone"}}) is False  # 404: none
    finally:
        c.cache.stop()
        _fanout.shutdown()
