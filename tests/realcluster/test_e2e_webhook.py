"""lahar's admission webhook on the real kube-apiserver: `lahar webhook` over HTTPS with a certificate from lahar's
CA, registered through Validating/MutatingWebhookConfigurations whose caBundle `lahar certs ensure --url` injected
(tests/realcluster/lahar_stack.py says why a `url:` clientConfig), driven with the real kubectl.

The same rules tests/e2e/test_admission_kubectl.py checks on devcluster, here judged by the real server: its
webhook client, its TLS verification against the caBundle, its error text around the webhook's message, and its
client-side and server-side apply on top of a mutating webhook.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.e2e.test_admission_kubectl import denial, lahar, pod, queue, retry_until, vcjob
from tests.realcluster.lahar_stack import LaharStack

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster")]


@pytest.fixture(scope="module")
def ns(lahar_stack: LaharStack) -> str:
    name = f"whk-{uuid.uuid4().hex[:6]}"
    lahar_stack.kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def test_registration_carries_lahars_ca_and_loopback_urls(lahar_stack: LaharStack) -> None:
    assert "lahar-validating-webhooks: created" in lahar_stack.registration, lahar_stack.registration
    assert "lahar-mutating-webhooks: created" in lahar_stack.registration, lahar_stack.registration
    kubectl = lahar_stack.kubectl
    secret = kubectl.json("get", "secret", "lahar-webhook-certs", "-n", "lahar-system")
    hooks = {h["name"]: h for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
             for c in kubectl.json("get", kind)["items"] for h in c["webhooks"]}
    assert {"mutatejob.volcano.sh", "validatejob.volcano.sh", "validatepodgroup.volcano.sh"} <= set(hooks)
    for hook in hooks.values():
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"], hook["name"]
        assert hook["clientConfig"]["url"].startswith(lahar_stack.webhook_url + "/"), hook["name"]
        assert "service" not in hook["clientConfig"], hook["name"]


def test_job_to_a_non_leaf_queue_is_denied_with_volcanos_message(lahar_stack: LaharStack, ns: str) -> None:
    kubectl = lahar_stack.kubectl
    parent, child = f"parent-{uuid.uuid4().hex[:4]}", f"child-{uuid.uuid4().hex[:4]}"
    kubectl.apply(queue(parent))
    kubectl.apply(queue(child, parent=parent))
    kubectl.open_queues(parent, child)

    def denied() -> str:
        message = denial(kubectl.apply(vcjob("to-parent", queue=parent), ns, check=False))
        assert f"can only submit job to leaf queue, queue `{parent}` has 1 child queues" in message, message
        return message

    message = retry_until(denied, timeout=30)  # the webhook's informer sees the child queue shortly after
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message, message
    assert kubectl("get", "vcjob", "to-parent", "-n", ns, check=False).returncode != 0
    out = retry_until(lambda: kubectl.apply(vcjob("to-child", queue=child), ns).stdout, timeout=30)
    assert "job.batch.volcano.sh/to-child created" in out


def test_podgroup_with_more_members_than_its_job_has_replicas_is_denied(lahar_stack: LaharStack, ns: str) -> None:
    kubectl = lahar_stack.kubectl
    kubectl.apply(vcjob("pg-owner"), ns)
    job = kubectl.json("get", "vcjob", "pg-owner", "-n", ns)
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "too-many", "ownerReferences": [{
              "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "pg-owner",
              "uid": job["metadata"]["uid"], "controller": True}]},
          "spec": {"minMember": 5, "queue": "default"}}

    def denied() -> str:
        message = denial(kubectl.apply(pg, ns, check=False))
        assert f"minMember 5 is more than the 1 replicas of job {ns}/pg-owner" in message, message
        return message

    message = retry_until(denied, timeout=30)
    assert 'admission webhook "validatepodgroup.volcano.sh" denied the request' in message, message
    assert kubectl("get", "podgroup", "too-many", "-n", ns, check=False).returncode != 0


def test_vcjob_is_mutated_with_volcanos_defaults(lahar_stack: LaharStack, ns: str) -> None:
    job = vcjob("defaults")
    template = job["spec"]["tasks"][0]["template"]
    job["spec"]["tasks"] = [{"replicas": 2, "template": template},
                            {"replicas": 3, "minAvailable": 1, "template": template}]
    out = lahar_stack.kubectl.apply(job, ns).stdout
    assert "job.batch.volcano.sh/defaults created" in out
    spec = lahar_stack.kubectl.json("get", "vcjob", "defaults", "-n", ns)["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == (
        "default", "volcano", 3, 3)
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [2, 1]


def _users_writes(lahar_stack: LaharStack, ns: str, name: str, *, times: bool = True) -> tuple[Any, ...]:
    """What a user's write would change: generation, spec, and kubectl's managedFields entries (the fields each
    owns, and with `times` when it last wrote). Not the resourceVersion: lahar's controllers may be running on
    this cluster and write the Job's status."""
    obj = lahar_stack.kubectl.json("get", "vcjob", name, "-n", ns, "--show-managed-fields")
    meta = obj["metadata"]
    kubectl = sorted((m["manager"], m["operation"], json.dumps(m.get("fieldsV1"), sort_keys=True),
                      (m.get("time") or "") if times else "")
                     for m in meta.get("managedFields") or () if m["manager"].startswith("kubectl"))
    return meta.get("generation"), json.dumps(obj["spec"], sort_keys=True), kubectl


