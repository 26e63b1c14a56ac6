"""`lahar pod|podgroup|jobflow|jobtemplate` and the short scripts (vsub, vjobs, ...): vcctl's flags, columns and
messages (pkg/cli/{pod,jobflow,jobtemplate,v*}), row builders as table tests, commands against the in-memory cluster."""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.commands import vcgroups, vshort
from lahar.kube.apiserver.memory import MemoryClient

NOW = dt.datetime(2024, 1, 4, 0, 0, tzinfo=dt.UTC)
THREE_DAYS_AGO = "2024-01-01T00:00:00Z"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def client() -> MemoryClient:
    return MemoryClient.with_crds()


def run(client: MemoryClient, *args: str, entry: Any = app) -> Any:
    return CliRunner().invoke(entry, list(args), obj={"client": client})


def namespace(client: MemoryClient, name: str) -> None:
    client.create(client.registry.get("", "v1", "namespaces"),
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def rt(client: MemoryClient, plural: str) -> Any:
    group = {"pods": ("", "v1"), "podgroups": ("scheduling.volcano.sh", "v1beta1"),
             "jobs": ("batch.volcano.sh", "v1alpha1"), "queues": ("scheduling.volcano.sh", "v1beta1"),
             "commands": ("bus.volcano.sh", "v1alpha1"), "jobflows": ("flow.volcano.sh", "v1alpha1"),
             "jobtemplates": ("flow.volcano.sh", "v1alpha1")}[plural]
    return client.registry.get(*group, plural)


def pod(name: str = "my-pod", *, phase: str = "Running", labels: dict | None = None, containers: int = 1,
        statuses: list | None = None, init: list | None = None, init_statuses: list | None = None,
        conditions: list | None = None, deleting: bool = False, reason: str = "", namespace: str = "default",
        annotations: dict | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "creationTimestamp": THREE_DAYS_AGO,
                            "labels": labels or {}, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-03T23:59:00Z"
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or [],
                              "containerStatuses": statuses or [], "initContainerStatuses": init_statuses or []}
    if reason:
        status["reason"] = reason
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": status,
            "spec": {"containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)],
                     "initContainers": init or []}}


RUNNING_READY = {"name": "c0", "ready": True, "restartCount": 0, "state": {"running": {}}}


