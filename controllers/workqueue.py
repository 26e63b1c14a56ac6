"""Work-queue semantics in Redis, between `lahar.dispatcher` (which enqueues) and `lahar.worker` (which reconciles).

client-go's workqueue, made durable and shared by many processes:

    pending  `lahar:pending:<key>` = task id, SET NX: a burst of events on one key sends one task; the task clears
             its own mark when it starts, so events during a reconcile send exactly one more (one or two in all).
    lock     `lahar:lock:<key>` = token, SET NX PX: one worker reconciles a key at a time. A task finding the key
             locked marks it `lahar:dirty:<key>` and returns; the holder re-enqueues on unlock (and a durable timer
             at the lock's expiry covers a holder that died).
    timers   `lahar:timers`, a sorted set (score = due time) the dispatcher polls: delays that must survive worker
             restarts. Celery countdowns longer than the broker's visibility timeout are redelivered again and
             again by the Redis transport, so anything long goes here.
    inbox    `lahar:inbox:<key>`, a Redis list of happenings a level view cannot recover (a pod was evicted).
    lease    `lahar:lease:<name>`: one active dispatcher (and one beat); the others wait as standby.

`retry_after(exc, attempt)` is the error taxonomy of `controllers.context` as a pure decision; `stale_marks(...)` is
the resync's repair of pending marks whose task was lost (a Redis crash: the mark survives in the append-only file,
the queued message does not), also a pure decision.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.controllers.context import PermanentError, TemporaryError
from lahar.kube import backoff, errors

__all__ = [
    "PREFIX",
    "Key",
    "Lease",
    "Mark",
    "RedisInbox",
    "RedisTimers",
    "WorkQueue",
    "connect",
    "retry_after",
    "stale_marks",
]

PREFIX = "lahar:"
INBOX_TTL = 7 * 24 * 3600


@dataclass(frozen=True, order=True)
class Key:
    """What one reconcile is about: (kind, namespace, name); namespace "" for cluster-scoped kinds (Queue)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Key:
        kind, namespace, name = text.split("/", 2)
        return cls(kind, namespace, name)


