"""devcluster's HTTPS front: kube-apiserver's REST protocol over `kube.apiserver.store.Store`, served by uvicorn.

The thin shell of devcluster: `ApiServer` is a plain ASGI app (routing, auth, content negotiation, watch streaming,
Status errors) that calls the synchronous store in a threadpool; `DevCluster` owns the data directory (PKI, token,
SQLite state, kubeconfig) and runs uvicorn with TLS in a background thread (`start`/`stop`) or in the foreground
(`serve_forever`). Decisions live in the store; discovery, OpenAPI and Table documents in their own modules;
the pure routing, body decoding and ASGI helpers in `devcluster.routing`, watch streaming in `devcluster.watchstream`.
"""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import uvicorn

from lahar.certs import serving
from lahar.devcluster import config, discovery, metricsapi, openapi, podlogs, requestmetrics, tables
from lahar.devcluster.routing import (
    _BUILTIN_GROUPS,
    _FIELD_VALIDATION,
    _PATCH_TYPES,
    CRD_GROUP,
    CRD_PLURAL,
    DEFAULT_WATCH_TIMEOUT,
    INT32_MAX,
    OPEN_PATHS,
    Obj,
    Receive,
    ResourcePath,
    Scope,
    Send,
    _accept_as,
    _bool,
    _decode_json,
    _decode_patch,
    _dumps,
    _not_found_path,
    _partial,
    _Query,
    _read_body,
    _Reply,
    _respond,
    _too_large,
    check_list_options,
    decode_body,
    delete_options,
    parse_resource_path,
    prepare_object,
    scale_replicas,
)
from lahar.devcluster.watchstream import WatchStream
from lahar.kube import errors, limits
from lahar.kube.resources import Registry, ResourceType, core

__all__ = ["ApiServer", "DevCluster", "ResourcePath", "parse_resource_path"]

log = logging.getLogger(__name__)


