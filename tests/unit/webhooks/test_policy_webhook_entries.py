"""The policy-only webhook entries skip nothing they act on: every request their rules or matchConditions now
exclude (but the entries as registered before sent to them) gets allow-without-patch from their path even with
catch-all policies in force (a Volcano path admitted it and ran the policies there); every request they still
reach is one those policies act on. Matching is devcluster's (kube-apiserver's rules and CEL matchConditions).

Also `Policies.demand()` and `cluster_demand`, what the entries are registered from."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import pytest

from lahar.certs import bundles
from lahar.certs.bundles import PolicyDemand
from lahar.devcluster import admission as devadmission
from lahar.kube.apiserver.memory import MemoryClient
from lahar.policies.admission_policies import parse_policies
from lahar.webhooks import policystage, review
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups
from tests.unit.certs.test_certs import WEBHOOKS
from tests.unit.webhooks.test_policy_stage import CONFIG, batch_job, policy, vcjob

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

DENY_ALL = policy("deny-all", groups='["*"]', resources='["*"]', message="no")
LABEL_ALL = policy("label-all", groups='["*"]', resources='["*"]', validations=False,
                   mutation="[JSONPatch{op: 'add', path: '/metadata/labels', value: {'seen': 'yes'}}]")


def _obj(api_version: str, kind: str, name: str = "o", namespace: str | None = "team-a", **spec: Any) -> dict:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def _pod(scheduler: str | None) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return _obj("v1", "Pod", "p", **spec)


VCCRON = _obj("batch.volcano.sh/v1alpha1", "CronJob", "cj", schedule="* * * * *")
QUEUE = _obj("scheduling.volcano.sh/v1beta1", "Queue", "q", namespace=None, weight=1)
PODGROUP = _obj("scheduling.volcano.sh/v1beta1", "PodGroup", "pg", minMember=1)
BATCH_CRON = _obj("batch/v1", "CronJob", "bcj", schedule="* * * * *")

# (id, object, resource, operation, reaches /policies/mutate, reaches /policies/validate); every row is a request
# the entries' former rules (Volcano's kinds, pods, batch/v1 on CREATE and UPDATE) sent to both paths
ROWS = [
    ("vcjob-create", vcjob(), "jobs", "CREATE", False, False),
    ("vcjob-update", vcjob(), "jobs", "UPDATE", False, False),
    ("vccronjob-create", VCCRON, "cronjobs", "CREATE", True, False),
    ("vccronjob-update", VCCRON, "cronjobs", "UPDATE", True, False),
    ("queue-create", QUEUE, "queues", "CREATE", False, False),
    ("queue-update", QUEUE, "queues", "UPDATE", True, False),
    ("podgroup-create", PODGROUP, "podgroups", "CREATE", False, False),
    ("podgroup-update", PODGROUP, "podgroups", "UPDATE", True, False),
    ("volcano-pod-create", _pod("volcano"), "pods", "CREATE", False, False),
    ("volcano-pod-update", _pod("volcano"), "pods", "UPDATE", True, True),
    ("default-scheduler-pod-create", _pod("default-scheduler"), "pods", "CREATE", True, True),
    ("pod-without-scheduler-name", _pod(None), "pods", "CREATE", True, True),
    ("batch-job-create", batch_job(), "jobs", "CREATE", True, True),
    ("batch-cronjob-update", BATCH_CRON, "cronjobs", "UPDATE", True, True),
]


def _entry(mutating: bool) -> dict:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    [config] = [c for c in bundles.load_templates(WEBHOOKS) if c["kind"] == kind]
    rendered = bundles.render(config, ca_bundle=b"pem", policies=PolicyDemand.everything())
    [hook] = [h for h in rendered["webhooks"] if h["name"].endswith("policy.lahar.sh")]
    return hook


def _reaches(hook: dict, obj: dict, resource: str, operation: str) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    ns = obj["metadata"].get("namespace") or ""
    call = devadmission.AdmissionCall(operation=operation, group=group, version=version, resource=resource,
                                      namespace=ns, name=obj["metadata"]["name"], kind=(group, version, obj["kind"]),
                                      obj=obj, old_obj=obj if operation == "UPDATE" else None)
    labels = {"kubernetes.io/metadata.name": ns}
    return bool(devadmission.webhook_matches(hook, call, lambda _ns: labels)
                and devadmission.match_conditions(hook, call, lambda: devadmission.build_review(call)["request"]))


@pytest.fixture(scope="module")
def client() -> Any:
    app = create_app(lookups=StaticLookups(), config=CONFIG, policies=parse_policies(DENY_ALL + "---" + LABEL_ALL))
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("mutating", [True, False], ids=["mutate", "validate"])
@pytest.mark.parametrize(("obj", "resource", "operation", "to_mutate", "to_validate"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_excluded_requests_were_allowed_without_patch_anyway(client: Any, mutating: bool, obj: dict, resource: str,
                                                             operation: str, to_mutate: bool,
                                                             to_validate: bool) -> None:
    reaches = to_mutate if mutating else to_validate
    assert _reaches(_entry(mutating), obj, resource, operation) is reaches
    path = "/policies/mutate" if mutating else "/policies/validate"
    r = review.request_for(obj, resource=resource, operation=operation,
                           old_object=obj if operation == "UPDATE" else None)
    out = client.post(path, json=review.to_review(r)).json()["response"]
    if not reaches:   # what the entry no longer receives, it would have let through untouched
        assert out["allowed"] is True and "patch" not in out and not out.get("warnings"), out
    elif mutating:    # what it still receives, the policies act on
        assert json.loads(base64.b64decode(out["patch"])) == [
            {"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}]
    else:
        assert out["allowed"] is False and "deny-all" in out["status"]["message"], out


# --- what the entries are registered from -------------------------------------------------------------------------

def _rules(*triples: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> tuple[dict, ...]:
    return tuple({"apiGroups": g, "resources": r, "operations": o} for g, r, o in triples)


MUTATION = "[JSONPatch{op: 'add', path: '/metadata/labels', value: {}}]"
DEMANDS = [
    ("none", "", PolicyDemand()),
    ("validating-only", policy("v", resources="[pods]", groups='[""]', ops="[CREATE]"),
     PolicyDemand(validating=_rules((("",), ("pods",), ("CREATE",))))),
    ("mutating-only", policy("m", validations=False, groups="[batch]", mutation=MUTATION),
     PolicyDemand(mutating=_rules((("batch",), ("jobs",), ("CREATE", "UPDATE"))))),
    ("both-halves", policy("b", mutation=MUTATION),
     PolicyDemand(mutating=_rules((("batch.volcano.sh",), ("jobs",), ("CREATE", "UPDATE"))),
                  validating=_rules((("batch.volcano.sh",), ("jobs",), ("CREATE", "UPDATE"))))),
]


@pytest.mark.parametrize(("text", "expected"), [d[1:] for d in DEMANDS], ids=[d[0] for d in DEMANDS])
def test_policies_demand_their_resource_rules_per_phase(text: str, expected: PolicyDemand) -> None:
    assert policystage.Policies.of(parse_policies(text) if text else []).demand() == expected


CONFIGMAPS = next(rt for rt in MemoryClient().registry if rt.plural == "configmaps")


def _policy_configmap(name: str, text: str, *, namespace: str = "lahar-system") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"policy.yaml": text},
            "metadata": {"name": name, "namespace": namespace, "labels": {"lahar.sh/policy": "true"}}}


_PODS_ONLY = policy("v", resources="[pods]", groups='[""]')
CLUSTERS = [  # (id, ConfigMaps, the namespace read (None: every one, --policies-from-all-namespaces), demand)
    ("no-configmaps", [], "lahar-system", PolicyDemand()),
    ("one-validating-policy", [_policy_configmap("p", _PODS_ONLY)], "lahar-system",
     PolicyDemand(validating=_rules((("",), ("pods",), ("CREATE", "UPDATE"))))),
    ("other-namespace-ignored", [_policy_configmap("p", policy("v"), namespace="team-a")], "lahar-system",
     PolicyDemand()),
    ("other-namespace-counted-from-all-namespaces", [_policy_configmap("p", _PODS_ONLY, namespace="team-a")], None,
     PolicyDemand(validating=_rules((("",), ("pods",), ("CREATE", "UPDATE"))))),
    ("unparsable-counts-as-anything", [_policy_configmap("p", "kind: [")], "lahar-system", PolicyDemand.everything()),
]


@pytest.mark.parametrize(("configmaps", "namespace", "expected"), [c[1:] for c in CLUSTERS],
                         ids=[c[0] for c in CLUSTERS])
def test_cluster_demand_reads_the_policy_configmaps(configmaps: list[dict], namespace: str | None,
                                                    expected: PolicyDemand) -> None:
    client = MemoryClient()
    namespaces = next(rt for rt in client.registry if rt.plural == "namespaces")
    for ns in ("lahar-system", "team-a"):
        client.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for cm in configmaps:
        client.create(CONFIGMAPS, cm, namespace=cm["metadata"]["namespace"])
    assert policystage.cluster_demand(client, namespace=namespace) == expected


# --- the shell: webhooks.registration.PolicyWebhooks ----------------------------------------------------------------

def test_registrar_follows_the_policies_in_force() -> None:
    from lahar.webhooks import registration

    client = MemoryClient()
    templates = bundles.load_templates(WEBHOOKS)
    bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=["127.0.0.1"],
                   templates=templates, url="https://127.0.0.1:9443", policies=PolicyDemand())
    in_force = [policystage.NO_POLICIES]
    registrar = registration.PolicyWebhooks(client, templates, lambda: in_force[0].demand(), resync=60.0).start()
    rt = next(rt for rt in client.registry if rt.kind == "ValidatingWebhookConfiguration")

    def names() -> set[str]:
        return {h["name"] for h in client.get(rt, "lahar-validating-webhooks")["webhooks"]}

    try:
        assert registrar.wait_passes(1)
        assert "validatepolicy.lahar.sh" not in names()
        in_force[0] = policystage.Policies.of(parse_policies(policy("pods", resources="[pods]", groups='[""]')))
        registrar.kick(in_force[0])
        assert registrar.wait_passes(2)
        assert "validatepolicy.lahar.sh" in names() and registrar.last["lahar-validating-webhooks"] == "updated"
        in_force[0] = policystage.NO_POLICIES
        registrar.kick()
        assert registrar.wait_passes(3)
        assert "validatepolicy.lahar.sh" not in names()
    finally:
        registrar.stop()


def test_registrar_refused_by_rbac_leaves_the_entries_as_they_are() -> None:
    from lahar.kube import errors
    from lahar.webhooks import registration

    class ReadOnly(MemoryClient):
        def update(self, *args: Any, **kw: Any) -> Any:
            raise errors.Forbidden("cannot update validatingwebhookconfigurations")

    client = ReadOnly()
    templates = bundles.load_templates(WEBHOOKS)
    bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=["127.0.0.1"],
                   templates=templates, url="https://127.0.0.1:9443")     # every entry, as before
    registrar = registration.PolicyWebhooks(client, templates, lambda: PolicyDemand())
    assert registrar.sync_once() == {}
    rt = next(rt for rt in client.registry if rt.kind == "ValidatingWebhookConfiguration")
    assert "validatepolicy.lahar.sh" in {h["name"] for h in client.get(rt, "lahar-validating-webhooks")["webhooks"]}
