"""`lahar simulate --workload`: trace parsing, the simulated-time replay (waits, utilisation, queue shares), the plot
and the documented example trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lahar.scheduler import workload
from lahar.scheduler.workload import TraceError, load_trace, parse_duration, replay

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "scheduler" / "trace.yaml"


@pytest.mark.parametrize(("value", "seconds"), [
    (30, 30.0), (2.5, 2.5), ("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("45", 45.0),
    (" 1.5 m ", 90.0),
], ids=["int", "float", "ms", "s", "m", "h", "bare-string", "spaces"])
def test_parse_duration(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["soon", "-3s", "1d", True, -1], ids=["word", "negative-str", "days", "bool",
                                                                        "negative"])
def test_parse_duration_rejects(value: object) -> None:
    with pytest.raises(TraceError):
        parse_duration(value)


NODES = "cluster: {nodes: [{name: n, count: 2, allocatable: {cpu: '4', memory: 8Gi}}]}\n"


@pytest.mark.parametrize(("text", "message"), [
    ("tick: 1s\n", "cluster: give a profile"),
    (NODES + "color: blue\n", "unknown field(s): color"),
    (NODES + "jobs: [{name: a, queue: nope}]\n", "jobs[0]: unknown queue 'nope'"),
    (NODES + "jobs: [{name: a, gang: 4, replicas: 2}]\n", "jobs[0]: need 1 <= gang <= replicas"),
    (NODES + "jobs: [{name: a, duration: forever}]\n", "jobs[0].duration: 'forever' is not a duration"),
    (NODES + "jobs: [{name: a}, {name: a}]\n", "jobs[1]: duplicate job name 'a'"),
    (NODES + "tick: 0\n", "tick: must be positive"),
    ("cluster: {nodes: [{name: x}]}\n", "cluster.nodes[0]: needs name and allocatable"),
], ids=["no-cluster", "unknown-field", "unknown-queue", "gang-over-replicas", "bad-duration", "duplicate",
        "zero-tick", "node-without-allocatable"])
def test_trace_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(TraceError) as e:
        load_trace(text)
    assert message in str(e.value)


def test_trace_expands_repeats_and_nodes() -> None:
    tr = load_trace(NODES + "queues: [{name: q, weight: 3}]\n"
                    "jobs: [{name: j, queue: q, arrival: 10s, every: 5s, repeat: 3, gang: 2, requests: {cpu: 1}}]\n")
    assert [n["metadata"]["name"] for n in tr.nodes] == ["n-0", "n-1"]
    assert [(j.name, j.arrival, j.replicas) for j in tr.jobs] == [("j-0", 10.0, 2), ("j-1", 15.0, 2),
                                                                  ("j-2", 20.0, 2)]
    assert tr.queues[0]["spec"]["weight"] == 3


ONE_NODE = """
tick: 1s
cluster: {nodes: [{name: n1, allocatable: {cpu: "4", memory: 8Gi}}]}
queues: [{name: q}]
jobs:
- {name: first, queue: q, arrival: 0s, gang: 3, requests: {cpu: "1", memory: 1Gi}, duration: 30s}
- {name: second, queue: q, arrival: 5s, gang: 2, requests: {cpu: "1", memory: 1Gi}, duration: 10s}
"""


def test_gang_waits_for_the_first_to_finish_in_simulated_time() -> None:
    r = replay(load_trace(ONE_NODE))
    jobs = {j["name"]: j for j in r["jobs"]}
    assert (jobs["first"]["bound_at"], jobs["first"]["wait_s"], jobs["first"]["finished_at"]) == (0.0, 0.0, 30.0)
    # 3 of 4 CPUs busy until t=30: the gang of 2 cannot start half-way, it starts whole at 30
    assert (jobs["second"]["bound_at"], jobs["second"]["wait_s"], jobs["second"]["finished_at"]) == (30.0, 25.0, 40.0)
    s = r["summary"]
    assert s["jobs_finished"] == 2 and not s["stuck"] and s["jobs_never_bound"] == []
    assert s["binds"] == 5 and s["simulated_s"] == 40.0
    tl = r["timeline"]
    by_t = dict(zip(tl["t"], tl["utilisation"]["cpu"], strict=True))
    assert by_t[0.0] == 0.75 and by_t[30.0] == 0.5 and by_t[40.0] == 0.0
    assert dict(zip(tl["t"], tl["queue_share"]["q"], strict=True))[0.0] == 0.75
    # time-weighted: 0.75 for 30 s, 0.5 for 10 s
    assert s["mean_utilisation"]["cpu"] == pytest.approx((0.75 * 30 + 0.5 * 10) / 40, abs=1e-3)
    # the clock jumped between events: a handful of sessions, not 40
    assert s["sessions"] <= 4


def test_gang_that_never_fits_is_reported_not_looped() -> None:
    r = replay(load_trace(ONE_NODE.replace("gang: 2,", "gang: 5,")))
    s = r["summary"]
    assert s["stuck"] and s["jobs_never_bound"] == ["second"] and s["jobs_finished"] == 1
    assert next(j for j in r["jobs"] if j["name"] == "second")["wait_s"] is None


def test_horizon_stops_the_replay() -> None:
    r = replay(load_trace(ONE_NODE + "horizon: 20s\n"))
    assert r["summary"]["simulated_s"] <= 20 and r["summary"]["jobs_finished"] == 0


def test_queue_shares_follow_weights() -> None:
    text = """
