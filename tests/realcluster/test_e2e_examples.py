"""Volcano's own examples (`../shared/volcano-examples/`, the list tests/e2e/test_volcano_examples.py uses) on the
real kube-apiserver with lahar's CRDs and webhook, and a gang Job run by lahar's scheduler and controllers on kwok
nodes.

The examples are applied unchanged with the real kubectl, each folder into the namespace devcluster's e2e gives it:
the files holding Queues for real (their queues opened, as Volcano's queue controller would), every other file with
`kubectl apply --dry-run=server` — the real server decodes, validates against the CRD schemas and sends each object
through lahar's mutating and validating webhooks, without storing it, so lahar's controllers do not then run dozens
of example jobs on three kwok nodes. Volcano's invalid_jobs are denied with Volcano's messages; the files Kubernetes
itself refuses (v1beta1 PriorityClass) are refused here too.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests import builders
from tests.builders import pod_template
from tests.e2e import test_volcano_examples as examples
from tests.realcluster.cluster import missing
from tests.realcluster.lahar_stack import LaharStack
from tests.support import wait_for

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster"),
              pytest.mark.skipif(not examples.EXAMPLES.is_dir(), reason="the shared Volcano examples are absent")]


def _queue_files(files: list[str]) -> list[str]:
    return [f for f in files if any(d.get("kind") == "Queue" for d in examples._docs(f))]


def test_volcanos_examples_apply_unchanged(lahar_stack: LaharStack) -> None:
    kubectl = lahar_stack.kubectl
    files = [f for f in examples._files() if not examples._skip_reason(f)]
    assert len(files) >= 30, files
    for ns in sorted({examples.namespace_of(f) for f in files} - {"default"}):
        kubectl("create", "namespace", ns, check=False)  # AlreadyExists is fine (lahar-system's, on a re-run)

    def apply(rel: str, *dry: str) -> Any:
        return kubectl("apply", *dry, "-n", examples.namespace_of(rel), "-f", str(examples.EXAMPLES / rel),
                       check=False)

    queue_files = _queue_files(files)
    for rel in queue_files:  # parents before children: the webhook's informer must have seen the parent
        wait_for(f"{rel} to apply", lambda rel=rel: apply(rel).returncode == 0, timeout=30, interval=0.5)
    queues = [d["metadata"]["name"] for f in queue_files for d in examples._docs(f) if d.get("kind") == "Queue"]
    kubectl.open_queues(*queues)

    rest = [f for f in files if f not in queue_files]
    with ThreadPoolExecutor(3) as pool:
        results = dict(zip(rest, pool.map(lambda f: apply(f, "--dry-run=server"), rest), strict=True))

    wrong: dict[str, str] = {}
    for rel, proc in results.items():
        if rel in examples.DENIED:
            m = re.search(r'admission webhook "validatejob\.volcano\.sh" denied the request: (.*)', proc.stderr,
                          re.S)
            if proc.returncode == 0 or not m or not re.match(examples.DENIED[rel], m.group(1)):
                wrong[rel] = f"expected Volcano's denial, got {proc.returncode}: {proc.stdout}{proc.stderr}"
        elif rel in examples.REFUSED_BY_KUBERNETES:
            if proc.returncode == 0 or "no matches for kind" not in proc.stderr:
                wrong[rel] = f"expected Kubernetes to refuse it, got {proc.returncode}: {proc.stdout}{proc.stderr}"
        elif proc.returncode != 0 or "(server dry run)" not in proc.stdout:
            wrong[rel] = f"refused ({proc.returncode}): {proc.stderr.strip()[:600]}"
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in sorted(wrong.items()))


def test_gang_job_is_bound_by_lahar_and_runs_on_kwok(lahar_stack: LaharStack) -> None:
    """lahar's dispatch, worker, scheduler and beat against the real API server: the Job's PodGroup is created,
    its three pods are created and bound together (gang of 3), and kwok makes them Running."""
    if reason := missing("kwok"):
        pytest.skip(reason)
    lahar_stack.start_controllers()
    kubectl = lahar_stack.kubectl
    ns = f"gang-{uuid.uuid4().hex[:6]}"
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    job = builders.vcjob("gang", namespace=None).task(
        "w", 3, template=pod_template(restart_policy="Never", requests={"cpu": "1"})).spec(minAvailable=3).build()
    assert "job.batch.volcano.sh/gang created" in kubectl.apply(job, ns).stdout

    def pods() -> list[dict[str, Any]]:
        return kubectl.json("get", "pods", "-n", ns, "-l", "volcano.sh/job-name=gang")["items"]

    def running() -> list[dict[str, Any]] | None:
        got = pods()
        ok = len(got) == 3 and all(p["spec"].get("nodeName") and p.get("status", {}).get("phase") == "Running"
                                   for p in got)
        return got if ok else None

    try:
        got = wait_for("the gang's 3 pods to be bound and Running", running, timeout=150, interval=1.0)
    except AssertionError as e:
        logs = "\n".join(f"--- {n}\n{lahar_stack.log_tail(n, 1500)}" for n in ("dispatch", "worker", "scheduler"))
        raise AssertionError(f"{e}\npods: {[(p['metadata']['name'], p['spec'].get('nodeName'), p.get('status', {}).get('phase')) for p in pods()]}\n{logs}") from e
    assert {p["spec"]["nodeName"] for p in got} <= {"kwok-cpu-0", "kwok-cpu-1", "kwok-gpu-0"}
    assert all(p["spec"]["schedulerName"] == "volcano" for p in got)
    wait_for("the Job to be Running", lambda: examples._phase(kubectl.json("get", "vcjob", "gang", "-n", ns))
             == "Running", timeout=60, interval=1.0)
    pg = kubectl.json("get", "podgroups", "-n", ns)["items"]
    assert len(pg) == 1 and pg[0]["spec"]["minMember"] == 3, pg
