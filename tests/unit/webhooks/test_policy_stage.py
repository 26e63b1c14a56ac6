"""webhooks.policystage: users' AdmissionPolicies after the built-in rules — per phase, per path, through the app
(TestClient, real Volcano rules), with live swaps, metrics, and Audit Events."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import jsonpatch
import pytest

from lahar.kube.apiserver.memory import MemoryClient
from lahar.policies import metrics as policy_metrics
from lahar.policies.admission import AdmissionConfig
from lahar.policies.admission_policies import parse_policies
from lahar.webhooks import policystage, review, routes
from lahar.webhooks.app import create_app, update_admission
from lahar.webhooks.lookups import StaticLookups
from lahar.webhooks.review import Verdict
from tests import builders
from tests.builders import pod_template

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

CONFIG = AdmissionConfig()


# -- builders ---------------------------------------------------------------------------------------------------------

def policy(name: str, *, expression: str = "false", message: str = "", actions: str = "[Deny]",
           resources: str = "[jobs]", groups: str = "[batch.volcano.sh]", ops: str = "[CREATE, UPDATE]",
           mutation: str | None = None, reason: str = "Invalid", validations: bool = True) -> str:
    text = f"""
apiVersion: lahar.sh/v1alpha1
kind: AdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: {groups}, apiVersions: ["*"], operations: {ops}, resources: {resources}}}]
  validationActions: {actions}
"""
    if validations:
        text += f"""  validations:
  - expression: {json.dumps(expression)}
    message: {json.dumps(message or name + ' says no')}
    reason: {reason}
"""
    if mutation:
        text += f"""  mutations:
  - patchType: JSONPatch
    jsonPatch: {{expression: {json.dumps(mutation)}}}
