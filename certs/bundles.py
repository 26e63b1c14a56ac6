"""The webhook's certificates kept in a Secret, renewed in time, and trusted by the API server through `caBundle`.

Behind `lahar certs ensure`: read the Secret → `plan` (pure: keep, new, renew the serving certificate, or roll the
CA) → `renew` (pure but for key generation) → write the Secret, then the webhook configurations with the trust
bundle (`render`, pure), then the files the webhook server reloads. That order makes a CA roll safe: the API server
trusts old and new CA before any replica serves a certificate from the new one.

Secret layout (type `kubernetes.io/tls`, so `kubectl` and cert-manager users recognise it):
`tls.crt`/`tls.key` the serving pair; `ca.crt` the trust bundle (the signing CA first, then a rolled-out CA until
it expires — what clients and `caBundle` trust); `ca.key` the signing CA's key.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import enum
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from lahar.certs import authority, rotation
from lahar.certs.authority import KeyPair
from lahar.kube import errors
from lahar.kube.resources import ResourceType

__all__ = [
    "Action",
    "EnsureResult",
    "Material",
    "Plan",
    "PolicyDemand",
    "ensure",
    "from_secret",
    "load_templates",
    "plan",
    "policy_webhooks",
    "render",
    "render_parameters",
    "renew",
    "sync_policy_webhooks",
    "to_secret",
    "write_files",
]

Obj = dict[str, Any]
DEFAULT_DAYS = 365
DEFAULT_CA_DAYS = 3650
CA_COMMON_NAME = "lahar-webhook-ca"
_SECRET = ResourceType(group="", version="v1", kind="Secret", plural="secrets", namespaced=True)
_NAMESPACE = ResourceType(group="", version="v1", kind="Namespace", plural="namespaces", namespaced=False)
_CONFIG_TYPES = {
    "MutatingWebhookConfiguration": ResourceType(group="admissionregistration.k8s.io", version="v1",
                                                 kind="MutatingWebhookConfiguration",
                                                 plural="mutatingwebhookconfigurations", namespaced=False),
    "ValidatingWebhookConfiguration": ResourceType(group="admissionregistration.k8s.io", version="v1",
                                                   kind="ValidatingWebhookConfiguration",
                                                   plural="validatingwebhookconfigurations", namespaced=False),
}
TEMPLATE_NAMESPACE = "lahar-system"
TEMPLATE_SCHEDULER_CONDITION = "lahar-scheduler-names"
TEMPLATE_OTHER_PODS_CONDITION = "lahar-not-admitted-by-rules"
# the entries that exist only to run users' AdmissionPolicies, by the path they call (webhooks.policystage), and the
# phase whose policies they run
POLICY_PATHS: Mapping[str, str] = {"/policies/mutate": "mutating", "/policies/validate": "validating"}
# what `ensure` rendered with, kept on each configuration so a later sync (on a policy change) renders the same way
RENDERED_WITH = "lahar.sh/rendered-with"


# ---------------------------------------------------------------------------------------------------------------
# the material and its Secret (pure)


@dataclass(frozen=True)
class Material:
    """The CA (cert + key), the serving pair, and CAs still trusted after a roll (PEM, newest first)."""

    ca: KeyPair
    serving: KeyPair
    previous_cas: tuple[bytes, ...] = ()

    def trust_bundle(self, now: dt.datetime | None = None) -> bytes:
        """The signing CA followed by previous CAs not yet expired at `now` (all of them when `now` is None)."""
        kept = [pem for pem in self.previous_cas
                if now is None or x509.load_pem_x509_certificate(pem).not_valid_after_utc > now]
        return b"".join(_one_line_end(p) for p in [self.ca.cert_pem, *kept])


def _one_line_end(pem: bytes) -> bytes:
    return pem if pem.endswith(b"\n") else pem + b"\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def from_secret(secret: Mapping[str, Any] | None) -> Material | None:
    """The material in a Secret of the layout above; None when absent or incomplete (then it is made anew)."""
    if not secret:
        return None
    data = secret.get("data") or {}
    try:
        raw = {k: base64.b64decode(data[k]) for k in ("tls.crt", "tls.key", "ca.crt", "ca.key")}
    except (KeyError, ValueError, TypeError):
        return None
    cas = authority.split_pem(raw["ca.crt"])
    if not cas:
        return None
    try:
        for pem in [raw["tls.crt"], *cas]:
            x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    return Material(ca=KeyPair(cas[0], raw["ca.key"]), serving=KeyPair(raw["tls.crt"], raw["tls.key"]),
                    previous_cas=tuple(cas[1:]))


def to_secret(material: Material, *, name: str, namespace: str, now: dt.datetime | None = None,
              base: Mapping[str, Any] | None = None) -> Obj:
    """The Secret holding `material` (on top of `base`, an existing Secret, keeping its metadata)."""
    secret: Obj = copy.deepcopy(dict(base)) if base else {}
    secret["apiVersion"], secret["kind"] = "v1", "Secret"
    meta = secret.setdefault("metadata", {})
    meta["name"], meta["namespace"] = name, namespace
    labels = meta.setdefault("labels", {})
    labels.setdefault("app.kubernetes.io/name", "lahar")
    labels.setdefault("app.kubernetes.io/component", "webhook-certs")
    secret["type"] = "kubernetes.io/tls"
    secret["data"] = {
        "tls.crt": _b64(material.serving.cert_pem),
        "tls.key": _b64(material.serving.key_pem),
        "ca.crt": _b64(material.trust_bundle(now)),
        "ca.key": _b64(material.ca.key_pem),
    }
    secret.pop("stringData", None)
    return secret


# ---------------------------------------------------------------------------------------------------------------
# deciding (pure)


class Action(enum.StrEnum):
    KEEP = "keep"
    NEW = "new"                       # nothing usable: a new CA and serving certificate
    RENEW_SERVING = "renew-serving"   # same CA, new serving certificate
    ROLL_CA = "roll-ca"               # new CA (the old one stays trusted until it expires) and serving certificate


@dataclass(frozen=True)
class Plan:
    action: Action
    reason: str


def plan(material: Material | None, *, hosts: Sequence[str], now: dt.datetime) -> Plan:
    """What to do with the stored material so the serving certificate is valid, fresh and covers `hosts`.

    Renewal is due when less than a third of a certificate's lifetime remains (`rotation.needs_renewal`); a CA due
    for renewal is rolled, never replaced in place, so certificates it signed stay trusted meanwhile.
    """
    if material is None:
        return Plan(Action.NEW, "no certificates stored yet")
    ca, serving = material.ca, material.serving
    try:
        ca_cert = ca.certificate
        ca.private_key  # noqa: B018 - parse check
        serving_cert = serving.certificate
        serving.private_key  # noqa: B018
    except (ValueError, TypeError, AssertionError) as exc:
        return Plan(Action.NEW, f"stored certificates do not load: {exc}")
    if rotation.needs_renewal(ca_cert, now):
        return Plan(Action.ROLL_CA, f"CA expires {ca_cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}, "
                                    f"less than a third of its lifetime left")
    if not authority.is_signed_by(serving.cert_pem, ca.cert_pem):
        return Plan(Action.RENEW_SERVING, "serving certificate is not signed by the stored CA")
    if not _key_matches(serving):
        return Plan(Action.RENEW_SERVING, "serving key does not match the serving certificate")
    missing = [h for h in hosts if h not in authority.hosts(serving.cert_pem)]
    if missing:
        return Plan(Action.RENEW_SERVING, f"serving certificate does not cover {', '.join(missing)}")
    if rotation.needs_renewal(serving_cert, now):
        return Plan(Action.RENEW_SERVING, f"serving certificate expires "
                                          f"{serving_cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}, "
                                          f"less than a third of its lifetime left")
    return Plan(Action.KEEP, f"valid until {serving_cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}, "
                             f"renewal due from {rotation.renewal_due_at(serving_cert):%Y-%m-%dT%H:%M:%SZ}")


def _key_matches(pair: KeyPair) -> bool:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return pair.certificate.public_key().public_bytes(*fmt) == pair.private_key.public_key().public_bytes(*fmt)


def renew(decision: Plan, material: Material | None, *, hosts: Sequence[str], common_name: str,
          days: int = DEFAULT_DAYS, ca_days: int = DEFAULT_CA_DAYS, now: dt.datetime | None = None) -> Material | None:
    """Carry out `decision` (certificates valid from `now`): the new material, or None for KEEP."""
    if decision.action is Action.KEEP:
        return None
    previous: tuple[bytes, ...] = ()
    if decision.action is Action.RENEW_SERVING and material is not None:
        ca = material.ca
        previous = material.previous_cas
    else:
        ca = authority.new_ca(CA_COMMON_NAME, days=ca_days, now=now)
        if decision.action is Action.ROLL_CA and material is not None:
            previous = (material.ca.cert_pem, *material.previous_cas)
    serving = authority.issue(ca, common_name=common_name, hosts=list(hosts), days=days, now=now)
    return Material(ca=ca, serving=serving, previous_cas=previous)


# ---------------------------------------------------------------------------------------------------------------
# webhook configurations (pure)


def load_templates(directory: str | os.PathLike[str]) -> list[Obj]:
    """The Mutating/ValidatingWebhookConfiguration documents of the YAML files in `directory` (sorted by file)."""
    out: list[Obj] = []
    for path in sorted(Path(directory).glob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in _CONFIG_TYPES:
                out.append(doc)
    if not out:
        raise FileNotFoundError(f"no webhook configurations in {directory}")
    return out


def _scheduler_expression(names: Sequence[str]) -> str:
    quoted = ", ".join("'" + n.replace("\\", "\\\\").replace("'", "\\'") + "'" for n in names)
    return f"has(object.spec.schedulerName) && object.spec.schedulerName in [{quoted}]"


def _other_pods_expression(names: Sequence[str]) -> str:
    quoted = ", ".join("'" + n.replace("\\", "\\\\").replace("'", "\\'") + "'" for n in names)
    return (f"!has(object.spec.schedulerName) || !(object.spec.schedulerName in [{quoted}]) || "
            f"request.operation != 'CREATE' || request.resource.resource != 'pods'")


def render(template: Mapping[str, Any], *, ca_bundle: bytes, namespace: str = TEMPLATE_NAMESPACE,
           service: str | None = None, url: str | None = None,
           scheduler_names: Sequence[str] | None = None, policies: PolicyDemand | None = None) -> Obj:
    """A webhook configuration from its template: `caBundle` set; with `url`, `clientConfig.url = url + path`
    (no Service); else the Service renamed to `service` (when given) in `namespace`. `namespace` also replaces
    lahar-system in the namespaceSelector; `scheduler_names` rewrites the pod webhooks' scheduler matchConditions;
    `policies` keeps the policy-only entries to what they could match (`policy_webhooks`; None: all of them).
    The parameters are recorded in the annotation `lahar.sh/rendered-with` (`render_parameters` reads them back).
    """
    config = policy_webhooks(template, policies)
    meta = config.setdefault("metadata", {})
    meta.setdefault("annotations", {})[RENDERED_WITH] = json.dumps(
        {"namespace": namespace, "service": service, "url": url,
         "schedulerNames": list(scheduler_names) if scheduler_names else None}, sort_keys=True)
    for hook in config.get("webhooks") or []:
        client = hook.setdefault("clientConfig", {})
        svc = dict(client.get("service") or {})
        path = svc.get("path") or ""
        if url:
            hook["clientConfig"] = {"url": url.rstrip("/") + path}
        else:
            svc["namespace"] = namespace
            if service:
                svc["name"] = service
            hook["clientConfig"] = {"service": svc}
        hook["clientConfig"]["caBundle"] = _b64(ca_bundle)
        for expr in ((hook.get("namespaceSelector") or {}).get("matchExpressions") or []):
            values = expr.get("values")
            if isinstance(values, list):
                expr["values"] = list(dict.fromkeys(namespace if v == TEMPLATE_NAMESPACE else v for v in values))
        if scheduler_names:
            for cond in hook.get("matchConditions") or []:
                if cond.get("name") == TEMPLATE_SCHEDULER_CONDITION:
                    cond["expression"] = _scheduler_expression(scheduler_names)
                elif cond.get("name") == TEMPLATE_OTHER_PODS_CONDITION:
                    cond["expression"] = _other_pods_expression(scheduler_names)
    return config


def render_parameters(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keyword arguments of `render` that made `config` (its `lahar.sh/rendered-with` annotation and the
    caBundle of its entries), or None when it was not made by `render` (applied by hand, by Helm)."""
    raw = ((config.get("metadata") or {}).get("annotations") or {}).get(RENDERED_WITH)
    bundle = next((h["clientConfig"]["caBundle"] for h in config.get("webhooks") or []
                   if (h.get("clientConfig") or {}).get("caBundle")), None)
    if not raw or bundle is None:
        return None
    try:
        recorded = json.loads(raw)
        params = {"ca_bundle": base64.b64decode(bundle), "namespace": str(recorded["namespace"]),
                  "service": recorded.get("service"), "url": recorded.get("url"),
                  "scheduler_names": recorded.get("schedulerNames")}
    except (ValueError, TypeError, KeyError):
        return None
    return params


