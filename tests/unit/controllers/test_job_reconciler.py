"""The job reconciler end to end on the in-memory cluster with fake time: the test plays the scheduler (PodGroup →
Inqueue) and the kubelet (pod phases), pushes the inbox items the dispatcher would, and reads the world back."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.controllers import jobs
from lahar.controllers.context import Context, MemoryInbox, MemoryTimers, PermanentError, TemporaryError
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from tests import builders

NS = "default"


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def worker_task(name: str = "worker", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas,
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": name, "image": "busybox",
                                                  "resources": {"requests": {"cpu": "1"}}}]}}, **extra}


def vcjob(name: str = "job1", *tasks: dict[str, Any], **spec: Any) -> dict[str, Any]:
    tasks = tasks or (worker_task(),)
    min_available = sum(t.get("minAvailable", t["replicas"]) for t in tasks)
    job = builders.vcjob(name, NS).spec(schedulerName="volcano", queue="default", maxRetry=3).tasks(*tasks)
    return job.min_available(min_available).spec(**spec).build()


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.client = MemoryClient.with_crds(Store(clock=self.clock))
        self.timers = MemoryTimers(clock=self.clock)
        self.inbox = MemoryInbox()
        self.ctx = Context(client=self.client, clock=self.clock, timers=self.timers, inbox=self.inbox)
        reg = self.client.registry
        self.JOB = reg.get("batch.volcano.sh", "v1alpha1", "jobs")
        self.PG = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
        self.POD = reg.get("", "v1", "pods")
        self.EVENT = reg.get("", "v1", "events")
        self.name = "job1"

    def submit(self, job: dict[str, Any]) -> None:
        self.name = job["metadata"]["name"]
        self.client.create(self.JOB, job, namespace=NS)

    def reconcile(self, times: int = 1) -> Any:
        result = None
        for _ in range(times):
            result = jobs.reconcile(self.ctx, NS, self.name)
        return result

    def job(self) -> dict[str, Any]:
        return self.client.get(self.JOB, self.name, namespace=NS)

    def status(self) -> dict[str, Any]:
        return self.job().get("status") or {}

    def phase(self) -> str:
        return (self.status().get("state") or {}).get("phase", "")

    def pods(self) -> list[dict[str, Any]]:
        return sorted(self.client.list(self.POD, namespace=NS)["items"], key=lambda p: p["metadata"]["name"])

    def pod_names(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods()]

    def podgroup(self) -> dict[str, Any] | None:
        items = self.client.list(self.PG, namespace=NS)["items"]
        return items[0] if items else None

    def enqueue(self) -> None:
        """What the scheduler's enqueue action does."""
        pg = self.podgroup()
        assert pg is not None
        pg["status"] = {"phase": "Inqueue"}
        self.client.update(self.PG, pg, namespace=NS)

    def set_phase(self, name: str, phase: str, exit_code: int | None = None, restarts: int = 0) -> None:
        """What a kubelet writes."""
        pod = self.client.get(self.POD, name, namespace=NS)
        status: dict[str, Any] = {"phase": phase}
        state = ({"terminated": {"exitCode": exit_code}} if exit_code is not None
                 else {"running": {}} if phase == "Running" else {})
        status["containerStatuses"] = [{"name": "c", "ready": phase == "Running", "restartCount": restarts,
                                        "state": state}]
        pod["status"] = status
        self.client.update_status(self.POD, pod, namespace=NS)

    def run_all(self, phase: str = "Running") -> None:
        for p in self.pods():
            if not p["metadata"].get("deletionTimestamp"):
                self.set_phase(p["metadata"]["name"], phase, 0 if phase == "Succeeded" else None)

    def push(self, item: dict[str, Any]) -> None:
        self.inbox.push("Job", NS, self.name, item)

    def pod_failed(self, name: str, exit_code: int = 1) -> dict[str, Any]:
        self.set_phase(name, "Failed", exit_code)
        pod = self.client.get(self.POD, name, namespace=NS)
        ann = pod["metadata"]["annotations"]
        item = {"event": "PodFailed", "pod": name, "podUID": pod["metadata"]["uid"],
                "task": ann["volcano.sh/task-spec"], "exitCode": exit_code,
                "jobVersion": int(ann["volcano.sh/job-version"])}
        self.push(item)
        return item

    def events(self) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in self.client.list(self.EVENT, namespace=NS)["items"]]

    def start(self, job: dict[str, Any]) -> None:
        """Submission to Running."""
        self.submit(job)
        self.reconcile()
        self.enqueue()
        self.reconcile()
        self.run_all()
        self.reconcile()
        assert self.phase() == "Running"


@pytest.fixture
def world() -> World:
    return World()


