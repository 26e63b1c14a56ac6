"""shuffle: Volcano's actions/shuffle/shuffle_test.go case as data, the VictimTasks / VictimFilter dispatch rules,
the pure `choose` (gang floor, eviction cap), and shuffle with pdb, cdp, conformance, gang and tdm in a session."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml

from lahar.scheduler.actions import shuffle
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions, Session
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, queue

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


class Fake:
    """A plugin whose VictimTasks hook proposes the tasks `pick` selects (upstream's mock plugin)."""

    def __init__(self, name: str, pick: Callable[[Task], bool]) -> None:
        self.name = name
        self.pick = pick

    def victim_tasks(self, tasks: list[Task]) -> list[Task]:
        return [t for t in tasks if self.pick(t)]


def _conf(actions: str, *tiers: list[Any], configurations: Sequence[Any] = ()) -> str:
    return yaml.safe_dump({"actions": actions, "configurations": list(configurations), "tiers": [
        {"plugins": [p if isinstance(p, dict) else {"name": p} for p in tier]} for tier in tiers]})


def _run(conf_text: str, *, pods: list[Any], nodes: list[Any], podgroups: list[Any],
         queues: Sequence[Any] = (), fakes: dict[str, Callable[[Task], bool]] | None = None,
         pdbs: Sequence[Any] = (), now: dt.datetime = NOW,
         shared: dict[Any, Any] | None = None) -> tuple[Session, Decisions]:
    registry = in_tree_registry()
    for name, pick in (fakes or {}).items():
        registry.add_plugin(name, lambda _args, n=name, p=pick: Fake(n, p))  # type: ignore[misc]
    conf = confs.load(conf_text, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(list(pods)), nodes=objs(list(nodes)), podgroups=objs(list(podgroups)),
                           queues=objs(list(queues) or [queue("default")]), poddisruptionbudgets=list(pdbs))
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    ssn = Session(snap, conf, registry, uid="ssn-1", now=lambda: stamp, shared=shared)
    for name in conf.actions:
        registry.action(name, conf.action_arguments(name)).execute(ssn)
    return ssn, ssn.close()


def _evicted(d: Decisions) -> list[str]:
    return sorted(f"{e.namespace}/{e.name}" for e in d.evictions)


LOW, HIGH = 10, 100


def _p(name: str, on: str, group: str, prio: int, ns: str = "test") -> Any:
    return pod(name, ns).req("1", "2G").group(group).on(on).priority(prio)


# Volcano's TestShuffle: the fake plugin names the low-priority tasks; shuffle evicts exactly those.
UPSTREAM = [dict(
    id="select-pods-with-low-priority-and-evict-them",
    nodes=[node("node1").alloc("4", "8Gi", pods=10), node("node2").alloc("4", "8Gi", pods=10)],
    podgroups=[podgroup(f"pg{i}", "test").queue("default").min(0).phase("Running") for i in (1, 2, 3)],
    pods=[_p("pod1-1", "node1", "pg1", LOW), _p("pod1-2", "node1", "pg1", HIGH), _p("pod1-3", "node1", "pg1", HIGH),
          _p("pod2-1", "node1", "pg2", LOW), _p("pod2-2", "node2", "pg2", HIGH), _p("pod3-1", "node2", "pg3", LOW),
          _p("pod3-2", "node2", "pg3", HIGH)],
    evicted=["test/pod1-1", "test/pod2-1", "test/pod3-1"])]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_upstream_shuffle(case: dict[str, Any]) -> None:
    _, d = _run(_conf("shuffle", [{"name": "fake", "enabledVictim": True}]), pods=case["pods"], nodes=case["nodes"],
                podgroups=case["podgroups"], fakes={"fake": lambda t: t.priority == LOW})
    assert _evicted(d) == case["evicted"]
    assert {e.reason for e in d.evictions} == {"shuffle"}


# --- the hooks' combination rules -----------------------------------------------------------------------------

def _pick(*names: str) -> Callable[[Task], bool]:
    return lambda t: t.name in names


THREE = [_p(n, "node1", "pg1", LOW) for n in ("a", "b", "c")]
DISPATCH = [
    dict(id="union-within-a-tier", tiers=[["fa", "fb"]], want=["test/a", "test/b"]),
    dict(id="first-non-empty-tier-decides", tiers=[["fa"], ["fc"]], want=["test/a"]),
    dict(id="empty-tier-falls-through", tiers=[["none"], ["fc"]], want=["test/c"]),
    dict(id="enabledVictim-false-is-skipped", tiers=[[{"name": "fa", "enabledVictim": False}], ["fc"]],
         want=["test/c"]),
    dict(id="same-task-twice-evicted-once", tiers=[["fa", "fab"]], want=["test/a", "test/b"]),
    dict(id="no-proposer-no-eviction", tiers=[["none"]], want=[]),
]


@pytest.mark.parametrize("case", DISPATCH, ids=[c["id"] for c in DISPATCH])
def test_victim_tasks_dispatch(case: dict[str, Any]) -> None:
    fakes = {"fa": _pick("a"), "fb": _pick("b"), "fc": _pick("c"), "fab": _pick("a", "b"), "none": _pick()}
    _, d = _run(_conf("shuffle", *case["tiers"]), pods=THREE, nodes=[node("node1").alloc("8", "16Gi")],
                podgroups=[podgroup("pg1", "test").queue("default").min(0).phase("Running")], fakes=fakes)
    assert _evicted(d) == case["want"]


# --- the pure choice: gang floor and cap ------------------------------------------------------------------------

def _prop(uid: str, job: str, ready: int, min_available: int) -> shuffle.Proposal:
    return shuffle.Proposal(uid, job, ready, min_available)


@pytest.mark.parametrize(("proposals", "limit", "want"), [
    ([_prop("a", "j1", 3, 0), _prop("b", "j1", 3, 0)], 10, ["a", "b"]),
    ([_prop("a", "j1", 3, 2), _prop("b", "j1", 3, 2)], 10, ["a"]),
    ([_prop("a", "j1", 2, 2)], 10, []),
    ([_prop("a", "j1", 3, 3), _prop("b", "j2", 1, 0)], 10, ["b"]),
    ([_prop(str(i), f"j{i}", 1, 0) for i in range(5)], 3, ["0", "1", "2"]),
    ([_prop(str(i), f"j{i}", 1, 0) for i in range(5)], 0, ["0", "1", "2", "3", "4"]),
    ([_prop("a", "j1", 2, 1), _prop("b", "j1", 2, 1), _prop("c", "j2", 1, 0)], 2, ["a", "c"]),
    ([], 10, []),
], ids=["no-gang-all-go", "down-to-minAvailable", "at-minAvailable-none", "whole-gang-kept-other-job-goes",
        "capped", "zero-is-no-cap", "skipped-victim-does-not-count-against-the-cap", "nothing"])
def test_choose(proposals: list[shuffle.Proposal], limit: int, want: list[str]) -> None:
    assert shuffle.choose(proposals, limit=limit) == want


@pytest.mark.parametrize(("args", "want"), [
    ({}, 10), ({"maxEvictions": 3}, 3), ({"maxEvictions": "5"}, 5), ({"maxEvictions": 0}, 0),
    ({"maxEvictions": "many"}, 10), ({"maxEvictions": True}, 10), ({"maxEvictions": None}, 10),
], ids=["default", "int", "digits", "zero", "not-a-number", "bool", "null"])
def test_max_evictions(args: dict[str, Any], want: int) -> None:
    assert shuffle.max_evictions(args) == want


# --- in a session: the guards ------------------------------------------------------------------------------------

def _group(n: int, *, min_available: int = 0, labels: dict[str, str] | None = None, ns: str = "test") -> list[Any]:
    return [pod(f"w{i}", ns).req("1", "1G").group("pg1").on("node1").label(**(labels or {})) for i in range(n)]


def _one_job(min_available: int, ns: str = "test") -> list[Any]:
    return [podgroup("pg1", ns).queue("default").min(min_available).phase("Running")]


ALL = {"fake": lambda t: True}


def test_gang_is_never_taken_below_min_available() -> None:
    _, d = _run(_conf("shuffle", ["fake"]), pods=_group(4), nodes=[node("node1").alloc("8", "16Gi")],
                podgroups=_one_job(3), fakes=ALL)
    assert len(d.evictions) == 1


def test_evictions_are_capped_per_session() -> None:
    conf = _conf("shuffle", ["fake"], configurations=[{"name": "shuffle", "arguments": {"maxEvictions": 2}}])
    _, d = _run(conf, pods=_group(5), nodes=[node("node1").alloc("8", "16Gi")], podgroups=_one_job(0), fakes=ALL)
    assert len(d.evictions) == 2


def _pdb(allowed: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "test"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}}, "status": {"disruptionsAllowed": allowed}}


