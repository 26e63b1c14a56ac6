"""The resource registry: lookups by what users type, paths, duplicates."""

import pytest

from lahar.kube import errors, resources


@pytest.mark.parametrize(
    ("typed", "plural", "group"),
    [
        ("pods", "pods", ""),
        ("po", "pods", ""),
        ("Pod", "pods", ""),
        ("vcjob", "jobs", "batch.volcano.sh"),
        ("jobs.batch.volcano.sh", "jobs", "batch.volcano.sh"),
        ("jobs", "jobs", "batch"),
        ("q", "queues", "scheduling.volcano.sh"),
        ("pg", "podgroups", "scheduling.volcano.sh"),
        ("crd", "customresourcedefinitions", "apiextensions.k8s.io"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_lookup_resolves_what_users_type(typed: str, plural: str, group: str) -> None:
    rt = resources.in_tree().lookup(typed)
    assert rt is not None
    assert (rt.plural, rt.group) == (plural, group)


@pytest.mark.parametrize(
    ("typed", "namespace", "name", "sub", "path"),
    [
        ("pods", "ns1", "p", "status", "/api/v1/namespaces/ns1/pods/p/status"),
        ("pods", None, None, None, "/api/v1/pods"),
        ("queues", "ignored", "q1", None, "/apis/scheduling.volcano.sh/v1beta1/queues/q1"),
        ("vcjob", "default", None, None, "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"),
    ],
)
def test_paths(typed: str, namespace: str | None, name: str | None, sub: str | None, path: str) -> None:
    rt = resources.in_tree().lookup(typed)
    assert rt is not None
    assert rt.path(namespace, name, sub) == path


def test_duplicate_registration_raises() -> None:
    reg = resources.Registry.of(resources.core())
    pods = reg.get("", "v1", "pods")
    assert pods is not None
    reg.add(pods)  # the same type again is fine
    with pytest.raises(ValueError, match="already registered"):
        reg.add(resources.ResourceType(group="", version="v1", kind="Other", plural="pods", namespaced=True))


def test_every_in_tree_type_is_unique() -> None:
    reg = resources.in_tree()
    assert len(reg) == len(resources.core()) + len(resources.volcano()) + len(resources.koordinator())


@pytest.mark.parametrize(
    ("body", "code", "cls"),
    [
        ({"reason": "NotFound", "message": 'pods "x" not found'}, 404, errors.NotFound),
        ({"reason": "AlreadyExists", "message": "x"}, 409, errors.AlreadyExists),
        ({"reason": "Conflict", "message": "x"}, 409, errors.Conflict),
        ({"reason": "Expired", "message": "too old"}, 410, errors.Gone),
        ({}, 422, errors.Invalid),
        (None, 418, errors.ApiError),
    ],
)
def test_status_round_trip(body: dict | None, code: int, cls: type) -> None:
    err = errors.from_status(body, code=code)
    assert type(err) is cls
    assert err.status()["code"] == code
