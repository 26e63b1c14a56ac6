"""TTL garbage collection of finished Volcano Jobs (Volcano garbagecollector_test shapes: needsCleanup, timeLeft)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import gc
from lahar.controllers.context import Context
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry
from tests.builders import vcjob

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
NS = "default"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def make_ctx() -> tuple[Context, Clock]:
    clock = Clock()
    store = Store(registry=Registry.of(resources.core()), clock=clock)
    return Context(client=MemoryClient.with_crds(store), clock=clock), clock


def jrt(ctx: Context) -> Any:
    return ctx.client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")


def add_job(ctx: Context, name: str, *, ttl: int | None, phase: str | None, finished: dt.datetime | None = T0) -> dict:
    new = vcjob(name, NS).min_available(1)
    if ttl is not None:
        new.spec(ttlSecondsAfterFinished=ttl)
    job = ctx.client.create(jrt(ctx), new.build(), namespace=NS)
    if phase:
        state: dict[str, Any] = {"phase": phase}
        if finished is not None:
            state["lastTransitionTime"] = finished.strftime("%Y-%m-%dT%H:%M:%SZ")
        job["status"] = {"state": state}
        job = ctx.client.update_status(jrt(ctx), job, namespace=NS)
    return job


def exists(ctx: Context, name: str) -> bool:
    return any(j["metadata"]["name"] == name for j in ctx.client.list(jrt(ctx), namespace=NS)["items"])


TABLE = [
    # ttl, phase, seconds after finish, expected (left or None), deleted
    (None, "Completed", 10, None, False),
    (100, "Running", 10, None, False),
    (100, None, 10, None, False),
    (100, "Completed", 10, 90.0, False),
    (100, "Failed", 100, None, True),
    (0, "Terminated", 0, None, True),
    (30, "Completed", 45, None, True),
    (3600, "Failed", 60, 3540.0, False),
]


@pytest.mark.parametrize(("ttl", "phase", "after", "requeue", "deleted"), TABLE,
                         ids=["no-ttl", "running", "no-status", "not-expired", "expired-exactly", "ttl-zero",
                              "expired", "long-ttl-requeue"])
def test_ttl_after_finished(ttl: int | None, phase: str | None, after: int, requeue: float | None,
                            deleted: bool) -> None:
    ctx, clock = make_ctx()
    add_job(ctx, "j", ttl=ttl, phase=phase)
    clock.now = T0 + dt.timedelta(seconds=after)
    result = gc.reconcile(ctx, NS, "j")
    assert result.requeue_after == requeue
    assert exists(ctx, "j") is not deleted


def test_time_left_is_none_when_no_cleanup_is_needed() -> None:
    assert gc.time_left({"spec": {}, "status": {"state": {"phase": "Completed"}}}, T0) is None
    job = {"spec": {"ttlSecondsAfterFinished": 5},
           "status": {"state": {"phase": "Completed", "lastTransitionTime": "2025-01-01T12:00:00Z"}}}
    assert gc.time_left(job, T0 + dt.timedelta(seconds=2)) == 3.0


def test_recreated_job_with_the_same_name_is_not_deleted_by_an_old_decision() -> None:
    ctx, clock = make_ctx()
    old = add_job(ctx, "j", ttl=1, phase="Completed")
    clock.now = T0 + dt.timedelta(seconds=5)
    ctx.client.delete(jrt(ctx), "j", namespace=NS)
    add_job(ctx, "j", ttl=1, phase=None)
    gc.reconcile(ctx, NS, "j")
    job = ctx.client.get(jrt(ctx), "j", namespace=NS)
    assert job["metadata"]["uid"] != old["metadata"]["uid"]


def test_missing_job_is_done() -> None:
    ctx, _ = make_ctx()
    assert gc.reconcile(ctx, NS, "nope").requeue_after is None
