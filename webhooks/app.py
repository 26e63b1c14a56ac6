"""The admission HTTP app: FastAPI serving Volcano's webhook paths, `/healthz`, `/readyz` and `/metrics`.

`create_app(lookups=..., config=...)` is wired by `lahar webhook` (served by `webhooks.server` over HTTPS) and by
tests (Starlette's TestClient, overriding the `get_admission` dependency). Each POST reads the body (at most 3 MiB),
`review.decode`s it, runs `routes.admit` and answers with `review.response_bytes` (orjson). One dependency,
`get_admission`, carries the look-ups, configuration, route table, metrics and the AdmissionPolicies in force
(override it in tests); `update_admission(app, config=..., policies=...)` swaps them atomically (live reload).
Every review goes through `webhooks.policystage.after_rules` after the rules; `/metrics` appends the policy
counters (`policies.metrics.REGISTRY`: config reload failures, audits, policy decisions), summed over the worker
processes when `lahar webhook --workers N` runs several (`webhooks.shared_metrics`).

HTTP answers: 200 with an AdmissionReview for every well-formed review (denials included, handler crashes
included — see `webhooks.routes`); 400 with a JSON Status naming what is wrong for a body that is too large,
not JSON, or not an AdmissionReview; 404 for a path lahar does not serve; never a 500.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Depends, FastAPI
from fastapi import Request as HttpRequest
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from lahar.policies import metrics as policy_metrics
from lahar.webhooks import policystage, review, shared_metrics, watchdog
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.metrics import CONTENT_TYPE, Metrics
from lahar.webhooks.routes import Route, admit, default_routes, lahar_routes

__all__ = ["Admission", "create_app", "get_admission", "update_admission"]

log = logging.getLogger(__name__)
JSON = "application/json"


@dataclass(frozen=True)
class Admission:
    """What the admission endpoints work with: one dependency, so a request resolves one (cheap) `Depends`."""

    lookups: Lookups           # cluster state the handlers read (InformerLookups in the server)
    config: Any                # policies.admission.AdmissionConfig
    routes: Mapping[str, Route]
    metrics: Metrics
    policies: policystage.Policies = policystage.NO_POLICIES   # users' AdmissionPolicies in force
    audits: policystage.AuditSink | None = None                 # where Audit results go besides the counters


async def get_admission(request: HttpRequest) -> Admission:
    """The app's `Admission`; tests override it (`app.dependency_overrides[get_admission] = lambda: ...`)."""
    return request.app.state.admission


def _status(code: int, reason: str, message: str) -> Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}
    return Response(orjson.dumps(body), status_code=code, media_type=JSON)


async def _read_body(request: HttpRequest) -> bytes:
    """The body, refusing more than `review.MAX_BODY_BYTES` before reading it all (ReviewError)."""
    length = request.headers.get("content-length")
    limit = review.MAX_BODY_BYTES
    if length is not None and length.isdigit() and int(length) > limit:
        raise review.ReviewError(f"request body is {length} bytes, larger than the {limit} bytes (3 MiB) "
                                 "an API server sends")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise review.ReviewError(f"request body is larger than the {limit} bytes (3 MiB) an API server sends")
        chunks.append(chunk)
    return b"".join(chunks)


_SWAP = threading.Lock()


def update_admission(app: FastAPI, **changes: Any) -> Admission:
    """Swap fields of the app's `Admission` (`config=`, `policies=` a `policystage.Policies` or an iterable of
    compiled policies, `lookups=`): one attribute assignment, so a review sees the old or the new set, never a mix."""
    if "policies" in changes and not isinstance(changes["policies"], policystage.Policies):
        changes["policies"] = policystage.Policies.of(changes["policies"])
    with _SWAP:
        app.state.admission = dataclasses.replace(app.state.admission, **changes)
        return app.state.admission


class _AdmissionApp(FastAPI):
    """FastAPI with a front door for reviews: a POST to a path lahar serves goes straight to the review endpoint,
    past the middleware stack and the router (which tries every route in turn), about a fifth of a review's CPU in
    the app. Anything else, and every request once middleware is added, takes FastAPI's way."""

    review: Any = None      # the review endpoint, set by `create_app`
    http_error: Any = None  # its HTTPException handler

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (self.review is None or scope["type"] != "http" or scope.get("method") != "POST" or self.user_middleware
                or scope.get("path") not in self.state.admission.routes):
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        request = HttpRequest(scope, receive)
        try:
            response = await self.review(request)
        except StarletteHTTPException as exc:
            response = await self.http_error(request, exc)
        except Exception as exc:  # noqa: BLE001 - what ServerErrorMiddleware would answer, as a Status
            log.exception("webhooks: %s failed", scope.get("path"))
            response = _status(500, "InternalError", f"internal error: {type(exc).__name__}")
        await response(scope, receive, send)


