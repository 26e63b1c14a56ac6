"""`lahar job` / `lahar queue` through the real REST client against devcluster over HTTPS, plus the command and
queue reconcilers acting on what the CLI wrote."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.kube import errors, kubeconfig
from lahar.kube.rest import RestClient

pytestmark = pytest.mark.integration

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest.fixture(scope="module")
def rest(live_devcluster: Any) -> Iterator[RestClient]:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    client = RestClient(kubeconfig.load(live_devcluster.kubeconfig))
    crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for path in sorted(CRDS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                with contextlib.suppress(errors.AlreadyExists):
                    client.create(crd_rt, doc)
    deadline = time.monotonic() + 20
    for plural, group, version in (("queues", "scheduling.volcano.sh", "v1beta1"),
                                   ("jobs", "batch.volcano.sh", "v1alpha1"),
                                   ("commands", "bus.volcano.sh", "v1alpha1")):
        rt = client.registry.get(group, version, plural)
        while True:
            try:
                client.list(rt, namespace="default" if rt.namespaced else None)
                break
            except errors.NotFound:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    try:
        yield client
    finally:
        client.close()


def lahar(live: Any, *args: str) -> Any:
    res = CliRunner().invoke(app, [*args, "--kubeconfig", str(live.kubeconfig)])
    assert res.exit_code == 0, res.output
    return res


def test_job_and_queue_commands_over_https(live_devcluster: Any, rest: RestClient) -> None:
    from lahar.controllers import commands, queues
    from lahar.controllers.context import Context

    suffix = uuid.uuid4().hex[:6]
    ns, queue = f"vc-{suffix}", f"q-{suffix}"
    rest.create(rest.registry.get("", "v1", "namespaces"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    lahar(live_devcluster, "queue", "create", "-n", queue, "-w", "2")
    assert queue in lahar(live_devcluster, "queue", "list").output
    lahar(live_devcluster, "job", "run", "-N", "j1", "-n", ns, "-r", "2", "-q", queue)
    listed = lahar(live_devcluster, "job", "list", "-n", ns).output.splitlines()
    assert listed[0].split()[0] == "Name" and any(line.split()[0] == "j1" for line in listed[1:])
    lahar(live_devcluster, "job", "suspend", "-N", "j1", "-n", ns)
    lahar(live_devcluster, "queue", "close", queue)

    cmd_rt = rest.registry.get("bus.volcano.sh", "v1alpha1", "commands")
    [job_cmd] = rest.list(cmd_rt, namespace=ns)["items"]
    assert job_cmd["action"] == "AbortJob" and job_cmd["target"]["name"] == "j1"
    [queue_cmd] = [c for c in rest.list(cmd_rt, namespace="default")["items"] if c["target"]["name"] == queue]

    ctx = Context(client=rest)
    commands.reconcile(ctx, ns, job_cmd["metadata"]["name"])
    assert ctx.inbox.peek("Job", ns, "j1")[0]["action"] == "AbortJob"
    commands.reconcile(ctx, "default", queue_cmd["metadata"]["name"])
    q_rt = rest.registry.get("scheduling.volcano.sh", "v1beta1", "queues")
    assert rest.get(q_rt, queue)["status"]["state"] == "Closed"
    assert rest.list(cmd_rt, namespace=ns)["items"] == []
    queues.reconcile(ctx, "", queue)
    assert rest.get(q_rt, queue)["spec"]["parent"] == "root"

    view = lahar(live_devcluster, "job", "view", "j1", "-n", ns).output
    assert "CommandIssued" in view
    lahar(live_devcluster, "job", "delete", "j1", "-n", ns)
    lahar(live_devcluster, "queue", "delete", queue)


def test_jobflow_jobtemplate_pod_and_short_scripts_over_https(live_devcluster: Any, rest: RestClient,
                                                               tmp_path: Path) -> None:
    from lahar.commands import vshort

    ns = f"vf-{uuid.uuid4().hex[:6]}"
    rest.create(rest.registry.get("", "v1", "namespaces"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    template = {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": "a",
                                                                                            "namespace": ns},
                "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}}]}}
    flow = {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f", "namespace": ns},
            "spec": {"flows": [{"name": "a"}]}}
    (tmp_path / "jt.yaml").write_text(yaml.safe_dump(template))
    (tmp_path / "jf.yaml").write_text(yaml.safe_dump(flow))
    assert lahar(live_devcluster, "jobtemplate", "create", "-f", str(tmp_path / "jt.yaml")).output == (
        f"Created JobTemplate: {ns}/a\n")
    assert lahar(live_devcluster, "jobflow", "create", "-f", str(tmp_path / "jf.yaml")).output == (
        f"Created JobFlow: {ns}/f\n")
    assert lahar(live_devcluster, "jobtemplate", "list", "-n", ns).output.splitlines()[1].split() == ["a", ns]
    assert lahar(live_devcluster, "jobflow", "get", "f", "-n", ns).output.splitlines()[1].split()[:2] == ["f", ns]
    assert yaml.safe_load(lahar(live_devcluster, "jobflow", "describe", "-N", "f", "-n", ns).stdout)["kind"] == "JobFlow"
    assert lahar(live_devcluster, "jobflow", "delete", "-N", "f", "-n", ns).output == f"Deleted JobFlow: {ns}/f\n"
    assert lahar(live_devcluster, "jobtemplate", "delete", "-f", str(tmp_path / "jt.yaml")).output == (
        f"Deleted JobTemplate: {ns}/a\n")

    kc = ["--kubeconfig", str(live_devcluster.kubeconfig)]
    res = CliRunner().invoke(vshort.vsub, ["-n", "s1", "-N", ns, *kc])
    assert res.exit_code == 0 and res.output == "run job s1 successfully\n", res.output
    res = CliRunner().invoke(vshort.vjobs, ["-N", ns, *kc])
    assert res.exit_code == 0 and res.output.splitlines()[1].split()[0] == "s1", res.output
    rest.create(rest.registry.get("", "v1", "pods"), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "s1-default0-0", "namespace": ns,
                     "labels": {"volcano.sh/job-name": "s1", "volcano.sh/task-spec": "default0"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, namespace=ns)
    pods = lahar(live_devcluster, "pod", "list", "-n", ns, "-j", "s1", "-t", "default0").output.splitlines()
    assert pods[0].split() == ["Name", "Ready", "Status", "Restart", "Age"] and pods[1].split()[:2] == [
        "s1-default0-0", "0/1"]
    res = CliRunner().invoke(vshort.vcancel, ["-n", "s1", "-N", ns, *kc])
    assert res.exit_code == 0 and res.output == "cancel job s1 successfully\n", res.output