class ApiServer:
    """The ASGI app: kube-apiserver's REST surface over a `kube.apiserver.store.Store`."""

    def __init__(self, store: Any, registry: Registry, *, token: str | None = None, bookmark_interval: float = 5.0,
                 server_address: str = "", clock: Callable[[], dt.datetime] | None = None) -> None:
        self.store = store
        self.registry = registry
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.server_address = server_address
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self._openapi_cache: dict[str, tuple[tuple, Obj, str]] = {}
        self._watches: set[WatchStream] = set()
        self._watches_lock = threading.Lock()
        self._closing = False
        self.pending_checks: set[str] = set()
        self.requests = requestmetrics.RequestCounter()  # apiserver_request_total, served at /metrics

    # lifecycle ----------------------------------------------------------------------------------------------

    def close_watches(self) -> None:
        """End every open watch stream (called from any thread, e.g. on shutdown)."""
        self._closing = True
        with self._watches_lock:
            streams = list(self._watches)
        for s in streams:
            s.close()

    # entry ----------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        warnings: list[str] = []
        status = [500]

        async def counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self._dispatch(scope, receive, counted, warnings)
        except _Reply as r:
            await _respond(counted, r.status, r.body, content_type=r.content_type, warnings=warnings)
        except errors.ApiError as e:
            await _respond(counted, e.code, _dumps(e.status()), warnings=warnings)
        except Exception as e:  # noqa: BLE001 - every failure becomes a Status body, like kube-apiserver
            log.exception("internal error serving %s %s", scope.get("method"), scope.get("path"))
            err = errors.ApiError(f"Internal error occurred: {e}")
            await _respond(counted, 500, _dumps(err.status()))
        finally:
            self.requests.add(status[0], _request_labels(scope))

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        for key, value in scope.get("headers") or ():
            if key == b"authorization":
                scheme, _, credential = value.decode("latin-1").partition(" ")
                return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip(), self.token)
        return False

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send, warnings: list[str]) -> None:
        path: str = scope["path"]
        method: str = scope["method"]
        if not path.startswith(OPEN_PATHS) and not self._authorized(scope):
            raise errors.Unauthorized("Unauthorized")
        parts = [p for p in path.split("/") if p]
        query = _Query(scope.get("query_string") or b"")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > limits.MAX_BODY_BYTES:
            raise _too_large(limits.MAX_BODY_BYTES)
        if not parts:
            raise _Reply(200, _dumps({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3",
                                                "/readyz", "/version"]}))
        head = parts[0]
        if head == "readyz" and self.pending_checks:
            # kube-apiserver's shape: one line per failing check, then the verdict, status 500
            lines = "".join(f"[-]{name} failed: reason withheld\n" for name in sorted(self.pending_checks))
            raise _Reply(500, f"{lines}readyz check failed\n".encode(), b"text/plain; charset=utf-8")
        if head == "metrics" and len(parts) == 1:
            raise _Reply(200, self.requests.exposition(), b"text/plain; version=0.0.4; charset=utf-8")
        if head in ("healthz", "livez", "readyz"):
            raise _Reply(200, b"ok", b"text/plain; charset=utf-8")
        if head == "version" and len(parts) == 1:
            raise _Reply(200, _dumps(discovery.version_info()))
        if head == "openapi":
            raise _Reply(200, _dumps(await self._openapi(parts[1:], query)))
        if head == "api":
            if len(parts) == 1:
                raise _Reply(200, _dumps(discovery.api_versions(self.server_address)))
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                groups = discovery.api_group_list(self.registry)
                groups["groups"].append(metricsapi.group_doc())
                raise _Reply(200, _dumps(groups))
            if parts[1] == metricsapi.GROUP:
                await self._metrics(parts[2:], method, query)
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise _not_found_path()
                raise _Reply(200, _dumps(doc))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found_path()
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None:
                raise _not_found_path()
            raise _Reply(200, _dumps(doc))
        target = parse_resource_path(group, version, rest)
        if target is None:
            raise _not_found_path()
        rt = self.registry.get(group, version, target.plural)
        if rt is None or (target.namespace is not None and not rt.namespaced):
            raise _not_found_path()
        if target.subresource is not None and target.subresource not in rt.subresources:
            raise _not_found_path()
        await self._resource(rt, target, method, query, headers, scope, receive, send, warnings)

    # metrics.k8s.io (read-only, computed from the pods) --------------------------------------------------------

    async def _metrics(self, parts: list[str], method: str, query: _Query) -> None:
        if not parts:
            raise _Reply(200, _dumps(metricsapi.api_group()))
        if parts[0] != metricsapi.VERSION:
            raise _not_found_path()
        if len(parts) == 1:
            raise _Reply(200, _dumps(metricsapi.api_resource_list()))
        target = parse_resource_path(metricsapi.GROUP, metricsapi.VERSION, parts[1:])
        if (target is None or target.plural not in ("nodes", "pods") or target.subresource is not None
                or (target.plural == "nodes" and target.namespace is not None)):
            raise _not_found_path()
        if method != "GET" or target.watch or _bool(query.get("watch")):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        now = dt.datetime.now(dt.UTC)
        pods_rt, nodes_rt = self.registry.get("", "v1", "pods"), self.registry.get("", "v1", "nodes")
        selector = query.get("labelSelector") or None
        if target.plural == "nodes":
            nodes = ([await self._call(self.store.get, nodes_rt, None, target.name)] if target.name else
                     (await self._call(self.store.list, nodes_rt, None, label_selector=selector))["items"])
            pods = (await self._call(self.store.list, pods_rt, None))["items"]
            docs = [metricsapi.node_metrics(n, pods, now) for n in nodes]
            if target.name:
                raise _Reply(200, _dumps(docs[0]))
            raise _Reply(200, _dumps(metricsapi.metrics_list("NodeMetrics", docs)))
        if target.name:
            if target.namespace is None:
                raise _not_found_path()
            doc = metricsapi.pod_metrics(await self._call(self.store.get, pods_rt, target.namespace, target.name), now)
            if doc is None:
                raise errors.NotFound(f'podmetrics.metrics.k8s.io "{target.name}" not found',
                                      details={"name": target.name, "group": metricsapi.GROUP, "kind": "pods"})
            raise _Reply(200, _dumps(doc))
        listed = await self._call(self.store.list, pods_rt, target.namespace, label_selector=selector,
                                  field_selector=query.get("fieldSelector") or None)
        items = [d for p in listed["items"] if (d := metricsapi.pod_metrics(p, now)) is not None]
        raise _Reply(200, _dumps(metricsapi.metrics_list("PodMetrics", items)))

    # OpenAPI ------------------------------------------------------------------------------------------------

    async def _crds(self) -> list[Obj]:
        crd_rt = self.registry.get(CRD_GROUP, "v1", CRD_PLURAL)
        if crd_rt is None:
            return []
        listed = await self._call(self.store.list, crd_rt)
        return listed.get("items") or []

    async def _openapi(self, parts: list[str], query: _Query) -> Obj:
        if not parts or parts[0] != "v3":
            raise errors.NotFound("the server could not find the requested resource", details={})
        crds = await self._crds()
        docs: dict[str, tuple[Obj, str]] = {}
        crd_key = tuple(sorted((c["metadata"].get("name", ""), c["metadata"].get("resourceVersion", ""))
                               for c in crds))
        for group, versions in self.registry.groups().items():
            for version in versions:
                key = openapi.group_version_key(group, version)
                types_key = (tuple(self.registry.in_group_version(group, version)), crd_key)
                cached = self._openapi_cache.get(key)
                if cached is None or cached[0] != types_key:
                    doc = openapi.group_version_document(self.registry, group, version, crds)
                    if doc is None:
                        continue
                    cached = (types_key, doc, openapi.document_hash(doc))
                    self._openapi_cache[key] = cached
                docs[key] = (cached[1], cached[2])
        if len(parts) == 1:
            return openapi.index({k: h for k, (_, h) in docs.items()})
        key = "/".join(parts[1:])
        if key not in docs:
            raise errors.NotFound("the server could not find the requested resource", details={})
        return docs[key][0]

    # resources ----------------------------------------------------------------------------------------------

    @staticmethod
    async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def _request(self, query: _Query, warnings: list[str], *, dry_run_values: list[str] | None = None,
                 headers: dict[str, str] | None = None) -> Any:
        from lahar.kube import apply
        from lahar.kube.apiserver import store as kstore

        dry = query.all("dryRun") if dry_run_values is None else dry_run_values
        for value in dry:
            if value != "All":
                raise errors.BadRequest(f"Invalid dry run value: {value!r}; supported values: All")
        validation = query.get("fieldValidation") or "Warn"
        if validation not in _FIELD_VALIDATION:
            raise errors.BadRequest(f"fieldValidation must be one of {', '.join(_FIELD_VALIDATION)}, "
                                    f"got {validation!r}")
        manager = query.get("fieldManager") or apply.manager_from_user_agent((headers or {}).get("user-agent", ""))
        req = kstore.Request(user="admin", groups=("system:masters", "system:authenticated"),
                             dry_run=bool(dry), field_validation=validation, field_manager=manager or None,
                             force=_bool(query.get("force")))
        req.warnings = warnings
        return req

    async def _resource(self, rt: ResourceType, target: ResourcePath, method: str, query: _Query,
                        headers: dict[str, str], scope: Scope, receive: Receive, send: Send,
                        warnings: list[str]) -> None:
        ns, name, sub = target.namespace, target.name, target.subresource
        accept = headers.get("accept", "")
        if method == "GET":
            check_list_options(query.get("limit"), query.get("resourceVersion"))
        if method == "GET" and (target.watch or _bool(query.get("watch"))):
            await self._watch(rt, target, query, accept, scope, receive, send)
            return
        if name is None:
            if method == "GET":
                listed = await self._call(self.store.list, rt, ns, label_selector=query.get("labelSelector") or None,
                                          field_selector=query.get("fieldSelector") or None)
                raise _Reply(200, _dumps(await self._render_list(rt, listed, accept, query)))
            if method == "POST":
                if rt.namespaced and ns is None:
                    raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
                obj = decode_body(await _read_body(receive), headers)
                obj = prepare_object(rt, obj, ns)
                req = self._request(query, warnings, headers=headers)
                created = await self._call(self.store.create, rt, ns, obj, req=req)
                raise _Reply(201, _dumps(await self._render_one(rt, created, accept, query)))
            if method == "DELETE":
                await self._delete_collection(rt, ns, query, await _read_body(receive), headers, warnings)
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if rt.namespaced and ns is None:
            raise _not_found_path()
        if sub in ("binding", "eviction"):
            if method != "POST":
                raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
            body = decode_body(await _read_body(receive), headers)
            req = self._request(query, warnings)
            fn = self.store.bind if sub == "binding" else self.store.evict
            await self._call(fn, ns, name, body, req=req)
            raise _Reply(201, _dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "code": 201}))
        if sub == "log":
            if method != "GET":
                raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
            await podlogs.serve(lambda: self._call(self.store.get, rt, ns, name), query.get, receive, send,
                                closing=lambda: self._closing)
            return
        if sub == "scale":
            await self._scale(rt, ns, name, method, query, headers, receive, warnings)
        if method == "GET":
            obj = await self._call(self.store.get, rt, ns, name)
            raise _Reply(200, _dumps(await self._render_one(rt, obj, accept, query)))
        if method == "PUT":
            obj = decode_body(await _read_body(receive), headers)
            obj = prepare_object(rt, obj, ns)
            meta = obj.setdefault("metadata", {})
            if meta.get("name") and meta["name"] != name:
                raise errors.BadRequest(f"the name of the object ({meta['name']}) does not match the name on the "
                                        f"URL ({name})")
            meta["name"] = name
            req = self._request(query, warnings, headers=headers)
            updated = await self._call(self.store.update, rt, ns, name, obj, subresource=sub, req=req)
            raise _Reply(200, _dumps(await self._render_one(rt, updated, accept, query)))
        if method == "PATCH":
            content_type = headers.get("content-type", "").split(";")[0].strip()
            patch_type = _PATCH_TYPES.get(content_type)
            if patch_type is None:
                accepted = [t for t in _PATCH_TYPES if rt.group in ("", *_BUILTIN_GROUPS) or "strategic" not in t]
                raise errors.UnsupportedMediaType(
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{', '.join(accepted)}")
            patch = _decode_patch(await _read_body(receive), patch_type)
            req = self._request(query, warnings, headers=headers)
            if patch_type == "apply":  # apply names its manager; the user agent does not stand in
                req.field_manager = query.get("fieldManager") or None
            patched = await self._call(self.store.patch, rt, ns, name, patch, patch_type=patch_type,
                                       subresource=sub, req=req)
            raise _Reply(201 if req.created else 200, _dumps(await self._render_one(rt, patched, accept, query)))
        if method == "DELETE" and sub is None:
            opts = delete_options(query, await _read_body(receive), headers)
            req = self._request(query, warnings, dry_run_values=opts.pop("dry_run"))
            deleted = await self._call(self.store.delete, rt, ns, name, req=req, **opts)
            pending = bool((deleted.get("metadata") or {}).get("deletionTimestamp"))
            raise _Reply(202 if pending else 200, _dumps(deleted))
        raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")

    async def _delete_collection(self, rt: ResourceType, ns: str | None, query: _Query, body: bytes,
                                 headers: dict[str, str], warnings: list[str]) -> None:
        opts = delete_options(query, body, headers)
        req = self._request(query, warnings, dry_run_values=opts.pop("dry_run"))
        opts.pop("preconditions", None)
        listed = await self._call(self.store.list, rt, ns, label_selector=query.get("labelSelector") or None,
                                  field_selector=query.get("fieldSelector") or None)
        deleted = []
        for item in listed.get("items") or []:
            meta = item.get("metadata") or {}
            try:
                deleted.append(await self._call(self.store.delete, rt, meta.get("namespace") if rt.namespaced
                                                else None, meta.get("name"), req=req, **opts))
            except errors.NotFound:
                continue
        raise _Reply(200, _dumps({"apiVersion": rt.api_version, "kind": rt.list_kind,
                                  "metadata": {"resourceVersion": str(self.store.resource_version)},
                                  "items": deleted}))

    async def _scale(self, rt: ResourceType, ns: str | None, name: str, method: str, query: _Query,
                     headers: dict[str, str], receive: Receive, warnings: list[str]) -> None:
        def scale_of(obj: Obj) -> Obj:
            meta = obj.get("metadata") or {}
            selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                    "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                      "creationTimestamp") if k in meta},
                    "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
                    "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                               "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))}}

        if method == "GET":
            raise _Reply(200, _dumps(scale_of(await self._call(self.store.get, rt, ns, name))))
        body = await _read_body(receive)
        if method == "PUT":
            replicas = (decode_body(body, headers).get("spec") or {}).get("replicas")
        elif method == "PATCH":
            replicas = scale_replicas(_decode_json(body, "patch"))
        else:
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise errors.BadRequest(f"spec.replicas: Invalid value: {replicas!r}: must be an integer")
        if not 0 <= replicas <= INT32_MAX:
            raise errors.BadRequest(f"spec.replicas: Invalid value: {replicas}: must be between 0 and {INT32_MAX}")
        req = self._request(query, warnings, headers=headers)
        patched = await self._call(self.store.patch, rt, ns, name, {"spec": {"replicas": replicas}},
                                   patch_type="merge", req=req)
        raise _Reply(200, _dumps(scale_of(patched)))

    # rendering ----------------------------------------------------------------------------------------------

    async def _printer_columns(self, rt: ResourceType) -> list[Obj] | None:
        """A CR's additionalPrinterColumns ([] when none), or None for a built-in kind."""
        crd_rt = self.registry.get(CRD_GROUP, "v1", CRD_PLURAL)
        if crd_rt is None or rt.group in _BUILTIN_GROUPS:
            return None
        try:
            crd = await self._call(self.store.get, crd_rt, None, f"{rt.plural}.{rt.group}")
        except errors.NotFound:
            return None
        for v in (crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == rt.version:
                return list(v.get("additionalPrinterColumns") or [])
        return []

    async def _render_list(self, rt: ResourceType, listed: Obj, accept: str, query: _Query) -> Obj:
        wanted = _accept_as(accept)
        rv = (listed.get("metadata") or {}).get("resourceVersion", "")
        items = listed.get("items") or []
        if wanted == "Table":
            return tables.table(rt.group, rt.kind, items, now=self.clock(), resource_version=rv,
                                printer_columns=await self._printer_columns(rt),
                                include_object=query.get("includeObject") or "Metadata")
        if wanted in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": rv}, "items": [_partial(o) for o in items]}
        return listed

    async def _render_one(self, rt: ResourceType, obj: Obj, accept: str, query: _Query) -> Obj:
        wanted = _accept_as(accept)
        if wanted == "Table":
            rv = (obj.get("metadata") or {}).get("resourceVersion", "")
            return tables.table(rt.group, rt.kind, [obj], now=self.clock(), resource_version=rv,
                                printer_columns=await self._printer_columns(rt),
                                include_object=query.get("includeObject") or "Metadata")
        if wanted == "PartialObjectMetadata":
            return _partial(obj)
        return obj

    # watch --------------------------------------------------------------------------------------------------

    async def _watch(self, rt: ResourceType, target: ResourcePath, query: _Query, accept: str, scope: Scope,
                     receive: Receive, send: Send) -> None:
        field_selector = query.get("fieldSelector") or None
        if target.name is not None:
            by_name = f"metadata.name={target.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        try:
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        except ValueError:
            raise errors.BadRequest(f"invalid timeoutSeconds {query.get('timeoutSeconds')!r}") from None
        rv = query.get("resourceVersion") or None
        bookmarks = _bool(query.get("allowWatchBookmarks"))
        wanted = _accept_as(accept)
        printer_columns = await self._printer_columns(rt) if wanted == "Table" else None
        stream = WatchStream(self, rt, wanted, printer_columns, query.get("includeObject") or "Metadata",
                              bookmarks, timeout)
        try:
            stream.watch = await self._call(self.store.watch, rt, target.namespace, resource_version=rv,
                                            label_selector=query.get("labelSelector") or None,
                                            field_selector=field_selector, allow_bookmarks=bookmarks)
        except errors.Gone as e:
            stream.gone = e
        await stream.run(receive, send)


# --- the embedded cluster ------------------------------------------------------------------------------------

def _request_labels(scope: Scope) -> tuple[str, ...]:
    """`requestmetrics.request_labels` of an ASGI request (the query parsed only when there is one)."""
    raw = scope.get("query_string") or b""
    query = urllib.parse.parse_qsl(raw.decode("latin-1")) if raw else ()
    content_type = ""
    if scope["method"] == "PATCH":
        content_type = next((v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"content-type"), "")
    return requestmetrics.request_labels(scope["method"], scope["path"], query, content_type=content_type)


def _free_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


class DevCluster:
    """The embedded API server: `start()` serves in a background thread, `serve_forever()` in the foreground.

    `store` may be given (tests); otherwise a `kube.apiserver.store.Store` over `devcluster.storage.SQLiteBackend` in
    `<data_dir>/state.db`, with the webhook admission chain. `<data_dir>/kubeconfig` is written on every start.
    """

    def __init__(self, data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0, *,
                 store: Any = None, registry: Registry | None = None, admission: bool = True,
                 bookmark_interval: float = 5.0, tick_interval: float = 0.25,
                 extra_hosts: tuple[str, ...] = (), limits: serving.Limits = serving.DEFAULT_LIMITS) -> None:
        self.data = config.DataDir(data_dir)
        self.limits = limits
        self.host = host
        self.port = port
        self.registry = registry if registry is not None else getattr(store, "registry", None) or Registry.of(core())
        self.store = store
        self._own_store = store is None
        self._admission_enabled = admission
        self._admission: Any = None
        self.bookmark_interval = bookmark_interval
        self.tick_interval = tick_interval
        self.extra_hosts = extra_hosts
        self._ticker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.token = ""
        self.app: ApiServer | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.pending_checks: set[str] = set()  # /readyz fails while any is pending (e.g. the profile's nodes)

    # paths --------------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.data.kubeconfig

    @property
    def ca_path(self) -> Path:
        return self.data.ca_cert

    # lifecycle ----------------------------------------------------------------------------------------------

    def _open_store(self) -> None:
        if self.store is not None:
            return
        from lahar.devcluster.storage import SQLiteBackend
        from lahar.kube.apiserver import store as kstore

        backend = SQLiteBackend(self.data.database)
        self.store = kstore.Store(registry=self.registry, backend=backend, track_managed_fields=True)
        if self._admission_enabled:
            from lahar.devcluster.admission import WebhookAdmission

            self._admission = WebhookAdmission(self.store)
            self.store.admission = self._admission

    def _prepare(self) -> uvicorn.Server:
        self.data.create()
        config.ensure_pki(self.data, hosts=["localhost", "127.0.0.1", self.host, *self.extra_hosts])
        self.token = config.ensure_token(self.data)
        self._open_store()
        config.secure(self.data.root)
        self._socket = _free_socket(self.host, self.port)
        self.port = self._socket.getsockname()[1]
        self.app = ApiServer(self.store, self.registry, token=self.token, bookmark_interval=self.bookmark_interval,
                             server_address=f"{self.host}:{self.port}")
        self.app.pending_checks = self.pending_checks
        config.write_kubeconfig(self.data, server=self.url, token=self.token)
        uv_config = uvicorn.Config(self.app, ssl_certfile=str(self.data.serving_cert),
                                   ssl_keyfile=str(self.data.serving_key), log_level="warning", lifespan="off",
                                   log_config=None, access_log=False, timeout_graceful_shutdown=2, timeout_keep_alive=30,
                                   **serving.uvicorn_options("httptools", self.limits))
        return uvicorn.Server(uv_config)

    def start(self) -> DevCluster:
        """Serve in a background thread; returns once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("devcluster already started")
        self._server = self._prepare()
        openapi.warm_up()
        server, sock = self._server, self._socket
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]), name="devcluster",
                                        daemon=True)
        self._thread.start()
        self._start_ticker()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError("devcluster failed to start (see the log)")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Serve in the calling (main) thread until SIGINT/SIGTERM."""
        self._server = self._prepare()
        openapi.warm_up()
        self._start_ticker()
        try:
            self._server.run(sockets=[self._socket])
        except KeyboardInterrupt:  # uvicorn re-raises the signal it handled; that is our normal exit
            pass
        finally:
            self._stop_ticker()
            self._close_store()

    def _start_ticker(self) -> None:
        """Background work of the store (cascading deletion, namespace termination, GC) every `tick_interval`."""
        self._stopping.clear()
        store = self.store

        def run() -> None:
            while not self._stopping.wait(self.tick_interval):
                try:
                    store.tick()
                except Exception:  # noqa: BLE001 - keep ticking; the store logs its own state
                    log.exception("store tick failed")

        self._ticker = threading.Thread(target=run, name="devcluster-tick", daemon=True)
        self._ticker.start()

    def _stop_ticker(self) -> None:
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join(timeout=10)
            self._ticker = None

    def stop(self) -> None:
        """Stop serving, end watches, close the store (when devcluster opened it)."""
        if self.app is not None:
            self.app.close_watches()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._stop_ticker()
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._close_store()

    def _close_store(self) -> None:
        if self._admission is not None:
            self._admission.close()
            self._admission = None
        if self._own_store and self.store is not None:
            self.store.close()
            self.store = None

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
