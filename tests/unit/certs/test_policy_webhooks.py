"""The policy-only webhook entries (`/policies/mutate`, `/policies/validate`): registered only as far as the
AdmissionPolicies in force could match (`bundles.policy_webhooks`, pure), and kept so on a live configuration
(`bundles.sync_policy_webhooks` over the in-memory cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.certs import bundles
from lahar.certs.bundles import PolicyDemand
from lahar.kube.apiserver.memory import MemoryClient
from tests.unit.certs.test_certs import HOSTS, WEBHOOKS

TEMPLATES = bundles.load_templates(WEBHOOKS)
MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
POLICY_HOOKS = {MUTATING: "mutatepolicy.lahar.sh", VALIDATING: "validatepolicy.lahar.sh"}


def rule(groups: list[str], resources: list[str], ops: list[str] | None = None) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "operations": ops or ["*"]}


def _template(kind: str) -> dict[str, Any]:
    return next(t for t in TEMPLATES if t["kind"] == kind)


def _triples(hook: dict[str, Any] | None) -> set[tuple[str, str, str]]:
    """(group, resource, operation) a webhook entry registers for."""
    if hook is None:
        return set()
    return {(g, r, o) for ru in hook["rules"] for g in ru["apiGroups"] for r in ru["resources"]
            for o in ru["operations"]}


def _policy_hook(config: dict[str, Any]) -> dict[str, Any] | None:
    return next((h for h in config["webhooks"] if h["name"] == POLICY_HOOKS[config["kind"]]), None)


TEMPLATE_TRIPLES = {kind: _triples(_policy_hook(_template(kind))) for kind in POLICY_HOOKS}
EVERY = object()  # the template's own rules, whole

CASES = [
    # (id, demand, phase whose entry is checked, expected triples: EVERY, or a set; empty set = entry absent)
    ("unknown-keeps-everything", None, VALIDATING, EVERY),
    ("unknown-keeps-everything-mutating", None, MUTATING, EVERY),
    ("no-policy-no-entry", PolicyDemand(), VALIDATING, set()),
    ("no-policy-no-entry-mutating", PolicyDemand(), MUTATING, set()),
    ("wildcard-policy-whole-entry", PolicyDemand.everything(), VALIDATING, EVERY),
    ("wildcard-policy-whole-entry-mutating", PolicyDemand.everything(), MUTATING, EVERY),
    ("volcano-jobs-only-are-admitted-elsewhere",
     PolicyDemand(validating=(rule(["batch.volcano.sh"], ["jobs"]),)), VALIDATING, set()),
    ("pod-create-policy",
     PolicyDemand(validating=(rule([""], ["pods"], ["CREATE"]),)), VALIDATING, {("", "pods", "CREATE")}),
    ("validating-policy-registers-no-mutating-entry",
     PolicyDemand(validating=(rule([""], ["pods"], ["CREATE"]),)), MUTATING, set()),
    ("batch-jobs-update", PolicyDemand(validating=(rule(["batch"], ["jobs"], ["UPDATE"]),)), VALIDATING,
     {("batch", "jobs", "UPDATE")}),
    ("any-group-pods-of-all-kinds", PolicyDemand(mutating=(rule(["*"], ["*/*"], ["CREATE"]),)), MUTATING,
     {t for t in TEMPLATE_TRIPLES[MUTATING] if t[2] == "CREATE"}),
    ("subresource-only-never-main", PolicyDemand(validating=(rule([""], ["pods/status"]),)), VALIDATING, set()),
    ("subresource-wildcard-covers-main", PolicyDemand(validating=(rule([""], ["pods/*"]),)), VALIDATING,
     {("", "pods", "CREATE"), ("", "pods", "UPDATE")}),
    ("kinds-no-entry-serves", PolicyDemand(validating=(rule(["apps"], ["deployments"]),)), VALIDATING, set()),
    ("delete-only-matches-nothing", PolicyDemand(validating=(rule(["*"], ["*"], ["DELETE"]),)), VALIDATING, set()),
    ("queue-updates-mutating", PolicyDemand(mutating=(rule(["scheduling.volcano.sh"], ["queues"]),)), MUTATING,
     {("scheduling.volcano.sh", "queues", "UPDATE")}),
    ("two-policies-union", PolicyDemand(validating=(rule([""], ["pods"], ["UPDATE"]),
                                                   rule(["batch"], ["cronjobs"], ["CREATE"]))), VALIDATING,
     {("", "pods", "UPDATE"), ("batch", "cronjobs", "CREATE")}),
]


@pytest.mark.parametrize(("demand", "kind", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_entry_is_registered_as_far_as_a_policy_could_match(demand: PolicyDemand | None, kind: str,
                                                                   expected: Any) -> None:
    template = _template(kind)
    out = bundles.policy_webhooks(template, demand)
    hook = _policy_hook(out)
    assert _triples(hook) == (TEMPLATE_TRIPLES[kind] if expected is EVERY else expected)
    if hook is not None:  # all but the rules as written
        written = _policy_hook(template)
        assert {k: v for k, v in hook.items() if k != "rules"} == {k: v for k, v in written.items() if k != "rules"}
    others = [h for h in out["webhooks"] if h["name"] != POLICY_HOOKS[kind]]
    assert others == [h for h in template["webhooks"] if h["name"] != POLICY_HOOKS[kind]]  # untouched, in order
    assert template == _template(kind)  # pure


def test_render_records_its_parameters() -> None:
    out = bundles.render(_template(VALIDATING), ca_bundle=b"PEM", namespace="lahar", url="https://127.0.0.1:1",
                         scheduler_names=["volcano", "x"], policies=PolicyDemand())
    assert bundles.render_parameters(out) == {"ca_bundle": b"PEM", "namespace": "lahar", "service": None,
                                              "url": "https://127.0.0.1:1", "scheduler_names": ["volcano", "x"]}
    assert _policy_hook(out) is None
    assert bundles.render_parameters(_template(VALIDATING)) is None   # as written (or by Helm): not ours to sync


def test_scheduler_names_rewrite_the_policy_entries_condition() -> None:
    out = bundles.render(_template(MUTATING), ca_bundle=b"PEM", scheduler_names=["lahar"])
    [cond] = _policy_hook(out)["matchConditions"]
    assert cond["name"] == bundles.TEMPLATE_OTHER_PODS_CONDITION
    assert cond["expression"].startswith("!has(object.spec.schedulerName) || !(object.spec.schedulerName in ['lahar'])")


# --- the shell over the in-memory cluster ---------------------------------------------------------------------

def _config(client: MemoryClient, kind: str) -> dict[str, Any]:
    rt = next(rt for rt in client.registry if rt.kind == kind)
    [config] = client.list(rt)["items"]
    return config


def _ensure(client: MemoryClient, policies: PolicyDemand | None) -> bundles.EnsureResult:
    return bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=HOSTS,
                          templates=TEMPLATES, url="https://127.0.0.1:9443", policies=policies)


def test_sync_registers_the_entry_as_ensure_would_then_removes_it() -> None:
    client = MemoryClient()
    assert bundles.sync_policy_webhooks(client, TEMPLATES, PolicyDemand()) == {
        "lahar-mutating-webhooks": "absent", "lahar-validating-webhooks": "absent"}
    _ensure(client, PolicyDemand())
    assert _policy_hook(_config(client, VALIDATING)) is None
    pods = PolicyDemand(validating=(rule([""], ["pods"]),))
    assert bundles.sync_policy_webhooks(client, TEMPLATES, pods) == {
        "lahar-mutating-webhooks": "unchanged", "lahar-validating-webhooks": "updated"}
    synced = _config(client, VALIDATING)
    ensured = bundles.render(_template(VALIDATING), policies=pods, **bundles.render_parameters(synced))
    assert synced["webhooks"] == ensured["webhooks"]
    assert _policy_hook(synced)["clientConfig"]["url"] == "https://127.0.0.1:9443/policies/validate"
    assert set(bundles.sync_policy_webhooks(client, TEMPLATES, pods).values()) == {"unchanged"}  # idempotent
    assert set(_ensure(client, pods).configurations.values()) == {"unchanged"}                  # ensure agrees
    bundles.sync_policy_webhooks(client, TEMPLATES, PolicyDemand())
    assert _policy_hook(_config(client, VALIDATING)) is None
    assert [h["name"] for h in _config(client, VALIDATING)["webhooks"]] == [
        h["name"] for h in _template(VALIDATING)["webhooks"] if h["name"] != "validatepolicy.lahar.sh"]


def test_sync_leaves_a_configuration_it_did_not_render_alone() -> None:
    client = MemoryClient()
    rt = next(rt for rt in client.registry if rt.kind == VALIDATING)
    client.create(rt, _template(VALIDATING))
    assert bundles.sync_policy_webhooks(client, TEMPLATES, PolicyDemand())["lahar-validating-webhooks"] == "foreign"
    assert _policy_hook(_config(client, VALIDATING)) is not None
