"""controllers.metrics: the decisions as tables, the collectors through their registries (a real redis-server for the
queue depth), and the Volcano names of the job-phase counters against Volcano's pkg/controllers/job/state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client import generate_latest

from lahar.controllers import metrics
from lahar.controllers.context import Result
from tests.builders import vcjob


def _job(phase: str, *, ns: str = "ns1", name: str = "j1", queue: str | None = "q1") -> dict[str, Any]:
    j = vcjob(name, ns).phase(phase)
    return (j.queue(queue) if queue is not None else j).build()


RESULTS = [
    ("success", False, None, "success"),
    ("requeue-now", False, 0.0, "requeue"),
    ("requeue-later", False, 5.0, "requeue_after"),
    ("error-wins", True, 5.0, "error"),
]


@pytest.mark.parametrize(("error", "requeue", "want"), [r[1:] for r in RESULTS], ids=[r[0] for r in RESULTS])
def test_result_label(error: bool, requeue: float | None, want: str) -> None:
    assert metrics.result_label(error=error, requeue_after=requeue) == want


@pytest.mark.parametrize(("kind", "want"), [("Job", "Job"), ("GC", "GC"), ("Evil\n", "other"), ("", "other")],
                         ids=["job", "gc", "unknown", "empty"])
def test_kind_label(kind: str, want: str) -> None:
    assert metrics.kind_label(kind) == want


PHASES = [
    ("running-to-completed", "MODIFIED", _job("Completed"), _job("Running"), ("Completed", "ns1/j1", "q1")),
    ("completing-to-completed", "MODIFIED", _job("Completed"), _job("Completing"), ("Completed", "ns1/j1", "q1")),
    ("restarting-to-failed", "MODIFIED", _job("Failed"), _job("Restarting"), ("Failed", "ns1/j1", "q1")),
    ("no-queue-default", "MODIFIED", _job("Failed", queue=None), _job("Running"), ("Failed", "ns1/j1", "dflt")),
    ("already-completed", "MODIFIED", _job("Completed"), _job("Completed"), None),
    ("added-completed", "ADDED", _job("Completed"), None, None),
    ("resync", "RESYNC", _job("Completed"), _job("Running"), None),
    ("aborted-not-counted", "MODIFIED", _job("Aborted"), _job("Aborting"), None),
    ("to-running", "MODIFIED", _job("Running"), _job("Pending"), None),
    ("no-status", "MODIFIED", {"metadata": {"name": "x"}}, {}, None),
]


@pytest.mark.parametrize(("event", "obj", "old", "want"), [p[1:] for p in PHASES], ids=[p[0] for p in PHASES])
def test_job_phase_change(event: str, obj: dict, old: dict | None, want: tuple | None) -> None:
    assert metrics.job_phase_change(event, obj, old, default_queue="dflt") == want


def test_broker_lists_follow_kombus_priority_keys() -> None:
    from kombu.transport import redis as kombu_redis

    sep = kombu_redis.Channel.sep
    assert metrics.broker_lists("reconcile", steps=tuple(kombu_redis.PRIORITY_STEPS), sep=sep) == \
        metrics.broker_lists("reconcile")
    assert metrics.broker_lists("reconcile")[:2] == ["reconcile", f"reconcile{sep}3"]


def _samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for m in registry.collect() for s in m.samples}


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_reconcile_metrics_by_kind_and_result() -> None:
    clock = FakeClock()
    m = metrics.ReconcileMetrics(clock=clock)
    with m.timed("Job") as done:
        clock.t += 0.2
        done(Result(requeue_after=3.0))
    with m.timed("Queue") as done:
        done(Result())
    with pytest.raises(RuntimeError), m.timed("Job"):
        clock.t += 1.0
        raise RuntimeError("boom")
    m.lock_wait("PodGroup")
    m.drop("Bogus")
    got = _samples(m.registry)
    assert got[("lahar_reconcile_total", (("kind", "Job"), ("result", "requeue_after")))] == 1
    assert got[("lahar_reconcile_total", (("kind", "Job"), ("result", "error")))] == 1
    assert got[("lahar_reconcile_total", (("kind", "Queue"), ("result", "success")))] == 1
    assert got[("lahar_reconcile_duration_seconds_sum", (("kind", "Job"),))] == pytest.approx(1.2)
    assert got[("lahar_reconcile_duration_seconds_count", (("kind", "Job"),))] == 2
    assert got[("lahar_reconcile_lock_waits_total", (("kind", "PodGroup"),))] == 1
    assert got[("lahar_reconcile_dropped_total", (("kind", "other"),))] == 1


def test_job_phase_counters_count_transitions_and_forget_deleted_jobs() -> None:
    m = metrics.DispatchMetrics()
    m.observe("Job", "MODIFIED", _job("Completed"), _job("Running"))
    m.observe("Job", "MODIFIED", _job("Completed"), _job("Completed"))  # a later update: not a second completion
    m.observe("Job", "MODIFIED", _job("Failed", name="j2"), _job("Restarting", name="j2"))
    m.observe("Pod", "ADDED", {"metadata": {}})
    text = generate_latest(m.registry).decode()
    assert 'volcano_job_completed_phase_count{job_name="ns1/j1",queue_name="q1"} 1.0' in text
    assert 'volcano_job_failed_phase_count{job_name="ns1/j2",queue_name="q1"} 1.0' in text
    assert "# TYPE volcano_job_completed_phase_count gauge" in text  # Go's exact name, no _total
    assert 'lahar_dispatch_events_total{event="MODIFIED",kind="Job"} 3.0' in text
    m.observe("Job", "DELETED", _job("Completed"))
    text = generate_latest(m.registry).decode()
    assert 'job_name="ns1/j1"' not in text and 'job_name="ns1/j2"' in text


def _flow(phase: str, ns: str = "ns1", name: str = "f1") -> dict:
    return {"metadata": {"namespace": ns, "name": name}, "status": {"state": {"phase": phase}}}


@pytest.mark.parametrize(("event", "obj", "old", "want"), [
    pytest.param("MODIFIED", _flow("Succeed"), _flow("Running"), ("Succeed", "ns1"), id="running-to-succeed"),
    pytest.param("MODIFIED", _flow("Failed"), _flow("Pending"), ("Failed", "ns1"), id="pending-to-failed"),
    pytest.param("MODIFIED", _flow("Succeed"), _flow("Succeed"), None, id="a-later-update-is-not-a-second-success"),
    pytest.param("ADDED", _flow("Succeed"), None, None, id="a-relist-counts-nothing"),
    pytest.param("MODIFIED", _flow("Running"), _flow("Pending"), None, id="other-phases-count-nothing"),
    pytest.param("MODIFIED", {"metadata": {}}, {}, None, id="no-status"),
])
def test_jobflow_phase_change(event: str, obj: dict, old: dict | None, want: tuple | None) -> None:
    assert metrics.jobflow_phase_change(event, obj, old) == want


def test_jobflow_phase_counters_have_volcanos_names_and_forget_a_deleted_flows_namespace() -> None:
    """Volcano's pkg/controllers/jobflow/state/metrics.go: jobflow_succeed_phase_count and
    jobflow_failed_phase_count in subsystem `volcano`, label jobflow_namespace; DeleteJobFlowMetrics drops the
    namespace's series."""
    m = metrics.DispatchMetrics()
    m.observe("JobFlow", "MODIFIED", _flow("Succeed"), _flow("Running"))
    m.observe("JobFlow", "MODIFIED", _flow("Succeed", name="f2"), _flow("Running", name="f2"))
    m.observe("JobFlow", "MODIFIED", _flow("Failed", ns="ns2"), _flow("Running", ns="ns2"))
    text = generate_latest(m.registry).decode()
    assert 'volcano_jobflow_succeed_phase_count{jobflow_namespace="ns1"} 2.0' in text
    assert 'volcano_jobflow_failed_phase_count{jobflow_namespace="ns2"} 1.0' in text
    assert "# TYPE volcano_jobflow_succeed_phase_count gauge" in text  # Go's exact name, no _total
    m.observe("JobFlow", "DELETED", _flow("Succeed"))
    text = generate_latest(m.registry).decode()
    assert 'jobflow_namespace="ns1"' not in text and 'jobflow_namespace="ns2"' in text


