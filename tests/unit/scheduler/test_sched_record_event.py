"""The scheduler's `commit.record_event` (FailedScheduling and friends) through `kube.events`: a repeat of the same
(pod, reason, message) is one patch of `count`, never a GET first (a session re-sends the Events of pods left
pending: before, each repeat read the Event back and wrote it whole)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import events as kube_events
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.scheduler import commit
from tests.unit.controllers.test_job_reconcile_calls import Counting

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default", "uid": "u-p1"}}


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    kube_events.RECORDER.clear()


def test_a_repeated_failed_scheduling_event_is_one_patch_each() -> None:
    client = Counting(MemoryClient.with_crds(Store()))
    for _ in range(3):
        assert commit.record_event(client, POD, "Warning", "FailedScheduling", "0/2 nodes are available.",  # type: ignore[arg-type]
                                   now=lambda: "2026-01-01T00:00:00Z")
    assert client.calls == [("create", "events"), ("patch", "events"), ("patch", "events")]
    (ev,) = client.inner.list(client.registry.get("", "v1", "events"), namespace="default")["items"]
    assert (ev["count"], ev["reason"], ev["source"]["component"]) == (3, "FailedScheduling", "volcano")


def test_a_failed_write_says_so() -> None:
    class Down(Counting):
        def __getattr__(self, verb: str) -> Any:
            def fail(*_: Any, **__: Any) -> Any:
                from lahar.kube import errors
                raise errors.ServiceUnavailable("down")
            return fail

    client = Down(MemoryClient.with_crds(Store()))
    assert commit.record_event(client, POD, "Warning", "FailedScheduling", "x") is False  # type: ignore[arg-type]
