"""webhooks.configmaps (`/configmaps/validate`): lahar's ConfigMaps refused at apply with field path and reason, the
scheduler conf checked through the validator the lahar layer registers, and the shipped registration reaching only
lahar's ConfigMaps."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from lahar.certs import bundles
from lahar.policies import loading
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import configmaps, review
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

WEBHOOKS = Path(__file__).resolve().parents[3] / "deploy" / "webhooks"
NS = "lahar-system"

GOOD_POLICY = """apiVersion: lahar.sh/v1alpha1
kind: AdmissionPolicy
metadata: {name: team-label}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [batch.volcano.sh], apiVersions: ["*"], operations: [CREATE],
                                      resources: [jobs]}]}
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
"""
BROKEN_POLICY = GOOD_POLICY.replace("'team' in object.metadata.labels", "object.metadata.labels['team' != ''")


def cm(name: str, data: dict[str, str], *, labels: dict[str, str] | None = None, namespace: str = NS) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def admission(text: str) -> dict:
    return cm(loading.ADMISSION_CONFIGMAP, {loading.ADMISSION_KEY: text})


def scheduler(text: str) -> dict:
    return cm(loading.SCHEDULER_CONFIGMAP, {loading.SCHEDULER_KEY: text})


def policies(text: str, *, label: str = "true") -> dict:
    return cm("team-policies", {loading.POLICY_KEY: text}, labels={loading.POLICY_LABEL: label})


@pytest.fixture(autouse=True)
def scheduler_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registration `lahar webhook` does, undone after each test."""
    from lahar import validators

    monkeypatch.setattr(loading, "_VALIDATORS", dict(loading._VALIDATORS))
    validators.register()


CASES = [
    # (id, ConfigMap, operation, None = allowed / fragments the denial must contain)
    ("admission-good", admission("maxQueueDepth: 7\ndefaultQueue: batch"), "CREATE", None),
    ("admission-empty", admission(""), "CREATE", None),
    ("admission-bad-value", admission("maxQueueDepth: 0"), "UPDATE",
     ["data[admission.yaml].maxQueueDepth: Input should be greater than or equal to 1"]),
    ("admission-unknown-field", admission("maxQueueDeep: 3"), "CREATE",
     ["data[admission.yaml].maxQueueDeep: Extra inputs are not permitted"]),
    ("admission-missing-key", cm(loading.ADMISSION_CONFIGMAP, {"other": "x"}), "CREATE",
     ["data[admission.yaml]: required key is missing"]),
    ("scheduler-good", scheduler('actions: "enqueue, allocate"\ntiers:\n- plugins: [{name: gang}]'), "CREATE", None),
    ("scheduler-unknown-action", scheduler('actions: "enqueue, bogus"'), "UPDATE",
     ["data[volcano-scheduler.conf]: failed to find Action bogus"]),
    ("scheduler-unknown-plugin", scheduler('actions: "allocate"\ntiers:\n- plugins: [{name: nope}]'), "CREATE",
     ["failed to find Plugin nope"]),
    ("scheduler-missing-key", cm(loading.SCHEDULER_CONFIGMAP, {}), "CREATE",
     ["data[volcano-scheduler.conf]: required key is missing"]),
    ("policy-good", policies(GOOD_POLICY), "CREATE", None),
    ("policy-cel-syntax", policies(BROKEN_POLICY), "CREATE",
     ["data[policy.yaml][doc 0] team-label spec.validations[0].expression: compilation failed:",
      "Syntax error", "line 1, column"]),
    ("policy-not-yaml", policies("a: [b"), "CREATE", ["data[policy.yaml]: not valid YAML"]),
    ("policy-unknown-field", policies(GOOD_POLICY.replace("validations:", "validashuns:")), "UPDATE",
     ["spec.validashuns: Extra inputs are not permitted"]),
    ("unlabelled-is-not-lahars", policies(BROKEN_POLICY, label="false"), "CREATE", None),
    ("other-configmap", cm("app-settings", {"admission.yaml": "maxQueueDepth: 0"}), "CREATE", None),
    ("delete-always-allowed", admission("maxQueueDepth: 0"), "DELETE", None),
]