def test_a_broken_event_never_raises_out_of_the_hook() -> None:
    m = metrics.DispatchMetrics()
    m.observe("Job", "MODIFIED", {"status": "not-a-dict"}, {"status": {}})  # logged at debug, dispatch goes on


def test_volcano_names_and_labels_of_the_job_phase_counters() -> None:
    """Volcano's pkg/controllers/job/state/metrics.go: counters job_completed_phase_count and job_failed_phase_count
    in subsystem `volcano`, labels job_name (namespace/name) and queue_name."""
    families = {m.name: m for m in metrics.DispatchMetrics().registry.collect()}
    for name in ("volcano_job_completed_phase_count", "volcano_job_failed_phase_count"):
        assert name in families
    m = metrics.DispatchMetrics()
    m.observe("Job", "MODIFIED", _job("Completed"), _job("Running"))
    (sample,) = [s for f in m.registry.collect() if f.name == "volcano_job_completed_phase_count" for s in f.samples]
    assert set(sample.labels) == {"job_name", "queue_name"}


class FakeDispatcher:
    def __init__(self) -> None:
        import threading

        self.stats = {"events": 4, "works": 3, "sent": 2, "deduplicated": 1, "inbox": 0, "timers": 5, "errors": 0}
        self.leading = threading.Event()
        self.informers: dict[str, object] = {"Job": object(), "Pod": object()}


