"""A Job's pods are created and deleted side by side (`controllers._fanout`), as Volcano's syncJob/killJob do: the
calls overlap up to `ctx.pod_concurrency`, failures are collected and reported at once, AlreadyExists is a success."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lahar.controllers import _fanout, jobs
from lahar.controllers.context import Context, TemporaryError
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from tests.unit.controllers.test_job_reconciler import NS, World, vcjob, worker_task


class Gate:
    """A slow API server, observed by counting, never by timing: each of `total` calls waits (bounded) until `expect`
    calls — or all that are left — are in flight together. A caller that does not overlap them sees at most 1 in
    flight and pays the timeout."""

    def __init__(self, expect: int, total: int = 8, timeout: float = 2.0) -> None:
        self.expect, self.total, self.timeout = expect, total, timeout
        self.cond = threading.Condition()
        self.in_flight = self.max_in_flight = self.calls = self.done = 0

    def __enter__(self) -> None:
        with self.cond:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.in_flight >= min(self.expect, self.total - self.done), self.timeout)

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.in_flight -= 1
            self.done += 1
            self.cond.notify_all()


class SlowPods:
    """`ClusterClient` at our boundary: a MemoryClient whose pod creates/deletes pass a `Gate` (a slow API server),
    and fail or find AlreadyExists for chosen pod names."""

    def __init__(self, inner: MemoryClient, gate: Gate | None = None) -> None:
        self.inner, self.gate = inner, gate
        self.fail_create: dict[str, int] = {}   # pod name → creates still to fail
        self.fail_delete: set[str] = set()
        self.raced: set[str] = set()            # someone else creates these first: AlreadyExists for us
        self.created: list[str] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _slow(self) -> Any:
        return self.gate if self.gate is not None else _Nothing()

    def create(self, rt: Any, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if rt.kind != "Pod":
            return self.inner.create(rt, obj, **kw)
        name = obj["metadata"]["name"]
        with self._slow():
            with self._lock:
                failing = self.fail_create.get(name, 0) > 0
                if failing:
                    self.fail_create[name] -= 1
                else:
                    self.created.append(name)
            if failing:
                raise errors.ServiceUnavailable("etcdserver: request timed out")
            if name in self.raced:
                self.inner.create(rt, obj, **kw)
                raise errors.AlreadyExists(f'pods "{name}" already exists')
            return self.inner.create(rt, obj, **kw)

    def delete(self, rt: Any, name: str, **kw: Any) -> dict[str, Any]:
        if rt.kind != "Pod":
            return self.inner.delete(rt, name, **kw)
        with self._slow():
            if name in self.fail_delete:
                raise errors.ServiceUnavailable("etcdserver: request timed out")
            return self.inner.delete(rt, name, **kw)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.fixture(autouse=True)
def _pools() -> Iterator[None]:
    yield
    _fanout.shutdown()  # no pool threads outlive the test


def slow_world(gate: Gate | None = None, concurrency: int = 16) -> tuple[World, SlowPods]:
    world = World()
    client = SlowPods(world.client, gate)
    world.ctx = Context(client=client, clock=world.clock, timers=world.timers, inbox=world.inbox,
                        pod_concurrency=concurrency)
    return world, client


def eight_pods() -> dict[str, Any]:
    """The bench's shape: 8 pods in 2 tasks."""
    return vcjob("job1", worker_task("ps", replicas=4), worker_task("worker", replicas=4))


def to_creation(world: World) -> None:
    world.submit(eight_pods())
    world.reconcile()
    world.enqueue()


# --- (a) the calls overlap, bounded --------------------------------------------------------------------------------

@pytest.mark.parametrize(("concurrency", "expect_max"), [(16, 8), (3, 3), (1, 1)],
                         ids=["all-8-at-once", "bounded-by-3", "one-after-another"])
def test_pod_creates_overlap_up_to_the_limit(concurrency: int, expect_max: int) -> None:
    gate = Gate(expect=expect_max)
    world, client = slow_world(gate, concurrency)
    to_creation(world)
    world.reconcile()
    assert len(world.pods()) == 8 and sorted(client.created) == world.pod_names()
    assert gate.calls == 8
    assert gate.max_in_flight == expect_max  # 8 pods take one round trip, not eight (when the limit allows)
    assert world.status()["pending"] == 8


def test_pod_deletes_overlap() -> None:
    world, client = slow_world()
    world.start(eight_pods())
    client.gate = gate = Gate(expect=8)
    world.push({"event": "CommandIssued", "action": "AbortJob"})
    world.reconcile()
    assert world.pods() == [] and world.phase() == "Aborting"
    assert gate.calls == 8 and gate.max_in_flight == 8
    assert world.status()["terminating"] == 8


def test_one_pool_per_process_shared_by_reconciles() -> None:
    world, _ = slow_world()
    to_creation(world)
    world.reconcile()
    pools = dict(_fanout._pools)
    other, _ = slow_world()
    to_creation(other)
    other.reconcile()
    assert list(pools) == [16] and _fanout._pools == pools  # the second reconcile reused the first one's pool


