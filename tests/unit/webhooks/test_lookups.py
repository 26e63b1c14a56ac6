"""webhooks.lookups: StaticLookups (from objects, builtin queues) and InformerLookups over the in-memory client,
including a cluster whose Volcano CRDs are not installed yet."""

from __future__ import annotations

import threading
import time

import pytest

from lahar.kube import errors, resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.webhooks.lookups import InformerLookups, Lookups, StaticLookups
from tests import builders
from tests.builders import vcjob

REG = resources.in_tree()
QUEUES = REG.get("scheduling.volcano.sh", "v1beta1", "queues")
JOBS = REG.get("batch.volcano.sh", "v1alpha1", "jobs")
PODGROUPS = REG.get("scheduling.volcano.sh", "v1beta1", "podgroups")
NAMESPACES = REG.get("", "v1", "namespaces")
PRIORITY = REG.get("scheduling.k8s.io", "v1", "priorityclasses")


def queue(name: str, *, state: str = "Open", parent: str | None = None) -> dict:
    q = builders.queue(name).state(state)
    return (q.parent(parent) if parent else q).bare(status=True)


def namespace(name: str, **annotations: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations}}


def job(name: str, ns: str | None = "team-a") -> dict:
    return vcjob(name, ns).task("t", 2).build()


def podgroup(name: str, ns: str = "team-a") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": 1}}


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def wait_until(fn, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


# -- StaticLookups -----------------------------------------------------------------------------------------------------


def test_static_builtin_queues():
    lk = StaticLookups()
    assert isinstance(lk, Lookups)
    assert {q["metadata"]["name"] for q in lk.queues()} == {"root", "default"}
    assert lk.queue("default")["status"]["state"] == "Open"
    assert lk.queue("default")["spec"] == {"weight": 1, "reclaimable": True}
    assert lk.queue("root")["status"]["state"] == "Open"
    assert lk.queue("missing") is None
    assert lk.ready()


def test_static_no_builtins_and_overrides():
    assert StaticLookups(builtin_queues=False).queues() == []
    closed = queue("default", state="Closed")
    lk = StaticLookups([closed])
    assert lk.queue("default") is closed
    assert lk.queue("root") is not None


@pytest.mark.parametrize(("obj", "look"), [
    (queue("q1", parent="root"), lambda lk: lk.queue("q1")),
    (namespace("team-a", **{"scheduling.volcano.sh/queue-name": "q1"}), lambda lk: lk.namespace("team-a")),
    (job("j1"), lambda lk: lk.job("team-a", "j1")),
    (job("j2", ns=None), lambda lk: lk.job("default", "j2")),
    (podgroup("pg1"), lambda lk: lk.podgroup("team-a", "pg1")),
    (priority_class("high", 1000), lambda lk: lk.priority_class("high")),
], ids=["queue", "namespace", "job", "job-default-namespace", "podgroup", "priorityclass"])
def test_static_kinds(obj, look):
    lk = StaticLookups([obj])
    assert look(lk) is obj


def test_static_ignores_other_kinds_and_other_groups():
    lk = StaticLookups()
    assert lk.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) is False
    assert lk.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "k8s-job", "namespace": "a"}}) is False
    assert lk.job("a", "k8s-job") is None
    assert lk.add(job("j1")) is True
    assert lk.job("team-a", "j1") is not None
    assert lk.job("other", "j1") is None


CHILD_COUNTS = [
    ("none", [queue("a")], "a", 0),
    ("two-children", [queue("a"), queue("b", parent="a"), queue("c", parent="a"), queue("d", parent="b")], "a", 2),
    ("grandchild-not-counted", [queue("a"), queue("b", parent="a"), queue("d", parent="b")], "b", 1),
    ("builtin-default-parent", [queue("b", parent="default")], "default", 1),
    ("non-string-parent-ignored", [{**queue("b"), "spec": {"parent": 7}}], "7", 0),
    ("spec-not-a-map", [{**queue("b"), "spec": "x"}], "x", 0),
]


@pytest.mark.parametrize(("objects", "name", "count"), [c[1:] for c in CHILD_COUNTS], ids=[c[0] for c in CHILD_COUNTS])
def test_static_child_queue_count_matches_a_scan(objects, name, count):
    lk = StaticLookups(objects)
    scan = sum(1 for q in lk.queues() if isinstance(q.get("spec"), dict) and q["spec"].get("parent") == name)
    assert lk.child_queue_count(name) == scan == count


def test_static_child_queue_count_follows_add():
    lk = StaticLookups([queue("a")])
    assert lk.child_queue_count("a") == 0
    lk.add(queue("b", parent="a"))
    assert lk.child_queue_count("a") == 1
    lk.add(queue("b", parent="default"))             # replaced: moved under default
    assert (lk.child_queue_count("a"), lk.child_queue_count("default")) == (0, 1)


# -- InformerLookups ---------------------------------------------------------------------------------------------------


