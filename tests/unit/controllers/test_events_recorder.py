"""`controllers.events.record` (through `kube.events`) against the in-memory cluster: a new Event costs one API call
(a create, no GET that answers 404 first), a repeat is one merge patch of `count` (nothing read back), and a failing
API never fails the caller."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import events
from lahar.controllers.context import Context, MemoryInbox, MemoryTimers
from lahar.kube import errors
from lahar.kube import events as kube_events
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store

NS = "default"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Counting:
    """A client that counts its calls by verb and can fail one verb."""

    def __init__(self, inner: MemoryClient, fail: str | None = None) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.calls: list[str] = []
        self.fail = fail

    def __getattr__(self, verb: str) -> Any:
        fn = getattr(self.inner, verb)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(verb)
            if verb == self.fail:
                raise errors.ServiceUnavailable("down")
            return fn(*args, **kwargs)
        return call


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    kube_events.RECORDER.clear()  # what this process wrote before: each test starts as a new process


def _world(fail: str | None = None) -> tuple[Context, Counting]:
    client = Counting(MemoryClient.with_crds(Store(clock=lambda: NOW)), fail=fail)
    ctx = Context(client=client, clock=lambda: NOW, timers=MemoryTimers(clock=lambda: NOW), inbox=MemoryInbox())
    return ctx, client


JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
       "metadata": {"name": "job1", "namespace": NS, "uid": "u-1"}}


def _events(client: Counting) -> list[dict[str, Any]]:
    return client.inner.list(client.registry.get("", "v1", "events"), namespace=NS)["items"]


def test_a_new_event_is_one_create() -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "ExecuteAction", "Start to execute action SyncJob ")
    assert client.calls == ["create"]
    (ev,) = _events(client)
    assert (ev["reason"], ev["count"], ev["involvedObject"]["uid"]) == ("ExecuteAction", 1, "u-1")


def test_a_repeat_is_one_patch_and_reads_nothing() -> None:
    ctx, client = _world()
    for _ in range(3):
        events.record(ctx, JOB, "Warning", "PodGroupPending", "PodGroup default:job1 unschedulable, reason: x")
    assert client.calls == ["create", "patch", "patch"]
    (ev,) = _events(client)
    assert (ev["count"], ev["firstTimestamp"], ev["lastTimestamp"]) == (3, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_a_repeat_of_another_process_event_is_read_once_then_patched() -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "A", "one")
    kube_events.RECORDER.clear()  # written by another worker process
    events.record(ctx, JOB, "Normal", "A", "one")
    events.record(ctx, JOB, "Normal", "A", "one")
    assert client.calls == ["create", "create", "get", "update", "patch"]
    assert _events(client)[0]["count"] == 3


def test_a_repeat_another_process_bumped_meanwhile_conflicts_and_counts_on() -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "A", "one")
    rt = client.registry.get("", "v1", "events")
    (ev,) = _events(client)
    ev["count"] = 5  # another worker process's repeats
    client.inner.update(rt, ev, namespace=NS)
    events.record(ctx, JOB, "Normal", "A", "one")
    assert client.calls == ["create", "patch", "get", "update"]
    assert _events(client)[0]["count"] == 6


def test_a_remembered_event_that_is_gone_is_created_again_with_its_count() -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "A", "one")
    events.record(ctx, JOB, "Normal", "A", "one")
    rt = client.registry.get("", "v1", "events")
    client.inner.delete(rt, _events(client)[0]["metadata"]["name"], namespace=NS)  # expired (the API's event TTL)
    events.record(ctx, JOB, "Normal", "A", "one")
    assert client.calls == ["create", "patch", "patch", "create"]
    assert _events(client)[0]["count"] == 3


def test_different_messages_are_different_events() -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "A", "one")
    events.record(ctx, JOB, "Normal", "A", "two")
    assert sorted(e["message"] for e in _events(client)) == ["one", "two"]


@pytest.mark.parametrize(("verb", "forget"), [("create", True), ("get", True), ("update", True), ("patch", False)],
                         ids=["create-fails", "get-fails", "update-fails", "patch-fails"])
def test_a_failing_api_is_swallowed(verb: str, forget: bool) -> None:
    ctx, client = _world()
    events.record(ctx, JOB, "Normal", "A", "one")
    if forget:
        kube_events.RECORDER.clear()  # the repeat goes create → AlreadyExists → get → update
    client.fail = verb
    events.record(ctx, JOB, "Normal", "A", "one")  # must not raise
    assert verb in client.calls[1:]
