"""JobFlow end to end on one `lahar up` with the real kubectl: Volcano's own `example/jobflow/` manifests run to
Succeed unchanged, and a flow survives its worker SIGKILLed and Redis restarted mid-flow. On a second,
`lahar up --demo`, the shipped examples/jobflow/ pipeline passes its HTTP probe against a simulated pod and Succeeds.
An HCCL job (`plugins: {hcclrank: []}`) completes with its ranks in task-index order; the Ray job is Volcano's
integrations/ray example in tests/e2e/test_volcano_examples.py.

After each run: the flow's phase is Succeed, every step's Job was created exactly once (one uid per Job name over a
poll of the whole run, one "create a job named ..." Event with count 1), and the status lists each Job once, as
completed. Simulated pods finish after `--sim-default-duration` (Volcano's templates carry no lahar annotations).
A JobFlow whose steps do not form a DAG is denied by `/jobflows/validate` with Volcano's messages.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_faults import Up, _alive
from tests.support import wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / ".." / "shared" / "volcano-examples" / "jobflow"
FLOW_TIMEOUT = 180.0

pytestmark = [pytest.mark.e2e]


class FlowUp(Up):
    """`lahar up` whose simulated pods without `lahar.sh/sim-duration` finish after 1 s."""

    args: tuple[str, ...] = ("--nodes", "4", "--sim-default-duration", "1s")


class JobWatch:
    """Every uid seen per (namespace, Job name), listed a few times a second while a flow runs."""

    def __init__(self, up: Up, namespace: str) -> None:
        self.client, self.namespace = up.client(), namespace
        self.uids: dict[str, set[str]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> JobWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        jobs_rt = self.client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")
        while not self._stop.wait(0.2):
            try:
                items = self.client.list(jobs_rt, namespace=self.namespace)["items"]
            except Exception:  # noqa: BLE001 - a sample lost while something restarts
                continue
            for job in items:
                self.uids[job["metadata"]["name"]].add(job["metadata"]["uid"])


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlowUp]:
    stack = FlowUp(tmp_path_factory.mktemp("jobflow"))
    try:
        stack.start()
        yield stack
    finally:
        stack.kill_everything()


class DemoUp(FlowUp):
    """`lahar up --demo` (its own profile and nodes): the shipped examples, examples/jobflow/ among them."""

    args = ("--demo", "--sim-default-duration", "1s")


@pytest.fixture(scope="module")
def demo_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoUp]:
    stack = DemoUp(tmp_path_factory.mktemp("jobflow-demo"))
    try:
        stack.start()
        yield stack
    finally:
        stack.kill_everything()


def get(up: Up, resource: str, name: str, namespace: str) -> dict[str, Any]:
    return yaml.safe_load(up.kubectl("get", resource, name, "-n", namespace, "-o", "yaml").stdout)


def phase_of(up: Up, flow: str, namespace: str) -> str | None:
    return ((get(up, "jobflows.flow.volcano.sh", flow, namespace).get("status") or {}).get("state") or {}).get("phase")


def created_events(up: Up, flow: str, namespace: str) -> dict[str, int]:
    """The flow's "create a job named X!" Events: message → count."""
    events = yaml.safe_load(up.kubectl("get", "events", "-n", namespace, "-o", "yaml").stdout)["items"]
    return {e["message"]: int(e.get("count") or 1) for e in events
            if (e.get("involvedObject") or {}).get("name") == flow and e.get("reason") == "Created"}


def wait_succeed(up: Up, flow: str, namespace: str) -> None:
    def done() -> bool:
        phase = phase_of(up, flow, namespace)
        assert phase != "Failed", get(up, "jobflows.flow.volcano.sh", flow, namespace).get("status")
        return phase == "Succeed"

    try:
        wait_for(f"jobflow {namespace}/{flow} to Succeed", done, timeout=FLOW_TIMEOUT, interval=0.5)
    except AssertionError as e:
        status = get(up, "jobflows.flow.volcano.sh", flow, namespace).get("status")
        raise AssertionError(f"{e}\nstatus: {status}\n{up.output()}") from None


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="the shared Volcano examples are absent")
def test_volcanos_jobflow_example_runs_to_succeed(up: FlowUp) -> None:
    """example/jobflow: templates a..e, a → b → {c, d} → e, jobRetainPolicy delete; applied unchanged."""
    for manifest in ("JobTemplate.yaml", "JobFlow.yaml"):
        up.kubectl("apply", "-f", str(EXAMPLES / manifest))
    steps = [f"test-{s}" for s in "abcde"]
    with JobWatch(up, "default") as watch:
        wait_succeed(up, "test", "default")
        wait_for("the delete policy to remove the flow's jobs", lambda: not up.kubectl(
            "get", "vcjob", "-n", "default", "-l", "volcano.sh/createdByJobFlow=default.test", "-o", "name").stdout,
            timeout=60)
    assert sorted(watch.uids) == steps and all(len(u) == 1 for u in watch.uids.values()), dict(watch.uids)
    status = get(up, "jobflows.flow.volcano.sh", "test", "default")["status"]
    assert status["completedJobs"] == steps, status
    assert sorted(s["name"] for s in status["jobStatusList"]) == steps
    assert created_events(up, "test", "default") == {f"create a job named {s}!": 1 for s in steps}
    template = get(up, "jobtemplates.flow.volcano.sh", "a", "default")
    assert template["status"] == {"jobDependsOnList": ["test-a"]}