@pytest.mark.parametrize(("tiers", "pdbs", "want"), [
    ([["fake"]], [_pdb(0)], 3),
    ([["fake", "pdb"]], [_pdb(0)], 0),
    ([["fake", "pdb"]], [_pdb(1)], 1),
    ([["fake"], ["pdb"]], [_pdb(1)], 1),  # the filter applies whatever tier it is in
    ([["fake", {"name": "pdb", "enabledVictim": False}]], [_pdb(0)], 3),
    ([["pdb"]], [], 0),  # Volcano's pdb is a VictimTasks function: alone, it names every unprotected pod
    ([["pdb"]], [_pdb(5)], 0),
], ids=["without-pdb", "pdb-protects", "pdb-allows-one", "pdb-in-a-later-tier", "pdb-switched-off",
        "pdb-alone-proposes-nothing", "pdb-with-room-proposes-nothing"])
def test_pdb_guards_shuffle(tiers: list[Any], pdbs: list[Any], want: int) -> None:
    _, d = _run(_conf("shuffle", *tiers), pods=_group(3, labels={"app": "w"}), nodes=[node("node1").alloc("8", "16Gi")],
                podgroups=_one_job(0), fakes=ALL, pdbs=pdbs)
    assert len(d.evictions) == want


def test_cdp_and_conformance_guard_shuffle() -> None:
    cooling = pod("cool", "test").req("1", "1G").group("pg1").on("node1").annotate(**{"volcano.sh/cooldown-time": "1h"})
    cooling.obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                            "lastTransitionTime": "2024-01-01T11:50:00Z"}]
    critical = pod("crit", "test").req("1", "1G").group("pg1").on("node1")
    critical.obj["spec"]["priorityClassName"] = "system-cluster-critical"
    plain = pod("plain", "test").req("1", "1G").group("pg1").on("node1")
    _, d = _run(_conf("shuffle", ["fake", "cdp", "conformance"]), pods=[cooling, critical, plain],
                nodes=[node("node1").alloc("8", "16Gi")], podgroups=_one_job(0), fakes=ALL)
    assert _evicted(d) == ["test/plain"]