def test_informer_lookups_follow_the_cluster():
    client = MemoryClient.with_crds()
    client.create(QUEUES, queue("q1"))
    client.create(NAMESPACES, namespace("team-a"))
    client.create(JOBS, job("j1"), namespace="team-a")
    client.create(PODGROUPS, podgroup("pg1"), namespace="team-a")
    client.create(PRIORITY, priority_class("high", 1000))
    with InformerLookups(client, probe_interval=0.05) as lk:
        assert lk.wait_for_sync(5)
        assert lk.ready()
        assert lk.queue("q1")["metadata"]["name"] == "q1"
        assert [q["metadata"]["name"] for q in lk.queues()] == ["q1"]
        assert lk.namespace("team-a") is not None
        assert lk.job("team-a", "j1")["spec"]["tasks"][0]["replicas"] == 2
        assert lk.job("other", "j1") is None
        assert lk.podgroup("team-a", "pg1") is not None
        assert lk.priority_class("high")["value"] == 1000
        assert lk.child_queue_count("q1") == 0
        client.create(QUEUES, queue("q2", parent="q1"))
        wait_until(lambda: len(lk.queues()) == 2)      # queue() alone would read through to the API
        assert lk.child_queue_count("q1") == 1       # from the informer's parent index
        client.delete(QUEUES, "q2")
        wait_until(lambda: lk.child_queue_count("q1") == 0)
        client.delete(QUEUES, "q1")
        wait_until(lambda: lk.queue("q1") is None)
    assert not [t for t in threading.enumerate() if t.name.startswith(("informer-", "lookups-"))]


class NoCrds:
    """The cluster client port with Volcano's CRDs absent until `install()`: their lists answer 404."""

    def __init__(self, inner: MemoryClient) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.installed = threading.Event()
        self.probes = 0

    def install(self) -> None:
        self.installed.set()

    def _check(self, rt) -> None:
        if rt.group.endswith("volcano.sh") and not self.installed.is_set():
            self.probes += 1
            raise errors.NotFound(f"the server could not find the requested resource ({rt.plural}.{rt.group})")

    def list(self, rt, **kw):
        self._check(rt)
        return self.inner.list(rt, **kw)

    def watch(self, rt, **kw):
        self._check(rt)
        return self.inner.watch(rt, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_informer_lookups_without_volcano_crds_then_installed():
    inner = MemoryClient.with_crds()
    inner.create(NAMESPACES, namespace("team-a"))
    inner.create(QUEUES, queue("q1"))
    client = NoCrds(inner)
    with InformerLookups(client, probe_interval=0.05) as lk:
        assert lk.wait_for_sync(5), "missing CRDs must not keep the webhook unready"
        assert lk.namespace("team-a") is not None
        assert lk.queue("q1") is None and lk.queues() == [] and lk.job("a", "b") is None
        client.install()
        wait_until(lambda: lk.queue("q1") is not None)
        # the queue informer can sync before those of jobs and podgroups, each found on its own probe
        assert lk.wait_for_sync(5), "installed CRDs must make the webhook ready"
    assert client.probes >= 3  # queues, jobs, podgroups each probed at least once


def test_informer_lookups_not_ready_while_the_api_is_down():
    class Down(NoCrds):
        def _check(self, rt) -> None:
            if not self.installed.is_set():
                raise errors.ApiError("connection refused")

    client = Down(MemoryClient.with_crds())
    lk = InformerLookups(client, probe_interval=0.05)
    try:
        lk.start()
        assert not lk.ready()
        client.install()
        assert lk.wait_for_sync(10)
    finally:
        lk.stop()


class LaggingQueues(NoCrds):
    """The cluster client port whose list and watch of `lagging` (queues unless told) see nothing (an informer that
    has not caught up yet), while `get` answers from the cluster."""

    def __init__(self, inner: MemoryClient, lagging=QUEUES) -> None:
        super().__init__(inner)
        self.installed.set()
        self.lagging = lagging
        self.gets: list[str] = []

    def list(self, rt, **kw):
        return self.inner.list(rt, **(kw | ({"label_selector": "lahar.test/never"} if rt == self.lagging else {})))

    def watch(self, rt, **kw):
        return self.inner.watch(rt, **(kw | ({"label_selector": "lahar.test/never"} if rt == self.lagging else {})))

    def get(self, rt, name, **kw):
        self.gets.append(name)
        return self.inner.get(rt, name, **kw)


def test_informer_lookups_read_a_queue_the_cache_has_not_seen_from_the_api():
    """A Queue applied just before its Job (one `kubectl apply -f`) may not be in the informer yet."""
    inner = MemoryClient.with_crds()
    inner.create(QUEUES, queue("team", state=""))
    client = LaggingQueues(inner)
    with InformerLookups(client, probe_interval=0.05) as lk:
        assert lk.wait_for_sync(5)
        assert lk.queues() == []                      # the cache has not seen it
        assert lk.queue("team")["metadata"]["name"] == "team"
        assert lk.queue("nowhere") is None
    assert client.gets == ["team", "nowhere"]


@pytest.mark.parametrize(("rt", "obj", "look"), [
    (PODGROUPS, podgroup("pg-t"), lambda lk, name: lk.podgroup("team-a", name)),
    (JOBS, job("j"), lambda lk, name: lk.job("team-a", name)),
    (PRIORITY, priority_class("high", 100), lambda lk, name: lk.priority_class(name)),
    (NAMESPACES, namespace("fresh"), lambda lk, name: lk.namespace(name)),
], ids=["podgroup-before-its-pod", "job", "priorityclass", "namespace"])
def test_informer_lookups_read_any_object_the_cache_has_not_seen_from_the_api(rt, obj, look):
    """A PodGroup applied just before its pod (one `kubectl apply -f`) may not be in the informer yet: the pod
    review must not be denied with "failed to get PodGroup" (found on the real kube-apiserver)."""
    inner = MemoryClient.with_crds()
    ns = obj["metadata"].get("namespace")
    if ns:
        inner.create(NAMESPACES, namespace(ns))
    inner.create(rt, obj, **({"namespace": ns} if ns else {}))
    client = LaggingQueues(inner, lagging=rt)
    name = obj["metadata"]["name"]
    with InformerLookups(client, probe_interval=0.05) as lk:
        assert lk.wait_for_sync(5)
        assert look(lk, name)["metadata"]["name"] == name
        assert look(lk, "nowhere") is None
    assert client.gets == [name, "nowhere"]
