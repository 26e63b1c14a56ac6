"""webhooks.app, routes and metrics: routing with overridden dependencies (TestClient), HTTP errors (400/404/405,
never 500), handler crashes as denials, the chain `lahar admit` runs, and the Prometheus exposition."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import metrics as metrics_mod
from lahar.webhooks import review, routes
from lahar.webhooks.app import Admission, create_app, get_admission
from lahar.webhooks.lookups import StaticLookups
from lahar.webhooks.metrics import Metrics
from lahar.webhooks.review import Verdict
from lahar.webhooks.routes import Route
from tests.builders import vcjob

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
PODS = ("", "v1", "pods")


def job(name: str = "j1", **spec) -> dict:
    return vcjob(name, "team-a").spec(**spec).build()


def pod(name: str = "p1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}


def body(obj: dict, *, resource: str = "jobs", operation: str = "CREATE", old: dict | None = None,
         api_version: str = review.V1, uid: str = "uid-1") -> dict:
    req = review.request_for(obj, resource=resource, operation=operation, old_object=old, uid=uid)
    return review.to_review(req, api_version=api_version)


# -- handlers for a test route table -------------------------------------------------------------------------------------


def set_queue(req, lookups, config):
    if req.operation != "CREATE":
        return Verdict.deny("expect operation to be 'CREATE' ")
    if "queue" in req.object["spec"]:
        return Verdict.allow()
    return Verdict.allow(patch=[{"op": "add", "path": "/spec/queue", "value": config["default_queue"]}],
                         warnings=["queue defaulted"])


def set_retry(req, lookups, config):
    # sees the first mutator's result
    assert req.object["spec"]["queue"]
    return Verdict.allow(patch=[{"op": "add", "path": "/spec/maxRetry", "value": 3}])


def check_queue(req, lookups, config):
    name = req.object["spec"].get("queue", "")
    q = lookups.queue(name)
    if q is None:
        return Verdict.deny(f" unable to find job queue: queues.scheduling.volcano.sh \"{name}\" not found;")
    return Verdict.allow(warnings=[f"queue {name} is {q['status']['state']}"])


def crash(req, lookups, config):
    raise RuntimeError("boom")


def not_a_verdict(req, lookups, config):
    return {"allowed": True}


def route(path: str, handler, gvr=JOBS, ops=("CREATE", "UPDATE")) -> Route:
    return Route(path, handler, gvr[0], gvr[1], gvr[2], frozenset(ops), path.endswith("/mutate"))


TABLE = {r.path: r for r in [
    route("/jobs/mutate", set_queue, ops=("CREATE",)),
    route("/jobs/validate", check_queue),
    route("/crash/validate", crash),
    route("/odd/validate", not_a_verdict),
    route("/pods/mutate", lambda req, lk, cfg: Verdict.allow(), gvr=PODS),
]}
CONFIG = {"default_queue": "default"}


@pytest.fixture
def app():
    return create_app(lookups=StaticLookups(), config=CONFIG, routes=TABLE)


@pytest.fixture
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def answer(resp) -> dict:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "application/json"
    return resp.json()["response"]


# -- routing ---------------------------------------------------------------------------------------------------------------


def test_mutate_returns_base64_jsonpatch(client):
    out = answer(client.post("/jobs/mutate", json=body(job())))
    assert out["uid"] == "uid-1" and out["allowed"] is True
    assert out["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(out["patch"])) == [{"op": "add", "path": "/spec/queue", "value": "default"}]
    assert out["warnings"] == ["queue defaulted"]


def test_no_patch_fields_without_ops(client):
    out = answer(client.post("/jobs/mutate", json=body(job(queue="q"))))
    assert out == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("api_version", [review.V1, review.V1BETA1], ids=["v1", "v1beta1"])
def test_answers_in_the_review_api_version(client, api_version):
    resp = client.post("/jobs/validate", json=body(job(queue="nope"), api_version=api_version))
    assert resp.json()["apiVersion"] == api_version and resp.json()["kind"] == "AdmissionReview"
    out = answer(resp)
    assert out == {"uid": "uid-1", "allowed": False,
                   "status": {"message": 'unable to find job queue: queues.scheduling.volcano.sh "nope" not found;'}}


def test_dependency_override_carries_lookups_and_config(app):
    state = StaticLookups([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": "q1"}, "status": {"state": "Closed"}}])
    app.dependency_overrides[get_admission] = lambda: Admission(lookups=state, config={"default_queue": "q1"},
                                                                routes=TABLE, metrics=Metrics())
    with TestClient(app) as c:
        assert answer(c.post("/jobs/validate", json=body(job(queue="q1"))))["warnings"] == ["queue q1 is Closed"]
        patch = answer(c.post("/jobs/mutate", json=body(job())))["patch"]
        assert json.loads(base64.b64decode(patch))[0]["value"] == "q1"


def test_resource_mismatch_is_denied_like_volcano(client):
    out = answer(client.post("/jobs/validate", json=body(pod(), resource="pods")))
    assert out["allowed"] is False
    assert out["status"]["message"] == "expect resource to be {batch.volcano.sh v1alpha1 jobs}"


def test_handler_crash_is_a_denial_not_a_500(client, caplog):
    out = answer(client.post("/crash/validate", json=body(job())))
    assert out["allowed"] is False
    assert out["status"] == {"message": "internal error in /crash/validate: RuntimeError: boom", "code": 500,
                             "reason": "InternalError"}
    assert "/crash/validate crashed" in caplog.text and "RuntimeError: boom" in caplog.text


def test_handler_returning_garbage_is_a_denial(client):
    out = answer(client.post("/odd/validate", json=body(job())))
    assert out["allowed"] is False and "handler returned dict, not a Verdict" in out["status"]["message"]


BAD_BODIES = [
    ("not-json", b"{not json", "request body is not valid JSON: "),
    ("empty", b"", "request body is empty, expected an AdmissionReview"),
    ("json-array", b"[]", "request body must be an AdmissionReview object, got a JSON array"),
    ("other-kind", json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "apiVersion 'v1' is not supported"),
    ("no-uid", json.dumps({"apiVersion": review.V1, "kind": "AdmissionReview", "request": {}}).encode(),
     "request.uid is required"),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES])
def test_malformed_bodies_are_400_with_a_message(client, raw, message):
    resp = client.post("/jobs/validate", content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 400
    status = resp.json()
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 400, "BadRequest")
    assert status["message"].startswith(message)


def test_oversized_body_by_content_length(client):
    raw = b" " * (review.MAX_BODY_BYTES + 1)
    resp = client.post("/jobs/validate", content=raw)
    assert resp.status_code == 400
    assert resp.json()["message"] == (f"request body is {review.MAX_BODY_BYTES + 1} bytes, larger than the "
                                      f"{review.MAX_BODY_BYTES} bytes (3 MiB) an API server sends")


def test_oversized_chunked_body(client):
    def chunks():
        for _ in range(4):
            yield b" " * (1024 * 1024)

    resp = client.post("/jobs/validate", content=chunks())
    assert resp.status_code == 400
    assert resp.json()["message"] == (f"request body is larger than the {review.MAX_BODY_BYTES} bytes (3 MiB) "
                                      "an API server sends")


def test_unknown_path_is_404(client):
    resp = client.post("/hypernodes/mutate", json=body(job()))
    assert resp.status_code == 404
    assert resp.json()["message"].startswith("no admission webhook at /hypernodes/mutate; lahar serves ")
    assert client.get("/nothing").status_code == 404


def test_get_on_a_webhook_path_is_405(client):
    resp = client.get("/jobs/validate")
    assert resp.status_code == 405 and "admission reviews are POSTed" in resp.json()["message"]


def test_health_and_readiness(app):
    class Syncing(StaticLookups):
        synced = False

        def ready(self) -> bool:
            return self.synced

    lookups = Syncing()
    app.dependency_overrides[get_admission] = lambda: Admission(lookups, CONFIG, TABLE, Metrics())
    with TestClient(app) as c:
        assert c.get("/healthz").text == "ok"
        resp = c.get("/readyz")
        assert resp.status_code == 503 and "not synced" in resp.text
        lookups.synced = True
        assert c.get("/readyz").status_code == 200


# -- metrics ------------------------------------------------------------------------------------------------------------


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_endpoint_counts_by_path_and_verdict(client):
    client.post("/jobs/mutate", json=body(job()))
    client.post("/jobs/validate", json=body(job(queue="default")))
    client.post("/jobs/validate", json=body(job(queue="nope")))
    client.post("/jobs/validate", json=body(job(queue="nope")))
    client.post("/crash/validate", json=body(job()))
    client.post("/jobs/validate", content=b"{")
    client.post("/unknown", content=b"{")
    resp = client.get("/metrics")
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    s = _samples(resp.text)
    total = "lahar_admission_requests_total"
    assert s[f'{total}{{path="/jobs/mutate",verdict="allowed"}}'] == 1
    assert s[f'{total}{{path="/jobs/validate",verdict="allowed"}}'] == 1
    assert s[f'{total}{{path="/jobs/validate",verdict="denied"}}'] == 2
    assert s[f'{total}{{path="/jobs/validate",verdict="invalid"}}'] == 1
    assert s[f'{total}{{path="/crash/validate",verdict="error"}}'] == 1
    assert not any("/unknown" in k for k in s)
    dur = "lahar_admission_duration_seconds"
    labels = 'path="/jobs/validate",verdict="denied"'
    assert s[f'{dur}_count{{{labels}}}'] == 2
    assert s[f'{dur}_bucket{{{labels},le="+Inf"}}'] == 2
    assert s[f'{dur}_sum{{{labels}}}'] >= 0


def test_metrics_exposition_format():
    m = Metrics()
    m.observe("/pods/mutate", "allowed", 0.0007)
    m.observe("/pods/mutate", "allowed", 0.003)
    m.observe("/pods/mutate", "allowed", 20.0)
    m.observe('/we"ird', "denied", 0.0001)
    text = m.render()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[:2] == ["# HELP lahar_admission_requests_total Admission reviews answered, by webhook path and "
                         "verdict.", "# TYPE lahar_admission_requests_total counter"]
    assert 'lahar_admission_requests_total{path="/pods/mutate",verdict="allowed"} 3' in lines
    assert 'lahar_admission_requests_total{path="/we\\"ird",verdict="denied"} 1' in lines
    assert "# TYPE lahar_admission_duration_seconds histogram" in lines
    buckets = [ln for ln in lines if ln.startswith('lahar_admission_duration_seconds_bucket{path="/pods/mutate"')]
    assert len(buckets) == len(metrics_mod.BUCKETS) + 1
    counts = [int(ln.rsplit(" ", 1)[1]) for ln in buckets]
    assert counts == sorted(counts), "buckets are cumulative"
    le = dict(re.findall(r'le="([^"]+)"\} (\d+)', "\n".join(buckets)))
    assert (le["0.0005"], le["0.001"], le["0.0025"], le["0.005"], le["10.0"], le["+Inf"]) == (
        "0", "1", "1", "2", "2", "3")
    assert 'lahar_admission_duration_seconds_count{path="/pods/mutate",verdict="allowed"} 3' in lines
    assert m.count("/pods/mutate", "allowed") == 3 and m.count("/x", "allowed") == 0


# -- the route table and the chain `lahar admit` runs -------------------------------------------------------------------


def test_default_routes_cover_volcanos_paths():
    table = routes.default_routes()
    assert sorted(table) == sorted(["/jobs/mutate", "/jobs/validate", "/pods/mutate", "/pods/validate",
                                    "/queues/mutate", "/queues/validate", "/podgroups/mutate",
                                    "/podgroups/validate", "/cronjobs/validate", "/jobflows/validate",
                                    "/hypernodes/validate"])
    assert table["/queues/validate"].operations == {"CREATE", "UPDATE", "DELETE"}
    assert table["/jobs/mutate"].mutating and not table["/jobs/validate"].mutating
    assert (table["/pods/mutate"].group, table["/pods/mutate"].resource) == ("", "pods")


def test_route_operations_match_the_registered_webhooks():
    deploy = Path(__file__).resolve().parents[3] / "deploy" / "webhooks"
    registered = {}
    for manifest in sorted(deploy.glob("*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            for hook in (doc or {}).get("webhooks", []):
                path = hook["clientConfig"]["service"]["path"]
                registered[path] = {op for rule in hook["rules"] for op in rule["operations"]}
    if not registered:
        pytest.skip("deploy/webhooks/ has no webhook configurations")
    table = {**routes.default_routes(), **routes.lahar_routes()}
    assert {p: set(r.operations) for p, r in table.items()} == registered


def test_a_rule_module_that_fails_to_import_stops_the_app_from_starting():
    """Explicit wiring: the route table holds the handlers, so a broken rule module is an ImportError at start,
    never a path that allows everything."""
    script = (
        "import sys, importlib.abc\n"
        "class Broken(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lahar.webhooks.jobs':\n"
        "            raise ImportError('broken rules')\n"
        "sys.meta_path.insert(0, Broken())\n"
        "from lahar.webhooks import app\n"
        "app.create_app()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "ImportError: broken rules" in out.stderr


def test_chain_lists_mutators_then_validators():
    mutators, validators = routes.chain("jobs")
    assert [r.path for r in mutators] == ["/jobs/mutate"] and [r.path for r in validators] == ["/jobs/validate"]
    assert routes.chain("cronjobs")[0] == []
    assert routes.chain("configmaps") == ([], [])


CHAIN_TABLE = {
    "m1": route("/jobs/mutate", set_queue, ops=("CREATE",)),
    "m2": route("/jobs/mutate", set_retry, ops=("CREATE",)),
    "v": route("/jobs/validate", check_queue),
}


def test_run_chain_applies_patches_in_turn_and_validates_the_result():
    req = review.request_for(job(), resource="jobs")
    verdict = routes.run_chain(req, StaticLookups(), CONFIG, [CHAIN_TABLE["m1"], CHAIN_TABLE["m2"]],
                               [CHAIN_TABLE["v"]])
    assert verdict.allowed
    assert list(verdict.patch) == [{"op": "add", "path": "/spec/queue", "value": "default"},
                                   {"op": "add", "path": "/spec/maxRetry", "value": 3}]
    assert verdict.warnings == ("queue defaulted", "queue default is Open")


def test_run_chain_denial_keeps_earlier_warnings():
    req = review.request_for(job(), resource="jobs")
    verdict = routes.run_chain(req, StaticLookups(), {"default_queue": "gone"}, [CHAIN_TABLE["m1"]],
                               [CHAIN_TABLE["v"]])
    assert not verdict.allowed and "unable to find job queue" in verdict.message
    assert verdict.warnings == ("queue defaulted",)


def test_run_chain_skips_webhooks_not_registered_for_the_operation():
    old = job(queue="default")
    req = review.request_for(job(queue="default"), resource="jobs", operation="UPDATE", old_object=old)
    # set_queue would deny an UPDATE ("expect operation to be 'CREATE'"), but /jobs/mutate only registers CREATE
    verdict = routes.run_chain(req, StaticLookups(), CONFIG, [CHAIN_TABLE["m1"]], [CHAIN_TABLE["v"]])
    assert verdict.allowed and verdict.patch == ()


def test_run_chain_mutator_crash_is_a_denial():
    req = review.request_for(job(), resource="jobs")
    verdict = routes.run_chain(req, StaticLookups(), CONFIG, [route("/jobs/mutate", crash)], [])
    assert not verdict.allowed and verdict.message == "internal error in /jobs/mutate: RuntimeError: boom"


def test_admit_object_defaults_the_namespace_and_skips_unknown_kinds():
    seen = []

    def record(req, lookups, config):
        seen.append((req.namespace, req.object["metadata"].get("namespace")))
        return Verdict.allow()

    table = {"/jobs/validate": route("/jobs/validate", record)}
    obj = job()
    del obj["metadata"]["namespace"]
    req, verdict = routes.admit_object(obj, StaticLookups(), CONFIG, table)
    assert verdict.allowed and seen == [("default", "default")] and req.operation == "CREATE"
    assert "namespace" not in obj["metadata"], "the caller's object is not changed"
    assert routes.admit_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                               StaticLookups(), CONFIG, table) is None


def test_app_factory_is_refused_without_workers_to_import_it(tmp_path):
    """`--app-factory` names a module:function for uvicorn's spawned workers; one process builds lahar's own app and
    imports nothing by name, so the option alone is a clear usage error naming it, not a silent import."""
    from typer.testing import CliRunner

    from lahar.cli import app as cli

    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_text("")
    res = CliRunner().invoke(cli, ["webhook", "--cert", str(tmp_path / "tls.crt"), "--key", str(tmp_path / "tls.key"),
                                   "--app-factory", "tests.integration.webhook_faults:stalling_app"])
    assert res.exit_code == 2, res.output
    assert "--app-factory" in res.output and "only with --workers 2 or more" in res.output


# -- the front door: reviews skip the router and the middleware stack ---------------------------------------------------


def _counting_router(app) -> list[str]:
    seen: list[str] = []
    inner = app.router.middleware_stack

    async def counting(scope, receive, send):
        seen.append(scope["path"])
        await inner(scope, receive, send)
    app.router.middleware_stack = counting
    return seen


@pytest.mark.parametrize(("method", "path", "routed"), [
    pytest.param("POST", "/pods/mutate", False, id="review-front-door"),
    pytest.param("POST", "/nope/validate", True, id="unknown-path-routed-404"),
    pytest.param("GET", "/pods/mutate", True, id="get-routed-405"),
    pytest.param("GET", "/healthz", True, id="healthz-routed"),
])
def test_reviews_skip_the_router(method, path, routed):
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    seen = _counting_router(app)
    client = TestClient(app)
    r = client.request(method, path, json=body(pod(), resource="pods") if method == "POST" else None)
    assert (seen == [path]) is routed
    if path == "/pods/mutate" and method == "POST":
        assert r.status_code == 200 and r.json()["response"]["allowed"] is True


def test_front_door_answers_a_crash_with_a_status():
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())

    async def failing(request):  # the endpoint itself fails (its handlers' errors are denials already)
        raise RuntimeError("boom")
    app.review = failing
    r = TestClient(app, raise_server_exceptions=False).post("/jobs/validate", json=body(job()))
    assert r.status_code == 500 and r.json()["reason"] == "InternalError"


def test_front_door_steps_aside_for_middleware():
    app = create_app(lookups=StaticLookups(), config=AdmissionConfig())
    calls = []

    @app.middleware("http")
    async def count(request, call_next):
        calls.append(request.url.path)
        return await call_next(request)
    r = TestClient(app).post("/pods/mutate", json=body(pod(), resource="pods"))
    assert r.status_code == 200 and calls == ["/pods/mutate"]