@pytest.mark.parametrize(("configmap", "operation", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate(configmap: dict, operation: str, fragments: list[str] | None) -> None:
    kw: dict[str, Any] = {"old_object": configmap} if operation in ("UPDATE", "DELETE") else {}
    req = review.request_for(configmap, resource="configmaps", operation=operation, **kw)
    verdict = configmaps.validate(req, StaticLookups(), AdmissionConfig())
    if fragments is None:
        assert verdict.allowed, verdict.message
        return
    assert not verdict.allowed and (verdict.code, verdict.reason) == (422, "Invalid")
    assert verdict.message.startswith(f"ConfigMap {NS}/{configmap['metadata']['name']} is not a valid lahar "
                                      "configuration: ")
    for fragment in fragments:
        assert fragment in verdict.message, verdict.message


def test_served_at_configmaps_validate() -> None:
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    body = review.to_review(review.request_for(admission("maxQueueDepth: 0"), resource="configmaps"))
    with TestClient(app) as c:
        out = c.post("/configmaps/validate", json=body).json()["response"]
    assert out["allowed"] is False
    assert out["status"]["code"] == 422 and "maxQueueDepth" in out["status"]["message"]


# -- the registration: only lahar's ConfigMaps, only in lahar's namespace ------------------------------------------------

def _configmap_hook(namespace: str = NS) -> dict:
    for config in bundles.load_templates(WEBHOOKS):
        rendered = bundles.render(config, ca_bundle=b"pem", namespace=namespace)
        for hook in rendered["webhooks"]:
            if hook["name"] == "validateconfigmap.lahar.sh":
                return hook
    raise AssertionError("validateconfigmap.lahar.sh is not in deploy/webhooks")


REACHES = [
    # (id, ConfigMap, webhook namespace, reaches the webhook?)
    ("admission-config", admission("x: 1"), NS, True),
    ("scheduler-config", scheduler("x"), NS, True),
    ("policy-labelled", policies("x"), NS, True),
    ("policy-label-false", policies("x", label="false"), NS, False),
    ("unrelated", cm("app-settings", {}), NS, False),
    ("unrelated-with-other-labels", cm("app", {}, labels={"team": "a"}), NS, False),
    ("lahars-name-elsewhere", cm(loading.ADMISSION_CONFIGMAP, {}, namespace="team-a"), NS, False),
    ("custom-namespace", cm(loading.ADMISSION_CONFIGMAP, {}, namespace="lahar"), "lahar", True),
]


@pytest.mark.parametrize(("configmap", "namespace", "reaches"), [c[1:] for c in REACHES], ids=[c[0] for c in REACHES])
def test_registration_reaches_only_lahars_configmaps(configmap: dict, namespace: str, reaches: bool) -> None:
    from lahar.devcluster import admission as dc

    hook = _configmap_hook(namespace)
    assert hook["clientConfig"]["caBundle"] and hook["failurePolicy"] == "Fail"
    ns = configmap["metadata"]["namespace"]
    call = dc.AdmissionCall(operation="CREATE", group="", version="v1", resource="configmaps", namespace=ns,
                            name=configmap["metadata"]["name"], kind=("", "v1", "ConfigMap"), obj=configmap)
    labels = {"kubernetes.io/metadata.name": ns}
    matched = (dc.webhook_matches(hook, call, lambda _ns: labels)
               and dc.match_conditions(hook, call, dc.build_review(call)["request"]))
    assert matched is reaches


def test_lahars_configmaps_fail_closed() -> None:
    """A ConfigMap stored while the webhook was down is one nobody checked: the webhook fails closed."""
    assert _configmap_hook()["failurePolicy"] == "Fail"


HOSTILE_EXPRESSIONS = [
    ("1" + "+1" * 40_000, "nested more than 250 levels deep"),          # was SIGSEGV: the whole webhook died
    ("(" * 100_000 + "1" + ")" * 100_000, "200001 characters long"),   # was PanicException: HTTP 500
    ("!" * 1000 + "true", "nested more than 250 levels deep"),          # was RecursionError: HTTP 500
]


@pytest.mark.parametrize(("expression", "reason"), HOSTILE_EXPRESSIONS, ids=["+ x40k", "parens x100k", "! x1000"])
def test_a_hostile_policy_is_refused_with_its_field_and_the_webhook_keeps_answering(expression: str,
                                                                                     reason: str) -> None:
    doc = ("apiVersion: lahar.sh/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: hostile}\nspec:\n"
           "  matchConstraints: {resourceRules: [{apiGroups: [batch.volcano.sh], resources: [jobs]}]}\n"
           f"  validations:\n  - expression: '{expression}'\n")
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    body = review.to_review(review.request_for(policies(doc), resource="configmaps"))
    with TestClient(app) as c:
        answer = c.post("/configmaps/validate", json=body)
        assert answer.status_code == 200
        out = answer.json()["response"]
        assert out["allowed"] is False and out["status"]["code"] == 422
        assert "spec.validations[0].expression: compilation failed: " in out["status"]["message"]
        assert reason in out["status"]["message"]
        assert c.get("/healthz").status_code == 200
