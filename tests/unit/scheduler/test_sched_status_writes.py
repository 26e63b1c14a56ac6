"""Status writes only when their meaning changes (issue 20 item 2; volcano#3072, #3080, #3852) and what autoscalers
read from them (item 5; volcano#3976): sessions over the in-memory cluster with every write request counted, and the
pure "write or not" rules of `framework.status` as tables."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import status
from lahar.scheduler.framework.snapshot import FitErrors
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from lahar.scheduler.tasks import Runner
from tests.builders import node, pod, podgroup, queue

_WRITES = ("create", "update", "update_status", "patch", "delete", "bind")


class Counting:
    """The cluster client port with every write request counted by (verb, resource)."""

    def __init__(self, inner: MemoryClient) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.writes: Counter[tuple[str, str]] = Counter()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)
        if name not in _WRITES:
            return fn

        def counted(*args: Any, **kwargs: Any) -> Any:
            rt = args[0] if args and hasattr(args[0], "plural") else None
            self.writes[(name, rt.plural if rt is not None else "pods")] += 1
            return fn(*args, **kwargs)
        return counted

    def take(self) -> Counter[tuple[str, str]]:
        got, self.writes = self.writes, Counter()
        return got


def _add_node(c: MemoryClient, name: str, cpu: str = "4") -> None:
    rt = c.registry.get("", "v1", "nodes")
    built = node(name).alloc(cpu, "8Gi").build()
    n = c.create(rt, built)
    n["status"] = built["status"]
    c.update_status(rt, n)


def _cluster(nodes: int, *, gangs: int = 3, singles: int = 4) -> MemoryClient:
    """`nodes` nodes of 4 cpu; gangs of `nodes + 1`, `nodes + 2`, ... pods of 3 cpu (one more than the cluster
    holds), and single pods of 8 cpu that fit no node: every pod stays pending."""
    c = MemoryClient.with_crds()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c1"}})
    c.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("c1").build())
    for i in range(nodes):
        _add_node(c, f"n{i}")
    pg_rt, pods_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), reg.get("", "v1", "pods")
    for g in range(gangs):
        pg = podgroup(f"gang{g}").min(nodes + 1 + g).queue("c1").phase("Inqueue").build()
        c.create(pg_rt, pg, namespace="c1")
        for i in range(nodes + 1 + g):
            c.create(pods_rt, pod(f"gang{g}-{i}").req("3", "1Gi").group(f"gang{g}").build(), namespace="c1")
    for s in range(singles):
        pg = podgroup(f"big{s}").min(1).queue("c1").phase("Inqueue").build()
        c.create(pg_rt, pg, namespace="c1")
        c.create(pods_rt, pod(f"big{s}").req("8", "1Gi").group(f"big{s}").build(), namespace="c1")
    return c


def _session(client: Counting) -> Counter[tuple[str, str]]:
    registry = in_tree_registry()
    run_once(client, confs.default_conf(registry.plugin_names), registry=registry)  # type: ignore[arg-type]
    return client.take()


def test_an_idle_tick_writes_nothing() -> None:
    client = Counting(_cluster(3))
    first = _session(client)
    assert first[("patch", "pods")] == (4 + 5 + 6) + 4  # every pending pod's condition, once
    assert _session(client) == Counter()


def test_adding_a_node_rewrites_no_pod_status() -> None:
    """volcano#3072: 8,000 pending pods, one node added, every pod's message went "0/10" → "0/11 nodes"."""
    client = Counting(_cluster(3))
    _session(client)
    _add_node(client.inner, "n-new", cpu="2")  # too small for any pending pod
    got = _session(client)
    assert got[("patch", "pods")] == 0, got
    assert got[("patch", "podgroups")] == 0, got
    assert sum(got.values()) == 0, got  # nor Events: their text changed, but the pods' conditions did not


def _caught_up(runner: Runner, inner: MemoryClient) -> bool:
    for kind in ("pods", "podgroups", "queues", "nodes"):
        rt = runner.cache.informers[kind].rt
        stored = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in inner.list(rt)["items"]}
        if stored != {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                      for o in runner.cache.informers[kind].list()}:
            return False
    return True


def test_lahar_schedulers_ticks_write_nothing_once_settled_even_after_a_node_joins() -> None:
    """The same through `scheduler.tasks.Runner` (informer cache, incremental snapshot, settled jobs reused)."""
    client = Counting(_cluster(2))
    runner = Runner(client, workers=2)  # type: ignore[arg-type]
    assert runner.start(10)
    try:
        def tick() -> Counter[tuple[str, str]]:
            deadline = time.monotonic() + 30
            while not _caught_up(runner, client.inner):
                assert time.monotonic() < deadline, "informers did not catch up"
                time.sleep(0.05)
            client.take()
            runner.tick()
            return client.take()

        assert tick()[("patch", "pods")] == (3 + 4 + 5) + 4
        assert tick() == Counter()
        _add_node(client.inner, "n-new", cpu="2")
        assert tick() == Counter()
    finally:
        runner.stop()