def test_kubectl_apply_twice_is_unchanged_over_the_mutation(lahar_stack: LaharStack, ns: str) -> None:
    """Volcano's CRD leaves `tasks` a plain list, so kubectl's 3-way merge sends it whole (without the defaults the
    webhook added) and says `configured`; the webhook puts the same defaults back, and the real server keeps the
    same generation (1), spec and kubectl's owned fields.

    kubectl's managedFields *time* may move: the patch alone takes `tasks`, so the server stamps kubectl's entry,
    and it reverts a stamp that is the only change only while the entries keep their order. Once lahar's status
    writer has written after kubectl, the restamped entry sorts last, the lists differ, and the server writes
    the new time (kube-apiserver's IgnoreManagedFieldsTimestampsTransformer compares them by index)."""
    job = vcjob("twice")
    first = lahar_stack.kubectl.apply(job, ns).stdout
    assert "job.batch.volcano.sh/twice created" in first
    before = _users_writes(lahar_stack, ns, "twice", times=False)
    again = lahar_stack.kubectl.apply(job, ns).stdout
    assert "job.batch.volcano.sh/twice configured" in again, again
    stored = lahar_stack.kubectl.json("get", "vcjob", "twice", "-n", ns)
    assert _users_writes(lahar_stack, ns, "twice", times=False) == before and stored["metadata"]["generation"] == 1
    assert stored["spec"]["tasks"][0]["maxRetry"] == 3 and stored["spec"]["tasks"][0]["minAvailable"] == 1


def test_server_side_apply_goes_through_the_webhooks(lahar_stack: LaharStack, ns: str) -> None:
    kubectl = lahar_stack.kubectl
    job = yaml.safe_dump(vcjob("ssa"))
    out = kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=job).stdout
    assert "job.batch.volcano.sh/ssa serverside-applied" in out, out
    got = kubectl.json("get", "vcjob", "ssa", "-n", ns, "--show-managed-fields")
    assert got["spec"]["queue"] == "default" and got["spec"]["maxRetry"] == 3  # mutated on the way in
    managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers, managers
    before = _users_writes(lahar_stack, ns, "ssa")
    again = kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=job).stdout
    assert "job.batch.volcano.sh/ssa serverside-applied" in again, again
    assert _users_writes(lahar_stack, ns, "ssa") == before  # a no-op apply writes nothing
    # an invalid job is denied on the server-side path too
    bad = vcjob("ssa-bad", minAvailable=5)
    message = denial(kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=json.dumps(bad), check=False))
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message, message
    assert "job 'minAvailable' should not be greater than total replicas in tasks" in message, message


def test_server_dry_run_of_a_vcjob_runs_both_webhooks_and_stores_nothing(lahar_stack: LaharStack, ns: str) -> None:
    """volcano#4738, judged by the real server: `--dry-run=server` reaches both webhooks (sideEffects None)."""
    kubectl = lahar_stack.kubectl
    proc = kubectl("apply", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-", stdin=yaml.safe_dump(vcjob("dry")))
    spec = json.loads(proc.stdout)["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"]) == ("default", "volcano", 3)
    assert kubectl("get", "vcjob", "dry", "-n", ns, check=False).returncode != 0
    message = denial(kubectl("apply", "-n", ns, "--dry-run=server", "-f", "-",
                             stdin=yaml.safe_dump(vcjob("dry-bad", minAvailable=5)), check=False))
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message, message
    assert kubectl("get", "vcjob", "dry-bad", "-n", ns, check=False).returncode != 0


def test_webhook_down_spares_pods_that_are_not_volcanos(lahar_stack: LaharStack, ns: str) -> None:
    """volcano#3734, #2244 on the real server: lahar's webhook unreachable (failurePolicy Fail), a pod of the default
    scheduler and a pod in lahar's namespace are created; a pod for lahar's scheduler fails closed."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"https://127.0.0.1:{s.getsockname()[1]}"
    kubeconfig = lahar_stack.cluster.kubeconfig
    lahar("certs", "ensure", "--url", dead, "--out", str(lahar_stack.certs_dir), kubeconfig=kubeconfig)
    kubectl = lahar_stack.kubectl
    try:
        out = kubectl.apply(pod("plain-while-down", {"cpu": "100m"}, scheduler=None), ns).stdout
        assert "pod/plain-while-down created" in out
        out = kubectl.apply(pod("lahar-restart", {"cpu": "100m"}), "lahar-system").stdout
        assert "pod/lahar-restart created" in out
        message = denial(kubectl.apply(pod("volcano-while-down", {"cpu": "100m"}), ns, check=False))
        assert 'failed calling webhook "mutatepod.volcano.sh"' in message, message
    finally:
        lahar("certs", "ensure", "--url", lahar_stack.webhook_url, "--out", str(lahar_stack.certs_dir),
              kubeconfig=kubeconfig)
        kubectl("delete", "pod", "lahar-restart", "-n", "lahar-system", "--wait=false", check=False)
