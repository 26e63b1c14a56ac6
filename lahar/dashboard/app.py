"""The dashboard's FastAPI app: the four pages (full documents, or `?fragment=1` for `<main>` only), `/events`
(server-sent events from `live.Hub`), the two static assets, and the access rules.

Access: every request but `/healthz` carries the token — once as `?token=` (answered with an HttpOnly, SameSite=Strict
cookie and a redirect that drops it from the address bar), then the cookie, or `Authorization: Bearer`. No CORS
headers are ever sent; a request whose Origin is another site, or whose Host is not the one served (DNS rebinding),
is refused. Part of `lahar.dashboard`; `lahar.commands.dashboard` runs it on uvicorn.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse

from lahar.dashboard import gpus, nodes, pages, views
from lahar.dashboard.live import Hub

__all__ = ["COOKIE", "create_app", "render"]

COOKIE = "lahar_dashboard"
ASSETS = {"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


def render(page: str, items: Callable[[str], list[dict[str, Any]]], *,
           pods_by_job: Callable[[], Mapping[tuple[str, str], Sequence[dict[str, Any]]]] | None = None,
           occupancy: Callable[[], nodes.Occupancy] | None = None,
           device_pods: Callable[[], Mapping[str, Sequence[dict[str, Any]]]] | None = None,
           history: Callable[[], Sequence[tuple[float, Mapping[str, float]]]] | None = None,
           webhook: Callable[[], tuple[list[views.PolicyCounter] | None, str]] | None = None) -> tuple[str, str]:
    """(title, `<main>` HTML) of one page from `items(kind)` — and, when given, the pods by job, the nodes'
    occupancy and the device-holding pods by node as kept from watch events (`live.Hub`), instead of regrouping
    every pod; `webhook` gives the webhook's policy counters and why they are missing (None: not configured);
    KeyError for a page that does not exist."""
    if page == "queues":
        return "Queues", pages.queues_page(views.queue_rows(items("queues"), items("podgroups"), pods=items("pods"),
                                                            cluster=nodes.totals(items("nodes"))),
                                           history() if history else ())
    if page == "jobs":
        return "Jobs", pages.jobs_page(views.job_rows(jobs=items("jobs"), podgroups=items("podgroups"),
                                                      pods=pods_by_job() if pods_by_job else items("pods"),
                                                      queues=items("queues"),
                                                      events=items("events"), details=views.DETAILS_PER_PHASE,
                                                      hypernodes=items("hypernodes")),
                                       limit=views.DETAILS_PER_PHASE)
    if page == "nodes":
        node_objs = items("nodes")
        cols, rows = nodes.node_rows(node_objs, occupancy() if occupancy else items("pods"))
        cards = gpus.gpu_rows(node_objs, device_pods() if device_pods else items("pods"))
        return "Nodes", pages.nodes_page(cols, rows, nodes.hypernode_rows(items("hypernodes"), rows, node_objs),
                                         cards)
    if page == "policies":
        counters, why = webhook() if webhook else (None, "")
        return "Policies", pages.policies_page(*views.policy_rows(items("configmaps"), items("events")),
                                               counters=counters, counters_missing=why)
    raise KeyError(page)


def _host_allowed(host: str, served: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return served in ("0.0.0.0", "::") or name in LOOPBACK | {served}


def create_app(hub: Hub, *, token: str, host: str = "127.0.0.1") -> FastAPI:
    """The app over a started `hub`; `token` is the one credential (compared in constant time)."""
    app = FastAPI(title="lahar dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.hub = hub

    def authorized(request: Request) -> bool:
        offered = [request.cookies.get(COOKIE, "")]
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            offered.append(auth[7:].strip())
        return any(o and hmac.compare_digest(o.encode(), token.encode()) for o in offered)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response = await _guarded(request, call_next)
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    async def _guarded(request: Request, call_next: Callable[[Request], Any]) -> Response:
        if not _host_allowed(request.headers.get("host", ""), host):
            return PlainTextResponse("421: this dashboard is not served under that host name", status_code=421)
        origin = request.headers.get("origin")
        if origin and origin not in (f"http://{request.headers.get('host', '')}", "null"):
            return PlainTextResponse("403: cross-origin requests are not allowed", status_code=403)
        if request.url.path == "/healthz":
            return await call_next(request)
        offered = request.query_params.get("token")
        if offered is not None:
            if not hmac.compare_digest(offered.encode(), token.encode()):
                return HTMLResponse(pages.error_page(401, "the token in the address is not this dashboard's"),
                                    status_code=401)
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        if not authorized(request):
            return HTMLResponse(pages.error_page(401, "open the address `lahar dashboard` (or `lahar up`) printed: "
                                                      "it carries the token once, then a cookie does"),
                                status_code=401)
        return await call_next(request)

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok"

    @app.get("/")
    def index() -> RedirectResponse:
        return RedirectResponse("/queues", status_code=303)

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in ASSETS:
            return PlainTextResponse(f"404: no asset {name!r}", status_code=404)
        body = resources.files("lahar.dashboard").joinpath("static", name).read_bytes()
        return Response(body, media_type=ASSETS[name])

    @app.get("/events")
    async def events(request: Request) -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            yield f"retry: 2000\nevent: hello\ndata: {json.dumps({'version': hub.version})}\n\n".encode()
            async for notice in hub.subscribe():
                if await request.is_disconnected():
                    return
                yield (f"event: changed\ndata: {json.dumps(notice)}\n\n" if notice else ": heartbeat\n\n").encode()

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    @app.get("/api/synced")
    def synced() -> dict[str, Any]:
        return {"version": hub.version, "synced": hub.synced(), "subscribers": hub.subscribers}

    def webhook() -> tuple[list[views.PolicyCounter] | None, str]:
        scrape = hub.webhook_metrics
        if scrape is None:
            return None, ""
        return scrape.counters, f"{scrape.url}: {scrape.error}" if scrape.error else ""

    @app.get("/{page}", response_class=HTMLResponse)
    def page(page: str, fragment: bool = False) -> HTMLResponse:
        try:
            title, main = render(page, hub.items, pods_by_job=hub.pods_by_job, occupancy=lambda: hub.occupancy,
                                 device_pods=hub.device_pods.snapshot,
                                 history=lambda: list(hub.history), webhook=webhook)
        except KeyError:
            return HTMLResponse(pages.error_page(404, f"no page {page!r}; the pages are queues, jobs, nodes and "
                                                      "policies"), status_code=404)
        return HTMLResponse(main if fragment else pages.layout(title=title, active=page, main=main))

    return app
