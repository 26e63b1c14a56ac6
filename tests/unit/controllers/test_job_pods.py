"""Pod, PodGroup and PVC building for the job reconciler: names, labels and annotations as Volcano stamps them
(spec/volcano.md §1.7), minResources as calcPGMinResources, partitions, deterministic names."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.controllers import _job_pods as jp
from tests.builders import vcjob


def task(name: str, replicas: int, cpu: str = "1", min_available: int | None = None, pc: str = "",
         **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}
    if pc:
        spec["priorityClassName"] = pc
    out: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": spec}, **extra}
    if min_available is not None:
        out["minAvailable"] = min_available
    return out


def job(*tasks: dict[str, Any], min_available: int | None = None, **spec: Any) -> dict[str, Any]:
    j = vcjob("tf", "ns1").uid("1234").label().annotate().tasks(*tasks).spec(queue="q1", schedulerName="volcano", **spec)
    if min_available is not None:
        j.min_available(min_available)
    return j.status(version=2, retryCount=1).build()


def test_pod_names_labels_annotations_exactly_as_volcano() -> None:
    j = job(task("worker", 2, topologyPolicy="best-effort"), min_available=2, priorityClassName="high")
    j["metadata"]["annotations"] = {"volcano.sh/preemptable": "false", "volcano.sh/jdb-max-unavailable": "1"}
    j["metadata"]["labels"] = {"volcano.sh/cooldown-time": "600s", "team": "x"}
    pod = jp.build_pod(j, j["spec"]["tasks"][0], 1)
    assert pod["metadata"]["name"] == "tf-worker-1"
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                   "name": "tf", "uid": "1234", "controller": True,
                                                   "blockOwnerDeletion": True}]
    assert pod["metadata"]["annotations"] == {
        "volcano.sh/task-index": "1", "volcano.sh/task-spec": "worker", "scheduling.k8s.io/group-name": "tf-1234",
        "volcano.sh/job-name": "tf", "volcano.sh/queue-name": "q1", "volcano.sh/job-version": "2",
        "volcano.sh/template-uid": "tf-worker", "volcano.sh/job-retry-count": "1",
        "volcano.sh/numa-topology-policy": "best-effort", "volcano.sh/preemptable": "false",
        "volcano.sh/jdb-max-unavailable": "1"}
    assert pod["metadata"]["labels"] == {
        "volcano.sh/task-index": "1", "volcano.sh/job-name": "tf", "volcano.sh/task-spec": "worker",
        "volcano.sh/job-namespace": "ns1", "volcano.sh/queue-name": "q1", "volcano.sh/cooldown-time": "600s"}
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["priorityClassName"] == "high"


def test_template_values_win_and_forwarding_marks() -> None:
    t = task("w", 1, pc="own")
    t["template"]["spec"]["schedulerName"] = "other"
    t["template"]["metadata"] = {"labels": {"app": "x"}, "annotations": {"a": "b"}}
    pod = jp.build_pod(job(t, priorityClassName="high"), t, 0, forwarding=True)
    assert pod["spec"]["schedulerName"] == "other" and pod["spec"]["priorityClassName"] == "own"
    assert pod["metadata"]["labels"]["app"] == "x" and pod["metadata"]["annotations"]["a"] == "b"
    assert pod["metadata"]["labels"]["volcano.sh/job-forwarding"] == "true"


@pytest.mark.parametrize(("index", "size", "want"), [(0, 2, "0"), (1, 2, "0"), (2, 2, "1"), (5, 3, "1")],
                         ids=["first", "same-partition", "next-partition", "size-3"])
def test_partition_label(index: int, size: int, want: str) -> None:
    t = task("w", 6, partitionPolicy={"totalPartitions": 6 // size, "partitionSize": size})
    assert jp.build_pod(job(t), t, index)["metadata"]["labels"]["volcano.sh/partition-id"] == want


def test_volumes_are_mounted_with_deterministic_names() -> None:
    j = job(task("w", 1), volumes=[{"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
                                   {"mountPath": "/ref", "volumeClaimName": "shared"}])
    claims = jp.volume_claims(j)
    assert claims[0][0].startswith("tf-pvc-") and len(claims[0][0]) == len("tf-pvc-") + 12 and claims[0][2]
    assert claims[1] == ("shared", j["spec"]["volumes"][1], False)
    assert jp.volume_claims(j) == claims  # same names every time
    pod = jp.build_pod(j, j["spec"]["tasks"][0], 0)
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]] == [claims[0][0], "shared"]
    assert [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]] == ["/data", "/ref"]
    pvc = jp.build_pvc(j, claims[0][0], j["spec"]["volumes"][0]["volumeClaim"])
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "1234"


MIN_RES = [
    ("job-min-covers-task-mins", job(task("a", 2, "1", 2), task("b", 2, "2", 1), min_available=3), {},
     {"cpu": "4", "count/pods": "3", "pods": "3"}),
    ("job-min-below-task-mins-takes-first-pods", job(task("a", 2, "1", 2), task("b", 2, "2", 2), min_available=3),
     {}, {"cpu": "4", "pods": "3"}),
    ("priority-first", job(task("a", 2, "1", 2, pc="low"), task("b", 2, "2", 2, pc="high"), min_available=3),
     {"low": 1, "high": 100}, {"cpu": "5", "pods": "3"}),
    ("fill-with-extra-replicas", job(task("a", 3, "1", 1), task("b", 2, "2", 1), min_available=4), {},
     {"cpu": "5", "pods": "4"}),
    ("no-task-minimums-counts-replicas", job(task("a", 2, "1"), task("b", 1, "3"), min_available=3), {},
     {"cpu": "5", "pods": "3"}),
    ("zero", job(task("a", 2, "1"), min_available=0), {}, {}),
]


@pytest.mark.parametrize(("name", "the_job", "priorities", "want"), MIN_RES, ids=[c[0] for c in MIN_RES])
def test_min_resources(name: str, the_job: dict[str, Any], priorities: dict[str, int], want: dict[str, str]) -> None:
    got = jp.min_resources(the_job, priorities)
    for key, value in want.items():
        assert got[key] == value, key
    if "cpu" in want:
        assert got["requests.cpu"] == want["cpu"] and got["limits.cpu"] == want["cpu"]


def test_quota_usage_names() -> None:
    spec = {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi",
                                                                    "nvidia.com/gpu": "2"},
                                                       "limits": {"memory": "2Gi", "nvidia.com/gpu": "2"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "500m"}}}]}
    usage = {k: str(v) for k, v in jp.pod_quota_usage(spec).items()}
    assert usage == {"count/pods": "1", "pods": "1", "cpu": "4", "requests.cpu": "4", "memory": "1Gi",
                     "requests.memory": "1Gi", "limits.memory": "2Gi", "nvidia.com/gpu": "2",
                     "requests.nvidia.com/gpu": "2"}


def test_podgroup() -> None:
    j = job(task("a", 4, "1", partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}),
            task("b", 1, "1", 1), min_available=3, priorityClassName="high",
            networkTopology={"mode": "hard", "highestTierAllowed": 2})
    j["metadata"]["annotations"] = {"x": "y"}
    pg = jp.build_podgroup(j)
    assert pg["metadata"]["name"] == "tf-1234" and pg["metadata"]["annotations"] == {"x": "y"}
    assert pg["metadata"]["ownerReferences"][0]["controller"] is True
    spec = pg["spec"]
    assert spec["minMember"] == 3 and spec["queue"] == "q1" and spec["priorityClassName"] == "high"
    assert spec["minTaskMember"] == {"a": 2, "b": 1}
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["subGroupPolicy"] == [{"name": "a", "subGroupSize": 2, "minSubGroups": 1,
                                       "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "a"}},
                                       "matchLabelKeys": ["volcano.sh/partition-id"]}]


def test_normalize_fills_webhook_defaults() -> None:
    raw = {"metadata": {"name": "j"}, "spec": {"tasks": [{"replicas": 2}, {"replicas": 1, "minAvailable": 1}]}}
    j = jp.normalize(raw, default_queue="dq", scheduler_name="lahar")
    assert [t["name"] for t in j["spec"]["tasks"]] == ["default0", "default1"]
    assert (j["spec"]["minAvailable"], j["spec"]["maxRetry"], j["spec"]["queue"], j["spec"]["schedulerName"]) == \
        (3, 3, "dq", "lahar")
    assert "minAvailable" not in raw["spec"]  # a copy
