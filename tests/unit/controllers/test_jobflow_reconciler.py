"""JobFlow and JobTemplate reconcilers: phase tables, step planning, probes, status, and passes over MemoryClient.

Cases follow Volcano's pkg/controllers/jobflow (state/running_test.go, jobflow_controller_action_test.go) and
pkg/controllers/jobtemplate tests, restated as tables.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import _flow_probes, jobflows, jobtemplates
from lahar.controllers.context import Context, TemporaryError
from lahar.kube import errors, resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry

NS = "default"
T0 = dt.datetime(2025, 3, 3, 10, 0, 0, tzinfo=dt.UTC)

# --- next_phase: Volcano's pending.go / running.go decisions --------------------------------------------------------

PHASES = [
    # (id, phase, flows, running, completed, failed, terminated, want)
    ("running-all-completed-succeeds", "Running", 1, 0, 1, 0, 0, "Succeed"),
    ("running-a-failed-job-fails", "Running", 1, 0, 0, 1, 0, "Failed"),
    ("running-a-terminated-job-fails", "Running", 1, 0, 0, 0, 1, "Failed"),
    ("running-not-all-done-stays", "Running", 2, 0, 1, 0, 0, "Running"),
    ("running-completed-and-failed-fails", "Running", 3, 0, 2, 1, 0, "Failed"),
    ("pending-nothing-yet-stays", "Pending", 2, 0, 0, 0, 0, "Pending"),
    ("empty-phase-is-pending", "", 2, 0, 0, 0, 0, "Pending"),
    ("pending-a-running-job-runs", "Pending", 2, 1, 0, 0, 0, "Running"),
    ("pending-a-completed-job-runs", "", 2, 0, 1, 0, 0, "Running"),
    ("pending-all-completed-runs-first", "Pending", 1, 0, 1, 0, 0, "Running"),
    ("pending-a-failed-job-fails", "Pending", 2, 1, 0, 1, 0, "Failed"),
    ("pending-running-and-terminated-runs", "Pending", 2, 1, 0, 0, 1, "Running"),
    ("pending-terminated-fails", "Pending", 2, 0, 0, 0, 1, "Failed"),
    ("succeed-is-final", "Succeed", 2, 0, 0, 1, 0, "Succeed"),
    ("failed-is-final", "Failed", 2, 0, 2, 0, 0, "Failed"),
    ("terminating-is-final", "Terminating", 2, 0, 2, 0, 0, "Terminating"),
]


@pytest.mark.parametrize(("phase", "flows", "running", "completed", "failed", "terminated", "want"),
                         [c[1:] for c in PHASES], ids=[c[0] for c in PHASES])
def test_next_phase(phase: str, flows: int, running: int, completed: int, failed: int, terminated: int,
                    want: str) -> None:
    assert jobflows.next_phase(phase, flows=flows, running=running, completed=completed, failed=failed,
                               terminated=terminated) == want


# --- plan: which steps start, what is deleted, the next phase -------------------------------------------------------

DAG = {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}},
                 {"name": "c", "dependsOn": {"targets": ["b"]}}, {"name": "d", "dependsOn": {"targets": ["b"]}},
                 {"name": "e", "dependsOn": {"targets": ["c", "d"]}}]}
PROBED = {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"], "probe": {
    "httpGetList": [{"taskName": "srv", "port": 8080, "path": "/ready"}]}}}]}
DELETE = {**DAG, "jobRetainPolicy": "delete"}
EMPTY_PROBE = {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"], "probe": {}}}]}
DUPLICATE = {"flows": [{"name": "a"}, {"name": "a", "dependsOn": {"targets": ["x"]}}]}

PLANS = [
    # (id, spec, phase, jobs, probe holds, want phase, want create, want delete, want waiting)
    ("new-flow-starts-its-roots", DAG, "", {}, True, "Pending", ("a",), (), False),
    ("root-created-not-again", DAG, "Pending", {"f-a": "Pending"}, True, "Pending", (), (), False),
    ("target-running-waits", DAG, "Pending", {"f-a": "Running"}, True, "Running", (), (), False),
    ("target-completed-starts-next", DAG, "Running", {"f-a": "Completed"}, True, "Running", ("b",), (), False),
    ("fan-out-starts-both", DAG, "Running", {"f-a": "Completed", "f-b": "Completed"}, True, "Running", ("c", "d"),
     (), False),
    ("join-waits-for-all-targets", DAG, "Running",
     {"f-a": "Completed", "f-b": "Completed", "f-c": "Completed", "f-d": "Running"}, True, "Running", (), (), False),
    ("join-starts-when-all-done", DAG, "Running",
     {"f-a": "Completed", "f-b": "Completed", "f-c": "Completed", "f-d": "Completed"}, True, "Running", ("e",), (),
     False),
    ("all-completed-succeeds", DAG, "Running", {f"f-{s}": "Completed" for s in "abcde"}, True, "Succeed", (), (),
     False),
    ("failed-step-fails-and-starts-nothing", DAG, "Running", {"f-a": "Completed", "f-b": "Failed"}, True, "Failed",
     (), (), False),
    ("terminated-step-fails", DAG, "Running", {"f-a": "Terminated"}, True, "Failed", (), (), False),
    ("failed-flow-does-nothing", DAG, "Failed", {"f-a": "Completed"}, True, None, (), (), False),
    ("terminating-flow-does-nothing", DAG, "Terminating", {}, True, None, (), (), False),
    ("succeed-retain-keeps-jobs", DAG, "Succeed", {"f-a": "Completed"}, True, "Succeed", (), (), False),
    ("succeed-delete-removes-jobs", DELETE, "Succeed", {"f-b": "Completed", "f-a": "Completed"}, True, None, (),
     ("f-a", "f-b"), False),
    ("delete-policy-waits-for-succeed", DELETE, "Running", {"f-a": "Completed"}, True, "Running", ("b",), (), False),
    ("probe-needs-target-job-to-exist", PROBED, "", {}, True, "Pending", ("a",), (), False),
    ("probe-holds-on-running-target", PROBED, "Pending", {"f-a": "Running"}, True, "Running", ("b",), (), False),
    ("probe-fails-waits-and-rechecks", PROBED, "Pending", {"f-a": "Running"}, False, "Running", (), (), True),
    ("empty-probe-is-no-probe", EMPTY_PROBE, "Running", {"f-a": "Running"}, False, "Running", (), (), False),
    ("duplicate-step-name-counts-once", DUPLICATE, "Running", {"f-a": "Completed"}, True, "Succeed", (), (), False),
]


@pytest.mark.parametrize(("spec", "phase", "jobs", "probe", "phase_want", "create", "delete", "waiting"),
                         [c[1:] for c in PLANS], ids=[c[0] for c in PLANS])
def test_plan(spec: dict, phase: str, jobs: dict, probe: bool, phase_want: str | None, create: tuple,
              delete: tuple, waiting: bool) -> None:
    got = jobflows.plan(name="f", spec=spec, phase=phase, jobs=jobs, probe_ok=lambda step: probe)
    assert got == jobflows.Plan(phase=phase_want, create=create, delete=delete, waiting=waiting)


# --- probes ---------------------------------------------------------------------------------------------------------


def pod(name: str, task: str, phase: str = "Running", ip: str | None = "10.0.0.1") -> dict:
    status: dict[str, Any] = {"phase": phase}
    if ip:
        status["podIP"] = ip
    return {"metadata": {"name": name, "annotations": {"volcano.sh/task-spec": task}}, "status": status}


HTTP = {"httpGetList": [{"taskName": "srv", "port": 8080, "path": "ready",
                         "httpHeader": {"name": "X-Probe", "value": "1"}}]}
TCP = {"tcpSocketList": [{"taskName": "srv", "port": 6379}]}
STATUS = {"taskStatusList": [{"taskName": "srv", "phase": "Running"}]}
UP = {("http", "10.0.0.1", 8080), ("tcp", "10.0.0.1", 6379)}

PROBES = [
    # (id, probe, pods, reachable endpoints, want)
    ("no-probe-holds", None, [], set(), True),
    ("http-answered", HTTP, [pod("p0", "srv")], UP, True),
    ("http-not-answered", HTTP, [pod("p0", "srv")], set(), False),
    ("http-every-running-pod-must-answer", HTTP, [pod("p0", "srv"), pod("p1", "srv", ip="10.0.0.2")], UP, False),
    ("http-no-pod-of-the-task", HTTP, [pod("p0", "other")], UP, False),
    ("http-pod-not-running", HTTP, [pod("p0", "srv", phase="Pending")], UP, False),
    ("http-running-pod-without-ip", HTTP, [pod("p0", "srv", ip=None)], UP, False),
    ("tcp-accepted", TCP, [pod("p0", "srv")], UP, True),
    ("tcp-refused", TCP, [pod("p0", "srv")], {("http", "10.0.0.1", 8080)}, False),
    ("task-status-all-in-phase", STATUS, [pod("p0", "srv"), pod("p1", "srv")], set(), True),
    ("task-status-one-not-in-phase", STATUS, [pod("p0", "srv"), pod("p1", "srv", phase="Pending")], set(), False),
    ("task-status-no-pod", STATUS, [pod("p0", "other")], set(), False),
    ("all-kinds-must-hold", {**HTTP, **TCP, **STATUS}, [pod("p0", "srv")], {("http", "10.0.0.1", 8080)}, False),
]


@pytest.mark.parametrize(("probe", "pods", "up", "want"), [c[1:] for c in PROBES], ids=[c[0] for c in PROBES])
def test_probe_satisfied(probe: dict | None, pods: list, up: set, want: bool) -> None:
    seen: list[_flow_probes.Endpoint] = []

    def check(ep: _flow_probes.Endpoint) -> bool:
        seen.append(ep)
        return (ep.scheme, ep.host, ep.port) in up

    assert _flow_probes.satisfied(probe, pods, check) is want
    for ep in seen:
        if ep.scheme == "http":
            assert ep.path == "/ready" and ep.headers == (("X-Probe", "1"),)


def test_network_checker_against_a_real_socket() -> None:
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert _flow_probes.network_checker(_flow_probes.Endpoint("http", "127.0.0.1", port, "/"))
        assert _flow_probes.network_checker(_flow_probes.Endpoint("tcp", "127.0.0.1", port))
        assert not _flow_probes.network_checker(_flow_probes.Endpoint("http", "127.0.0.1", port, "/no-such-file"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not _flow_probes.network_checker(_flow_probes.Endpoint("tcp", "127.0.0.1", port))


# --- job_from_template and status -----------------------------------------------------------------------------------


def test_job_from_template_names_labels_and_owner() -> None:
    """LoadJobTemplateAndSetJob: `<flow>-<template>`, createdBy labels and annotations, controller ref."""
    flow = {"metadata": {"name": "jobflow", "namespace": NS, "uid": "flow-uid"}}
    template = {"metadata": {"name": "jobtemplate"}, "spec": {"minAvailable": 1, "queue": "default"}}
    job = jobflows.job_from_template(flow, {"name": "jobtemplate"}, template)
    want_labels = {"volcano.sh/createdByJobTemplate": "default.jobtemplate",
                   "volcano.sh/createdByJobFlow": "default.jobflow"}
    assert job["metadata"]["name"] == "jobflow-jobtemplate"
    assert job["metadata"]["labels"] == want_labels == job["metadata"]["annotations"]
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
                                                   "name": "jobflow", "uid": "flow-uid", "controller": True,
                                                   "blockOwnerDeletion": True}]
    assert job["spec"] == template["spec"]


def test_job_from_template_merges_the_step_patch() -> None:
    template = {"spec": {"minAvailable": 1, "queue": "default", "tasks": [
        {"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}]}}
    step = {"name": "t", "patch": {"jobSpec": {"queue": "q2", "tasks": [
        {"name": "w", "replicas": 3}, {"name": "ps", "replicas": 1}]}}}
    spec = jobflows.job_from_template({"metadata": {"name": "f", "namespace": NS}}, step, template)["spec"]
    assert spec["queue"] == "q2" and spec["minAvailable"] == 1
    assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("w", 3), ("ps", 1)]
    assert spec["tasks"][0]["template"] == template["spec"]["tasks"][0]["template"]
    assert template["spec"]["tasks"][0]["replicas"] == 1  # the template itself is untouched


def vcjob(name: str, phase: str, created: str = "2025-03-03T10:00:00Z", **status: Any) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created},
            "status": {"state": {"phase": phase}, **status}}


def test_flow_status_lists_conditions_and_histories() -> None:
    """getAllJobStatus: the Jobs by phase (Completing and Terminating in no list, others unKnow), conditions."""
    jobs = [vcjob("f-b", "Running", "2025-03-03T10:01:00Z", runningDuration="30s", retryCount=1,
                  taskStatusCount={"w": {"phase": {"Running": 1}}}),
            vcjob("f-a", "Completed"), vcjob("f-c", "Restarting", "2025-03-03T10:02:00Z"),
            vcjob("f-d", "Completing", "2025-03-03T10:03:00Z")]
    previous = {"state": {"phase": "Running"}, "jobStatusList": [
        {"name": "f-a", "state": "Running", "runningHistories": [{"startTimestamp": "t0", "state": "Running"}]}]}
    status = jobflows.flow_status(jobs, previous, "t1")
    assert status["runningJobs"] == ["f-b"] and status["completedJobs"] == ["f-a"]
    assert status["unKnowJobs"] == ["f-c"] and "pendingJobs" not in status and "failedJobs" not in status
    assert status["state"] == {"phase": "Running"}
    assert status["conditions"]["f-b"] == {"phase": "Running", "createTime": "2025-03-03T10:01:00Z",
                                           "runningDuration": "30s",
                                           "taskStatusCount": {"w": {"phase": {"Running": 1}}}}
    by_name = {s["name"]: s for s in status["jobStatusList"]}
    assert [s["name"] for s in status["jobStatusList"]] == ["f-a", "f-b", "f-c", "f-d"]
    assert by_name["f-a"]["runningHistories"] == [{"startTimestamp": "t0", "state": "Running", "endTimestamp": "t1"},
                                                  {"startTimestamp": "t1", "state": "Completed"}]
    assert by_name["f-b"] == {"name": "f-b", "state": "Running", "startTimestamp": "2025-03-03T10:01:00Z",
                              "endTimestamp": "2025-03-03T10:01:30Z", "restartCount": 1,
                              "runningHistories": [{"startTimestamp": "t1", "state": "Running"}]}


def test_flow_status_of_no_jobs_keeps_the_state_only() -> None:
    assert jobflows.flow_status([], {"state": {"phase": "Pending"}}, "t") == {"state": {"phase": "Pending"}}


# --- passes over MemoryClient ---------------------------------------------------------------------------------------


def make_ctx() -> Context:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    return Context(client=MemoryClient.with_crds(store), clock=lambda: T0)


def rt(ctx: Context, group: str, plural: str) -> Any:
    version = "v1" if group == "" else "v1alpha1"
    return ctx.client.registry.get(group, version, plural)


TASKS = [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]


def add_templates(ctx: Context, *names: str) -> None:
    for n in names:
        ctx.client.create(rt(ctx, "flow.volcano.sh", "jobtemplates"), {
            "apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": n, "namespace": NS},
            "spec": {"minAvailable": 1, "queue": "default", "tasks": TASKS}}, namespace=NS)


def add_flow(ctx: Context, spec: dict, name: str = "f") -> None:
    ctx.client.create(rt(ctx, "flow.volcano.sh", "jobflows"), {
        "apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": name, "namespace": NS},
        "spec": spec}, namespace=NS)


def flow(ctx: Context, name: str = "f") -> dict:
    return ctx.client.get(rt(ctx, "flow.volcano.sh", "jobflows"), name, namespace=NS)


def job_names(ctx: Context) -> list[str]:
    return sorted(j["metadata"]["name"] for j in ctx.client.list(rt(ctx, "batch.volcano.sh", "jobs"),
                                                                 namespace=NS)["items"])


def set_phase(ctx: Context, job: str, phase: str) -> None:
    jobs_rt = rt(ctx, "batch.volcano.sh", "jobs")
    body = ctx.client.get(jobs_rt, job, namespace=NS)
    body["status"] = {"state": {"phase": phase}}
    ctx.client.update_status(jobs_rt, body, namespace=NS)


def run(ctx: Context, **kw: Any) -> Any:
    return jobflows.reconcile(ctx, NS, "f", **kw)


def test_dag_runs_to_succeed_then_deletes_its_jobs() -> None:
    """Volcano's example/jobflow: a → b → {c, d} → e, jobRetainPolicy delete."""
    ctx = make_ctx()
    add_templates(ctx, *"abcde")
    add_flow(ctx, DELETE)
    run(ctx)
    assert job_names(ctx) == ["f-a"] and flow(ctx)["status"]["state"]["phase"] == "Pending"
    for done, started in (("a", ["f-a", "f-b"]), ("b", ["f-a", "f-b", "f-c", "f-d"]), ("c", None),
                          ("d", ["f-a", "f-b", "f-c", "f-d", "f-e"])):
        set_phase(ctx, f"f-{done}", "Completed")
        run(ctx)
        if started:
            assert job_names(ctx) == started
        assert flow(ctx)["status"]["state"]["phase"] == "Running"
    set_phase(ctx, "f-e", "Completed")
    run(ctx)
    status = flow(ctx)["status"]
    assert status["state"]["phase"] == "Succeed" and status["completedJobs"] == [f"f-{s}" for s in "abcde"]
    run(ctx)
    assert job_names(ctx) == []
    run(ctx)  # nothing left to delete, nothing recreated
    assert job_names(ctx) == [] and flow(ctx)["status"]["state"]["phase"] == "Succeed"


