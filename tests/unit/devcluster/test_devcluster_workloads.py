"""devcluster's plain-workload controllers: the pure plans as tables, then the shell over a MemoryClient.

`devcluster.workloads`: ReplicaSet, Deployment (Recreate), StatefulSet, batch/v1 Job and the default-scheduler.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest

from lahar.devcluster import workloads
from lahar.devcluster.workloads import deployments, jobs
from lahar.kube.apiserver.memory import MemoryClient

NOW = dt.datetime(2025, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}


def owner(kind: str, name: str = "w", *, api: str = "apps/v1", uid: str | None = None, **spec: Any) -> dict:
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE, **spec}}


class P:
    """A pod builder: `P("a").of(rs).phase("Running").ready()`."""

    def __init__(self, name: str) -> None:
        self.obj: dict = {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2025-01-01T00:00:00Z",
                                       "labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}

    def of(self, o: dict) -> P:
        self.obj["metadata"]["ownerReferences"] = [{"apiVersion": o["apiVersion"], "kind": o["kind"],
                                                    "name": o["metadata"]["name"], "uid": o["metadata"]["uid"],
                                                    "controller": True}]
        return self

    def phase(self, phase: str) -> P:
        self.obj["status"]["phase"] = phase
        return self

    def ready(self) -> P:
        self.obj["status"]["phase"] = "Running"
        self.obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        self.obj["spec"]["nodeName"] = "n1"
        return self

    def node(self, name: str) -> P:
        self.obj["spec"]["nodeName"] = name
        return self

    def created(self, ts: str) -> P:
        self.obj["metadata"]["creationTimestamp"] = ts
        return self

    def terminating(self) -> P:
        self.obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        return self

    def index(self, i: int) -> P:
        self.obj["metadata"]["annotations"] = {workloads.JOB_INDEX_ANNOTATION: str(i)}
        return self

    def labels(self, **labels: str) -> P:
        self.obj["metadata"]["labels"].update(labels)
        return self

    def req(self, **requests: str) -> P:
        self.obj["spec"]["containers"][0]["resources"] = {"requests": requests}
        return self


# --------------------------------------------------------------------------------------------------------------
# ReplicaSet

RS = owner("ReplicaSet", "web-abc", replicas=3)
OTHER = owner("ReplicaSet", "other", replicas=1)

RS_CASES = [
    ("scale up from nothing", 3, [], 3, [], 0),
    ("one missing", 3, [P("a").of(RS).ready(), P("b").of(RS).ready()], 1, [], 2),
    ("finished pods do not count", 1, [P("a").of(RS).phase("Failed")], 1, [], 0),
    ("terminating pods do not count", 1, [P("a").of(RS).terminating()], 1, [], 0),
    ("pods of another owner are ignored", 1, [P("a").of(OTHER).ready()], 1, [], 0),
    ("scale down drops pending before running", 1,
     [P("run").of(RS).ready(), P("pend").of(RS), P("run2").of(RS).ready().created("2025-01-03T00:00:00Z")], 0,
     ["pend", "run2"], 2),
    ("scale down drops the newest running first", 1,
     [P("old").of(RS).ready().created("2025-01-01T00:00:00Z"),
      P("new").of(RS).ready().created("2025-01-02T00:00:00Z")], 0, ["new"], 2),
    ("scale to zero", 0, [P("a").of(RS).ready()], 0, ["a"], 1),
]


@pytest.mark.parametrize(("replicas", "pods", "creates", "deletes", "ready"), [c[1:] for c in RS_CASES],
                         ids=[c[0] for c in RS_CASES])
def test_replicaset_plan(replicas: int, pods: list[P], creates: int, deletes: list[str], ready: int) -> None:
    rs = {**RS, "spec": {**RS["spec"], "replicas": replicas}}
    plan = workloads.replicaset_plan(rs, [p.obj for p in pods])
    assert len(plan.create) == creates
    assert sorted(plan.delete) == sorted(deletes)
    assert (plan.status or {}).get("readyReplicas", 0) == ready
    for pod in plan.create:
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("ReplicaSet", "uid-web-abc", True)
        assert pod["metadata"]["generateName"] == "web-abc-"
        assert pod["metadata"]["labels"] == {"app": "web"}


# --------------------------------------------------------------------------------------------------------------
# Deployment


def rs_of(deploy: dict, name: str, *, replicas: int, running: int = 0, revision: int = 1) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "annotations": {workloads.REVISION_ANNOTATION: str(revision)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": deploy["metadata"]["name"], "uid": deploy["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"replicas": replicas},
            "status": {"replicas": running, "readyReplicas": running, "availableReplicas": running}}


def test_deployment_creates_a_replicaset_named_by_the_template_hash() -> None:
    d = owner("Deployment", "web", replicas=2)
    plan = workloads.deployment_plan(d, [], now=NOW)
    (rs,) = plan.create
    h = workloads.template_hash(TEMPLATE)
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["replicas"] == 2
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", "pod-template-hash": h}
    assert rs["metadata"]["annotations"][workloads.REVISION_ANNOTATION] == "1"
    assert rs["metadata"]["ownerReferences"][0]["uid"] == "uid-web"
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "web"}  # the input is not changed


DEPLOY = owner("Deployment", "web", replicas=3)
CURRENT = f"web-{workloads.template_hash(TEMPLATE)}"

DEPLOY_CASES = [
    # id, spec overrides, replicasets, created, scaled, deleted
    ("scale the current replicaset", {}, [rs_of(DEPLOY, CURRENT, replicas=1, running=1)], [], [(CURRENT, 3)], []),
    ("steady", {}, [rs_of(DEPLOY, CURRENT, replicas=3, running=3)], [], [], []),
    ("new template: old goes to zero first", {}, [rs_of(DEPLOY, "web-old", replicas=3, running=3)], [],
     [("web-old", 0)], []),
    ("new template: wait for old pods to go", {}, [rs_of(DEPLOY, "web-old", replicas=0, running=2)], [], [], []),
    ("new template: old gone, create new", {}, [rs_of(DEPLOY, "web-old", replicas=0, running=0)], [CURRENT], [],
     []),
    ("paused: scales but does not roll out", {"paused": True},
     [rs_of(DEPLOY, CURRENT, replicas=1, running=1), rs_of(DEPLOY, "web-old", replicas=1, running=1)], [],
     [(CURRENT, 3)], []),
    ("paused: no new replicaset", {"paused": True}, [rs_of(DEPLOY, "web-old", replicas=3, running=3)], [], [], []),
    ("history limit", {}, [rs_of(DEPLOY, CURRENT, replicas=3, running=3, revision=4)]
     + [rs_of(DEPLOY, f"web-r{i}", replicas=0, revision=i) for i in (1, 2, 3)], [], [], ["web-r1"]),
]


@pytest.mark.parametrize(("spec", "rss", "creates", "scales", "deletes"), [c[1:] for c in DEPLOY_CASES],
                         ids=[c[0] for c in DEPLOY_CASES])
def test_deployment_plan(spec: dict, rss: list[dict], creates: list[str], scales: list[tuple[str, int]],
                         deletes: list[str]) -> None:
    d = {**DEPLOY, "spec": {**DEPLOY["spec"], "revisionHistoryLimit": 2, **spec}}
    plan = workloads.deployment_plan(d, rss, now=NOW)
    assert [r["metadata"]["name"] for r in plan.create] == creates
    assert list(plan.scale) == scales
    assert list(plan.delete) == deletes
    if creates:
        assert plan.create[0]["metadata"]["annotations"][workloads.REVISION_ANNOTATION] == str(
            max(deployments._revision(r) for r in rss) + 1)


def test_deployment_status_and_conditions() -> None:
    rss = [rs_of(DEPLOY, CURRENT, replicas=3, running=3)]
    status = workloads.deployment_plan(DEPLOY, rss, now=NOW).status
    assert status is not None
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (3, 3, 3)
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    later = workloads.deployment_plan({**DEPLOY, "status": status}, rss, now=NOW + dt.timedelta(minutes=5)).status
    assert later == status  # nothing changed → no new timestamps, no write


# --------------------------------------------------------------------------------------------------------------
# StatefulSet

STS = owner("StatefulSet", "db", replicas=3, serviceName="db")
PAR = owner("StatefulSet", "db", replicas=3, podManagementPolicy="Parallel")
REV = f"db-{workloads.template_hash(TEMPLATE)}"


def sp(i: int, sts: dict = STS) -> P:
    return P(f"db-{i}").of(sts).labels(**{workloads.STS_REVISION_LABEL: REV})


STS_CASES = [
    ("ordered: first pod only", STS, [], ["db-0"], []),
    ("ordered: waits for db-0 to be ready", STS, [sp(0)], [], []),
    ("ordered: next once ready", STS, [sp(0).ready()], ["db-1"], []),
    ("ordered: fills a gap", STS, [sp(0).ready(), sp(2).ready()], ["db-1"], []),
    ("parallel: all at once", PAR, [], ["db-0", "db-1", "db-2"], []),
    ("ordered: scale down highest first", {**STS, "spec": {**STS["spec"], "replicas": 1}},
     [sp(0).ready(), sp(1).ready(), sp(2).ready()], [], ["db-2"]),
    ("parallel: scale down all extra", {**PAR, "spec": {**PAR["spec"], "replicas": 1}},
     [sp(0, PAR).ready(), sp(1, PAR).ready(), sp(2, PAR).ready()], [], ["db-2", "db-1"]),
    ("a finished pod is replaced", STS, [sp(0).phase("Failed")], [], ["db-0"]),
    ("rolling update: highest outdated first", STS,
     [sp(0).ready(), sp(1).ready(), P("db-2").of(STS).labels(**{workloads.STS_REVISION_LABEL: "old"}).ready()],
     [], ["db-2"]),
]


@pytest.mark.parametrize(("sts", "pods", "creates", "deletes"), [c[1:] for c in STS_CASES],
                         ids=[c[0] for c in STS_CASES])
def test_statefulset_plan(sts: dict, pods: list[P], creates: list[str], deletes: list[str]) -> None:
    plan = workloads.statefulset_plan(sts, [p.obj for p in pods])
    assert [p["metadata"]["name"] for p in plan.create] == creates
    assert list(plan.delete) == deletes
    for pod in plan.create:
        assert pod["spec"]["hostname"] == pod["metadata"]["name"]
        assert pod["metadata"]["labels"][workloads.STS_POD_NAME_LABEL] == pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"


def test_statefulset_status_revisions() -> None:
    status = workloads.statefulset_plan(STS, [sp(i).ready().obj for i in range(3)]).status
    assert status is not None
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 3, 3)
    assert status["currentRevision"] == status["updateRevision"] == REV


# --------------------------------------------------------------------------------------------------------------
# batch/v1 Job

JOB = owner("Job", "pi", api="batch/v1", parallelism=2, completions=3, backoffLimit=1)
JOB["spec"].pop("selector")


def jp(name: str, job: dict = JOB) -> P:
    return P(name).of(job)


def job(**spec: Any) -> dict:
    return {**JOB, "spec": {**JOB["spec"], **spec}}


JOB_CASES = [
    ("starts parallelism pods", JOB, [], 2, 0, None, None),
    ("keeps parallelism while completions remain", JOB, [jp("a").phase("Succeeded"), jp("b").ready()], 1, 0, None,
     None),
    ("last completion needs one pod", JOB, [jp("a").phase("Succeeded"), jp("b").phase("Succeeded"), jp("c").ready()],
     0, 0, None, None),
    ("complete", JOB, [jp(n).phase("Succeeded") for n in "abc"], 0, 0, "Complete", "CompletionsReached"),
    ("failed pods are replaced within backoffLimit", JOB, [jp("a").phase("Failed")], 2, 0, None, None),
    ("backoff limit exceeded stops the rest", JOB, [jp("a").phase("Failed"), jp("b").phase("Failed"),
                                                    jp("c").ready()], 0, 1, "Failed", "BackoffLimitExceeded"),
    ("deadline", job(activeDeadlineSeconds=10), [jp("a").ready()], 0, 1, "Failed", "DeadlineExceeded"),
    ("suspended", job(suspend=True), [jp("a").ready()], 0, 1, None, None),
    ("work queue: no new pods after a success", job(completions=None), [jp("a").phase("Succeeded"), jp("b").ready()],
     0, 0, None, None),
    ("work queue: done when all finished", job(completions=None), [jp("a").phase("Succeeded")], 0, 0, "Complete",
     "CompletionsReached"),
    ("defaults: one pod, one completion", job(completions=None, parallelism=None), [], 1, 0, None, None),
]


@pytest.mark.parametrize(("j", "pods", "creates", "deletes", "finished", "reason"), [c[1:] for c in JOB_CASES],
                         ids=[c[0] for c in JOB_CASES])
def test_job_plan(j: dict, pods: list[P], creates: int, deletes: int, finished: str | None,
                  reason: str | None) -> None:
    j = {**j, "status": {"startTime": "2025-01-01T11:59:00Z"}}
    plan = workloads.job_plan(j, [p.obj for p in pods], now=NOW)
    assert (len(plan.create), len(plan.delete)) == (creates, deletes)
    conds = {c["type"]: c for c in (plan.status or {}).get("conditions") or []}
    got = next((k for k in ("Complete", "Failed") if k in conds), None)
    assert got == finished
    if finished:
        assert conds[finished]["reason"] == reason
    for pod in plan.create:
        labels = pod["metadata"]["labels"]
        assert labels[workloads.JOB_NAME_LABEL] == "pi"
        assert labels[workloads.CONTROLLER_UID_LABEL] == "uid-pi"
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"


def test_job_status_counts_and_defaulted_selector() -> None:
    pods = [jp("a").phase("Succeeded").obj, jp("b").phase("Failed").obj, jp("c").ready().obj]
    plan = workloads.job_plan(JOB, pods, now=NOW)
    assert plan.status is not None
    assert (plan.status["succeeded"], plan.status["failed"], plan.status["ready"]) == (1, 1, 1)
    assert plan.status["startTime"] == "2025-01-01T12:00:00Z"
    assert plan.owner_patch == {"spec": {
        "selector": {"matchLabels": {workloads.CONTROLLER_UID_LABEL: "uid-pi"}},
        "template": {"metadata": {"labels": {"app": "web", workloads.CONTROLLER_UID_LABEL: "uid-pi",
                                             workloads.JOB_NAME_LABEL: "pi", "controller-uid": "uid-pi",
                                             "job-name": "pi"}}},
        "completionMode": "NonIndexed"}}


@pytest.mark.parametrize(("spec", "want"), [
    ({}, {"completions": 1, "parallelism": 1, "backoffLimit": 6}),
    ({"parallelism": 3}, {"backoffLimit": 6}),
    ({"completions": 4}, {"parallelism": 1, "backoffLimit": 6}),
    ({"completions": 2, "parallelism": 2, "backoffLimit": 0}, {}),
], ids=["nothing set", "work queue", "completions only", "all set"])
def test_job_defaults(spec: dict, want: dict) -> None:
    j = {**JOB, "spec": {"template": TEMPLATE, "selector": {"matchLabels": {"a": "b"}}, "completionMode": "Indexed",
                         **spec}}
    patch = workloads.job_plan(j, [], now=NOW).owner_patch
    assert (patch or {}).get("spec", {}) == want


def test_indexed_job_creates_missing_indexes_and_reports_them() -> None:
    j = job(completionMode="Indexed", parallelism=3, completions=4)
    pods = [jp("a").index(0).phase("Succeeded").obj, jp("b").index(2).ready().obj]
    plan = workloads.job_plan(j, pods, now=NOW)
    got = sorted(p["metadata"]["annotations"][workloads.JOB_INDEX_ANNOTATION] for p in plan.create)
    assert got == ["1", "3"]
    assert plan.status is not None and plan.status["completedIndexes"] == "0"
    assert plan.create[0]["metadata"]["generateName"] == "pi-1-"


@pytest.mark.parametrize(("indexes", "text"), [([], ""), ([0], "0"), ([0, 1, 2, 5], "0-2,5"), ([1, 3], "1,3")],
                         ids=["none", "one", "range", "gaps"])
def test_completed_indexes(indexes: list[int], text: str) -> None:
    assert jobs._index_ranges(indexes) == text


# --------------------------------------------------------------------------------------------------------------
# the default-scheduler


def node(name: str, cpu: str = "4", *, labels: dict | None = None, taints: list | None = None,
         ready: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


SCHED_CASES = [
    ("least loaded", P("x").req(cpu="1"), [node("a"), node("b")], [P("y").node("a").req(cpu="2")], "b"),
    ("does not fit anywhere", P("x").req(cpu="8"), [node("a"), node("b")], [], None),
    ("fits only where there is room", P("x").req(cpu="3"), [node("a"), node("b")],
     [P("y").node("b").req(cpu="2")], "a"),
    ("finished pods free their room", P("x").req(cpu="3"), [node("a", cpu="3")],
     [P("y").node("a").req(cpu="3").phase("Succeeded")], "a"),
    ("node selector", P("x"), [node("a"), node("b", labels={"gpu": "yes"})], [], "b"),
    ("taint without toleration", P("x"), [node("a", taints=[{"key": "k", "effect": "NoSchedule"}])], [], None),
    ("not ready", P("x"), [node("a", ready=False), node("b")], [], "b"),
    ("pods without requests still spread", P("x"), [node("a"), node("b")], [P("y").node("a")], "b"),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "want"), [c[1:] for c in SCHED_CASES],
                         ids=[c[0] for c in SCHED_CASES])
def test_choose_node(pod: P, nodes: list[dict], pods: list[P], want: str | None) -> None:
    if pod.obj["metadata"]["name"] == "x" and any(n["metadata"]["labels"] for n in nodes):
        pod.obj["spec"]["nodeSelector"] = {"gpu": "yes"}
    assert workloads.choose_node(pod.obj, nodes, [p.obj for p in pods]) == want


def test_toleration_lets_a_pod_onto_a_tainted_node() -> None:
    pod = P("x").obj
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    assert workloads.choose_node(pod, [node("a", taints=[{"key": "k", "effect": "NoSchedule"}])], []) == "a"


# --------------------------------------------------------------------------------------------------------------
# the shell over a MemoryClient


@pytest.fixture
def client() -> MemoryClient:
    c = MemoryClient()
    for name in ("n1", "n2"):
        c.create(c.registry.get("", "v1", "nodes"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                                     "status": {"allocatable": {"cpu": "8", "memory": "16Gi",
                                                                                "pods": "110"}}})
    c.create(c.registry.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": "ns"}})
    return c


def rt(c: MemoryClient, group: str, plural: str) -> Any:
    return c.registry.get(group, "v1", plural)


def pods_of(c: MemoryClient, kind: str, active_only: bool = True) -> list[dict]:
    items = c.list(rt(c, "", "pods"), namespace="ns")["items"]
    return [p for p in items if (ref := workloads.controller_of(p)) and ref["kind"] == kind
            and (not active_only or workloads.is_active(p))]


def make_running(c: MemoryClient, phase: str = "Running") -> None:
    """What the kubelet would do: every bound pod becomes Running and Ready (or the given phase)."""
    for p in c.list(rt(c, "", "pods"), namespace="ns")["items"]:
        if p["spec"].get("nodeName") and workloads.is_active(p) and p["status"].get("phase") != phase:
            p["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}
            c.update_status(rt(c, "", "pods"), p)


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE}}


def test_deployment_end_to_end_in_memory(client: MemoryClient) -> None:
    ctl = workloads.WorkloadControllers(client)
    drt = rt(client, "apps", "deployments")
    client.create(drt, DEPLOYMENT)
    ctl.sync()
    (rs,) = client.list(rt(client, "apps", "replicasets"), namespace="ns")["items"]
    pods = pods_of(client, "ReplicaSet")
    assert len(pods) == 3
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"] for p in pods)
    assert all(p["spec"].get("nodeName") in ("n1", "n2") for p in pods)  # the default-scheduler bound them
    make_running(client)
    ctl.sync()
    status = client.get(drt, "web", namespace="ns")["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (3, 3, 3)

    client.patch(drt, "web", {"spec": {"replicas": 1}}, namespace="ns")
    ctl.sync()
    assert len(pods_of(client, "ReplicaSet")) == 1

    client.patch(drt, "web", {"spec": {"template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}},
                 namespace="ns")
    for _ in range(5):  # old pods terminate (the kubelet's part), then the new ReplicaSet comes up
        ctl.sync()
        for p in client.list(rt(client, "", "pods"), namespace="ns")["items"]:
            if p["metadata"].get("deletionTimestamp"):
                client.delete(rt(client, "", "pods"), p["metadata"]["name"], namespace="ns", grace_period_seconds=0)
        make_running(client)
    rss = client.list(rt(client, "apps", "replicasets"), namespace="ns")["items"]
    assert len(rss) == 2
    new = next(r for r in rss if r["spec"]["replicas"] == 1)
    assert new["metadata"]["annotations"][workloads.REVISION_ANNOTATION] == "2"
    assert [p["metadata"]["labels"]["v"] for p in pods_of(client, "ReplicaSet")] == ["2"]


def test_job_end_to_end_in_memory(client: MemoryClient) -> None:
    ctl = workloads.WorkloadControllers(client)
    jrt = rt(client, "batch", "jobs")
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "ns"},
            "spec": {"completions": 2, "parallelism": 2,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}
    client.create(jrt, body)
    ctl.sync()
    pods = pods_of(client, "Job")
    assert len(pods) == 2
    uid = client.get(jrt, "pi", namespace="ns")["metadata"]["uid"]
    assert all(p["metadata"]["labels"][workloads.CONTROLLER_UID_LABEL] == uid for p in pods)
    assert client.get(jrt, "pi", namespace="ns")["spec"]["selector"] == {
        "matchLabels": {workloads.CONTROLLER_UID_LABEL: uid}}
    make_running(client, "Succeeded")
    ctl.sync()
    job_obj = client.get(jrt, "pi", namespace="ns")
    assert job_obj["status"]["succeeded"] == 2
    assert [c["type"] for c in job_obj["status"]["conditions"]] == ["Complete"]
    assert len(client.list(rt(client, "", "pods"), namespace="ns")["items"]) == 2  # no extra pods


def test_statefulset_end_to_end_in_memory(client: MemoryClient) -> None:
    ctl = workloads.WorkloadControllers(client)
    srt = rt(client, "apps", "statefulsets")
    client.create(srt, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"},
                        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "web"}},
                                 "template": TEMPLATE}})
    for _ in range(4):
        ctl.sync()
        make_running(client)
    assert sorted(p["metadata"]["name"] for p in pods_of(client, "StatefulSet")) == ["db-0", "db-1", "db-2"]
    assert client.get(srt, "db", namespace="ns")["status"]["readyReplicas"] == 3


def test_threads_follow_watches_and_stop_cleanly(client: MemoryClient) -> None:
    before = set(threading.enumerate())
    ctl = workloads.WorkloadControllers(client, resync_seconds=0.2).start()
    try:
        client.create(rt(client, "apps", "deployments"), DEPLOYMENT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(pods_of(client, "ReplicaSet")) < 3:
            time.sleep(0.05)
        assert len(pods_of(client, "ReplicaSet")) == 3
    finally:
        ctl.stop()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


def _with(pod: dict, **spec: Any) -> dict:
    pod["spec"].update(spec)
    return pod


FIT_CASES = [
    # kube's PodRequests: a sidecar runs beside the app container, 2 + 3 = 5 > 4 (the old copy saw max(2, 3) = 3)
    ("sidecar-adds", {"initContainers": [{"name": "s", "restartPolicy": "Always",
                                          "resources": {"requests": {"cpu": "3"}}}]}, None),
    ("plain-init-is-a-max", {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]}, "a"),
    ("overhead-adds", {"overhead": {"cpu": "2500m"}}, None),
]


@pytest.mark.parametrize(("spec", "want"), [c[1:] for c in FIT_CASES], ids=[c[0] for c in FIT_CASES])
def test_choose_node_counts_sidecars_and_overhead(spec: dict, want: str | None) -> None:
    pod = _with(P("x").req(cpu="2").obj, **spec)
    assert workloads.choose_node(pod, [node("a")], []) == want


def test_unknown_toleration_operator_tolerates_nothing() -> None:
    pod = P("x").obj
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Matches", "value": "", "effect": "NoSchedule"}]
    assert workloads.choose_node(pod, [node("a", taints=[{"key": "k", "effect": "NoSchedule"}])], []) is None
