"""webhooks.review: AdmissionReview parsing (v1, v1beta1, malformed bodies) and the response wire format."""

from __future__ import annotations

import base64
import copy
import json

import orjson
import pytest

from lahar.webhooks import review
from lahar.webhooks.review import Request, ReviewError, Verdict

JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
       "metadata": {"name": "j1", "namespace": "team-a"}, "spec": {"tasks": []}}


def kube_review(api_version: str = review.V1, **request_fields) -> dict:
    """An AdmissionReview shaped exactly as kube-apiserver sends it (CREATE of a Volcano Job)."""
    req = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
        "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
        "requestKind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
        "requestResource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
        "name": "j1", "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": copy.deepcopy(JOB), "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    req.update(request_fields)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": req}


def without(d: dict, *path: str) -> dict:
    d = copy.deepcopy(d)
    node = d
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return d


def with_value(d: dict, value, *path: str) -> dict:
    d = copy.deepcopy(d)
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return d


@pytest.mark.parametrize("api_version", [review.V1, review.V1BETA1], ids=["v1", "v1beta1"])
def test_parse_kube_review(api_version):
    parsed = review.parse(kube_review(api_version))
    assert parsed.api_version == api_version
    req = parsed.request
    assert (req.uid, req.operation, req.group, req.version, req.kind) == (
        "705ab4f5-6393-11e8-b7cc-42010a800002", "CREATE", "batch.volcano.sh", "v1alpha1", "Job")
    assert (req.resource, req.sub_resource, req.namespace, req.name) == ("jobs", "", "team-a", "j1")
    assert req.object == JOB and req.old_object is None
    assert req.user_info == {"username": "admin", "groups": ["system:masters"]}
    assert req.dry_run is False


OK_CASES = [
    ("update", dict(operation="UPDATE", oldObject=JOB), ("UPDATE", True, True)),
    ("delete-null-object", dict(operation="DELETE", object=None, oldObject=JOB), ("DELETE", False, True)),
    ("delete-no-old", dict(operation="DELETE", object=None, oldObject=None), ("DELETE", False, False)),
    ("connect", dict(operation="CONNECT", object={"kind": "PodExecOptions"}), ("CONNECT", True, False)),
    ("dry-run", dict(dryRun=True), ("CREATE", True, False)),
    ("generate-name", dict(name=""), ("CREATE", True, False)),
]


@pytest.mark.parametrize(("fields", "expected"), [c[1:] for c in OK_CASES], ids=[c[0] for c in OK_CASES])
def test_parse_operations(fields, expected):
    req = review.parse(kube_review(**fields)).request
    assert (req.operation, req.object is not None, req.old_object is not None) == expected


def test_parse_optional_fields_absent():
    body = kube_review()
    for key in ("name", "namespace", "userInfo", "dryRun", "oldObject", "options", "requestKind"):
        body = without(body, "request", key)
    body = without(body, "request", "kind", "group")
    req = review.parse(body).request
    assert (req.name, req.namespace, req.user_info, req.dry_run, req.group) == ("", "", {}, False, "")


def test_subresource():
    req = review.parse(kube_review(subResource="status")).request
    assert req.sub_resource == "status"


