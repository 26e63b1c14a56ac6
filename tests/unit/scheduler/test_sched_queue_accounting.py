"""Queue accounting you can trust (issue 20 item 7; volcano#3137, #4584): after every session, each queue's stored
`status.allocated` and PodGroup counters per phase are what that session computed, and they match the cluster
recounted from scratch. A Hypothesis property over random job histories (create, bind, complete, delete) on the
in-memory cluster, and the pure `framework.status.queue_status` as a table."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.kube import quantity
from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework import status
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import node, pod, podgroup, queue

NS = "c1"
LEAVES = ("qa", "qb")
COUNTERS = tuple(status.PHASE_COUNTERS.values())


def _cluster() -> MemoryClient:
    c = MemoryClient.with_crds()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    q_rt = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
    c.create(q_rt, queue("root").build())
    for name in LEAVES:
        c.create(q_rt, queue(name).parent("root").build())
    n_rt = reg.get("", "v1", "nodes")
    for i in range(2):
        built = node(f"n{i}").alloc("4", "8Gi").build()
        n = c.create(n_rt, built)
        n["status"] = built["status"]
        c.update_status(n_rt, n)
    return c


def _rts(c: MemoryClient) -> tuple[Any, Any, Any]:
    reg = c.registry
    return (reg.get("", "v1", "pods"), reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
            reg.get("scheduling.volcano.sh", "v1beta1", "queues"))


def _create(c: MemoryClient, job: int, leaf: str, size: int, cpu: int) -> None:
    pods_rt, pg_rt, _ = _rts(c)
    c.create(pg_rt, podgroup(f"j{job}").min(size).queue(leaf).build(), namespace=NS)
    for i in range(size):
        c.create(pods_rt, pod(f"j{job}-{i}").req(str(cpu), "1Gi").group(f"j{job}").build(), namespace=NS)


def _job_pods(c: MemoryClient, job: int) -> list[dict[str, Any]]:
    pods_rt, _, _ = _rts(c)
    return [p for p in c.list(pods_rt, namespace=NS)["items"] if p["metadata"]["name"].startswith(f"j{job}-")]


def _complete(c: MemoryClient, job: int) -> None:
    pods_rt, _, _ = _rts(c)
    for p in _job_pods(c, job):
        if p["spec"].get("nodeName"):  # a kubelet finishes what runs
            c.patch(pods_rt, p["metadata"]["name"], {"status": {"phase": "Succeeded"}}, namespace=NS,
                    subresource="status")


def _delete(c: MemoryClient, job: int) -> None:
    pods_rt, pg_rt, _ = _rts(c)
    for p in _job_pods(c, job):
        c.delete(pods_rt, p["metadata"]["name"], namespace=NS, grace_period_seconds=0)
    c.delete(pg_rt, f"j{job}", namespace=NS)


def _recount(c: MemoryClient) -> tuple[dict[str, int], dict[str, Counter[str]]]:
    """From the stored objects alone: milli-cpu held per queue (bound, not finished; rolled up to root) and the
    PodGroups per phase counter per queue (the queue controller's way)."""
    pods_rt, pg_rt, _ = _rts(c)
    queue_of = {pg["metadata"]["name"]: pg["spec"]["queue"] for pg in c.list(pg_rt, namespace=NS)["items"]}
    held = dict.fromkeys(("root", *LEAVES), 0)
    for p in c.list(pods_rt, namespace=NS)["items"]:
        group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
        if group in queue_of and p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded",
                                                                                                 "Failed"):
            cpu = quantity.parse(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]).milli_value()
            held[queue_of[group]] += cpu
            held["root"] += cpu
    counts: dict[str, Counter[str]] = {name: Counter() for name in held}
    for pg in c.list(pg_rt, namespace=NS)["items"]:
        key = status.PHASE_COUNTERS.get((pg.get("status") or {}).get("phase") or "")
        if key:
            counts[pg["spec"]["queue"]][key] += 1
    return held, counts