# ---------------------------------------------------------------------------------------------------------------
# the policy-only entries (pure)


# A resource rule as the policies' matchConstraints write it: apiGroups, resources, operations ("*" wildcards).
PolicyRule = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class PolicyDemand:
    """What the AdmissionPolicies in force could match, per phase: the resource rules of the policies that have
    mutations (`mutating`) and of those that have validations (`validating`). Plain data, so `certs` needs no
    policy model; `webhooks.policystage.Policies.demand()` and `lahar certs ensure` build it."""

    mutating: tuple[PolicyRule, ...] = ()
    validating: tuple[PolicyRule, ...] = ()

    @classmethod
    def everything(cls) -> PolicyDemand:
        """A policy that could match anything in either phase (an unreadable policy ConfigMap counts as one)."""
        anything = {"apiGroups": ("*",), "resources": ("*",), "operations": ("*",)}
        return cls(mutating=(anything,), validating=(anything,))

    def phase(self, name: str) -> tuple[PolicyRule, ...]:
        return self.mutating if name == "mutating" else self.validating


def _either_wildcard(a: str, b: str) -> bool:
    return a == b or a == "*" or b == "*"


def _resource_covered(pattern: str, resource: str) -> bool:
    """A policy's resource pattern (`jobs`, `*`, `jobs/*`, `*/*`, `jobs/status`) against a webhook rule's main
    resource (`jobs`, or `*`): subresource-only patterns never see a main resource."""
    res, slash, sub = pattern.partition("/")
    if slash and sub != "*":
        return False
    return _either_wildcard(res, resource)


