"""certs: renewal timing, the keep/renew/roll decision, the Secret layout, webhook configuration rendering, the
shipped deploy/webhooks manifests, `bundles.ensure` against the in-memory cluster, and the reloader's poll.
"""

from __future__ import annotations

import base64
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lahar.certs import authority, bundles, rotation
from lahar.certs.bundles import Action, Material
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient

ROOT = Path(__file__).resolve().parents[3]
WEBHOOKS = ROOT / "deploy" / "webhooks"
HOSTS = authority.serving_hosts("lahar-webhook", "lahar-system")
DAY = dt.timedelta(days=1)


@pytest.fixture(scope="module")
def ca() -> authority.KeyPair:
    return authority.new_ca("test-ca", days=30)


@pytest.fixture(scope="module")
def material(ca: authority.KeyPair) -> Material:
    return Material(ca=ca, serving=authority.issue(ca, common_name="lahar-webhook", hosts=HOSTS, days=9))


def _start(pem: bytes) -> dt.datetime:
    return authority.KeyPair(pem, b"").certificate.not_valid_before_utc


# --- needs_renewal ------------------------------------------------------------------------------------------------

RENEWAL = [
    # (fraction of the lifetime elapsed, renewal due?)
    (-0.01, True),     # not valid yet
    (0.0, False),
    (0.5, False),
    (0.66, False),
    (0.67, True),      # less than a third left
    (0.99, True),
    (1.5, True),       # expired
]


@pytest.mark.parametrize(("elapsed", "due"), RENEWAL, ids=[f"elapsed={e}" for e, _ in RENEWAL])
def test_needs_renewal_when_less_than_a_third_is_left(ca: authority.KeyPair, elapsed: float, due: bool) -> None:
    leaf = authority.issue(ca, common_name="x", hosts=["x"], days=3)
    cert = leaf.certificate
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    now = cert.not_valid_before_utc + lifetime * elapsed
    assert rotation.needs_renewal(leaf.cert_pem, now) is due
    assert rotation.needs_renewal(leaf.cert_pem.decode(), now.replace(tzinfo=None)) is due  # naive = UTC


def test_renewal_due_at_is_two_thirds_into_the_lifetime(ca: authority.KeyPair) -> None:
    cert = authority.issue(ca, common_name="x", days=3).certificate
    due = rotation.renewal_due_at(cert)
    assert not rotation.needs_renewal(cert, due - dt.timedelta(seconds=1))
    assert rotation.needs_renewal(cert, due + dt.timedelta(seconds=1))


# --- authority additions ------------------------------------------------------------------------------------------

def test_serving_hosts_and_sans(ca: authority.KeyPair) -> None:
    hosts = authority.serving_hosts("s", "n")
    assert hosts == ["s", "s.n", "s.n.svc", "s.n.svc.cluster.local", "localhost", "127.0.0.1"]
    assert authority.hosts(authority.issue(ca, common_name="s", hosts=hosts).cert_pem) == hosts
    assert authority.hosts(authority.issue(ca, common_name="s").cert_pem) == []


def test_is_signed_by_and_split_pem(ca: authority.KeyPair) -> None:
    other = authority.new_ca("test-ca", days=1)  # same subject, other key
    leaf = authority.issue(ca, common_name="x")
    assert authority.is_signed_by(leaf.cert_pem, ca.cert_pem)
    assert not authority.is_signed_by(leaf.cert_pem, other.cert_pem)
    assert authority.split_pem(ca.cert_pem + b"junk\n" + other.cert_pem) == [ca.cert_pem, other.cert_pem]
    assert authority.split_pem(b"") == []


# --- plan ------------------------------------------------------------------------------------------------------

def _plans(ca: authority.KeyPair, material: Material) -> list[tuple[str, Material | None, list[str], Any, Action]]:
    start = _start(material.serving.cert_pem)
    other_ca = authority.new_ca("other", days=30)
    foreign = authority.issue(other_ca, common_name="lahar-webhook", hosts=HOSTS, days=9)
    wrong_key = authority.KeyPair(material.serving.cert_pem, authority.issue(ca, common_name="y").key_pem)
    return [
        ("nothing-stored", None, HOSTS, start, Action.NEW),
        ("fresh", material, HOSTS, start + DAY, Action.KEEP),
        ("fewer-hosts-asked", material, HOSTS[:2], start + DAY, Action.KEEP),
        ("serving-two-thirds-gone", material, HOSTS, start + 7 * DAY, Action.RENEW_SERVING),
        ("serving-expired", material, HOSTS, start + 10 * DAY, Action.RENEW_SERVING),
        ("new-host", material, [*HOSTS, "10.0.0.7"], start + DAY, Action.RENEW_SERVING),
        ("signed-by-another-ca", Material(ca=ca, serving=foreign), HOSTS, start + DAY, Action.RENEW_SERVING),
        ("key-not-matching", Material(ca=ca, serving=wrong_key), HOSTS, start + DAY, Action.RENEW_SERVING),
        ("ca-two-thirds-gone", material, HOSTS, start + 21 * DAY, Action.ROLL_CA),
        ("garbage", Material(ca=ca, serving=authority.KeyPair(b"x", b"y")), HOSTS, start, Action.NEW),
    ]


