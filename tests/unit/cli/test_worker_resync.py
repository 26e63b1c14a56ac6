"""`lahar.worker`'s resync repair of stale pending marks against a real redis-server: what the broker holds
(queued and unacknowledged task ids) and the replacement of a mark whose message a Redis crash lost."""

from __future__ import annotations

import json

import pytest
from celery import Celery

from lahar import worker
from lahar.controllers import workqueue
from lahar.controllers.workqueue import Key
from lahar.settings import Settings

K = Key("Job", "ns", "j")
DB = 7  # a db of our own on the shared test server


@pytest.fixture
def url(redis_server) -> str:
    return redis_server.url.rsplit("/", 1)[0] + f"/{DB}"


@pytest.fixture
def rt(url):
    r = workqueue.connect(url)
    r.flushdb()
    s = Settings(pending_ttl=60.0, pending_grace=5.0)
    yield worker.Runtime(settings=s, redis=r, wq=workqueue.WorkQueue(r, pending_ttl=60.0),
                         timers=workqueue.RedisTimers(r), inbox=workqueue.RedisInbox(r))
    r.flushdb()
    r.close()


def _publish(url: str, task_id: str, *, priority: int | None = None) -> None:
    app = Celery("t", broker=url)
    with app.connection_for_write() as conn:
        app.send_task("lahar.reconcile", args=("Job", "ns", "j"), task_id=task_id, queue="reconcile",
                      connection=conn, priority=priority)


def test_broker_task_ids_sees_waiting_and_delivered_tasks(rt, url) -> None:
    _publish(url, "waiting-1")
    _publish(url, "waiting-9", priority=9)
    message = {"body": "", "headers": {"id": "delivered-1", "task": "lahar.reconcile"}, "properties": {}}
    rt.redis.hset("unacked", "tag-1", json.dumps([message, "", "reconcile"]))
    rt.redis.zadd("unacked_index", {"tag-1": 1000.0})
    rt.redis.hset("unacked", "tag-2", "not json")
    assert worker.broker_task_ids(rt.redis, now=1030.0) == ({"waiting-1", "waiting-9"}, {"delivered-1": 30.0})


def _old_mark(rt, task_id: str, age: float) -> None:
    assert rt.wq.claim(K, task_id)
    rt.redis.pexpire(f"{workqueue.PREFIX}pending:{K}", int((60.0 - age) * 1000))


def test_a_mark_whose_message_was_lost_is_replaced(rt, monkeypatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(worker.reconcile, "apply_async", lambda args, task_id, queue: sent.append(task_id))
    _old_mark(rt, "lost", age=20.0)
    assert worker.repair_stale_marks(rt, [K]) == 1
    assert len(sent) == 1 and rt.wq.pending(K) == sent[0] != "lost"
    assert rt.wq.stats()["repaired"] == 1
    assert worker.repair_stale_marks(rt, [K]) == 0  # the new mark is young: left alone


def test_a_mark_whose_task_waits_unacked_since_before_a_restart_is_replaced(rt, monkeypatch) -> None:
    """Celery drops what it had reserved when its broker connection breaks; the message stays in `unacked` until
    the visibility timeout (300 s) gives it back, and its mark would block the key meanwhile."""
    import time

    sent: list[str] = []
    monkeypatch.setattr(worker.reconcile, "apply_async", lambda args, task_id, queue: sent.append(task_id))
    _old_mark(rt, "reserved", age=40.0)
    message = {"body": "", "headers": {"id": "reserved"}, "properties": {}}
    rt.redis.hset("unacked", "tag-1", json.dumps([message, "", "reconcile"]))
    rt.redis.zadd("unacked_index", {"tag-1": time.time() - 1.0})
    assert worker.repair_stale_marks(rt, [K]) == 0  # just delivered: a worker is on it
    rt.redis.zadd("unacked_index", {"tag-1": time.time() - 35.0})
    assert worker.repair_stale_marks(rt, [K]) == 1 and rt.wq.pending(K) == sent[0]


def test_a_mark_whose_task_is_queued_or_young_is_kept(rt, url, monkeypatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(worker.reconcile, "apply_async", lambda args, task_id, queue: sent.append(task_id))
    _old_mark(rt, "queued", age=20.0)
    _publish(url, "queued")
    assert worker.repair_stale_marks(rt, [K]) == 0
    rt.redis.flushdb()
    _old_mark(rt, "young", age=1.0)
    assert worker.repair_stale_marks(rt, [K]) == 0
    assert sent == [] and rt.wq.pending(K) == "young"
