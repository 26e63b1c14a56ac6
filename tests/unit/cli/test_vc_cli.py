"""`lahar job` / `lahar queue` (vcctl parity, pkg/cli/** test shapes) against an injected in-memory cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.commands import vc
from lahar.kube.apiserver.memory import MemoryClient


@pytest.fixture
def client() -> MemoryClient:
    return MemoryClient.with_crds()


def run(client: MemoryClient, *args: str) -> Any:
    return CliRunner().invoke(app, list(args), obj={"client": client})


def rt(client: MemoryClient, plural: str) -> Any:
    return {"jobs": client.registry.get("batch.volcano.sh", "v1alpha1", "jobs"),
            "queues": client.registry.get("scheduling.volcano.sh", "v1beta1", "queues"),
            "commands": client.registry.get("bus.volcano.sh", "v1alpha1", "commands")}[plural]


def commands_of(client: MemoryClient, namespace: str = "default") -> list[dict]:
    return client.list(rt(client, "commands"), namespace=namespace)["items"]


def test_job_run_from_flags(client: MemoryClient) -> None:
    res = run(client, "job", "run", "-N", "j1", "-n", "default", "-i", "nginx", "-m", "2", "-r", "3",
              "-R", "cpu=500m,memory=1Gi", "-L", "cpu=1,memory=1Gi", "-S", "volcano", "-q", "default")
    assert res.exit_code == 0, res.output
    assert res.output == "run job j1 successfully\n"
    job = client.get(rt(client, "jobs"), "j1", namespace="default")
    assert job["spec"]["minAvailable"] == 2 and job["spec"]["schedulerName"] == "volcano"
    [task] = job["spec"]["tasks"]
    assert task["replicas"] == 3
    container = task["template"]["spec"]["containers"][0]
    assert (container["image"], container["resources"]) == (
        "nginx", {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
    assert task["template"]["spec"]["restartPolicy"] == "Never"


def test_job_run_from_file(client: MemoryClient, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                    "metadata": {"name": "from-file"},
                                    "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1}]}}))
    res = run(client, "job", "run", "-f", str(path))
    assert res.exit_code == 0, res.output
    assert client.get(rt(client, "jobs"), "from-file", namespace="default")["spec"]["tasks"][0]["name"] == "t"


@pytest.mark.parametrize(("args", "message"), [
    (["job", "run"], "job name cannot be left blank"),
    (["job", "run", "-N", "x", "-R", "cpu"], "invalid argument syntax cpu, expected <resource>=<value>"),
    (["job", "run", "-f", "job.json"], "only support yaml file"),
    (["job", "view"], "job name (specified by --name or -N) is mandatory to view a particular job"),
    (["job", "suspend"], "job name is mandatory to suspend a particular job"),
    (["job", "resume"], "job name is mandatory to resume a particular job"),
    (["job", "delete"], "job name is mandatory to delete a particular job"),
    (["queue", "get"], "name is mandatory to get the particular queue details"),
    (["queue", "delete"], "queue name must be specified"),
    (["queue", "operate", "-n", "q", "-a", "resize"], "action resize invalid, valid actions are open, close and update"),
    (["queue", "operate", "-n", "q"], "action can not be null"),
    (["queue", "update", "q"], "when update queue q, weight must be specified, the value must be greater than 0"),
], ids=["run-no-name", "bad-requests", "not-yaml", "view-no-name", "suspend-no-name", "resume-no-name",
        "delete-no-name", "get-no-name", "queue-delete-no-name", "bad-action", "no-action", "update-no-weight"])
def test_errors_name_the_problem(client: MemoryClient, args: list[str], message: str) -> None:
    res = run(client, *args)
    assert res.exit_code != 0
    assert message in res.output


def test_job_list_columns_and_filters(client: MemoryClient) -> None:
    run(client, "job", "run", "-N", "alpha", "-r", "2")
    run(client, "job", "run", "-N", "beta", "-S", "other")
    job = client.get(rt(client, "jobs"), "alpha", namespace="default")
    job["status"] = {"state": {"phase": "Running"}, "minAvailable": 1, "running": 2, "retryCount": 1}
    client.update_status(rt(client, "jobs"), job, namespace="default")
    res = run(client, "job", "list")
    lines = res.output.splitlines()
    assert lines[0].split() == list(vc.JOB_COLUMNS)
    alpha = next(line.split() for line in lines if line.startswith("alpha"))
    assert alpha[2:] == ["Running", "Batch", "2", "1", "0", "2", "0", "0", "0", "1"]
    assert "beta" in res.output
    assert "beta" not in run(client, "job", "list", "--scheduler", "volcano").output
    assert "alpha" not in run(client, "job", "list", "--selector", "et").output
    all_ns = run(client, "job", "list", "--all-namespaces").output.splitlines()
    assert all_ns[0].split()[:2] == ["Namespace", "Name"]
    assert run(client, "job", "list", "-n", "kube-system").output == "No resources found\n"


def test_job_view_shows_spec_status_and_events(client: MemoryClient) -> None:
    run(client, "job", "run", "-N", "viewme")
    job = client.get(rt(client, "jobs"), "viewme", namespace="default")
    client.create(client.registry.get("", "v1", "events"), {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "viewme.1", "namespace": "default"},
        "involvedObject": {"kind": "Job", "name": "viewme", "namespace": "default", "uid": job["metadata"]["uid"]},
        "type": "Normal", "reason": "CommandIssued", "message": "Start to execute command AbortJob",
        "source": {"component": "lahar-controllers"}, "count": 1,
        "firstTimestamp": "2020-01-01T00:00:00Z", "lastTimestamp": "2020-01-01T00:00:00Z"}, namespace="default")
    res = run(client, "job", "view", "-N", "viewme")
    assert res.exit_code == 0, res.output
    for text in ("Name:        viewme", "Scheduler Name:     volcano", "Replicas: 1", "Events:", "CommandIssued",
                 "Start to execute command AbortJob", "lahar-controllers"):
        assert text in res.output


@pytest.mark.parametrize(("verb", "action"), [("suspend", "AbortJob"), ("resume", "ResumeJob")])
def test_suspend_and_resume_create_bus_commands_like_vcctl(client: MemoryClient, verb: str, action: str) -> None:
    run(client, "job", "run", "-N", "j1")
    job = client.get(rt(client, "jobs"), "j1", namespace="default")
    res = run(client, "job", verb, "-N", "j1")
    assert res.exit_code == 0, res.output
    [cmd] = commands_of(client)
    ref = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j1", "uid": job["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    assert cmd["action"] == action and cmd["target"] == ref and cmd["metadata"]["ownerReferences"] == [ref]
    assert cmd["metadata"]["name"].startswith(f"j1-{action.lower()}-")


def test_job_command_on_a_missing_job_fails(client: MemoryClient) -> None:
    res = run(client, "job", "suspend", "nope")
    assert res.exit_code == 1 and "not found" in res.output
    assert commands_of(client) == []


def test_job_delete(client: MemoryClient) -> None:
    run(client, "job", "run", "-N", "gone")
    assert run(client, "job", "delete", "-N", "gone").output == "delete job gone successfully\n"
    assert client.list(rt(client, "jobs"), namespace="default")["items"] == []


def test_queue_create_list_get_update_delete(client: MemoryClient) -> None:
    assert run(client, "queue", "list").output == "No resources found\n"
    assert run(client, "queue", "create", "-n", "q1", "-w", "3").exit_code == 0
    assert run(client, "queue", "create", "q2", "-S", "Closed", "-p", "q1").exit_code == 0
    q2 = client.get(rt(client, "queues"), "q2")
    assert (q2["spec"], q2["status"]["state"]) == ({"weight": 1, "parent": "q1"}, "Closed")
    lines = run(client, "queue", "list").output.splitlines()
    assert lines[0].split() == list(vc.QUEUE_COLUMNS)
    assert [line.split()[:4] for line in lines[1:]] == [["q1", "3", "Open", "0"], ["q2", "1", "Closed", "q1"]]
    assert run(client, "queue", "update", "-n", "q1", "-w", "7").exit_code == 0
    assert run(client, "queue", "get", "q1").output.splitlines()[1].split()[:3] == ["q1", "7", "Open"]
    assert run(client, "queue", "delete", "-n", "q2").output == "delete queue q2 successfully\n"
    assert [q["metadata"]["name"] for q in client.list(rt(client, "queues"))["items"]] == ["q1"]


@pytest.mark.parametrize(("args", "action"), [
    (["queue", "open", "q1"], "OpenQueue"),
    (["queue", "close", "-n", "q1"], "CloseQueue"),
    (["queue", "operate", "-n", "q1", "-a", "close"], "CloseQueue"),
], ids=["open", "close", "operate-close"])
def test_queue_open_close_create_bus_commands(client: MemoryClient, args: list[str], action: str) -> None:
    run(client, "queue", "create", "-n", "q1")
    queue = client.get(rt(client, "queues"), "q1")
    assert run(client, *args).exit_code == 0
    [cmd] = commands_of(client, "default")
    assert cmd["action"] == action
    assert cmd["target"] == {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "q1",
                             "uid": queue["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    assert cmd["metadata"]["name"].startswith(f"q1-{action.lower()}-")


def test_commands_are_registered_on_the_lahar_app() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert "job" in res.output and "queue" in res.output


# -- kubectl's output formats (-o json|yaml|wide|name) ---------------------------------------------------------------


@pytest.mark.parametrize(("args", "check"), [
    (["job", "list", "-o", "json"], lambda out: [i["metadata"]["name"] for i in __import__("json").loads(out)["items"]]
     == ["j1", "j2"]),
    (["job", "list", "-o", "yaml"], lambda out: yaml.safe_load(out)["kind"] == "List"),
    (["job", "list", "-o", "name"], lambda out: out == "job.batch.volcano.sh/j1\njob.batch.volcano.sh/j2\n"),
    (["job", "list", "-o", "name", "--selector", "2"], lambda out: out == "job.batch.volcano.sh/j2\n"),
    (["job", "list", "-o", "wide"], lambda out: out.splitlines()[0].split()[-2:] == ["Queue", "Scheduler"]
     and out.splitlines()[1].split()[-2:] == ["default", "volcano"]),
    (["job", "view", "j1", "-o", "json"], lambda out: __import__("json").loads(out)["kind"] == "Job"),
    (["job", "view", "j1", "-o", "yaml"], lambda out: yaml.safe_load(out)["metadata"]["name"] == "j1"),
    (["job", "view", "j1", "-o", "name"], lambda out: out == "job.batch.volcano.sh/j1\n"),
    (["queue", "list", "-o", "name"], lambda out: out == "queue.scheduling.volcano.sh/q1\n"),
    (["queue", "list", "-o", "json"], lambda out: __import__("json").loads(out)["items"][0]["spec"]["weight"] == 3),
    (["queue", "get", "q1", "-o", "yaml"], lambda out: yaml.safe_load(out)["kind"] == "Queue"),
    (["queue", "get", "q1", "-o", "wide"], lambda out: out.splitlines()[0].split()[-2:] == ["Reclaimable", "Capability"]),
    (["job", "list", "-n", "empty", "-o", "json"], lambda out: __import__("json").loads(out)["items"] == []),
], ids=["job-list-json", "job-list-yaml", "job-list-name", "job-list-name-filtered", "job-list-wide",
        "job-view-json", "job-view-yaml", "job-view-name", "queue-list-name", "queue-list-json", "queue-get-yaml",
        "queue-get-wide", "empty-list-json"])
def test_output_formats(client: MemoryClient, args: list[str], check) -> None:
    run(client, "job", "run", "-N", "j1")
    run(client, "job", "run", "-N", "j2")
    run(client, "queue", "create", "-n", "q1", "-w", "3")
    res = CliRunner().invoke(app, args, obj={"client": client})
    assert res.exit_code == 0, res.output
    assert check(res.stdout), res.stdout


@pytest.mark.parametrize("args", [["job", "list", "-o", "table"], ["queue", "get", "q1", "-o", "jsonpath"]],
                         ids=["job-list", "queue-get"])
def test_an_unknown_output_format_names_the_allowed_ones(client: MemoryClient, args: list[str]) -> None:
    res = run(client, *args)
    assert res.exit_code == 2
    assert "unable to match a printer suitable for the output format" in res.output
    assert "json,name,wide,yaml" in res.output


def test_an_unknown_context_is_a_clear_error(tmp_path: Path) -> None:
    kc = tmp_path / "kc.yaml"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    res = CliRunner().invoke(app, ["job", "list", "--kubeconfig", str(kc), "--context", "other"])
    assert res.exit_code == 1 and "Error:" in res.output and "other" in res.output


def test_piped_output_has_no_decoration(client: MemoryClient) -> None:
    """Not a terminal: no colour codes, no rule lines or boxes, in tables and in usage errors."""
    run(client, "queue", "create", "-n", "q1")
    out = run(client, "queue", "list").output
    assert "\x1b[" not in out and "─" not in out and "━" not in out
    assert out.splitlines()[1].split()[0] == "q1"
    err = run(client, "job", "list", "-o", "bogus").output
    assert "╭" not in err and "│" not in err and "\x1b[" not in err


@pytest.mark.parametrize("args", [["--version"], ["version"]], ids=["flag", "command"])
def test_version(args: list[str]) -> None:
    from lahar import __version__

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and res.output == f"{__version__}\n"


@pytest.mark.parametrize("args", [
    ["job", "run", "-N", "j"], ["job", "list"], ["job", "view", "j"], ["job", "suspend", "j"], ["job", "resume", "j"],
    ["job", "delete", "j"], ["queue", "create", "q"], ["queue", "list"], ["queue", "get", "q"], ["queue", "delete", "q"],
    ["queue", "open", "q"], ["queue", "close", "q"], ["queue", "update", "q"], ["queue", "operate", "-n", "q"],
], ids=lambda a: "-".join(a[:2]))
def test_every_job_and_queue_command_takes_context(args: list[str]) -> None:
    res = CliRunner().invoke(app, [*args, "--help"])
    assert res.exit_code == 0 and "--context" in res.output
