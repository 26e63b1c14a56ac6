"""The dashboard app (`lahar.dashboard.app`) over an in-memory cluster: the token and its cookie, no cross-origin
access, the pages and fragments, the assets as package data, and the hub's fan-out (one watch per kind, a burst of
changes is one notice)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lahar.dashboard.app import COOKIE, create_app
from lahar.dashboard.live import KINDS, Hub
from lahar.kube.apiserver.memory import MemoryClient
from tests.builders import node, queue
from tests.support import wait_for

REPO = Path(__file__).resolve().parents[3]
TOKEN = "s3cret-token"


@pytest.fixture
def hub() -> Iterator[Hub]:
    client = MemoryClient.with_crds()
    client.create(client.registry.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("research").obj)
    h = Hub(client).start()
    assert h.wait_for_sync(10)
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture
def web(hub: Hub) -> TestClient:
    return TestClient(create_app(hub, token=TOKEN), base_url="http://127.0.0.1:8470", follow_redirects=False)


def test_without_the_token_every_page_is_refused(web: TestClient) -> None:
    for path in ("/queues", "/jobs", "/events", "/static/dashboard.css", "/api/synced"):
        r = web.get(path)
        assert r.status_code == 401, path
    assert web.get("/healthz").text == "ok"
    assert web.get("/queues?token=wrong").status_code == 401
    assert web.get("/queues", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_the_token_once_becomes_a_strict_httponly_cookie(web: TestClient) -> None:
    r = web.get("/jobs?token=" + TOKEN + "&fragment=1")
    assert r.status_code == 303 and r.headers["location"] == "/jobs?fragment=1"
    cookie = r.headers["set-cookie"]
    assert f"{COOKIE}={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = web.get("/queues")  # the client keeps the cookie
    assert page.status_code == 200 and 'data-queue="research"' in page.text
    fresh = TestClient(web.app, base_url="http://127.0.0.1:8470")
    assert fresh.get("/queues", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_no_cross_origin_access(web: TestClient) -> None:
    web.cookies.set(COOKIE, TOKEN)
    ok = web.get("/queues", headers={"Origin": "http://127.0.0.1:8470"})
    assert ok.status_code == 200 and "access-control-allow-origin" not in ok.headers
    assert web.get("/queues", headers={"Origin": "https://evil.example"}).status_code == 403
    assert web.options("/queues", headers={"Origin": "https://evil.example",
                                           "Access-Control-Request-Method": "GET"}).status_code == 403
    assert web.get("/queues", headers={"Host": "evil.example:8470"}).status_code == 421  # DNS rebinding
    assert "frame-ancestors 'none'" in ok.headers["content-security-policy"]
    assert ok.headers["referrer-policy"] == "no-referrer"


def test_pages_fragments_and_assets(web: TestClient) -> None:
    web.cookies.set(COOKIE, TOKEN)
    assert web.get("/").headers["location"] == "/queues"
    for page in ("queues", "jobs", "nodes", "policies"):
        full = web.get(f"/{page}")
        assert full.status_code == 200 and full.text.startswith("<!doctype html>")
        assert 'href="/static/dashboard.css"' in full.text and f'data-page="{page}"' in full.text
        fragment = web.get(f"/{page}?fragment=1").text
        assert not fragment.startswith("<!doctype") and fragment.startswith("<h1>")
    assert web.get("/nope").status_code == 404
    bad = web.get("/jobs?fragment=perhaps")
    assert bad.status_code == 422 and "fragment" in bad.text  # a 4xx naming the parameter, not a 5xx
    css, js = web.get("/static/dashboard.css"), web.get("/static/dashboard.js")
    assert css.headers["content-type"].startswith("text/css") and "heat" in css.text
    assert "EventSource" in js.text
    assert web.get("/static/..%2Fapp.py").status_code == 404
    assert "http" not in css.text + js.text.replace("https", "")  # offline: no CDN


def test_the_assets_are_package_data() -> None:
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert set(data["lahar.dashboard"]) == {"static/*.css", "static/*.js"}
    assert {p.name for p in (REPO / "lahar" / "dashboard" / "static").iterdir()} == {"dashboard.css", "dashboard.js"}


def test_one_informer_per_kind_whatever_the_number_of_browsers(hub: Hub) -> None:
    assert set(hub.informers) == {k[0] for k in KINDS}
    assert len(hub.factory.informers()) == len(KINDS)


def test_the_hub_keeps_pods_by_job_and_occupancy_from_events(hub: Hub) -> None:
    from tests.builders import pod

    client = hub.client
    pods_rt = client.registry.get("", "v1", "pods")
    client.create(client.registry.get("", "v1", "nodes"), node("n1").alloc("8", "8Gi").obj)
    for i in range(3):
        client.create(pods_rt, pod(f"j-w-{i}", "default").label(**{"volcano.sh/job-name": "j"}).req(cpu="1")
                      .on("n1").obj)
    wait_for("the pods in the hub", lambda: len(hub.items("pods")) == 3, timeout=10)
    assert [p["metadata"]["name"] for p in hub.pods_by_job()[("default", "j")]] == ["j-w-0", "j-w-1", "j-w-2"]
    assert hub.pods_by_job().get(("default", "other")) is None
    assert hub.occupancy.snapshot()[1] == {"n1": 3}
    client.delete(pods_rt, "j-w-0", namespace="default", grace_period_seconds=0)
    wait_for("the delete in the hub", lambda: hub.occupancy.snapshot()[1] == {"n1": 2}, timeout=10)


def test_the_hub_samples_queue_shares_for_the_last_hour() -> None:
    from lahar.dashboard import live

    client = MemoryClient.with_crds()
    queues_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")
    stored = client.create(queues_rt, queue("q").obj)
    client.update_status(queues_rt, {**stored, "status": {"allocated": {"cpu": "2"}}})  # as the scheduler writes it
    client.create(client.registry.get("", "v1", "nodes"), node("n1").alloc("8", "8Gi").obj)
    now = iter(float(t) for t in range(0, 10_000, 60))
    h = Hub(client, sample_every=None, clock=lambda: next(now)).start()
    try:
        assert h.wait_for_sync(10)
        wait_for("the queue's status and the node in the hub", lambda: h.items("nodes") and any(
            (q.get("status") or {}).get("allocated") for q in h.items("queues")), timeout=10)
        for _ in range(live.HISTORY_POINTS + 5):
            h.sample()
        assert len(h.history) == live.HISTORY_POINTS and h.history[-1][1] == {"q": 0.25}
        web = TestClient(create_app(h, token=TOKEN), base_url="http://127.0.0.1:8470")
        assert "<svg" in web.get("/queues", headers={"Authorization": f"Bearer {TOKEN}"}).text
    finally:
        h.stop()


def test_a_burst_of_changes_is_one_notice_per_subscriber(hub: Hub) -> None:
    client = hub.client
    rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")

    async def run() -> list[dict]:
        streams = [hub.subscribe(interval=0.3, heartbeat=5), hub.subscribe(interval=0.3, heartbeat=5)]
        firsts = [asyncio.ensure_future(s.__anext__()) for s in streams]
        await asyncio.sleep(0.05)
        for i in range(20):
            client.create(rt, queue(f"q{i}").obj)
        notices = await asyncio.wait_for(asyncio.gather(*firsts), 5)
        for s in streams:
            await s.aclose()
        return notices

    notices = asyncio.run(run())
    assert [n["kinds"] for n in notices] == [["queues"], ["queues"]]
    assert hub.subscribers == 0