def test_submission_to_completed(world: World) -> None:
    world.submit(vcjob("job1", worker_task(replicas=2), plugins={"svc": [], "env": []}))
    world.reconcile()
    uid = world.job()["metadata"]["uid"]
    pg = world.podgroup()
    assert pg is not None and pg["metadata"]["name"] == f"job1-{uid}"
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "default"
    assert pg["spec"]["minResources"]["cpu"] == "2"
    assert world.phase() == "Pending" and world.pods() == []  # PodGroup not enqueued yet: no pods
    world.reconcile()
    assert world.pods() == []
    world.enqueue()
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0", "job1-worker-1"]
    pod = world.pods()[0]
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"job1-{uid}"
    assert pod["spec"]["hostname"] == "job1-worker-0"  # svc plugin ran
    assert world.status()["pending"] == 2
    world.clock.advance(10)
    world.run_all()
    world.reconcile()
    status = world.status()
    assert (status["state"]["phase"], status["running"]) == ("Running", 2)
    assert status["taskStatusCount"] == {"worker": {"phase": {"Running": 2}}}
    world.clock.advance(20)
    world.run_all("Succeeded")
    world.reconcile()
    status = world.status()
    assert status["state"]["phase"] == "Completed"
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running", "Completed"]
    assert status["succeeded"] == 2 and status["minAvailable"] == 2
    assert status["runningDuration"] == "30s"
    world.reconcile()  # a finished job's state cleans up softly: plugins' objects and the PodGroup go
    assert "controlledResources" not in world.status() and world.status()["version"] == 0
    assert world.podgroup() is None
    assert world.pod_names() == ["job1-worker-0", "job1-worker-1"]  # Succeeded pods are kept


def test_pod_failed_restarts_the_job(world: World) -> None:
    world.start(vcjob(policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    world.pod_failed("job1-worker-1", 137)
    world.reconcile()
    status = world.status()
    assert (status["state"]["phase"], status["version"], status["retryCount"]) == ("Restarting", 1, 1)
    assert world.pods() == [] and world.podgroup() is None
    assert ("ExecuteAction", "Start to execute action RestartJob ") in world.events()
    assert world.inbox.peek("Job", NS, "job1") == []
    world.reconcile()
    assert world.phase() == "Pending" and world.podgroup() is not None
    world.enqueue()
    world.reconcile()
    pods = world.pods()
    assert [p["metadata"]["name"] for p in pods] == ["job1-worker-0", "job1-worker-1"]
    assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods} == {"1"}
    assert {p["metadata"]["annotations"]["volcano.sh/job-retry-count"] for p in pods} == {"1"}
    world.run_all()
    world.reconcile()
    assert world.phase() == "Running"
    # the same PodFailed replayed (at-least-once) is stale now: nothing happens
    world.push({"event": "PodFailed", "pod": "job1-worker-1", "task": "worker", "exitCode": 137, "jobVersion": 0})
    world.reconcile()
    assert (world.phase(), world.status()["retryCount"], len(world.pods())) == ("Running", 1, 2)


def test_abort_and_resume_keep_the_retry_count(world: World) -> None:
    world.start(vcjob())
    world.push({"event": "CommandIssued", "action": "AbortJob", "command": "abort-1"})
    world.reconcile()
    assert world.phase() == "Aborting" and world.pods() == []
    world.reconcile()
    assert world.phase() == "Aborted"
    world.push({"event": "CommandIssued", "action": "ResumeJob", "command": "resume-1"})
    world.reconcile()
    assert world.phase() == "Restarting" and world.status()["retryCount"] == 0
    world.reconcile()
    assert world.phase() == "Pending"
    world.enqueue()
    world.reconcile()
    world.run_all()
    world.reconcile()
    status = world.status()
    assert (status["state"]["phase"], status["retryCount"]) == ("Running", 0)
    assert [c["status"] for c in status["conditions"]] == ["Aborting", "Aborted", "Restarting", "Pending", "Running"]


def test_two_commands_run_one_per_reconcile(world: World) -> None:
    world.start(vcjob())
    world.push({"event": "CommandIssued", "action": "AbortJob"})
    world.push({"event": "CommandIssued", "action": "ResumeJob"})
    assert world.reconcile().requeue_after == 0.0
    assert world.phase() == "Aborting"
    world.reconcile()
    assert world.phase() == "Restarting" and world.status()["retryCount"] == 0


def test_max_retry_exhausted_fails_the_job(world: World) -> None:
    world.start(vcjob(maxRetry=1, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    world.pod_failed("job1-worker-0")
    world.reconcile()
    assert (world.phase(), world.status()["retryCount"]) == ("Restarting", 1)
    assert world.pod_names() == ["job1-worker-0"]  # last retry: the Failed pod is kept (Soft)
    world.reconcile()
    assert world.phase() == "Failed"
    world.reconcile()
    assert world.phase() == "Failed" and world.status()["version"] == 1


def test_task_completed_completes_the_job(world: World) -> None:
    master = worker_task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])
    world.start(vcjob("job1", master, worker_task("worker", 2)))
    world.set_phase("job1-master-0", "Succeeded", 0)
    world.push({"event": "TaskCompleted", "task": "master", "jobVersion": 0})
    world.reconcile()
    assert world.phase() == "Completing"
    assert world.pod_names() == ["job1-master-0"]  # running workers killed, succeeded master kept
    world.reconcile()
    assert world.phase() == "Completed"


def test_delayed_action_fires_later(world: World) -> None:
    world.start(vcjob(policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "60s"}]))
    world.pod_failed("job1-worker-0")
    world.reconcile()
    assert world.phase() == "Running"
    pending = json.loads(world.job()["metadata"]["annotations"][jobs.PENDING_ACTIONS_ANNOTATION])
    assert [e["action"] for e in pending] == ["RestartJob"]
    assert ("ExecuteAction", "Execute action RestartJob after 1m0s") in world.events()
    assert world.timers.due() == []
    world.clock.advance(30)
    world.reconcile()  # some other event: not due yet
    assert world.phase() == "Running"
    world.clock.advance(31)
    assert world.timers.due() == [("Job", NS, "job1")]
    world.reconcile()
    assert (world.phase(), world.status()["retryCount"]) == ("Restarting", 1)
    assert jobs.PENDING_ACTIONS_ANNOTATION not in (world.job()["metadata"].get("annotations") or {})


