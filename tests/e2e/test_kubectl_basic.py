"""The real `kubectl` against a live devcluster: the everyday commands a user types must just work.

Each test runs kubectl as a subprocess with the devcluster's kubeconfig and a private cache directory; skipped
when kubectl is not on PATH. Volcano's example manifests come from the shared examples when present.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"
EXAMPLES = ROOT / ".." / "shared" / "volcano-examples"


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

    def out(self, *args: str, stdin: str | None = None) -> str:
        return self(*args, stdin=stdin).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.out(*args, "-o", "json"))

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*self.base, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)


@pytest.fixture(scope="module")
def kubectl(live_devcluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(live_devcluster.kubeconfig, tmp_path_factory.mktemp("kubectl-home"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"e-{uuid.uuid4().hex[:8]}"
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": name}}))
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def volcano_crds(kubectl: Kubectl) -> None:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    out = kubectl.out("apply", "-f", str(CRDS))
    assert "customresourcedefinition.apiextensions.k8s.io/jobs.batch.volcano.sh" in out
    kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh", "crd/queues.scheduling.volcano.sh",
            "--timeout=20s")


def manifests(ns: str, *, image: str = "nginx:1.25", data: str = "1") -> str:
    docs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"a": data}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "nginx", "image": image},
                                                       {"name": "side", "image": "busybox"}]}}}},
    ]
    return yaml.safe_dump_all(docs)


def pod(name: str, ns: str, **labels: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


# --- discovery -------------------------------------------------------------------------------------------------

def test_version_and_api_resources(kubectl: Kubectl) -> None:
    assert "Server Version: v1.32.0-lahar" in kubectl.out("version")
    resources = kubectl.out("api-resources")
    for line in ("pods", "deployments", "customresourcedefinitions"):
        assert line in resources
    assert "apps/v1" in kubectl.out("api-versions")


# --- apply, get, patch, label, delete --------------------------------------------------------------------------

def test_apply_twice_patches_with_strategic_merge(kubectl: Kubectl, ns: str) -> None:
    first = kubectl.out("apply", "-f", "-", stdin=manifests(ns))
    assert "configmap/cfg created" in first and "deployment.apps/web created" in first
    second = kubectl.out("apply", "-f", "-", stdin=manifests(ns, image="nginx:1.26", data="2"))
    assert "configmap/cfg configured" in second and "deployment.apps/web configured" in second
    assert "unchanged" in kubectl.out("apply", "-f", "-", stdin=manifests(ns, image="nginx:1.26", data="2"))
    deploy = kubectl.json("get", "deployment", "web", "-n", ns)
    containers = deploy["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("nginx", "nginx:1.26"), ("side", "busybox")]
    assert deploy["metadata"]["generation"] == 2
    assert kubectl.json("get", "configmap", "cfg", "-n", ns)["data"] == {"a": "2"}


def test_get_prints_server_side_tables(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=manifests(ns))
    kubectl("apply", "-f", "-", stdin=pod("p1", ns))
    pods = kubectl.out("get", "pods", "-n", ns).splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1].split()[:4] == ["p1", "0/1", "Pending", "0"]
    wide = kubectl.out("get", "pods", "-n", ns, "-o", "wide").splitlines()[0].split()
    assert wide[5:7] == ["IP", "NODE"]
    assert kubectl.out("get", "deploy", "-n", ns).splitlines()[0].split() == ["NAME", "READY", "UP-TO-DATE",
                                                                            "AVAILABLE", "AGE"]
    assert kubectl.out("get", "cm", "cfg", "-n", ns).splitlines()[1].split()[:2] == ["cfg", "1"]
    assert ns in kubectl.out("get", "namespaces")
    every = kubectl.out("get", "pods", "-A", "--sort-by=.metadata.name", "--show-labels")
    assert "app=p1" in every and ns in every
    names = kubectl.out("get", "pods,cm", "-n", ns, "-o", "name").split()
    assert "pod/p1" in names and "configmap/cfg" in names


def test_patch_label_and_output_formats(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=pod("p", ns))
    assert "pod/p labeled" in kubectl.out("label", "pod", "p", "-n", ns, "tier=web")
    assert "patched" in kubectl.out("patch", "pod", "p", "-n", ns, "--type", "merge",
                                    "-p", '{"metadata":{"labels":{"m":"1"}}}')
    assert "patched" in kubectl.out("patch", "pod", "p", "-n", ns, "--type", "json",
                                    "-p", '[{"op":"add","path":"/metadata/labels/j","value":"2"}]')
    assert "patched" in kubectl.out("patch", "pod", "p", "-n", ns, "--type", "strategic",
                                    "-p", '{"spec":{"containers":[{"name":"c","image":"busybox:2"}]}}')
    obj = yaml.safe_load(kubectl.out("get", "pod", "p", "-n", ns, "-o", "yaml"))
    assert obj["metadata"]["labels"] == {"app": "p", "tier": "web", "m": "1", "j": "2"}
    assert obj["spec"]["containers"][0]["image"] == "busybox:2"
    assert kubectl.out("get", "pod", "p", "-n", ns, "-o", "jsonpath={.metadata.labels.tier}") == "web"
    assert kubectl.out("get", "pods", "-n", ns, "-l", "tier=web", "-o", "name").split() == ["pod/p"]
    assert kubectl.out("get", "pods", "-n", ns, "-l", "tier=db", "-o", "name").split() == []
    assert "pod/p unlabeled" in kubectl.out("label", "pod", "p", "-n", ns, "tier-")
    assert "annotated" in kubectl.out("annotate", "pod", "p", "-n", ns, "note=hi")


def test_delete_waits_for_the_object_to_go(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=manifests(ns))
    assert 'configmap "cfg" deleted' in kubectl.out("delete", "configmap", "cfg", "-n", ns)
    missing = kubectl("get", "configmap", "cfg", "-n", ns, check=False)
    assert missing.returncode != 0 and 'configmaps "cfg" not found' in missing.stderr
    assert "deleted" in kubectl.out("delete", "-f", "-", "--ignore-not-found", stdin=manifests(ns))


def test_scale_uses_the_scale_subresource(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=manifests(ns))
    assert "scaled" in kubectl.out("scale", "deployment", "web", "-n", ns, "--replicas=4")
    assert kubectl.json("get", "deployment", "web", "-n", ns)["spec"]["replicas"] == 4


# --- watch -----------------------------------------------------------------------------------------------------

def _reader(proc: subprocess.Popen, lines: queue.Queue) -> None:
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.put(line)


def test_get_watch_shows_new_pods(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=pod("first", ns))
    proc = kubectl.popen("get", "pods", "-n", ns, "-w")
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_reader, args=(proc, lines), daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 20
        created = False
        while time.monotonic() < deadline and not any(line.startswith("second") for line in seen):
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.5))
            if not created and any(line.startswith("first") for line in seen):
                kubectl("apply", "-f", "-", stdin=pod("second", ns))
                created = True
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert seen[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert any(line.split()[:3] == ["second", "0/1", "Pending"] for line in seen), seen


# --- describe --------------------------------------------------------------------------------------------------

def test_describe_pod_lists_its_events(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", stdin=pod("d", ns))
    uid = kubectl.json("get", "pod", "d", "-n", ns)["metadata"]["uid"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "d.1", "namespace": ns},
             "involvedObject": {"kind": "Pod", "name": "d", "namespace": ns, "uid": uid, "apiVersion": "v1"},
             "reason": "Scheduled", "message": "assigned to n1", "type": "Normal",
             "source": {"component": "lahar-scheduler"}, "count": 1,
             "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:00:00Z"}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(event))
    out = kubectl.out("describe", "pod", "d", "-n", ns)
    assert re.search(r"^Name:\s+d$", out, re.M) and re.search(r"^Status:\s+Pending$", out, re.M)
    assert "Scheduled" in out and "assigned to n1" in out
    events = kubectl.out("get", "events", "-n", ns).splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "pod/d" in events[1]


def test_describe_node(kubectl: Kubectl) -> None:
    name = f"n-{uuid.uuid4().hex[:6]}"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                             "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "ok"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0-lahar"}}}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(node))
    try:
        row = [line.split() for line in kubectl.out("get", "nodes").splitlines() if line.startswith(name)][0]
        assert row[1:3] == ["Ready", "worker"]
        out = kubectl.out("describe", "node", name)
        assert re.search(rf"^Name:\s+{name}$", out, re.M) and "Allocated resources:" in out
    finally:
        kubectl("delete", "node", name)


# --- custom resources ------------------------------------------------------------------------------------------

def test_volcano_job_and_queues(kubectl: Kubectl, volcano_crds: None, ns: str) -> None:
    job_file, queues_file = EXAMPLES / "job.yaml", EXAMPLES / "hierarchical-jobs" / "queues.yaml"
    if not job_file.is_file() or not queues_file.is_file():
        pytest.skip("the shared Volcano examples are absent")
    assert "created" in kubectl.out("apply", "-f", str(queues_file))
    assert "created" in kubectl.out("apply", "-n", ns, "-f", str(job_file))
    jobs = kubectl.out("get", "vcjob", "-n", ns).splitlines()
    assert jobs[0].split() == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE"]
    assert jobs[1].split()[0] == "test-job"
    both = kubectl.out("get", "vcjob,queue", "-n", ns)
    assert "job.batch.volcano.sh/test-job" in both and "queue.scheduling.volcano.sh/root-eng-prod" in both
    assert "Kind:         Job" in kubectl.out("describe", "vcjob", "test-job", "-n", ns)
    assert "FIELDS:" in kubectl.out("explain", "vcjob.spec")
    assert "patched" in kubectl.out("patch", "queue", "root-eng-dev", "--type", "merge",
                                    "-p", '{"spec":{"weight":3}}')
    assert kubectl.json("get", "queue", "root-eng-dev")["spec"]["weight"] == 3
    assert "(server dry run)" in kubectl.out("delete", "-n", ns, "-f", str(job_file), "--dry-run=server")
    kubectl("delete", "-n", ns, "-f", str(job_file))
    assert kubectl.out("get", "vcjob", "-n", ns, "-o", "name").strip() == ""
    kubectl("delete", "-f", str(queues_file))


def test_unknown_fields_are_rejected_by_strict_validation(kubectl: Kubectl, volcano_crds: None, ns: str) -> None:
    bad = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
           "metadata": {"name": f"q-{uuid.uuid4().hex[:6]}"}, "spec": {"weight": 1, "wieght": 2}}
    proc = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(bad), check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.wieght"' in proc.stderr


# --- typed-client commands (protobuf request bodies) ------------------------------------------------------------

def test_create_generators_send_protobuf(kubectl: Kubectl, ns: str) -> None:
    assert "configmap/pb created" in kubectl.out("create", "configmap", "pb", "-n", ns, "--from-literal=a=b")
    assert "secret/s created" in kubectl.out("create", "secret", "generic", "s", "-n", ns, "--from-literal=k=v")
    assert "serviceaccount/robot created" in kubectl.out("create", "serviceaccount", "robot", "-n", ns)
    assert "deployment.apps/dd created" in kubectl.out("create", "deployment", "dd", "-n", ns, "--image=nginx",
                                                       "--port=80", "--replicas=2")
    assert "job.batch/jj created" in kubectl.out("create", "job", "jj", "-n", ns, "--image=busybox", "--",
                                                 "echo", "hi")
    assert kubectl.json("get", "configmap", "pb", "-n", ns)["data"] == {"a": "b"}
    assert kubectl.json("get", "secret", "s", "-n", ns)["data"] == {"k": "dg=="}
    deploy = kubectl.json("get", "deployment", "dd", "-n", ns)["spec"]
    assert deploy["replicas"] == 2 and deploy["selector"] == {"matchLabels": {"app": "dd"}}
    assert deploy["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
    job = kubectl.json("get", "job", "jj", "-n", ns)["spec"]["template"]["spec"]
    assert job["containers"][0]["command"] == ["echo", "hi"] and job["restartPolicy"] == "Never"
    assert "pod/runner created" in kubectl.out("run", "runner", "-n", ns, "--image=busybox", "--labels=x=y")


def test_cordon_and_drain_evict_pods(kubectl: Kubectl, ns: str) -> None:
    name = f"n-{uuid.uuid4().hex[:6]}"
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                                        "status": {"conditions": [{"type": "Ready",
                                                                                   "status": "True"}]}}))
    bound = yaml.safe_load(pod("victim", ns))
    bound["spec"]["nodeName"] = name
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(bound))
    try:
        assert f"node/{name} cordoned" in kubectl.out("cordon", name)
        assert "SchedulingDisabled" in kubectl.out("get", "node", name)
        out = kubectl.out("drain", name, "--force", "--grace-period=0", "--timeout=20s")
        assert "pod/victim evicted" in out and f"node/{name} drained" in out
        assert kubectl.out("get", "pods", "-n", ns, "-o", "name").strip() == ""
        assert f"node/{name} uncordoned" in kubectl.out("uncordon", name)
    finally:
        kubectl("delete", "node", name, check=False)