def test_dispatch_stats_read_the_dispatchers_counters() -> None:
    from prometheus_client import CollectorRegistry

    r = CollectorRegistry()
    d = FakeDispatcher()
    r.register(metrics.DispatchStats(d))
    got = _samples(r)
    assert got[("lahar_dispatch_enqueued_total", (("outcome", "sent"),))] == 2
    assert got[("lahar_dispatch_timers_fired_total", ())] == 5
    assert got[("lahar_dispatch_leader", ())] == 0 and got[("lahar_dispatch_watches", ())] == 2
    d.leading.set()
    assert _samples(r)[("lahar_dispatch_leader", ())] == 1


def test_queue_depth_reads_redis_at_scrape(redis_server: Any) -> None:
    import redis as redis_lib
    from prometheus_client import CollectorRegistry

    r = redis_lib.Redis.from_url(redis_server.url, decode_responses=True)
    p = f"t{uuid.uuid4().hex[:8]}"
    q, sched = f"{p}-reconcile", f"{p}-scheduling"
    r.rpush(q, "a", "b")
    r.rpush(metrics.broker_lists(q)[2], "c")  # a priority-6 message counts too
    r.rpush(sched, "d")
    r.hset(f"{p}-unacked", mapping={"t1": "x"})
    r.zadd(f"{p}:timers", {"due": 50.0, "later": 500.0})
    reg = CollectorRegistry()
    reg.register(metrics.QueueDepth(r, queues=(q, sched), timers_key=f"{p}:timers", unacked_key=f"{p}-unacked",
                                    clock=lambda: 100.0))
    got = _samples(reg)
    assert got[("lahar_workqueue_depth", (("queue", q),))] == 3
    assert got[("lahar_workqueue_depth", (("queue", sched),))] == 1
    assert got[("lahar_workqueue_unacked", ())] == 1
    assert (got[("lahar_workqueue_timers", ())], got[("lahar_workqueue_timers_due", ())]) == (2, 1)
    assert got[("lahar_workqueue_redis_up", ())] == 1


def test_queue_depth_with_redis_away_says_so() -> None:
    import redis as redis_lib
    from prometheus_client import CollectorRegistry

    from tests.support import free_port

    away = redis_lib.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5, socket_timeout=0.5)
    reg = CollectorRegistry()
    reg.register(metrics.QueueDepth(away))
    got = _samples(reg)
    assert got == {("lahar_workqueue_redis_up", ()): 0}


def test_the_dispatcher_hands_every_event_to_its_hook() -> None:
    from lahar.dispatcher import Dispatcher

    seen: list[tuple[str, str]] = []
    d = Dispatcher(client=None, redis=_NoRedis(), send=lambda key: True,
                   on_event=lambda kind, event, obj, old: seen.append((kind, event)))
    d._on("Queue", "ADDED", {"metadata": {"name": "q1"}, "spec": {}})
    assert seen == [("Queue", "ADDED")]


class _NoRedis:
    """Enough of a Redis client for building a Dispatcher that never talks to it."""

    def register_script(self, script: str) -> Any:
        return lambda **_: None


def test_lahar_dispatch_serves_events_phases_stats_and_depth(redis_server: Any) -> None:
    import urllib.request

    from lahar.commands.controllers import _serve_dispatch_metrics
    from tests.support import free_port

    m = metrics.DispatchMetrics()
    m.observe("Job", "MODIFIED", _job("Completed"), _job("Running"))
    port = free_port()
    server = _serve_dispatch_metrics(port, FakeDispatcher(), m, redis_server.url)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    for series in ('volcano_job_completed_phase_count{job_name="ns1/j1",queue_name="q1"} 1.0',
                   'lahar_dispatch_enqueued_total{outcome="sent"} 2.0', "lahar_workqueue_redis_up 1.0",
                   'lahar_workqueue_depth{queue="reconcile"}'):
        assert series in text, series


def test_the_worker_metrics_dir_starts_empty_and_respects_a_given_one(tmp_path: Any) -> None:
    from lahar.commands.controllers import worker_metrics_dir

    first = worker_metrics_dir(9090, tmp=str(tmp_path))
    (tmp_path / "lahar-worker-metrics-9090" / "counter_123.db").write_bytes(b"stale")  # a crashed worker's files
    again = worker_metrics_dir(9090, tmp=str(tmp_path))
    assert again == first and not list((tmp_path / "lahar-worker-metrics-9090").iterdir())
    assert worker_metrics_dir(9090, given=str(tmp_path / "mine"), tmp=str(tmp_path)) == str(tmp_path / "mine")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lahar-worker-metrics-9090"]
