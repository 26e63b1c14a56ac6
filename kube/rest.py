"""The real cluster client: `ClusterClient` over the official `kubernetes` client's transport, objects as plain dicts.

Sits between every lahar process and a real cluster (or devcluster). Generic for any `ResourceType`: paths come
from the registry, bodies are parsed with orjson, HTTP failures become `kube.errors` via `errors.from_status`.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s_client

from lahar.kube import errors
from lahar.kube.client import Obj, PatchType, WatchEvent, namespace_for
from lahar.kube.resources import Registry, ResourceType, in_tree

__all__ = ["PATCH_CONTENT_TYPES", "RestClient", "RestWatch"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_JSON = "application/json"
_DEFAULT_POOL = 32
_CONNECT_TIMEOUT = 10.0
_WATCH_SLACK = 30.0  # extra read time beyond the server-side timeoutSeconds before giving up on a watch


def _error_from_body(data: bytes, code: int, reason: str | None = None) -> errors.ApiError:
    body: Any = None
    if data:
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            body = None
    if not isinstance(body, dict) or body.get("kind") != "Status":
        text = data.decode("utf-8", "replace").strip() if data else ""
        body = {"message": text or reason or f"HTTP {code}"}
    return errors.from_status(body, code=code)


def _from_api_exception(e: k8s_client.ApiException) -> errors.ApiError:
    """The typed error for an `ApiException` raised inside the official client (TLS failures have status 0)."""
    raw = e.body if isinstance(e.body, bytes | bytearray) else (e.body or "").encode()
    if e.status:
        return _error_from_body(bytes(raw), e.status, e.reason)
    return errors.ServiceUnavailable(f"request failed: {e.reason}")


def _with_type(obj: Obj, rt: ResourceType) -> Obj:
    obj.setdefault("apiVersion", rt.api_version)
    obj.setdefault("kind", rt.kind)
    return obj


class RestWatch:
    """One streaming watch response read line by line; `stop()` shuts the socket so a blocked `next()` returns."""

    def __init__(self, response: urllib3.BaseHTTPResponse, rt: ResourceType) -> None:
        self._response = response
        self._rt = rt
        self._lock = threading.Lock()
        self._stopped = False
        self._closed = False
        self._reading = False
        self._buffer = b""  # the last line, while its newline has not come
        self._lines: collections.deque[bytes] = collections.deque()
        self._chunks = self._chunk_iter()

    def _chunk_iter(self) -> Iterator[bytes]:
        resp = self._response
        if getattr(resp, "chunked", False):
            yield from resp.stream(amt=None, decode_content=True)
            return
        while True:
            data = resp.read1(65536)
            if not data:
                return
            yield data

    def __iter__(self) -> RestWatch:
        return self

    def _next_line(self) -> bytes | None:
        # a chunk may carry hundreds of events: it is split once, not sliced line by line (each slice copied the
        # rest of the buffer, quadratic in the chunk's size)
        while True:
            while self._lines:
                line = self._lines.popleft()
                if line.strip():
                    return line
            chunk = next(self._chunks, None)
            if chunk is None:
                line, self._buffer = self._buffer, b""
                return line if line.strip() else None
            *complete, self._buffer = (self._buffer + chunk).split(b"\n")
            self._lines.extend(complete)

    def __next__(self) -> WatchEvent:
        with self._lock:
            if self._stopped or self._closed:
                self._close_locked()
                raise StopIteration
            self._reading = True
        try:
            line = self._next_line()
        except Exception as e:
            with self._lock:
                self._reading = False
                stopped = self._stopped
                self._close_locked()
            if stopped:
                raise StopIteration from None
            raise errors.ServiceUnavailable(f"watch stream broke: {e}") from e
        with self._lock:
            self._reading = False
            if line is None or self._stopped:
                self._close_locked()
                raise StopIteration
        event = orjson.loads(line)
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            self.stop()
            raise errors.from_status(obj, code=int(obj.get("code") or 500))
        return {"type": kind, "object": _with_type(obj, self._rt)}

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # the connection is being torn down either way
            self._response.close()

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            reading = self._reading
            if not reading:
                self._close_locked()
        if reading:
            with contextlib.suppress(Exception):
                self._response.shutdown()  # unblocks the reader thread, which then closes

    def __enter__(self) -> RestWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serialize_refresh(configuration: k8s_client.Configuration) -> None:
    """The kubeconfig and in-cluster loaders install a `refresh_api_key_hook` that runs before every request and
    rewrites the shared configuration (token, host, certificate files), re-running an exec plugin or re-reading the
    token file when it expired (`kube.kubeconfig.load` keeps it only when the credentials can change). Requests go
    out from many threads at once (a Job's pods are created side by side): one refresh at a time, so an expired
    token is renewed once and never half-written."""
    hook = configuration.refresh_api_key_hook
    if hook is None or getattr(hook, "_lahar_serialized", False):
        return
    lock = threading.Lock()

    def refresh(cfg: k8s_client.Configuration) -> None:
        with lock:
            hook(cfg)

    refresh._lahar_serialized = True  # type: ignore[attr-defined]
    configuration.refresh_api_key_hook = refresh


class RestClient:
    """`ClusterClient` over HTTP(S): one official `ApiClient` (thread-safe urllib3 pool) shared by all threads."""

    def __init__(self, configuration: k8s_client.Configuration | None = None, *, registry: Registry | None = None,
                 pool_size: int = _DEFAULT_POOL, request_timeout: float | None = 60.0) -> None:
        if configuration is None:
            from lahar.kube import kubeconfig

            configuration = kubeconfig.load()
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, pool_size)
        _serialize_refresh(configuration)
        self.configuration = configuration
        self.api = k8s_client.ApiClient(configuration)
        self.api.user_agent = "lahar/0.1 (kubernetes-python)"
        self.registry = registry if registry is not None else in_tree()
        self._timeout = request_timeout

    # -- transport ---------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None, body: Any = None,
              content_type: str = _JSON, timeout: Any = None, stream: bool = False) -> Any:
        headers = {"Accept": _JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        query = [(k, v) for k, v in (query or []) if v is not None]
        method, url, headers, _, _ = self.api.param_serialize(method, path, query_params=query or None,
                                                              header_params=headers, auth_settings=["BearerToken"])
        try:
            resp = self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=timeout if timeout is not None else self._timeout)
        except k8s_client.ApiException as e:
            raise _from_api_exception(e) from e
        except urllib3.exceptions.HTTPError as e:
            raise errors.ServiceUnavailable(f"cannot reach {self.configuration.host}: {e}") from e
        if not 200 <= resp.status <= 299:
            data = resp.read()
            raise _error_from_body(data, resp.status, resp.reason)
        if stream:
            return resp.response
        data = resp.read()
        return orjson.loads(data) if data else {}

    _ns = staticmethod(namespace_for)

    # -- ClusterClient -----------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, name: str, *, namespace: str | None = None) -> Obj:
        return _with_type(self._call("GET", rt.path(self._ns(rt, namespace), name)), rt)

    def list(self, rt: ResourceType, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> Obj:
        ns = namespace if rt.namespaced else None
        out = self._call("GET", rt.path(ns), query=[("labelSelector", label_selector or None),
                                                    ("fieldSelector", field_selector or None)])
        out.setdefault("apiVersion", rt.api_version)
        out.setdefault("kind", rt.list_kind)
        out["items"] = [_with_type(item, rt) for item in out.get("items") or []]
        out.setdefault("metadata", {})
        return out

    def watch(self, rt: ResourceType, *, namespace: str | None = None, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              allow_bookmarks: bool = True, timeout_seconds: float | None = None) -> RestWatch:
        ns = namespace if rt.namespaced else None
        query: list[tuple[str, Any]] = [("watch", "true"), ("resourceVersion", resource_version),
                                        ("labelSelector", label_selector or None),
                                        ("fieldSelector", field_selector or None)]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        read_timeout = None
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", max(1, int(timeout_seconds))))
            read_timeout = float(timeout_seconds) + _WATCH_SLACK
        # a (connect, read) pair: the official client turns it into urllib3's Timeout (a Timeout object it ignores)
        resp = self._call("GET", rt.path(ns), query=query, stream=True, timeout=(_CONNECT_TIMEOUT, read_timeout))
        return RestWatch(resp, rt)

    def create(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None, dry_run: bool = False) -> Obj:
        ns = self._ns(rt, namespace, obj)
        body = _with_type(dict(obj), rt)
        return _with_type(self._call("POST", rt.path(ns), body=body,
                                     query=[("dryRun", "All" if dry_run else None)]), rt)

    def _put(self, rt: ResourceType, obj: Obj, namespace: str | None, subresource: str | None) -> Obj:
        ns = self._ns(rt, namespace, obj)
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise errors.Invalid(f"{rt.kind} is invalid: metadata.name: Required value: name is required")
        body = _with_type(dict(obj), rt)
        return _with_type(self._call("PUT", rt.path(ns, name, subresource), body=body), rt)

    def update(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        return self._put(rt, obj, namespace, None)

    def update_status(self, rt: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        return self._put(rt, obj, namespace, "status")

    def patch(self, rt: ResourceType, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: PatchType = "merge", subresource: str | None = None) -> Obj:
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise errors.UnsupportedMediaType(f"the body of the request was in an unknown format - "
                                              f"accepted media types include: {', '.join(PATCH_CONTENT_TYPES.values())}"
                                              ) from None
        path = rt.path(self._ns(rt, namespace), name, subresource)
        return _with_type(self._call("PATCH", path, body=patch, content_type=content_type), rt)

    def delete(self, rt: ResourceType, name: str, *, namespace: str | None = None,
               propagation_policy: str | None = None, preconditions: dict[str, str] | None = None,
               grace_period_seconds: int | None = None) -> Obj:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = int(grace_period_seconds)
        out = self._call("DELETE", rt.path(self._ns(rt, namespace), name), body=options)
        return out if out.get("kind") == "Status" else _with_type(out, rt)

    def bind(self, *, namespace: str, name: str, node_name: str, annotations: dict[str, str] | None = None) -> None:
        meta: Obj = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        pods = self._pods()
        self._call("POST", pods.path(namespace, name, "binding"), body=binding)

    def evict(self, *, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        eviction: Obj = {"apiVersion": "policy/v1", "kind": "Eviction",
                         "metadata": {"name": name, "namespace": namespace}}
        if grace_period_seconds is not None:
            eviction["deleteOptions"] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                         "gracePeriodSeconds": int(grace_period_seconds)}
        self._call("POST", self._pods().path(namespace, name, "eviction"), body=eviction)

    def _pods(self) -> ResourceType:
        rt = self.registry.get("", "v1", "pods")
        if rt is None:
            raise errors.NotFound('the server could not find the requested resource (pods)')
        return rt

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
