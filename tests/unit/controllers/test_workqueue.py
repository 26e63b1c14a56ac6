"""controllers.workqueue against a real redis-server: dedup, per-key lock, durable timers, inbox, lease, taxonomy."""

from __future__ import annotations

import threading
import uuid

import pytest

from lahar.controllers import workqueue
from lahar.controllers.context import PermanentError, TemporaryError
from lahar.controllers.workqueue import Key
from lahar.kube import errors

K = Key("Job", "ns", "j")


@pytest.fixture
def redis(redis_server):
    r = workqueue.connect(redis_server.url)
    yield r
    r.close()


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}:"


@pytest.fixture
def wq(redis, prefix) -> workqueue.WorkQueue:
    return workqueue.WorkQueue(redis, prefix=prefix, pending_ttl=30, lock_ttl=5)


def test_key_round_trip() -> None:
    key = Key("Queue", "", "root")
    assert str(key) == "Queue//root" and Key.parse(str(key)) == key
    assert Key.parse("Job/ns/a/b") == Key("Job", "ns", "a/b")


def test_a_burst_claims_once_and_the_start_reopens(wq) -> None:
    assert [wq.claim(K, f"t{i}") for i in range(5)] == [True, False, False, False, False]
    assert wq.pending(K) == "t0"
    wq.started(K, "t9")  # someone else's start does not clear our mark
    assert wq.pending(K) == "t0"
    wq.started(K, "t0")
    assert wq.pending(K) is None
    assert wq.claim(K, "t10")  # an event during the reconcile sends exactly one more
    assert not wq.claim(K, "t11")
    assert wq.claim(Key("Job", "ns", "other"), "t12")


def test_pending_mark_expires(redis, prefix) -> None:
    q = workqueue.WorkQueue(redis, prefix=prefix, pending_ttl=0.05)
    assert q.claim(K, "a")
    redis.pexpire(f"{prefix}pending:{K}", 1)
    import time

    time.sleep(0.01)
    assert q.claim(K, "b")


def test_lock_is_exclusive_and_a_blocked_task_marks_dirty(wq) -> None:
    token = wq.lock(K)
    assert token
    assert wq.lock(K) is None          # a second task finds it held → dirty
    assert 0 < wq.lock_ttl_left(K) <= 5
    assert wq.unlock(K, token) is True  # the holder learns it must enqueue again
    t2 = wq.lock(K)
    assert t2 and wq.unlock(K, t2) is False  # nobody waited this time
    assert wq.lock_ttl_left(K) == 0


def test_unlock_with_a_stale_token_keeps_the_new_holders_lock(wq, redis, prefix) -> None:
    old = wq.lock(K)
    redis.delete(f"{prefix}lock:{K}")  # the old holder's lock lapsed
    new = wq.lock(K)
    assert new and new != old
    wq.unlock(K, old)
    assert wq.lock(K) is None
    assert wq.extend(K, new) and not wq.extend(K, old)


def test_lock_under_contention_admits_one_at_a_time(wq) -> None:
    inside, overlaps, done = [0], [0], []
    mu = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            token = wq.lock(K)
            if token is None:
                continue
            with mu:
                inside[0] += 1
                overlaps[0] = max(overlaps[0], inside[0])
            with mu:
                inside[0] -= 1
            wq.unlock(K, token)
            done.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps[0] == 1 and done


def test_timers_pop_when_due_once_per_key(redis, prefix) -> None:
    now = [1000.0]
    timers = workqueue.RedisTimers(redis, prefix=prefix, clock=lambda: now[0])
    timers.after(10, "Job", "ns", "a", token="policy")
    timers.after(5, "Job", "ns", "a", token="requeue")
    timers.after(30, "CronJob", "ns", "c")
    timers.after(20, "Job", "ns", "b")
    timers.after(25, "Job", "ns", "b")  # same token: replaces
    assert timers.due() == []
    now[0] = 1010.0
    assert timers.due() == [Key("Job", "ns", "a")]
    assert timers.due() == []           # popped: never twice
    timers.cancel("CronJob", "ns", "c")
    assert timers.when("Job", "ns", "b") == 1025.0
    assert timers.due(1100.0) == [Key("Job", "ns", "b")]
    assert len(timers) == 0


def test_inbox_peek_ack_keeps_what_came_later(redis, prefix) -> None:
    inbox = workqueue.RedisInbox(redis, prefix=prefix)
    inbox.push("Job", "ns", "j", {"event": "PodEvicted", "pod": "p0"})
    inbox.push("Job", "ns", "j", {"event": "PodFailed", "pod": "p1", "exitCode": 1})
    seen = inbox.peek("Job", "ns", "j")
    assert [i["event"] for i in seen] == ["PodEvicted", "PodFailed"]
    inbox.push("Job", "ns", "j", {"event": "Unknown"})  # arrives while the reconciler acts
    inbox.ack("Job", "ns", "j", len(seen))
    assert inbox.peek("Job", "ns", "j") == [{"event": "Unknown"}]
    assert inbox.peek("Job", "ns", "other") == []
    assert redis.ttl(f"{prefix}inbox:Job/ns/j") > 0


