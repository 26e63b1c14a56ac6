"""Admission chain matching and message building: pure tables mirroring kube-apiserver's webhook dispatcher.

Covers rules (operations, groups, versions, resources, subresources, scope), selectors, matchConditions (CEL),
the AdmissionReview request shape and the exact denial / failure texts; HTTPS calls are in tests/integration.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lahar.devcluster import admission
from lahar.devcluster.admission import AdmissionCall
from lahar.kube import errors

POD = AdmissionCall(operation="CREATE", group="", version="v1", resource="pods", namespace="default", name="p1",
                    kind=("", "v1", "Pod"), obj={"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "p1", "labels": {"app": "web"}}},
                    username="admin", groups=("system:masters",))
POD_STATUS = replace(POD, operation="UPDATE", subresource="status")
NODE = AdmissionCall(operation="CREATE", group="", version="v1", resource="nodes", name="n1",
                     kind=("", "v1", "Node"), obj={"metadata": {"name": "n1"}})
NAMESPACE = AdmissionCall(operation="CREATE", group="", version="v1", resource="namespaces", namespace="team-a",
                          name="team-a", kind=("", "v1", "Namespace"),
                          obj={"metadata": {"name": "team-a", "labels": {"env": "prod"}}})
VCJOB = AdmissionCall(operation="UPDATE", group="batch.volcano.sh", version="v1alpha1", resource="jobs",
                      namespace="default", name="j1", kind=("batch.volcano.sh", "v1alpha1", "Job"),
                      obj={"metadata": {"name": "j1"}}, old_obj={"metadata": {"name": "j1", "labels": {"a": "b"}}})
QUEUE_DELETE = AdmissionCall(operation="DELETE", group="scheduling.volcano.sh", version="v1beta1",
                             resource="queues", name="q1", kind=("scheduling.volcano.sh", "v1beta1", "Queue"),
                             old_obj={"metadata": {"name": "q1"}})


def rule(ops=("*",), groups=("*",), versions=("*",), resources=("*",), scope=None):
    out = {"operations": list(ops), "apiGroups": list(groups), "apiVersions": list(versions),
           "resources": list(resources)}
    if scope:
        out["scope"] = scope
    return out


RULE_CASES = [
    ("all-stars", rule(), POD, True),
    ("op-create", rule(ops=["CREATE"]), POD, True),
    ("op-update-vs-create", rule(ops=["UPDATE"]), POD, False),
    ("op-list", rule(ops=["CREATE", "DELETE"]), QUEUE_DELETE, True),
    ("group-core", rule(groups=[""]), POD, True),
    ("group-other", rule(groups=["apps"]), POD, False),
    ("group-volcano", rule(groups=["batch.volcano.sh"]), VCJOB, True),
    ("version-mismatch", rule(versions=["v1beta1"]), VCJOB, False),
    ("resource-exact", rule(resources=["pods"]), POD, True),
    ("resource-other", rule(resources=["services"]), POD, False),
    ("star-no-subresource", rule(resources=["*"]), POD_STATUS, False),
    ("pods-no-subresource", rule(resources=["pods"]), POD_STATUS, False),
    ("pods-status", rule(resources=["pods/status"]), POD_STATUS, True),
    ("pods-status-vs-main", rule(resources=["pods/status"]), POD, False),
    ("star-status", rule(resources=["*/status"]), POD_STATUS, True),
    ("pods-star", rule(resources=["pods/*"]), POD_STATUS, True),
    ("pods-star-also-main", rule(resources=["pods/*"]), POD, True),  # kube: sub "*" also matches ""
    ("star-star-main", rule(resources=["*/*"]), POD, True),
    ("star-star-sub", rule(resources=["*/*"]), POD_STATUS, True),
    ("scope-namespaced-pod", rule(scope="Namespaced"), POD, True),
    ("scope-namespaced-node", rule(scope="Namespaced"), NODE, False),
    ("scope-namespaced-namespace", rule(scope="Namespaced"), NAMESPACE, False),
    ("scope-cluster-node", rule(scope="Cluster"), NODE, True),
    ("scope-cluster-namespace", rule(scope="Cluster"), NAMESPACE, True),
    ("scope-cluster-pod", rule(scope="Cluster"), POD, False),
    ("scope-all", rule(scope="*"), NODE, True),
    ("empty-ops", {"operations": [], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}, POD, False),
]


@pytest.mark.parametrize(("r", "call", "expected"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_rule_matches(r, call, expected):
    assert admission.rule_matches(r, call) is expected


SELECTOR_CASES = [
    ("nil", None, {"a": "b"}, True),
    ("empty", {}, {}, True),
    ("match-labels", {"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
    ("match-labels-miss", {"matchLabels": {"a": "b"}}, {"a": "x"}, False),
    ("in", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}, {"a": "c"}, True),
    ("in-missing-key", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}, {}, False),
    ("notin-missing-key", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
    ("notin-hit", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {"a": "b"}, False),
    ("exists", {"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ("doesnotexist", {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
    ("and", {"matchLabels": {"x": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"x": "1"}, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), [c[1:] for c in SELECTOR_CASES],
                         ids=[c[0] for c in SELECTOR_CASES])
def test_selector_matches(selector, labels, expected):
    assert admission.selector_matches(selector, labels) is expected


NS_LABELS = {"default": {"kubernetes.io/metadata.name": "default"}, "team-a": {"env": "dev"}}


def ns_labels(name):
    if name not in NS_LABELS:
        raise errors.NotFound(f'namespaces "{name}" not found')
    return NS_LABELS[name]


def hook(**kw):
    out = {"name": "h.example.com", "rules": [rule()]}
    out.update(kw)
    return out


PROD = {"matchLabels": {"env": "prod"}}
WEB = {"matchLabels": {"app": "web"}}
WEBHOOK_CASES = [
    ("no-selectors", hook(), POD, True),
    ("ns-selector-miss", hook(namespaceSelector=PROD), POD, False),
    ("ns-selector-hit", hook(namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "default"}}), POD,
     True),
    ("ns-selector-cluster-scoped-always", hook(namespaceSelector=PROD), NODE, True),
    ("ns-selector-namespace-own-labels", hook(namespaceSelector=PROD), NAMESPACE, True),
    ("ns-selector-namespace-own-labels-miss", hook(namespaceSelector={"matchLabels": {"env": "dev"}}), NAMESPACE,
     False),
    ("object-selector-new", hook(objectSelector=WEB), POD, True),
    ("object-selector-miss", hook(objectSelector={"matchLabels": {"app": "db"}}), POD, False),
    ("object-selector-old", hook(objectSelector={"matchLabels": {"a": "b"}}), VCJOB, True),
    ("object-selector-delete-old", hook(objectSelector={"matchExpressions": [{"key": "x", "operator":
                                                                              "DoesNotExist"}]}), QUEUE_DELETE, True),
    ("rules-miss", hook(rules=[rule(resources=["services"])]), POD, False),
    ("second-rule", hook(rules=[rule(resources=["services"]), rule(resources=["pods"])]), POD, True),
]


@pytest.mark.parametrize(("h", "call", "expected"), [c[1:] for c in WEBHOOK_CASES], ids=[c[0] for c in WEBHOOK_CASES])
def test_webhook_matches(h, call, expected):
    assert admission.webhook_matches(h, call, ns_labels) is expected


def test_rules_are_matched_before_the_namespace_is_read():
    def no_lookup(name):
        raise AssertionError(f"namespace {name} read for a hook whose rules do not match")

    broken = {"matchExpressions": [{"key": "a", "operator": "Sideways"}]}
    other = [rule(resources=["services"])]
    assert admission.webhook_matches(hook(namespaceSelector=PROD, rules=other), POD, no_lookup) is False
    # kube ignores a broken selector of a webhook whose rules do not match
    assert admission.webhook_matches(hook(objectSelector=broken, rules=other), POD, no_lookup) is False
    with pytest.raises(errors.BadRequest, match="not a valid label selector operator"):
        admission.webhook_matches(hook(objectSelector=broken), POD, ns_labels)


def test_missing_namespace_fails_only_when_rules_match():
    call = replace(POD, namespace="ghost")
    with pytest.raises(errors.NotFound, match='namespaces "ghost" not found'):
        admission.webhook_matches(hook(namespaceSelector=PROD), call, ns_labels)
    assert admission.webhook_matches(hook(namespaceSelector=PROD, rules=[rule(resources=["services"])]), call,
                                     ns_labels) is False


CEL_CASES = [
    ("true", ["object.metadata.name == 'p1'"], "Fail", True),
    ("false", ["object.metadata.name == 'other'"], "Fail", False),
    ("all-must-hold", ["true", "request.operation == 'UPDATE'"], "Fail", False),
    ("request-user", ["request.userInfo.groups.exists(g, g == 'system:masters')"], "Fail", True),
    ("has-labels", ["has(object.metadata.labels) && object.metadata.labels.app == 'web'"], "Fail", True),
    ("error-ignore-skips", ["object.metadata.nope == 'x'"], "Ignore", False),
    ("false-beats-error", ["object.metadata.nope == 'x'", "false"], "Fail", False),
]


@pytest.mark.parametrize(("exprs", "policy", "expected"), [c[1:] for c in CEL_CASES], ids=[c[0] for c in CEL_CASES])
def test_match_conditions(exprs, policy, expected):
    h = hook(failurePolicy=policy, matchConditions=[{"name": f"c{i}", "expression": e} for i, e in enumerate(exprs)])
    request = admission.build_review(POD)["request"]
    assert admission.match_conditions(h, POD, request) is expected


class _NotJson:
    pass


def test_match_conditions_convert_only_the_variables_they_name():
    weird = replace(POD, old_obj={"x": _NotJson()})  # would fail a conversion to CEL
    h = hook(matchConditions=[{"name": "c", "expression": "object.metadata.name == 'p1'"}])
    assert admission.match_conditions(h, weird, admission.build_review(POD)["request"]) is True
    h = hook(matchConditions=[{"name": "c", "expression": "oldObject == null"}], failurePolicy="Ignore")
    assert admission.match_conditions(h, weird, admission.build_review(POD)["request"]) is False  # error → skip


TO_CEL_CASES = [
    ("scalars", ["s", 1, -2, 1.5, True, False, None]),
    ("nested", {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"containers": [{"ports": [1, 2]}]}}),
    ("empty", [{}, [], ""]),
    ("tuple", (1, "x")),
]


@pytest.mark.parametrize("value", [c[1] for c in TO_CEL_CASES], ids=[c[0] for c in TO_CEL_CASES])
def test_to_cel_is_celpys_conversion(value):
    from celpy.adapter import json_to_cel

    assert repr(admission.to_cel(value)) == repr(json_to_cel(value))


def test_match_condition_error_with_fail_is_forbidden():
    h = hook(matchConditions=[{"name": "c", "expression": "object.metadata.nope == 'x'"}])
    with pytest.raises(errors.Forbidden, match=r'^pods "p1" is forbidden: expression .* resulted in error'):
        admission.match_conditions(h, POD, admission.build_review(POD)["request"])


def test_review_shape_for_create():
    review = admission.build_review(POD, uid="u-1")
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert review["request"] == {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "p1",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": POD.obj,
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }


REVIEW_CASES = [
    ("status-subresource", POD_STATUS, {"subResource": "status", "requestSubResource": "status"},
     {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
    ("delete-cluster-scoped", QUEUE_DELETE, {}, {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}),
    ("dry-run", replace(POD, dry_run=True, options={"fieldManager": "kubectl"}), {"dryRun": True},
     {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl", "dryRun": ["All"]}),
]


@pytest.mark.parametrize(("call", "fields", "options"), [c[1:] for c in REVIEW_CASES], ids=[c[0] for c in REVIEW_CASES])
def test_review_fields(call, fields, options):
    request = admission.build_review(call)["request"]
    for key, value in fields.items():
        assert request[key] == value
    assert request["options"] == options
    assert ("namespace" in request) is bool(call.namespace)


def test_namespace_object_review_carries_its_own_name_as_namespace():
    class Attrs:
        operation, subresource, namespace, name, old_obj, options = "CREATE", None, None, "team-a", None, None
        rt = next(r for r in __import__("lahar.kube.resources", fromlist=["core"]).core() if r.plural == "namespaces")
        obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        request = None

    call = AdmissionCall.from_attributes(Attrs())
    assert call.namespace == "team-a" and admission.build_review(call)["request"]["namespace"] == "team-a"


DENIAL_CASES = [
    ("message", {"message": "queue is closed", "code": 400}, 'admission webhook "v.x" denied the request: '
     "queue is closed", 400),
    ("default-403", {"message": "no"}, 'admission webhook "v.x" denied the request: no', 403),
    ("code-below-400", {"message": "no", "code": 200}, 'admission webhook "v.x" denied the request: no', 403),
    ("reason-only", {"reason": "Nope"}, 'admission webhook "v.x" denied the request: Nope', 403),
    ("nothing", None, 'admission webhook "v.x" denied the request without explanation', 403),
    ("code-422", {"message": "bad", "code": 422}, 'admission webhook "v.x" denied the request: bad', 422),
]


@pytest.mark.parametrize(("status", "message", "code"), [c[1:] for c in DENIAL_CASES], ids=[c[0] for c in DENIAL_CASES])
def test_denied(status, message, code):
    err = admission.denied("v.x", status)
    assert err.message == message and err.code == code
    assert err.status()["message"] == message


def test_calling_failed_text():
    err = admission.calling_failed("m.x", 'failed to call webhook: Post "https://a/b?timeout=10s": boom')
    assert err.code == 500 and err.reason == "InternalError"
    assert err.message == ('Internal error occurred: failed calling webhook "m.x": failed to call webhook: '
                           'Post "https://a/b?timeout=10s": boom')


URL_CASES = [
    ("url", {"clientConfig": {"url": "https://127.0.0.1:9443/jobs/mutate"}}, "https://127.0.0.1:9443/jobs/mutate"),
    ("service", {"clientConfig": {"service": {"name": "volcano-admission-service", "namespace": "volcano-system",
                                              "path": "/jobs/mutate"}}},
     "https://volcano-admission-service.volcano-system.svc:443/jobs/mutate"),
    ("service-port", {"clientConfig": {"service": {"name": "s", "namespace": "n", "port": 8443}}},
     "https://s.n.svc:8443"),
]


@pytest.mark.parametrize(("h", "url"), [c[1:] for c in URL_CASES], ids=[c[0] for c in URL_CASES])
def test_webhook_url(h, url):
    assert admission.webhook_url(h) == url


def test_sorted_webhooks_by_configuration_name_then_order():
    configs = [{"metadata": {"name": "b"}, "webhooks": [{"name": "b1"}, {"name": "b0"}]},
               {"metadata": {"name": "a"}, "webhooks": [{"name": "a1"}]}]
    assert [h["name"] for _, h in admission.sorted_webhooks(configs)] == ["a1", "b1", "b0"]
