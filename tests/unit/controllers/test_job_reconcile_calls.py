"""The job reconciler's API calls on the in-memory cluster, counted: how many a Job costs from submit to its pods,
and which of them go out side by side (on a real API server every sequential round trip is reconcile latency)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lahar.controllers import _fanout, jobs
from lahar.controllers.context import Context, MemoryInbox, MemoryTimers
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from tests.unit.controllers.test_job_reconciler import NS, Clock, vcjob


class Counting:
    """Counts calls as (verb, plural); `hold` makes the named calls wait at a barrier (they must be in flight at once)."""

    def __init__(self, inner: MemoryClient) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.calls: list[tuple[str, str]] = []
        self.hold: set[tuple[str, str]] = set()
        self.barrier: threading.Barrier | None = None
        self._mu = threading.Lock()

    def __getattr__(self, verb: str) -> Any:
        fn = getattr(self.inner, verb)

        def call(rt: Any = None, *args: Any, **kwargs: Any) -> Any:
            what = (verb, getattr(rt, "plural", ""))
            with self._mu:
                self.calls.append(what)
            if what in self.hold and self.barrier is not None:
                self.barrier.wait()
            return fn(rt, *args, **kwargs) if rt is not None else fn(*args, **kwargs)
        return call


@pytest.fixture
def world() -> Any:
    clock = Clock()
    client = Counting(MemoryClient.with_crds(Store(clock=clock)))
    ctx = Context(client=client, clock=clock, timers=MemoryTimers(clock=clock), inbox=MemoryInbox())
    yield ctx, client
    _fanout.shutdown()


def _submit(client: Counting) -> dict[str, Any]:
    rt = client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")
    return client.inner.create(rt, vcjob("job1"), namespace=NS)


def _enqueue(client: Counting) -> None:
    rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    (pg,) = client.inner.list(rt, namespace=NS)["items"]
    pg["status"] = {"phase": "Inqueue"}
    client.inner.update(rt, pg, namespace=NS)


def test_pods_and_podgroup_are_read_side_by_side(world: Any) -> None:
    ctx, client = world
    _submit(client)
    jobs.reconcile(ctx, NS, "job1")  # creates the PodGroup
    client.hold = {("list", "pods"), ("get", "podgroups")}
    client.barrier = threading.Barrier(2, timeout=5)  # one after the other, the first waits alone and breaks it
    jobs.reconcile(ctx, NS, "job1")
    assert not client.barrier.broken


def test_read_errors_still_surface(world: Any) -> None:
    ctx, client = world
    _submit(client)
    jobs.reconcile(ctx, NS, "job1")

    def boom(*_: Any, **__: Any) -> Any:
        raise errors.ServiceUnavailable("down")
    client.inner.list = boom  # type: ignore[method-assign]
    with pytest.raises(errors.ServiceUnavailable):
        jobs.reconcile(ctx, NS, "job1")


@pytest.mark.parametrize(("step", "want"), [
    ("submit", [("get", "jobs"), ("list", "pods"), ("get", "podgroups"), ("get", "podgroups"),
                ("create", "podgroups"), ("update_status", "jobs")]),
    ("waiting", [("get", "jobs"), ("list", "pods"), ("get", "podgroups")]),
    ("inqueue", [("get", "jobs"), ("list", "pods"), ("get", "podgroups"), ("get", "queues"),
                 *[("create", "pods")] * 2, ("update_status", "jobs")]),
], ids=["first-reconcile", "podgroup-pending", "podgroup-inqueue"])
def test_api_calls_per_reconcile(world: Any, step: str, want: list[tuple[str, str]]) -> None:
    ctx, client = world
    _submit(client)
    if step != "submit":
        jobs.reconcile(ctx, NS, "job1")
    if step == "inqueue":
        _enqueue(client)
    client.calls.clear()
    jobs.reconcile(ctx, NS, "job1")
    assert sorted(client.calls) == sorted(want)
