"""Collection of orphaned PodGroups (volcano#3533, #2265): the pure decision as a table, then the reconciler on the
in-memory cluster — owner gone, no pods for the TTL, a Volcano Job's PodGroup left alone, the Event."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import dispatch, orphans, reconcilers
from lahar.controllers.context import Context
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry
from tests.builders import vcjob

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
NS = "default"


def stamp(seconds_ago: int) -> str:
    return (T0 - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pg(*, annotations: dict[str, str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pg", "namespace": NS, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    return {"metadata": meta}


D = orphans.Decision
CASES = [
    # id, podgroup, owners, controlled by a live Volcano Job, pods, decision
    ("owner-gone", pg(), ["gone"], False, 0, D(delete=True, reason="its owner is gone")),
    ("owner-gone-pods-left", pg(), ["gone"], False, 3, D(delete=True, reason="its owner is gone")),
    ("all-owners-gone", pg(), ["gone", "gone"], False, 0, D(delete=True, reason="its owner is gone")),
    ("one-owner-left", pg(), ["gone", "present"], False, 1, D()),
    ("owner-unknown-kind", pg(), ["unknown"], False, 1, D()),
    ("being-deleted", pg(deleting=True), ["gone"], False, 0, D()),
    ("has-pods", pg(), ["present"], False, 2, D()),
    ("has-pods-clears-stamp", pg(annotations={orphans.NO_PODS_SINCE: stamp(10)}), [], False, 1,
     D(clear_stamp=True)),
    ("job-owned-no-pods", pg(), ["present"], True, 0, D()),
    ("first-seen-empty", pg(), [], False, 0, D(stamp=stamp(0), requeue_after=300.0)),
    ("empty-within-ttl", pg(annotations={orphans.NO_PODS_SINCE: stamp(100)}), ["present"], False, 0,
     D(requeue_after=200.0)),
    ("empty-past-ttl", pg(annotations={orphans.NO_PODS_SINCE: stamp(300)}), [], False, 0,
     D(delete=True, reason="it has had no pods for 300s")),
    ("own-ttl", pg(annotations={orphans.NO_PODS_SINCE: stamp(61), orphans.NO_PODS_TTL: "60"}), [], False, 0,
     D(delete=True, reason="it has had no pods for 60s")),
    ("bad-ttl-is-default", pg(annotations={orphans.NO_PODS_SINCE: stamp(61), orphans.NO_PODS_TTL: "soon"}), [],
     False, 0, D(requeue_after=239.0)),
    ("bad-stamp-restamps", pg(annotations={orphans.NO_PODS_SINCE: "yesterday"}), [], False, 0,
     D(stamp=stamp(0), requeue_after=300.0)),
]


@pytest.mark.parametrize(("obj", "owners", "job", "pods", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_orphaned(obj, owners, job, pods, want) -> None:
    assert orphans.orphaned(obj, owners=owners, controlled_by_job=job, pods=pods, now=T0) == want


def test_dispatch_names_the_collector() -> None:
    assert dispatch.ORPHANS_KIND == orphans.KIND
    assert reconcilers.RECONCILERS[orphans.KIND] is orphans.reconcile


# --- the reconciler on the in-memory cluster ----------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def make_ctx() -> tuple[Context, Clock]:
    clock = Clock()
    store = Store(registry=Registry.of(resources.core()), clock=clock)
    return Context(client=MemoryClient.with_crds(store), clock=clock), clock


def rt(ctx: Context, handle: str) -> Any:
    return {"pg": ctx.client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
            "pod": ctx.client.registry.get("", "v1", "pods"),
            "rs": ctx.client.registry.get("apps", "v1", "replicasets"),
            "job": ctx.client.registry.get("batch.volcano.sh", "v1alpha1", "jobs"),
            "event": ctx.client.registry.get("", "v1", "events")}[handle]


def ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True}


def create_pg(ctx: Context, name: str, *, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owner is not None:
        meta["ownerReferences"] = [ref(owner)]
    return ctx.client.create(rt(ctx, "pg"), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                             "metadata": meta, "spec": {"minMember": 1, "queue": "default"},
                                             "status": {"phase": "Inqueue"}}, namespace=NS)


def create_pod(ctx: Context, name: str, group: str) -> dict[str, Any]:
    return ctx.client.create(rt(ctx, "pod"), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]}}, namespace=NS)


def exists(ctx: Context, name: str) -> bool:
    return any(p["metadata"]["name"] == name for p in ctx.client.list(rt(ctx, "pg"), namespace=NS)["items"])


def event_reasons(ctx: Context) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in ctx.client.list(rt(ctx, "event"), namespace=NS)["items"]]


def _replicaset(ctx: Context) -> dict[str, Any]:
    return ctx.client.create(rt(ctx, "rs"), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}},
        namespace=NS)


def test_podgroup_whose_owner_is_gone_is_deleted_with_an_event() -> None:
    ctx, _ = make_ctx()
    old = _replicaset(ctx)
    create_pg(ctx, "live-pg", owner=old)
    assert orphans.reconcile(ctx, NS, "live-pg").requeue_after == orphans.DEFAULT_TTL_SECONDS  # no pods yet
    assert exists(ctx, "live-pg")  # the owner is there
    # the ReplicaSet deleted and re-created under the same name while the garbage collector lagged: a PodGroup
    # still referencing the old one names an object (that UID) which is gone
    ctx.client.delete(rt(ctx, "rs"), "web", namespace=NS, propagation_policy="Orphan")
    _replicaset(ctx)
    create_pg(ctx, "stale-pg", owner=old)
    create_pod(ctx, "p1", "stale-pg")
    orphans.reconcile(ctx, NS, "stale-pg")
    assert not exists(ctx, "stale-pg")
    assert event_reasons(ctx) == [("OrphanedPodGroupDeleted", f"PodGroup {NS}/stale-pg deleted: its owner is gone")]


def test_podgroup_without_pods_is_deleted_after_its_ttl() -> None:
    ctx, clock = make_ctx()
    create_pg(ctx, "pg1")
    pod = create_pod(ctx, "p1", "pg1")
    assert orphans.reconcile(ctx, NS, "pg1").requeue_after is None  # it has a pod
    ctx.client.delete(rt(ctx, "pod"), pod["metadata"]["name"], namespace=NS)
    result = orphans.reconcile(ctx, NS, "pg1")
    assert result.requeue_after == orphans.DEFAULT_TTL_SECONDS
    got = ctx.client.get(rt(ctx, "pg"), "pg1", namespace=NS)
    assert got["metadata"]["annotations"][orphans.NO_PODS_SINCE] == "2025-01-01T12:00:00Z"
    clock.now = T0 + dt.timedelta(seconds=orphans.DEFAULT_TTL_SECONDS - 30)
    assert orphans.reconcile(ctx, NS, "pg1").requeue_after == 30
    assert exists(ctx, "pg1")
    clock.now = T0 + dt.timedelta(seconds=orphans.DEFAULT_TTL_SECONDS)
    orphans.reconcile(ctx, NS, "pg1")
    assert not exists(ctx, "pg1")
    assert event_reasons(ctx) == [("OrphanedPodGroupDeleted", f"PodGroup {NS}/pg1 deleted: it has had no pods for "
                                                              f"{orphans.DEFAULT_TTL_SECONDS}s")]


def test_a_pod_coming_back_clears_the_clock() -> None:
    ctx, clock = make_ctx()
    create_pg(ctx, "pg1")
    orphans.reconcile(ctx, NS, "pg1")  # stamped
    clock.now = T0 + dt.timedelta(seconds=200)
    create_pod(ctx, "p1", "pg1")
    orphans.reconcile(ctx, NS, "pg1")
    got = ctx.client.get(rt(ctx, "pg"), "pg1", namespace=NS)
    assert orphans.NO_PODS_SINCE not in (got["metadata"].get("annotations") or {})


def test_a_pending_volcano_jobs_podgroup_is_left_alone() -> None:
    ctx, clock = make_ctx()
    job = ctx.client.create(rt(ctx, "job"), vcjob("train", NS).min_available(1).build(), namespace=NS)
    create_pg(ctx, "train-uid", owner=job)
    clock.now = T0 + dt.timedelta(days=1)
    assert orphans.reconcile(ctx, NS, "train-uid").requeue_after is None
    assert exists(ctx, "train-uid")
    got = ctx.client.get(rt(ctx, "pg"), "train-uid", namespace=NS)
    assert orphans.NO_PODS_SINCE not in (got["metadata"].get("annotations") or {})
    assert event_reasons(ctx) == []