def test_delayed_action_survives_a_restart_and_is_cancelled_by_recovery(world: World) -> None:
    world.start(vcjob(policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "5m"}]))
    pod = world.pods()[0]
    world.client.delete(world.POD, pod["metadata"]["name"], namespace=NS)
    world.push({"event": "PodEvicted", "pod": pod["metadata"]["name"], "podUID": pod["metadata"]["uid"],
                "task": "worker", "jobVersion": 0})
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0", "job1-worker-1"]  # recreated by SyncJob
    # a fresh worker (no memory) reads the pending action from the Job
    world.ctx = Context(client=world.client, clock=world.clock, timers=MemoryTimers(clock=world.clock),
                        inbox=world.inbox)
    world.run_all()
    world.reconcile()
    assert jobs.PENDING_ACTIONS_ANNOTATION not in (world.job()["metadata"].get("annotations") or {})
    world.clock.advance(600)
    world.reconcile()
    assert (world.phase(), world.status()["retryCount"]) == ("Running", 0)


def test_scale_up_and_down(world: World) -> None:
    world.start(vcjob("job1", worker_task(replicas=3), minAvailable=1, plugins={"svc": []}))
    job = world.job()
    job["spec"]["tasks"][0]["replicas"] = 1
    world.client.update(world.JOB, job, namespace=NS)
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0"]
    assert world.status()["terminating"] == 2
    cm = world.client.get(world.client.registry.get("", "v1", "configmaps"), "job1-svc", namespace=NS)
    assert cm["data"]["VC_WORKER_NUM"] == "1"
    world.reconcile()
    assert world.status()["terminating"] == 0 and world.phase() == "Running"
    job = world.job()
    job["spec"]["tasks"][0]["replicas"] = 2
    job["spec"]["minAvailable"] = 2
    world.client.update(world.JOB, job, namespace=NS)
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0", "job1-worker-1"]
    assert world.podgroup()["spec"]["minMember"] == 2
    assert world.status()["minAvailable"] == 2


def test_depends_on_waits_for_the_dependency(world: World) -> None:
    world.submit(vcjob("job1", worker_task("master", 1, minAvailable=1),
                       worker_task("worker", 2, dependsOn={"name": ["master"]}), minAvailable=1))
    world.reconcile()
    world.enqueue()
    world.reconcile()
    assert world.pod_names() == ["job1-master-0"]
    world.set_phase("job1-master-0", "Running")
    world.reconcile()
    assert world.pod_names() == ["job1-master-0", "job1-worker-0", "job1-worker-1"]


def test_restart_pod_targets_one_pod(world: World) -> None:
    world.start(vcjob(policies=[{"exitCode": 3, "action": "RestartPod"}]))
    world.pod_failed("job1-worker-1", 3)
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0"]
    status = world.status()
    assert (status["state"]["phase"], status["version"], status["retryCount"]) == ("Restarting", 0, 1)
    world.reconcile()
    assert world.pod_names() == ["job1-worker-0", "job1-worker-1"]  # PodGroup kept (still Inqueue)
    assert world.phase() == "Pending"


