"""Table tests for the pure rules of the API-server engine (`kube.apiserver`): object names, a pod's deletion grace,
DELETE preconditions, PrepareForCreate, and what an update may change.

The store tests drive the same rules through `Store`; these pin each function on its own, as kube-apiserver's
registry strategy tests do.
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import errors, resources
from lahar.kube.apiserver import defaulting, gc, names, updates
from lahar.kube.resources import Registry

REG = Registry.of([*resources.core(), *resources.volcano()])
PODS = REG.get("", "v1", "pods")
CONFIGMAPS = REG.get("", "v1", "configmaps")
NAMESPACES = REG.get("", "v1", "namespaces")
ROLES = REG.get("rbac.authorization.k8s.io", "v1", "roles")
JOBS = REG.get("batch.volcano.sh", "v1alpha1", "jobs")
assert PODS and CONFIGMAPS and NAMESPACES and ROLES and JOBS


@pytest.mark.parametrize(("rt", "name", "want"), [
    (CONFIGMAPS, "a.b-c", []),
    (CONFIGMAPS, "A", ["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                       "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
    (NAMESPACES, "a.b", ["must not contain dots"]),
    (ROLES, "system:Admin", []),
    (ROLES, "..", ["may not be '..'"]),
    (ROLES, "a/b%c", ["may not contain '/'", "may not contain '%'"]),
], ids=["subdomain-ok", "subdomain-upper", "namespace-is-a-label", "rbac-colon-and-upper", "rbac-dotdot",
        "rbac-slash-percent"])
def test_name_errors(rt: Any, name: str, want: list[str]) -> None:
    assert names.name_errors(rt, name) == want


def test_generated_names_take_five_characters_of_kubes_alphabet() -> None:
    got = {names.generate("web-") for _ in range(50)}
    assert all(n.startswith("web-") and len(n) == 9 and not set(n[4:]) - set("bcdfghjklmnpqrstvwxz2456789")
               for n in got)
    assert len(got) > 1


def _pod(node: str | None = "n1", phase: str = "Running", grace: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(("pod", "option", "want"), [
    (_pod(node=None), None, 0),
    (_pod(node=None), 30, 0),
    (_pod(), None, 30),
    (_pod(grace=5), None, 5),
    (_pod(grace=-3), None, 0),
    (_pod(grace=5), 2, 2),
    (_pod(), -1, 0),
    (_pod(phase="Succeeded"), 10, 0),
    (_pod(phase="Failed"), None, 0),
], ids=["unbound", "unbound-with-option", "bound-default-30", "bound-own-grace", "negative-grace-is-0",
        "option-wins", "negative-option-is-0", "succeeded", "failed"])
def test_pod_grace(pod: dict[str, Any], option: int | None, want: int) -> None:
    assert defaulting.pod_grace(pod, option) == want


_CUR = {"metadata": {"name": "c", "uid": "u1", "resourceVersion": "7"}}


@pytest.mark.parametrize(("pre", "want"), [
    (None, None),
    ({}, None),
    ({"uid": "u1", "resourceVersion": "7"}, None),
    ({"uid": "u2"}, 'Operation cannot be fulfilled on ConfigMap "c": the UID in the precondition (u2) does not match '
                    "the UID in record (u1). The object might have been deleted and then recreated"),
    ({"resourceVersion": "6"}, 'Operation cannot be fulfilled on ConfigMap "c": the ResourceVersion in the '
                               "precondition (6) does not match the ResourceVersion in record (7). The object might "
                               "have been modified"),
], ids=["none", "empty", "both-hold", "uid-differs", "resource-version-differs"])
def test_delete_preconditions(pre: dict[str, str] | None, want: str | None) -> None:
    if want is None:
        gc.check_preconditions(CONFIGMAPS, "c", _CUR, pre)
        return
    with pytest.raises(errors.Conflict) as err:
        gc.check_preconditions(CONFIGMAPS, "c", _CUR, pre)
    assert str(err.value) == want


@pytest.mark.parametrize(("rt", "obj", "want"), [
    (NAMESPACES, {"metadata": {"name": "team"}, "status": {"phase": "Terminating"}},
     {"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
      "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
    (PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}, "status": {"x": 1}},
     {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {
         "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]},
      "status": {"phase": "Pending", "qosClass": "Guaranteed"}}),
    (JOBS, {"metadata": {"name": "j"}, "spec": {}, "status": {"state": {"phase": "Running"}}},
     {"metadata": {"name": "j"}, "spec": {}}),
    (CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"k": "v"}}, {"metadata": {"name": "c"}, "data": {"k": "v"}}),
], ids=["namespace-active-with-finalizer-and-label", "pod-pending-with-qos", "status-subresource-reset",
        "configmap-untouched"])
def test_prepare_create(rt: Any, obj: dict[str, Any], want: dict[str, Any]) -> None:
    defaulting.prepare_create(rt, obj)
    assert obj == want


def test_prepare_create_refuses_a_malformed_pod_quantity() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]}}
    with pytest.raises(errors.Invalid) as err:
        defaulting.prepare_create(PODS, pod)
    assert str(err.value).startswith('Pod "p" is invalid: spec.containers[*].resources: Invalid value: ')


_JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "j", "uid": "u", "resourceVersion": "3", "generation": 2, "finalizers": ["a"]},
        "spec": {"queue": "q"}, "status": {"state": {"phase": "Running"}}}


@pytest.mark.parametrize(("subresource", "body", "want_spec", "want_status", "want_finalizers"), [
    (None, {"metadata": {"name": "j", "uid": "other"}, "spec": {"queue": "r"}, "status": {"state": {}}},
     {"queue": "r"}, {"state": {"phase": "Running"}}, None),
    ("status", {"metadata": {"name": "j"}, "spec": {"queue": "r"}, "status": {"state": {"phase": "Completed"}}},
     {"queue": "q"}, {"state": {"phase": "Completed"}}, ["a"]),
    ("status", {"metadata": {"name": "j"}, "spec": {"queue": "r"}}, {"queue": "q"}, None, ["a"]),
], ids=["main-resource-keeps-status", "status-keeps-spec", "status-removed"])
def test_prepare_update(subresource: str | None, body: dict[str, Any], want_spec: dict[str, Any],
                        want_status: dict[str, Any] | None, want_finalizers: list[str] | None) -> None:
    new = updates.prepare_update(JOBS, _JOB, body, subresource)
    assert new["spec"] == want_spec
    assert new.get("status") == want_status
    assert new["metadata"].get("finalizers") == want_finalizers
    assert {k: new["metadata"][k] for k in ("uid", "resourceVersion", "generation")} == {
        "uid": "u", "resourceVersion": "3", "generation": 2}
    assert (new["apiVersion"], new["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")


def test_the_finalize_subresource_changes_only_spec_finalizers() -> None:
    ns = {"metadata": {"name": "team", "uid": "u"}, "spec": {"finalizers": ["kubernetes", "x"]},
          "status": {"phase": "Terminating"}}
    new = updates.prepare_update(NAMESPACES, ns, {"metadata": {"name": "team"}, "spec": {"finalizers": ["x"]},
                                                  "status": {"phase": "Active"}}, "finalize")
    assert new["spec"] == {"finalizers": ["x"]} and new["status"] == {"phase": "Terminating"}


@pytest.mark.parametrize(("rt", "cur", "new", "want"), [
    (CONFIGMAPS, {"metadata": {"name": "c", "deletionTimestamp": "t", "finalizers": ["a"]}},
     {"metadata": {"name": "c", "finalizers": ["a", "b"]}},
     'ConfigMap "c" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is '
     'being deleted, found new finalizers []string{"b"}'),
    (CONFIGMAPS, {"metadata": {"name": "c", "deletionTimestamp": "t", "finalizers": ["a", "b"]}},
     {"metadata": {"name": "c", "finalizers": ["b"]}}, None),
    (CONFIGMAPS, {"metadata": {"name": "c"}}, {"metadata": {"name": "c", "finalizers": ["b"]}}, None),
    (PODS, {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}}, {"metadata": {"name": "p"}, "spec": {}},
     'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than'),
    (PODS, {"metadata": {"name": "p"}, "spec": {}}, {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}}, None),
], ids=["finalizer-added-while-deleting", "finalizer-removed-while-deleting", "finalizer-added-before-deletion",
        "bound-pod-moved", "unbound-pod-given-a-node"])
def test_validate_update(rt: Any, cur: dict[str, Any], new: dict[str, Any], want: str | None) -> None:
    if want is None:
        updates.validate_update(rt, cur, new)
        return
    with pytest.raises(errors.Invalid) as err:
        updates.validate_update(rt, cur, new)
    assert str(err.value).startswith(want)
