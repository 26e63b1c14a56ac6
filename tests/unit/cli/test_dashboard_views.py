"""The dashboard's view models (`lahar.dashboard.views`, `.nodes`) as tables: objects in, rows out; and the pages'
escaping of every value that comes from the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lahar.dashboard import nodes, pages, views
from lahar.dashboard.app import render
from tests.builders import node, pod, podgroup, queue, vcjob

REPO = Path(__file__).resolve().parents[3]


def _owned(pg: dict, job: str) -> dict:
    pg["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                                          "uid": "u1", "controller": True}]
    return pg


def _job_pod(name: str, job: str, *, node_name: str | None = None, phase: str = "Pending", **ann: str) -> dict:
    p = pod(name, "default").label(**{"volcano.sh/job-name": job}).req(cpu="1")
    if node_name:
        p = p.on(node_name, phase)
    obj = p.obj
    obj["metadata"].setdefault("annotations", {}).update(ann)
    return obj


# -- queues -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("queues", "order"), [
    ([queue("root"), queue("b"), queue("a")], [("root", 0), ("a", 1), ("b", 1)]),
    ([queue("root"), queue("team").parent("root"), queue("x").parent("team")], [("root", 0), ("team", 1), ("x", 2)]),
    ([queue("root"), queue("orphan").parent("gone")], [("orphan", 0), ("root", 0)]),
    ([queue("a").parent("b"), queue("b").parent("a")], [("a", 0), ("b", 1)]),
], ids=["children-by-name", "nested", "missing-parent-at-top", "cycle-shown-once"])
def test_queue_tree_order(queues: list, order: list) -> None:
    rows = views.queue_rows([q.obj for q in queues], [])
    assert [(r.name, r.depth) for r in rows] == order


def test_queue_bars_and_podgroup_counts() -> None:
    q = queue("batch").weight(3).capability(cpu="16", memory="64Gi").guarantee(cpu="4").obj
    q["spec"]["deserved"] = {"cpu": "8"}
    pgs = [podgroup(f"pg{i}", "default").queue("batch").phase(ph).obj
           for i, ph in enumerate(["Pending", "Pending", "Inqueue", "Running"])]
    bound = pod("p", "default").req(cpu="2", memory="1Gi").on("n1").obj
    bound["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "pg3"}
    [row] = views.queue_rows([q], pgs, pods=[bound])
    assert row.weight == 3 and row.podgroups == {"Pending": 2, "Inqueue": 1, "Running": 1}
    cpu = next(b for b in row.bars if b.resource == "cpu")
    assert (cpu.allocated, cpu.deserved, cpu.capability, cpu.guarantee) == (2.0, 8.0, 16.0, 4.0)
    assert cpu.percent(cpu.allocated) == 12.5
    assert [b.resource for b in row.bars] == ["cpu", "memory"]  # no GPU bar where nobody has GPUs


def test_queue_bars_are_scaled_to_the_cluster() -> None:
    q = queue("q").capability(cpu="16").obj
    [row] = views.queue_rows([q], [], cluster={"cpu": 64.0})
    cpu = row.bars[0]
    assert (cpu.scale, cpu.percent(cpu.capability)) == (64.0, 25.0)


def test_queue_status_allocated_wins_over_the_pods() -> None:
    q = queue("q").obj
    q["status"] = {"allocated": {"cpu": "5", "nvidia.com/gpu": "2"}}
    [row] = views.queue_rows([q], [])
    assert {b.resource: b.allocated for b in row.bars} == {"cpu": 5.0, "memory": 0.0, "nvidia.com/gpu": 2.0}


# -- why pending --------------------------------------------------------------------------------------------------

_UNSCHED = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": "queue resource quota insufficient"}


@pytest.mark.parametrize(("q", "pg", "events", "why"), [
    (None, None, [], ("queue batch does not exist", "no PodGroup yet (the job controller has not made it)")),
    (queue("batch").state("Closed").obj, podgroup("pg").obj, [], ("queue batch is Closed",)),
    (queue("batch").capability(cpu="16").obj, podgroup("pg").min_resources(cpu="32", memory="1Gi").obj, [],
     ("queue batch limit: cpu 32 > capability 16",)),
    (queue("batch").obj, {**podgroup("pg").obj, "status": {"phase": "Pending", "conditions": [_UNSCHED]}}, [],
     ("enqueue vote: NotEnoughResources: queue resource quota insufficient",)),
    (queue("batch").obj, podgroup("pg").obj,
     [{"reason": "FailedScheduling", "message": "0/4 nodes are available: 4 Insufficient cpu.", "count": 2},
      {"reason": "FailedScheduling", "message": "0/4 nodes are available: 4 Insufficient cpu."},
      {"reason": "Unschedulable", "message": "1/2 tasks in gang unschedulable"},
      {"reason": "Scheduled", "message": "not a reason to wait"}],
     ("3× 0/4 nodes are available: 4 Insufficient cpu.", "1/2 tasks in gang unschedulable")),
], ids=["no-queue-no-podgroup", "queue-closed", "queue-limit", "enqueue-vote", "fit-errors-grouped"])
def test_why_pending(q: dict | None, pg: dict | None, events: list, why: tuple) -> None:
    job = vcjob("j").queue("batch").obj
    assert views.why_pending(job=job, podgroup=pg, queue=q, events=events) == why


# -- placements ---------------------------------------------------------------------------------------------------

_DEVICES = json.dumps({"gpu": [{"minor": 0, "resources": {}}, {"minor": 1, "resources": {}}],
                       "rdma": [{"minor": 0, "id": "0000:09:00.0", "extension": {"vfs": [
                           {"minor": -1, "busID": "0000:09:00.2"}]}}]})
_PAIRS = json.dumps([{"gpu": 0, "gpuUUID": "GPU-a", "nic": "mlx5_0", "pf": "0000:09:00.0", "vf": "0000:09:00.2",
                      "pcieID": "1", "scope": "SamePCIe"}])


@pytest.mark.parametrize(("ann", "want"), [
    ({}, ((), (), (), ())),
    ({"volcano.sh/topology-decision": '{"numa": {"1": {"cpu": "4"}, "0": {"cpu": "4"}}}'}, (("0", "1"), (), (), ())),
    ({"scheduling.koordinator.sh/device-allocated": _DEVICES, "lahar.sh/gpu-rdma-pairs": _PAIRS},
     ((), ("0", "1"), (("0", "0000:09:00.2"),), ("0000:09:00.2",))),
    ({"volcano.sh/topology-decision": "not json", "scheduling.koordinator.sh/device-allocated": "[1, 2]",
      "lahar.sh/gpu-rdma-pairs": '{"gpu": 0}'}, ((), (), (), ())),
], ids=["none", "numa", "gpus-and-vf-pairs", "malformed-left-out"])
def test_placements(ann: dict, want: tuple) -> None:
    p = views.placements(_job_pod("j-t-0", "j", node_name="n1", phase="Running", **ann))
    assert p.node == "n1" and (p.numa, p.gpus, p.pairs, p.vfs) == want


def test_job_rows_count_the_gang_and_say_why_or_where() -> None:
    jobs = [vcjob("wait").queue("batch").min_available(2).status(pending=2).obj,
            vcjob("run").queue("batch").min_available(1).phase("Running").status(running=1).obj]
    pgs = [_owned(podgroup("wait-uid", "default").queue("batch").obj, "wait"),
           _owned(podgroup("run-uid", "default").queue("batch").phase("Running").obj, "run")]
    pods = [_job_pod("wait-t-0", "wait"), _job_pod("wait-t-1", "wait"),
            _job_pod("run-t-0", "run", node_name="n1", phase="Running",
                     **{"volcano.sh/topology-decision": '{"numa": {"0": {"cpu": "1"}}}'})]
    events = [{"reason": "FailedScheduling", "message": "0/1 nodes are available",
               "involvedObject": {"kind": "Pod", "namespace": "default", "name": "wait-t-1"}}]
    rows = {r.name: r for r in views.job_rows(jobs=jobs, podgroups=pgs, pods=pods, queues=[queue("batch").obj],
                                               events=events)}
    assert (rows["wait"].min_available, rows["wait"].running, rows["wait"].pending) == (2, 0, 2)
    assert rows["wait"].why == ("0/1 nodes are available",) and not rows["wait"].placements
    assert rows["run"].why == () and [(p.pod, p.node, p.numa) for p in rows["run"].placements] == [
        ("run-t-0", "n1", ("0",))]
    assert [phase for phase, _ in views.jobs_by_phase(list(rows.values()))] == ["Pending", "Running"]
    grouped = views.job_rows(jobs=jobs, podgroups=pgs, pods=views.pods_by_job(pods), queues=[queue("batch").obj],
                             events=events)
    assert grouped == list(rows.values())  # pods as a list or already grouped: the same rows


@pytest.mark.parametrize(("details", "detailed"), [(None, 5), (2, 2), (0, 0)], ids=["all", "two", "none"])
def test_job_details_only_for_the_jobs_shown(details: int | None, detailed: int) -> None:
    jobs = [vcjob(f"j{i}").status(pending=1).obj for i in range(5)]
    rows = views.job_rows(jobs=jobs, podgroups=[], pods=[], queues=[], details=details)
    assert len(rows) == 5 and sum(1 for r in rows if r.why) == detailed

# -- nodes --------------------------------------------------------------------------------------------------------


def test_node_rows_sum_the_bound_unfinished_pods() -> None:
    ns = [node("n2").alloc("8", "32Gi").obj,
          node("n1").alloc("4", "16Gi", **{"nvidia.com/gpu": "4", "koordinator.sh/gpu-core": "400"}).obj]
    pods = [pod("a").req(cpu="2", memory="8Gi", **{"nvidia.com/gpu": "4"}).on("n1").obj,
            pod("b").req(cpu="1").on("n1", "Succeeded").obj, pod("c").req(cpu="1").obj]
    cols, rows = nodes.node_rows(ns, pods)
    assert cols == ["cpu", "memory", "nvidia.com/gpu"]
    assert [r.name for r in rows] == ["n1", "n2"]
    n1 = rows[0]
    assert (n1.pods, n1.cells["cpu"].percent, n1.cells["memory"].percent, n1.cells["nvidia.com/gpu"].level) == (
        1, 50.0, 50.0, 10)
    assert rows[1].cells["nvidia.com/gpu"].total == 0


def test_occupancy_kept_from_pod_events_equals_the_recount() -> None:
    occ = nodes.Occupancy()
    a = pod("a").req(cpu="2", memory="1Gi").on("n1").obj
    b = pod("b").req(cpu="1").on("n1").obj
    for p in (a, b, pod("c").req(cpu="5").obj):
        occ.put(p)
    done = {**b, "status": {"phase": "Succeeded"}}
    occ.put(done)  # update: finished, frees its share
    moved = pod("a").req(cpu="2", memory="1Gi").on("n2").obj
    occ.put(moved)
    assert occ.snapshot() == ({"n2": {"cpu": 2.0, "memory": 2.0**30}}, {"n2": 1})
    occ.remove(moved)
    assert occ.snapshot() == ({}, {})
    ns = [node("n1").alloc("4", "8Gi").obj]
    occ.put(a)
    assert nodes.node_rows(ns, occ) == nodes.node_rows(ns, [a, done])


@pytest.mark.parametrize(("used", "total", "level"), [(0, 0, 0), (0, 4, 0), (1, 4, 2), (4, 4, 10), (9, 4, 10)],
                         ids=["no-capacity", "empty", "quarter", "full", "over"])
def test_heat_levels(used: float, total: float, level: int) -> None:
    assert nodes.Cell(used, total).level == level


def _hypernode(name: str, tier: int, *members: dict) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": list(members)}}


def test_hypernode_tree_with_occupancy_per_tier() -> None:
    ns = [node(n).alloc("4", "16Gi").label(rack="r1" if n < "n3" else "r2").obj for n in ("n1", "n2", "n3")]
    pods = [pod("a").req(cpu="4").on("n1").obj]
    cols, rows = nodes.node_rows(ns, pods)
    hns = [_hypernode("s0", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "r1"}}},
                      {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^r2$"}}}),
           _hypernode("r1", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}),
           _hypernode("r2", 1, {"type": "Node", "selector": {"exactMatch": {"name": "n3"}}})]
    tree = nodes.hypernode_rows(hns, rows, ns)
    assert [(h.name, h.tier, h.depth, h.nodes) for h in tree] == [("s0", 2, 0, 3), ("r1", 1, 1, 2), ("r2", 1, 1, 1)]
    assert (tree[0].cells["cpu"].used, tree[0].cells["cpu"].total, tree[1].cells["cpu"].percent) == (4, 12, 50.0)
    assert nodes.hypernode_rows([], rows, ns) == []


# -- policies -----------------------------------------------------------------------------------------------------


def test_policy_rows_and_recent_events() -> None:
    doc = ("apiVersion: lahar.sh/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: gpu-limit}\nspec:\n"
           "  validationActions: [Deny]\n  matchConstraints:\n    resourceRules: [{resources: [jobs]}]\n")
    cms = [{"metadata": {"name": "p", "namespace": "lahar-system", "labels": {"lahar.sh/policy": "true"}},
            "data": {"policy.yaml": doc, "broken.yaml": "a: [1"}},
           {"metadata": {"name": "other", "namespace": "x"}, "data": {"policy.yaml": doc}}]
    events = [{"reason": "PolicyViolation", "type": "Warning", "message": "AdmissionPolicy 'gpu-limit': too many",
               "count": 2, "lastTimestamp": "2026-01-01T00:00:02Z", "metadata": {"namespace": "ml"},
               "involvedObject": {"kind": "Job", "name": "j"}},
              {"reason": "Scheduled", "message": "x", "lastTimestamp": "2026-01-01T00:00:03Z"}]
    rows, recent = views.policy_rows(cms, events)
    assert [(r.name, r.actions, r.resources, r.violations) for r in rows if not r.error] == [
        ("gpu-limit", ("Deny",), ("jobs",), 2)]
    assert [r.error.split(":")[0] for r in rows if r.error] == ["not YAML"]
    assert [(e.object, e.count) for e in recent] == [("Job/j", 2)]


# -- escaping -----------------------------------------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script>'


def test_every_page_escapes_values_from_the_cluster() -> None:
    j = vcjob(HOSTILE.replace('"', "")).queue(HOSTILE).min_available(1).obj
    q = queue(HOSTILE).obj
    n = node(HOSTILE).alloc("1", "1Gi").label(team=HOSTILE).obj
    p = _job_pod("p", j["metadata"]["name"], node_name=HOSTILE, phase="Running",
                 **{"lahar.sh/gpu-rdma-pairs": json.dumps([{"gpu": HOSTILE, "vf": HOSTILE}])})
    ev = {"reason": "PolicyViolation", "message": f"AdmissionPolicy '{HOSTILE}': {HOSTILE}",
          "involvedObject": {"kind": "Job", "name": HOSTILE}, "metadata": {"namespace": HOSTILE}}
    cm = {"metadata": {"name": HOSTILE, "namespace": "x", "labels": {"lahar.sh/policy": "true"}},
          "data": {HOSTILE: f"kind: AdmissionPolicy\nmetadata: {{name: '{HOSTILE}'}}\n"}}
    items = {"queues": [q], "podgroups": [], "jobs": [{**j, "status": {"state": {"phase": "Running"}}}], "pods": [p],
             "nodes": [n], "events": [ev, {**ev, "reason": "FailedScheduling"}], "hypernodes": [
                 _hypernode(HOSTILE, 1, {"type": "Node", "selector": {"regexMatch": {"pattern": ".*"}}})],
             "configmaps": [cm]}
    for page, _ in pages.PAGES:
        _, html = render(page, lambda k: items[k])
        assert "<script" not in html, page
        assert "&lt;script&gt;" in html, page


# -- the share over the last hour ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "want"), [
    ([], "–"),
    ([0.5], "–"),
    ([0.0, 1.0], 'points="0.0,24.0 120.0,0.0"'),
    ([0.0, 0.5, 2.0], 'points="0.0,24.0 60.0,12.0 120.0,0.0"'),
], ids=["none", "one-point", "empty-to-full", "clamped"])
def test_sparkline(values: list, want: str) -> None:
    assert want in pages.sparkline(values)


def test_dominant_shares() -> None:
    q = queue("q").obj
    q["status"] = {"allocated": {"cpu": "8", "memory": "48Gi"}}
    rows = views.queue_rows([q, queue("idle").obj], [], cluster={"cpu": 64.0, "memory": 64.0 * 2**30})
    assert views.shares(rows) == {"q": 0.75, "idle": 0.0}
    html = pages.queues_page(rows, [(0.0, {"q": 0.25}), (60.0, {"q": 0.75})])
    assert "<svg" in html and "75%" in html
