"""Automatic admission on `kubectl apply`: the real kubectl, devcluster, lahar's webhook over HTTPS, registered by
`lahar certs ensure --url`.

One devcluster per module (its own: registering webhooks must not touch the session cluster other tests share),
Volcano's CRDs and the Open `root`/`default` queues installed first (as Volcano's chart and queue controller do:
no controller runs here, so the test opens queues itself), then the certificates
(`lahar certs ensure --no-webhooks --out`), the webhook server (`webhooks.app.create_app` on
`webhooks.server.WebhookServer`, informer look-ups), and the registration (`lahar certs ensure --url`).
Denials are checked against the messages of spec/volcano.md §4 and spec/devices.md §4.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.builders import pod_template

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"
INVALID_JOBS = ROOT / ".." / "shared" / "volcano-examples" / "invalid_jobs"

# what Volcano answers for each of its invalid_jobs examples (spec/volcano.md §4.2)
INVALID_JOB_MESSAGES = {
    "duplicatedPolicyEvent-webhook-deny.yaml": "duplicate event PodFailed",
    "duplicatedTaskName-webhook-deny.yaml": "duplicated task name task-1",
    "minAvailable-webhook-deny.yaml": "job 'minAvailable' should not be greater than total replicas in tasks",
}


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(home / "cache")]
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True, env=self.env,
                              timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def apply(self, obj: dict | str, ns: str | None = None, *, check: bool = True) -> subprocess.CompletedProcess:
        text = obj if isinstance(obj, str) else yaml.safe_dump(obj)
        return self("apply", *(["-n", ns] if ns else []), "-f", "-", stdin=text, check=check)

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)

    def open_queues(self, *names: str) -> None:
        """What Volcano's queue controller does to a new queue (no controller runs here): status.state Open."""
        for name in names:
            self("patch", "queue", name, "--subresource=status", "--type=merge", "-p",
                 '{"status":{"state":"Open"}}')


def lahar(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lahar.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, f"lahar {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def queue(name: str, parent: str | None = None) -> dict:
    q = builders.queue(name)
    return (q.parent(parent) if parent else q).bare()


def vcjob(name: str, **spec: Any) -> dict:
    return builders.vcjob(name, namespace=None).task("t", 1, template=pod_template(restart_policy="Never")).spec(
        **spec).build()


def pod(name: str, limits: dict[str, str], scheduler: str | None = "volcano") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@dataclass
class Admission:
    kubectl: Kubectl
    kubeconfig: Path
    url: str
    ns: str


def cluster_with_webhook_certs(tmp: Path, stack: contextlib.ExitStack) -> tuple[Any, Kubectl, Any, Path]:
    """A devcluster with Volcano's CRDs, Open `root` and `default` queues, and serving certificates for a webhook in
    `tmp/certs` (not yet registered); everything started is closed by `stack`."""
    from lahar.devcluster.server import DevCluster
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube.rest import RestClient

    cluster = DevCluster(tmp / "cluster", bookmark_interval=1.0).start()
    stack.callback(cluster.stop)
    kubectl = Kubectl(cluster.kubeconfig, tmp / "home")
    kubectl("apply", "-f", str(CRDS))
    kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh",
            "crd/queues.scheduling.volcano.sh", "crd/podgroups.scheduling.volcano.sh", "--timeout=30s")
    kubectl.apply(yaml.safe_dump_all([queue("root"), queue("default")]))
    kubectl.open_queues("root", "default")
    certs_dir = tmp / "certs"
    lahar("certs", "ensure", "--no-webhooks", "--out", str(certs_dir), kubeconfig=cluster.kubeconfig)
    client = RestClient(kubeconfigs.load(cluster.kubeconfig))
    stack.callback(client.close)
    return cluster, kubectl, client, certs_dir


@pytest.fixture(scope="module")
def admission(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admission]:
    pytest.importorskip("lahar.webhooks.app")
    pytest.importorskip("lahar.webhooks.server")
    from lahar.webhooks import app as webhook_app
    from lahar.webhooks import lookups, server

    try:
        from lahar.policies.admission import AdmissionConfig
        config: Any = AdmissionConfig()
    except ImportError:
        config = None
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    tmp = tmp_path_factory.mktemp("admission-e2e")
    stack = contextlib.ExitStack()
    try:
        cluster, kubectl, client, certs_dir = cluster_with_webhook_certs(tmp, stack)
        informed = lookups.InformerLookups(client, probe_interval=0.5).start()
        stack.callback(informed.stop)
        informed.wait_for_sync(30)
        app = webhook_app.create_app(lookups=informed, config=config)
        web = server.WebhookServer(app, host="127.0.0.1", port=0, certfile=certs_dir / "tls.crt",
                                   keyfile=certs_dir / "tls.key", reload_interval=0.5).start()
        stack.callback(web.stop)
        url = f"https://127.0.0.1:{web.port}"
        out = lahar("certs", "ensure", "--url", url, "--out", str(certs_dir), kubeconfig=cluster.kubeconfig).stdout
        assert "certificates: keep" in out and "lahar-validating-webhooks: created" in out, out
        ns = f"adm-{uuid.uuid4().hex[:6]}"
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield Admission(kubectl, cluster.kubeconfig, url, ns)
    finally:
        stack.close()