def _covers_request(policy: PolicyRule, group: str, resource: str, operation: str) -> bool:
    return (any(_either_wildcard(g, group) for g in policy.get("apiGroups") or ("*",))
            and any(_either_wildcard(o, operation) for o in policy.get("operations") or ("*",))
            and any(_resource_covered(r, resource) for r in policy.get("resources") or ()))


def _narrowed_rules(rules: Sequence[Mapping[str, Any]], policies: Sequence[PolicyRule]) -> list[Obj]:
    """The webhook rules cut down to the (group, resource, operation) some policy rule covers; a rule splits
    where its resources need different operations. Versions, scope, names and selectors are not compared: over
    them the entry is kept wider than needed, never narrower."""
    out: list[Obj] = []
    for rule in rules:
        split: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                ops = tuple(op for op in rule.get("operations") or ()
                            if any(_covers_request(p, group, resource, op) for p in policies))
                if ops:
                    split.setdefault((group, ops), []).append(resource)
        for (group, ops), resources in split.items():
            out.append({**copy.deepcopy(dict(rule)), "apiGroups": [group], "operations": list(ops),
                        "resources": resources})
    return out


def policy_webhooks(template: Mapping[str, Any], policies: PolicyDemand | None) -> Obj:
    """The webhook configuration `template` with its policy-only entries (those calling a path of
    `POLICY_PATHS`) kept only while a policy of their phase could match, their rules cut down to what the
    policies could match; an entry nothing is left of is dropped. `policies` None: every entry as written.

    Nothing is lost: such an entry answers allow-without-patch to whatever no policy of its phase matches."""
    config = copy.deepcopy(dict(template))
    if policies is None:
        return config
    hooks: list[Obj] = []
    for hook in config.get("webhooks") or []:
        phase = POLICY_PATHS.get(((hook.get("clientConfig") or {}).get("service") or {}).get("path") or "")
        if phase is None:
            hooks.append(hook)
            continue
        rules = _narrowed_rules(hook.get("rules") or [], policies.phase(phase))
        if rules:
            hooks.append({**hook, "rules": rules})
    config["webhooks"] = hooks
    return config