BAD = kube_review()
MALFORMED = [
    ("array", [1, 2], "request body must be an AdmissionReview object, got a JSON array"),
    ("string", "hi", "request body must be an AdmissionReview object, got a JSON string"),
    ("no-apiversion", without(BAD, "apiVersion"), "apiVersion is required"),
    ("wrong-apiversion", with_value(BAD, "admission.k8s.io/v2", "apiVersion"),
     "apiVersion 'admission.k8s.io/v2' is not supported, expected one of admission.k8s.io/v1, "
     "admission.k8s.io/v1beta1"),
    ("no-kind", without(BAD, "kind"), "kind is required"),
    ("wrong-kind", with_value(BAD, "Pod", "kind"), "kind must be AdmissionReview, got 'Pod'"),
    ("no-request", without(BAD, "request"), "request is required"),
    ("request-null", with_value(BAD, None, "request"), "request is required"),
    ("request-list", with_value(BAD, [], "request"), "request must be an object"),
    ("no-uid", without(BAD, "request", "uid"), "request.uid is required"),
    ("empty-uid", with_value(BAD, "", "request", "uid"), "request.uid is required"),
    ("uid-number", with_value(BAD, 7, "request", "uid"), "request.uid must be a string"),
    ("no-operation", without(BAD, "request", "operation"), "request.operation is required"),
    ("bad-operation", with_value(BAD, "PATCH", "request", "operation"),
     "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got 'PATCH'"),
    ("no-kind-gvk", without(BAD, "request", "kind"), "request.kind is required"),
    ("kind-string", with_value(BAD, "Job", "request", "kind"), "request.kind must be an object"),
    ("no-kind-kind", without(BAD, "request", "kind", "kind"), "request.kind.kind is required"),
    ("no-kind-version", without(BAD, "request", "kind", "version"), "request.kind.version is required"),
    ("no-resource", without(BAD, "request", "resource"), "request.resource is required"),
    ("no-resource-resource", without(BAD, "request", "resource", "resource"), "request.resource.resource is required"),
    ("resource-number", with_value(BAD, 1, "request", "resource", "resource"),
     "request.resource.resource must be a string"),
    ("object-list", with_value(BAD, [], "request", "object"), "request.object must be an object"),
    ("object-missing-on-create", with_value(BAD, None, "request", "object"), "request.object is required for CREATE"),
    ("old-object-string", with_value(BAD, "x", "request", "oldObject"), "request.oldObject must be an object"),
    ("update-without-old", with_value(BAD, "UPDATE", "request", "operation"),
     "request.oldObject is required for UPDATE"),
    ("userinfo-string", with_value(BAD, "admin", "request", "userInfo"), "request.userInfo must be an object"),
    ("dryrun-string", with_value(BAD, "true", "request", "dryRun"), "request.dryRun must be a boolean"),
    ("namespace-number", with_value(BAD, 3, "request", "namespace"), "request.namespace must be a string"),
]


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_parse_malformed(body, message):
    with pytest.raises(ReviewError) as info:
        review.parse(body)
    assert str(info.value) == message


WELL_FORMED = [
    ("create-v1", kube_review()),
    ("create-v1beta1", kube_review(review.V1BETA1)),
    ("update", kube_review(operation="UPDATE", oldObject=copy.deepcopy(JOB))),
    ("dry-run-subresource", kube_review(dryRun=True, subResource="status")),
    ("optional-fields-null", kube_review(name=None, namespace=None, userInfo=None, dryRun=None)),
    ("optional-fields-absent", without(without(without(kube_review(), "request", "name"), "request", "userInfo"),
                                       "request", "dryRun")),
    ("core-group-absent", without(without(kube_review(), "request", "kind", "group"), "request", "resource", "group")),
    ("delete", kube_review(operation="DELETE", object=None, oldObject=copy.deepcopy(JOB))),
    ("create-with-old-object", kube_review(oldObject=copy.deepcopy(JOB))),
]


@pytest.mark.parametrize("body", [c[1] for c in WELL_FORMED], ids=[c[0] for c in WELL_FORMED])
def test_parse_short_cut_builds_the_same_request(body, monkeypatch):
    fast = review.parse(body)
    monkeypatch.setattr(review, "_well_formed", lambda req: None)     # field-by-field checks only
    slow = review.parse(body)
    assert fast == slow and vars(fast.request) == vars(slow.request)


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_parse_short_cut_leaves_malformed_requests_to_the_checks(body, message):
    if message.startswith("request."):   # the envelope's own errors are checked before the short cut
        assert review._well_formed(body["request"]) is None


