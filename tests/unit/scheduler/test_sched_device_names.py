"""Device-owned resource names in a session (issue 13 item 2): HAMi's `nvidia.com/gpumem`, `gpumem-percentage`,
`gpucores` and `priority` are advertised by no node, so the generic fit must leave them to the device model; a pod
left pending says per node why ("0/4 nodes are available: 4 ..."), in the Event and in the PodGroup's message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import nodes as nodes_
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.registry import in_tree_registry
from tests.builders import podgroup, queue, tiers_conf
from tests.unit.scheduler.test_sched_deviceshare import _objs, dpod

DEVICESHARE = tiers_conf("enqueue, allocate", ["priority", "gang"],
                         ["predicates", "proportion", "nodeorder", "numa-aware", "deviceshare"])

NAMES = [
    ("cpu", "cpu", True),
    ("memory", "memory", True),
    ("whole-gpu-count", "nvidia.com/gpu", True),
    ("hami-gpumem", "nvidia.com/gpumem", False),
    ("hami-gpumem-percentage", "nvidia.com/gpumem-percentage", False),
    ("hami-gpucores", "nvidia.com/gpucores", False),
    ("hami-priority", "nvidia.com/priority", False),
    ("volcano-vgpu-number", "volcano.sh/vgpu-number", True),
    ("volcano-vgpu-memory", "volcano.sh/vgpu-memory", True),
    ("mig-mixed", "nvidia.com/mig-1g.10gb", True),
    ("rdma-vf", "nvidia.com/rdma_vf", True),
    ("koordinator-gpu", "koordinator.sh/gpu", True),
    ("pods-not-scalar", "pods", False),
    ("kubernetes-io-domain", "kubernetes.io/foo", False),
]


@pytest.mark.parametrize(("name", "dimension"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_is_dimension(name: str, dimension: bool) -> None:
    assert nodes_.is_dimension(name) is dimension
    assert (name in nodes_.ResourceIndex([name]).names) is dimension


HAMI = {"nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "30"}
MIG = {"nvidia.com/vgpu-mode": "mig"}
PREDICATE = [
    # id, gpus, extra requests, annotations, conf, expected reason on every node (None = all 4 nodes feasible)
    ("gpumem-gpucores-default-conf", 1, HAMI, None, None, None),
    ("gpumem-gpucores-deviceshare", 1, HAMI, None, DEVICESHARE, None),
    ("gpumem-percentage", 1, {"nvidia.com/gpumem-percentage": "50"}, None, None, None),
    ("gpucores-priority", 1, {"nvidia.com/gpucores": "100", "nvidia.com/priority": "0"}, None, None, None),
    ("dynamic-mig", 1, {"nvidia.com/gpumem": "10000"}, MIG, DEVICESHARE, None),
    ("count-still-checked", 9, HAMI, None, None, "Insufficient nvidia.com/gpu"),
    ("cpu-still-checked", 1, {**HAMI, "cpu": "500"}, None, None, "Insufficient cpu"),
]


def _session(pods: list[dict[str, Any]], conf: str | None, *, phase: str = "Inqueue",
             min_resources: dict[str, str] | None = None) -> Session:
    registry = in_tree_registry()
    c = (confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names) if conf
         else confs.default_conf(registry.plugin_names))
    pg = podgroup("pg1").min(len(pods)).phase(phase)
    if min_resources:
        pg.min_resources(**min_resources)
    snap = snapshots.build(pods=pods, podgroups=[pg.build()], queues=[queue("c1").build()], **_objs("dgx-h100", 4))
    return Session(snap, c, registry, uid="ssn-1")


@pytest.mark.parametrize(("gpus", "extra", "annotations", "conf", "reason"), [p[1:] for p in PREDICATE],
                         ids=[p[0] for p in PREDICATE])
def test_predicate_on_device_owned_names(gpus: int, extra: dict[str, str], annotations: dict[str, str] | None,
                                         conf: str | None, reason: str | None) -> None:
    ssn = _session([dpod("p1", gpus=gpus, extra=extra, annotations=annotations)], conf)
    (task,) = ssn.snapshot.tasks.values()
    feasible, errors = ssn.predicate_nodes(task)
    if reason is None:
        assert errors is None and feasible.sum() == 4
    else:
        assert errors is not None and errors.message() == f"0/4 nodes are available: 4 {reason}."


@pytest.mark.parametrize("conf", [None, DEVICESHARE], ids=["default-conf", "deviceshare"])
def test_hami_pod_enqueues_and_binds_on_dgx_h100(conf: str | None) -> None:
    """The PodGroup's minResources carry the HAMi names too (the job controller sums the pods): enqueue must not
    find the cluster short of `nvidia.com/gpumem` either."""
    ssn = _session([dpod("p1", gpus=1, extra=HAMI)], conf, phase="Pending",
                   min_resources={"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1", **HAMI})
    for name in ssn.conf.actions:
        ssn.registry.action(name, ssn.conf.action_arguments(name)).execute(ssn)
    d = ssn.close()
    assert [b.name for b in d.binds] == ["p1"]


def test_pending_pod_says_why_per_node() -> None:
    ssn = _session([dpod("p1", gpus=9, extra=HAMI)], None)
    for name in ssn.conf.actions:
        ssn.registry.action(name, ssn.conf.action_arguments(name)).execute(ssn)
    d = ssn.close()
    per_node = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    (cond,) = d.pod_conditions
    assert cond.event_message == per_node  # the condition's message drops the counts (volcano#3072)
    assert cond.message == "no node is available: Insufficient nvidia.com/gpu."
    (upd,) = d.podgroups.values()
    (event,) = [e for e in upd.events if e[0] == "Warning"]
    assert event[1] == "Unschedulable" and "Undetermined" not in event[2]
    assert event[2] == ("1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
                        f"Pending: 1 Unschedulable. Origin reason is p1: {per_node}")


FIT_ERROR = [
    ("task-fit-error", True, [], "; Pending: 2 Unschedulable. Origin reason is p0: 0/2 nodes are available: "
                                 "2 Insufficient cpu."),
    ("held-at-enqueue", False, [("Normal", "Unschedulable", "resource in cluster is overused")],
     "; Pending: 2 Unschedulable. Origin reason is: resource in cluster is overused"),
    ("nothing-known", False, [], "; Pending: 2 Unschedulable"),
]


@pytest.mark.parametrize(("fit", "events", "tail"), [f[1:] for f in FIT_ERROR], ids=[f[0] for f in FIT_ERROR])
def test_fit_error(fit: bool, events: list[tuple[str, str, str]], tail: str) -> None:
    """Volcano JobInfo.FitError: pending tasks are Unschedulable (never "Undetermined"), then the origin reason."""
    snap = snapshots.build(pods=[dpod(f"p{i}") for i in range(2)], podgroups=[podgroup("pg1").min(2).build()],
                           queues=[queue("c1").build()])
    (job,) = snap.jobs.values()
    if fit:
        job.fit_errors["c1-p0"] = snapshots.FitErrors(total=2, reasons={"Insufficient cpu": 2})  # type: ignore[arg-type]
    job.events.extend(events)
    assert job.fit_error() == f"pod group is not ready, 2 Pending, 2 minAvailable{tail}"


@pytest.mark.parametrize(("extra", "cards"), [(HAMI, 1), ({"nvidia.com/gpumem-percentage": "50"}, 1),
                                              ({"nvidia.com/gpumem": "1000"}, 1)],
                         ids=["gpumem-gpucores", "gpumem-percentage", "gpumem"])
def test_hami_request_takes_whole_cards_on_a_node_without_hami(extra: dict[str, str], cards: int) -> None:
    """dgx-h100 nodes run the plain NVIDIA device plugin (no HAMi registration): deviceshare gives the pod whole
    cards, recorded in the device-allocated annotation, so no other pod is given the same GPU."""
    ssn = _session([dpod("p1", gpus=cards, extra=extra), dpod("p2", gpus=8)], DEVICESHARE)
    for name in ssn.conf.actions:
        ssn.registry.action(name, ssn.conf.action_arguments(name)).execute(ssn)
    d = ssn.close()
    where = {b.name: b for b in d.binds}
    assert set(where) == {"p1", "p2"} and where["p1"].node != where["p2"].node
    allocated = json.loads(d.annotations["c1-p1"]["scheduling.koordinator.sh/device-allocated"])
    assert len(allocated["gpu"]) == cards
