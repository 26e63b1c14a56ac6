"""Fuzz of the AdmissionReview decoder behind every webhook path, in process (the FastAPI app over static
look-ups). Invariant: every POST is answered with a 4xx Status or a well-formed AdmissionReview carrying the
request's uid, never a 5xx or an exception, and the app still answers /healthz afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import routes
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups

from ._strategies import SETTINGS, json_values, k8s_objects

PATHS = sorted({**routes.default_routes(), **routes.lahar_routes()})
_OPERATIONS = st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "", "create"])
_RESOURCES = st.fixed_dictionaries({"group": st.sampled_from(["", "batch.volcano.sh", "scheduling.volcano.sh"]),
                                    "version": st.sampled_from(["v1", "v1alpha1", "v1beta1"]),
                                    "resource": st.sampled_from(["pods", "jobs", "queues", "podgroups", "cronjobs",
                                                                 "configmaps", "x"])})


@st.composite
def reviews(draw: Any) -> Any:
    """Mostly well-shaped AdmissionReviews with hostile objects; sometimes any JSON at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    request = {"uid": draw(st.one_of(st.just("u-1"), json_values)), "operation": draw(_OPERATIONS),
               "kind": {"group": "", "version": "v1", "kind": draw(st.sampled_from(["Pod", "Job", "Queue"]))},
               "resource": draw(_RESOURCES), "namespace": draw(st.sampled_from(["default", "", "x y"])),
               "object": draw(k8s_objects)}
    if draw(st.booleans()):
        request["oldObject"] = draw(k8s_objects)
    if draw(st.booleans()):
        request["userInfo"] = draw(json_values)
    return {"apiVersion": draw(st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1"])),
            "kind": draw(st.sampled_from(["AdmissionReview", "Review"])), "request": request}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    with TestClient(app, raise_server_exceptions=True) as c:
        yield c


def _check(client: TestClient, path: str, body: bytes) -> None:
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, r.status_code, r.text[:500])
    if r.status_code == 200:
        answer = r.json()
        assert answer["kind"] == "AdmissionReview"
        assert isinstance(answer["response"]["allowed"], bool)


@settings(max_examples=60, **SETTINGS)
@given(path=st.sampled_from(PATHS), review=reviews())
def test_reviews(client: TestClient, path: str, review: Any) -> None:
    _check(client, path, json.dumps(review).encode())  # json: integers beyond 64 bits too


@settings(max_examples=60, **SETTINGS)
@given(path=st.sampled_from(PATHS), body=st.one_of(
    st.binary(max_size=200), st.integers(1, 1100).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 1100).map(lambda n: b'{"request":' * n + b"{}" + b"}" * n)))
def test_raw_bodies(client: TestClient, path: str, body: bytes) -> None:
    _check(client, path, body)


def test_still_answering(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200