cluster: {nodes: [{name: n, count: 2, allocatable: {cpu: "4", memory: 16Gi}}]}
queues: [{name: big, weight: 3}, {name: small, weight: 1}]
jobs:
- {name: b, queue: big, gang: 1, requests: {cpu: "1", memory: 1Gi}, duration: 60s, repeat: 8}
- {name: s, queue: small, gang: 1, requests: {cpu: "1", memory: 1Gi}, duration: 60s, repeat: 8}
"""
    r = replay(load_trace(text))
    share0 = {q: v[0] for q, v in r["timeline"]["queue_share"].items()}
    assert share0 == {"big": 0.75, "small": 0.25}  # 6 and 2 of 8 CPUs: proportion's deserved by weight


def test_progress_callback_sees_simulated_time() -> None:
    seen: list[tuple[float, int, int]] = []
    replay(load_trace(ONE_NODE), progress=lambda t, done, total: seen.append((t, done, total)))
    assert seen[0] == (0.0, 0, 2) and seen[-1] == (40.0, 2, 2)
    assert [t for t, _, _ in seen] == sorted(t for t, _, _ in seen)


def _profile_nodes(name: str, count: int) -> list[dict]:
    from lahar.devcluster import nodes, profiles

    return nodes.build(profiles.load(name), count)


def test_documented_example_trace_replays() -> None:
    tr = load_trace(EXAMPLE.read_text())
    r = replay(tr, nodes=_profile_nodes(tr.profile, tr.count))
    s = r["summary"]
    assert s["nodes"] == 4 and s["jobs"] == 31 and s["jobs_finished"] == 31 and not s["stuck"]
    jobs = {j["name"]: j for j in r["jobs"]}
    assert jobs["train-0"]["wait_s"] == 0.0
    # the wide gang of 8 waits for 8 CPUs free at once, and binds whole
    assert jobs["wide"]["wait_s"] > 0 and jobs["wide"]["finished_at"] == jobs["wide"]["bound_at"] + 90
    assert all(0.0 <= u <= 1.0 for u in r["timeline"]["utilisation"]["cpu"])
    assert all(sum(v) <= 1.0 + 1e-9 for v in zip(*r["timeline"]["queue_share"].values(), strict=True))


def test_cli_workload_json_png_and_html(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from lahar.cli import app

    png, page = tmp_path / "out.png", tmp_path / "out.html"
    r = CliRunner().invoke(app, ["simulate", "--workload", str(EXAMPLE), "-o", "json", "--plot", str(png),
                                 "--html", str(page), "--quiet"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["summary"]["jobs_finished"] == 31
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "<svg" in text and "jobs_finished" in text and "<script" not in text


def test_cli_without_matplotlib_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lahar.cli import app

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    r = CliRunner().invoke(app, ["simulate", "--workload", str(EXAMPLE), "--plot", str(tmp_path / "x.png")])
    assert r.exit_code == 2
    assert "pip install 'lahar[plot]'" in r.output
    with pytest.raises(workload.TraceError):
        load_trace("cluster: {}")


def test_cli_needs_exactly_one_input(tmp_path: Path) -> None:
    from lahar.cli import app

    r = CliRunner().invoke(app, ["simulate"])
    assert r.exit_code == 2 and "exactly one of --snapshot or --workload" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {profile: no-such-profile, count: 1}\n")
    r = CliRunner().invoke(app, ["simulate", "--workload", str(bad), "--quiet"])
    assert r.exit_code == 2 and "no-such-profile" in r.output
