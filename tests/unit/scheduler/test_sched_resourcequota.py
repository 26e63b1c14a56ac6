"""resourcequota: the quota check table, Volcano's plugins/resourcequota/resourcequota_test.go cases as data, an
enqueue session where a job a co-tier plugin rejects does not use up the namespace's quota, and the scheduler cache
and the one-shot lister carrying ResourceQuotas into the snapshot."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from lahar.kube import quantity
from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.cache import SchedulerCache
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.session import Session
from lahar.scheduler.plugins import resourcequota as rq
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import list_objects, run_session
from tests.builders import node, objs, pod, podgroup, queue

HUGE = {"cpu": "20000m", "memory": "20G"}
NORMAL = {"cpu": "2000m", "memory": "2G"}


def _quota(name: str, ns: str, hard: dict[str, str] | None, *, used: dict[str, str] | None = None,
           status: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
                           "spec": {"hard": dict(hard or {})}}
    if status:
        obj["status"] = {"hard": dict(hard or {}), "used": dict(used or {})}
    return obj


def _q(obj: dict[str, Any]) -> rq.Quota:
    return rq.quota_of(obj)


@pytest.mark.parametrize(("min_resources", "quotas", "pending", "fits"), [
    (NORMAL, [_quota("test", "default", NORMAL)], None, True),
    (HUGE, [_quota("test", "default", NORMAL)], None, False),
    (HUGE, [], None, True),
    (None, [_quota("test", "default", NORMAL)], None, True),
    (NORMAL, [_quota("test", "default", NORMAL, used={"cpu": "1"})], None, False),
    (NORMAL, [_quota("test", "default", NORMAL)], {"cpu": "1"}, False),
    ({"cpu": "1"}, [_quota("test", "default", {"memory": "1G"})], None, True),  # quota limits nothing asked
    ({"cpu": "1", "nvidia.com/gpu": "2"}, [_quota("test", "default", {"cpu": "4"})], None, True),
    (NORMAL, [_quota("roomy", "default", HUGE), _quota("tight", "default", {"cpu": "1"})], None, False),
    ({"cpu": "2"}, [_quota("test", "default", {"requests.cpu": "1"})], None, False),  # lahar: requests.<name>
    ({"cpu": "2"}, [_quota("test", "default", {"requests.cpu": "1", "cpu": "4"})], None, False),  # the tighter
    ({"cpu": "2"}, [_quota("test", "default", {"cpu": "1"}, status=False)], None, False),  # lahar: spec.hard
    ({"cpu": "2"}, [_quota("test", "default", {"pods": "1"})], None, True),
], ids=["fits", "too-big", "no-quota", "no-min-resources", "used-counts", "pending-counts", "other-names",
        "unlimited-names-ignored", "every-quota-must-fit", "requests-prefix", "tighter-of-two", "no-status-yet",
        "pods-quota-ignored"])
def test_check(min_resources: dict[str, str] | None, quotas: list[dict[str, Any]], pending: dict[str, str] | None,
               fits: bool) -> None:
    got = rq.check(min_resources, [_q(o) for o in quotas], quantity.resource_list(pending) if pending else None)
    assert (got is None) is fits


def test_check_message_names_the_exceeded_resources() -> None:
    got = rq.check({"cpu": "3", "memory": "1G"}, [_q(_quota("q", "default", {"cpu": "4", "memory": "8G"},
                                                              used={"cpu": "2"}))])
    assert got == "resource quota insufficient, requested: cpu=3, used: cpu=2, limited: cpu=4"


def test_malformed_quantities_are_dropped() -> None:
    q = _q(_quota("q", "default", {"cpu": "lots", "memory": "1G"}))
    assert set(q.hard) == {"memory"}


def _session(podgroups: list[Any], quotas: list[dict[str, Any]], *, registry: Registry | None = None,
             plugins: list[dict[str, Any]] | None = None, pods: list[Any] = ()) -> Session:  # type: ignore[assignment]
    registry = registry or in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "enqueue", "tiers": [{"plugins": plugins or [
        {"name": "resourcequota"}]}]}), actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(list(pods)), nodes=objs([node("n1").alloc("4", "4G", pods=10)]),
                           podgroups=objs(podgroups), queues=objs([queue("c1"), queue("q1")]),
                           resourcequotas=quotas)
    return Session(snap, conf, registry, uid="ssn-1")


def _pg(name: str, ns: str = "default", mr: dict[str, str] | None = None, q: str = "c1") -> Any:
    g = podgroup(name, ns).min(2).queue(q)
    return g.min_resources(**mr) if mr is not None else g


UPSTREAM = [
    dict(id="quota-matches-the-needs", pg=_pg("pg1", mr=NORMAL), quotas=[_quota("test", "default", NORMAL)],
         want=True),
    dict(id="quota-cannot-match-the-needs", pg=_pg("pg2", mr=HUGE), quotas=[_quota("test", "default", NORMAL)],
         want=False),
    dict(id="no-resourcequota-object", pg=_pg("pg2", mr=HUGE), quotas=[], want=True),
    dict(id="min-resources-not-set", pg=_pg("pg3"), quotas=[_quota("test", "default", NORMAL)], want=True),
]


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["id"] for c in UPSTREAM])
def test_upstream_enqueueable(case: dict[str, Any]) -> None:
    ssn = _session([case["pg"]], case["quotas"])
    (job,) = ssn.jobs.values()
    assert ssn.job_enqueueable(job) is case["want"]


def test_rejection_is_an_event_on_the_podgroup() -> None:
    ssn = _session([_pg("pg2", mr=HUGE)], [_quota("test", "default", NORMAL)])
    (job,) = ssn.jobs.values()
    assert ssn.plugins["resourcequota"].job_enqueueable(job) is Vote.REJECT
    ((type_, reason, message),) = job.events
    assert (type_, reason) == ("Normal", "Unschedulable") and message.startswith("resource quota insufficient")


class _Rejecter:
    name = "test-rejecter"

    def __init__(self, arguments: Any = None) -> None:
        pass

    def job_enqueueable(self, job: Any) -> Vote:
        return Vote.REJECT if job.name == "pgA" else Vote.PERMIT


def _phases(ssn: Session) -> dict[str, str]:
    return {uid: upd.status.get("phase") for uid, upd in ssn.close().podgroups.items()}


# Volcano's TestJobEnqueuedOnOtherPluginsReject: quota of 1 CPU; pgA is rejected by a co-tier plugin, so it must
# not take the quota pgB needs.
def test_upstream_rejected_job_does_not_consume_quota() -> None:
    registry = in_tree_registry().copy().add_plugin("test-rejecter", _Rejecter)
    one = {"cpu": "1", "memory": "1G"}
    pods = [pod("podA", "ns1").req("1", "1G").group("pgA"), pod("podB", "ns1").req("1", "1G").group("pgB")]
    pgs = [_pg("pgA", "ns1", one, q="q1").min(1).phase("Pending"), _pg("pgB", "ns1", one, q="q1").min(1).phase("Pending")]
    ssn = _session(pgs, [_quota("rq1", "ns1", one)], registry=registry, pods=pods,
                   plugins=[{"name": "resourcequota"}, {"name": "test-rejecter"}])
    registry.action("enqueue").execute(ssn)
    assert _phases(ssn).get("ns1/pgB") == "Inqueue"


def test_second_job_waits_for_the_quota_the_first_took() -> None:
    one = {"cpu": "1", "memory": "1G"}
    pods = [pod("a", "ns1").req("1", "1G").group("pgA"), pod("b", "ns1").req("1", "1G").group("pgB")]
    pgs = [_pg("pgA", "ns1", one, q="q1").min(1).phase("Pending").created(1),
           _pg("pgB", "ns1", one, q="q1").min(1).phase("Pending").created(2)]
    registry = in_tree_registry()
    conf = confs.load("actions: enqueue\ntiers:\n- plugins:\n  - name: resourcequota\n",
                      actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(pods), nodes=objs([node("n1").alloc("4", "4G", pods=10)]), podgroups=objs(pgs),
                           queues=objs([queue("q1")]), resourcequotas=[_quota("rq1", "ns1", one)])
    d = run_session(snap, conf, registry=registry, uid="ssn-1")
    phases = {uid: u.status.get("phase") for uid, u in d.podgroups.items()}
    assert phases.get("ns1/pgA") == "Inqueue" and phases.get("ns1/pgB", "Pending") == "Pending"


def test_scheduler_cache_and_list_objects_carry_resourcequotas() -> None:
    client = MemoryClient.with_crds()
    rt = client.registry.get("", "v1", "resourcequotas")
    client.create(client.registry.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": "ns1"}})
    client.create(rt, _quota("rq1", "ns1", {"cpu": "1"}, status=False), namespace="ns1")
    assert [o["metadata"]["name"] for o in list_objects(client)["resourcequotas"]] == ["rq1"]
    cache = SchedulerCache(client)
    try:
        assert cache.start(10)
        deadline = time.monotonic() + 10
        while "ns1/rq1" not in (cache.snapshot().extras.get("resourcequotas") or {}):
            assert time.monotonic() < deadline, "the cache never saw the quota"
            time.sleep(0.02)
        client.delete(rt, "rq1", namespace="ns1")
        while "ns1/rq1" in (cache.snapshot().extras.get("resourcequotas") or {}):
            assert time.monotonic() < deadline, "the cache never dropped the quota"
            time.sleep(0.02)
    finally:
        cache.stop()
