"""deploy/grafana/lahar.json asks only for series lahar exports: every metric name in every query (and every
`by (...)` label) is read from the code's own registries — the scheduler's prometheus_client collectors, the
webhook's admission metrics, the policies registry and the controllers' (worker and dispatch) collectors — never
from a copied list, so a renamed metric fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "lahar.json"
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count"), "counter": ("_total",)}


def _scheduler_series() -> dict[str, set[str]]:
    from prometheus_client.metrics import MetricWrapperBase

    from lahar.scheduler.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    labels_of = {c._name: set(c._labelnames) for c in vars(metrics).values() if isinstance(c, MetricWrapperBase)}
    for group in vars(metrics).values():
        if isinstance(group, dict):
            labels_of |= {c._name: set(c._labelnames) for c in group.values() if isinstance(c, MetricWrapperBase)}
    out: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        labels = labels_of.get(family.name, labels_of.get(family.name + "_total", set()))
        for suffix in _SUFFIXES.get(family.type, ("",)):
            out[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return out


def _text_series(text: str, labels_of: dict[str, set[str]]) -> dict[str, set[str]]:
    """Series names from an exposition's `# TYPE` lines (these registries name counters with their _total)."""
    out: dict[str, set[str]] = {}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        for suffix in ("_bucket", "_sum", "_count") if kind == "histogram" else ("",):
            out[name + suffix] = labels_of.get(name, set()) | ({"le"} if suffix == "_bucket" else set())
    return out


def _webhook_series() -> dict[str, set[str]]:
    from lahar.policies import metrics as policy_metrics
    from lahar.webhooks import policystage  # noqa: F401 - registers lahar_policy_decisions_total
    from lahar.webhooks.metrics import Metrics

    m = Metrics()
    m.observe("/jobs/validate", "allowed", 0.01)  # an empty registry prints no families
    text = m.render()
    labels_of = {name: set(re.findall(r'(\w+)="', line)) for name, line in
                 re.findall(r"^(\w+?)(?:_bucket|_sum|_count)?(\{.*\}) ", text, re.M)}
    labels_of = {k: v - {"le"} for k, v in labels_of.items()}
    policy_counters = [c for c in vars(policy_metrics).values() if isinstance(c, policy_metrics.Counter)]
    policy_counters.append(policystage.DECISIONS)
    labels_of |= {c.name: set(c.labels) for c in policy_counters}
    return _text_series(text, labels_of) | _text_series(policy_metrics.REGISTRY.render(), labels_of)


class _Dispatcher:
    """Just what `controllers.metrics.DispatchStats` reads of a dispatcher."""

    stats: dict[str, int] = {}
    informers: dict[str, object] = {}

    def __init__(self) -> None:
        import threading

        self.leading = threading.Event()


