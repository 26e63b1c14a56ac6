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
    "ensure",
    "from_secret",
    "load_templates",
    "plan",
    "render",
    "renew",
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


def render(template: Mapping[str, Any], *, ca_bundle: bytes, namespace: str = TEMPLATE_NAMESPACE,
           service: str | None = None, url: str | None = None,
           scheduler_names: Sequence[str] | None = None) -> Obj:
    """A webhook configuration from its template: `caBundle` set; with `url`, `clientConfig.url = url + path`
    (no Service); else the Service renamed to `service` (when given) in `namespace`. `namespace` also replaces
    lahar-system in the namespaceSelector; `scheduler_names` rewrites the pod webhooks' scheduler matchCondition.
    """
    config = copy.deepcopy(dict(template))
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


def ensure(client: Any, *, namespace: str, secret_name: str, hosts: Sequence[str],
           templates: Iterable[Mapping[str, Any]] = (), url: str | None = None, service: str | None = None,
           out_dir: str | os.PathLike[str] | None = None, days: int = DEFAULT_DAYS,
           ca_days: int = DEFAULT_CA_DAYS, scheduler_names: Sequence[str] | None = None,
           now: dt.datetime | None = None, attempts: int = 8) -> EnsureResult:
    """Bring the Secret, the webhook configurations and `out_dir` up to date (idempotent; 409s re-read and retried).

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
                         scheduler_names=scheduler_names)
        rt = _CONFIG_TYPES[desired["kind"]]
        name = desired["metadata"]["name"]

        def sync_config(desired: Obj = desired, rt: ResourceType = rt, name: str = name) -> str:
            try:
                current = client.get(rt, name)
            except errors.NotFound:
                client.create(rt, desired)
                return "created"
            if (_covers(desired.get("webhooks"), current.get("webhooks"))
                    and _covers((desired.get("metadata") or {}).get("labels") or {},
                                (current.get("metadata") or {}).get("labels") or {})):
                return "unchanged"
            body = copy.deepcopy(current)
            body["webhooks"] = desired["webhooks"]
            body.setdefault("metadata", {}).setdefault("labels", {}).update(
                (desired.get("metadata") or {}).get("labels") or {})
            client.update(rt, body)
            return "updated"

        result.configurations[name] = _retry(sync_config, attempts=attempts, counter=conflicts)

    if out_dir is not None:
        result.files_changed = write_files(material, out_dir, now=now)
    result.conflicts = conflicts[0]
    return result

