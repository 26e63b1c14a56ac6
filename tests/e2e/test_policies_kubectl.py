"""Policies and lahar's configuration through the real kubectl: devcluster, the webhook wired as `lahar webhook`
wires it on a cluster (`lahar.commands.webhook.live_admission`: informer look-ups, ConfigMap watch, live swaps,
Audit Events) served in-process over HTTPS, registered by `lahar certs ensure --url`.

- a policy ConfigMap applied with kubectl is in force within 2 s and denies the next `kubectl apply` of a violating
  Job; deleting it lifts the rule;
- a policy ConfigMap that does not compile is refused at `kubectl apply` with the CEL error and its position;
- a bad `lahar-admission-config` / `lahar-scheduler-configmap` is refused naming the field; a good one reaches the
  rules live (a new first scheduler name);
- Warn + Audit: kubectl prints the warning, the Job gets a PolicyViolation Event;
- the policy-only webhook entries: absent while no policy exists; a policy ConfigMap for pods of another
  scheduler registers validatepolicy.lahar.sh (and only it), which then denies such a pod; deleting the ConfigMap
  unregisters it.
Helpers (kubectl wrapper, `lahar` runner, object builders) come from `test_admission_kubectl`.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.test_admission_kubectl import (
    CRDS,
    Kubectl,
    cluster_with_webhook_certs,
    denial,
    lahar,
    pytestmark,
    retry_until,
    vcjob,
)

__all__ = ["pytestmark"]

NS = "lahar-system"
RELOAD_WITHIN = 2.0   # seconds: the bound for a ConfigMap change to be in force


def policy_configmap(name: str, policy: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": {"lahar.sh/policy": "true"}},
            "data": {"policy.yaml": policy}}


def team_label_policy(name: str, *, actions: str = "[Deny]", expression: str | None = None) -> str:
    expression = expression or "has(object.metadata.labels) && 'team' in object.metadata.labels"
    return f"""apiVersion: lahar.sh/v1alpha1
kind: AdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [batch.volcano.sh], apiVersions: ["*"], operations: [CREATE], resources: [jobs]}}]
  validations:
  - expression: "{expression}"
    message: every Job needs a team label
    reason: Forbidden
  validationActions: {actions}
"""


@dataclass
class Live:
    kubectl: Kubectl
    app: Any
    ns: str

    def policies(self) -> tuple[str, ...]:
        return self.app.state.admission.policies.names

    def wait_for(self, condition: Callable[[], bool], timeout: float = RELOAD_WITHIN,
                 since: float | None = None) -> float:
        """Seconds from `since` (default: now) until `condition()` held; fails `timeout` seconds from now."""
        now = time.monotonic()
        start = now if since is None else since
        while not condition():
            if time.monotonic() - now > timeout:
                raise AssertionError(f"not in force within {timeout} s")
            time.sleep(0.01)
        return time.monotonic() - start


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    from lahar.commands.webhook import live_admission
    from lahar.webhooks import server

    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    tmp = tmp_path_factory.mktemp("policies-e2e")
    stack = contextlib.ExitStack()
    try:
        cluster, kubectl, client, certs_dir = cluster_with_webhook_certs(tmp, stack)
        admission = live_admission(client, namespace=NS, sync_timeout=30, probe_interval=0.5)
        stack.callback(admission.stop)
        web = server.WebhookServer(admission.app, host="127.0.0.1", port=0, certfile=certs_dir / "tls.crt",
                                   keyfile=certs_dir / "tls.key", reload_interval=None,
                                   graceful_timeout=1.0).start()
        stack.callback(web.stop)
        out = lahar("certs", "ensure", "--url", f"https://127.0.0.1:{web.port}", "--out", str(certs_dir),
                    kubeconfig=cluster.kubeconfig).stdout
        assert "lahar-validating-webhooks: created" in out, out
        ns = f"pol-{uuid.uuid4().hex[:6]}"
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield Live(kubectl, admission.app, ns)
    finally:
        stack.close()


def registered(live: Live) -> set[str]:
    return {h["name"] for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
            for c in live.kubectl.json("get", kind)["items"] for h in c.get("webhooks") or []}


def test_lahars_webhooks_are_registered(live: Live) -> None:
    hooks = registered(live)
    assert {"validateconfigmap.lahar.sh", "validatejob.volcano.sh", "mutatepod.volcano.sh"} <= hooks
    assert not hooks & {"validatepolicy.lahar.sh", "mutatepolicy.lahar.sh"}  # no AdmissionPolicy yet


def other_scheduler_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": "busybox"}]}}


NO_BARE_PODS = """apiVersion: lahar.sh/v1alpha1
kind: AdmissionPolicy
metadata: {name: no-bare-pods}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: ["*"], operations: [CREATE], resources: [pods]}]
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: a pod of another scheduler needs an owner label
    reason: Forbidden
  validationActions: [Deny]
