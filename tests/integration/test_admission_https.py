"""WebhookAdmission against a real HTTPS webhook: a tiny FastAPI app on uvicorn with a certificate from our CA.

Checks mutate (JSONPatch applied, warnings passed on), validate, deny (kube's message and code), timeouts,
failurePolicy Ignore, caBundle mismatch and the cache following configuration changes in the store.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request

from lahar.certs import authority
from lahar.devcluster.admission import WebhookAdmission
from lahar.kube import errors, resources
from lahar.kube.apiserver import store as store_mod

pytestmark = pytest.mark.integration


def _b64(data: Any) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def make_app(seen: list[dict]) -> FastAPI:
    app = FastAPI()

    def answer(review: dict, **response: Any) -> dict:
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], **response}}

    @app.post("/mutate")
    async def mutate(request: Request) -> dict:
        review = await request.json()
        seen.append(review)
        labels = (review["request"]["object"].get("metadata") or {}).get("labels")
        ops = [] if labels is not None else [{"op": "add", "path": "/metadata/labels", "value": {}}]
        ops.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
        return answer(review, allowed=True, patchType="JSONPatch", patch=_b64(ops), warnings=["mutated it"])

    @app.post("/mutate-second")
    async def mutate_second(request: Request) -> dict:
        review = await request.json()
        seen.append(review)
        # sees the first webhook's patch
        mutated = review["request"]["object"]["metadata"]["labels"].get("mutated", "no")
        ops = [{"op": "add", "path": "/metadata/annotations", "value": {"second-saw": mutated}}]
        return answer(review, allowed=True, patchType="JSONPatch", patch=_b64(ops))

    @app.post("/validate")
    async def validate(request: Request) -> dict:
        review = await request.json()
        seen.append(review)
        obj = review["request"]["object"] or review["request"]["oldObject"]
        if ((obj.get("metadata") or {}).get("labels") or {}).get("deny") == "yes":
            return answer(review, allowed=False, status={"message": "label deny=yes is not allowed", "code": 400},
                          warnings=["checked"])
        return answer(review, allowed=True, warnings=["checked"])

    @app.post("/deny-plain")
    async def deny_plain(request: Request) -> dict:
        review = await request.json()
        return answer(review, allowed=False)

    @app.post("/slow")
    async def slow(request: Request) -> dict:
        review = await request.json()
        await asyncio.sleep(3)
        return answer(review, allowed=True)

    @app.post("/wrong-uid")
    async def wrong_uid(request: Request) -> dict:
        await request.json()
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "nope", "allowed": True}}

    return app


@dataclass
class Webhook:
    base: str
    ca_bundle: str
    other_ca_bundle: str
    seen: list[dict] = field(default_factory=list)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("webhook-certs")
    ca = authority.new_ca("lahar-test-ca", 1)
    other = authority.new_ca("someone-else", 1)
    serving = authority.issue(ca, common_name="127.0.0.1", hosts=["127.0.0.1", "localhost"], days=1)
    authority.write(serving, tmp / "tls.crt", tmp / "tls.key")
    seen: list[dict] = []
    config = uvicorn.Config(make_app(seen), host="127.0.0.1", port=0, log_level="warning",
                            ssl_certfile=str(tmp / "tls.crt"), ssl_keyfile=str(tmp / "tls.key"),
                            timeout_graceful_shutdown=1, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-webhook", daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started, "webhook server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    yield Webhook(f"https://127.0.0.1:{port}", base64.b64encode(ca.cert_pem).decode(),
                  base64.b64encode(other.cert_pem).decode(), seen)
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def store():
    s = store_mod.Store(registry=resources.Registry.of(resources.core()))
    yield s
    s.close()


@pytest.fixture
def chain(store):
    adm = WebhookAdmission(store)
    yield adm
    adm.close()


RT = {rt.plural: rt for rt in resources.core()}


def hook(webhook: Webhook, path: str, *, name: str | None = None, ca: str | None = None, **kw: Any) -> dict:
    out = {"name": name or f"{path.strip('/')}.test.lahar.sh",
           "clientConfig": {"url": webhook.base + path, "caBundle": webhook.ca_bundle if ca is None else ca},
           "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                      "resources": ["configmaps"]}],
           "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    out.update(kw)
    return out


def register(store, kind: str, name: str, hooks: list[dict]) -> None:
    plural = "mutatingwebhookconfigurations" if kind.startswith("Mutating") else "validatingwebhookconfigurations"
    store.create(RT[plural], None, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                    "metadata": {"name": name}, "webhooks": hooks})


def attrs(obj: dict, *, operation: str = "CREATE", old: dict | None = None, dry_run: bool = False):
    req = store_mod.Request(user="admin", groups=("system:masters",), dry_run=dry_run)
    return store_mod.AdmissionAttributes(operation=operation, rt=RT["configmaps"], subresource=None,
                                         namespace="default", name=obj["metadata"]["name"], obj=obj, old_obj=old,
                                         request=req, options=None)


def cm(name: str, **labels: str) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


def test_mutating_chain_applies_patches_in_order(webhook, store, chain):
    register(store, "MutatingWebhookConfiguration", "b-second", [hook(webhook, "/mutate-second")])
    register(store, "MutatingWebhookConfiguration", "a-first", [hook(webhook, "/mutate")])
    a = attrs(cm("c1"))
    out = chain.mutate(a)
    assert out["metadata"]["labels"] == {"mutated": "yes"}
    assert out["metadata"]["annotations"] == {"second-saw": "yes"}
    assert a.request.warnings == ["mutated it"]


def test_review_sent_is_kube_shaped(webhook, store, chain):
    register(store, "MutatingWebhookConfiguration", "m", [hook(webhook, "/mutate")])
    webhook.seen.clear()
    chain.mutate(attrs(cm("c2")))
    request = webhook.seen[-1]["request"]
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert (request["name"], request["namespace"], request["operation"]) == ("c2", "default", "CREATE")
    assert request["userInfo"] == {"username": "admin", "groups": ["system:masters"]}
    assert request["oldObject"] is None and request["dryRun"] is False
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}


def test_validating_allows_and_collects_warnings(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/validate", name="v1.test"),
                                                            hook(webhook, "/validate", name="v2.test")])
    a = attrs(cm("ok"))
    chain.validate(a)
    assert a.request.warnings == ["checked", "checked"]


def test_validating_denial_message_and_code(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/validate", name="deny.test")])
    with pytest.raises(errors.ApiError) as info:
        chain.validate(attrs(cm("bad", deny="yes")))
    assert info.value.message == 'admission webhook "deny.test" denied the request: label deny=yes is not allowed'
    assert info.value.code == 400


def test_denial_without_status_is_403(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/deny-plain", name="plain.test")])
    with pytest.raises(errors.ApiError) as info:
        chain.validate(attrs(cm("x")))
    assert info.value.code == 403
    assert info.value.message == 'admission webhook "plain.test" denied the request without explanation'


def test_timeout_fails_closed(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/slow", name="slow.test",
                                                                 timeoutSeconds=1)])
    with pytest.raises(errors.ApiError) as info:
        chain.validate(attrs(cm("x")))
    assert info.value.code == 500
    assert info.value.message == (f'Internal error occurred: failed calling webhook "slow.test": failed to call '
                                  f'webhook: Post "{webhook.base}/slow?timeout=1s": context deadline exceeded')


def test_failure_policy_ignore_skips_broken_webhooks(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [
        hook(webhook, "/slow", name="slow.test", timeoutSeconds=1, failurePolicy="Ignore"),
        hook(webhook, "/validate", name="bad-ca.test", ca=webhook.other_ca_bundle, failurePolicy="Ignore"),
        hook(webhook, "/wrong-uid", name="uid.test", failurePolicy="Ignore"),
    ])
    chain.validate(attrs(cm("x")))


def test_ca_bundle_mismatch_fails_closed(webhook, store, chain):
    register(store, "MutatingWebhookConfiguration", "m", [hook(webhook, "/mutate", name="ca.test",
                                                               ca=webhook.other_ca_bundle)])
    with pytest.raises(errors.ApiError) as info:
        chain.mutate(attrs(cm("x")))
    assert info.value.code == 500
    assert info.value.message == (f'Internal error occurred: failed calling webhook "ca.test": failed to call '
                                  f'webhook: Post "{webhook.base}/mutate?timeout=10s": tls: failed to verify '
                                  f'certificate: x509: certificate signed by unknown authority')


def test_connection_refused_and_missing_service(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [{
        "name": "svc.test", "clientConfig": {"service": {"name": "volcano-admission-service",
                                                         "namespace": "volcano-system", "path": "/jobs/validate"}},
        "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]}])
    with pytest.raises(errors.ApiError) as info:
        chain.validate(attrs(cm("x")))
    assert info.value.message == ('Internal error occurred: failed calling webhook "svc.test": failed to call '
                                  'webhook: service "volcano-admission-service" not found')


def test_cache_follows_configuration_changes(webhook, store, chain):
    assert chain.mutate(attrs(cm("x"))) is None
    register(store, "MutatingWebhookConfiguration", "m", [hook(webhook, "/mutate")])
    assert chain.mutate(attrs(cm("x")))["metadata"]["labels"]["mutated"] == "yes"
    store.delete(RT["mutatingwebhookconfigurations"], None, "m")
    assert chain.mutate(attrs(cm("x"))) is None


def test_dry_run_needs_side_effect_free_webhooks(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/validate", name="se.test",
                                                                 sideEffects="Some")])
    with pytest.raises(errors.BadRequest, match='admission webhook "se.test" does not support dry run'):
        chain.validate(attrs(cm("x"), dry_run=True))


def test_match_condition_skips_call(webhook, store, chain):
    register(store, "ValidatingWebhookConfiguration", "v", [hook(
        webhook, "/validate", name="cel.test",
        matchConditions=[{"name": "not-exempt", "expression": "!('exempt' in object.metadata.labels)"}])])
    chain.validate(attrs(cm("x", deny="yes", exempt="true")))  # skipped: no denial
    with pytest.raises(errors.ApiError, match="denied the request"):
        chain.validate(attrs(cm("x", deny="yes")))


def test_validating_errors_keep_configuration_order_with_match_conditions(webhook, store, chain):
    """matchConditions are evaluated before the calls start; a condition that fails to evaluate (failurePolicy Fail)
    is still reported in its configuration slot, after an earlier webhook's denial."""
    broken = [{"name": "broken", "expression": "object.metadata.nope == 'x'"}]
    register(store, "ValidatingWebhookConfiguration", "a-first", [hook(webhook, "/validate", name="deny.test")])
    register(store, "ValidatingWebhookConfiguration", "b-second",
             [hook(webhook, "/validate", name="broken.test", matchConditions=broken)])
    with pytest.raises(errors.ApiError, match='admission webhook "deny.test" denied the request'):
        chain.validate(attrs(cm("x", deny="yes")))
    with pytest.raises(errors.Forbidden, match="resulted in error"):
        chain.validate(attrs(cm("x")))


def test_one_kept_alive_connection_per_endpoint(webhook, store, chain):
    register(store, "MutatingWebhookConfiguration", "m", [hook(webhook, "/mutate")])
    register(store, "ValidatingWebhookConfiguration", "v", [hook(webhook, "/validate")])
    original = cm("x", keep="me")
    for _ in range(5):
        out = chain.mutate(attrs(original))
        assert out["metadata"]["labels"] == {"keep": "me", "mutated": "yes"}
        chain.validate(attrs(out))
    assert original["metadata"]["labels"] == {"keep": "me"}  # patches apply to a copy
    pools = list(chain._transport._pools.values())
    assert len(pools) == 1  # same host, port and caBundle: one pool for both paths
    assert pools[0].num_connections == 1  # ten sequential calls over one TLS connection
