"""lahar's deployment manifests judged by the real kube-apiserver: `kubectl apply -k deploy/` stores everything
(CRDs, namespace, RBAC, Deployments, the webhook configurations), `kubectl explain` reads the CRDs' schemas, and the
Helm chart (`helm template`, and `lahar chart render` without helm) passes `kubectl apply --dry-run=server`.

A cluster of this module's own, without kube-controller-manager or kwok: nothing here needs to run, and the stored
webhook configurations (a Service no loopback server can reach, failurePolicy Fail) must not reach other tests.
The chart's dry runs come first, on the empty cluster: once the base's webhook configurations are stored, any write
they match (the lahar-system ConfigMaps) is refused until a webhook answers, as on any cluster.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_admission_kubectl import Kubectl
from tests.peers import build as peers
from tests.realcluster.cluster import RealCluster, missing

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster")]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "lahar"


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    if reason := missing("etcd", "kube-apiserver"):
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("deployreal")
    cluster = RealCluster(tmp / "cluster", with_controllers=False, with_kwok=False).start()
    try:
        kubectl = Kubectl(cluster.kubeconfig, tmp / "home")
        # what `helm install --create-namespace -n lahar-system` does first: a dry run stores no Namespace, so the
        # chart's namespaced objects would find none (the kustomize base then finds it there: `unchanged`)
        kubectl("create", "namespace", "lahar-system")
        yield kubectl
    finally:
        cluster.stop()


def _kinds(rendered: str) -> int:
    return sum(1 for line in rendered.splitlines() if line.startswith("kind: "))


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


def test_helm_template_passes_server_side_dry_run(kubectl: Kubectl) -> None:
    if reason := missing("helm"):
        pytest.skip(reason)
    # without a cluster `helm template` assumes Kubernetes v1.20, below the chart's kubeVersion: give the server's
    server = kubectl.json("version")["serverVersion"]["gitVersion"]
    rendered = subprocess.run([str(peers.binary("helm")), "template", "lahar", str(CHART), "--namespace",
                               "lahar-system", "--kube-version", server], capture_output=True, text=True,
                              timeout=120, check=True).stdout
    out = kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered).stdout
    assert len(_lines(out)) == _kinds(rendered) and all("(server dry run)" in line for line in _lines(out)), out


def test_lahar_chart_render_passes_server_side_dry_run(kubectl: Kubectl) -> None:
    rendered = subprocess.run([sys.executable, "-m", "lahar.cli", "chart", "render"], capture_output=True,
                              text=True, timeout=120, cwd=REPO, check=True).stdout
    out = kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered).stdout
    assert len(_lines(out)) == _kinds(rendered) and all("(server dry run)" in line for line in _lines(out)), out


def test_kustomize_base_is_stored_by_the_real_server(kubectl: Kubectl) -> None:
    count = _kinds(kubectl("kustomize", str(REPO / "deploy")).stdout)
    out = kubectl("apply", "-k", str(REPO / "deploy")).stdout
    assert len(_lines(out)) == count and all(line.endswith(" created") for line in _lines(out)
                                             if not line.startswith("namespace/")), out
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    for kind, name in [("deployment", "lahar-webhook"), ("statefulset", "lahar-redis"), ("job", "lahar-certs"),
                       ("cronjob", "lahar-certs-renew"), ("poddisruptionbudget", "lahar-webhook"),
                       ("networkpolicy", "lahar-default-deny"), ("serviceaccount", "lahar-scheduler")]:
        kubectl("get", kind, name, "-n", "lahar-system")
    hooks = kubectl.json("get", "validatingwebhookconfiguration", "lahar-validating-webhooks")["webhooks"]
    assert {h["clientConfig"]["service"]["name"] for h in hooks} == {"lahar-webhook"}
    assert kubectl.json("get", "queues")["items"] == []  # Volcano's kinds are served
    again = kubectl("apply", "-k", str(REPO / "deploy"), "--dry-run=server").stdout
    assert len(_lines(again)) == count and all("(server dry run)" in line for line in _lines(again)), again


def test_kubectl_explain_reads_lahars_crds(kubectl: Kubectl) -> None:
    # the CRDs themselves, whichever test ran before (client-side apply: "unchanged" after the kustomize base)
    kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh", "--timeout=60s")
    # Established comes before the kind is in the server's discovery documents (updated asynchronously; seconds
    # under load), and kubectl explain maps the short name through discovery
    deadline = time.monotonic() + 60
    while "vcjob" not in kubectl("api-resources", "--api-group=batch.volcano.sh", check=False).stdout:
        assert time.monotonic() < deadline, "batch.volcano.sh jobs never appeared in discovery"
        time.sleep(1)
    # and the CRD's schema reaches the server's OpenAPI v3 documents (which explain reads) later still
    while (explained := kubectl("explain", "vcjob.spec.tasks", check=False)).returncode != 0:
        assert time.monotonic() < deadline, explained.stderr
        time.sleep(1)
    out = explained.stdout
    assert "KIND:       Job" in out and "GROUP:      batch.volcano.sh" in out, out
    for field in ("replicas", "minAvailable", "template", "policies"):
        assert f"  {field}\t" in out, (field, out)
    while (queue_out := kubectl("explain", "queue.spec.weight", check=False)).returncode != 0:
        assert time.monotonic() < deadline + 60, queue_out.stderr
        time.sleep(1)
    queue = queue_out.stdout
    assert "FIELD: weight <integer>" in queue, queue