def pipeline(namespace: str) -> str:
    """Three steps of one 3 s pod each, kept (retain): prepare → train → evaluate."""
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    for step in ("prepare", "train", "evaluate"):
        docs.append({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
                     "metadata": {"name": step, "namespace": namespace},
                     "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "default", "tasks": [{
                         "name": "main", "replicas": 1, "template": {
                             "metadata": {"annotations": {"lahar.sh/sim-duration": "3s"}},
                             "spec": {"restartPolicy": "OnFailure", "containers": [{
                                 "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}}]}})
    docs.append({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
                 "metadata": {"name": "pipe", "namespace": namespace},
                 "spec": {"jobRetainPolicy": "retain", "flows": [
                     {"name": "prepare"}, {"name": "train", "dependsOn": {"targets": ["prepare"]}},
                     {"name": "evaluate", "dependsOn": {"targets": ["train"]}}]}})
    return yaml.safe_dump_all(docs)


def check_pipeline(up: Up, namespace: str, watch: JobWatch) -> None:
    wait_succeed(up, "pipe", namespace)
    steps = [f"pipe-{s}" for s in ("prepare", "train", "evaluate")]
    assert sorted(watch.uids) == sorted(steps) and all(len(u) == 1 for u in watch.uids.values()), dict(watch.uids)
    status = get(up, "jobflows.flow.volcano.sh", "pipe", namespace)["status"]
    assert status["completedJobs"] == steps, status
    assert not any(status.get(k) for k in ("pendingJobs", "runningJobs", "failedJobs", "terminatedJobs",
                                           "unKnowJobs")), status
    assert [s["name"] for s in status["jobStatusList"]] == steps
    assert created_events(up, "pipe", namespace) == {f"create a job named {s}!": 1 for s in steps}
    for step, job in zip(("prepare", "train", "evaluate"), steps, strict=True):
        assert get(up, "jobtemplates.flow.volcano.sh", step, namespace)["status"] == {"jobDependsOnList": [job]}


def running_step(up: Up, namespace: str, job: str) -> None:
    wait_for(f"{namespace}/{job} to run", lambda: ((get_or_none(up, namespace, job) or {}).get("status") or {})
             .get("state", {}).get("phase") == "Running", timeout=90, interval=0.2)


def get_or_none(up: Up, namespace: str, job: str) -> dict[str, Any] | None:
    out = up.kubectl("get", "vcjob", job, "-n", namespace, "-o", "yaml", check=False)
    return yaml.safe_load(out.stdout) if out.returncode == 0 else None


def test_demo_pipeline_waits_on_the_http_probe_and_succeeds(demo_up: DemoUp) -> None:
    """examples/jobflow/ on `lahar up --demo`: evaluate is created only while train's server pod Runs and answers
    GET podIP:8080/healthz (a simulated pod listening on its declared port), and the flow reaches Succeed."""
    ns = "pipelines"
    wait_for("the demo to create the pipeline", lambda: demo_up.kubectl(
        "get", "jobflow", "pipeline", "-n", ns, check=False).returncode == 0, timeout=120, interval=0.5)
    seen: dict[str, Any] = {}

    def evaluate_created() -> bool:
        pods = yaml.safe_load(demo_up.kubectl("get", "pods", "-n", ns, "-o", "yaml").stdout)["items"]
        server = [p for p in pods if p["metadata"]["name"].startswith("pipeline-train-server-")]
        if server and server[0].get("status", {}).get("phase") == "Running":
            seen["server"] = server[0]
        return get_or_none(demo_up, ns, "pipeline-evaluate") is not None

    wait_for("the probe to let evaluate start", evaluate_created, timeout=FLOW_TIMEOUT, interval=0.3)
    # on a loaded machine `lahar up` may report ready after the demo ran its first steps, so the server's Running
    # window can lie before the first poll: then its container's recorded run must hold evaluate's creation
    evaluate = get_or_none(demo_up, ns, "pipeline-evaluate")
    assert evaluate is not None
    pods = yaml.safe_load(demo_up.kubectl("get", "pods", "-n", ns, "-o", "yaml").stdout)["items"]
    server = seen.get("server") or next(p for p in pods if p["metadata"]["name"].startswith("pipeline-train-server-"))
    ip = server["status"]["podIP"]
    assert ip.startswith("127.244."), ip
    if "server" not in seen:
        (state,) = [(cs.get("state") or {}) for cs in server["status"]["containerStatuses"]]
        run = state.get("terminated") or state.get("running") or {}
        created = evaluate["metadata"]["creationTimestamp"]
        assert run.get("startedAt", "~") <= created <= run.get("finishedAt", "~"), (run, created)
    train = get_or_none(demo_up, ns, "pipeline-train")
    assert train is not None
    with JobWatch(demo_up, ns) as watch:
        wait_succeed(demo_up, "pipeline", ns)
    assert all(len(u) == 1 for u in watch.uids.values()), dict(watch.uids)
    status = get(demo_up, "jobflows.flow.volcano.sh", "pipeline", ns)["status"]
    assert status["completedJobs"] == ["pipeline-prepare", "pipeline-train", "pipeline-evaluate"], status
    assert created_events(demo_up, "pipeline", ns) == {
        f"create a job named pipeline-{s}!": 1 for s in ("prepare", "train", "evaluate")}


def test_worker_sigkilled_mid_flow(up: FlowUp) -> None:
    """The controller worker SIGKILLed while the second step runs: the flow completes, no Job is made twice."""
    ns = "jf-kill"
    with JobWatch(up, ns) as watch:
        up.kubectl("apply", "-f", "-", stdin=pipeline(ns))
        running_step(up, ns, "pipe-train")
        worker = up.child_pid("worker")
        os.kill(worker, signal.SIGKILL)
        wait_for("the worker to be restarted",
                 lambda: up.read_info()["children"]["worker"] not in (None, worker), timeout=30)
        check_pipeline(up, ns, watch)


def test_redis_restarted_mid_flow(up: FlowUp) -> None:
    """The embedded redis-server SIGKILLed as the first step runs: the supervisor restarts it, the flow completes."""
    ns = "jf-redis"
    with JobWatch(up, ns) as watch:
        up.kubectl("apply", "-f", "-", stdin=pipeline(ns))
        running_step(up, ns, "pipe-prepare")
        old = up.read_info()["redis_pid"]
        os.killpg(old, signal.SIGKILL)
        wait_for("the supervisor to restart redis-server",
                 lambda: (i := up.read_info())["redis_pid"] not in (None, old) and _alive(i["redis_pid"]), timeout=30)
        check_pipeline(up, ns, watch)


HCCL_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: hccl-demo, namespace: hccl}
spec:
  minAvailable: 3
  schedulerName: volcano
  queue: default
  plugins: {hcclrank: [], svc: []}
  policies: [{event: PodEvicted, action: RestartJob}]
  tasks:
    - name: master
      replicas: 1
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: ascend, image: ascend-pytorch:latest, command: [sh, -c, "python train.py"],
                        resources: {requests: {cpu: 100m}}}]
    - name: worker
      replicas: 2
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: ascend, image: ascend-pytorch:latest, command: [sh, -c, "python train.py"],
                        resources: {requests: {cpu: 100m}}}]
"""


def test_hccl_job_completes_with_ranks_in_task_index_order(up: FlowUp) -> None:
    """An Ascend-style master/worker Job with `plugins: {hcclrank: []}` (Volcano's hcclrank guide): it completes, and
    its pods carry `hccl/rankIndex` master-0 → 0, worker-0 → 1, worker-1 → 2."""
    up.kubectl("create", "namespace", "hccl")
    up.kubectl("apply", "-f", "-", stdin=HCCL_JOB)
    ranks: dict[str, str] = {}

    def completed() -> bool:
        pods = yaml.safe_load(up.kubectl("get", "pods", "-n", "hccl", "-o", "yaml").stdout)["items"]
        for pod in pods:
            rank = (pod["metadata"].get("annotations") or {}).get("hccl/rankIndex")
            if rank is not None:
                ranks[pod["metadata"]["name"]] = rank
        job = get_or_none(up, "hccl", "hccl-demo") or {}
        return (job.get("status") or {}).get("state", {}).get("phase") == "Completed"

    wait_for("the hccl job to complete", completed, timeout=FLOW_TIMEOUT, interval=0.3)
    assert ranks == {"hccl-demo-master-0": "0", "hccl-demo-worker-0": "1", "hccl-demo-worker-1": "2"}, ranks


@pytest.mark.parametrize(("flows", "message"), [
    ([{"name": "a", "dependsOn": {"targets": ["b"]}}, {"name": "b", "dependsOn": {"targets": ["a"]}}],
     "jobflow Flow is not DAG"),
    ([{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["x"]}}],
     "jobflow Flow is not DAG: vertex is not defined: x"),
], ids=["cycle", "unknown-target"])
def test_kubectl_apply_of_a_bad_dag_is_denied(up: FlowUp, flows: list, message: str) -> None:
    body = yaml.safe_dump({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
                           "metadata": {"name": "bad", "namespace": "default"}, "spec": {"flows": flows}})
    out = up.kubectl("apply", "-f", "-", stdin=body, check=False)
    assert out.returncode != 0
    assert f'admission webhook "validatejobflow.volcano.sh" denied the request: {message}' in out.stderr, out.stderr