class _Pipeline:
    """A Redis pipeline whose every reply is 0: the queue-depth collector then yields all of its families."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):  # noqa: ANN204 - llen, hlen, zcard, zcount
        def call(*_: object) -> None:
            self.calls += 1
        return call

    def execute(self) -> list[int]:
        return [0] * self.calls


class _Redis:
    def pipeline(self, transaction: bool = True) -> _Pipeline:
        return _Pipeline()


def _controller_series() -> dict[str, set[str]]:
    """The worker's and the dispatcher's families, with labels read from samples (one of each is recorded)."""
    from lahar.controllers import metrics as ctrl
    from lahar.controllers.context import Result

    worker = ctrl.ReconcileMetrics()
    with worker.timed("Job") as done:
        done(Result())
    worker.lock_wait("Job")
    worker.drop("Job")
    dispatch = ctrl.DispatchMetrics()
    job = {"metadata": {"namespace": "n", "name": "j"}, "spec": {"queue": "q"}}
    for phase in ctrl.PHASE_COUNTERS:
        dispatch.observe("Job", "MODIFIED", {**job, "status": {"state": {"phase": phase}}}, job)
    dispatch.registry.register(ctrl.DispatchStats(_Dispatcher()))
    dispatch.registry.register(ctrl.QueueDepth(_Redis()))
    out: dict[str, set[str]] = {}
    for registry in (worker.registry, dispatch.registry):
        for family in registry.collect():
            names = {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
            for name in names:
                out.setdefault(name, set())
            for sample in family.samples:
                if sample.name in names:
                    out[sample.name] |= set(sample.labels)
    for name in [n for n in out if n.endswith("_bucket")]:
        out[name].add("le")
    return out


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    return _scheduler_series() | _webhook_series() | _controller_series()


def _queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel.get("targets") or []:
            out.append((panel["title"], target["expr"]))
    return out


def problems(expr: str, exported: dict[str, set[str]]) -> list[str]:
    """What in one PromQL expression lahar does not export: unknown metric names, labels it does not carry."""
    found: list[str] = []
    used: list[str] = []
    for pattern in re.findall(r'__name__=~"([^"]+)"', expr):
        matches = [name for name in exported if re.fullmatch(pattern, name)]
        found += [] if matches else [f"no series matches {pattern!r}"]
        used += matches
    bare = re.sub(r'\{[^}]*\}', "", expr)
    for name in re.findall(r"\b((?:volcano|lahar)_[A-Za-z0-9_]+)\b", bare):
        if name not in exported:
            found.append(f"unknown metric {name}")
        used.append(name)
    labels = set().union(*(exported.get(n, set()) for n in used)) if used else set()
    for group in re.findall(r"\bby \(([^)]*)\)", expr):
        for label in (x.strip() for x in group.split(",")):
            if used and label not in labels:
                found.append(f"label {label} not on {sorted(set(used))}")
    return found


def test_every_query_uses_exported_series(exported: dict[str, set[str]]) -> None:
    bad = [f"{title}: {expr}: {p}" for title, expr in _queries() for p in problems(expr, exported)]
    assert not bad, "\n".join(bad)


def test_the_dashboard_covers_scheduler_webhook_and_policies(exported: dict[str, set[str]]) -> None:
    text = " ".join(expr for _, expr in _queries())
    for family in ("volcano_e2e_scheduling_latency_milliseconds", "volcano_schedule_attempts",
                   "lahar_admission_requests_total", "lahar_admission_duration_seconds",
                   "lahar_config_reload_failures_total", "lahar_policy_decisions_total",
                   "lahar_reconcile_total", "lahar_reconcile_duration_seconds", "lahar_reconcile_lock_waits_total",
                   "lahar_workqueue_depth", "lahar_workqueue_timers", "volcano_job_completed_phase_count",
                   "volcano_job_failed_phase_count"):
        assert family in text, family


CHECKS = [
    ("known", "sum(rate(lahar_admission_requests_total[5m]))", []),
    ("unknown-name", "rate(volcano_made_up_total[5m])", ["unknown metric volcano_made_up_total"]),
    ("bad-label", "sum by (queue) (rate(lahar_admission_requests_total[5m]))", ["label queue"]),
    ("regex-miss", 'rate({__name__=~"volcano_nothing(_total)?"}[5m])', ["no series matches"]),
    ("selector-ignored", 'lahar_admission_requests_total{path="/jobs/validate"}', []),
    ("controller-label", "sum by (kind, result) (rate(lahar_reconcile_total[5m]))", []),
    ("controller-bad-label", "sum by (queue) (rate(lahar_reconcile_total[5m]))", ["label queue"]),
    ("phase-counter-no-total", "rate(volcano_job_completed_phase_count_total[5m])", ["unknown metric"]),
]


@pytest.mark.parametrize(("expr", "want"), [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_the_checker_catches_what_it_should(exported: dict[str, set[str]], expr: str, want: list[str]) -> None:
    got = problems(expr, exported)
    assert len(got) == len(want) and all(w in g for w, g in zip(want, got, strict=True)), got


def test_panels_use_the_datasource_variable_and_unique_ids() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource"}
    for p in dash["panels"]:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