def test_a_failed_step_fails_the_flow_and_nothing_more_starts() -> None:
    ctx = make_ctx()
    add_templates(ctx, *"abcde")
    add_flow(ctx, DAG)
    run(ctx)
    set_phase(ctx, "f-a", "Failed")
    run(ctx)
    assert flow(ctx)["status"]["state"]["phase"] == "Failed" and flow(ctx)["status"]["failedJobs"] == ["f-a"]
    set_phase(ctx, "f-a", "Completed")
    run(ctx)
    assert job_names(ctx) == ["f-a"] and flow(ctx)["status"]["state"]["phase"] == "Failed"


def test_repeated_passes_and_an_existing_job_create_each_step_once() -> None:
    """At-least-once: a Job already there (an earlier pass that died before its status write) counts as created."""
    ctx = make_ctx()
    add_templates(ctx, "a", "b")
    add_flow(ctx, {"flows": [{"name": "a"}, {"name": "b"}]})
    template = ctx.client.get(rt(ctx, "flow.volcano.sh", "jobtemplates"), "b", namespace=NS)
    ctx.client.create(rt(ctx, "batch.volcano.sh", "jobs"),
                      jobflows.job_from_template(flow(ctx), {"name": "b"}, template), namespace=NS)
    for _ in range(3):
        run(ctx)
    assert job_names(ctx) == ["f-a", "f-b"]
    created = [e for e in ctx.client.list(rt(ctx, "", "events"), namespace=NS)["items"] if e["reason"] == "Created"]
    assert [e["message"] for e in created] == ["create a job named f-a!"]