@pytest.mark.parametrize(("p", "want"), [
    (pod(), ("0/1", "Running", "0")),
    (pod(statuses=[RUNNING_READY]), ("1/1", "Running", "0")),
    (pod(phase="Pending", statuses=[{"name": "c0", "state": {"waiting": {"reason": "ContainerCreating"}}}]),
     ("0/1", "ContainerCreating", "0")),
    (pod(phase="Succeeded", statuses=[{"name": "c0", "state": {"terminated": {"reason": "Completed"}}}]),
     ("0/1", "Completed", "0")),
    (pod(phase="Failed", statuses=[{"name": "c0", "state": {"terminated": {"exitCode": 137}}}]),
     ("0/1", "ExitCode:137", "0")),
    (pod(phase="Failed", statuses=[{"name": "c0", "state": {"terminated": {"exitCode": 1, "signal": 9}}}]),
     ("0/1", "Signal:9", "0")),
    (pod(phase="Pending", init=[{"name": "i0"}], init_statuses=[{"name": "i0", "state": {"running": {}}}]),
     ("0/1", "Init:0/1", "0")),
    (pod(phase="Pending", init=[{"name": "i0"}],
         init_statuses=[{"name": "i0", "state": {"terminated": {"reason": "Error", "exitCode": 1}}}]),
     ("0/1", "Init:Error", "0")),
    (pod(phase="Pending", init=[{"name": "i0"}],
         init_statuses=[{"name": "i0", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]),
     ("0/1", "Init:ImagePullBackOff", "0")),
    (pod(phase="Pending", reason="", conditions=[{"type": "PodScheduled", "status": "False",
                                                  "reason": "SchedulingGated"}]), ("0/1", "SchedulingGated", "0")),
    (pod(statuses=[RUNNING_READY], deleting=True), ("1/1", "Terminating", "0")),
    (pod(phase="Succeeded", deleting=True), ("0/1", "Succeeded", "0")),
    (pod(reason="NodeLost", deleting=True), ("0/1", "Unknown", "0")),
    (pod(reason="Evicted", phase="Failed"), ("0/1", "Evicted", "0")),
    (pod(statuses=[{**RUNNING_READY, "restartCount": 2,
                    "lastState": {"terminated": {"finishedAt": "2024-01-03T23:55:00Z"}}}]), ("1/1", "Running",
                                                                                             "2 (5m ago)")),
    (pod(containers=2, statuses=[RUNNING_READY, {"name": "c1", "state": {"terminated": {"reason": "Completed"}}}],
         conditions=[{"type": "Ready", "status": "True"}]), ("1/2", "Running", "0")),
    (pod(containers=2, statuses=[RUNNING_READY, {"name": "c1", "state": {"terminated": {"reason": "Completed"}}}]),
     ("1/2", "NotReady", "0")),
    (pod(init=[{"name": "side", "restartPolicy": "Always"}], statuses=[RUNNING_READY],
         init_statuses=[{"name": "side", "started": True, "ready": True, "state": {"running": {}}}],
         conditions=[{"type": "Initialized", "status": "True"}]), ("2/2", "Running", "0")),
], ids=["not-ready", "ready", "waiting-reason", "completed", "exit-code", "signal", "init-running", "init-error",
        "init-waiting", "scheduling-gated", "terminating", "deleted-but-terminal", "node-lost", "status-reason",
        "restarts-with-age", "completed-but-one-running-ready", "completed-but-one-running-not-ready", "sidecar"])
def test_pod_status_is_kubectls(p: dict, want: tuple[str, str, str]) -> None:
    assert vcgroups.pod_status(p, NOW) == want


def test_pod_rows_match_vcctls_sample() -> None:
    """pkg/cli/pod/pod_test.go: `Name Ready Status Restart Age` / `my-pod 0/1 Running 0 3d`."""
    assert vcgroups.pod_rows([pod()], NOW) == (("Name", "Ready", "Status", "Restart", "Age"),
                                               [("my-pod", "0/1", "Running", "0", "3d")])
    header, rows = vcgroups.pod_rows([pod(namespace="team-a")], NOW, all_namespaces=True, wide=True)
    assert header == ("Namespace", "Name", "Ready", "Status", "Restart", "Age", "Job", "Task", "IP", "Node")
    assert rows == [("team-a", "my-pod", "0/1", "Running", "0", "3d", "<none>", "<none>", "<none>", "<none>")]


JOB_POD = {"volcano.sh/job-name": "j1", "volcano.sh/task-spec": "worker", "volcano.sh/queue-name": "q1"}


@pytest.mark.parametrize(("kwargs", "want"), [
    ({}, ["a/j1-master-0", "default/j1-worker-0", "default/j2-worker-0"]),
    ({"job": "j1"}, ["a/j1-master-0", "default/j1-worker-0"]),
    ({"job": "j1", "task": "worker"}, ["default/j1-worker-0"]),
    ({"task": "worker"}, ["default/j1-worker-0", "default/j2-worker-0"]),
    ({"queue": "q1"}, ["a/j1-master-0", "default/j1-worker-0", "default/plain"]),
    ({"job": "nope"}, []),
], ids=["every-job-pod", "by-job", "by-job-and-task", "by-task", "by-queue-label-or-annotation", "unknown-job"])
def test_select_pods(kwargs: dict, want: list[str]) -> None:
    pods = [pod("j2-worker-0", labels={**JOB_POD, "volcano.sh/job-name": "j2", "volcano.sh/queue-name": "q2"}),
            pod("j1-worker-0", labels=JOB_POD),
            pod("j1-master-0", namespace="a", labels={**JOB_POD, "volcano.sh/task-spec": "master"}),
            pod("plain", annotations={"scheduling.volcano.sh/queue-name": "q1"})]
    got = vcgroups.select_pods(pods, **kwargs)
    assert [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in got] == want


def flow(name: str = "test-jobflow", phase: str = "Succeed") -> dict[str, Any]:
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": THREE_DAYS_AGO},
            "spec": {"jobRetainPolicy": "delete", "flows": [{"name": "a"}, {"name": "b", "dependsOn": {
                "targets": ["a"]}}]}, "status": {"state": {"phase": phase}}}


