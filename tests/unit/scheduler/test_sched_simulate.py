"""`lahar simulate`: sessions in-process on a YAML stream of objects; output shape of issue 5 item 6."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.scheduler.simulate import load_objects, simulate
from tests.builders import node, pod, podgroup, priority_class, queue


def objects() -> list[dict]:
    return [o.build() if hasattr(o, "build") else o for o in [
        queue("c1"), node("n1").alloc("4", "8Gi"), node("n2").alloc("2", "8Gi"),
        podgroup("gang").min(3).phase("Pending"),
        *(pod(f"gang-w-{i}").req("2", "1Gi").group("gang") for i in range(3)),
        podgroup("toobig").min(2).phase("Pending"),
        *(pod(f"toobig-w-{i}").req("3", "1Gi").group("toobig") for i in range(2)),
    ]]


def test_simulate_output_shape_and_decisions() -> None:
    out = simulate(objects(), sessions=2)
    assert set(out) == {"bindings", "evictions", "pipelined", "podgroups", "queues", "explain"}
    assert set(out["explain"]) == {"c1/toobig-w-0", "c1/toobig-w-1"}
    assert out["bindings"] == {"c1/gang-w-0": "n1", "c1/gang-w-1": "n1", "c1/gang-w-2": "n2"}
    assert out["evictions"] == [] and out["pipelined"] == {}
    assert out["podgroups"]["c1/gang"]["phase"] == "Running"
    assert out["podgroups"]["c1/toobig"]["phase"] == "Inqueue"
    cond = out["podgroups"]["c1/toobig"]["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("Unschedulable", "NotEnoughResources")
    assert out["queues"]["c1"]["allocated"] == {"cpu": "6", "memory": "3Gi"}


def test_simulate_preemption_across_sessions() -> None:
    conf_text = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""
    from lahar.scheduler.framework.conf import load
    objs = [o.build() if hasattr(o, "build") else o for o in [
        queue("c1"), node("n1").alloc("2", "4Gi"), priority_class("low", 1), priority_class("high", 100),
        podgroup("lo").min(1).phase("Running").priority_class("low"),
        pod("lo-w-0").req("1", "1Gi").group("lo").on("n1"), pod("lo-w-1").req("1", "1Gi").group("lo").on("n1"),
        podgroup("hi").min(1).phase("Inqueue").priority_class("high"), pod("hi-w-0").req("1", "1Gi").group("hi"),
    ]]
    out = simulate(objs, load(conf_text), sessions=2)
    assert out["evictions"] == ["c1/lo-w-1"]
    assert out["bindings"] == {"c1/hi-w-0": "n1"}  # pipelined in session 1, bound in session 2


def test_cli(tmp_path: Path) -> None:
    f = tmp_path / "objects.yaml"
    f.write_text(yaml.safe_dump_all(objects()))
    assert len(load_objects(f.read_text())) == len(objects())
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(f), "--sessions", "1", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["bindings"]["c1/gang-w-2"] == "n2"
    bad = tmp_path / "bad.conf"
    bad.write_text('actions: "allocate, nope"')
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(f), "--conf", str(bad)])
    assert r.exit_code == 2 and "failed to find Action nope" in r.output
    bad.write_text(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "predicates", "arguments": {"predicate.StorageCapacityScoringEnable": True,
                                             "volumebinding.shape": [{"utilization": 101, "score": 1}]}}]}]}))
    r = CliRunner().invoke(app, ["simulate", "--snapshot", str(f), "--conf", str(bad)])
    assert r.exit_code == 2, r.output
    assert "plugin predicates: arguments: volumebinding.shape[0].utilization: Invalid value: 101" in r.output


def test_documented_example_runs() -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "scheduler" / "simulate-gang.yaml"
    out = simulate(load_objects(path.read_text()))
    assert out["bindings"] == {"c1/gang-w-0": "n1", "c1/gang-w-1": "n1", "c1/gang-w-2": "n2"}
    assert out["podgroups"]["c1/toobig"]["phase"] == "Inqueue"
