"""controllers.dispatch.route: watch event → keys and inbox items, as tables (spec/volcano.md §2.1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lahar.controllers import dispatch
from lahar.controllers.dispatch import ADDED, DELETED, MODIFIED, RESYNC, Work
from lahar.controllers.workqueue import Key
from tests.builders import vcjob

JOB_KEY = Key("Job", "ns", "j")


class Pod(dict):
    """A fluent pod builder: `Pod("j-w-0").of_job("j").task("w").phase("Running")`."""

    def __init__(self, name: str, ns: str = "ns") -> None:
        super().__init__(apiVersion="v1", kind="Pod",
                         metadata={"name": name, "namespace": ns, "uid": f"uid-{name}", "annotations": {}},
                         spec={"schedulerName": "volcano", "containers": [{"name": "c"}]}, status={"phase": "Pending"})

    def of_job(self, job: str = "j", version: int = 0) -> Pod:
        self["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                                                "uid": "job-uid", "controller": True}]
        self["metadata"]["annotations"].update({"volcano.sh/job-name": job, "volcano.sh/job-version": str(version),
                                                "scheduling.k8s.io/group-name": f"{job}-job-uid"})
        return self

    def task(self, task: str) -> Pod:
        self["metadata"]["annotations"]["volcano.sh/task-spec"] = task
        return self

    def phase(self, phase: str, exit_code: int | None = None) -> Pod:
        p = copy.deepcopy(self)
        p["status"] = {"phase": phase}
        if exit_code is not None:
            p["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": exit_code}}}]
        return p

    def annotate(self, **ann: str) -> Pod:
        p = copy.deepcopy(self)
        p["metadata"]["annotations"].update({k.replace("_", "-").replace("--", "/"): v for k, v in ann.items()})
        return p

    def owned_by(self, kind: str, uid: str) -> Pod:
        p = copy.deepcopy(self)
        p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": "rs", "uid": uid,
                                             "controller": True}]
        return p

    def scheduler(self, name: str) -> Pod:
        p = copy.deepcopy(self)
        p["spec"]["schedulerName"] = name
        return p

    def rv(self, rv: str) -> Pod:
        p = copy.deepcopy(self)
        p["metadata"]["resourceVersion"] = rv
        return p


def job(name: str = "j", *, replicas: dict[str, int] | None = None, phase: str = "", generation: int = 1,
        ttl: int | None = None, cron: str | None = None) -> dict[str, Any]:
    j = vcjob(name, "ns").uid("job-uid").generation(generation).tasks(**(replicas or {"w": 2})).status()
    if phase:
        j.phase(phase)
    if ttl is not None:
        j.spec(ttlSecondsAfterFinished=ttl)
    if cron:
        j.owned_by("CronJob", cron, "c")
    return j.build()


def podgroup(name: str = "j-job-uid", *, phase: str = "Pending", queue: str = "default", owner: str | None = "j",
             generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": name, "namespace": "ns", "generation": generation},
                           "spec": {"queue": queue, "minMember": 1}, "status": {"phase": phase}}
    if owner:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                               "name": owner, "uid": "job-uid", "controller": True}]
    return obj


def queue(name: str, *, parent: str | None = None, state: str = "Open") -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"parent": parent} if parent else {}, "status": {"state": state}}


W = Pod("j-w-0").of_job("j", version=3).task("w")
W1 = Pod("j-w-1").of_job("j", version=3).task("w")
BASE = {"pod": "j-w-0", "podUID": "uid-j-w-0", "task": "w", "jobVersion": 3}

POD_CASES = [
    ("add-pending", ADDED, W, None, (), None, [Work(JOB_KEY, ({"event": "PodPending", **BASE},))]),
    ("add-running-no-item", ADDED, W.phase("Running"), None, (), None, [Work(JOB_KEY)]),
    ("add-out-of-sync", ADDED, W.annotate(**{"volcano.sh/controller-out-of-sync": "true"}), None, (), None,
     [Work(JOB_KEY)]),
    # a pod that finished while no dispatcher watched (restart, relist): the edge is re-derived for an active Job
    ("add-failed-missed", ADDED, W.phase("Failed", exit_code=1), None, (), job(phase="Running"),
     [Work(JOB_KEY, ({"event": "PodFailed", **BASE, "exitCode": 1},))]),
    ("add-failed-job-not-cached", ADDED, W.phase("Failed", exit_code=1), None, (), None,
     [Work(JOB_KEY, ({"event": "PodFailed", **BASE, "exitCode": 1},))]),
    ("add-failed-job-finished", ADDED, W.phase("Failed", exit_code=1), None, (), job(phase="Failed"), [Work(JOB_KEY)]),
    ("add-failed-job-restarting", ADDED, W.phase("Failed", exit_code=1), None, (), job(phase="Restarting"),
     [Work(JOB_KEY)]),
    ("add-failed-older-version", ADDED, W.phase("Failed", exit_code=1), None, (),
     job(phase="Running") | {"status": {"state": {"phase": "Running"}, "version": 4}}, [Work(JOB_KEY)]),
    ("add-succeeded-task-done", ADDED, W.phase("Succeeded"), None, (W1.phase("Succeeded"),),
     job(replicas={"w": 2}, phase="Running"), [Work(JOB_KEY, ({"event": "TaskCompleted", "task": "w", "jobVersion": 3},))]),
    ("add-succeeded-task-not-done", ADDED, W.phase("Succeeded"), None, (W1.phase("Running"),),
     job(replicas={"w": 2}, phase="Running"), [Work(JOB_KEY)]),
    ("deleted-evicted", DELETED, W.phase("Running"), None, (), None, [Work(JOB_KEY, ({"event": "PodEvicted", **BASE},))]),
    ("deleted-out-of-sync", DELETED, W.annotate(**{"volcano.sh/controller-out-of-sync": "true"}), None, (), None,
     [Work(JOB_KEY)]),
    ("to-failed-exit-code", MODIFIED, W.phase("Failed", exit_code=137), W.phase("Running"), (), None,
     [Work(JOB_KEY, ({"event": "PodFailed", **BASE, "exitCode": 137},))]),
    ("to-failed-no-status", MODIFIED, W.phase("Failed"), W.phase("Running"), (), None,
     [Work(JOB_KEY, ({"event": "PodFailed", **BASE, "exitCode": None},))]),
    ("failed-again-not-first", MODIFIED, W.phase("Failed", exit_code=1).rv("9"), W.phase("Failed", exit_code=1).rv("8"),
     (), None, []),
    ("to-running", MODIFIED, W.phase("Running"), W.phase("Pending"), (), None,
     [Work(JOB_KEY, ({"event": "PodRunning", **BASE},))]),
    ("back-to-pending", MODIFIED, W.phase("Pending"), W.phase("Running"), (), None,
     [Work(JOB_KEY, ({"event": "PodPending", **BASE},))]),
    ("succeeded-task-not-done", MODIFIED, W.phase("Succeeded"), W.phase("Running"), (W1.phase("Running"),),
     job(replicas={"w": 2}), [Work(JOB_KEY)]),
    ("succeeded-task-done", MODIFIED, W.phase("Succeeded"), W.phase("Running"), (W1.phase("Succeeded"),),
     job(replicas={"w": 2}), [Work(JOB_KEY, ({"event": "TaskCompleted", "task": "w", "jobVersion": 3},))]),
    ("succeeded-sibling-is-self", MODIFIED, W.phase("Succeeded"), W.phase("Running"), (W.phase("Succeeded"),),
     job(replicas={"w": 2}), [Work(JOB_KEY)]),
    ("succeeded-job-unknown", MODIFIED, W.phase("Succeeded"), W.phase("Running"), (W1.phase("Succeeded"),), None,
     [Work(JOB_KEY)]),
    ("heartbeat-only-not-routed", MODIFIED, W.phase("Running").rv("5"), W.phase("Running").rv("4"), (), None, []),
    ("bound-routed-no-item", MODIFIED, W | {"spec": {**W["spec"], "nodeName": "n1"}}, W, (), None, [Work(JOB_KEY)]),
    ("no-task-annotation", DELETED, Pod("x").of_job("j"), None, (), None, [Work(JOB_KEY)]),
    ("plain-pod-gets-podgroup", ADDED, Pod("p"), None, (), None, [Work(Key("PodGroup", "ns", "podgroup-uid-p"))]),
    ("plain-pod-owner-uid", ADDED, Pod("p").owned_by("ReplicaSet", "rs-uid"), None, (), None,
     [Work(Key("PodGroup", "ns", "podgroup-rs-uid"))]),
    ("plain-pod-other-scheduler", ADDED, Pod("p").scheduler("default-scheduler"), None, (), None, []),
    ("plain-pod-grouped", ADDED, Pod("p").annotate(**{"scheduling.k8s.io/group-name": "pg"}), None, (), None, []),
    ("plain-pod-deleted", DELETED, Pod("p"), None, (), None, []),
    ("grouped-pod-deleted-wakes-orphan-gc", DELETED, Pod("p").annotate(**{"scheduling.k8s.io/group-name": "pg"}),
     None, (), None, [Work(Key(dispatch.ORPHANS_KIND, "ns", "pg"))]),
]


@pytest.mark.parametrize(("event", "obj", "old", "siblings", "job_obj", "want"),
                         [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_pod_events(event, obj, old, siblings, job_obj, want) -> None:
    assert dispatch.route("Pod", event, obj, old, siblings=siblings, job=job_obj) == want


J, Q = JOB_KEY, Key("Queue", "", "default")
OTHER_CASES = [
    ("job-added", "Job", ADDED, job(), None, [Work(J)]),
    ("job-status-only-write", "Job", MODIFIED, job(phase="Running") | {"status": {"state": {"phase": "Running"},
                                                                                   "running": 2}},
     job(phase="Running"), []),
    ("job-spec-change", "Job", MODIFIED, job(generation=2), job(generation=1), [Work(J)]),
    ("job-phase-change", "Job", MODIFIED, job(phase="Running"), job(phase="Pending"), [Work(J)]),
    ("job-deleted", "Job", DELETED, job(), None, [Work(J)]),
    ("job-of-cronjob-finishes", "Job", MODIFIED, job(phase="Completed", cron="c"), job(phase="Running", cron="c"),
     [Work(J), Work(Key("CronJob", "ns", "c"))]),
    ("job-finished-with-ttl", "Job", MODIFIED, job(phase="Failed", ttl=60), job(phase="Running", ttl=60),
     [Work(J), Work(Key("GC", "ns", "j"))]),
    ("job-resync-finished-ttl", "Job", RESYNC, job(phase="Completed", ttl=0), None, [Work(J), Work(Key("GC", "ns", "j"))]),
    ("pg-added", "PodGroup", ADDED, podgroup(), None, [Work(J), Work(Q)]),
    ("user-pg-added-goes-to-the-orphan-collector", "PodGroup", ADDED, podgroup("mine", owner=None), None,
     [Work(Key("PodGroupGC", "ns", "mine")), Work(Q)]),
    ("pg-inqueue", "PodGroup", MODIFIED, podgroup(phase="Inqueue"), podgroup(phase="Pending"), [Work(J), Work(Q)]),
    ("pg-unknown", "PodGroup", MODIFIED, podgroup(phase="Unknown"), podgroup(phase="Running"),
     [Work(J, ({"event": "Unknown"},)), Work(Q)]),
    ("pg-same-phase", "PodGroup", MODIFIED, podgroup(phase="Running"), podgroup(phase="Running"), []),
    ("pg-moved-queue", "PodGroup", MODIFIED, podgroup(queue="q2"), podgroup(queue="default"),
     [Work(Key("Queue", "", "q2")), Work(Q)]),
    ("plain-pg-resync", "PodGroup", RESYNC, podgroup("podgroup-u1", owner=None), None,
     [Work(Key("PodGroup", "ns", "podgroup-u1")), Work(Key("PodGroupGC", "ns", "podgroup-u1")), Work(Q)]),
    ("queue-added", "Queue", ADDED, queue("q", parent="p"), None, [Work(Key("Queue", "", "q")), Work(Key("Queue", "", "p"))]),
    ("queue-closed", "Queue", MODIFIED, queue("q", parent="p", state="Closed"), queue("q", parent="p"),
     [Work(Key("Queue", "", "q")), Work(Key("Queue", "", "p"))]),
    ("queue-counts-only", "Queue", MODIFIED, queue("q", parent="p"), queue("q", parent="p"),
     [Work(Key("Queue", "", "q"))]),
    ("queue-deleted", "Queue", DELETED, queue("q", parent="p"), None, [Work(Key("Queue", "", "p"))]),
    ("cronjob", "CronJob", MODIFIED, {"metadata": {"name": "c", "namespace": "ns"}}, {}, [Work(Key("CronJob", "ns", "c"))]),
    ("command", "Command", ADDED, {"metadata": {"name": "cmd", "namespace": "ns"}}, None,
     [Work(Key("Command", "ns", "cmd"))]),
    ("command-deleted", "Command", DELETED, {"metadata": {"name": "cmd", "namespace": "ns"}}, None, []),
]


@pytest.mark.parametrize(("kind", "event", "obj", "old", "want"), [c[1:] for c in OTHER_CASES],
                         ids=[c[0] for c in OTHER_CASES])
def test_other_kinds(kind, event, obj, old, want) -> None:
    assert dispatch.route(kind, event, obj, old) == want


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="Deployment"):
        dispatch.route("Deployment", ADDED, {})


@pytest.mark.parametrize(("pod", "want"), [
    (Pod("p").of_job("j"), "j"),
    (Pod("p").annotate(**{"volcano.sh/job-name": "k"}), "k"),
    (Pod("p").owned_by("ReplicaSet", "u"), None),
], ids=["owner-ref", "annotation", "not-a-job"])
def test_job_of(pod, want) -> None:
    assert dispatch.job_of(pod) == want


def flow_job(phase: str = "Running", *, template: str | None = "ns.a") -> dict:
    """A Job a JobFlow made: controller ref to the flow, the createdBy labels (Volcano's jobflow controller)."""
    labels = {"volcano.sh/createdByJobFlow": "ns.f"}
    if template is not None:
        labels["volcano.sh/createdByJobTemplate"] = template
    return {"metadata": {"name": "f-a", "namespace": "ns", "generation": 1, "labels": labels, "ownerReferences": [
        {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "name": "f", "uid": "u", "controller": True}]},
        "status": {"state": {"phase": phase}}}


def jobflow(phase: str | None = None, generation: int = 1) -> dict:
    return {"metadata": {"name": "f", "namespace": "ns", "generation": generation},
            "status": {"state": {"phase": phase}} if phase else {}}


FJ, FLOW, TEMPLATE = Key("Job", "ns", "f-a"), Key("JobFlow", "ns", "f"), Key("JobTemplate", "ns", "a")
FLOW_CASES = [
    ("step-job-added-wakes-flow-and-template", "Job", ADDED, flow_job("Pending"), None,
     [Work(FJ), Work(FLOW), Work(TEMPLATE)]),
    ("step-job-phase-change-wakes-flow", "Job", MODIFIED, flow_job("Completed"), flow_job("Running"),
     [Work(FJ), Work(FLOW)]),
    ("step-job-counters-only-wake-nobody", "Job", MODIFIED, flow_job("Running"), flow_job("Running"), []),
    ("step-job-deleted-wakes-flow", "Job", DELETED, flow_job("Completed"), None, [Work(FJ), Work(FLOW)]),
    ("step-job-resync-reaches-flow-and-template", "Job", RESYNC, flow_job("Running"), None,
     [Work(FJ), Work(FLOW), Work(TEMPLATE)]),
    ("template-label-needs-one-dot", "Job", ADDED, flow_job("Pending", template="a"), None, [Work(FJ), Work(FLOW)]),
    ("jobflow-added", "JobFlow", ADDED, jobflow(), None, [Work(FLOW)]),
    ("jobflow-phase-changed", "JobFlow", MODIFIED, jobflow("Succeed"), jobflow("Running"), [Work(FLOW)]),
    ("jobflow-spec-changed", "JobFlow", MODIFIED, jobflow("Running", 2), jobflow("Running"), [Work(FLOW)]),
    ("jobflow-own-status-write", "JobFlow", MODIFIED, jobflow("Running"), jobflow("Running"), []),
    ("jobflow-deleted", "JobFlow", DELETED, jobflow("Running"), None, []),
    ("jobtemplate-added", "JobTemplate", ADDED, {"metadata": {"name": "a", "namespace": "ns"}}, None,
     [Work(TEMPLATE)]),
    ("jobtemplate-deleted", "JobTemplate", DELETED, {"metadata": {"name": "a", "namespace": "ns"}}, None, []),
]


@pytest.mark.parametrize(("kind", "event", "obj", "old", "want"), [c[1:] for c in FLOW_CASES],
                         ids=[c[0] for c in FLOW_CASES])
def test_jobflow_routes(kind, event, obj, old, want) -> None:
    assert dispatch.route(kind, event, obj, old) == want
