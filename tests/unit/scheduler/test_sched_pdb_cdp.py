"""pdb and cdp: the victim filters, Volcano's plugins/pdb/pdb_test.go and plugins/cdp/cdp_test.go cases as data,
the decision tables behind them, and a preempt session that each plugin keeps from evicting a protected pod."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.kube import selectors
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import cdp
from lahar.scheduler.plugins import pdb as pdbs
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, objs, pod, podgroup, priority_class, queue, tiers_conf

JOB = {"volcano.sh/job-name": "job-1"}


def _pdb(name: str, allowed: int | None, selector: dict[str, Any] | None = None, namespace: str = "default",
         disrupted: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    status: dict[str, Any] = {}
    if allowed is not None:
        status["disruptionsAllowed"] = allowed
    if disrupted:
        status["disruptedPods"] = {p: "2024-01-01T00:00:00Z" for p in disrupted}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector if selector is not None else {"matchLabels": JOB}}, "status": status}


PODS = [("default", "test-pod1", JOB), ("default", "test-pod2", JOB)]


# Volcano's TestPreemptableAndReclaimableFn, plus the cases of the loop it does not reach.
@pytest.mark.parametrize(("pdb_objs", "pods", "want"), [
    ([], PODS, [True, True]),
    ([_pdb("test-pdb", 0)], PODS, [False, False]),
    ([_pdb("test-pdb", 1)], PODS, [True, False]),
    ([_pdb("test-pdb", 5)], PODS, [True, True]),
    ([_pdb("test-pdb", 0, namespace="other")], PODS, [True, True]),
    ([_pdb("test-pdb", 0, {"matchLabels": {"app": "x"}})], PODS, [True, True]),
    ([_pdb("test-pdb", 0, disrupted=["test-pod1"])], PODS, [True, False]),
    ([_pdb("test-pdb", 1, disrupted=["test-pod1"])], PODS, [True, True]),  # pod1 does not use the one left
    ([_pdb("a", 1), _pdb("b", 0, {"matchLabels": {"role": "ps"}})],
     [("default", "p1", {**JOB, "role": "ps"}), ("default", "p2", JOB)], [False, True]),
    ([_pdb("test-pdb", None)], PODS, [False, False]),  # no status yet: nothing allowed
    ([_pdb("test-pdb", 0, {"matchExpressions": [{"key": "k", "operator": "Bogus"}]})], PODS, [True, True]),
    ([_pdb("test-pdb", 0, {})], [("default", "bare", {})], [False]),  # policy/v1: an empty selector selects all
], ids=["no-pdbs", "evict-0", "evict-1", "evict-5", "other-namespace", "selector-misses", "already-disrupted",
        "disrupted-does-not-count", "two-budgets-tightest-wins", "no-status", "bad-selector-skipped",
        "empty-selector-selects-all"])
def test_allowed_victims(pdb_objs: list[dict[str, Any]], pods: list[Any], want: list[bool]) -> None:
    assert pdbs.allowed_victims(pdbs.budgets(pdb_objs), pods) == want


def test_nil_selector_matches_nothing() -> None:
    obj = _pdb("p", 0)
    obj["spec"].pop("selector")
    (b,) = pdbs.budgets([obj])
    assert b.selector == selectors.nothing() and pdbs.allowed_victims([b], PODS) == [True, True]


NOW = dt.datetime(2024, 1, 1, 1, 0, 0, tzinfo=dt.UTC)


def _cdp_pod(where: str, value: str | None, scheduled_ago: float | None, phase: str | None = None) -> dict[str, Any]:
    p = pod("test-pod", "default")
    if value is not None:
        (p.label if where == "label" else p.annotate)(**{"volcano.sh/cooldown-time": value})
    if scheduled_ago is not None:
        p.phase("Running")
        p.obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": (
            NOW - dt.timedelta(seconds=scheduled_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}]
    if phase:
        p.phase(phase)
    return p.build()


# Volcano's Test_CooldownTimePlugin_podPreemptStableTime.
@pytest.mark.parametrize(("obj", "want"), [
    (_cdp_pod("annotation", "600s", 100), 600.0),
    (_cdp_pod("annotation", "600abcde", 100), None),
    (_cdp_pod("label", "10m", 100), 600.0),
    (_cdp_pod("label", "1h30m", None), 5400.0),
    (_cdp_pod("label", "", None), None),
    (_cdp_pod("annotation", None, 100), None),
], ids=["normal", "not-enabled", "label", "compound", "empty", "absent"])
def test_cooldown(obj: dict[str, Any], want: float | None) -> None:
    assert cdp.cooldown(obj) == want


def test_label_wins_over_annotation_even_when_malformed() -> None:
    p = pod("x").label(**{"volcano.sh/cooldown-time": "bad"}).annotate(**{"volcano.sh/cooldown-time": "600s"})
    assert cdp.cooldown(p.build()) is None


# Volcano's TestPreemptableFn (tasks 1-3), and the states it leaves out.
@pytest.mark.parametrize(("obj", "want"), [
    (_cdp_pod("annotation", "600s", 100), True),
    (_cdp_pod("annotation", "600abcde", 100), False),
    (_cdp_pod("annotation", "600s", 800), False),
    (_cdp_pod("annotation", "600s", 600), False),  # exactly cooled down: After() is strict
    (_cdp_pod("annotation", "600s", 100, phase="Pending"), False),
    (_cdp_pod("annotation", "600s", None, phase="Running"), False),  # no PodScheduled condition
    (_cdp_pod("annotation", None, 100), False),
], ids=["cooling-filtered", "invalid-value-victim", "cooled-down-victim", "boundary", "not-running",
        "no-scheduled-condition", "no-cooldown"])
def test_protected(obj: dict[str, Any], want: bool) -> None:
    assert cdp.protected(obj, NOW) is want


# --- both in a preempt session: the high-priority pod would evict the low one unless a plugin protects it ----

CONF_PLUGINS = ["priority", "gang", "conformance"], ["predicates", "proportion", "nodeorder"]


def _preempt(extra: str, *, victim: Any, pdb_objs: list[dict[str, Any]] = ()) -> list[str]:  # type: ignore[assignment]
    """a1 and a2 (low priority, pg1 minMember 1) fill n1; b1 (high) needs one of their places."""
    registry = in_tree_registry()
    first = [*CONF_PLUGINS[0], *([extra] if extra else [])]
    conf = confs.load(tiers_conf("enqueue, allocate, preempt", first, CONF_PLUGINS[1]),
                      actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(
        pods=objs([victim("a1"), victim("a2"), pod("b1", "default").req("1", "1G").group("pg2")]),
        nodes=objs([node("n1").alloc("2", "2G")]),
        podgroups=objs([podgroup("pg1", "default").min(1).phase("Running").priority_class("low"),
                        podgroup("pg2", "default").min(1).phase("Inqueue").priority_class("high")]),
        queues=objs([queue("c1")]), priority_classes=[priority_class("low", 10), priority_class("high", 1000)],
        poddisruptionbudgets=pdb_objs)
    now = lambda: NOW.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    ssn = Session(snap, conf, registry, uid="ssn-1", now=now)
    for name in conf.actions:
        registry.action(name, conf.action_arguments(name)).execute(ssn)
    decisions = ssn.close()
    return sorted(f"{e.namespace}/{e.name}" for e in decisions.evictions)


def _victim(name: str) -> Any:
    return pod(name, "default").req("1", "1G").group("pg1").on("n1").label(**JOB)


@pytest.mark.parametrize(("extra", "pdb_objs", "evicted"), [
    ("", [_pdb("p", 0)], ["default/a2"]),
    ("pdb", [_pdb("p", 0)], []),
    ("pdb", [_pdb("p", 1)], ["default/a2"]),
    ("pdb", [], ["default/a2"]),
], ids=["without-plugin", "pdb-protects", "pdb-allows-one", "pdb-without-budgets"])
def test_pdb_in_preempt(extra: str, pdb_objs: list[dict[str, Any]], evicted: list[str]) -> None:
    assert _preempt(extra, victim=_victim, pdb_objs=pdb_objs) == evicted


def _cooling(ago: float) -> Any:
    def build(name: str) -> Any:
        v = _victim(name).annotate(**{"volcano.sh/cooldown-time": "600s"})
        v.obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": (
            NOW - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}]
        return v
    return build


@pytest.mark.parametrize(("extra", "ago", "evicted"), [
    ("", 100, ["default/a2"]),
    ("cdp", 100, []),
    ("cdp", 800, ["default/a2"]),
], ids=["without-plugin", "cdp-protects", "cdp-cooled-down"])
def test_cdp_in_preempt(extra: str, ago: float, evicted: list[str]) -> None:
    assert _preempt(extra, victim=_cooling(ago)) == evicted