def test_a_missing_template_is_retried_and_other_steps_still_start() -> None:
    ctx = make_ctx()
    add_templates(ctx, "a")
    add_flow(ctx, {"flows": [{"name": "a"}, {"name": "b"}]})
    with pytest.raises(TemporaryError, match="could not create the jobs of b"):
        run(ctx)
    assert job_names(ctx) == ["f-a"]
    reasons = {e["reason"]: e["message"] for e in ctx.client.list(rt(ctx, "", "events"), namespace=NS)["items"]}
    assert reasons["FailedCreate"] == 'jobtemplates.flow.volcano.sh "b" not found'
    add_templates(ctx, "b")
    run(ctx)
    assert job_names(ctx) == ["f-a", "f-b"]


def test_a_probe_step_waits_for_the_probe_and_requeues() -> None:
    ctx = make_ctx()
    add_templates(ctx, "a", "b")
    add_flow(ctx, PROBED)
    run(ctx)
    ctx.client.create(rt(ctx, "", "pods"), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "f-a-srv-0", "namespace": NS, "labels": {"volcano.sh/job-name": "f-a"},
            "annotations": {"volcano.sh/task-spec": "srv"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}, namespace=NS)
    pods_rt = rt(ctx, "", "pods")
    p = ctx.client.get(pods_rt, "f-a-srv-0", namespace=NS)
    p["status"] = {"phase": "Running", "podIP": "10.1.0.5"}
    ctx.client.update_status(pods_rt, p, namespace=NS)
    up: set[tuple[str, int, str]] = set()
    check = lambda ep: (ep.host, ep.port, ep.path) in up  # noqa: E731
    assert run(ctx, check=check).requeue_after == jobflows.PROBE_PERIOD
    assert job_names(ctx) == ["f-a"]
    up.add(("10.1.0.5", 8080, "/ready"))
    assert run(ctx, check=check).requeue_after is None
    assert job_names(ctx) == ["f-a", "f-b"]