@pytest.mark.parametrize(("rows", "want"), [
    (vcgroups.jobflow_rows([flow()], NOW),
     (("Name", "Namespace", "Phase", "Age"), [("test-jobflow", "default", "Succeed", "3d")])),
    (vcgroups.jobflow_rows([flow()], NOW, wide=True),
     (("Name", "Namespace", "Phase", "Age", "Flows", "RetainPolicy"),
      [("test-jobflow", "default", "Succeed", "3d", "a,b", "delete")])),
    (vcgroups.jobflow_rows([{"metadata": {"name": "new", "namespace": "ns"}}], NOW),
     (("Name", "Namespace", "Phase", "Age"), [("new", "ns", "", "<unknown>")])),
    (vcgroups.jobtemplate_rows([{"metadata": {"name": "a", "namespace": "default"}}]),
     (("Name", "Namespace"), [("a", "default")])),
    (vcgroups.jobtemplate_rows([{"metadata": {"name": "a", "namespace": "default"},
                                 "spec": {"tasks": [{"name": "w"}]}, "status": {"jobDependsOnList": ["f-a"]}}],
                               wide=True),
     (("Name", "Namespace", "Tasks", "Jobs"), [("a", "default", "w", "f-a")])),
    (vcgroups.podgroup_rows([{"metadata": {"name": "pg", "namespace": "n", "creationTimestamp": THREE_DAYS_AGO},
                              "spec": {"minMember": 2, "queue": "q"}, "status": {"phase": "Running", "running": 2}}],
                            NOW, all_namespaces=True, wide=True),
     (("Namespace", "Name", "Status", "MinMember", "Runnings", "Age", "Queue"),
      [("n", "pg", "Running", "2", "2", "3d", "q")])),
    (vshort.vqueue_rows([{"metadata": {"name": "default"}, "spec": {"weight": 1},
                          "status": {"state": "Open", "running": 3, "completed": 9}}]),
     (("Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown"),
      [("default", "1", "Open", "0", "0", "3", "0")])),
], ids=["jobflow-vcctl-sample", "jobflow-wide", "jobflow-no-status", "jobtemplate", "jobtemplate-wide",
        "podgroup-wide-all-namespaces", "vqueues"])
def test_columns(rows: tuple, want: tuple) -> None:
    assert rows == want


@pytest.mark.parametrize(("env", "flags", "want"), [
    ({}, {}, ("busybox", "default", "volcano")),
    ({"VOLCANO_DEFAULT_IMAGE": "nginx", "VOLCANO_DEFAULT_JOB_NAMESPACE": "team",
      "VOLCANO_SCHEDULER_NAME": "other"}, {}, ("nginx", "team", "other")),
    ({"VOLCANO_DEFAULT_IMAGE": "nginx"}, {"image": "alpine", "namespace": "x", "scheduler": "s"},
     ("alpine", "x", "s")),
], ids=["built-in", "environment", "flags-win"])
def test_vsub_defaults(env: dict, flags: dict, want: tuple) -> None:
    assert vshort.vsub_defaults(env, **{"image": "", "namespace": "", "scheduler": "", **flags}) == want