def test_plan_table(ca: authority.KeyPair, material: Material) -> None:
    for case, stored, hosts, now, expected in _plans(ca, material):
        decision = bundles.plan(stored, hosts=hosts, now=now)
        assert decision.action is expected, (case, decision)
        assert decision.reason


def test_renew_serving_keeps_the_ca_and_roll_keeps_the_old_ca_trusted(ca: authority.KeyPair,
                                                                       material: Material) -> None:
    assert bundles.renew(bundles.Plan(Action.KEEP, ""), material, hosts=HOSTS, common_name="w") is None
    renewed = bundles.renew(bundles.Plan(Action.RENEW_SERVING, ""), material, hosts=HOSTS, common_name="w")
    assert renewed is not None and renewed.ca == ca and renewed.serving != material.serving
    assert authority.is_signed_by(renewed.serving.cert_pem, ca.cert_pem)
    rolled = bundles.renew(bundles.Plan(Action.ROLL_CA, ""), material, hosts=HOSTS, common_name="w")
    assert rolled is not None and rolled.ca != ca and rolled.previous_cas == (ca.cert_pem,)
    assert authority.is_signed_by(rolled.serving.cert_pem, rolled.ca.cert_pem)
    assert authority.split_pem(rolled.trust_bundle()) == [rolled.ca.cert_pem, ca.cert_pem]
    after_old_expiry = ca.certificate.not_valid_after_utc + DAY
    assert authority.split_pem(rolled.trust_bundle(after_old_expiry)) == [rolled.ca.cert_pem]
    new = bundles.renew(bundles.Plan(Action.NEW, ""), material, hosts=HOSTS, common_name="w")
    assert new is not None and new.previous_cas == () and new.ca != ca


# --- Secret layout --------------------------------------------------------------------------------------------

def test_secret_round_trip(material: Material) -> None:
    secret = bundles.to_secret(material, name="certs", namespace="ns")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert base64.b64decode(secret["data"]["ca.crt"]) == material.ca.cert_pem
    assert bundles.from_secret(secret) == material


@pytest.mark.parametrize("secret", [None, {}, {"data": {"tls.crt": "eA=="}},
                                    {"data": {"tls.crt": "!!", "tls.key": "", "ca.crt": "", "ca.key": ""}}],
                         ids=["absent", "empty", "incomplete", "not-base64"])
def test_unusable_secret_reads_as_nothing(secret: dict | None) -> None:
    assert bundles.from_secret(secret) is None


# --- rendering and the shipped manifests ---------------------------------------------------------------------------

VOLCANO_HOOKS = {
    # name → (path, group, resource, operations)
    "mutatejob.volcano.sh": ("/jobs/mutate", "batch.volcano.sh", "jobs", ["CREATE", "UPDATE"]),  # beyond Volcano
    "validatejob.volcano.sh": ("/jobs/validate", "batch.volcano.sh", "jobs", ["CREATE", "UPDATE"]),
    "mutatepod.volcano.sh": ("/pods/mutate", "", "pods", ["CREATE"]),
    "validatepod.volcano.sh": ("/pods/validate", "", "pods", ["CREATE"]),
    "mutatequeue.volcano.sh": ("/queues/mutate", "scheduling.volcano.sh", "queues", ["CREATE"]),
    "validatequeue.volcano.sh": ("/queues/validate", "scheduling.volcano.sh", "queues",
                                 ["CREATE", "UPDATE", "DELETE"]),
    "mutatepodgroup.volcano.sh": ("/podgroups/mutate", "scheduling.volcano.sh", "podgroups", ["CREATE"]),
    "validatepodgroup.volcano.sh": ("/podgroups/validate", "scheduling.volcano.sh", "podgroups",
                                    ["CREATE", "UPDATE"]),
    "validatecronjob.volcano.sh": ("/cronjobs/validate", "batch.volcano.sh", "cronjobs", ["CREATE", "UPDATE"]),
    "validatejobflow.volcano.sh": ("/jobflows/validate", "flow.volcano.sh", "jobflows", ["CREATE", "UPDATE"]),
    "validatehypernode.volcano.sh": ("/hypernodes/validate", "topology.volcano.sh", "hypernodes", ["CREATE", "UPDATE"]),
}


