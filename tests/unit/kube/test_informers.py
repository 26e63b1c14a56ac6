"""Informers over MemoryClient: list + watch into a store, handlers, indexes, resume, relist on Gone, factory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lahar.kube import errors, informers
from lahar.kube.apiserver import memory, store
from lahar.kube.client import Obj
from lahar.kube.resources import core

_TYPES = {rt.plural: rt for rt in core() if rt.group == ""}
CM = _TYPES["configmaps"]
NS = _TYPES["namespaces"]
FAST = {"backoff": (0.01, 0.05)}


def new_client(**store_options: Any) -> Any:
    return memory.MemoryClient(store.Store(**store_options))


def cm(name: str, *, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": dict(labels or {})},
            "data": dict(data or {})}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        out = check()
        if out:
            return out
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


class Recorder:
    """Handler log as (event, name) tuples."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def attach(self, inf: informers.Informer) -> None:
        inf.add_handler(on_add=lambda o: self._rec("add", o), on_update=lambda old, new: self._rec("update", new),
                        on_delete=lambda o: self._rec("delete", o))

    def _rec(self, kind: str, obj: Obj) -> None:
        with self._lock:
            self.log.append((kind, obj["metadata"]["name"]))

    def snapshot(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.log)


class Flaky:
    """Wraps a client: `cut()` breaks open watches and refuses new ones; `heal(gone=...)` reconnects."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.registry = inner.registry
        self._down = False
        self._gone_next = False
        self._watches: list[Any] = []
        self.watch_calls: list[str | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def watch(self, rt: Any, **kw: Any) -> Any:
        self.watch_calls.append(kw.get("resource_version"))
        if self._down:
            raise errors.ServiceUnavailable("connection refused")
        if self._gone_next:
            self._gone_next = False
            raise errors.Gone(f"too old resource version: {kw.get('resource_version')}")
        w = self.inner.watch(rt, **kw)
        self._watches.append(w)
        return w

    def cut(self) -> None:
        self._down = True
        for w in self._watches:
            w.stop()
        self._watches.clear()

    def heal(self, *, gone: bool) -> None:
        self._gone_next = gone
        self._down = False


@pytest.fixture
def client() -> Iterator[Any]:
    c = new_client()
    c.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    yield c
    close = getattr(c, "close", None)
    if close:
        close()


@pytest.fixture
def no_leaked_threads() -> Iterator[None]:
    before = {t.ident for t in threading.enumerate()}
    yield
    leaked = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("informer-")
              and t.is_alive()]
    assert not leaked, f"informer threads left running: {leaked}"


def test_initial_list_fills_the_store(client: Any, no_leaked_threads: None) -> None:
    client.create(CM, cm("a"), namespace="default")
    client.create(CM, cm("b"), namespace="other")
    with informers.Informer(client, CM, **FAST) as inf:
        assert inf.wait_for_sync(10)
        assert inf.has_synced()
        assert sorted(inf.keys()) == ["default/a", "other/b"]
        assert inf.get("default", "a")["metadata"]["name"] == "a"
        assert inf.get("default", "b") is None
        assert [o["metadata"]["name"] for o in inf.list("other")] == ["b"]


def _ops_create(c: Any) -> None:
    c.create(CM, cm("x"), namespace="default")


def _ops_update(c: Any) -> None:
    c.create(CM, cm("x"), namespace="default")
    c.patch(CM, "x", {"data": {"k": "v"}}, namespace="default")


def _ops_delete(c: Any) -> None:
    c.create(CM, cm("x"), namespace="default")
    c.delete(CM, "x", namespace="default")


def _ops_churn(c: Any) -> None:
    c.create(CM, cm("x"), namespace="default")
    c.create(CM, cm("y"), namespace="default")
    c.patch(CM, "y", {"data": {"k": "v"}}, namespace="default")
    c.delete(CM, "x", namespace="default")


@pytest.mark.parametrize(
    ("ops", "expected_log", "expected_keys"),
    [
        (_ops_create, [("add", "x")], ["default/x"]),
        (_ops_update, [("add", "x"), ("update", "x")], ["default/x"]),
        (_ops_delete, [("add", "x"), ("delete", "x")], []),
        (_ops_churn, [("add", "x"), ("add", "y"), ("update", "y"), ("delete", "x")], ["default/y"]),
    ],
    ids=["create", "update", "delete", "churn"],
)
def test_watch_events_reach_store_and_handlers(client: Any, no_leaked_threads: None, ops: Callable[[Any], None],
                                               expected_log: list[tuple[str, str]], expected_keys: list[str]) -> None:
    rec = Recorder()
    with informers.Informer(client, CM, **FAST) as inf:
        rec.attach(inf)
        assert inf.wait_for_sync(10)
        ops(client)
        wait_for(lambda: len(rec.snapshot()) >= len(expected_log), "handler calls")
        assert rec.snapshot() == expected_log
        assert inf.keys() == expected_keys
        if expected_keys:
            live = client.get(CM, "y" if "default/y" in expected_keys else "x", namespace="default")
            cached = inf.get("default", live["metadata"]["name"])
            wait_for(lambda: inf.get("default", live["metadata"]["name"])["metadata"]["resourceVersion"]
                     == live["metadata"]["resourceVersion"], "cache to catch up")
            assert cached is not None


def test_handler_added_late_gets_existing_objects_replayed(client: Any, no_leaked_threads: None) -> None:
    client.create(CM, cm("a"), namespace="default")
    with informers.Informer(client, CM, **FAST) as inf:
        assert inf.wait_for_sync(10)
        rec = Recorder()
        rec.attach(inf)
        assert rec.snapshot() == [("add", "a")]


def test_failing_handler_does_not_stop_the_informer(client: Any, no_leaked_threads: None) -> None:
    rec = Recorder()
    with informers.Informer(client, CM, **FAST) as inf:
        inf.on_add(lambda o: 1 / 0)
        rec.attach(inf)
        assert inf.wait_for_sync(10)
        client.create(CM, cm("a"), namespace="default")
        client.create(CM, cm("b"), namespace="default")
        wait_for(lambda: len(rec.snapshot()) == 2, "both adds")


@pytest.mark.parametrize(
    ("namespace", "selector", "expected"),
    [
        (None, None, ["default/a", "default/b", "other/c"]),
        ("default", None, ["default/a", "default/b"]),
        (None, "app=web", ["default/a", "other/c"]),
        ("other", "app=web", ["other/c"]),
    ],
    ids=["all", "namespace", "selector", "namespace+selector"],
)
def test_scoped_informers(client: Any, no_leaked_threads: None, namespace: str | None, selector: str | None,
                          expected: list[str]) -> None:
    client.create(CM, cm("a", labels={"app": "web"}), namespace="default")
    client.create(CM, cm("b", labels={"app": "db"}), namespace="default")
    with informers.Informer(client, CM, namespace=namespace, label_selector=selector, **FAST) as inf:
        assert inf.wait_for_sync(10)
        client.create(CM, cm("c", labels={"app": "web"}), namespace="other")
        wait_for(lambda: inf.keys() == expected, f"keys {expected}")
        # label change moves an object out of a selector informer
        client.patch(CM, "a", {"metadata": {"labels": {"app": "gone"}}}, namespace="default")
        want = [k for k in expected if not (selector and k == "default/a")]
        wait_for(lambda: inf.keys() == want, f"keys {want}")


def test_indexes_follow_updates_and_deletes(client: Any, no_leaked_threads: None) -> None:
    client.create(CM, cm("a", labels={"team": "red"}), namespace="default")
    client.create(CM, cm("b", labels={"team": "blue"}), namespace="other")
    with informers.Informer(client, CM, **FAST) as inf:
        assert inf.wait_for_sync(10)
        inf.add_index("namespace", informers.namespace_index)
        inf.add_index("team", lambda o: (o["metadata"].get("labels") or {}).get("team"))
        assert [o["metadata"]["name"] for o in inf.by_index("namespace", "other")] == ["b"]
        assert [o["metadata"]["name"] for o in inf.by_index("team", "red")] == ["a"]
        client.patch(CM, "a", {"metadata": {"labels": {"team": "blue"}}}, namespace="default")
        wait_for(lambda: len(inf.by_index("team", "blue")) == 2, "reindex on label change")
        assert inf.by_index("team", "red") == []
        assert inf.index_values("team") == ["blue"]
        client.delete(CM, "b", namespace="other")
        wait_for(lambda: inf.by_index("namespace", "other") == [], "unindex on delete")
        assert [o["metadata"]["name"] for o in inf.by_index("team", "blue")] == ["a"]
        with pytest.raises(ValueError):
            inf.add_index("team", informers.namespace_index)
        with pytest.raises(KeyError):
            inf.by_index("nope", "x")


def _disconnected_changes(c: Any) -> None:
    c.delete(CM, "a", namespace="default")
    c.patch(CM, "b", {"data": {"k": "changed"}}, namespace="default")
    c.create(CM, cm("c"), namespace="default")


@pytest.mark.parametrize(
    ("gone", "relists"),
    [(False, 1), (True, 2)],
    ids=["resume-from-rv", "gone-relists"],
)
def test_reconnect_reconciles_changes_made_while_away(client: Any, no_leaked_threads: None, gone: bool,
                                                      relists: int) -> None:
    flaky = Flaky(client)
    client.create(CM, cm("a"), namespace="default")
    client.create(CM, cm("b"), namespace="default")
    rec = Recorder()
    with informers.Informer(flaky, CM, **FAST) as inf:
        rec.attach(inf)
        assert inf.wait_for_sync(10)
        wait_for(lambda: len(flaky._watches) == 1, "first watch")
        flaky.cut()
        _disconnected_changes(client)
        wait_for(lambda: len(flaky.watch_calls) >= 3, "reconnect attempts during the outage")
        flaky.heal(gone=gone)
        wait_for(lambda: inf.keys() == ["default/b", "default/c"], "store to reconcile")
        wait_for(lambda: len(rec.snapshot()) >= 5, "handlers for the missed changes")
        assert inf.get("default", "b")["data"] == {"k": "changed"}
        assert sorted(rec.snapshot()[2:]) == [("add", "c"), ("delete", "a"), ("update", "b")]
        assert inf.relists == relists
        client.create(CM, cm("d"), namespace="default")
        wait_for(lambda: inf.get("default", "d") is not None, "watch to continue after reconnect")


def test_engine_gone_relists(no_leaked_threads: None) -> None:
    """A real expired resourceVersion from the engine (tiny history) makes the informer relist."""
    client = new_client(history=3)
    flaky = Flaky(client)
    for n in ("a", "b"):
        client.create(CM, cm(n), namespace="default")
    rec = Recorder()
    with informers.Informer(flaky, CM, **FAST) as inf:
        rec.attach(inf)
        assert inf.wait_for_sync(10)
        wait_for(lambda: len(flaky._watches) == 1, "first watch")
        flaky.cut()
        client.delete(CM, "a", namespace="default")
        for i in range(10):
            client.patch(CM, "b", {"data": {"i": str(i)}}, namespace="default")
        flaky.heal(gone=False)  # the engine itself answers Gone for the stale version
        wait_for(lambda: inf.relists == 2, "relist after Gone")
        wait_for(lambda: inf.keys() == ["default/b"], "deletion missed while away to be reconciled")
        assert inf.get("default", "b")["data"] == {"i": "9"}
        assert ("delete", "a") in rec.snapshot()


def test_resync_replays_updates(client: Any, no_leaked_threads: None) -> None:
    client.create(CM, cm("a"), namespace="default")
    seen: list[tuple[str, str]] = []
    with informers.Informer(client, CM, resync=0.02, **FAST) as inf:
        inf.on_update(lambda old, new: seen.append((old["metadata"]["name"], new["metadata"]["name"])))
        assert inf.wait_for_sync(10)
        wait_for(lambda: len(seen) >= 2, "resync updates")
        assert set(seen) == {("a", "a")}


def test_stop_joins_the_thread(client: Any) -> None:
    inf = informers.Informer(client, CM, **FAST).start()
    assert inf.wait_for_sync(10)
    threads = list(inf._threads)
    inf.stop()
    assert not any(t.is_alive() for t in threads)


def test_factory_shares_one_informer_per_key(client: Any, no_leaked_threads: None) -> None:
    with informers.InformerFactory(client, **FAST) as factory:
        a = factory.informer(CM)
        assert factory.informer(CM) is a
        b = factory.informer(CM, namespace="default")
        c = factory.informer(CM, label_selector="app=web")
        ns_inf = factory.informer(NS, namespace="ignored-for-cluster-scope")
        assert len({id(a), id(b), id(c), id(ns_inf)}) == 4
        assert factory.informer(NS) is ns_inf
        factory.start()
        assert factory.wait_for_sync(10)
        assert all(i.has_synced() for i in factory.informers())
        assert {"default", "other"} <= {o["metadata"]["name"] for o in ns_inf.list()}


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "a", "namespace": "ns"}}, "ns/a"),
        ({"metadata": {"name": "node-1"}}, "node-1"),
    ],
    ids=["namespaced", "cluster-scoped"],
)
def test_key_of(obj: Obj, key: str) -> None:
    assert informers.key_of(obj) == key


class _DownClient:
    """An API server that is away: every list fails."""

    def list(self, *args: Any, **kwargs: Any) -> Obj:
        raise ConnectionError("connection refused")


class _RecordingStop(threading.Event):
    """The informer's stop event with fake time: records each backoff wait and stops after `limit` of them."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.limit = limit

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        if len(self.waits) >= self.limit:
            self.set()
        return self.is_set()


def _reconnect_delays(rng: Callable[[], float], limit: int = 6) -> list[float]:
    inf = informers.Informer(_DownClient(), CM, backoff=(0.2, 3.2), rng=rng)  # type: ignore[arg-type]
    inf._stopping = stop = _RecordingStop(limit)
    inf._run()  # in this thread: returns once the fake stop event is set
    return stop.waits


@pytest.mark.parametrize(("r", "want"), [
    (0.0, [0.1, 0.2, 0.4, 0.8, 1.6, 1.6]),
    (0.5, [0.15, 0.3, 0.6, 1.2, 2.4, 2.4]),
], ids=["low-draw-is-half-the-ceiling", "middle-draw"])
def test_reconnect_backoff_doubles_to_the_cap_with_equal_jitter(r: float, want: list[float]) -> None:
    assert _reconnect_delays(lambda: r) == pytest.approx(want)


def test_informers_do_not_all_reconnect_at_the_same_moment() -> None:
    import random

    rngs = [random.Random(seed).random for seed in range(20)]
    first_waits = {round(_reconnect_delays(rng, limit=1)[0], 9) for rng in rngs}
    assert len(first_waits) == 20 and all(0.1 <= w < 0.2 for w in first_waits)