def _covers(desired: Any, actual: Any) -> bool:
    """True when every field of `desired` has the same value in `actual` (the server may add defaults)."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(_covers(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(actual, list) and len(desired) == len(actual)
                and all(_covers(d, a) for d, a in zip(desired, actual, strict=True)))
    return desired == actual


# ---------------------------------------------------------------------------------------------------------------
# files for the webhook server


def _atomic_write(path: Path, data: bytes, mode: int) -> bool:
    """Replace `path` by `data` via rename (a reader never sees half a file); False when it already holds it."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def write_files(material: Material, directory: str | os.PathLike[str], *, now: dt.datetime | None = None) -> bool:
    """Write `ca.crt` (trust bundle), `tls.crt` and `tls.key` to `directory`; True when anything changed.

    The key goes first: a reloader that sees the new key with the old certificate rejects the mismatch and takes
    the pair on its next poll, once the certificate has followed.
    """
    directory = Path(directory)
    changed = _atomic_write(directory / "tls.key", material.serving.key_pem, 0o600)
    changed |= _atomic_write(directory / "tls.crt", material.serving.cert_pem, 0o644)
    changed |= _atomic_write(directory / "ca.crt", material.trust_bundle(now), 0o644)
    return changed


# ---------------------------------------------------------------------------------------------------------------
# the shell


