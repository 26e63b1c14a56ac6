"""`kubectl apply --server-side` against a live devcluster: create, re-apply as a no-op, conflicts between field
managers and `--force-conflicts`, pruning of dropped fields, server dry run and `kubectl diff --server-side`, for
a ConfigMap, a Deployment and a Volcano Job (a CRD).

The real kubectl as a subprocess (skipped without it); plain devcluster, no lahar webhooks.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.builders import pod_template
from tests.e2e.test_kubectl_basic import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest.fixture(scope="module")
def kubectl(live_devcluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(live_devcluster.kubeconfig, tmp_path_factory.mktemp("kubectl-ssa-home"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"ssa-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def configmap(ns: str, **data: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns},
                           "data": data})


def deployment(ns: str, *, replicas: int = 2, image: str = "nginx:1.25") -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": image,
                                                       "ports": [{"containerPort": 80}]}]}}}})


def vcjob(ns: str, *, min_available: int = 1) -> str:
    job = builders.vcjob("vj", ns).spec(minAvailable=min_available, schedulerName="volcano", queue="default")
    return yaml.safe_dump(job.task("worker", 1, template=pod_template(restart_policy="Never")).build())


def ssa(kubectl: Kubectl, manifest: str, *flags: str, check: bool = True) -> Any:
    return kubectl("apply", "--server-side", *flags, "-f", "-", stdin=manifest, check=check)


def owners(obj: dict[str, Any]) -> dict[str, Any]:
    return {f"{m['manager']}/{m['operation']}": m["fieldsV1"] for m in obj["metadata"].get("managedFields") or []}


def rv(kubectl: Kubectl, *what: str) -> str:
    return kubectl.json("get", *what)["metadata"]["resourceVersion"]


def test_configmap_apply_twice_is_a_no_op_and_dropped_keys_go(kubectl: Kubectl, ns: str) -> None:
    assert "configmap/cfg serverside-applied" in ssa(kubectl, configmap(ns, a="1", b="2")).stdout
    before = rv(kubectl, "configmap", "cfg", "-n", ns)
    ssa(kubectl, configmap(ns, a="1", b="2"))
    obj = kubectl.json("get", "configmap", "cfg", "-n", ns, "--show-managed-fields")
    assert obj["metadata"]["resourceVersion"] == before
    assert owners(obj) == {"kubectl/Apply": {"f:data": {"f:a": {}, "f:b": {}}}}
    ssa(kubectl, configmap(ns, a="1"))
    assert kubectl.json("get", "configmap", "cfg", "-n", ns)["data"] == {"a": "1"}


def test_server_dry_run_stores_nothing(kubectl: Kubectl, ns: str) -> None:
    ssa(kubectl, configmap(ns, a="1"), "--dry-run=server")
    assert kubectl("get", "configmap", "cfg", "-n", ns, check=False).returncode != 0


def test_deployment_conflict_names_the_manager_and_force_wins(kubectl: Kubectl, ns: str) -> None:
    ssa(kubectl, deployment(ns))
    before = rv(kubectl, "deployment", "web", "-n", ns)
    ssa(kubectl, deployment(ns))
    assert rv(kubectl, "deployment", "web", "-n", ns) == before
    refused = ssa(kubectl, deployment(ns, replicas=3), "--field-manager=hpa", check=False)
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in refused.stderr
    ssa(kubectl, deployment(ns, replicas=3), "--field-manager=hpa", "--force-conflicts")
    obj = kubectl.json("get", "deployment", "web", "-n", ns, "--show-managed-fields")
    assert obj["spec"]["replicas"] == 3
    managed = owners(obj)
    assert managed["hpa/Apply"]["f:spec"]["f:replicas"] == {}
    assert "f:replicas" not in managed["kubectl/Apply"]["f:spec"]
    assert 'k:{"name":"app"}' in managed["kubectl/Apply"]["f:spec"]["f:template"]["f:spec"]["f:containers"]


def test_diff_server_side(kubectl: Kubectl, ns: str) -> None:
    ssa(kubectl, deployment(ns))
    same = kubectl("diff", "--server-side", "-f", "-", stdin=deployment(ns), check=False)
    assert same.returncode == 0, same.stderr
    changed = kubectl("diff", "--server-side", "-f", "-", stdin=deployment(ns, image="nginx:1.26"), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "+      - image: nginx:1.26" in changed.stdout and "-      - image: nginx:1.25" in changed.stdout
    assert kubectl.json("get", "deployment", "web", "-n", ns)["spec"]["template"]["spec"]["containers"][0][
        "image"] == "nginx:1.25"


@pytest.fixture(scope="module")
def volcano_crds(kubectl: Kubectl) -> None:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    kubectl("apply", "--server-side", "-f", str(CRDS))
    kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh", "--timeout=20s")


@pytest.mark.usefixtures("volcano_crds")
def test_volcano_job_apply_conflict_and_force(kubectl: Kubectl, ns: str) -> None:
    assert "job.batch.volcano.sh/vj serverside-applied" in ssa(kubectl, vcjob(ns)).stdout
    before = rv(kubectl, "jobs.batch.volcano.sh", "vj", "-n", ns)
    ssa(kubectl, vcjob(ns))
    assert rv(kubectl, "jobs.batch.volcano.sh", "vj", "-n", ns) == before
    refused = ssa(kubectl, vcjob(ns, min_available=2), "--field-manager=other", check=False)
    assert 'conflict with "kubectl": .spec.minAvailable' in refused.stderr
    ssa(kubectl, vcjob(ns, min_available=2), "--field-manager=other", "--force-conflicts")
    obj = kubectl.json("get", "jobs.batch.volcano.sh", "vj", "-n", ns, "--show-managed-fields")
    assert obj["spec"]["minAvailable"] == 2
    assert owners(obj)["other/Apply"]["f:spec"]["f:minAvailable"] == {}
    assert "f:tasks" in owners(obj)["kubectl/Apply"]["f:spec"]  # an atomic list in Volcano's CRD


def test_client_side_apply_moves_to_server_side(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=deployment(ns))
    ssa(kubectl, deployment(ns))  # kubectl hands the client-side manager's fields to "kubectl" (a JSON patch)
    managed = owners(kubectl.json("get", "deployment", "web", "-n", ns, "--show-managed-fields"))
    assert "kubectl/Apply" in managed and "kubectl-client-side-apply/Update" not in managed
    ssa(kubectl, deployment(ns, replicas=3))
    assert kubectl.json("get", "deployment", "web", "-n", ns)["spec"]["replicas"] == 3