def create_app(*, lookups: Lookups, config: Any, routes: Mapping[str, Route] | None = None,
               metrics: Metrics | None = None, policies: Any = None,
               audits: policystage.AuditSink | None = None) -> FastAPI:
    """The admission app over `lookups` and `config`; `routes` defaults to every Volcano path plus lahar's own
    (`/configmaps/validate`, `/policies/mutate|validate`); `policies` are compiled AdmissionPolicies."""
    app = _AdmissionApp(title="lahar admission webhooks", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.admission = Admission(lookups=lookups, config=config,
                                    routes=dict(routes) if routes is not None else {**default_routes(),
                                                                                    **lahar_routes()},
                                    metrics=metrics or Metrics(),
                                    policies=policies if isinstance(policies, policystage.Policies)
                                    else policystage.Policies.of(policies),
                                    audits=audits)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: HttpRequest, exc: StarletteHTTPException) -> Response:
        served = request.app.state.admission.routes
        path = request.url.path
        # the catch-all POST route makes every other method a 405; for a path lahar does not serve, say 404
        if exc.status_code == 404 or (exc.status_code == 405 and path not in served):
            return _status(404, "NotFound", f"no admission webhook at {path}; lahar serves {', '.join(sorted(served))}")
        if exc.status_code == 405:
            return _status(405, "MethodNotAllowed", f"{request.method} is not allowed on {request.url.path}; "
                                                    "admission reviews are POSTed")
        return _status(exc.status_code, "Error", str(exc.detail))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        return Response(b"ok", media_type="text/plain")

    @app.get("/readyz", include_in_schema=False)
    async def readyz(admission: Admission = Depends(get_admission)) -> Response:
        ready = getattr(admission.lookups, "ready", None)
        if ready is not None and not ready():
            return Response(b"not ready: cluster look-ups (informers) have not synced yet", status_code=503,
                            media_type="text/plain")
        return Response(b"ok", media_type="text/plain")

    def render_metrics() -> str:
        admission: Admission = app.state.admission
        return admission.metrics.render() + policy_metrics.REGISTRY.render()

    # under `lahar webhook --workers N`: every worker's counts in every scrape (webhooks.shared_metrics)
    watch_dir = os.environ.get(watchdog.WATCH_DIR_ENV)
    if watch_dir:
        app.state.snapshots = shared_metrics.Snapshots(watch_dir, render_metrics).start()

    @app.get("/metrics", include_in_schema=False)
    async def metrics_endpoint(admission: Admission = Depends(get_admission)) -> Response:
        text = admission.metrics.render() + policy_metrics.REGISTRY.render()
        if watch_dir:
            text = shared_metrics.merge([text, *shared_metrics.others(watch_dir, own_pid=os.getpid())])
        return Response(text.encode(), media_type=CONTENT_TYPE)

    async def review_endpoint(request: HttpRequest) -> Response:
        # a plain (Starlette) route in FastAPI's router: no dependency resolution or parameter validation per
        # review (a third of a review's CPU); `dependency_overrides[get_admission]` is honoured by hand
        start = time.perf_counter()
        override = request.app.dependency_overrides.get(get_admission)
        admission: Admission = override() if override is not None else request.app.state.admission
        path = request.scope["path"]
        metrics = admission.metrics
        route = admission.routes.get(path)
        if route is None:
            raise StarletteHTTPException(404)
        try:
            body = await _read_body(request)
        except review.ReviewError as e:
            metrics.observe(path, "invalid", time.perf_counter() - start)
            return _status(400, "BadRequest", str(e))
        # from here to the answer nothing awaits: one review at a time per process, timed by the supervisor's
        # watchdog (`webhooks.watchdog`) when `lahar webhook --workers N` runs one
        watchdog.CLOCK.begin()
        try:
            return _review(admission, route, path, body, start)
        finally:
            watchdog.CLOCK.end()

    def _review(admission: Admission, route: Route, path: str, raw: bytes, start: float) -> Response:
        metrics = admission.metrics
        try:
            parsed = review.decode(raw)
        except review.ReviewError as e:
            metrics.observe(path, "invalid", time.perf_counter() - start)
            return _status(400, "BadRequest", str(e))
        req = parsed.request
        verdict, label = admit(route, req, admission.lookups, admission.config)
        if label != "error":
            verdict, label = policystage.after_rules(route, req, verdict, label, admission)
        try:
            body = review.response_bytes(parsed.api_version, req.uid, verdict)
        except Exception as e:  # noqa: BLE001 - e.g. a patch value JSON cannot encode: a denial, not a 500
            log.exception("webhooks: %s could not encode its answer for uid %s", path, req.uid)
            label = "error"
            body = review.response_bytes(parsed.api_version, req.uid, review.Verdict.deny(
                f"internal error in {path}: cannot encode the response: {type(e).__name__}: {e}", code=500,
                reason="InternalError"))
        metrics.observe(path, label, time.perf_counter() - start)
        return Response(body, media_type=JSON)

    app.add_route("/{path:path}", review_endpoint, methods=["POST"], include_in_schema=False)
    app.review, app.http_error = review_endpoint, http_error
    return app
