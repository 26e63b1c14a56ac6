"""`lahar scheduler`'s start-up (issue 20 item 1): no session before every informer the sessions read has synced
(volcano#2821, #5174), an object written between the first LIST and the watch is in the first session, and a
standby process keeps its cache warm, so taking the lease over costs one session and no re-list (volcano#5819)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler import tasks
from lahar.scheduler.tasks import RedisLease, Runner
from tests.builders import node, pod, podgroup, queue

KINDS = {"pods": ("", "v1", "pods"), "nodes": ("", "v1", "nodes"),
         "podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
         "queues": ("scheduling.volcano.sh", "v1beta1", "queues"),
         "priority_classes": ("scheduling.k8s.io", "v1", "priorityclasses"),
         "configmaps": ("", "v1", "configmaps")}


class SlowClient(MemoryClient):
    """A MemoryClient whose LIST of one kind waits for `release`, and whose first watch of another kind runs
    `before_watch` (a write between the LIST and the watch) and hands its events out slowly."""

    def __init__(self) -> None:
        super().__init__()
        for rt in resources.volcano():
            self.store.register_type(rt)
        self.block_list: str | None = None
        self.release = threading.Event()
        self.before_watch: dict[str, Any] = {}
        self.slow_events = 0.0

    def list(self, rt: Any, **kw: Any) -> Any:
        if rt.plural == self.block_list:
            self.release.wait(10)
        return super().list(rt, **kw)

    def watch(self, rt: Any, **kw: Any) -> Any:
        hook = self.before_watch.pop(rt.plural, None)
        if hook is not None:
            hook()
        w = super().watch(rt, **kw)
        return _SlowWatch(w, self.slow_events) if self.slow_events and hook is not None else w


class _SlowWatch:
    def __init__(self, inner: Any, delay: float) -> None:
        self.inner, self.delay = inner, delay

    def __iter__(self) -> _SlowWatch:
        return self

    def __next__(self) -> Any:
        time.sleep(self.delay)
        return next(self.inner)

    def bookmark(self) -> None:
        self.inner.bookmark()

    def stop(self) -> None:
        self.inner.stop()


def _rt(client: MemoryClient, kind: str) -> Any:
    return client.registry.get(*KINDS[kind])


def _seed(client: MemoryClient) -> None:
    client.create(client.registry.get("", "v1", "namespaces"),
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c1"}})
    n = client.create(_rt(client, "nodes"), node("n1").alloc("4", "8Gi").build())
    n["status"] = node("n1").alloc("4", "8Gi").build()["status"]
    client.update_status(_rt(client, "nodes"), n)
    client.create(_rt(client, "queues"), queue("c1").build())


def _pending(client: MemoryClient, name: str) -> None:
    client.create(_rt(client, "podgroups"), podgroup(f"pg-{name}").min(1).build(), namespace="c1")
    client.create(_rt(client, "pods"), pod(name).req("1", "1Gi").group(f"pg-{name}").build(), namespace="c1")


def _node_of(client: MemoryClient, name: str) -> str | None:
    return client.get(_rt(client, "pods"), name, namespace="c1")["spec"].get("nodeName")


@pytest.fixture
def client() -> Iterator[SlowClient]:
    c = SlowClient()
    _seed(c)
    yield c
    c.release.set()


@pytest.mark.parametrize("kind", ["pods", "nodes", "podgroups", "queues", "priority_classes", "configmaps"],
                         ids=lambda k: f"{k}-not-listed")
def test_no_session_before_every_informer_has_synced(client: SlowClient, kind: str) -> None:
    """A pending pod that fits is not placed while one informer's first LIST is outstanding: the session would see
    part of the cluster (a node without its running pods, a queue missing) and decide wrong."""
    _pending(client, "p1")
    client.block_list = _rt(client, kind).plural
    runner = Runner(client, workers=1)
    try:
        assert runner.start(0.2) is False
        out = runner.tick()
        assert out == {"skipped": f"informers not synced: {kind}"}
        assert runner.metrics.ticks_before_sync._value.get() == 1
        assert runner.metrics.cache_synced._value.get() == 0
        assert _node_of(client, "p1") is None and runner.sessions == 0
        client.release.set()
        assert runner.wait_synced(5)
        assert runner.metrics.cache_synced._value.get() == 1
        out = runner.tick()
        assert out["bound"] == 1 and _node_of(client, "p1") == "n1"
        assert out["startup"]["sync_s"] >= 0.2 and set(out["startup"]["kinds"]) == set(KINDS) - {"configmaps"}
    finally:
        runner.stop()


def test_pod_created_between_list_and_watch_is_in_the_first_session(client: SlowClient) -> None:
    """The pod is written after the pods LIST returned and before the watch opened; it arrives on the watch (slowly
    here), and the first session waits for it instead of starting from the LIST alone."""
    client.create(_rt(client, "podgroups"), podgroup("pg-late").min(1).build(), namespace="c1")
    client.before_watch["pods"] = lambda: client.create(
        _rt(client, "pods"), pod("late").req("1", "1Gi").group("pg-late").build(), namespace="c1")
    client.slow_events = 0.3
    runner = Runner(client, workers=1)
    try:
        assert runner.start(5)
        assert runner.cache.informers["pods"].get("c1", "late") is not None
        out = runner.tick()
        assert out["bound"] == 1 and _node_of(client, "late") == "n1"
    finally:
        runner.stop()


def test_a_watch_that_cannot_bookmark_counts_as_watching_once_open(client: SlowClient) -> None:
    """Over HTTP the watch is not asked for a bookmark: it counts as watching as soon as it is open."""
    from lahar.kube.informers import Informer

    class NoBookmark(SlowClient):
        def watch(self, rt: Any, **kw: Any) -> Any:
            return _Plain(MemoryClient.watch(self, rt, **kw))

    class _Plain:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __iter__(self) -> Any:
            return iter(self.inner)

        def stop(self) -> None:
            self.inner.stop()

    c = NoBookmark()
    _seed(c)
    inf = Informer(c, _rt(c, "nodes")).start()
    try:
        assert inf.wait_for_watch(5) and inf.has_synced() and len(inf.list()) == 1
    finally:
        inf.stop()


class FakeRedis:
    """Just what RedisLease uses: SET NX PX, GET, and its two scripts, with a clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.data: dict[str, tuple[str, float]] = {}

    def _live(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None or value[1] <= self.now:
            self.data.pop(key, None)
            return None
        return value[0]

    def set(self, key: str, value: str, nx: bool = False, px: int = 0) -> bool:
        if nx and self._live(key) is not None:
            return False
        self.data[key] = (value, self.now + px / 1000)
        return True

    def get(self, key: str) -> bytes | None:
        value = self._live(key)
        return None if value is None else value.encode()

    def eval(self, script: str, _n: int, key: str, token: str, *args: Any) -> int:
        if self._live(key) != token:
            return 0
        if script == tasks._RELEASE:
            del self.data[key]
        else:
            self.data[key] = (token, self.now + int(args[0]) / 1000)
        return 1


def test_a_standby_takes_over_with_a_warm_cache_and_no_relist(client: SlowClient) -> None:
    redis = FakeRedis()
    a = Runner(client, workers=1, lease=RedisLease(redis, ttl_seconds=10, identity="sched-a"))
    b = Runner(client, workers=1, lease=RedisLease(redis, ttl_seconds=10, identity="sched-b"))
    try:
        assert a.start(5) and b.start(5)
        _pending(client, "p1")
        _wait(lambda: a.cache.informers["pods"].get("c1", "p1") is not None)
        assert a.tick()["bound"] == 1
        # a dies mid-session: its lease is held and never released
        assert a.lease is not None and a.lease.acquire()
        a.stop()
        _pending(client, "p2")
        _wait(lambda: b.cache.informers["pods"].get("c1", "p2") is not None)
        assert b.tick() == {"skipped": "session running elsewhere"}
        assert b.lease is not None and b.lease.holder() == "sched-a"
        warm = b.cache.inputs._snap  # the standby's snapshot already holds p2: it followed while not leading
        assert warm is not None and any(t.name == "p2" for t in warm.tasks.values())
        redis.now += 10.5  # the dead holder's lease lapses
        out = b.tick()
        assert out["bound"] == 1 and _node_of(client, "p2") == "n1"
        assert b.sessions == 1 and out["startup"]["sync_s"] < 5
        assert {k: inf.relists for k, inf in b.cache.informers.items()} == dict.fromkeys(b.cache.informers, 1)
        assert redis.get(tasks.LEASE_KEY) is None  # released after the session
    finally:
        a.stop()
        b.stop()


def _wait(pred: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.mark.parametrize(("a", "b", "same"), [
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
     {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}, True),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
     {"containers": [{"resources": {"requests": {"cpu": "2"}}}]}, False),
    ({"containers": [{}], "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]},
     {"containers": [{}], "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "2"}}}]},
     False),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
     {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "overhead": {"cpu": "250m"}}, False),
    ({"containers": [{}]}, {"containers": [{"resources": {"requests": {"memory": "1Gi"}}}]}, False),
], ids=["same-template", "other-cpu", "sidecar-vs-init", "overhead", "best-effort-vs-memory"])
def test_first_snapshot_parses_each_request_shape_once(a: dict, b: dict, same: bool) -> None:
    """Tasks share the parse of identical request fields (most of a 100k-pod first snapshot), never the arrays,
    and requests that differ in any field read stay apart."""
    import numpy as np

    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.framework.nodes import EPSILON, ResourceIndex

    res = ResourceIndex(["cpu", "memory"])
    ta = snapshots.Task({"metadata": {"name": "a"}, "spec": a}, res)
    tb = snapshots.Task({"metadata": {"name": "b"}, "spec": b}, res)
    for t, spec in ((ta, a), (tb, b)):
        resreq, init = snapshots.pod_requests({"spec": spec}, res)
        assert np.array_equal(t.resreq, resreq) and np.array_equal(t.init_resreq, init)
        assert t.best_effort == bool(np.all(init < EPSILON))
    equal = np.array_equal(ta.resreq, tb.resreq) and np.array_equal(ta.init_resreq, tb.init_resreq)
    assert equal == same and ta.resreq is not tb.resreq
    ta.resreq += 1000
    assert not np.array_equal(ta.resreq, tb.resreq)
