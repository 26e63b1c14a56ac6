"""The pure parts of bench/versus.py (lahar against Volcano's scheduler on one real cluster): the run order, the
workload it writes, the percentiles and API latencies it reports and the apiserver request counts it reads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "versus.py"
_spec = importlib.util.spec_from_file_location("bench_versus", _PATH)
assert _spec is not None and _spec.loader is not None
versus = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_versus", versus)
_spec.loader.exec_module(versus)


@pytest.mark.parametrize(("rounds", "only", "expected"), [
    (1, None, ["volcano", "lahar"]),
    (2, None, ["volcano", "lahar", "lahar", "volcano"]),
    (3, None, ["volcano", "lahar", "lahar", "volcano", "volcano", "lahar"]),
    (2, "lahar", ["lahar", "lahar"]),
], ids=["one-round", "two-rounds-alternate", "three-rounds", "only-one-side"])
def test_order_interleaves_and_alternates(rounds: int, only: str | None, expected: list[str]) -> None:
    assert versus.order(rounds, only) == expected


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None),
    ([7.0], 99, 7.0),
    ([float(i) for i in range(1, 101)], 50, 50.0),
    ([float(i) for i in range(1, 101)], 99, 99.0),
    ([float(i) for i in range(100, 0, -1)], 100, 100.0),
    ([3.0, 1.0, 2.0], 50, 2.0),
], ids=["empty", "single", "p50-of-100", "p99-of-100", "p100-unsorted", "median-of-three"])
def test_percentile_nearest_rank(values: list[float], q: float, expected: float | None) -> None:
    assert versus.percentile(values, q) == expected


def _pod(created: str, scheduled: str | None, status: str = "True") -> dict[str, Any]:
    conds = [] if scheduled is None else [{"type": "PodScheduled", "status": status, "lastTransitionTime": scheduled}]
    return {"metadata": {"creationTimestamp": created}, "status": {"conditions": conds}}


@pytest.mark.parametrize(("pods", "expected"), [
    ([_pod("2026-12-01T10:00:00Z", "2026-12-01T10:00:03Z")], [3.0]),
    ([_pod("2026-12-01T10:00:00Z", None)], []),
    ([_pod("2026-12-01T10:00:00Z", "2026-12-01T10:00:05Z", status="False")], []),
    ([_pod("2026-12-01T23:59:59Z", "2026-12-02T00:00:01Z"), {"metadata": {}}], [2.0]),
], ids=["bound", "never-scheduled", "unschedulable-condition", "across-midnight-and-bare-pod"])
def test_api_latencies(pods: list[dict[str, Any]], expected: list[float]) -> None:
    assert versus.api_latencies(pods) == expected


def test_request_total_sums_by_verb() -> None:
    text = "\n".join([
        "# HELP apiserver_request_total Counter of apiserver requests",
        'apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 120',
        'apiserver_request_total{code="200",component="apiserver",resource="pods",verb="WATCH"} 3',
        'apiserver_request_total{code="201",component="apiserver",resource="bindings",verb="POST"} 80',
        'apiserver_request_duration_seconds_count{verb="POST"} 999',
    ])
    assert versus.request_total(text) == {"all": 203.0, "POST": 200.0, "WATCH": 3.0}


def test_jobs_are_defaulted_gangs_round_robin_over_queues() -> None:
    out = versus.jobs("ns", 20, 4, 3)
    assert len(out) == 5
    assert [j["spec"]["queue"] for j in out] == ["q0", "q1", "q2", "q0", "q1"]
    spec = out[0]["spec"]
    assert spec["minAvailable"] == 4 and spec["tasks"][0]["replicas"] == 4 and spec["schedulerName"] == "volcano"
    assert spec["tasks"][0]["template"]["spec"]["schedulerName"] == "volcano"


@pytest.mark.parametrize("gang", [0, 21], ids=["zero", "larger-than-pods"])
def test_bad_gang_names_the_flag(gang: int) -> None:
    with pytest.raises(ValueError, match="--gang must be between 1 and --pods"):
        versus.jobs("ns", 20, gang, 3)


def test_queues_are_weighted_and_include_default() -> None:
    out = versus.queues(3)
    assert [(q["metadata"]["name"], q["spec"]["weight"]) for q in out] == [("q0", 1), ("q1", 2), ("q2", 3),
                                                                            ("default", 1)]


def test_nodes_are_kwok_managed_with_gpus_on_every_fourth() -> None:
    out = versus.nodes(5)
    assert all(n["metadata"]["labels"]["type"] == "kwok" for n in out)
    assert [("nvidia.com/gpu" in n["status"]["allocatable"]) for n in out] == [True, False, False, False, True]


def test_table_means_and_ratios() -> None:
    results = [{"side": "volcano", "all_bound_s": 10.0, "scheduler_cpu_s": 8.0},
               {"side": "volcano", "all_bound_s": 14.0, "scheduler_cpu_s": 12.0},
               {"side": "lahar", "all_bound_s": 6.0, "scheduler_cpu_s": 2.0}]
    lines = versus.table(results).splitlines()
    assert lines[0] == "| measure | volcano (2 runs) | lahar (1 runs) | lahar / volcano |"
    assert "| apply → every pod bound (s) | 12.0 | 6.0 | 0.50× |" in lines
    assert "| scheduler CPU (s) | 10.0 | 2.0 | 0.20× |" in lines
    assert "| pods/s | — | — | — |" in lines


@pytest.mark.parametrize("argv", [["--gang", "0"], ["--pods", "4", "--gang", "8"], ["--nodes", "0"]],
                         ids=["gang-zero", "gang-above-pods", "no-nodes"])
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        versus.main(argv)
    assert info.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_lahar_env_keeps_the_data_dir_from_shadowing_the_package(tmp_path: Path) -> None:
    """Regression: a data dir `<cwd>/lahar` shadowed the package for `python -m lahar.cli` in the second run."""
    env = versus.lahar_env({"PATH": "/bin", "LAHAR_REDIS_URL": "x", "LAHAR_DATA_DIR": "y"}, "/kc", 6390, tmp_path)
    assert Path(env["LAHAR_DATA_DIR"]).name != "lahar" and Path(env["LAHAR_DATA_DIR"]).parent == tmp_path
    assert env["KUBECONFIG"] == "/kc" and env["REDIS_URL"] == "redis://127.0.0.1:6390/0"
    assert "LAHAR_REDIS_URL" not in env and env["PATH"] == "/bin"


def test_reads_by_resource_counts_gets_and_lists_per_resource() -> None:
    text = "\n".join([
        'apiserver_request_total{code="200",component="apiserver",resource="queues",scope="cluster",'
        'subresource="",verb="GET"} 7',
        'apiserver_request_total{code="404",component="apiserver",resource="queues",verb="GET"} 1',
        'apiserver_request_total{code="200",component="apiserver",resource="pods",subresource="log",verb="GET"} 2',
        'apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} 3',
        'apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 120',
    ])
    assert versus.reads_by_resource(text) == {"GET queues": 8.0, "GET pods/log": 2.0, "LIST pods": 3.0}


def test_reads_delta_keeps_what_changed_largest_first() -> None:
    before = {"GET queues": 5.0, "LIST pods": 3.0}
    after = {"GET queues": 9.0, "LIST pods": 3.0, "GET events": 10.0}
    assert list(versus.reads_delta(after, before).items()) == [("GET events", 10.0), ("GET queues", 4.0)]