"""


def test_a_policy_registers_its_webhook_which_denies_and_deleting_it_unregisters_it(live: Live) -> None:
    assert "created" in live.kubectl.apply(other_scheduler_pod("before"), live.ns).stdout
    sent = time.monotonic()
    live.kubectl.apply(policy_configmap("pod-policy", NO_BARE_PODS))
    try:
        in_force = live.wait_for(lambda: "no-bare-pods" in live.policies(), timeout=10.0, since=sent)
        took = live.wait_for(lambda: "validatepolicy.lahar.sh" in registered(live), timeout=10.0, since=sent)
        print(f"policy in force {in_force * 1000:.0f} ms after `kubectl apply` started")
        print(f"validatepolicy.lahar.sh registered {took * 1000:.0f} ms after `kubectl apply` started")
        assert "mutatepolicy.lahar.sh" not in registered(live)   # the policy has no mutations
        [config] = live.kubectl.json("get", "validatingwebhookconfiguration")["items"]
        [hook] = [h for h in config["webhooks"] if h["name"] == "validatepolicy.lahar.sh"]
        assert [(r["apiGroups"], r["resources"], r["operations"]) for r in hook["rules"]] == [
            ([""], ["pods"], ["CREATE"])]
        message = denial(live.kubectl.apply(other_scheduler_pod("bare"), live.ns, check=False))
        assert 'admission webhook "validatepolicy.lahar.sh" denied the request: ' in message, message
        assert "a pod of another scheduler needs an owner label" in message, message
    finally:
        live.kubectl("delete", "configmap", "pod-policy", "-n", NS)
    took = live.wait_for(lambda: "validatepolicy.lahar.sh" not in registered(live), timeout=10.0)
    print(f"validatepolicy.lahar.sh unregistered {took * 1000:.0f} ms after `kubectl delete` returned")
    assert "created" in live.kubectl.apply(other_scheduler_pod("bare"), live.ns).stdout


def test_policy_configmap_denies_the_next_job_within_2s(live: Live) -> None:
    cm = policy_configmap("team-policy", team_label_policy("team-label"))
    sent = time.monotonic()
    live.kubectl.apply(cm)
    try:
        took = live.wait_for(lambda: "team-label" in live.policies(), since=sent)
        print(f"policy ConfigMap in force {took * 1000:.0f} ms after `kubectl apply` started")
        message = denial(live.kubectl.apply(vcjob("no-team"), live.ns, check=False))
        assert 'admission webhook "validatejob.volcano.sh" denied the request: ' in message, message
        assert "AdmissionPolicy 'team-label' denied request: every Job needs a team label" in message, message
        assert live.kubectl("get", "vcjob", "no-team", "-n", live.ns, check=False).returncode != 0
        labelled = vcjob("with-team")
        labelled["metadata"]["labels"] = {"team": "vision"}
        assert "job.batch.volcano.sh/with-team created" in live.kubectl.apply(labelled, live.ns).stdout
    finally:
        live.kubectl("delete", "configmap", "team-policy", "-n", NS)
    live.wait_for(lambda: "team-label" not in live.policies())
    assert "created" in live.kubectl.apply(vcjob("no-team"), live.ns).stdout


def test_broken_policy_configmap_is_refused_at_apply(live: Live) -> None:
    broken = team_label_policy("broken", expression="object.metadata.labels['team' != ''")
    message = denial(live.kubectl.apply(policy_configmap("broken-policy", broken), check=False))
    assert 'admission webhook "validateconfigmap.lahar.sh" denied the request: ' in message, message
    assert "ConfigMap lahar-system/broken-policy is not a valid lahar configuration" in message, message
    assert "data[policy.yaml][doc 0] broken spec.validations[0].expression: compilation failed: " in message
    assert "Syntax error" in message and "at line 1, column " in message, message
    assert live.kubectl("get", "configmap", "broken-policy", "-n", NS, check=False).returncode != 0


def test_bad_admission_config_is_refused_a_good_one_applies_live(live: Live) -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lahar-admission-config", "namespace": NS},
           "data": {"admission.yaml": "maxQueueDepth: 0\n"}}
    message = denial(live.kubectl.apply(bad, check=False))
    assert 'admission webhook "validateconfigmap.lahar.sh" denied the request' in message, message
    assert "data[admission.yaml].maxQueueDepth: Input should be greater than or equal to 1" in message, message

    # the first scheduler name is what the job mutator fills in (the CRD already defaults the queue)
    good = {**bad, "data": {"admission.yaml": "schedulerNames: [lahar-live, volcano]\n"}}
    sent = time.monotonic()
    live.kubectl.apply(good)
    try:
        took = live.wait_for(lambda: live.app.state.admission.config.scheduler_names[0] == "lahar-live", since=sent)
        print(f"lahar-admission-config in force {took * 1000:.0f} ms after `kubectl apply` started")
        retry_until(lambda: _created(live, vcjob("live-config")))
        spec = live.kubectl.json("get", "vcjob", "live-config", "-n", live.ns)["spec"]
        assert spec["schedulerName"] == "lahar-live"
    finally:
        live.kubectl("delete", "configmap", "lahar-admission-config", "-n", NS)
    live.wait_for(lambda: live.app.state.admission.config.scheduler_names == ("volcano",))


def _created(live: Live, job: dict) -> None:
    proc = live.kubectl.apply(job, live.ns, check=False)
    assert proc.returncode == 0, proc.stderr


def test_bad_scheduler_configmap_is_refused(live: Live) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lahar-scheduler-configmap", "namespace": NS},
          "data": {"volcano-scheduler.conf": 'actions: "enqueue, allocate, bogus"\n'}}
    message = denial(live.kubectl.apply(cm, check=False))
    assert "data[volcano-scheduler.conf]: failed to find Action bogus" in message, message
    cm["data"]["volcano-scheduler.conf"] = 'actions: "enqueue, allocate"\ntiers:\n- plugins: [{name: gang}]\n'
    live.kubectl.apply(cm)
    live.kubectl("delete", "configmap", "lahar-scheduler-configmap", "-n", NS)


def test_warn_and_audit_policy(live: Live) -> None:
    live.kubectl.apply(policy_configmap("audit-policy", team_label_policy("team-audit", actions="[Warn, Audit]")))
    try:
        live.wait_for(lambda: "team-audit" in live.policies())
        proc = live.kubectl.apply(vcjob("audited"), live.ns)
        assert "job.batch.volcano.sh/audited created" in proc.stdout
        assert "Validation failed for AdmissionPolicy 'team-audit': every Job needs a team label" in proc.stderr

        def has_event() -> None:
            items = live.kubectl.json("get", "events", "-n", live.ns)["items"]
            assert any(e["reason"] == "PolicyViolation" and e["involvedObject"].get("name") == "audited"
                       and "team-audit" in e["message"] for e in items), items

        retry_until(has_event)
    finally:
        live.kubectl("delete", "configmap", "audit-policy", "-n", NS)