@dataclass
class EnsureResult:
    plan: Plan
    material: Material
    secret: str                                   # created | updated | unchanged
    configurations: dict[str, str] = field(default_factory=dict)   # name → created | updated | unchanged
    files_changed: bool = False
    conflicts: int = 0                            # 409s met and retried

    def summary(self) -> list[str]:
        lines = [f"certificates: {self.plan.action} ({self.plan.reason})", f"secret: {self.secret}"]
        lines += [f"{name}: {state}" for name, state in self.configurations.items()]
        if self.files_changed:
            lines.append("files: written")
        return lines


def _retry(fn: Callable[[], str], *, attempts: int, counter: list[int]) -> str:
    for attempt in range(attempts):
        try:
            return fn()
        except (errors.Conflict, errors.AlreadyExists):
            counter[0] += 1
            if attempt == attempts - 1:
                raise
            time.sleep(min(0.05 * 2 ** attempt, 1.0))
    raise AssertionError("unreachable")


def _sync_config(client: Any, desired: Obj, *, create: bool) -> str:
    """Make the stored configuration hold `desired`'s webhooks, labels and annotations: created (when `create`),
    updated or unchanged; `absent` when it does not exist and `create` is False."""
    rt = _CONFIG_TYPES[desired["kind"]]
    meta = desired.get("metadata") or {}
    try:
        current = client.get(rt, meta["name"])
    except errors.NotFound:
        if not create:
            return "absent"
        client.create(rt, desired)
        return "created"
    have = current.get("metadata") or {}
    if (_covers(desired.get("webhooks") or [], current.get("webhooks") or [])
            and _covers(meta.get("labels") or {}, have.get("labels") or {})
            and _covers(meta.get("annotations") or {}, have.get("annotations") or {})):
        return "unchanged"
    body = copy.deepcopy(current)
    body["webhooks"] = desired.get("webhooks") or []
    for key in ("labels", "annotations"):
        body.setdefault("metadata", {}).setdefault(key, {}).update(meta.get(key) or {})
    client.update(rt, body)  # carries resourceVersion: a concurrent writer → 409, re-read and retried
    return "updated"