def test_each_eviction_is_explained_by_an_event() -> None:
    _, d = _run(_conf("shuffle", ["fake"]), pods=_group(1), nodes=[node("node1").alloc("8", "16Gi")],
                podgroups=_one_job(0), fakes=ALL)
    (upd,) = d.podgroups.values()
    assert ("Normal", "Evict", "shuffle: pod test/w0 evicted from node node1: fake") in upd.events


def test_only_running_tasks_are_offered() -> None:
    seen: list[str] = []
    pending = pod("pending", "test").req("1", "1G").group("pg1")
    running = pod("running", "test").req("1", "1G").group("pg1").on("node1")
    _run(_conf("shuffle", ["fake"]), pods=[pending, running], nodes=[node("node1").alloc("8", "16Gi")],
         podgroups=_one_job(0), fakes={"fake": lambda t: bool(seen.append(t.name))})
    assert seen == ["running"]


# --- tdm's VictimTasks: closed revocable zones are emptied by shuffle -------------------------------------------

RZ = "volcano.sh/revocable-zone"


@pytest.mark.parametrize(("window", "want"), [("0:00-0:01", 2), ("0:00-0:00", 0)], ids=["zone-closed", "zone-open"])
def test_tdm_victims_are_evicted_by_shuffle(window: str, want: int) -> None:
    conf = _conf("shuffle", [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": window}}])
    pods = [pod(f"r{i}", "test").req("1", "1G").group("pg1").on("rev").preemptable(True) for i in range(2)]
    pods.append(pod("keep", "test").req("1", "1G").group("pg1").on("rev").preemptable(False))
    pg = podgroup("pg1", "test").queue("default").min(0).phase("Running").annotate(
        **{"volcano.sh/jdb-max-unavailable": "100%"})
    _, d = _run(conf, pods=pods, nodes=[node("rev").alloc("8", "16Gi").label(**{RZ: "rz1"})], podgroups=[pg])
    assert len(d.evictions) == want and "test/keep" not in _evicted(d)