def test_the_failed_scheduling_event_keeps_the_counts_and_aggregates_repeats() -> None:
    client = Counting(_cluster(2, gangs=0, singles=1))
    _session(client)
    ev_rt = client.registry.get("", "v1", "events")
    (event,) = [e for e in client.inner.list(ev_rt, namespace="c1")["items"] if e["reason"] == "FailedScheduling"]
    assert event["message"] == "0/2 nodes are available: 2 Insufficient cpu." and event["count"] == 1
    p = client.inner.get(client.registry.get("", "v1", "pods"), "big0", namespace="c1")
    (cond,) = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["message"] == "no node is available: Insufficient cpu."


# --- the pure rules ----------------------------------------------------------------------------------------------

MESSAGES = [
    ("counts", True, Counter({"Insufficient cpu": 10}), "0/10 nodes are available: 10 Insufficient cpu."),
    ("no-counts", False, Counter({"Insufficient cpu": 10}), "no node is available: Insufficient cpu."),
    ("no-counts-reasons-sorted", False, Counter({"node(s) were unschedulable": 1, "Insufficient memory": 3}),
     "no node is available: Insufficient memory, node(s) were unschedulable."),
    ("no-nodes-at-all", False, Counter(), "no node is available"),
]


@pytest.mark.parametrize(("counts", "reasons", "want"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_fit_errors_message(counts: bool, reasons: Counter[str], want: str) -> None:
    assert FitErrors(total=sum(reasons.values()) or 0, reasons=reasons).message(counts=counts) == want


def test_the_condition_message_does_not_change_with_the_cluster_size() -> None:
    ten, eleven = FitErrors(10, Counter({"Insufficient cpu": 10})), FitErrors(11, Counter({"Insufficient cpu": 11}))
    assert ten.message() != eleven.message()
    assert ten.message(counts=False) == eleven.message(counts=False)


def _cond(reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": message, **extra}


WRITE_POD = [
    ("nothing-stored", {}, "Unschedulable", "m", "", True),
    ("same-meaning-other-time", {"conditions": [_cond("Unschedulable", "m", lastTransitionTime="t0")]},
     "Unschedulable", "m", "", False),
    ("other-reason", {"conditions": [_cond("Schedulable", "m")]}, "Unschedulable", "m", "", True),
    ("nominated-node-set", {"conditions": [_cond("Schedulable", "m")]}, "Schedulable", "m", "n1", True),
    ("nominated-node-same", {"conditions": [_cond("Schedulable", "m")], "nominatedNodeName": "n1"},
     "Schedulable", "m", "n1", False),
    ("nominated-node-cleared", {"conditions": [_cond("Unschedulable", "m")], "nominatedNodeName": "n1"},
     "Unschedulable", "m", "", True),
]


@pytest.mark.parametrize(("stored", "reason", "message", "nominated", "write"), [w[1:] for w in WRITE_POD],
                         ids=[w[0] for w in WRITE_POD])
def test_pod_condition_write_or_not(stored: dict[str, Any], reason: str, message: str, nominated: str,
                                    write: bool) -> None:
    assert status.pod_condition_changed({"status": stored}, reason, message, nominated) is write


HELD = ("Normal", "Unschedulable", "queue resource quota insufficient")
NEWS = [
    ("held-and-the-condition-says-so", [HELD],
     {"conditions": [{"type": "Unschedulable", "status": "True", "message": f"... Origin reason is: {HELD[2]}"}]}, []),
    ("held-and-no-condition-yet", [HELD], {}, [HELD]),
    ("other-events-always-go", [("Warning", "Evict", "preempted")],
     {"conditions": [{"type": "Unschedulable", "status": "True", "message": "preempted"}]},
     [("Warning", "Evict", "preempted")]),
]


@pytest.mark.parametrize(("events", "stored", "want"), [n[1:] for n in NEWS], ids=[n[0] for n in NEWS])
def test_unchanged_podgroup_events_are_only_news(events: list[tuple[str, str, str]], stored: dict[str, Any],
                                                 want: list[tuple[str, str, str]]) -> None:
    assert status._news(events, stored) == want


# --- what cluster-autoscaler reads (volcano#3976) ---------------------------------------------------------------

def _autoscaler_sees(p: dict[str, Any]) -> bool:
    """cluster-autoscaler's unschedulable-pod filter, as its pod lister applies it: not bound to a node, not
    finished, not being deleted, and a condition of type PodScheduled with status False and reason Unschedulable.
    (Karpenter's FailedToSchedule reads the same condition.)"""
    if (p.get("spec") or {}).get("nodeName") or (p.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (p.get("status") or {}).get("conditions") or ())


def test_gang_members_that_would_fit_alone_are_unschedulable_for_the_autoscaler() -> None:
    """Two 4-cpu nodes, a gang of three 3-cpu pods: two would fit alone, the gang holds them back. Volcano marks
    those two `Schedulable` and cluster-autoscaler never scales up; lahar marks all three `Unschedulable`."""
    c = _cluster(2, gangs=1, singles=0)
    registry = in_tree_registry()
    decisions, _ = run_once(c, confs.default_conf(registry.plugin_names), registry=registry)
    assert decisions.binds == []
    pods = c.list(c.registry.get("", "v1", "pods"), namespace="c1")["items"]
    assert len(pods) == 3
    assert [p["metadata"]["name"] for p in pods if not _autoscaler_sees(p)] == []
