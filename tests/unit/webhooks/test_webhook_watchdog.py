"""The review clock and the watchdog's decision (`webhooks.watchdog`), and the options a worker process of
`lahar webhook --workers N` builds its app from."""

from __future__ import annotations

import os

import pytest
from starlette.testclient import TestClient

from lahar.commands.webhook import WorkerOptions
from lahar.webhooks import review, watchdog
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups


@pytest.mark.parametrize(("started", "now", "limit", "expected"), [
    ({}, 100.0, 5.0, []),
    ({1: None, 2: None}, 100.0, 5.0, []),
    ({1: 96.0}, 100.0, 5.0, []),
    ({1: 95.0}, 100.0, 5.0, []),                         # exactly at the limit: not yet
    ({1: 94.9}, 100.0, 5.0, [1]),
    ({3: 10.0, 1: 99.0, 2: 50.0}, 100.0, 5.0, [2, 3]),
    ({1: 10.0}, 100.0, 0.0, []),                         # 0: the watchdog is off
], ids=["no-workers", "all-idle", "busy-under", "at-limit", "past-limit", "two-of-three", "off"])
def test_overdue(started, now, limit, expected):
    assert watchdog.overdue(started, now=now, limit=limit) == expected


def test_clock_stamps_and_clears_a_page_the_supervisor_reads(tmp_path, monkeypatch):
    monkeypatch.setenv(watchdog.WATCH_DIR_ENV, str(tmp_path))
    clock = watchdog.ReviewClock()
    assert watchdog.started_at(tmp_path, os.getpid()) is None
    clock.begin()
    at = watchdog.started_at(tmp_path, os.getpid())
    assert at is not None and at > 0
    clock.end()
    assert watchdog.started_at(tmp_path, os.getpid()) is None
    watchdog.forget(tmp_path, os.getpid())
    assert not (tmp_path / str(os.getpid())).exists()


def test_clock_without_a_supervisor_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.delenv(watchdog.WATCH_DIR_ENV, raising=False)
    clock = watchdog.ReviewClock()
    clock.begin()
    clock.end()
    assert list(tmp_path.iterdir()) == []


def test_a_review_is_timed_while_its_rules_run_and_not_after(tmp_path, monkeypatch):
    monkeypatch.setenv(watchdog.WATCH_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(watchdog, "CLOCK", watchdog.ReviewClock())
    seen: list = []

    class Watching(StaticLookups):
        def queue(self, name):
            seen.append(watchdog.started_at(tmp_path, os.getpid()))
            return super().queue(name)

    from lahar.commands.webhook import admission_config
    app = create_app(lookups=Watching(builtin_queues=True), config=admission_config())
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "d"},
           "spec": {"queue": "default", "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {
               "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}]}}
    body = review.to_review(review.request_for(job, resource="jobs", uid="u1"))
    with TestClient(app) as c:
        out = c.post("/jobs/validate", json=body).json()["response"]
    assert out["allowed"] is True, out
    assert seen and all(at is not None for at in seen)
    assert watchdog.started_at(tmp_path, os.getpid()) is None


@pytest.mark.parametrize("options", [
    WorkerOptions(),
    WorkerOptions(state="s.yaml", policies=("a.yaml", "dir"), log_level="info", log_format="json"),
    WorkerOptions(kubeconfig="kc", config_namespace="ns", all_namespaces=True, sync_timeout=3.5),
], ids=["defaults", "static", "live"])
def test_worker_options_survive_the_environment(options):
    assert WorkerOptions.from_json(options.to_json()) == options