def _check(c: MemoryClient, decisions: Any) -> None:
    _, _, q_rt = _rts(c)
    held, counts = _recount(c)
    phases = Counter((upd.status.get("phase") or "") for upd in decisions.podgroups.values())
    session_counts: Counter[str] = Counter()
    for name in held:
        session_counts.update(decisions.queue_counts[name])
    assert +session_counts == Counter({status.PHASE_COUNTERS[p]: n for p, n in phases.items()
                                       if p in status.PHASE_COUNTERS})
    for name, milli in held.items():
        stored = c.get(q_rt, name).get("status") or {}
        session_cpu = quantity.parse(decisions.queues[name].get("cpu") or "0").milli_value()
        stored_cpu = quantity.parse((stored.get("allocated") or {}).get("cpu") or "0").milli_value()
        assert session_cpu == stored_cpu == milli, (name, decisions.queues[name], stored, milli)
        want = {k: v for k, v in decisions.queue_counts[name].items() if v}
        assert {k: stored[k] for k in COUNTERS if stored.get(k)} == want == dict(counts[name]), (name, stored)


OPS = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(LEAVES), st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.just("complete"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("session")),
)


@settings(derandomize=True, max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=7))
def test_queue_status_is_what_each_session_computed(history: list[tuple[Any, ...]]) -> None:
    c = _cluster()
    registry = in_tree_registry()
    conf = confs.default_conf(registry.plugin_names)
    jobs: list[int] = []
    for op in [*history, ("session",)]:
        if op[0] == "create":
            _create(c, len(jobs), op[1], op[2], op[3])
            jobs.append(len(jobs))
        elif op[0] in ("complete", "delete") and jobs:
            job = jobs[op[1] % len(jobs)]
            if op[0] == "complete":
                _complete(c, job)
            else:
                _delete(c, job)
                jobs.remove(job)
        decisions, result = run_once(c, conf, registry=registry)  # a session after every step: binds happen here
        assert not result.bind_failures
        _check(c, decisions)


def _snap(stored: dict[str, Any]) -> snapshots.Snapshot:
    qa = queue("qa").parent("root").build()
    qa["status"].update(stored)
    pods = [pod("a0").req("1", "1Gi").group("pa").on("n1").build(), pod("b0").req("1", "1Gi").group("pb").build()]
    return snapshots.build(pods=pods, nodes=[node("n1").alloc("4", "8Gi").build()],
                           podgroups=[podgroup("pa").min(1).queue("qa").phase("Running").build(),
                                      podgroup("pb").min(1).queue("qa").phase("Inqueue").build()],
                           queues=[queue("root").build(), qa])


QUEUE_STATUS = [
    ("counters-missing", {"allocated": {"cpu": "1", "memory": "1Gi"}}, {}, True),
    ("counters-as-computed", {"allocated": {"cpu": "1", "memory": "1Gi"}, "running": 1, "inqueue": 1}, {}, False),
    ("a-phase-moved", {"allocated": {"cpu": "1", "memory": "1Gi"}, "running": 1, "inqueue": 1},
     {"c1/pb": "Pending"}, True),
    ("allocated-stale", {"allocated": {"cpu": "0", "memory": "0"}, "running": 1, "inqueue": 1}, {}, True),
]


@pytest.mark.parametrize(("stored", "phases", "dirty"), [q[1:] for q in QUEUE_STATUS],
                         ids=[q[0] for q in QUEUE_STATUS])
def test_queue_status_write_or_not(stored: dict[str, Any], phases: dict[str, str], dirty: bool) -> None:
    snap = _snap(stored)
    jobs = list(snap.jobs.values())
    phases = {**{j.uid: j.phase for j in jobs}, **phases}
    _, counts, changed = status.queue_status(jobs, snap.queues, snap.resources, phases)
    assert ("qa" in changed) is dirty
    assert counts["qa"]["running"] == 1 and counts["root"] == dict.fromkeys(COUNTERS, 0)