@pytest.mark.parametrize(("text", "message"), [
    ("- a\n- b\n", "document 1: expected a JobFlow object, got list"),
    ("kind: Job\nmetadata: {name: x}\n", "document 1: kind is 'Job', expected JobFlow"),
    ("kind: JobFlow\nmetadata: {name: x}\n---\nspec: {}\n", "document 2: metadata.name is required"),
], ids=["not-a-mapping", "other-kind", "no-name"])
def test_yaml_docs_errors_name_the_document(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        vcgroups.yaml_docs(text, "JobFlow")


def test_yaml_docs_defaults_namespace_and_skips_empty_documents() -> None:
    docs = vcgroups.yaml_docs("---\nmetadata: {name: a}\n---\n---\nmetadata: {name: b, namespace: x}\n", "JobFlow")
    assert [(d["kind"], d["metadata"]["namespace"]) for d in docs] == [("JobFlow", "default"), ("JobFlow", "x")]


@pytest.mark.parametrize(("fmt", "objects", "want"), [
    ("yaml", [{"kind": "JobFlow", "metadata": {"name": "a", "managedFields": [{"manager": "x"}]}}],
     "kind: JobFlow\nmetadata:\n  name: a\n"),
    ("json", [{"kind": "JobFlow", "metadata": {"name": "a"}}],
     '{\n  "kind": "JobFlow",\n  "metadata": {\n    "name": "a"\n  }\n}\n'),
    ("yaml", [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
     "metadata:\n  name: a\n\n\nmetadata:\n  name: b\n"),
], ids=["yaml-without-managed-fields", "json-two-space", "several-blank-line-apart"])
def test_describe_text(fmt: str, objects: list, want: str) -> None:
    assert vcgroups.describe_text(objects, fmt) == want


def test_describe_text_refuses_other_formats() -> None:
    with pytest.raises(ValueError, match="unsupported format 'wide': use yaml or json"):
        vcgroups.describe_text([], "wide")


# -- commands against the in-memory cluster --------------------------------------------------------------------------


def test_pod_list_by_job_and_task(client: MemoryClient) -> None:
    for p in (pod("j1-worker-0", labels=JOB_POD), pod("j1-master-0", labels={**JOB_POD, "volcano.sh/task-spec": "m"}),
              pod("unrelated")):
        client.create(rt(client, "pods"), p, namespace="default")
    lines = run(client, "pod", "list").output.splitlines()
    assert lines[0].split() == list(vcgroups.POD_COLUMNS)
    assert [line.split()[0] for line in lines[1:]] == ["j1-master-0", "j1-worker-0"]
    assert [line.split()[0] for line in run(client, "pod", "list", "-j", "j1", "-t", "m").output.splitlines()[1:]] == [
        "j1-master-0"]
    assert run(client, "pod", "list", "-j", "nope").output == "No resources found\n"
    res = run(client, "pod", "list", "-j", "j1", "-q", "other")
    assert res.exit_code == 1 and "the input vcjob j1 does not match the queue other" in res.output
    assert json.loads(run(client, "pod", "list", "-o", "json", "--all-namespaces").stdout)["kind"] == "List"
    assert run(client, "pod", "list", "-o", "wide").output.splitlines()[0].split()[-4:] == ["Job", "Task", "IP", "Node"]


def test_podgroup_list_and_get(client: MemoryClient) -> None:
    client.create(rt(client, "podgroups"), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                            "metadata": {"name": "pg1"}, "spec": {"minMember": 2, "queue": "q"}},
                  namespace="default")
    lines = run(client, "podgroup", "list").output.splitlines()
    assert lines[0].split() == list(vcgroups.PODGROUP_COLUMNS) and lines[1].split()[:1] == ["pg1"]
    assert run(client, "podgroup", "list", "-q", "other").output == "No resources found\n"
    assert run(client, "podgroup", "get", "pg1", "-o", "name").output == "podgroup.scheduling.volcano.sh/pg1\n"
    assert run(client, "podgroup", "get", "-N", "pg1", "-o", "wide").output.splitlines()[1].split()[-1] == "q"
    res = run(client, "podgroup", "get", "nope")
    assert res.exit_code == 1 and "not found" in res.output


TEMPLATES = """apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: a}
spec: {minAvailable: 1, tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]}
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: b, namespace: team}
spec: {minAvailable: 1, tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]}
"""
FLOW = """apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: f}
spec: {jobRetainPolicy: retain, flows: [{name: a}, {name: b, dependsOn: {targets: [a]}}]}
"""


def test_jobtemplate_create_list_get_delete(client: MemoryClient, tmp_path: Path) -> None:
    namespace(client, "team")
    path = tmp_path / "jt.yaml"
    path.write_text(TEMPLATES)
    res = run(client, "jobtemplate", "create", "-f", str(path))
    assert res.exit_code == 0, res.output
    assert res.output == "Created JobTemplate: default/a\nCreated JobTemplate: team/b\n"
    again = run(client, "jobtemplate", "create", "-f", str(path))
    assert again.exit_code == 1 and again.output.count("Failed to create JobTemplate:") == 2
    lines = run(client, "jobtemplate", "list").output.splitlines()
    assert lines[0].split() == ["Name", "Namespace"] and [line.split() for line in lines[1:]] == [["a", "default"]]
    assert len(run(client, "jobtemplate", "list", "-A").output.splitlines()) == 3
    assert run(client, "jobtemplate", "get", "-N", "b", "-n", "team").output.splitlines()[1].split() == ["b", "team"]
    assert yaml.safe_load(run(client, "jobtemplate", "get", "a", "-o", "yaml").stdout)["kind"] == "JobTemplate"
    assert yaml.safe_load(run(client, "jobtemplate", "describe", "b", "-n", "team").stdout)["metadata"]["name"] == "b"
    assert run(client, "jobtemplate", "describe", "-n", "empty").output == "No resources found\n"
    assert run(client, "jobtemplate", "delete", "-N", "a").output == "Deleted JobTemplate: default/a\n"
    res = run(client, "jobtemplate", "delete", "-f", str(path))
    assert res.exit_code == 1
    assert "Failed to delete JobTemplate:" in res.output and "Deleted JobTemplate: team/b" in res.output
    assert client.list(rt(client, "jobtemplates"))["items"] == []


def test_jobflow_create_list_get_delete(client: MemoryClient, tmp_path: Path) -> None:
    path = tmp_path / "jf.yaml"
    path.write_text(FLOW)
    assert run(client, "jobflow", "create", "-f", str(path)).output == "Created JobFlow: default/f\n"
    assert run(client, "jobflow", "list").output.splitlines()[0].split() == list(vcgroups.JOBFLOW_COLUMNS)
    assert run(client, "jobflow", "list", "-o", "wide").output.splitlines()[1].split()[-2:] == ["a,b", "retain"]
    assert run(client, "jobflow", "get", "f").output.splitlines()[1].split()[:2] == ["f", "default"]
    assert json.loads(run(client, "jobflow", "get", "f", "-o", "json").stdout)["spec"]["flows"][1]["name"] == "b"
    assert run(client, "jobflow", "list", "-o", "name").output == "jobflow.flow.volcano.sh/f\n"
    described = yaml.safe_load(run(client, "jobflow", "describe", "-N", "f").stdout)
    assert (described["kind"], described["spec"]["jobRetainPolicy"]) == ("JobFlow", "retain")
    assert json.loads(run(client, "jobflow", "describe", "-o", "json").stdout)["metadata"]["name"] == "f"
    bad = run(client, "jobflow", "describe", "-o", "wide")
    assert bad.exit_code == 2 and "unsupported format 'wide'" in bad.output
    assert run(client, "jobflow", "delete", "-f", str(path)).output == "Deleted JobFlow: default/f\n"
    assert run(client, "jobflow", "list").output == "No resources found\n"


@pytest.mark.parametrize(("args", "message"), [
    (["jobflow", "create"], "the path to the YAML file (--file / -f) must be specified"),
    (["jobflow", "create", "-f", "missing.yaml"], "failed to read missing.yaml"),
    (["jobflow", "get"], "name is mandatory to get the particular jobflow details"),
    (["jobflow", "delete"], "jobflow name must be specified"),
    (["jobflow", "delete", "nope"], "not found"),
    (["jobtemplate", "get"], "name is mandatory to get the particular job template details"),
    (["jobtemplate", "delete"], "job template name must be specified"),
    (["podgroup", "get"], "name is mandatory to get the particular podgroup details"),
    (["jobflow", "list", "-o", "table"], "unable to match a printer suitable for the output format"),
    (["pod", "list", "-o", "table"], "unable to match a printer suitable for the output format"),
], ids=["create-no-file", "create-missing-file", "get-no-name", "delete-no-name", "delete-missing", "jt-get-no-name",
        "jt-delete-no-name", "pg-get-no-name", "jobflow-bad-output", "pod-bad-output"])
def test_errors_name_the_problem(client: MemoryClient, args: list[str], message: str) -> None:
    res = run(client, *args)
    assert res.exit_code != 0
    assert message in res.output


def test_job_run_file_that_is_not_a_job_object_is_a_clear_error(client: MemoryClient, tmp_path: Path) -> None:
    """Regression: a YAML list (or scalar) in `job run -f` crashed with an AttributeError."""
    path = tmp_path / "job.yaml"
    path.write_text("- kind: Job\n")
    res = run(client, "job", "run", "-f", str(path))
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert "failed to unmarshal file" in res.output and "list" in res.output


# -- the short scripts -----------------------------------------------------------------------------------------------


def test_vsub_flags_and_environment(client: MemoryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace(client, "team")
    monkeypatch.setenv("VOLCANO_DEFAULT_JOB_NAMESPACE", "team")
    res = run(client, "-n", "j1", "-i", "nginx", "-r", "2", "-c", "sh -c 'sleep 10'", entry=vshort.vsub)
    assert res.exit_code == 0, res.output
    assert res.output == "run job j1 successfully\n"
    job = client.get(rt(client, "jobs"), "j1", namespace="team")
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert (job["spec"]["schedulerName"], container["image"], container["command"]) == (
        "volcano", "nginx", ["sh", "-c", "sleep 10"])
    assert "job name cannot be left blank" in run(client, entry=vshort.vsub).output


def test_vjobs_lists_or_views(client: MemoryClient) -> None:
    run(client, "-n", "j1", entry=vshort.vsub)
    lines = run(client, entry=vshort.vjobs).output.splitlines()
    assert lines[0].split()[:3] == ["Name", "Creation", "Phase"] and lines[1].split()[0] == "j1"
    assert run(client, "--all-namespaces", entry=vshort.vjobs).output.splitlines()[0].split()[0] == "Namespace"
    assert "Name:        j1" in run(client, "-n", "j1", entry=vshort.vjobs).output
    assert run(client, "-N", "other", entry=vshort.vjobs).output == "No resources found\n"


def test_vqueues(client: MemoryClient) -> None:
    run(client, "queue", "create", "-n", "q1", "-w", "3")
    lines = run(client, entry=vshort.vqueues).output.splitlines()
    assert lines[0].split() == list(vshort.VQUEUES_COLUMNS) and lines[1].split()[:3] == ["q1", "3", "Open"]
    assert run(client, "-n", "q1", entry=vshort.vqueues).output.splitlines()[1].split()[0] == "q1"
    assert run(client, "-n", "nope", entry=vshort.vqueues).exit_code == 1


@pytest.mark.parametrize(("entry", "action"), [(vshort.vsuspend, "AbortJob"), (vshort.vresume, "ResumeJob")],
                         ids=["vsuspend", "vresume"])
def test_vsuspend_and_vresume_create_bus_commands_silently(client: MemoryClient, entry: Any, action: str) -> None:
    run(client, "-n", "j1", entry=vshort.vsub)
    res = run(client, "-n", "j1", "-N", "default", entry=entry)
    assert res.exit_code == 0 and res.output == ""
    [cmd] = client.list(rt(client, "commands"), namespace="default")["items"]
    assert cmd["action"] == action and cmd["target"]["name"] == "j1"
    verb = "suspend" if action == "AbortJob" else "resume"
    assert f"job name is mandatory to {verb} a particular job" in run(client, entry=entry).output


def test_vcancel(client: MemoryClient) -> None:
    run(client, "-n", "j1", entry=vshort.vsub)
    assert run(client, "-n", "j1", entry=vshort.vcancel).output == "cancel job j1 successfully\n"
    assert client.list(rt(client, "jobs"), namespace="default")["items"] == []
    assert "job name is mandatory to cancel a particular job" in run(client, entry=vshort.vcancel).output


def test_the_wheel_has_the_short_console_scripts() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name, entry in vshort.SCRIPTS.items():
        assert scripts[name] == f"lahar.commands.vshort:{name}"
        assert isinstance(entry, typer.Typer)


@pytest.mark.parametrize("args", [["pod", "list"], ["podgroup", "list"], ["podgroup", "get"], ["jobflow", "create"],
                                  ["jobflow", "list"], ["jobflow", "get"], ["jobflow", "delete"],
                                  ["jobtemplate", "create"], ["jobtemplate", "list"], ["jobtemplate", "get"],
                                  ["jobtemplate", "delete"], ["jobflow", "describe"], ["jobtemplate", "describe"]],
                         ids=lambda a: "-".join(a))
def test_every_group_command_takes_kubeconfig_and_context(args: list[str]) -> None:
    res = CliRunner().invoke(app, [*args, "--help"])
    assert res.exit_code == 0 and "--context" in res.output and "--kubeconfig" in res.output
