"""PodGroups for plain pods and workloads (Volcano pg-controller shapes: TestAddPodGroup, min-member, queue, STS/RS)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import podgroups
from lahar.controllers.context import Context
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
NS = "default"


def make_ctx() -> Context:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    client = MemoryClient.with_crds(store)
    return Context(client=client, clock=lambda: T0)


def rt(ctx: Context, group: str, version: str, plural: str) -> Any:
    return ctx.client.registry.get(group, version, plural)


def pods(ctx): return rt(ctx, "", "v1", "pods")
def pgs(ctx): return rt(ctx, "scheduling.volcano.sh", "v1beta1", "podgroups")


def create_owner(ctx: Context, kind: str, name: str, *, annotations: dict | None = None, replicas: int = 1) -> dict:
    plural, group = {"ReplicaSet": ("replicasets", "apps"), "StatefulSet": ("statefulsets", "apps"),
                     "Job": ("jobs", "batch"), "Deployment": ("deployments", "apps")}[kind]
    body: dict[str, Any] = {"apiVersion": f"{group}/v1", "kind": kind,
                            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
                            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                     "template": {"metadata": {"labels": {"app": name}},
                                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    if kind == "Job":
        body["spec"].pop("replicas")
    return ctx.client.create(rt(ctx, group, "v1", plural), body, namespace=NS)


def owner_ref(owner: dict, *, controller: bool = True) -> dict:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": controller}


def create_pod(ctx: Context, name: str, *, owner: dict | None = None, scheduler: str = "volcano",
               annotations: dict | None = None, cpu: str = "500m", memory: str = "1Gi",
               priority_class: str = "", init_cpu: str | None = None) -> dict:
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "c", "image": "x",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"requests": {"cpu": init_cpu}}}]
    meta: dict[str, Any] = {"name": name, "namespace": NS, "annotations": annotations or {}}
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    return ctx.client.create(pods(ctx), {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
                             namespace=NS)


def reconcile_for(ctx: Context, pod: dict) -> str:
    name = podgroups.podgroup_name(pod)
    podgroups.reconcile(ctx, NS, name)
    return name


def get_pg(ctx: Context, name: str) -> dict:
    return ctx.client.get(pgs(ctx), name, namespace=NS)


# --- pure -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("annotations", "expected"), [
    ({}, 1),
    ({"scheduling.volcano.sh/group-min-member": "3"}, 3),
    ({"scheduling.volcano.sh/group-min-member": "0"}, 0),
    ({"scheduling.volcano.sh/group-min-member": "-2"}, 1),
    ({"scheduling.volcano.sh/group-min-member": "three"}, 1),
], ids=["absent", "three", "zero", "negative-ignored", "garbage-ignored"])
def test_min_member_from_owner_annotation(annotations: dict, expected: int) -> None:
    assert podgroups.min_member(annotations) == expected


@pytest.mark.parametrize(("annotations", "expected"), [
    ({}, None),
    ({"volcano.sh/network-topology-mode": "soft"}, {"mode": "soft"}),
    ({"volcano.sh/network-topology-mode": "SOFT", "volcano.sh/network-topology-highest-tier": "2"},
     {"mode": "soft", "highestTierAllowed": 2}),
    ({"volcano.sh/network-topology-mode": "weird"}, {"mode": "hard"}),
    ({"volcano.sh/network-topology-highest-tier": "x"}, {"mode": "hard"}),
], ids=["none", "soft", "soft-tier", "bad-mode-hard", "bad-tier-dropped"])
def test_network_topology_from_pod_annotations(annotations: dict, expected: dict | None) -> None:
    assert podgroups.network_topology(annotations) == expected


MIN_RESOURCES_CASES = [
    ("larger-of-containers-and-init", {
        "containers": [{"resources": {"requests": {"cpu": "1"}}},
                       {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
        "overhead": {"cpu": "100m"}}, {"cpu": "2100m", "memory": "1Gi"}),
    # kube's PodRequests: a sidecar runs beside the app containers (the old copy took max(1, 2) = 2)
    ("sidecar-adds", {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "2"}}}]}, {"cpu": "3"}),
]


@pytest.mark.parametrize(("spec", "want"), [c[1:] for c in MIN_RESOURCES_CASES],
                         ids=[c[0] for c in MIN_RESOURCES_CASES])
def test_min_resources_are_the_pods_effective_requests(spec: dict, want: dict) -> None:
    pg = podgroups.build_podgroup({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}, name="pg")
    assert pg["spec"]["minResources"] == want


# --- reconcile ----------------------------------------------------------------------------------------------------


def test_pod_with_controller_owner_gets_owner_podgroup() -> None:
    ctx = make_ctx()
    rs = create_owner(ctx, "ReplicaSet", "rs1")
    pod = create_pod(ctx, "pod1", owner=rs, priority_class="test-pc")
    name = reconcile_for(ctx, pod)
    assert name == f"podgroup-{rs['metadata']['uid']}"
    pg = get_pg(ctx, name)
    assert pg["metadata"]["ownerReferences"] == [owner_ref(rs)]
    assert pg["spec"] == {"minMember": 1, "queue": "default", "priorityClassName": "test-pc",
                          "minResources": {"cpu": "500m", "memory": "1Gi"}}
    assert pg["status"]["phase"] == "Pending"
    assert ctx.client.get(pods(ctx), "pod1", namespace=NS)["metadata"]["annotations"][
        "scheduling.k8s.io/group-name"] == name


def test_pod_without_owner_gets_its_own_podgroup_owned_by_the_pod() -> None:
    ctx = make_ctx()
    pod = create_pod(ctx, "pod1")
    name = reconcile_for(ctx, pod)
    assert name == f"podgroup-{pod['metadata']['uid']}"
    assert get_pg(ctx, name)["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "pod1", "uid": pod["metadata"]["uid"], "controller": True,
         "blockOwnerDeletion": True}]


@pytest.mark.parametrize(("kind", "owner_annotations", "pod_annotations", "ns_annotations", "expect"), [
    ("ReplicaSet", {"scheduling.volcano.sh/group-min-member": "2"}, {}, {},
     {"minMember": 2, "queue": "default", "cpu": "1"}),
    ("StatefulSet", {"scheduling.volcano.sh/group-min-member": "3"}, {"scheduling.volcano.sh/queue-name": "q1"}, {},
     {"minMember": 3, "queue": "q1", "cpu": "1500m"}),
    ("Job", {}, {}, {"scheduling.volcano.sh/queue-name": "team"},
     {"minMember": 1, "queue": "team", "cpu": "500m"}),
    ("Job", {}, {"scheduling.volcano.sh/queue-name": "mine"}, {"scheduling.volcano.sh/queue-name": "team"},
     {"minMember": 1, "queue": "mine", "cpu": "500m"}),
], ids=["rs-min-member", "sts-pod-queue", "batch-job-namespace-queue", "pod-queue-beats-namespace"])
def test_podgroup_spec_from_owner_pod_and_namespace(kind: str, owner_annotations: dict, pod_annotations: dict,
                                                    ns_annotations: dict, expect: dict) -> None:
    ctx = make_ctx()
    if ns_annotations:
        ns_rt = rt(ctx, "", "v1", "namespaces")
        ctx.client.patch(ns_rt, NS, {"metadata": {"annotations": ns_annotations}})
    owner = create_owner(ctx, kind, "w1", annotations=owner_annotations)
    name = reconcile_for(ctx, create_pod(ctx, "p0", owner=owner, annotations=pod_annotations))
    spec = get_pg(ctx, name)["spec"]
    assert (spec["minMember"], spec["queue"], spec["minResources"]["cpu"]) == (
        expect["minMember"], expect["queue"], expect["cpu"])


def test_deployment_annotations_reach_the_podgroup_through_the_replicaset() -> None:
    ctx = make_ctx()
    dep = create_owner(ctx, "Deployment", "web", annotations={"scheduling.volcano.sh/group-min-member": "2",
                                                                 "volcano.sh/preemptable": "false"})
    rs_body = create_owner(ctx, "ReplicaSet", "web-abc")
    rs_body["metadata"]["ownerReferences"] = [owner_ref(dep)]
    rs = ctx.client.update(rt(ctx, "apps", "v1", "replicasets"), rs_body, namespace=NS)
    name = reconcile_for(ctx, create_pod(ctx, "web-abc-1", owner=rs))
    pg = get_pg(ctx, name)
    assert pg["spec"]["minMember"] == 2
    assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}


@pytest.mark.parametrize(("scheduler", "annotations"), [
    ("default-scheduler", {}),
    ("volcano", {"scheduling.k8s.io/group-name": "someone-elses"}),
], ids=["other-scheduler", "already-in-another-group"])
def test_pods_that_are_not_ours_get_no_podgroup(scheduler: str, annotations: dict) -> None:
    ctx = make_ctx()
    pod = create_pod(ctx, "p", scheduler=scheduler, annotations=annotations)
    reconcile_for(ctx, pod)
    assert ctx.client.list(pgs(ctx), namespace=NS)["items"] == []


def test_a_jobs_podgroup_name_is_not_ours() -> None:
    ctx = make_ctx()
    create_pod(ctx, "p")
    podgroups.reconcile(ctx, NS, "myjob-1234")
    assert ctx.client.list(pgs(ctx), namespace=NS)["items"] == []


def test_reconcile_twice_writes_nothing_new() -> None:
    ctx = make_ctx()
    rs = create_owner(ctx, "ReplicaSet", "rs1")
    pods_ = [create_pod(ctx, f"p{i}", owner=rs) for i in range(3)]
    name = reconcile_for(ctx, pods_[0])
    before = get_pg(ctx, name)["metadata"]["resourceVersion"]
    pod_rvs = [ctx.client.get(pods(ctx), f"p{i}", namespace=NS)["metadata"]["resourceVersion"] for i in range(3)]
    reconcile_for(ctx, pods_[0])
    assert get_pg(ctx, name)["metadata"]["resourceVersion"] == before
    assert [ctx.client.get(pods(ctx), f"p{i}", namespace=NS)["metadata"]["resourceVersion"]
            for i in range(3)] == pod_rvs
    assert all(ctx.client.get(pods(ctx), f"p{i}", namespace=NS)["metadata"]["annotations"][
        "scheduling.k8s.io/group-name"] == name for i in range(3))


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet"])
def test_workload_scaled_to_zero_loses_its_podgroup(kind: str) -> None:
    ctx = make_ctx()
    owner = create_owner(ctx, kind, "w")
    name = reconcile_for(ctx, create_pod(ctx, "w-0", owner=owner))
    assert get_pg(ctx, name)
    plural = "replicasets" if kind == "ReplicaSet" else "statefulsets"
    ctx.client.patch(rt(ctx, "apps", "v1", plural), "w", {"spec": {"replicas": 0}}, namespace=NS)
    podgroups.reconcile(ctx, NS, name)
    assert ctx.client.list(pgs(ctx), namespace=NS)["items"] == []


def test_statefulset_podgroup_follows_min_member_and_new_pods() -> None:
    ctx = make_ctx()
    sts = create_owner(ctx, "StatefulSet", "db", annotations={"scheduling.volcano.sh/group-min-member": "2"})
    name = reconcile_for(ctx, create_pod(ctx, "db-0", owner=sts))
    assert get_pg(ctx, name)["spec"]["minMember"] == 2
    ctx.client.patch(rt(ctx, "apps", "v1", "statefulsets"), "db",
                     {"metadata": {"annotations": {"scheduling.volcano.sh/group-min-member": "4"}}}, namespace=NS)
    ctx.client.delete(pods(ctx), "db-0", namespace=NS)
    create_pod(ctx, "db-0", owner=sts, cpu="1")  # re-created from the new template
    podgroups.reconcile(ctx, NS, name)
    spec = get_pg(ctx, name)["spec"]
    assert (spec["minMember"], spec["minResources"]["cpu"]) == (4, "4")


def test_plain_pod_podgroup_is_created_once_not_updated() -> None:
    ctx = make_ctx()
    job = create_owner(ctx, "Job", "batch1", annotations={"scheduling.volcano.sh/group-min-member": "2"})
    name = reconcile_for(ctx, create_pod(ctx, "b-0", owner=job))
    ctx.client.patch(rt(ctx, "batch", "v1", "jobs"), "batch1",
                     {"metadata": {"annotations": {"scheduling.volcano.sh/group-min-member": "5"}}}, namespace=NS)
    create_pod(ctx, "b-1", owner=job)
    podgroups.reconcile(ctx, NS, name)
    assert get_pg(ctx, name)["spec"]["minMember"] == 2
    assert ctx.client.get(pods(ctx), "b-1", namespace=NS)["metadata"]["annotations"][
        "scheduling.k8s.io/group-name"] == name


def test_inherited_annotations_pod_overrides_owner() -> None:
    ctx = make_ctx()
    rs = create_owner(ctx, "ReplicaSet", "rs", annotations={"volcano.sh/preemptable": "true",
                                                            "volcano.sh/cooldown-time": "600s",
                                                            "unrelated.io/x": "y"})
    name = reconcile_for(ctx, create_pod(ctx, "p", owner=rs, annotations={"volcano.sh/preemptable": "false"}))
    assert get_pg(ctx, name)["metadata"]["annotations"] == {"volcano.sh/preemptable": "false",
                                                            "volcano.sh/cooldown-time": "600s"}


def test_custom_scheduler_names_are_honoured() -> None:
    ctx = make_ctx()
    ctx.scheduler_names = ("lahar",)
    pod = create_pod(ctx, "p", scheduler="lahar")
    assert podgroups.wants_podgroup(pod, ctx.scheduler_names)
    name = reconcile_for(ctx, pod)
    assert get_pg(ctx, name)["spec"]["minMember"] == 1


def test_finished_pods_do_not_recreate_a_deleted_podgroup() -> None:
    ctx = make_ctx()
    pod = create_pod(ctx, "p")
    name = reconcile_for(ctx, pod)
    pod = ctx.client.get(pods(ctx), "p", namespace=NS)
    pod["status"] = {"phase": "Succeeded"}
    ctx.client.update_status(pods(ctx), pod, namespace=NS)
    ctx.client.delete(pgs(ctx), name, namespace=NS)
    podgroups.reconcile(ctx, NS, name)
    assert ctx.client.list(pgs(ctx), namespace=NS)["items"] == []