def _hooks(configs: list[dict]) -> dict[str, tuple[str, dict]]:
    return {h["name"]: (c["kind"], h) for c in configs for h in c["webhooks"]}


# lahar's own webhooks next to Volcano's: its ConfigMaps, and users' AdmissionPolicies on the generic paths
LAHAR_HOOKS = {"validateconfigmap.lahar.sh": "/configmaps/validate", "validatepolicy.lahar.sh": "/policies/validate",
               "mutatepolicy.lahar.sh": "/policies/mutate"}


def test_shipped_manifests_have_volcanos_webhooks() -> None:
    configs = bundles.load_templates(WEBHOOKS)
    assert sorted(c["kind"] for c in configs) == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    hooks = _hooks(configs)
    assert set(hooks) == set(VOLCANO_HOOKS) | set(LAHAR_HOOKS)
    for name, (kind, hook) in hooks.items():
        if name in LAHAR_HOOKS:
            assert hook["clientConfig"]["service"]["path"] == LAHAR_HOOKS[name]
            assert kind.startswith("Mutating") == name.startswith("mutate"), name
            continue
        path, group, resource, ops = VOLCANO_HOOKS[name]
        assert kind.startswith("Mutating") == name.startswith("mutate"), name
        assert hook["clientConfig"]["service"] == {"name": "lahar-webhook", "namespace": "lahar-system",
                                                   "path": path, "port": 443}
        assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10
        assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
        assert hook["namespaceSelector"] == {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["lahar-system", "kube-system"]}]}
        [rule] = hook["rules"]
        assert (rule["apiGroups"], rule["resources"], rule["operations"]) == ([group], [resource], ops), name
        # pods: their scheduler names; podgroups: spec-changing updates only (the scheduler's status writes skip it)
        assert ("matchConditions" in hook) == (resource == "pods" or name == "validatepodgroup.volcano.sh"), name


def _pod(scheduler: str | None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}, "spec": spec}


POD_MATCHES = [
    # (scheduler names rendered, pod's schedulerName, namespace, reaches lahar?)
    (None, "volcano", "team", True),
    (None, "default-scheduler", "team", False),
    (None, None, "team", False),
    (None, "volcano", "kube-system", False),
    (None, "volcano", "lahar-system", False),
    (["volcano", "lahar"], "lahar", "team", True),
    (["lahar"], "volcano", "team", False),
    (["it's"], "it's", "team", True),
]


@pytest.mark.parametrize(("names", "scheduler", "namespace", "reaches"), POD_MATCHES,
                         ids=[f"{n}-{s}-{ns}" for n, s, ns, _ in POD_MATCHES])
def test_pod_webhooks_only_see_pods_for_lahars_schedulers(names: list[str] | None, scheduler: str | None,
                                                          namespace: str, reaches: bool) -> None:
    from lahar.devcluster import admission

    for config in bundles.load_templates(WEBHOOKS):
        rendered = bundles.render(config, ca_bundle=b"pem", scheduler_names=names)
        for hook in rendered["webhooks"]:
            if hook["rules"][0]["resources"] != ["pods"] or hook["clientConfig"]["service"]["path"] in bundles.POLICY_PATHS:
                continue
            pod = _pod(scheduler)
            pod["metadata"]["namespace"] = namespace
            call = admission.AdmissionCall(operation="CREATE", group="", version="v1", resource="pods",
                                           namespace=namespace, name="p", kind=("", "v1", "Pod"), obj=pod)
            labels = {"kubernetes.io/metadata.name": namespace}
            matched = (admission.webhook_matches(hook, call, lambda _ns, labels=labels: labels)
                       and admission.match_conditions(hook, call, admission.build_review(call)["request"]))
            assert matched is reaches, hook["name"]


def test_render_with_url_replaces_the_service() -> None:
    [mutating] = [c for c in bundles.load_templates(WEBHOOKS) if c["kind"].startswith("Mutating")]
    out = bundles.render(mutating, ca_bundle=b"PEM", url="https://127.0.0.1:8443/", namespace="lahar")
    hook = _hooks([out])["mutatejob.volcano.sh"][1]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:8443/jobs/mutate", "caBundle": "UEVN"}
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["lahar", "kube-system"]
    assert mutating["webhooks"][0]["clientConfig"]["service"]["namespace"] == "lahar-system"  # template untouched


