"""policies.admission_policies: AdmissionPolicy documents (field-path errors), matching, evaluation, enforcement."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from lahar.policies import admission_policies as ap
from lahar.policies.admission_policies import models
from lahar.policies.errors import ConfigError
from tests.builders import vcjob

RULE = {"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
        "resources": ["jobs"]}


def policy(name: str = "p", **spec: Any) -> dict:
    body = {"matchConstraints": {"resourceRules": [RULE]},
            "validations": [{"expression": "true"}]}
    body.update(spec)
    return {"apiVersion": "lahar.sh/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": name}, "spec": body}


def job(name: str = "j", *, ns: str = "default", labels: dict | None = None, **spec: Any) -> dict:
    return vcjob(name, ns).label(**(labels or {})).queue("default").task("t", 1).spec(**spec).build()


def compiled(*docs: dict) -> list[ap.CompiledPolicy]:
    return ap.load_documents(docs)


def results(docs: list[dict], obj: dict, **kw: Any) -> list[ap.Result]:
    return ap.evaluate(compiled(*docs), ap.request_for_object(obj, **kw))


# --- parsing ----------------------------------------------------------------------------------------------------

def _without(d: dict, *path: str) -> dict:
    d = copy.deepcopy(d)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return d


@pytest.mark.parametrize(("doc", "path", "reason"), [
    ({**policy(), "apiVersion": "lahar.sh/v1"}, "apiVersion", "Input should be 'lahar.sh/v1alpha1'"),
    (_without(policy(), "spec", "matchConstraints"), "spec.matchConstraints", "Field required"),
    (policy(validations=[{"message": "x"}]), "spec.validations[0].expression", "Field required"),
    (policy(validationActions=["Deny", "Warn"]), "spec", "cannot contain both Deny and Warn"),
    (policy(validationActions=["Block"]), "spec.validationActions[0]", "Input should be 'Deny', 'Warn' or 'Audit'"),
    (policy(validations=[{"expression": "object.spec.queue == "}]), "spec.validations[0].expression",
     "compilation failed: Syntax error"),
    (policy(validations=[{"expression": "objects.x"}]), "spec.validations[0].expression",
     "undeclared reference to 'objects' at line 1, column 1"),
    (policy(validations=[{"expression": "variables.nope"}]), "spec.validations[0].expression",
     "undefined variable(s) variables.nope"),
    (policy(matchConditions=[{"name": "c", "expression": "1 +"}]), "spec.matchConditions[0].expression",
     "compilation failed"),
    (policy(variables=[{"name": "bad-name", "expression": "1"}]), "spec.variables[0].name", "CEL identifier"),
    (policy(mutations=[{"patchType": "ApplyConfiguration"}]), "spec.mutations[0]", "not supported"),
    (policy(mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: }]"}}]),
     "spec.mutations[0].jsonPatch.expression", "compilation failed"),
    (policy(params={"a": 1}, paramRef={"name": "x"}), "spec", "not both"),
    (policy(unknownField=1), "spec.unknownField", "Extra inputs are not permitted"),
    (policy(matchConstraints={"resourceRules": [{**RULE, "operations": ["PATCH"]}]}),
     "spec.matchConstraints.resourceRules[0].operations", "unsupported operation"),
    (policy(matchConstraints={"resourceRules": [RULE], "objectSelector": {
        "matchExpressions": [{"key": "a", "operator": "Near"}]}}),
     "spec.matchConstraints.objectSelector", "not a valid label selector operator"),
    (policy(validations=[]), "spec", "at least one validation or mutation"),
    # kube's IsDNS1123Subdomain: every dot-separated part is a label (the old pattern let "a..b" through)
    ({**policy(), "metadata": {"name": "a..b"}}, "metadata.name", "a lowercase RFC 1123 subdomain"),
], ids=["apiVersion", "no-matchConstraints", "no-expression", "deny-and-warn", "unknown-action", "syntax",
        "undeclared", "unknown-variable", "matchCondition-syntax", "variable-name", "apply-configuration",
        "mutation-syntax", "params-twice", "unknown-field", "bad-operation", "bad-selector", "nothing-to-do",
        "name-empty-dns-label"])
def test_invalid_documents_name_the_field(doc: dict, path: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        ap.load_documents([doc])
    assert any(p.endswith(path) and reason in r for p, r in info.value.errors), info.value.errors


def test_parse_policies_reads_several_documents_and_refuses_duplicate_names() -> None:
    text = yaml.safe_dump_all([policy("a"), policy("b")])
    assert [p.name for p in ap.parse_policies(text)] == ["a", "b"]
    with pytest.raises(ConfigError, match="defined more than once"):
        ap.parse_policies(yaml.safe_dump_all([policy("a"), policy("a")]))
    with pytest.raises(ConfigError, match="<yaml>"):
        ap.parse_policies("a: [")


# --- matching ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("constraints", "obj", "operation", "hit"), [
    ({"resourceRules": [RULE]}, job(), "CREATE", True),
    ({"resourceRules": [RULE]}, job(), "DELETE", False),
    ({"resourceRules": [{**RULE, "resources": ["queues"]}]}, job(), "CREATE", False),
    ({"resourceRules": [{**RULE, "resources": ["*"]}]}, job(), "CREATE", True),
    ({"resourceRules": [{**RULE, "apiGroups": [""]}]}, job(), "CREATE", False),
    ({"resourceRules": [{**RULE, "resourceNames": ["other"]}]}, job(), "CREATE", False),
    ({"resourceRules": [{**RULE, "scope": "Cluster"}]}, job(), "CREATE", False),
    ({"resourceRules": [RULE], "excludeResourceRules": [RULE]}, job(), "CREATE", False),
    ({"resourceRules": [RULE], "objectSelector": {"matchLabels": {"team": "a"}}}, job(labels={"team": "a"}),
     "CREATE", True),
    ({"resourceRules": [RULE], "objectSelector": {"matchLabels": {"team": "a"}}}, job(), "CREATE", False),
    ({"resourceRules": [RULE], "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}},
     job(ns="ml"), "CREATE", True),
    ({"resourceRules": [RULE], "namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ml"]}]}}, job(ns="ml"), "CREATE",
     False),
], ids=["rule", "other-operation", "other-resource", "any-resource", "other-group", "resource-names",
        "scope", "excluded", "object-selector", "object-selector-miss", "namespace-selector",
        "namespace-selector-miss"])
def test_match_constraints(constraints: dict, obj: dict, operation: str, hit: bool) -> None:
    (p,) = compiled(policy(matchConstraints=constraints, validations=[{"expression": "false"}]))
    req = ap.request_for_object(obj, operation=operation)
    assert ap.matches(p, req) is hit
    assert bool(ap.evaluate([p], req)) is hit


def test_namespace_selector_reads_the_namespace_object() -> None:
    (p,) = compiled(policy(matchConstraints={"resourceRules": [RULE], "namespaceSelector": {
        "matchLabels": {"tier": "gpu"}}}))
    req = ap.request_for_object(job(ns="ml"))
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"tier": "gpu"}}}
    assert ap.matches(p, req, namespace_obj=ns)
    assert not ap.matches(p, req)


@pytest.mark.parametrize(("pattern", "resource", "sub", "hit"), [
    ("jobs", "jobs", "", True), ("jobs", "jobs", "status", False), ("jobs/status", "jobs", "status", True),
    ("*/status", "jobs", "status", True), ("*/*", "jobs", "", True), ("*", "pods", "binding", False),
    ("jobs/*", "jobs", "status", True),
], ids=lambda v: str(v))
def test_resource_patterns(pattern: str, resource: str, sub: str, hit: bool) -> None:
    assert models._resource_matches(pattern, resource, sub) is hit


# --- evaluation and enforcement -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("validation", "message"), [
    ({"expression": "false", "message": "static"}, "static"),
    ({"expression": "false"}, "failed expression: false"),
    ({"expression": "false", "message": "static", "messageExpression": "'queue ' + object.spec.queue"},
     "queue default"),
    ({"expression": "false", "message": "fallback", "messageExpression": "object.nope"}, "fallback"),
    ({"expression": "false", "message": "fallback", "messageExpression": "1"}, "fallback"),
], ids=["message", "default", "messageExpression", "messageExpression-error", "messageExpression-not-string"])
def test_messages(validation: dict, message: str) -> None:
    (r,) = results([policy(validations=[validation])], job())
    assert r.message == message


@pytest.mark.parametrize(("actions", "denied", "warned", "audited"), [
    (["Deny"], 1, 0, 0), (["Warn"], 0, 1, 0), (["Audit"], 0, 0, 1), (["Deny", "Audit"], 1, 0, 1),
    (["Warn", "Audit"], 0, 1, 1),
], ids=lambda v: str(v))
def test_validation_actions(actions: list[str], denied: int, warned: int, audited: int) -> None:
    d = ap.enforce(results([policy(validations=[{"expression": "false", "message": "m"}],
                                   validationActions=actions)], job()))
    assert (len(d.denials), len(d.warnings), len(d.audits)) == (denied, warned, audited)
    assert d.allowed is (denied == 0)


def test_denial_and_warning_texts_and_codes() -> None:
    (r,) = results([policy("quota", validations=[{"expression": "false", "message": "too big",
                                                   "reason": "Forbidden"}])], job())
    assert r.denial() == "AdmissionPolicy 'quota' denied request: too big"
    assert r.warning() == "Validation failed for AdmissionPolicy 'quota': too big"
    assert (r.reason, r.code) == ("Forbidden", 403)


@pytest.mark.parametrize(("failure_policy", "expected"), [("Fail", 1), ("Ignore", 0)], ids=["Fail", "Ignore"])
def test_failure_policy_on_expression_errors(failure_policy: str, expected: int) -> None:
    out = results([policy(failurePolicy=failure_policy, validations=[{"expression": "object.spec.nope == 1"}])],
                  job())
    assert len(out) == expected
    if out:
        assert out[0].kind == "error" and "no such key: nope" in out[0].message


def test_non_bool_validation_is_an_error() -> None:
    (r,) = results([policy(validations=[{"expression": "1"}])], job())
    assert r.kind == "error" and "must evaluate to bool" in r.message


def test_match_conditions_skip_and_fail() -> None:
    skip = policy(matchConditions=[{"name": "gpu", "expression": "object.spec.queue == 'gpu'"}],
                  validations=[{"expression": "false"}])
    assert results([skip], job()) == []
    broken = policy(matchConditions=[{"name": "bad", "expression": "object.nope"}])
    (r,) = results([broken], job())
    assert "matchCondition 'bad'" in r.message


def test_variables_compose_in_order() -> None:
    doc = policy(variables=[{"name": "tasks", "expression": "size(object.spec.tasks)"},
                            {"name": "double", "expression": "variables.tasks * 2"}],
                 validations=[{"expression": "variables.double == 4", "messageExpression":
                               "'double is ' + string(variables.double)"}])
    (r,) = results([doc], job())
    assert r.message == "double is 2"


def test_failed_variable_is_reported_by_its_users() -> None:
    doc = policy(variables=[{"name": "x", "expression": "object.nope"}],
                 validations=[{"expression": "variables.x == 1"}])
    (r,) = results([doc], job())
    assert "variable 'x' failed: no such key: nope" in r.message


def test_inline_params_and_param_ref() -> None:
    doc = policy(params={"data": {"max": "1"}}, validations=[
        {"expression": "size(object.spec.tasks) <= int(params.data.max)"}])
    assert results([doc], job()) == []
    ref = policy("ref", paramRef={"name": "limits", "namespace": "lahar-system"},
                 validations=[{"expression": "params.data.ok == 'yes'"}])
    (p,) = compiled(ref)
    req = ap.request_for_object(job())
    (missing,) = ap.evaluate([p], req)
    assert "no params found" in missing.message and missing.kind == "error"
    assert ap.evaluate([p.with_params({"data": {"ok": "yes"}})], req) == []
    allow = policy("allow", paramRef={"name": "limits", "parameterNotFoundAction": "Allow"})
    assert results([allow], job()) == []


def test_mutations_patch_in_order_and_validations_see_the_result() -> None:
    add = policy("a-add", validations=[], mutations=[{"patchType": "JSONPatch", "jsonPatch": {
        "expression": '[JSONPatch{op: "add", path: "/spec/priorityClassName", value: "low"}]'}}])
    check = policy("b-check", validations=[{"expression": "object.spec.priorityClassName == 'low'"}])
    out = results([check, add], job())
    assert [(r.policy, r.kind) for r in out] == [("a-add", "mutation")]
    d = ap.enforce(out)
    assert d.patch == ({"op": "add", "path": "/spec/priorityClassName", "value": "low"},)


@pytest.mark.parametrize(("expression", "fragment"), [
    ("1", "must evaluate to a list"),
    ('[{"op": "frob", "path": "/x"}]', "operation 0 must be"),
    ('[{"op": "add", "path": "/spec/x"}]', "needs a value"),
    ('[{"op": "remove", "path": "/spec/absent"}]', "does not apply"),
], ids=["not-a-list", "bad-op", "no-value", "does-not-apply"])
def test_bad_mutations_are_errors(expression: str, fragment: str) -> None:
    doc = policy(validations=[], mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}])
    (r,) = results([doc], job())
    assert r.kind == "error" and fragment in r.message


def test_failed_test_op_skips_the_mutation() -> None:
    doc = policy(validations=[], mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression":
        '[{"op": "test", "path": "/spec/queue", "value": "other"}, {"op": "add", "path": "/spec/x", "value": 1}]'}}])
    assert results([doc], job()) == []


def test_denied_requests_carry_no_patch() -> None:
    mut = policy("m", validations=[], mutations=[{"patchType": "JSONPatch", "jsonPatch": {
        "expression": '[{"op": "add", "path": "/spec/x", "value": 1}]'}}])
    deny = policy("n", validations=[{"expression": "false"}])
    d = ap.enforce(results([mut, deny], job()))
    assert not d.allowed and d.patch == ()


def test_results_are_stably_ordered_and_evaluate_is_pure() -> None:
    docs = [policy(n, validations=[{"expression": "false", "message": f"{n}{i}"} for i in range(2)])
            for n in ("c", "a", "b")]
    obj = job()
    before = copy.deepcopy(obj)
    out = results(docs, obj)
    assert [r.message for r in out] == ["a0", "a1", "b0", "b1", "c0", "c1"]
    assert obj == before


def test_queue_object_comes_from_the_lookup() -> None:
    doc = policy(validations=[{"expression": "queueObject != null && queueObject.metadata.labels.gpu == 'true'"}])
    (p,) = compiled(doc)
    queue = {"metadata": {"name": "default", "labels": {"gpu": "true"}}}
    req = ap.request_for_object(job())
    assert ap.evaluate([p], req, queue_lookup={"default": queue}.get) == []
    assert len(ap.evaluate([p], req, queue_lookup={}.get)) == 1


@pytest.mark.parametrize(("obj", "queue"), [
    (job(queue="q1"), "q1"),
    ({**job(), "spec": {"tasks": []}}, "default"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d", "annotations": {
        "scheduling.volcano.sh/queue-name": "q2"}}}, "q2"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}}, None),
], ids=["job", "job-default", "pod", "other"])
def test_queue_name(obj: dict, queue: str | None) -> None:
    assert ap.queue_name(ap.request_for_object(obj)) == queue


def test_request_like_objects_are_accepted() -> None:
    class Req:   # the attributes of webhooks.review.Request
        uid, operation, group, version, kind = "u", "CREATE", "batch.volcano.sh", "v1alpha1", "Job"
        resource, sub_resource, namespace, name = "jobs", "", "default", "j"
        object, old_object, user_info, dry_run = job(), None, {"username": "alice"}, False

    doc = policy(validations=[{"expression": "request.userInfo.username == 'bob'",
                               "messageExpression": "request.userInfo.username + ' ' + request.resource.resource"}])
    (r,) = ap.evaluate(compiled(doc), Req())
    assert r.message == "alice jobs"


def test_policy_stage_signature() -> None:
    docs = [policy("deny", validations=[{"expression": "false", "message": "no"}]),
            policy("warn", validations=[{"expression": "false", "message": "hm"}],
                   validationActions=["Warn", "Audit"])]
    denials, warnings, patches, audits = ap.policy_stage(compiled(*docs), ap.request_for_object(job()))
    assert [d.denial() for d in denials] == ["AdmissionPolicy 'deny' denied request: no"]
    assert warnings == ["Validation failed for AdmissionPolicy 'warn': hm"]
    assert patches == [] and [a.policy for a in audits] == ["warn"]
    assert ap.policy_stage([], ap.request_for_object(job())) == ([], [], [], [])


def test_stage_budget_turns_late_expressions_into_errors() -> None:
    docs = [policy("slow", validations=[{"expression": "true"}])]
    stage = ap.policy_stage(compiled(*docs), ap.request_for_object(job()), budget_seconds=-1.0)
    assert "time budget" in stage.denials[0].message