def connect(url: str) -> Any:
    """A `redis.Redis` for our keys: text replies, short timeouts, retried on connection errors (Redis restarts)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(
        url, decode_responses=True, socket_timeout=5, socket_connect_timeout=2, health_check_interval=10,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 8),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


# -- the error taxonomy as a decision ---------------------------------------------------------------------------


def retry_after(exc: BaseException, attempt: int, *, rng: Callable[[], float] = random.random,
                base: float = 0.5, cap: float = 300.0, max_retries: int | None = 15) -> float | None:
    """Seconds until the next try of a reconcile that raised `exc` on try number `attempt` (0 = first); None = give up.

    TemporaryError → its `delay`; Conflict (409) → a short jittered delay (re-read and go again); PermanentError →
    None; anything else → exponential backoff `base·2^attempt` capped at `cap`, with "equal jitter" (half fixed,
    half random), until `max_retries` (then the periodic resync is the next chance).
    """
    if isinstance(exc, PermanentError):
        return None
    if isinstance(exc, TemporaryError):
        return max(0.0, float(exc.delay))
    if isinstance(exc, errors.Conflict):
        return 0.05 + 0.2 * rng()
    if max_retries is not None and attempt >= max_retries:
        return None
    return backoff.delay(attempt, base=base, cap=cap, jitter="equal", rng=rng)


# -- stale pending marks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """A pending mark as the resync reads it: the task id it stands for and how long ago it was set (seconds)."""

    task_id: str
    age: float


def stale_marks(marks: Mapping[Key, Mark], *, queued: Collection[str], delivered: Mapping[str, float] | None = None,
                grace: float) -> list[Key]:
    """The keys whose pending mark a resync must repair, in key order.

    A mark is current while its task waits in the broker's queue (`queued`), or was delivered to a worker and not
    acknowledged for at most `grace` seconds (`delivered`: task id → seconds since delivery). It is stale when it is
    older than `grace` and its task is neither: the message was lost (a Redis crash kept the mark in the append-only
    file, or a claim's send failed while Redis was away), or it sits unacknowledged at a worker whose connection broke
    (Celery drops what it had reserved; the broker gives it back only after its visibility timeout, 300 s). A young
    mark without its message is an enqueue in progress, not a lost one. A repair at worst sends one extra, harmless
    reconcile (a worker holding a prefetched task longer than `grace` behind a slow one).
    """
    delivered = delivered or {}

    def current(task_id: str) -> bool:
        return task_id in queued or (task_id in delivered and delivered[task_id] <= grace)

    return sorted(key for key, mark in marks.items() if mark.age > grace and not current(mark.task_id))


# -- de-duplication and the per-key lock -------------------------------------------------------------------------

_COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return 0
"""

_UNLOCK = """
local mine = redis.call('GET', KEYS[1]) == ARGV[1]
if mine then redis.call('DEL', KEYS[1]) end
local dirty = redis.call('GET', KEYS[2])
if dirty then redis.call('DEL', KEYS[2]) end
if dirty then return 1 end
return 0
"""

_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


class WorkQueue:
    """De-duplication marks, per-key locks and counters for one Redis. All methods are single round trips."""

    def __init__(self, redis: Any, *, prefix: str = PREFIX, pending_ttl: float = 600.0, lock_ttl: float = 15.0) -> None:
        self.redis = redis
        self.prefix = prefix
        self.pending_ttl = pending_ttl
        self.lock_ttl = lock_ttl
        self._cad = redis.register_script(_COMPARE_AND_DELETE)
        self._lock = redis.register_script(_LOCK)
        self._unlock = redis.register_script(_UNLOCK)
        self._extend = redis.register_script(_EXTEND)

    def _k(self, what: str, key: Key) -> str:
        return f"{self.prefix}{what}:{key}"

    # pending ------------------------------------------------------------------------------------------------

    def claim(self, key: Key, task_id: str) -> bool:
        """True: no task for `key` is waiting, the caller sends one with `task_id`. False: one is already queued."""
        return bool(self.redis.set(self._k("pending", key), task_id, nx=True, px=int(self.pending_ttl * 1000)))

    def started(self, key: Key, task_id: str) -> None:
        """The task `task_id` starts (or its send failed): later events must send a new task."""
        self._cad(keys=[self._k("pending", key)], args=[task_id])

    unclaim = started

    def pending(self, key: Key) -> str | None:
        return self.redis.get(self._k("pending", key))

    def marks(self, keys: Iterable[Key]) -> dict[Key, Mark]:
        """The pending marks of `keys` that exist, with their age (`pending_ttl` minus the time to live left: Redis
        keeps expiry times absolute, in the append-only file too, so the age survives a Redis restart)."""
        keys = list(keys)
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.get(self._k("pending", key))
            pipe.pttl(self._k("pending", key))
        replies = pipe.execute()
        out: dict[Key, Mark] = {}
        for key, task_id, pttl in zip(keys, replies[::2], replies[1::2], strict=True):
            if task_id is not None:
                left = pttl / 1000.0 if pttl is not None and pttl >= 0 else self.pending_ttl
                out[key] = Mark(task_id, max(0.0, self.pending_ttl - left))
        return out

    # lock ---------------------------------------------------------------------------------------------------

    def lock(self, key: Key) -> str | None:
        """A token when this caller now holds the key; None when someone else does (the key is marked dirty)."""
        token = uuid.uuid4().hex
        ms = int(self.lock_ttl * 1000)
        got = self._lock(keys=[self._k("lock", key), self._k("dirty", key)], args=[token, ms, ms * 2])
        return token if got else None

    def unlock(self, key: Key, token: str) -> bool:
        """Release; True when another task found the key locked meanwhile (the caller enqueues it again)."""
        return bool(self._unlock(keys=[self._k("lock", key), self._k("dirty", key)], args=[token]))

    def extend(self, key: Key, token: str) -> bool:
        """Keep holding `key` another `lock_ttl` (a heartbeat while a reconcile runs); False when it was lost."""
        return bool(self._extend(keys=[self._k("lock", key)], args=[token, int(self.lock_ttl * 1000)]))

    def lock_ttl_left(self, key: Key) -> float:
        ms = self.redis.pttl(self._k("lock", key))
        return max(0.0, ms / 1000.0) if ms and ms > 0 else 0.0

    # counters (bench, `lahar` status) -----------------------------------------------------------------------

    def count(self, field: str, n: int = 1) -> None:
        self.redis.hincrby(f"{self.prefix}stats", field, n)

    def count_many(self, counts: dict[str, int]) -> None:
        """`count` for several fields in one round trip (a reconcile's counters together)."""
        counts = {k: n for k, n in counts.items() if n}
        if not counts:
            return
        if len(counts) == 1:
            self.count(*next(iter(counts.items())))
            return
        pipe = self.redis.pipeline(transaction=False)
        for field, n in counts.items():
            pipe.hincrby(f"{self.prefix}stats", field, n)
        pipe.execute()

    def stats(self) -> dict[str, int]:
        return {k: int(v) for k, v in (self.redis.hgetall(f"{self.prefix}stats") or {}).items()}


# -- durable timers ----------------------------------------------------------------------------------------------

_POP_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due > 0 then redis.call('ZREM', KEYS[1], unpack(due)) end
return due
"""


class RedisTimers:
    """`controllers.context.Timers` in a Redis sorted set; `due()` (the dispatcher) pops what is due atomically."""

    def __init__(self, redis: Any, *, prefix: str = PREFIX, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.zset = f"{prefix}timers"
        self.clock = clock
        self._pop = redis.register_script(_POP_DUE)

    @staticmethod
    def _member(kind: str, namespace: str, name: str, token: str) -> str:
        return json.dumps([kind, namespace, name, token], separators=(",", ":"))

    def after(self, delay: float, kind: str, namespace: str, name: str, *, token: str = "") -> None:
        """Reconcile in `delay` seconds; a second `after` with the same token replaces the first (like MemoryTimers)."""
        self.redis.zadd(self.zset, {self._member(kind, namespace, name, token): self.clock() + max(0.0, delay)})

    def cancel(self, kind: str, namespace: str, name: str, *, token: str = "") -> None:
        self.redis.zrem(self.zset, self._member(kind, namespace, name, token))

    def when(self, kind: str, namespace: str, name: str, *, token: str = "") -> float | None:
        """The due time (epoch seconds) of one timer, None when there is none."""
        return self.redis.zscore(self.zset, self._member(kind, namespace, name, token))

    def due(self, now: float | None = None, *, limit: int = 1000) -> list[Key]:
        """Pop every timer due at `now` (one Key per object even with several tokens), in key order."""
        members = self._pop(keys=[self.zset], args=[self.clock() if now is None else now, limit])
        return sorted({Key(*json.loads(m)[:3]) for m in members or []})

    def __len__(self) -> int:
        return int(self.redis.zcard(self.zset))


# -- inbox -------------------------------------------------------------------------------------------------------


class RedisInbox:
    """`controllers.context.Inbox` as one Redis list per key (RPUSH / LRANGE / LTRIM); items expire after a week."""

    def __init__(self, redis: Any, *, prefix: str = PREFIX, ttl: int = INBOX_TTL) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl = ttl

    def _k(self, kind: str, namespace: str, name: str) -> str:
        return f"{self.prefix}inbox:{Key(kind, namespace, name)}"

    def push(self, kind: str, namespace: str, name: str, item: dict[str, Any]) -> None:
        k = self._k(kind, namespace, name)
        pipe = self.redis.pipeline()
        pipe.rpush(k, json.dumps(item, separators=(",", ":"), sort_keys=True))
        pipe.expire(k, self.ttl)
        pipe.execute()

    def peek(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.redis.lrange(self._k(kind, namespace, name), 0, -1)]

    def ack(self, kind: str, namespace: str, name: str, count: int) -> None:
        if count > 0:
            self.redis.ltrim(self._k(kind, namespace, name), count, -1)


# -- leases ------------------------------------------------------------------------------------------------------

_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""


class Lease:
    """A leader lease: `acquire()` takes a vacant lease or renews ours (call it every ttl/3); `release()` hands over.

    A vacant lease (holder gone, or Redis restarted empty) is taken by whoever asks first, the holder included.
    """

    def __init__(self, redis: Any, name: str, *, identity: str | None = None, ttl: float = 15.0,
                 prefix: str = PREFIX) -> None:
        self.redis = redis
        self.key = f"{prefix}lease:{name}"
        self.identity = identity or uuid.uuid4().hex
        self.ttl = ttl
        self._acquire = redis.register_script(_ACQUIRE)
        self._cad = redis.register_script(_COMPARE_AND_DELETE)

    def acquire(self) -> bool:
        return bool(self._acquire(keys=[self.key], args=[self.identity, int(self.ttl * 1000)]))

    def release(self) -> None:
        self._cad(keys=[self.key], args=[self.identity])

    def holder(self) -> str | None:
        return self.redis.get(self.key)