def sync_policy_webhooks(client: Any, templates: Iterable[Mapping[str, Any]], policies: PolicyDemand | None, *,
                         attempts: int = 8) -> dict[str, str]:
    """Register the policy-only entries the AdmissionPolicies in force need, and only those, in the
    configurations `ensure` made, rendered as `ensure` rendered them (`render_parameters`): name → updated |
    unchanged | absent (not created yet: `ensure` will) | foreign (not made by `ensure`: left alone).
    Level-based and idempotent; called on every policy change and periodically."""
    out: dict[str, str] = {}
    conflicts = [0]
    for template in templates:
        name = (template.get("metadata") or {}).get("name") or ""
        rt = _CONFIG_TYPES[template["kind"]]

        def sync(template: Mapping[str, Any] = template, rt: ResourceType = rt, name: str = name) -> str:
            try:
                current = client.get(rt, name)
            except errors.NotFound:
                return "absent"
            params = render_parameters(current)
            if params is None:
                return "foreign"
            return _sync_config(client, render(template, policies=policies, **params), create=False)

        out[name] = _retry(sync, attempts=attempts, counter=conflicts)
    return out


def ensure(client: Any, *, namespace: str, secret_name: str, hosts: Sequence[str],
           templates: Iterable[Mapping[str, Any]] = (), url: str | None = None, service: str | None = None,
           out_dir: str | os.PathLike[str] | None = None, days: int = DEFAULT_DAYS,
           ca_days: int = DEFAULT_CA_DAYS, scheduler_names: Sequence[str] | None = None,
           policies: PolicyDemand | None = None, now: dt.datetime | None = None, attempts: int = 8) -> EnsureResult:
    """Bring the Secret, the webhook configurations and `out_dir` up to date (idempotent; 409s re-read and retried).
    `policies`: what the AdmissionPolicies in force could match (`policy_webhooks`); None registers every entry.

    `client` is a `kube.client.ClusterClient`; the namespace is created when absent. `now` is the clock the
    decisions use (tests move it forward); new certificates are always valid from the real present, since a
    certificate dated in the future would be refused by every client.
    """
    now = now or dt.datetime.now(dt.UTC)
    conflicts = [0]
    common_name = service or (hosts[0] if hosts else "lahar-webhook")
    try:
        client.create(_NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    except errors.AlreadyExists:
        pass
    except errors.Forbidden:
        pass  # may not list/create namespaces; the Secret write below says what is wrong if it is really absent

    outcome: dict[str, Any] = {}

    def sync_secret() -> str:
        try:
            current = client.get(_SECRET, secret_name, namespace=namespace)
        except errors.NotFound:
            current = None
        material = from_secret(current)
        decision = plan(material, hosts=hosts, now=now)
        fresh = renew(decision, material, hosts=hosts, common_name=common_name, days=days, ca_days=ca_days)
        outcome["plan"] = decision
        if fresh is None:
            assert material is not None
            outcome["material"] = material
            # prune expired previous CAs from the stored bundle
            desired = to_secret(material, name=secret_name, namespace=namespace, now=now, base=current)
            if current is not None and (desired.get("data") != current.get("data")
                                        or desired.get("type") != current.get("type")):
                client.update(_SECRET, desired, namespace=namespace)
                return "updated"
            return "unchanged"
        outcome["material"] = fresh
        body = to_secret(fresh, name=secret_name, namespace=namespace, now=now, base=current)
        if current is None:
            client.create(_SECRET, body, namespace=namespace)
            return "created"
        client.update(_SECRET, body, namespace=namespace)  # carries resourceVersion: a concurrent writer → 409
        return "updated"

    secret_state = _retry(sync_secret, attempts=attempts, counter=conflicts)
    material: Material = outcome["material"]
    result = EnsureResult(plan=outcome["plan"], material=material, secret=secret_state)
    bundle = material.trust_bundle(now)

    for template in templates:
        desired = render(template, ca_bundle=bundle, namespace=namespace, service=service, url=url,
                         scheduler_names=scheduler_names, policies=policies)
        result.configurations[desired["metadata"]["name"]] = _retry(
            lambda desired=desired: _sync_config(client, desired, create=True), attempts=attempts, counter=conflicts)

    if out_dir is not None:
        result.files_changed = write_files(material, out_dir, now=now)
    result.conflicts = conflicts[0]
    return result

