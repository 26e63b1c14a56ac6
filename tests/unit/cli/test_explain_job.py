"""`lahar explain job`'s pure verdict (volcano#4738): admitted, enqueued, placed and the first thing that blocks a
Job (`explain_job`), and the queue limits it names (`queue_blocker`). The run against devcluster is in
tests/e2e/test_explain_job.py."""

from __future__ import annotations

import pytest

from lahar.commands.explain import JobExplanation, explain_job, queue_blocker, render_job


def queue(state: str | None = "Open", capability: dict[str, str] | None = None) -> dict:
    q: dict = {"metadata": {"name": "q"}, "spec": {}}
    if capability is not None:
        q["spec"]["capability"] = capability
    if state is not None:
        q["status"] = {"state": state}
    return q


QUEUE_CASES = [
    ("missing", None, {"cpu": "1"}, {}, "queue q does not exist"),
    ("open-no-capability", queue(), {"cpu": "64"}, {}, ""),
    ("no-state-is-open", queue(state=None), {"cpu": "1"}, {}, ""),
    ("closed", queue("Closed"), {"cpu": "1"}, {}, "queue q is Closed"),
    ("closing", queue("Closing"), {"cpu": "1"}, {}, "queue q is Closing"),
    ("within-capability", queue(capability={"cpu": "4"}), {"cpu": "2"}, {"cpu": "2"}, ""),
    ("over-capability", queue(capability={"cpu": "4"}), {"cpu": "2"}, {"cpu": "3"},
     "queue q capability cpu: 4 < allocated 3 + requested 2"),
    ("over-capability-units", queue(capability={"memory": "1Gi"}), {"memory": "600Mi"}, {"memory": "512Mi"},
     "queue q capability memory: 1Gi < allocated 512Mi + requested 600Mi"),
    ("capability-of-another-resource", queue(capability={"nvidia.com/gpu": "1"}), {"cpu": "8"}, {}, ""),
]


@pytest.mark.parametrize(("q", "requested", "allocated", "want"), [c[1:] for c in QUEUE_CASES],
                         ids=[c[0] for c in QUEUE_CASES])
def test_queue_blocker(q, requested, allocated, want) -> None:
    assert queue_blocker("q", q, requested=requested, allocated=allocated) == want


J = JobExplanation
VERDICT_CASES = [
    ("denied", dict(denial="duplicate task name t"), J(False, False, False, "admission: duplicate task name t", 0, 2)),
    ("queue-closed", dict(queue_block="queue q is Closed", phase="Pending"),
     J(True, False, False, "queue q is Closed", 0, 2)),
    ("enqueue-vote", dict(phase="Pending", pg_message="resource in cluster is overused"),
     J(True, False, False, "resource in cluster is overused", 0, 2)),
    ("pending-no-message", dict(phase="Pending"),
     J(True, False, False, "the enqueue vote: not enough idle resources in the cluster or the queue", 0, 2)),
    ("no-podgroup-yet", dict(phase=""),
     J(True, False, False, "the enqueue vote: not enough idle resources in the cluster or the queue", 0, 2)),
    ("placed", dict(phase="Running", bound=2), J(True, True, True, "", 2, 2)),
    ("placed-beyond-min", dict(phase="Running", bound=3), J(True, True, True, "", 3, 2)),
    ("inqueue-gang-short", dict(phase="Inqueue", bound=1, pod_reasons=["", "0/1 nodes are available: 1 Insufficient cpu."]),
     J(True, True, False, "0/1 nodes are available: 1 Insufficient cpu.", 1, 2)),
    ("inqueue-pg-message", dict(phase="Inqueue", pg_message="2/2 tasks in gang unschedulable"),
     J(True, True, False, "2/2 tasks in gang unschedulable", 0, 2)),
    ("inqueue-nothing-said", dict(phase="Inqueue"), J(True, True, False, "no node fits the gang", 0, 2)),
]


@pytest.mark.parametrize(("given", "want"), [c[1:] for c in VERDICT_CASES], ids=[c[0] for c in VERDICT_CASES])
def test_explain_job(given, want) -> None:
    args = {"denial": None, "queue_block": "", "phase": "", "pg_message": "", "bound": 0, "min_available": 2,
            **given}
    assert explain_job(**args) == want


def test_render_job() -> None:
    text = render_job("default/j", J(True, False, False, "queue q is Closed", 0, 2))
    assert text == ("job default/j\n  admitted: yes\n  enqueued: no\n  placed:   no (0/2 pods bound)\n"
                    "  blocked by: queue q is Closed\n")


def test_what_if_copy_carries_the_volume_kinds() -> None:
    from lahar.commands import explain as explain_cmd
    from lahar.kube.apiserver.memory import MemoryClient

    mem = MemoryClient.with_crds()
    explain_cmd._seed(mem, {
        "storageclasses": [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                            "provisioner": "lahar.sh/local", "volumeBindingMode": "WaitForFirstConsumer"}],
        "persistentvolumeclaims": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                    "metadata": {"name": "data", "namespace": "team"},
                                    "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                                             "resources": {"requests": {"storage": "1Gi"}}}}]})
    assert mem.get(mem.registry.get("storage.k8s.io", "v1", "storageclasses"), "local")
    assert mem.get(mem.registry.get("", "v1", "persistentvolumeclaims"), "data", namespace="team")