@pytest.mark.parametrize(("raw", "start"), [
    (b"", "request body is empty"),
    (b"{", "request body is not valid JSON: "),
    (b"\xff\xfe", "request body is not valid JSON: "),
    (b"null", "request body must be an AdmissionReview object, got a JSON null"),
    (b" " * (review.MAX_BODY_BYTES + 1), f"request body is {review.MAX_BODY_BYTES + 1} bytes, larger than the "
                                         f"{review.MAX_BODY_BYTES} bytes (3 MiB)"),
], ids=["empty", "truncated", "not-utf8", "null", "oversized"])
def test_decode_errors(raw, start):
    with pytest.raises(ReviewError) as info:
        review.decode(raw)
    assert str(info.value).startswith(start)


def test_decode_roundtrip():
    body = kube_review(review.V1BETA1)
    assert review.decode(orjson.dumps(body)) == review.parse(body)


def _patch(resp: dict) -> list:
    return json.loads(base64.b64decode(resp["response"]["patch"]))


RESPONSES = [
    ("allow", Verdict.allow(), {"uid": "u", "allowed": True}),
    ("allow-warnings", Verdict.allow(warnings=["w1", "w2"]), {"uid": "u", "allowed": True, "warnings": ["w1", "w2"]}),
    ("deny-plain", Verdict.deny("nope"), {"uid": "u", "allowed": False, "status": {"message": "nope"}}),
    ("deny-trimmed", Verdict.deny(" unable to find job queue: x;  "),
     {"uid": "u", "allowed": False, "status": {"message": "unable to find job queue: x;"}}),
    ("deny-code-reason", Verdict.deny("bad", code=400, reason="BadRequest", warnings=["w"]),
     {"uid": "u", "allowed": False, "status": {"message": "bad", "code": 400, "reason": "BadRequest"},
      "warnings": ["w"]}),
    ("deny-drops-patch", Verdict(False, message="no", patch=({"op": "remove", "path": "/x"},)),
     {"uid": "u", "allowed": False, "status": {"message": "no"}}),
]


@pytest.mark.parametrize(("verdict", "expected"), [c[1:] for c in RESPONSES], ids=[c[0] for c in RESPONSES])
def test_response_shapes(verdict, expected):
    out = review.response(review.V1, "u", verdict)
    assert out == {"apiVersion": review.V1, "kind": "AdmissionReview", "response": expected}


def test_response_patch_is_base64_jsonpatch():
    ops = [{"op": "add", "path": "/spec/queue", "value": "default"},
           {"op": "replace", "path": "/metadata/labels/a~1b", "value": "ü"}]
    out = review.response(review.V1BETA1, "u", Verdict.allow(patch=ops))
    assert out["apiVersion"] == review.V1BETA1
    assert out["response"]["patchType"] == "JSONPatch"
    assert _patch(out) == ops
    assert orjson.loads(review.response_bytes(review.V1BETA1, "u", Verdict.allow(patch=ops))) == out


@pytest.mark.parametrize(("segment", "escaped"), [
    ("plain", "plain"), ("volcano.sh/vgpu-number", "volcano.sh~1vgpu-number"), ("a~b", "a~0b"), ("~/", "~0~1"),
], ids=["plain", "slash", "tilde", "both"])
def test_escape(segment, escaped):
    assert review.escape(segment) == escaped


def test_request_for_and_to_review_roundtrip():
    req = review.request_for(JOB, resource="jobs", uid="abc")
    assert req == Request(uid="abc", operation="CREATE", group="batch.volcano.sh", version="v1alpha1", kind="Job",
                          resource="jobs", sub_resource="", namespace="team-a", name="j1", object=JOB,
                          old_object=None, user_info={}, dry_run=False, resource_group="batch.volcano.sh",
                          resource_version="v1alpha1")
    assert review.parse(review.to_review(req)).request == req
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "p-"}}
    delete = review.request_for(None, resource="pods", operation="DELETE", old_object=pod, namespace="ns")
    assert (delete.group, delete.version, delete.namespace, delete.name, delete.object) == ("", "v1", "ns", "", None)
    assert review.parse(review.to_review(delete, api_version=review.V1BETA1)).request == delete
