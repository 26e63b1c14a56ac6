"""tdm: revocable-zone windows, disruption budgets, and Volcano's plugins/tdm/tdm_test.go cases as data (predicate
and score per node, victims of closed zones), on a fixed session clock instead of the wall clock upstream reads."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import tdm
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, queue

RZ = "volcano.sh/revocable-zone"
PREEMPTABLE = "volcano.sh/preemptable"


# Volcano's Test_parseRevocableZone.
@pytest.mark.parametrize(("raw", "seconds"), [
    ("00:00_01:00", None),
    ("00:00-01:00", 3600),
    ("0:00-23:59", 23 * 3600 + 59 * 60),
    ("0:00", None),
    ("1:00-0:00", 23 * 3600),
    ("1:0-0:0", None),
    ("   1:00-0:00    ", 23 * 3600),
    ("23:59-23:59", 24 * 3600),
    ("63:59-23:59", None),
], ids=["underscore", "one-hour", "whole-day-minus-a-minute", "no-end", "across-midnight", "one-digit-minutes",
        "blanks", "equal-ends-a-day", "hour-out-of-range"])
def test_parse_window(raw: str, seconds: int | None) -> None:
    if seconds is None:
        with pytest.raises(ValueError):
            tdm.parse_window(raw)
    else:
        assert tdm.window_seconds(*tdm.parse_window(raw)) == seconds


def _at(hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2024, 1, 1, hour, minute, second, tzinfo=dt.UTC)


ZONES = {"day": "10:00-21:00", "night": "22:00-02:00", "all": "0:00-0:00", "bad": "10-11"}


@pytest.mark.parametrize(("zone", "now", "open_"), [
    ("day", _at(10, 0), True),
    ("day", _at(21, 0), True),  # both ends included
    ("day", _at(21, 0, 1), False),
    ("day", _at(9, 59), False),
    ("night", _at(23, 0), True),
    ("night", _at(1, 0), True),  # lahar: the after-midnight part of the window is open too
    ("night", _at(3, 0), False),
    ("all", _at(13, 37), True),
    ("bad", _at(10, 30), False),
    ("unknown", _at(10, 30), False),
], ids=["start", "end", "just-after-end", "before-start", "night-before-midnight", "night-after-midnight",
        "night-closed", "whole-day", "malformed", "unknown-zone"])
def test_zone_error(zone: str, now: dt.datetime, open_: bool) -> None:
    assert (tdm.zone_error(ZONES, zone, now) is None) is open_


def test_zone_error_texts() -> None:
    assert tdm.zone_error(ZONES, "x", _at(0, 0)) == "revocable zone x not support"
    assert tdm.zone_error(ZONES, "day", _at(9, 0)) == "current time beyond revocable zone day:10:00-21:00"
    assert tdm.zone_error(ZONES, "bad", _at(9, 0)) == 'parsing time "10" as "15:04": cannot parse'


@pytest.mark.parametrize(("annotations", "want"), [
    ({RZ: "*"}, "*"),
    ({RZ: "rz1"}, ""),
    ({RZ: "rz1", PREEMPTABLE: "true"}, ""),  # the zone annotation decides when present
    ({PREEMPTABLE: "true"}, "*"),
    ({PREEMPTABLE: "false"}, ""),
    ({PREEMPTABLE: "yes"}, ""),
    ({}, ""),
], ids=["star", "named-zone", "zone-wins", "preemptable", "not-preemptable", "malformed", "none"])
def test_task_revocable_zone(annotations: dict[str, str], want: str) -> None:
    assert tdm.task_revocable_zone(pod("p").annotate(**annotations).build()) == want


MIN, MAX = "volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable"


@pytest.mark.parametrize(("annotations", "tasks", "running", "finished", "want"), [
    ({}, 5, 5, 0, 1),
    ({MAX: "30%"}, 5, 5, 0, 2),
    ({MAX: "99%"}, 5, 5, 0, 5),
    ({MAX: "3"}, 5, 5, 0, 3),
    ({MAX: "3"}, 5, 2, 0, 0),  # three already down
    ({MAX: "3"}, 5, 3, 1, 2),  # one pending, one finished
    ({MIN: "3"}, 5, 5, 0, 2),
    ({MIN: "30%"}, 5, 5, 0, 3),
    ({MIN: "3"}, 5, 2, 0, 1),  # below the minimum: the default
    ({MIN: "2", MAX: "1"}, 5, 5, 0, 3),  # min-available is read first
    ({MAX: "x%"}, 5, 5, 0, 0),
], ids=["default", "max-percent", "max-99-percent", "max-int", "max-used-up", "max-counts-pending",
        "min-int", "min-percent", "min-below", "min-first", "malformed"])
def test_max_evictions(annotations: dict[str, str], tasks: int, running: int, finished: int, want: int) -> None:
    assert tdm.max_evictions(annotations, tasks=tasks, running=running, finished=finished) == want


def _session(*, pods: list[Any], nodes: list[Any], podgroups: list[Any], queues: list[Any], arguments: dict[str, Any],
             now: dt.datetime, shared: dict[Any, Any] | None = None) -> Session:
    registry = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "tdm", "arguments": arguments}]}]}), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(pods), nodes=objs(nodes), podgroups=objs(podgroups), queues=objs(queues))
    return Session(snap, conf, registry, uid="ssn-1", now=lambda: now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                   shared=shared)


def _n(name: str, zone: str | None) -> Any:
    n = node(name).alloc("16", "64Gi", pods=10)
    return n.label(**{RZ: zone}) if zone else n


NODES = [_n("n1", "rz1"), _n("n2", "rz1"), _n("n3", None), _n("n4", None), _n("n5", "rz2")]
ZONE_ARGS = {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.revocable-zone.rz2": "0:00-0:01"}
OK, NO = True, False

# Volcano's Test_TDM: rz1 is open all day, rz2 only in the first minute (closed at 12:00).
UPSTREAM = [
    dict(id="preemptable-task-rz-available", annotations={RZ: "*"}, fits=[OK, OK, OK, OK, NO],
         scores=[100, 100, 0, 0]),
    dict(id="not-preemptable-task", annotations={}, fits=[NO, NO, OK, OK, NO], scores=[0, 0]),
    dict(id="preemptable-task-and-multiple-rz", annotations={RZ: "*"}, fits=[OK, OK, OK, OK, NO],
         scores=[100, 100, 0, 0]),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_upstream_predicate_and_score(case: dict[str, Any]) -> None:
    ssn = _session(pods=[pod("p1", "c1").req("1", "1Gi").group("pg1").annotate(**case["annotations"])],
                   nodes=NODES, podgroups=[podgroup("pg1", "c1").queue("c1")], queues=[queue("c1")],
                   arguments=ZONE_ARGS, now=_at(12, 0))
    task = next(iter(ssn.snapshot.tasks.values()))
    f = ssn.predicate(task)
    assert f.feasible.tolist() == case["fits"]
    assert f.unresolvable is not None and (f.unresolvable == ~f.feasible).all()
    assert ssn.node_scores(task, np.flatnonzero(f.feasible)).tolist() == case["scores"]


def test_predicate_reasons() -> None:
    ssn = _session(pods=[pod("p1", "c1").group("pg1")], nodes=NODES, podgroups=[podgroup("pg1", "c1").queue("c1")],
                   queues=[queue("c1")], arguments=ZONE_ARGS, now=_at(12, 0))
    f = ssn.predicate(next(iter(ssn.snapshot.tasks.values())))
    assert f.reasons is not None
    assert f.reasons.tolist() == [tdm.NOT_ALLOWED, tdm.NOT_ALLOWED, None, None,
                                  "current time beyond revocable zone rz2:0:00-0:01"]


def _victim_case(pods: list[Any], podgroups: list[Any], queues: list[str], node_names: list[str],
                 arguments: dict[str, Any], want: int) -> dict[str, Any]:
    return dict(pods=pods, podgroups=podgroups, queues=queues, nodes=node_names, arguments=arguments, want=want)


def _running(ns: str, name: str, on: str, group: str, preemptable: bool) -> Any:
    return pod(name, ns).req("1", "1Gi").group(group).on(on).preemptable(preemptable)


C1 = [_running("c1", f"p{i}", "n1", "pg1", i <= 3) for i in range(1, 6)]  # p4, p5 not preemptable
C2 = [_running("c2", f"p{i}", "n2", "pg2", True) for i in range(6, 11)]


def _pg(name: str, ns: str, **ann: str) -> Any:
    return podgroup(name, ns).queue(ns).annotate(**ann)


CLOSED = {"tdm.revocable-zone.rz1": "0:00-0:01", "tdm.evict.period": "1s"}
OPEN = {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.evict.period": "100ms"}

# Volcano's Test_TDM_victimsFn: at 12:00 "0:00-0:01" is closed (upstream's result depends on the wall clock).
VICTIMS = [
    dict(id="max-30-percent", pods=C1, podgroups=[_pg("pg1", "c1", **{MAX: "30%"})], args=CLOSED, want=2),
    dict(id="zone-open", pods=C1, podgroups=[_pg("pg1", "c1", **{MAX: "30%"})], args=OPEN, want=0),
    dict(id="max-99-percent-only-preemptable", pods=C1, podgroups=[_pg("pg1", "c1", **{MAX: "99%"})], args=CLOSED,
         want=3),
    dict(id="max-50-percent", pods=C2, podgroups=[_pg("pg2", "c2", **{MAX: "50%"})], args=CLOSED, want=3),
    dict(id="two-jobs", pods=C1 + C2, podgroups=[_pg("pg2", "c2", **{MAX: "50%"}), _pg("pg1", "c1", **{MAX: "90%"})],
         args=CLOSED, want=6),
    dict(id="max-int", pods=C2, podgroups=[_pg("pg2", "c2", **{MAX: "3"})], args=CLOSED, want=3),
    dict(id="min-int", pods=C2, podgroups=[_pg("pg2", "c2", **{MIN: "3"})], args=CLOSED, want=2),
    dict(id="min-percent", pods=C2, podgroups=[_pg("pg2", "c2", **{MIN: "30%"})], args=CLOSED, want=3),
    dict(id="min-and-max-jobs", pods=C1 + C2, podgroups=[_pg("pg2", "c2", **{MIN: "2"}),
                                                          _pg("pg1", "c1", **{MAX: "3"})], args=CLOSED, want=6),
]


@pytest.mark.parametrize("case", VICTIMS, ids=[c["id"] for c in VICTIMS])
def test_upstream_victims(case: dict[str, Any]) -> None:
    ssn = _session(pods=case["pods"], nodes=[_n("n1", "rz1"), _n("n2", "rz1")], podgroups=case["podgroups"],
                   queues=[queue("c1"), queue("c2")], arguments=case["args"], now=_at(12, 0))
    assert len(ssn.plugins["tdm"].victim_tasks([])) == case["want"]


def test_victims_wait_for_the_evict_period() -> None:
    shared: dict[Any, Any] = {}
    kw = dict(pods=C2, nodes=[_n("n2", "rz1")], podgroups=[_pg("pg2", "c2", **{MAX: "3"})], queues=[queue("c2")],
              arguments={**CLOSED, "tdm.evict.period": "1m"}, shared=shared)
    first = _session(**kw, now=_at(12, 0))  # type: ignore[arg-type]
    assert len(first.plugins["tdm"].victim_tasks([])) == 3
    soon = _session(**kw, now=_at(12, 0, 30))  # type: ignore[arg-type]
    assert soon.plugins["tdm"].victim_tasks([]) == []
    later = _session(**kw, now=_at(12, 1, 0))  # type: ignore[arg-type]
    assert len(later.plugins["tdm"].victim_tasks([])) == 3


def test_preemptable_victims_and_orders() -> None:
    pods = [_running("c1", "v1", "n3", "pg1", True), _running("c1", "v2", "n3", "pg1", True),
            _running("c1", "v3", "n1", "pg1", True),  # on a revocable node: not a victim
            _running("c1", "v4", "n3", "pg1", False),
            pod("hi", "c1").req("1", "1Gi").group("pg2").preemptable(False),
            pod("lo", "c1").req("1", "1Gi").group("pg2")]  # preemptable by default: preempts nobody
    ssn = _session(pods=pods, nodes=NODES, podgroups=[_pg("pg1", "c1", **{MAX: "1"}),
                                                      _pg("pg2", "c1", **{PREEMPTABLE: "true"})],
                   queues=[queue("c1")], arguments=ZONE_ARGS, now=_at(12, 0))
    p = ssn.plugins["tdm"]
    t = {x.name: x for x in ssn.snapshot.tasks.values()}
    candidates = [t["v1"], t["v2"], t["v3"], t["v4"]]
    assert [v.name for v in p.preemptable(t["hi"], candidates)] == ["v1"]  # capped at max-unavailable 1
    assert p.preemptable(t["lo"], candidates) == []
    jobs = ssn.snapshot.jobs
    assert p.job_order(jobs["c1/pg1"], jobs["c1/pg2"]) == -1 and p.job_order(jobs["c1/pg2"], jobs["c1/pg1"]) == 1
    assert p.job_starving(jobs["c1/pg2"]) is False  # a preemptable job never starves
    assert p.job_pipelined(jobs["c1/pg1"]) is Vote.PERMIT