def denial(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, f"expected a denial, got:\n{proc.stdout}"
    return proc.stderr


def retry_until(check: Any, timeout: float = 15.0) -> Any:
    """Re-run `check()` until it stops raising AssertionError (informer caches catch up asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --- registration -------------------------------------------------------------------------------------------------

def test_certs_ensure_registered_lahars_webhooks(admission: Admission) -> None:
    hooks = {h["name"]: h for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
             for c in admission.kubectl.json("get", kind)["items"] for h in c["webhooks"]}
    assert {"mutatejob.volcano.sh", "validatejob.volcano.sh", "mutatepod.volcano.sh", "validatepod.volcano.sh",
            "validatequeue.volcano.sh", "validatecronjob.volcano.sh"} <= set(hooks)
    assert hooks["validatejob.volcano.sh"]["clientConfig"]["url"] == admission.url + "/jobs/validate"
    secret = admission.kubectl.json("get", "secret", "lahar-webhook-certs", "-n", "lahar-system")
    assert secret["type"] == "kubernetes.io/tls"
    assert hooks["validatejob.volcano.sh"]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    again = lahar("certs", "ensure", "--url", admission.url, kubeconfig=admission.kubeconfig).stdout
    assert "secret: unchanged" in again and "lahar-mutating-webhooks: unchanged" in again, again


# --- jobs ------------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not INVALID_JOBS.is_dir(), reason="the shared Volcano examples are absent")
@pytest.mark.parametrize("manifest", sorted(p.name for p in INVALID_JOBS.glob("*.yaml")) if INVALID_JOBS.is_dir()
                         else [], ids=str)
def test_volcanos_invalid_jobs_are_denied(admission: Admission, manifest: str) -> None:
    proc = admission.kubectl("apply", "-n", admission.ns, "-f", str(INVALID_JOBS / manifest), check=False)
    message = denial(proc)
    assert 'admission webhook "validatejob.volcano.sh" denied the request: ' in message, message
    expected = INVALID_JOB_MESSAGES.get(manifest)
    if expected:
        assert expected in message, message
    name = yaml.safe_load((INVALID_JOBS / manifest).read_text())["metadata"]["name"]
    assert admission.kubectl("get", "vcjob", name, "-n", admission.ns, check=False).returncode != 0


def test_valid_job_comes_back_with_volcanos_defaults(admission: Admission) -> None:
    job = vcjob("defaults")
    job["spec"]["tasks"] = [
        {"replicas": 2, "template": job["spec"]["tasks"][0]["template"]},
        {"replicas": 3, "minAvailable": 1, "template": job["spec"]["tasks"][0]["template"]},
    ]
    out = admission.kubectl.apply(job, admission.ns).stdout
    assert "job.batch.volcano.sh/defaults created" in out
    spec = admission.kubectl.json("get", "vcjob", "defaults", "-n", admission.ns)["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [2, 1]
    assert [t.get("maxRetry") for t in spec["tasks"]] == [3, 3]
    assert spec["minAvailable"] == 3


def test_server_dry_run_runs_both_webhooks_and_stores_nothing(admission: Admission) -> None:
    """volcano#4738: `kubectl apply --dry-run=server` of a vcjob answers what a real apply would (the mutating
    webhook's defaults, the validating webhook's denial) and stores nothing."""
    kubectl, ns = admission.kubectl, admission.ns
    proc = kubectl("apply", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-",
                   stdin=yaml.safe_dump(vcjob("dry")))
    spec = json.loads(proc.stdout)["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"]) == ("default", "volcano", 3)  # /jobs/mutate
    assert [t.get("maxRetry") for t in spec["tasks"]] == [3]
    assert kubectl("get", "vcjob", "dry", "-n", ns, check=False).returncode != 0
    bad = vcjob("dry-bad", minAvailable=5)  # more than its 1 replica: /jobs/validate denies it
    message = denial(kubectl("apply", "-n", ns, "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(bad),
                             check=False))
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message, message
    assert "should not be greater than total replicas" in message, message
    assert kubectl("get", "vcjob", "dry-bad", "-n", ns, check=False).returncode != 0


def test_job_to_a_non_leaf_queue_is_denied(admission: Admission) -> None:
    parent, child = f"parent-{uuid.uuid4().hex[:4]}", f"child-{uuid.uuid4().hex[:4]}"
    admission.kubectl.apply(queue(parent))
    admission.kubectl.apply(queue(child, parent=parent))
    admission.kubectl.open_queues(parent, child)

    def denied() -> str:
        message = denial(admission.kubectl.apply(vcjob("to-parent", queue=parent), admission.ns, check=False))
        assert f"can only submit job to leaf queue, queue `{parent}` has 1 child queues" in message, message
        return message

    message = retry_until(denied)
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message
    out = retry_until(lambda: admission.kubectl.apply(vcjob("to-child", queue=child), admission.ns).stdout)
    assert "job.batch.volcano.sh/to-child created" in out


def test_job_to_root_or_a_missing_queue_is_denied(admission: Admission) -> None:
    root = denial(admission.kubectl.apply(vcjob("to-root", queue="root"), admission.ns, check=False))
    assert "can not submit job to root queue" in root, root
    missing = denial(admission.kubectl.apply(vcjob("to-nowhere", queue="nowhere"), admission.ns, check=False))
    assert "unable to find job queue" in missing, missing


# --- pods and devices ------------------------------------------------------------------------------------------

def test_vgpu_memory_only_pod_gets_one_vgpu(admission: Admission) -> None:
    out = admission.kubectl.apply(pod("vgpu-mem", {"volcano.sh/vgpu-memory": "1024"}), admission.ns).stdout
    assert "pod/vgpu-mem created" in out
    resources = admission.kubectl.json("get", "pod", "vgpu-mem", "-n", admission.ns)["spec"]["containers"][0][
        "resources"]
    assert resources["limits"]["volcano.sh/vgpu-number"] == "1", resources
    assert resources["limits"]["volcano.sh/vgpu-memory"] == "1024"


def test_bad_vgpu_pod_is_denied_only_for_lahars_scheduler(admission: Admission) -> None:
    bad = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "150"}
    message = denial(admission.kubectl.apply(pod("vgpu-bad", bad), admission.ns, check=False))
    assert "pod.volcano.sh\" denied the request" in message, message
    # matchConditions: a pod for another scheduler never reaches lahar
    out = admission.kubectl.apply(pod("other-sched", bad, scheduler="default-scheduler"), admission.ns).stdout
    assert "pod/other-sched created" in out


# --- failurePolicy: Fail --------------------------------------------------------------------------------------

def test_webhook_down_refuses_the_write(admission: Admission) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"https://127.0.0.1:{s.getsockname()[1]}"
    out = lahar("certs", "ensure", "--url", dead, kubeconfig=admission.kubeconfig).stdout
    assert "lahar-mutating-webhooks: updated" in out, out
    try:
        message = denial(admission.kubectl.apply(vcjob("while-down"), admission.ns, check=False))
        assert 'Internal error occurred: failed calling webhook "mutatejob.volcano.sh"' in message, message
        assert "connect: connection refused" in message, message
        assert admission.kubectl("get", "vcjob", "while-down", "-n", admission.ns, check=False).returncode != 0
    finally:
        lahar("certs", "ensure", "--url", admission.url, kubeconfig=admission.kubeconfig)
    out = admission.kubectl.apply(vcjob("after-up"), admission.ns).stdout
    assert "job.batch.volcano.sh/after-up created" in out


def test_webhook_down_spares_pods_that_are_not_volcanos(admission: Admission) -> None:
    """volcano#3734, #2244: with lahar's webhook unreachable (failurePolicy Fail), a Deployment's pods are still
    created, and so is a pod in lahar's own namespace; only a pod for lahar's scheduler fails closed."""
    import socket

    from lahar.devcluster import workloads
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube.rest import RestClient

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"https://127.0.0.1:{s.getsockname()[1]}"
    lahar("certs", "ensure", "--url", dead, kubeconfig=admission.kubeconfig)
    client = RestClient(kubeconfigs.load(admission.kubeconfig))
    controllers = workloads.WorkloadControllers(client, resync_seconds=1.0).start()
    kubectl, ns = admission.kubectl, admission.ns
    try:
        kubectl("create", "deployment", "web-down", "--image=nginx", "--replicas=2", "-n", ns)

        def two_pods() -> None:
            pods = kubectl.json("get", "pods", "-n", ns, "-l", "app=web-down")["items"]
            assert len(pods) == 2, pods

        retry_until(two_pods, timeout=30)
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lahar-system"}})
        out = kubectl.apply(pod("lahar-webhook-restart", {"cpu": "100m"}), "lahar-system").stdout
        assert "pod/lahar-webhook-restart created" in out
        message = denial(kubectl.apply(pod("volcano-while-down", {"cpu": "100m"}), ns, check=False))
        assert 'failed calling webhook "mutatepod.volcano.sh"' in message, message
    finally:
        controllers.stop()
        client.close()
        lahar("certs", "ensure", "--url", admission.url, kubeconfig=admission.kubeconfig)