def test_render_with_service_and_namespace() -> None:
    [validating] = [c for c in bundles.load_templates(WEBHOOKS) if c["kind"].startswith("Validating")]
    out = bundles.render(validating, ca_bundle=b"PEM", service="wh", namespace="kube-system")
    hook = _hooks([out])["validatequeue.volcano.sh"][1]
    assert hook["clientConfig"] == {"service": {"name": "wh", "namespace": "kube-system", "path": "/queues/validate",
                                                "port": 443}, "caBundle": "UEVN"}
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system"]


def test_load_templates_needs_configurations(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(yaml.safe_dump({"kind": "ConfigMap"}))
    with pytest.raises(FileNotFoundError):
        bundles.load_templates(tmp_path)


# --- ensure against the in-memory cluster -------------------------------------------------------------------------

SECRETS = next(rt for rt in MemoryClient().registry if rt.plural == "secrets")


def _ensure(client: Any, **kw: Any) -> bundles.EnsureResult:
    kw.setdefault("templates", bundles.load_templates(WEBHOOKS))
    return bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=HOSTS, **kw)


def _ca_bundle(client: MemoryClient, kind: str) -> bytes:
    rt = next(rt for rt in client.registry if rt.kind == kind)
    [config] = client.list(rt)["items"]
    bundles_seen = {h["clientConfig"]["caBundle"] for h in config["webhooks"]}
    assert len(bundles_seen) == 1
    return base64.b64decode(bundles_seen.pop())


def test_ensure_creates_then_is_idempotent(tmp_path: Path) -> None:
    client = MemoryClient()
    first = _ensure(client, out_dir=tmp_path, url="https://127.0.0.1:9443")
    assert first.plan.action is Action.NEW and first.secret == "created" and first.files_changed
    assert first.configurations == {"lahar-mutating-webhooks": "created", "lahar-validating-webhooks": "created"}
    secret = client.get(SECRETS, "lahar-webhook-certs", namespace="lahar-system")
    assert secret["type"] == "kubernetes.io/tls"
    assert _ca_bundle(client, "MutatingWebhookConfiguration") == first.material.ca.cert_pem
    assert (tmp_path / "ca.crt").read_bytes() == first.material.ca.cert_pem
    assert (tmp_path / "tls.crt").read_bytes() == first.material.serving.cert_pem
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    again = _ensure(client, out_dir=tmp_path, url="https://127.0.0.1:9443")
    assert again.plan.action is Action.KEEP and again.secret == "unchanged" and not again.files_changed
    assert set(again.configurations.values()) == {"unchanged"}
    assert again.material == first.material
    moved = _ensure(client, url="https://127.0.0.1:9999")  # a new port: configurations follow
    assert set(moved.configurations.values()) == {"updated"}


def test_ensure_renews_then_rolls_the_ca_keeping_both_trusted(tmp_path: Path) -> None:
    client = MemoryClient()
    first = _ensure(client, out_dir=tmp_path, days=9, ca_days=30)
    start = _start(first.material.serving.cert_pem)
    renewed = _ensure(client, out_dir=tmp_path, days=9, ca_days=30, now=start + 7 * DAY)
    assert renewed.plan.action is Action.RENEW_SERVING and renewed.secret == "updated"
    assert renewed.material.ca == first.material.ca and renewed.files_changed
    assert set(renewed.configurations.values()) == {"unchanged"}  # same CA: caBundle unchanged
    rolled = _ensure(client, out_dir=tmp_path, days=9, ca_days=60, now=start + 21 * DAY)
    assert rolled.plan.action is Action.ROLL_CA
    both = [rolled.material.ca.cert_pem, first.material.ca.cert_pem]
    assert authority.split_pem(_ca_bundle(client, "ValidatingWebhookConfiguration")) == both
    assert authority.split_pem((tmp_path / "ca.crt").read_bytes()) == both
    # once the old CA has expired it leaves the bundle (the rolled CA was issued at the real present, for 60 days)
    later = _ensure(client, out_dir=tmp_path, days=400, ca_days=60, now=start + 31 * DAY)
    assert authority.split_pem(_ca_bundle(client, "ValidatingWebhookConfiguration"))[1:] == []
    assert later.material.ca == rolled.material.ca