def test_lease_one_holder_standby_takes_over(redis, prefix) -> None:
    a = workqueue.Lease(redis, "dispatcher", identity="a", ttl=5, prefix=prefix)
    b = workqueue.Lease(redis, "dispatcher", identity="b", ttl=5, prefix=prefix)
    assert a.acquire() and not b.acquire()
    assert a.acquire()  # renewal
    assert a.holder() == "a"
    a.release()
    assert b.acquire() and not a.acquire()
    redis.delete(b.key)  # Redis restarted empty: whoever asks first holds it again
    assert b.acquire()


def test_counters(wq) -> None:
    wq.count("reconciles")
    wq.count("reconciles", 2)
    assert wq.stats()["reconciles"] == 3


@pytest.mark.parametrize(("exc", "attempt", "want"), [
    (TemporaryError("later", delay=7), 0, 7.0),
    (TemporaryError("later", delay=7), 40, 7.0),
    (PermanentError("bad spec"), 0, None),
    (errors.Conflict("stale"), 0, 0.15),
    (RuntimeError("boom"), 0, 0.375),
    (RuntimeError("boom"), 3, 3.0),
    (RuntimeError("boom"), 14, 225.0),
    (RuntimeError("boom"), 15, None),
    (errors.ServiceUnavailable("down"), 2, 1.5),
], ids=["temporary", "temporary-ignores-attempts", "permanent", "conflict-short", "unknown-first",
        "unknown-fourth", "unknown-capped", "unknown-gives-up", "api-unavailable"])
def test_retry_after(exc, attempt, want) -> None:
    assert workqueue.retry_after(exc, attempt, rng=lambda: 0.5) == (want if want is None else pytest.approx(want))


def test_retry_after_jitter_stays_in_the_upper_half() -> None:
    for attempt in range(10):
        ceiling = min(300.0, 0.5 * 2 ** attempt)
        lo = workqueue.retry_after(RuntimeError(), attempt, rng=lambda: 0.0)
        hi = workqueue.retry_after(RuntimeError(), attempt, rng=lambda: 0.999999)
        assert lo == ceiling / 2 and ceiling / 2 < hi < ceiling + 1e-9


# -- stale pending marks (a Redis crash kept the mark, lost the message) -----------------------------------------

A, B = Key("Job", "ns", "a"), Key("Job", "ns", "b")


@pytest.mark.parametrize(("marks", "queued", "delivered", "want"), [
    ({A: workqueue.Mark("t1", 30.0)}, set(), {}, [A]),
    ({A: workqueue.Mark("t1", 30.0)}, {"t1"}, {}, []),
    ({A: workqueue.Mark("t1", 30.0)}, set(), {"t1": 1.0}, []),
    ({A: workqueue.Mark("t1", 30.0)}, set(), {"t1": 5.0}, []),
    ({A: workqueue.Mark("t1", 30.0)}, set(), {"t1": 25.0}, [A]),
    ({A: workqueue.Mark("t1", 30.0)}, {"t1"}, {"t1": 25.0}, []),
    ({A: workqueue.Mark("t1", 2.0)}, set(), {}, []),
    ({A: workqueue.Mark("t1", 5.0)}, set(), {}, []),
    ({A: workqueue.Mark("t1", 30.0)}, {"t0"}, {"t2": 1.0}, [A]),
    ({B: workqueue.Mark("t2", 9.0), A: workqueue.Mark("t1", 9.0)}, {"t2"}, {}, [A]),
    ({B: workqueue.Mark("t2", 9.0), A: workqueue.Mark("t1", 9.0)}, set(), {}, [A, B]),
    ({}, {"t1"}, {}, []),
], ids=["lost-message", "waiting-in-the-queue", "just-delivered-to-a-worker", "delivered-exactly-grace-ago",
        "delivered-long-ago-to-a-worker-whose-connection-broke", "queued-again-after-a-restore",
        "young-enqueue-in-progress", "exactly-grace-is-young", "other-tasks-are-not-it", "only-the-lost-one",
        "all-lost-in-key-order", "no-marks"])
def test_stale_marks(marks, queued, delivered, want) -> None:
    assert workqueue.stale_marks(marks, queued=queued, delivered=delivered, grace=5.0) == want


def test_marks_read_their_age_from_the_time_to_live(wq, redis, prefix) -> None:
    assert wq.claim(A, "t1")                       # pending_ttl 30 s
    redis.pexpire(f"{prefix}pending:{A}", 18_000)  # as if set 12 s ago
    marks = wq.marks([A, B])
    assert list(marks) == [A] and marks[A].task_id == "t1"
    assert 11.5 < marks[A].age < 12.5


def test_count_many_adds_every_field_in_one_go(wq) -> None:
    wq.count("reconciles")
    wq.count_many({"reconciles": 1, "reconcile:Job": 1, "cache:hits": 3, "cache:misses": 0})
    wq.count_many({"retries": 1})
    wq.count_many({})
    stats = wq.stats()
    assert {k: stats.get(k) for k in ("reconciles", "reconcile:Job", "cache:hits", "retries", "cache:misses")} == {
        "reconciles": 2, "reconcile:Job": 1, "cache:hits": 3, "retries": 1, "cache:misses": None}