def test_a_deleted_or_deleting_flow_is_left_alone() -> None:
    ctx = make_ctx()
    assert run(ctx).requeue_after is None


# --- JobTemplate ----------------------------------------------------------------------------------------------------

DEPENDS = [
    ("jobs-listed-sorted", ["f-b", "f-a"], None, ["f-a", "f-b"]),
    ("unchanged-no-write", ["f-a"], ["f-a"], None),
    ("no-jobs-keeps-old-list", [], ["f-a"], None),
    ("new-job-added", ["f-a", "g-a"], ["f-a"], ["f-a", "g-a"]),
]


@pytest.mark.parametrize(("jobs", "previous", "want"), [c[1:] for c in DEPENDS], ids=[c[0] for c in DEPENDS])
def test_depends_on_list(jobs: list[str], previous: list[str] | None, want: list[str] | None) -> None:
    assert jobtemplates.depends_on_list([{"metadata": {"name": n}} for n in jobs], previous) == want


def test_jobtemplate_status_lists_the_jobs_of_every_flow() -> None:
    ctx = make_ctx()
    add_templates(ctx, "a")
    add_flow(ctx, {"flows": [{"name": "a"}]}, name="f")
    add_flow(ctx, {"flows": [{"name": "a"}]}, name="g")
    jobflows.reconcile(ctx, NS, "f")
    jobflows.reconcile(ctx, NS, "g")
    jobtemplates.reconcile(ctx, NS, "a")
    got = ctx.client.get(rt(ctx, "flow.volcano.sh", "jobtemplates"), "a", namespace=NS)
    assert got["status"] == {"jobDependsOnList": ["f-a", "g-a"]}
    assert jobtemplates.reconcile(ctx, NS, "gone").requeue_after is None


