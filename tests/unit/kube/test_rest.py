"""RestClient's pure edges: HTTP failures to `kube.errors`, patch content types (the wire is covered by conformance)."""

from __future__ import annotations

import orjson
import pytest
from kubernetes import client as k8s_client

from lahar.kube import errors, rest


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
                         "message": message, "details": {"name": "x", "kind": "pods"}})


@pytest.mark.parametrize(
    ("body", "code", "cls", "message"),
    [
        (_status(404, "NotFound", 'pods "x" not found'), 404, errors.NotFound, 'pods "x" not found'),
        (_status(409, "AlreadyExists", 'pods "x" already exists'), 409, errors.AlreadyExists,
         'pods "x" already exists'),
        (_status(410, "Expired", "too old resource version: 1 (5)"), 410, errors.Gone,
         "too old resource version: 1 (5)"),
        (_status(422, "Invalid", 'Pod "x" is invalid: spec: Required value'), 422, errors.Invalid,
         'Pod "x" is invalid: spec: Required value'),
        (b"<html>bad gateway</html>", 502, errors.ApiError, "<html>bad gateway</html>"),
        (b"", 503, errors.ServiceUnavailable, "Service Unavailable"),
        (b"{not json", 400, errors.BadRequest, "{not json"),
    ],
    ids=["not-found", "already-exists", "gone", "invalid", "html-502", "empty-503", "broken-json-400"],
)
def test_error_from_body(body: bytes, code: int, cls: type[errors.ApiError], message: str) -> None:
    e = rest._error_from_body(body, code, "Service Unavailable")
    assert type(e) is cls
    assert e.code == code
    assert e.message == message


def test_api_exception_without_status_is_unavailable() -> None:
    e = rest._from_api_exception(k8s_client.ApiException(status=0, reason="SSLError: certificate verify failed"))
    assert isinstance(e, errors.ServiceUnavailable)
    assert "certificate verify failed" in e.message


def test_api_exception_with_status_body() -> None:
    exc = k8s_client.ApiException(status=409, reason="Conflict")
    exc.body = _status(409, "Conflict", "Operation cannot be fulfilled")
    e = rest._from_api_exception(exc)
    assert isinstance(e, errors.Conflict) and e.message == "Operation cannot be fulfilled"


@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [("merge", "application/merge-patch+json"), ("json", "application/json-patch+json"),
     ("strategic", "application/strategic-merge-patch+json")],
    ids=["merge", "json", "strategic"],
)
def test_patch_content_types(patch_type: str, content_type: str) -> None:
    assert rest.PATCH_CONTENT_TYPES[patch_type] == content_type


def test_unknown_patch_type_is_refused_locally() -> None:
    from kubernetes.client import Configuration

    cfg = Configuration()
    cfg.host = "https://127.0.0.1:1"
    with rest.RestClient(cfg) as client:
        rt = next(iter(client.registry))
        with pytest.raises(errors.UnsupportedMediaType):
            client.patch(rt, "x", {}, patch_type="apply")  # type: ignore[arg-type]
        assert client.configuration.connection_pool_maxsize >= 32


@pytest.mark.parametrize(("seconds", "read"), [(None, None), (60, 90.0)], ids=["no-server-timeout", "timeout-60s"])
def test_watch_sends_a_connect_and_read_timeout_the_official_client_applies(seconds: int | None,
                                                                            read: float | None) -> None:
    """The official client honours a number or a (connect, read) pair and silently drops a urllib3.Timeout object:
    a watch must not end up without a read timeout."""
    import urllib3

    from lahar.kube.resources import in_tree

    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    client = rest.RestClient(cfg)
    seen: dict[str, object] = {}

    def request(method, url, **kw):  # noqa: ANN001, ANN003, ANN202 - the official client's call into urllib3
        seen["timeout"] = kw.get("timeout")
        return urllib3.HTTPResponse(body=b"", status=200, preload_content=False)

    client.api.rest_client.pool_manager.request = request
    client.watch(in_tree().lookup("pods"), namespace="ns", timeout_seconds=seconds)
    timeout = seen["timeout"]
    assert isinstance(timeout, urllib3.Timeout)
    assert (timeout.connect_timeout, timeout.read_timeout) == (rest._CONNECT_TIMEOUT, read)