# --- (b) one failing create among 8 ---------------------------------------------------------------------------------

def test_one_failed_create_is_reported_and_the_next_reconcile_creates_it() -> None:
    world, client = slow_world()
    to_creation(world)
    client.fail_create["job1-worker-2"] = 1
    with pytest.raises(TemporaryError, match="failed to create 1 pods of 8"):
        jobs.reconcile(world.ctx, NS, "job1")
    names = world.pod_names()
    assert len(names) == 7 and "job1-worker-2" not in names  # the other seven went through
    assert ("FailedCreate", "Error creating pods: ['failed to create pod job1-worker-2, err: "
            "etcdserver: request timed out']") in world.events()
    client.created.clear()
    world.reconcile()
    assert client.created == ["job1-worker-2"]  # only the missing one, nothing twice
    assert len(world.pods()) == 8 and world.status()["pending"] == 8


def test_every_failure_is_collected_in_pod_order() -> None:
    world, client = slow_world()
    to_creation(world)
    client.fail_create.update({"job1-ps-1": 1, "job1-worker-3": 1})
    with pytest.raises(TemporaryError, match="failed to create 2 pods of 8"):
        jobs.reconcile(world.ctx, NS, "job1")
    message = dict(world.events())["FailedCreate"]
    assert message.index("job1-ps-1") < message.index("job1-worker-3")
    assert len(world.pods()) == 6


def test_one_failed_delete_is_reported_and_the_rest_are_deleted() -> None:
    world, client = slow_world()
    world.start(eight_pods())
    client.fail_delete.add("job1-ps-0")
    world.push({"event": "CommandIssued", "action": "AbortJob"})
    with pytest.raises(TemporaryError, match="failed to delete 1 pods of 8"):
        jobs.reconcile(world.ctx, NS, "job1")
    assert world.pod_names() == ["job1-ps-0"]
    message = dict(world.events())["FailedDelete"]
    assert message.startswith("Error deleting pods: ['failed to delete pod job1-ps-0, err ")
    client.fail_delete.clear()
    world.reconcile()  # the abort was not acked: it runs again and finishes
    assert world.pods() == [] and world.phase() == "Aborting"


# --- (c) AlreadyExists is a success ---------------------------------------------------------------------------------

def test_already_exists_counts_as_created() -> None:
    world, client = slow_world()
    to_creation(world)
    client.raced.add("job1-ps-3")  # another worker (or a replay) created it between our list and our create
    world.reconcile()
    assert not [e for e in world.events() if e[0] == "FailedCreate"]
    status = world.status()
    assert status["pending"] == 8  # counted as Pending, like Volcano's `pending++`
    assert status["taskStatusCount"] == {"ps": {"phase": {"Pending": 4}}, "worker": {"phase": {"Pending": 4}}}
    assert len(world.pods()) == 8


# --- the pool itself ------------------------------------------------------------------------------------------------

def test_run_returns_outcomes_in_input_order() -> None:
    def fn(i: int) -> int:
        if i % 3 == 0:
            raise ValueError(i)
        return i * 10

    out = _fanout.run(fn, list(range(7)), limit=4)
    assert [o.item for o in out] == list(range(7))
    assert [o.value for o in out] == [None, 10, 20, None, 40, 50, None]
    assert [type(o.error).__name__ if o.error else None for o in out] == ["ValueError", None, None, "ValueError",
                                                                          None, None, "ValueError"]


def test_unexpected_errors_propagate_after_the_others_finished() -> None:
    world, client = slow_world()
    to_creation(world)

    def boom(*_: Any, **__: Any) -> None:
        raise RuntimeError("bug")

    original = client.create

    def create(rt: Any, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if obj["metadata"]["name"] == "job1-ps-0":
            boom()
        return original(rt, obj, **kw)

    client.create = create  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="bug"):
        jobs.reconcile(world.ctx, NS, "job1")
    assert len(world.pods()) == 7  # the rest were not abandoned half-way


# --- the REST client the fan-out shares -----------------------------------------------------------------------------

def test_rest_client_refreshes_credentials_one_thread_at_a_time() -> None:
    """The kubeconfig loader's refresh hook rewrites the shared configuration before every request; the pool's
    threads must not run it side by side."""
    from kubernetes import client as k8s_client

    from lahar.kube.rest import RestClient

    gate = Gate(expect=2, total=8, timeout=0.2)  # would see 2 in flight if the hook were not serialized

    def hook(cfg: Any) -> None:
        with gate:
            cfg.api_key["BearerToken"] = "t"

    configuration = k8s_client.Configuration(host="https://127.0.0.1:1")
    configuration.refresh_api_key_hook = hook
    client = RestClient(configuration)
    try:
        RestClient(configuration).close()  # a second client over the same configuration does not wrap it twice
        _fanout.run(lambda _: configuration.get_api_key_with_prefix("BearerToken"), list(range(8)), limit=8)
    finally:
        client.close()
    assert gate.calls == 8 and gate.max_in_flight == 1