class _Conflicting:
    """Wraps a client: the first `n` writes of each kind fail with 409, as if another replica wrote first."""

    def __init__(self, inner: MemoryClient, n: int) -> None:
        self.inner, self.registry, self.left = inner, inner.registry, {"create": n, "update": n}

    def get(self, *a: Any, **kw: Any) -> Any:
        return self.inner.get(*a, **kw)

    def create(self, rt: Any, obj: dict, **kw: Any) -> Any:
        if rt.plural != "namespaces" and self.left["create"] > 0:
            self.left["create"] -= 1
            self.inner.create(rt, obj, **kw)  # the other replica's write lands
            raise errors.AlreadyExists("already exists")
        return self.inner.create(rt, obj, **kw)

    def update(self, rt: Any, obj: dict, **kw: Any) -> Any:
        if self.left["update"] > 0:
            self.left["update"] -= 1
            raise errors.Conflict("the object has been modified")
        return self.inner.update(rt, obj, **kw)


def test_ensure_retries_conflicts() -> None:
    inner = MemoryClient()
    result = _ensure(_Conflicting(inner, 1))
    assert result.conflicts == 1 and result.plan.action is Action.KEEP  # the other writer's material is kept
    assert result.configurations == {"lahar-mutating-webhooks": "created", "lahar-validating-webhooks": "created"}
    start = _start(result.material.serving.cert_pem)
    renewed = _ensure(_Conflicting(inner, 2), now=start + 300 * DAY, templates=[])
    assert renewed.conflicts == 2 and renewed.plan.action is Action.RENEW_SERVING and renewed.secret == "updated"
    with pytest.raises(errors.Conflict):
        _ensure(_Conflicting(inner, 99), now=start + 600 * DAY, templates=[], attempts=3)


# --- the reloader's poll (files only) ------------------------------------------------------------------------

def test_reloader_takes_only_complete_matching_pairs(tmp_path: Path, ca: authority.KeyPair) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    one = authority.issue(ca, common_name="one", hosts=["127.0.0.1"])
    two = authority.issue(ca, common_name="two", hosts=["127.0.0.1"])
    authority.write(one, cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    seen: list[bytes] = []
    reloader = rotation.CertReloader(context, cert, key, interval=0.01, on_reload=seen.append)
    assert context.sni_callback is not None
    assert not reloader.check()                       # nothing changed
    key.write_bytes(two.key_pem)                      # half-way through a swap: new key, old certificate
    assert not reloader.check() and reloader.failures == 1 and "does not belong" in reloader.last_error
    cert.write_bytes(two.cert_pem)
    assert reloader.check() and reloader.reloads == 1 and seen == [two.cert_pem]
    cert.write_bytes(two.cert_pem)                    # touched, same content
    assert not reloader.check() and reloader.reloads == 1
    cert.write_bytes(b"garbage")
    assert not reloader.check() and reloader.failures == 2
    with reloader:                                    # start/stop leave no thread behind
        pass
    assert reloader._thread is None


def test_a_forced_check_serves_the_pair_on_disk_when_it_changed_before_the_reloader_first_looked(
        tmp_path: Path, ca: authority.KeyPair) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    one = authority.issue(ca, common_name="one", hosts=["127.0.0.1"])
    two = authority.issue(ca, common_name="two", hosts=["127.0.0.1"])
    authority.write(one, cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)                # the server's context: pair one
    authority.write(two, cert, key)                   # renewed before the reloader was made
    seen: list[bytes] = []
    reloader = rotation.CertReloader(context, cert, key, on_reload=seen.append)
    assert not reloader.check()                       # it took pair two for the one already served
    assert reloader.check(force=True) and seen == [two.cert_pem]
    assert not reloader.check()


# --- CLI ---------------------------------------------------------------------------------------------------------

def test_cli_generate(tmp_path: Path) -> None:
    from lahar.cli import app

    result = CliRunner().invoke(app, ["certs", "generate", "--service", "wh", "--namespace", "ns",
                                      "--out", str(tmp_path), "--days", "5"])
    assert result.exit_code == 0, result.output
    pair = authority.load(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert authority.hosts(pair.cert_pem) == authority.serving_hosts("wh", "ns")
    assert authority.is_signed_by(pair.cert_pem, (tmp_path / "ca.crt").read_bytes())
    lifetime = pair.certificate.not_valid_after_utc - pair.certificate.not_valid_before_utc
    assert dt.timedelta(days=5) <= lifetime <= dt.timedelta(days=5, minutes=10)
