"""scheduler.usagesource and the usage plugin on it: the conf's `metrics` block picks the metrics-API source,
NodeMetrics become percent of allocatable, an unreadable API is logged once and leaves every node unknown (passes,
scores 0), and the plugin filters and scores by the API's load rather than the node annotation."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import numpy as np
import pytest
import yaml

from lahar.scheduler import usagesource as src
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import usage as us
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, queue

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
STAMP = "2024-01-01T12:00:00Z"


@pytest.mark.parametrize(("metrics", "want"), [
    ({}, None),
    ({"type": "prometheus", "address": "http://prom:9090"}, None),
    ({"type": "elasticsearch", "address": "http://es:9200"}, None),
    ({"type": "metrics-server"}, src.SourceConf("metrics-server", "", 30.0)),
    ({"type": "Metrics-API", "interval": "10s", "address": "https://x"}, src.SourceConf("metrics-api", "https://x", 10.0)),
    ({"type": "metrics-api", "interval": "soon"}, src.SourceConf("metrics-api", "", 30.0)),
    ({"type": "metrics-api", "interval": "-5s", "address": 7}, src.SourceConf("metrics-api", "", 30.0)),
    ({"type": 3}, None),
], ids=["none", "prometheus", "elasticsearch", "metrics-server", "metrics-api-interval", "bad-interval",
        "negative-interval-bad-address", "type-not-a-string"])
def test_source_conf(metrics: dict[str, Any], want: src.SourceConf | None) -> None:
    assert src.source_conf(metrics) == want


def _item(name: str, cpu: str = "2", memory: str = "4Gi", stamp: Any = STAMP) -> dict[str, Any]:
    return {"metadata": {"name": name}, "timestamp": stamp, "usage": {"cpu": cpu, "memory": memory}}


SIZED = {"status": {"allocatable": {"cpu": "4", "memory": "8Gi"}, "capacity": {"cpu": "8", "memory": "16Gi"}}}


@pytest.mark.parametrize(("item", "n", "want"), [
    (_item("n1"), SIZED, (50.0, 50.0, NOW)),
    (_item("n1", "500m", "1Gi"), {"status": {"capacity": {"cpu": "2", "memory": "2Gi"}}}, (25.0, 50.0, NOW)),
    (_item("n1", stamp=None), SIZED, (50.0, 50.0, None)),
    (_item("n1", cpu="lots"), SIZED, None),
    ({"metadata": {"name": "n1"}, "usage": {"cpu": "1"}}, SIZED, None),
    (_item("n1"), {"status": {"allocatable": {"cpu": "0", "memory": "8Gi"}}}, None),
    (_item("n1"), {}, None),
], ids=["allocatable", "capacity-when-no-allocatable", "no-timestamp", "malformed-usage", "no-memory",
        "zero-size", "no-status"])
def test_node_percent(item: dict[str, Any], n: dict[str, Any], want: Any) -> None:
    assert src.node_percent(item, n) == want


def test_the_source_parses_outside_the_session() -> None:
    s = src.MetricsSource(lambda: {"items": [_item("n1", "1500m", "2Gi"), _item("n2", cpu="bad"), "junk"]})
    s.refresh()
    assert s.snapshot()[0] == {"n1": src.Measured(1500.0, 2.0 * 1024**3, NOW), "n2": None}


def test_a_failing_api_is_logged_once_and_empties_the_source(caplog: pytest.LogCaptureFixture) -> None:
    answers: list[Any] = [{"items": [_item("n1")]}, OSError("connection refused"), OSError("again"),
                          {"items": [_item("n2")]}]
    t = [100.0]

    def fetch() -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    s = src.MetricsSource(fetch, 30.0, clock=lambda: t[0])
    assert s.snapshot() == ({}, None)
    assert s.refresh()
    t[0] = 112.0
    items, age = s.snapshot()
    assert list(items) == ["n1"] and age == 12.0
    with caplog.at_level(logging.WARNING, logger=src.__name__):
        assert not s.refresh() and not s.refresh()
    assert [r.getMessage().count("cannot be read") for r in caplog.records] == [1]
    assert s.snapshot() == ({}, None) and "again" in (s.error or "")
    assert s.refresh() and list(s.snapshot()[0]) == ["n2"] and s.error is None


def _session(nodes: list[Any], source: src.MetricsSource | None, monkeypatch: pytest.MonkeyPatch,
             metrics: dict[str, Any] | None = None) -> Session:
    monkeypatch.setattr(us, "source_for", lambda conf: source)
    registry = in_tree_registry()
    doc: dict[str, Any] = {"actions": "allocate", "metrics": metrics or {"type": "metrics-api", "interval": "30s"},
                           "tiers": [{"plugins": [{"name": "usage", "arguments": {"thresholds": {"cpu": 80,
                                                                                                 "mem": 80}}}]}]}
    conf = confs.load(yaml.safe_dump(doc), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs([pod("p1").req("1", "1Gi").group("pg1")]), nodes=objs(nodes),
                           podgroups=objs([podgroup("pg1")]), queues=objs([queue("c1")]))
    return Session(snap, conf, registry, uid="ssn-1", now=lambda: STAMP)


def _task(ssn: Session) -> Any:
    return next(iter(ssn.snapshot.tasks.values()))


def _annotated(name: str, cpu: float, mem: float) -> Any:
    return node(name).alloc("4", "8Gi", pods=10).annotate(
        **{us.USAGE_ANNOTATION: json.dumps({"cpu": cpu, "memory": mem, "time": STAMP})})


def _fixed(items: list[dict[str, Any]]) -> src.MetricsSource:
    s = src.MetricsSource(lambda: {"items": items})
    s.refresh()
    return s


def test_the_metrics_api_filters_and_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """n1 is at 90% cpu by the API (its annotation says 10%): refused; n2 at 30/50 scores as upstream; n3 has no
    NodeMetrics: unknown, passes, scores 0 (its annotation is not used beside a metrics-API source)."""
    nodes = [_annotated("n1", 10, 10), _annotated("n2", 90, 90), _annotated("n3", 10, 10)]
    items = [_item("n1", "3600m", "1Gi"), _item("n2", "1200m", "4Gi")]
    ssn = _session(nodes, _fixed(items), monkeypatch)
    f = ssn.predicate(_task(ssn))
    assert f.feasible.tolist() == [False, True, True]
    assert f.reasons is not None and f.reasons.tolist()[0] == us.CPU_OVER
    assert ssn.node_scores(_task(ssn), np.array([1, 2])).tolist() == pytest.approx([300.0, 0.0])


def test_stale_api_metrics_count_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    ssn = _session([_annotated("n1", 10, 10)], _fixed([_item("n1", "3900m", stamp="2024-01-01T11:50:00Z")]),
                   monkeypatch)
    assert ssn.predicate(_task(ssn)).feasible.tolist() == [True]
    assert ssn.node_scores(_task(ssn), np.array([0])).tolist() == [0.0]


def test_an_unreachable_api_scores_every_node_0(monkeypatch: pytest.MonkeyPatch) -> None:
    def down() -> Any:
        raise ConnectionError("metrics.k8s.io: 503")

    broken = src.MetricsSource(down)
    broken.refresh()
    ssn = _session([_annotated("n1", 90, 90), _annotated("n2", 10, 10)], broken, monkeypatch)
    assert ssn.predicate(_task(ssn)).feasible.tolist() == [True, True]
    assert ssn.node_scores(_task(ssn), np.array([0, 1])).tolist() == [0.0, 0.0]


def test_without_a_metrics_api_source_the_annotation_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    ssn = _session([_annotated("n1", 90, 10)], None, monkeypatch, metrics={"type": "prometheus", "address": "x"})
    assert ssn.predicate(_task(ssn)).feasible.tolist() == [False]


def test_source_for_without_an_http_client_fails_softly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(src, "_sources", {})
    monkeypatch.setattr(src, "_client", object())
    s = src.source_for(src.SourceConf("metrics-api", "", 3600.0))
    try:
        assert s.snapshot() == ({}, None) and "no cluster client" in (s.error or "")
        assert src.source_for(src.SourceConf("metrics-api", "", 3600.0)) is s
    finally:
        s.stop()


def test_a_source_not_refreshed_for_too_long_counts_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even with a fresh timestamp in the item (devcluster stamps at the fetch), a list kept past five minutes
    (the refresh thread stopped) is not trusted."""
    t = [0.0]
    s = src.MetricsSource(lambda: {"items": [_item("n1", "3900m")]}, clock=lambda: t[0])
    s.refresh()
    hot = _session([_annotated("n1", 10, 10)], s, monkeypatch)
    assert hot.predicate(_task(hot)).feasible.tolist() == [False]
    t[0] = us.METRICS_ACTIVE + 1
    ssn = _session([_annotated("n1", 10, 10)], s, monkeypatch)
    assert ssn.predicate(_task(ssn)).feasible.tolist() == [True]
