"""lahar dispatch notes, per Job and kind, the newest resourceVersion it routed to that Job, in Redis before the task
is sent: the worker's read cache (`controllers.caches`) must have reached it before it serves that Job's reads."""

from __future__ import annotations

import threading
from typing import Any

from lahar.controllers import caches, dispatch, workqueue
from lahar.controllers.workqueue import Key
from lahar.dispatcher import Dispatcher


class _Redis:
    """The calls the sender makes, in order; `fail` makes the next pipeline fail once."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.hashes: dict[str, dict[str, str]] = {}
        self.fail = False

    def register_script(self, script: str) -> Any:
        return lambda **_: None

    def pipeline(self) -> Any:
        redis = self

        class Pipe:
            def __init__(self) -> None:
                self.ops: list[tuple[Any, ...]] = []

            def hset(self, name: str, mapping: dict[str, str]) -> None:
                self.ops.append(("hset", name, dict(mapping)))

            def expire(self, name: str, ttl: int) -> None:
                self.ops.append(("expire", name, ttl))

            def rpush(self, *a: Any) -> None:
                self.ops.append(("rpush", *a))

            def execute(self) -> None:
                if redis.fail:
                    redis.fail = False
                    raise ConnectionError("redis away")
                for op in self.ops:
                    redis.log.append(op)
                    if op[0] == "hset":
                        redis.hashes.setdefault(op[1], {}).update(op[2])
        return Pipe()


def _pod(rv: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "j1-w-0", "namespace": "ns", "uid": "u1", "resourceVersion": rv,
                         "annotations": {"volcano.sh/job-name": "j1", "volcano.sh/task-spec": "w",
                                         "volcano.sh/job-version": "0"}},
            "status": {"phase": phase}}


class _Stop(threading.Event):
    def wait(self, timeout: float | None = None) -> bool:
        return self.is_set()


def test_the_routed_versions_reach_redis_before_the_task() -> None:
    redis = _Redis()
    order: list[str] = []
    stop = _Stop()

    def send(key: Key) -> bool:
        order.append(f"send {key}")
        redis.log.append(("send", str(key)))
        stop.set()
        return True

    d = Dispatcher(client=None, redis=redis, send=send)
    d._on("Pod", dispatch.MODIFIED, _pod("41", "Running"), _pod("40", "Pending"))
    d._on("Pod", dispatch.MODIFIED, _pod("42", "Succeeded"), _pod("41", "Running"))
    redis.fail = True  # the first attempt fails: the versions are kept for the retry
    d._send_loop(stop)
    name = caches.seen_key(workqueue.PREFIX, "ns", "j1")
    assert redis.hashes[name] == {"Pod": "42"}
    assert order == ["send Job/ns/j1"]
    verbs = [op[0] for op in redis.log]
    assert verbs.index("hset") < verbs.index("send")


def _pg(rv: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "j1-u1", "namespace": "ns", "uid": "g1", "resourceVersion": rv,
                         "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j1",
                                              "uid": "u1", "controller": True}]},
            "spec": {"queue": "q1", "minMember": 1}, "status": {"phase": phase}}


def test_a_podgroup_version_routed_to_its_queue_is_noted_for_the_queue_too() -> None:
    redis = _Redis()
    stop = _Stop()
    sent: list[str] = []

    def send(key: Key) -> bool:
        sent.append(str(key))
        if len(sent) == 2:
            stop.set()
        return True

    d = Dispatcher(client=None, redis=redis, send=send)
    d._on("PodGroup", dispatch.MODIFIED, _pg("51", "Inqueue"), _pg("50", "Pending"))
    d._send_loop(stop)
    assert sorted(sent) == ["Job/ns/j1", "Queue//q1"]
    assert redis.hashes[caches.seen_key(workqueue.PREFIX, "", "q1", "Queue")] == {"PodGroup": "51"}
    assert redis.hashes[caches.seen_key(workqueue.PREFIX, "ns", "j1")] == {"PodGroup": "51"}