def test_pvcs_and_missing_claim(world: World) -> None:
    world.submit(vcjob(volumes=[{"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]))
    world.reconcile()
    pvcs = world.client.list(world.client.registry.get("", "v1", "persistentvolumeclaims"), namespace=NS)["items"]
    assert len(pvcs) == 1 and pvcs[0]["metadata"]["name"].startswith("job1-pvc-")
    assert world.status()["controlledResources"] == {f"volume-pvc-{pvcs[0]['metadata']['name']}":
                                                     pvcs[0]["metadata"]["name"]}
    other = World()
    other.submit(vcjob(volumes=[{"mountPath": "/data", "volumeClaimName": "nope"}]))
    assert other.reconcile().requeue_after == 5.0
    assert other.phase() == "Pending" and other.podgroup() is None
    assert any(r == "PVCError" and "pvc nope is not found" in m for r, m in other.events())


def test_unknown_plugin_is_permanent(world: World) -> None:
    world.submit(vcjob(plugins={"nope": []}))
    with pytest.raises(PermanentError):
        world.reconcile()
    assert ("PluginError", "Execute plugin when job add failed, err: failed to get plugin nope") in world.events()


def test_ray_job_without_head_task_is_a_plugin_error_and_gets_no_pods(world: World) -> None:
    world.submit(vcjob(plugins={"ray": []}))
    with pytest.raises(TemporaryError):
        world.reconcile()
    assert ("PluginError", "Execute plugin when job add failed, err: job job1 doesn't have head task head") \
        in world.events()
    assert world.pods() == []


def test_status_write_conflict_raises(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.submit(vcjob())

    def stale(*args: Any, **kwargs: Any) -> Any:
        raise errors.Conflict("the object has been modified")

    monkeypatch.setattr(world.client, "update_status", stale)
    with pytest.raises(errors.Conflict):
        world.reconcile()


def snapshot(world: World) -> Any:
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
        return {**obj, "metadata": meta}

    return (strip(world.job()), [strip(p) for p in world.pods()],
            strip(world.podgroup()) if world.podgroup() else None)


@pytest.mark.parametrize("stage", ["submitted", "enqueued", "running", "restarting"])
def test_reconcile_twice_is_the_same_world(world: World, stage: str) -> None:
    world.submit(vcjob(policies=[{"event": "PodFailed", "action": "RestartJob"}], plugins={"svc": [], "ssh": []}))
    world.reconcile()
    if stage != "submitted":
        world.enqueue()
        world.reconcile()
    if stage in ("running", "restarting"):
        world.run_all()
        world.reconcile()
    if stage == "restarting":
        world.pod_failed("job1-worker-0")
        world.reconcile()  # the kill: Restarting
        world.reconcile()  # Pending again, PodGroup recreated
        world.reconcile()  # Pending's first sync re-adds the plugins' objects: a resting point
    before = snapshot(world)
    world.reconcile()
    assert snapshot(world) == before


# --- property: interleavings of reconciles, scheduler, kubelet and inbox replays -----------------------------------

STEPS = st.lists(st.sampled_from(["reconcile", "enqueue", "run", "fail", "replay", "succeed", "tick"]),
                 min_size=8, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_no_duplicate_pods_under_any_interleaving(steps: list[str]) -> None:
    world = World()
    world.submit(vcjob("job1", worker_task(replicas=3), maxRetry=5,
                       policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    seen: dict[tuple[str, str], str] = {}  # (pod name, job version) -> pod UID
    delivered: list[dict[str, Any]] = []
    for step in steps:
        if step == "reconcile":
            world.reconcile()
        elif step == "enqueue" and world.podgroup() is not None:
            world.enqueue()
        elif step in ("run", "fail", "succeed"):
            live = [p for p in world.pods() if (p.get("status") or {}).get("phase") in ("Pending", "Running", None)]
            if live:
                name = live[0]["metadata"]["name"]
                if step == "fail":
                    delivered.append(world.pod_failed(name))
                else:
                    world.set_phase(name, "Running" if step == "run" else "Succeeded", 0 if step == "succeed" else None)
        elif step == "replay" and delivered:
            world.push(delivered[-1])
        elif step == "tick":
            world.clock.advance(5)
        for pod in world.pods():
            key = (pod["metadata"]["name"], pod["metadata"]["annotations"]["volcano.sh/job-version"])
            assert seen.setdefault(key, pod["metadata"]["uid"]) == pod["metadata"]["uid"], f"duplicate {key}"
        status = world.status()
        assert len(world.pods()) <= 3
        assert int(status.get("retryCount") or 0) <= 5
    for _ in range(3):
        world.reconcile()
    assert world.inbox.peek("Job", NS, "job1") == []