"""
    return text


def compiled(*texts: str) -> policystage.Policies:
    return policystage.Policies.of(p for t in texts for p in parse_policies(t))


def vcjob(name: str = "j1", *, labels: dict | None = None, **spec: Any) -> dict:
    job = builders.vcjob(name, "team-a").task("t", 1, template=pod_template()).spec(**spec)
    return (job.label(**labels) if labels else job).build()


def pod(scheduler: str = "volcano") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}


def batch_job() -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bj", "namespace": "team-a"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def req(obj: dict, resource: str = "jobs", **kw: Any) -> review.Request:
    return review.request_for(obj, resource=resource, **kw)


NO_TEAM = policy("team-label", expression="has(object.metadata.labels) && 'team' in object.metadata.labels",
                 message="every Job needs a team label", reason="Forbidden")
WARN_TEAM = policy("team-warn", expression="has(object.metadata.labels) && 'team' in object.metadata.labels",
                   message="add a team label", actions="[Warn, Audit]")
LABEL_DEFAULT_QUEUE = policy(
    "label-default-queue", validations=False, ops="[CREATE]",
    mutation="object.spec.queue == 'default' ? [JSONPatch{op: 'add', path: '/metadata/labels', "
             "value: {'lahar.sh/queue': 'default'}}] : []")


# -- run: one phase, pure over the verdict ----------------------------------------------------------------------------

RUN_CASES = [
    # (id, policies, object, rules' verdict, mutating, allowed, message fragment, warnings)
    ("no-policies", (), vcjob(), Verdict.allow(), False, True, "", ()),
    ("deny", (NO_TEAM,), vcjob(), Verdict.allow(), False, False,
     "AdmissionPolicy 'team-label' denied request: every Job needs a team label", ()),
    ("deny-passes-labelled", (NO_TEAM,), vcjob(labels={"team": "a"}), Verdict.allow(), False, True, "", ()),
    ("rules-deny-first", (NO_TEAM,), vcjob(), Verdict.deny("built-in says no"), False, False, "built-in says no", ()),
    ("warn-after-rules-warnings", (WARN_TEAM,), vcjob(), Verdict.allow(warnings=["queue is Closed"]), False, True,
     "", ("queue is Closed", "Validation failed for AdmissionPolicy 'team-warn': add a team label")),
    ("validations-skip-mutating-phase", (NO_TEAM,), vcjob(), Verdict.allow(), True, True, "", ()),
    ("mutations-skip-validating-phase", (LABEL_DEFAULT_QUEUE,), vcjob(queue="default"), Verdict.allow(), False,
     True, "", ()),
]


@pytest.mark.parametrize(("policies", "obj", "verdict", "mutating", "allowed", "message", "warns"),
                         [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_run(policies: tuple[str, ...], obj: dict, verdict: Verdict, mutating: bool, allowed: bool, message: str,
             warns: tuple[str, ...]) -> None:
    out, _ = policystage.run(compiled(*policies), req(obj), verdict, mutating=mutating, lookups=StaticLookups())
    assert out.allowed is allowed
    assert message in out.message
    assert out.warnings == (warns or verdict.warnings)
    if allowed and not mutating:
        assert out.patch == verdict.patch


def test_denial_carries_the_policy_reason_as_code() -> None:
    out, stage = policystage.run(compiled(NO_TEAM), req(vcjob()), Verdict.allow(), mutating=False,
                                 lookups=StaticLookups())
    assert (out.code, out.reason) == (403, "Forbidden")
    assert [r.policy for r in stage.denials] == ["team-label"]


def test_mutations_see_the_rules_patch_and_are_appended() -> None:
    job = vcjob()
    rules = Verdict.allow(patch=[{"op": "add", "path": "/spec/queue", "value": "default"}])
    out, _ = policystage.run(compiled(LABEL_DEFAULT_QUEUE), req(job), rules, mutating=True, lookups=StaticLookups())
    assert out.allowed and out.patch[0] == rules.patch[0] and len(out.patch) == 2
    final = jsonpatch.apply_patch(job, list(out.patch))
    assert final["metadata"]["labels"] == {"lahar.sh/queue": "default"} and final["spec"]["queue"] == "default"


def test_audit_results_are_returned_for_recording() -> None:
    _, stage = policystage.run(compiled(WARN_TEAM), req(vcjob()), Verdict.allow(), mutating=False,
                               lookups=StaticLookups())
    assert [r.policy for r in stage.audits] == ["team-warn"]


def test_policies_split_by_phase() -> None:
    both = policy("both", mutation="[]")
    p = compiled(NO_TEAM, LABEL_DEFAULT_QUEUE, both)
    assert [x.name for x in p.validating] == ["both", "team-label"]
    assert [x.name for x in p.mutating] == ["both", "label-default-queue"]
    assert all(not x.validations for x in p.mutating) and all(not x.mutations for x in p.validating)
    assert len(p) == 3 and not policystage.NO_POLICIES


# -- which requests the generic path leaves to the Volcano paths -------------------------------------------------------

HANDLED = [
    # (id, object, resource, operation, mutating, handled by a Volcano path?)
    ("vcjob-create-validate", vcjob(), "jobs", "CREATE", False, True),
    ("vcjob-create-mutate", vcjob(), "jobs", "CREATE", True, True),
    ("vcjob-update-mutate", vcjob(), "jobs", "UPDATE", True, True),       # /jobs/mutate runs on UPDATE too (re-apply)
    ("volcano-pod-create", pod(), "pods", "CREATE", False, True),
    ("volcano-pod-update", pod(), "pods", "UPDATE", False, False),
    ("other-scheduler-pod", pod("default-scheduler"), "pods", "CREATE", False, False),
    ("batch-v1-job", batch_job(), "jobs", "CREATE", False, False),
]


@pytest.mark.parametrize(("obj", "resource", "operation", "mutating", "handled"), [c[1:] for c in HANDLED],
                         ids=[c[0] for c in HANDLED])
def test_handled_by_rules(obj: dict, resource: str, operation: str, mutating: bool, handled: bool) -> None:
    table = {**routes.default_routes(), **routes.lahar_routes()}
    r = req(obj, resource, operation=operation, old_object=obj if operation == "UPDATE" else None)
    assert policystage.handled_by_rules(r, table, CONFIG, mutating=mutating) is handled


# -- through the app -----------------------------------------------------------------------------------------------

class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[list, review.Request]] = []

    def __call__(self, audits: list, r: review.Request) -> None:
        self.calls.append((audits, r))


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def app(sink: Sink) -> Any:
    return create_app(lookups=StaticLookups(), config=CONFIG, audits=sink)


def answer(client: TestClient, path: str, r: review.Request) -> dict:
    resp = client.post(path, json=review.to_review(r))
    assert resp.status_code == 200
    return resp.json()["response"]


def test_live_swap_denies_the_next_review(app: Any) -> None:
    job = vcjob(queue="default")    # as the mutating webhook left it
    with TestClient(app) as c:
        assert answer(c, "/jobs/validate", req(job))["allowed"] is True
        update_admission(app, policies=parse_policies(NO_TEAM))
        out = answer(c, "/jobs/validate", req(job))
        assert out["allowed"] is False and out["status"]["code"] == 403
        assert out["status"]["message"] == "AdmissionPolicy 'team-label' denied request: every Job needs a team label"
        update_admission(app, policies=())
        assert answer(c, "/jobs/validate", req(job))["allowed"] is True


def test_config_swap_reaches_the_rules(app: Any) -> None:
    with TestClient(app) as c:
        update_admission(app, config=AdmissionConfig(default_queue="batch"))
        ops = json.loads(base64.b64decode(answer(c, "/jobs/mutate", req(vcjob()))["patch"]))
        assert {"op": "add", "path": "/spec/queue", "value": "batch"} in ops


def test_mutating_path_combines_the_rules_and_policy_patches(app: Any) -> None:
    update_admission(app, policies=parse_policies(LABEL_DEFAULT_QUEUE))
    job = vcjob()
    with TestClient(app) as c:
        ops = json.loads(base64.b64decode(answer(c, "/jobs/mutate", req(job))["patch"]))
    final = jsonpatch.apply_patch(job, ops)
    assert final["spec"]["queue"] == "default" and final["metadata"]["labels"] == {"lahar.sh/queue": "default"}


def test_generic_path_runs_policies_only_for_what_no_volcano_path_admitted(app: Any) -> None:
    everywhere = policy("no-pods", resources="[pods]", groups='[""]', message="no pods today")
    update_admission(app, policies=parse_policies(everywhere))
    with TestClient(app) as c:
        # a volcano pod: /pods/validate runs the policy, the generic path leaves it alone
        assert answer(c, "/pods/validate", req(pod(), "pods"))["allowed"] is False
        assert answer(c, "/policies/validate", req(pod(), "pods"))["allowed"] is True
        # a pod for another scheduler never reaches /pods/validate: the generic path decides
        out = answer(c, "/policies/validate", req(pod("default-scheduler"), "pods"))
        assert out["allowed"] is False and "no pods today" in out["status"]["message"]


def test_generic_path_mutates_batch_v1_jobs(app: Any) -> None:
    add = policy("label-batch", validations=False, groups="[batch]",
                 mutation="[JSONPatch{op: 'add', path: '/metadata/labels', value: {'seen': 'yes'}}]")
    update_admission(app, policies=parse_policies(add))
    with TestClient(app) as c:
        out = answer(c, "/policies/mutate", req(batch_job()))
    assert json.loads(base64.b64decode(out["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}]


def test_audits_counted_and_sunk_warnings_sent(app: Any, sink: Sink) -> None:
    update_admission(app, policies=parse_policies(WARN_TEAM))
    before = policy_metrics.AUDITS.value(policy="team-warn", kind="validation")
    with TestClient(app) as c:
        out = answer(c, "/jobs/validate", req(vcjob(queue="default")))
        metrics = c.get("/metrics").text
    assert out["allowed"] is True and out["warnings"] == [
        "Validation failed for AdmissionPolicy 'team-warn': add a team label"]
    assert policy_metrics.AUDITS.value(policy="team-warn", kind="validation") == before + 1
    assert [[r.policy for r in audits] for audits, _ in sink.calls] == [["team-warn"]]
    assert 'lahar_policy_decisions_total{policy="team-warn",action="warn"}' in metrics
    assert "lahar_config_reload_failures_total" in metrics and "lahar_admission_requests_total" in metrics


def test_policy_stage_crash_is_a_denial(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    update_admission(app, policies=parse_policies(NO_TEAM))

    def boom(*a: Any, **kw: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(policystage, "policy_stage", boom)
    with TestClient(app) as c:
        out = answer(c, "/jobs/validate", req(vcjob(queue="default")))
    assert out["allowed"] is False and out["status"]["code"] == 500
    assert out["status"]["message"] == "internal error in the policy stage of /jobs/validate: RuntimeError: boom"


# -- Audit Events ---------------------------------------------------------------------------------------------------

def test_audit_events_are_written_off_the_review_path() -> None:
    client = MemoryClient()
    events_rt = client.registry.get("", "v1", "events")
    client.create(client.registry.get("", "v1", "namespaces"),
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    recorder = policystage.AuditEvents(client).start()
    try:
        _, stage = policystage.run(compiled(WARN_TEAM), req(vcjob()), Verdict.allow(), mutating=False,
                                   lookups=StaticLookups())
        recorder(stage.audits, req(vcjob("dry"), dry_run=True))      # dry run: nothing stored, no Event
        recorder(stage.audits, req(vcjob()))
        recorder.drain()
    finally:
        recorder.stop()
    [event] = client.list(events_rt, namespace="team-a")["items"]
    assert event["reason"] == "PolicyViolation" and event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "j1"
    assert event["message"] == "AdmissionPolicy 'team-warn': add a team label"