def test_conflicting_status_write_is_a_conflict() -> None:
    """The status is written with the read's resourceVersion: a concurrent writer makes the pass retry."""
    ctx = make_ctx()
    add_templates(ctx, "a")
    add_flow(ctx, {"flows": [{"name": "a"}]})
    real_update = ctx.client.update_status

    def racing(rt_: Any, body: dict, **kw: Any) -> dict:
        stale = dict(body, metadata={**body["metadata"], "resourceVersion": "1"})
        return real_update(rt_, stale, **kw)

    ctx.client.update_status = racing  # type: ignore[method-assign]
    with pytest.raises(errors.Conflict):
        run(ctx)
    ctx.client.update_status = real_update  # type: ignore[method-assign]
    run(ctx)
    assert job_names(ctx) == ["f-a"] and flow(ctx)["status"]["state"]["phase"] == "Pending"


# --- docs/pipelines.md's example runs ---------------------------------------------------------------------------


def test_the_pipelines_page_example_runs_to_succeed() -> None:
    """The YAML of docs/pipelines.md: preprocess → serve (on completion) → evaluate (once the server answers)."""
    import re
    from pathlib import Path

    import yaml

    page = (Path(__file__).resolve().parents[3] / "docs" / "pipelines.md").read_text()
    docs = list(yaml.safe_load_all(re.search(r"```yaml\n(.*?)```", page, re.S).group(1)))
    ctx = make_ctx()
    for doc in docs:
        plural = {"JobTemplate": "jobtemplates", "JobFlow": "jobflows"}[doc["kind"]]
        doc["metadata"]["namespace"] = NS
        ctx.client.create(rt(ctx, "flow.volcano.sh", plural), doc, namespace=NS)
    answering: set[str] = set()

    def step() -> None:
        jobflows.reconcile(ctx, NS, "pipeline", check=lambda ep: ep.host in answering)

    step()
    assert job_names(ctx) == ["pipeline-preprocess"]
    set_phase(ctx, "pipeline-preprocess", "Completed")
    step()
    assert job_names(ctx) == ["pipeline-preprocess", "pipeline-serve"]
    set_phase(ctx, "pipeline-serve", "Running")
    pods_rt = rt(ctx, "", "pods")
    ctx.client.create(pods_rt, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pipeline-serve-server-0", "namespace": NS, "labels": {"volcano.sh/job-name": "pipeline-serve"},
        "annotations": {"volcano.sh/task-spec": "server"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        namespace=NS)
    server = ctx.client.get(pods_rt, "pipeline-serve-server-0", namespace=NS)
    server["status"] = {"phase": "Running", "podIP": "10.2.0.7"}
    ctx.client.update_status(pods_rt, server, namespace=NS)
    step()
    assert "pipeline-evaluate" not in job_names(ctx)  # not answering yet
    answering.add("10.2.0.7")
    step()
    assert "pipeline-evaluate" in job_names(ctx)
    for job in ("pipeline-serve", "pipeline-evaluate"):
        set_phase(ctx, job, "Completed")
    step()
    assert flow(ctx, "pipeline")["status"]["state"]["phase"] == "Succeed"


def test_metrics_label_every_reconciled_kind() -> None:
    """A JobFlow or JobTemplate reconcile is labelled with its kind, not `other`."""
    from lahar.controllers import metrics, reconcilers

    assert set(reconcilers.RECONCILERS) == metrics.KINDS
    assert metrics.kind_label("JobFlow") == "JobFlow" and metrics.kind_label("JobTemplate") == "JobTemplate"
