"""devcluster's admission chain: kube-apiserver's webhook dispatch over the store's AdmissionPort.

The store calls `mutate` then `validate` around every write; this module matches the registered
`admissionregistration.k8s.io/v1` webhooks (rules, selectors, CEL matchConditions) and calls them over HTTPS.

Matching and message building are pure functions (`rule_matches`, `selector_matches`, `webhook_matches`,
`build_review`, `denied`, `calling_failed`); `WebhookAdmission` is the thin shell that reads configurations from
the store (a watch drained on each request, so it costs nothing when nothing changed) and does the HTTP calls.
A call costs little CPU (pod creates go through four): rules are matched before the namespace is looked up, one
kept-alive urllib3 pool per webhook endpoint and caBundle, orjson both ways, one copy of the object per patch, and
CEL conditions get only the variables they name, converted without celpy's generic type checks.
Differences from kube-apiserver, on purpose: `matchPolicy: Equivalent` does not map between equivalent
group-versions (devcluster serves one version per resource), `reinvocationPolicy` is ignored, the `authorizer`
CEL variable is absent, and when several validating webhooks deny, the first in configuration order is reported
(kube reports whichever finished first).
"""

from __future__ import annotations

import base64
import concurrent.futures
import copy
import json
import re
import socket
import ssl
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson
import urllib3

from lahar.kube import errors
from lahar.kube.resources import ResourceType

__all__ = [
    "AdmissionCall",
    "CelUnavailable",
    "WebhookAdmission",
    "build_review",
    "calling_failed",
    "denied",
    "dry_run_unsupported",
    "rule_matches",
    "selector_matches",
    "service_url",
    "sorted_webhooks",
    "to_cel",
    "webhook_matches",
    "webhook_url",
]

Obj = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
# kube-apiserver never calls webhooks for its own admission configuration objects (IsExemptAdmissionConfigurationResource)
_EXEMPT = frozenset({MUTATING, VALIDATING, "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                     "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})
DEFAULT_TIMEOUT_SECONDS = 10
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class CelUnavailable(RuntimeError):
    """A matchCondition could not be evaluated because no CEL implementation is installed."""


@dataclass(frozen=True)
class AdmissionCall:
    """One admission request, in the terms kube-apiserver's webhook dispatcher uses (admission.Attributes)."""

    operation: str                      # CREATE | UPDATE | DELETE | CONNECT
    group: str
    version: str
    resource: str                       # plural
    subresource: str = ""
    namespace: str = ""                 # for a Namespace object itself: its own name (as kube sets it)
    name: str = ""
    kind: tuple[str, str, str] = ("", "", "")  # group, version, kind of the object sent
    obj: Obj | None = None
    old_obj: Obj | None = None
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    dry_run: bool = False
    options: Obj | None = None

    @property
    def is_namespace_object(self) -> bool:
        return self.group == "" and self.resource == "namespaces"

    @classmethod
    def from_attributes(cls, attrs: Any) -> AdmissionCall:
        """Adapt the store's `AdmissionAttributes(operation, rt, subresource, namespace, name, obj, old_obj, ...)`."""
        rt: ResourceType = attrs.rt
        request = getattr(attrs, "request", None)
        obj = attrs.obj
        old = attrs.old_obj
        operation = str(attrs.operation).upper()
        name = attrs.name or ((obj or {}).get("metadata") or {}).get("name") or ""
        namespace = attrs.namespace or ""
        if rt.group == "" and rt.plural == "namespaces":
            namespace = name
        sub = attrs.subresource or ""
        kind = (rt.group, rt.version, rt.kind)
        sent = obj if obj is not None else old
        if isinstance(sent, dict) and sent.get("kind") and sent.get("apiVersion"):
            g, _, v = str(sent["apiVersion"]).rpartition("/")
            kind = (g, v, str(sent["kind"]))
        return cls(operation=operation, group=rt.group, version=rt.version, resource=rt.plural, subresource=sub,
                   namespace=namespace, name=name, kind=kind, obj=obj, old_obj=old,
                   username=getattr(request, "user", "") or "", uid=getattr(request, "uid", "") or "",
                   groups=tuple(getattr(request, "groups", ()) or ()),
                   dry_run=bool(getattr(request, "dry_run", False)), options=getattr(attrs, "options", None))


# ---------------------------------------------------------------------------------------------------------------
# matching (pure)


def rule_matches(rule: Mapping[str, Any], call: AdmissionCall) -> bool:
    """kube's `rules.Matcher.Matches`: operations, apiGroups, apiVersions, resources (with subresources) and scope."""
    ops = rule.get("operations") or []
    if not ("*" in ops or call.operation in ops):
        return False
    groups = rule.get("apiGroups") or []
    if not ("*" in groups or call.group in groups):
        return False
    versions = rule.get("apiVersions") or []
    if not ("*" in versions or call.version in versions):
        return False
    if not _resource_matches(rule.get("resources") or [], call.resource, call.subresource):
        return False
    scope = rule.get("scope") or "*"
    if scope == "Namespaced":
        return not call.is_namespace_object and call.namespace != ""
    if scope == "Cluster":
        return call.is_namespace_object or call.namespace == ""
    return True


def _resource_matches(patterns: Iterable[str], resource: str, subresource: str) -> bool:
    for pattern in patterns:
        res, _, sub = pattern.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """A metav1.LabelSelector against a label set; a nil or empty selector matches everything."""
    labels = labels or {}
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            if key not in labels or labels[key] not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            raise errors.BadRequest(f'"{op}" is not a valid label selector operator')
    return True


def _labels(obj: Obj | None) -> dict[str, str] | None:
    if not isinstance(obj, dict):
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


def webhook_matches(webhook: Mapping[str, Any], call: AdmissionCall,
                    namespace_labels: Callable[[str], Mapping[str, str]]) -> bool:
    """kube's `ShouldCallHook` (without matchConditions): namespaceSelector, objectSelector, then the rules.

    `namespace_labels(name)` is asked only when needed; it raises `errors.NotFound` for a missing namespace, which
    (as in kube) fails the request only when the rules match. The rules are checked first: when they do not match,
    the answer is False whatever the selectors say (kube too ignores a broken selector then), and no namespace is read.
    """
    if not any(rule_matches(rule, call) for rule in webhook.get("rules") or []):
        return False
    ns_error: errors.ApiError | None = None
    ns_selector = webhook.get("namespaceSelector")
    if selector_matches_all(ns_selector) or (call.namespace == "" and not call.is_namespace_object):
        ns_ok = True
    else:
        if call.is_namespace_object and call.subresource == "" and call.operation in ("CREATE", "UPDATE"):
            labels = _labels(call.obj) or {}
        else:
            try:
                labels = dict(namespace_labels(call.namespace))
            except errors.ApiError as exc:
                labels, ns_error = {}, exc
        ns_ok = ns_error is None and selector_matches(ns_selector, labels)
    if not ns_ok and ns_error is None:
        return False
    obj_selector = webhook.get("objectSelector")
    if not selector_matches_all(obj_selector):
        new, old = _labels(call.obj), _labels(call.old_obj)
        if not ((new is not None and selector_matches(obj_selector, new))
                or (old is not None and selector_matches(obj_selector, old))):
            return False
    if ns_error is not None:
        raise ns_error
    return True


def selector_matches_all(selector: Mapping[str, Any] | None) -> bool:
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


def sorted_webhooks(configurations: Iterable[Obj]) -> list[tuple[str, Obj]]:
    """(configuration name, webhook) in call order: configurations by name, then webhook order inside each."""
    out: list[tuple[str, Obj]] = []
    for config in sorted(configurations, key=lambda c: (c.get("metadata") or {}).get("name") or ""):
        name = (config.get("metadata") or {}).get("name") or ""
        out.extend((name, hook) for hook in config.get("webhooks") or [])
    return out


# ---------------------------------------------------------------------------------------------------------------
# CEL matchConditions


_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


class _Cel:
    """Compiled-program cache over cel-python (`celpy`); each expression gets only the variables it names."""

    def __init__(self) -> None:
        self._programs: dict[str, tuple[Any, frozenset[str]]] = {}
        self._lock = threading.Lock()
        try:
            import celpy  # noqa: PLC0415 — optional at import time, required only when a webhook uses CEL
        except ImportError:  # pragma: no cover - cel-python is a dependency
            self._celpy = None
        else:
            self._celpy = celpy

    def evaluate(self, expression: str, activation: Mapping[str, Any]) -> Any:
        if self._celpy is None:
            raise CelUnavailable(f"CEL is not available to evaluate {expression!r}: install cel-python")
        celpy = self._celpy
        with self._lock:
            entry = self._programs.get(expression)
            if entry is None:
                env = celpy.Environment()
                # a CEL expression can only reach a variable by writing its name (an identifier in a string literal
                # just adds an unused variable): the others need no conversion
                entry = (env.program(env.compile(expression)), frozenset(_IDENTIFIER.findall(expression)))
                self._programs[expression] = entry
        program, names = entry
        result = program.evaluate({k: to_cel(v) for k, v in activation.items() if k in names})
        if isinstance(result, Exception):
            raise result
        return result


def to_cel(value: Any) -> Any:
    """`celpy.adapter.json_to_cel`, the same CEL values, dispatching on the exact type of plain JSON data (celpy's
    checks against typing generics cost most of a conversion); anything else goes to celpy."""
    from celpy import celtypes  # noqa: PLC0415 — loaded with celpy, only when a webhook uses CEL

    def convert(v: Any) -> Any:
        t = type(v)
        if t is str:
            return celtypes.StringType(v)
        if t is dict:
            return celtypes.MapType({convert(k): convert(x) for k, x in v.items()})
        if t is list:
            return celtypes.ListType([convert(x) for x in v])
        if t is bool:
            return celtypes.BoolType(v)
        if t is int:
            return celtypes.IntType(v)
        if t is float:
            return celtypes.DoubleType(v)
        if v is None:
            return None
        from celpy.adapter import json_to_cel  # noqa: PLC0415

        return json_to_cel(v)

    return convert(value)


_CEL = _Cel()


def match_conditions(webhook: Mapping[str, Any], call: AdmissionCall, request: Obj) -> bool:
    """kube's matchconditions.Matcher: any false → skip; errors → Ignore skips, Fail raises Forbidden."""
    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    activation = {"object": call.obj, "oldObject": call.old_obj, "request": request}
    failures: list[str] = []
    for cond in conditions:
        expr = cond.get("expression", "")
        try:
            value = _CEL.evaluate(expr, activation)
        except Exception as exc:  # celpy raises its own parse/eval errors
            failures.append(f"expression '{expr}' resulted in error: {_cel_error_text(exc)}")
            continue
        if not isinstance(value, bool) and type(value).__name__ != "BoolType":
            failures.append(f"expression '{expr}' resulted in error: no such overload")
            continue
        if not bool(value):
            return False
    if failures:
        if (webhook.get("failurePolicy") or "Fail") == "Ignore":
            return False
        group_res = call.resource + (f".{call.group}" if call.group else "")
        text = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        raise errors.Forbidden(f'{group_res} "{call.name}" is forbidden: {text}',
                               details={"name": call.name, "group": call.group, "kind": call.resource})
    return True


def _cel_error_text(exc: Exception) -> str:
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0].splitlines()[0]
    return str(exc) or type(exc).__name__


# ---------------------------------------------------------------------------------------------------------------
# review and errors (pure)


def build_review(call: AdmissionCall, *, uid: str | None = None) -> Obj:
    """The `admission.k8s.io/v1` AdmissionReview kube-apiserver sends (CreateV1AdmissionReview)."""
    g, v, k = call.kind
    request: Obj = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": g, "version": v, "kind": k},
        "resource": {"group": call.group, "version": call.version, "resource": call.resource},
    }
    if call.subresource:
        request["subResource"] = call.subresource
    request["requestKind"] = {"group": g, "version": v, "kind": k}
    request["requestResource"] = {"group": call.group, "version": call.version, "resource": call.resource}
    if call.subresource:
        request["requestSubResource"] = call.subresource
    if call.name:
        request["name"] = call.name
    if call.namespace:
        request["namespace"] = call.namespace
    request["operation"] = call.operation
    user: Obj = {"username": call.username}
    if call.uid:
        user["uid"] = call.uid
    if call.groups:
        user["groups"] = list(call.groups)
    request["userInfo"] = user
    request["object"] = call.obj
    request["oldObject"] = call.old_obj
    request["dryRun"] = call.dry_run
    request["options"] = _options(call)
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def _options(call: AdmissionCall) -> Obj | None:
    kind = _OPTIONS_KIND.get(call.operation)
    if kind is None:
        return call.options
    options = dict(call.options or {})
    options.setdefault("kind", kind)
    options.setdefault("apiVersion", "meta.k8s.io/v1")
    if call.dry_run:
        options.setdefault("dryRun", ["All"])
    # kind/apiVersion first, as Go marshals TypeMeta
    return {"kind": options.pop("kind"), "apiVersion": options.pop("apiVersion"), **options}


def denied(webhook_name: str, result: Mapping[str, Any] | None) -> errors.ApiError:
    """kube's `webhookerrors.ToStatusErr`: the denial as a Status error (code < 400 → 403)."""
    result = dict(result or {})
    code = result.get("code") or 0
    if code < 400:
        code = 403
    prefix = f'admission webhook "{webhook_name}" denied the request'
    if result.get("message"):
        message = f"{prefix}: {result['message']}"
    elif result.get("reason"):
        message = f"{prefix}: {result['reason']}"
    else:
        message = f"{prefix} without explanation"
    reason = result.get("reason") or ""
    cls = _error_class(code)
    return cls(message, code=code, reason=reason, details=result.get("details"))


def _error_class(code: int) -> type[errors.ApiError]:
    try:
        return type(errors.from_status({}, code=code))
    except Exception:  # pragma: no cover
        return errors.ApiError


def calling_failed(webhook_name: str, reason: str) -> errors.ApiError:
    """`apierrors.NewInternalError(ErrCallingWebhook)` as kube-apiserver returns it with failurePolicy Fail."""
    text = f'failed calling webhook "{webhook_name}": {reason}'
    return errors.ApiError(f"Internal error occurred: {text}", code=500, reason="InternalError",
                           details={"causes": [{"message": text}]})


def dry_run_unsupported(webhook_name: str) -> errors.ApiError:
    return errors.BadRequest(f'admission webhook "{webhook_name}" does not support dry run')


def service_url(service: Mapping[str, Any]) -> str:
    port = service.get("port") or 443
    path = service.get("path") or ""
    return f"https://{service.get('name')}.{service.get('namespace')}.svc:{port}{path}"


def webhook_url(webhook: Mapping[str, Any]) -> str:
    cfg = webhook.get("clientConfig") or {}
    if cfg.get("url"):
        return str(cfg["url"])
    return service_url(cfg.get("service") or {})


def _go_duration(seconds: int) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


# ---------------------------------------------------------------------------------------------------------------
# transport


class _CallError(Exception):
    """The webhook could not be called or answered nonsense: `str(self)` is kube's ErrCallingWebhook reason."""


class _Transport:
    """Kept-alive urllib3 connection pools, one per (scheme, host, port, caBundle), each verifying the server against
    that bundle (system roots without one); a call reuses an idle TLS connection of its pool when there is one."""

    def __init__(self, *, maxsize: int = 32) -> None:
        self._maxsize = maxsize
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
        self._targets: dict[tuple[str, str], tuple[urllib3.HTTPConnectionPool, str]] = {}
        self._lock = threading.Lock()

    def _context(self, ca_bundle: str) -> ssl.SSLContext:
        ctx = self._contexts.get(ca_bundle)
        if ctx is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle).decode()
                    ctx = ssl.create_default_context(cadata=pem)
                except (ValueError, ssl.SSLError) as exc:
                    raise _CallError(f"failed to call webhook: unable to load root certificates: {exc}") from exc
            else:
                ctx = ssl.create_default_context()
            self._contexts[ca_bundle] = ctx
        return ctx

    def target(self, url: str, ca_bundle: str) -> tuple[urllib3.HTTPConnectionPool, str]:
        """The pool serving `url` and the request target (path and query) to send it."""
        key = (url, ca_bundle)
        found = self._targets.get(key)
        if found is not None:
            return found
        with self._lock:
            parsed = urllib3.util.parse_url(url)
            scheme = (parsed.scheme or "https").lower()
            host = parsed.host or ""
            port = parsed.port or (80 if scheme == "http" else 443)
            pool_key = (scheme, host, port, ca_bundle)
            pool = self._pools.get(pool_key)
            if pool is None:
                if scheme == "https":
                    pool = urllib3.HTTPSConnectionPool(host, port, ssl_context=self._context(ca_bundle),
                                                       maxsize=self._maxsize, block=False, retries=False)
                else:
                    pool = urllib3.HTTPConnectionPool(host, port, maxsize=self._maxsize, block=False, retries=False)
                self._pools[pool_key] = pool
            found = (pool, parsed.request_uri)
            self._targets[key] = found
            return found

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
            self._targets.clear()

    def post(self, url: str, body: Obj, *, ca_bundle: str, timeout: float) -> Obj:
        target = f"{url}?timeout={_go_duration(int(timeout))}"
        prefix = f'failed to call webhook: Post "{target}"'
        try:
            pool, path = self.target(target, ca_bundle)
            resp = pool.urlopen("POST", path, body=_dumps(body), headers=_POST_HEADERS,
                                timeout=urllib3.Timeout(total=timeout), retries=False, redirect=False)
        except _CallError:
            raise
        except urllib3.exceptions.NewConnectionError as exc:  # a ConnectTimeoutError too, for urllib3's history
            raise _CallError(f"{prefix}: {_go_transport_error(exc, url)}") from exc
        except (urllib3.exceptions.TimeoutError, TimeoutError) as exc:
            raise _CallError(f"{prefix}: context deadline exceeded") from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise _CallError(f"{prefix}: {_go_transport_error(exc, url)}") from exc
        data = resp.data
        if resp.status < 200 or resp.status > 299:
            raise _CallError(f"failed to call webhook: {_http_status_text(resp.status, data)}")
        try:
            return _loads(data)
        except ValueError as exc:
            raise _CallError(f"failed to call webhook: {exc}") from exc


_POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, */*",
                 "User-Agent": "kube-apiserver-admission"}


def _dumps(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # integers beyond 64 bits, ...: the standard library takes them
        return json.dumps(body).encode()


def _loads(data: bytes) -> Any:
    """orjson, or the standard library where orjson refuses (its error texts, and NaN or huge numbers it accepts)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _go_transport_error(exc: BaseException, url: str) -> str:
    """Render a transport failure the way Go's net/http words it."""
    parsed = urllib3.util.parse_url(url)
    host = parsed.host
    port = parsed.port or 443
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        cur = todo.pop(0)
        if any(cur is s for s in seen):
            continue
        seen.append(cur)
        todo.extend(e for e in (cur.__cause__, cur.__context__, getattr(cur, "reason", None), *cur.args)
                    if isinstance(e, BaseException))
    for err in seen:
        if isinstance(err, ssl.SSLCertVerificationError):
            if "hostname" in (err.verify_message or "") or "IP address mismatch" in (err.verify_message or ""):
                return f"tls: failed to verify certificate: x509: certificate is not valid for {host}"
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        if isinstance(err, ssl.SSLError):
            return f"remote error: tls: {err.reason or err}"
        if isinstance(err, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
        if isinstance(err, ConnectionRefusedError):
            return f"dial tcp {host}:{port}: connect: connection refused"
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text or "No address associated" in text:
        return f"dial tcp: lookup {host}: no such host"
    if "refused" in text:
        return f"dial tcp {host}:{port}: connect: connection refused"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    return text or type(exc).__name__


def _http_status_text(status: int, data: bytes) -> str:
    try:
        body = _loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("message"):
        return str(body["message"])
    text = data.decode("utf-8", "replace").strip()
    if text:
        return f'an error on the server ("{text[:200]}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


def _verify_response(review: Any, uid: str, *, mutating: bool) -> Obj:
    """kube's VerifyAdmissionResponse for v1 reviews; returns `response`."""
    if not isinstance(review, dict):
        raise _CallError("received invalid webhook response: expected an AdmissionReview object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        raise _CallError(f"received invalid webhook response: expected webhook response of "
                         f"admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise _CallError("webhook response was absent")
    if response.get("uid") != uid:
        raise _CallError(f'received invalid webhook response: expected response.uid="{uid}", '
                         f'got "{response.get("uid", "")}"')
    patch_type = response.get("patchType")
    if not mutating and (response.get("patch") or patch_type):
        raise _CallError("received invalid webhook response: validating webhooks may not return patches")
    if response.get("patch") and not patch_type:
        raise _CallError("received invalid webhook response: webhook returned response.patch but not "
                         "response.patchType")
    if patch_type and patch_type != "JSONPatch":
        raise _CallError(f'received invalid webhook response: webhook returned invalid response.patchType of '
                         f'"{patch_type}"')
    return response


# ---------------------------------------------------------------------------------------------------------------
# the shell


@dataclass
class _ConfigCache:
    """Webhook configurations of one kind, kept current from a store watch drained on each request."""

    store: Any
    rt: ResourceType
    objects: dict[str, Obj] = field(default_factory=dict)
    hooks: list[tuple[str, Obj]] = field(default_factory=list)
    watch: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self) -> list[tuple[str, Obj]]:
        with self.lock:
            changed = False
            if self.watch is None:
                self.objects.clear()
                self.watch = self.store.watch(self.rt)
                changed = True
            while True:
                event = self.watch.next_event(0)
                if event is None:
                    break
                obj = event["object"]
                name = (obj.get("metadata") or {}).get("name") or ""
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.objects[name] = obj
                    changed = True
                elif event["type"] == "DELETED":
                    self.objects.pop(name, None)
                    changed = True
            if changed:
                self.hooks = sorted_webhooks(self.objects.values())
            return self.hooks

    def reset_locked(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self.watch = None

    def close(self) -> None:
        with self.lock:
            self.reset_locked()


class WebhookAdmission:
    """The store's AdmissionPort backed by registered Mutating/ValidatingWebhookConfigurations.

    `resolve_service(namespace, name, port, path) -> url | None` may map a `clientConfig.service` to a reachable
    URL (e.g. a local `lahar webhook`); without it, or when it returns None, the in-cluster DNS name is used, which
    does not resolve here, so failurePolicy decides (a missing Service fails as `service "x" not found`).
    """

    def __init__(self, store: Any, *, resolve_service: Callable[[str, str, int, str], str | None] | None = None,
                 max_workers: int = 8) -> None:
        self.store = store
        self.resolve_service = resolve_service
        registry = getattr(store, "registry", None)
        self._mutating = _ConfigCache(store, _rt(registry, "MutatingWebhookConfiguration", MUTATING))
        self._validating = _ConfigCache(store, _rt(registry, "ValidatingWebhookConfiguration", VALIDATING))
        self._transport = _Transport()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                           thread_name_prefix="admission-webhook")

    def close(self) -> None:
        self._mutating.close()
        self._validating.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._transport.close()

    # AdmissionPort ------------------------------------------------------------------------------------------

    def mutate(self, attrs: Any) -> Obj | None:
        """Call matching mutating webhooks in order, applying their JSONPatches; the new object or None."""
        if attrs.rt.group == GROUP and attrs.rt.plural in _EXEMPT:
            return None
        hooks = self._mutating.current()
        if not hooks:
            return None
        call = AdmissionCall.from_attributes(attrs)
        changed = False
        warnings = _warnings_list(attrs)
        for _config, hook in hooks:
            if not self._should_call(hook, call):
                continue
            response = self._call(hook, call, mutating=True, warnings=warnings)
            if response is None:
                continue
            patch = response.get("patch")
            if patch and call.obj is not None:
                try:
                    ops = _loads(base64.b64decode(patch))
                    patched = jsonpatch.JsonPatch(ops).apply(_copy(call.obj), in_place=True)
                except Exception as exc:
                    raise errors.ApiError(f"Internal error occurred: {exc}", code=500, reason="InternalError") from exc
                call = _replace_obj(call, patched)
                changed = True
        return call.obj if changed else None

    def validate(self, attrs: Any) -> None:
        """Call matching validating webhooks in parallel; raise the first denial or failure in configuration order."""
        if attrs.rt.group == GROUP and attrs.rt.plural in _EXEMPT:
            return
        hooks = self._validating.current()
        if not hooks:
            return
        call = AdmissionCall.from_attributes(attrs)
        relevant = [hook for _config, hook in hooks if self._should_call(hook, call)]
        if not relevant:
            return
        warnings = _warnings_list(attrs)
        if len(relevant) == 1:
            self._call(relevant[0], call, mutating=False, warnings=warnings)
            return
        per_hook: list[list[str]] = [[] for _ in relevant]
        futures = [self._pool.submit(self._call, hook, call, mutating=False, warnings=w)
                   for hook, w in zip(relevant, per_hook, strict=True)]
        first: BaseException | None = None
        for future, hook_warnings in zip(futures, per_hook, strict=True):  # configuration order: deterministic
            try:
                future.result()
            except BaseException as exc:  # noqa: BLE001 — re-raised below
                first = first or exc
            if warnings is not None:
                warnings.extend(hook_warnings)
        if first is not None:
            raise first

    # internals ----------------------------------------------------------------------------------------------

    def _should_call(self, hook: Obj, call: AdmissionCall) -> bool:
        return webhook_matches(hook, call, self._namespace_labels)

    def _namespace_labels(self, name: str) -> Mapping[str, str]:
        ns_rt = _rt(getattr(self.store, "registry", None), "Namespace", "namespaces", group="")
        ns = self.store.get(ns_rt, None, name)
        return (ns.get("metadata") or {}).get("labels") or {}

    def _url(self, hook: Obj) -> str:
        cfg = hook.get("clientConfig") or {}
        if cfg.get("url"):
            return str(cfg["url"])
        svc = cfg.get("service") or {}
        if self.resolve_service is not None:
            mapped = self.resolve_service(svc.get("namespace", ""), svc.get("name", ""), int(svc.get("port") or 443),
                                          svc.get("path") or "")
            if mapped:
                return mapped
        return service_url(svc)

    def _service_missing(self, hook: Obj) -> str | None:
        cfg = hook.get("clientConfig") or {}
        svc = cfg.get("service")
        if cfg.get("url") or not svc:
            return None
        svc_rt = _rt(getattr(self.store, "registry", None), "Service", "services", group="")
        try:
            self.store.get(svc_rt, svc.get("namespace"), svc.get("name"))
        except errors.NotFound:
            return f'failed to call webhook: service "{svc.get("name")}" not found'
        except Exception:  # noqa: BLE001 — let the call itself fail
            return None
        return None

    def _call(self, hook: Obj, call: AdmissionCall, *, mutating: bool, warnings: list[str] | None) -> Obj | None:
        """One webhook call; None when skipped (matchConditions, Ignore on failure), else the verified response."""
        name = hook.get("name", "")
        review = build_review(call)
        if not match_conditions(hook, call, review["request"]):
            return None
        if call.dry_run and (hook.get("sideEffects") or "Unknown") not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(name)
        ignore = (hook.get("failurePolicy") or "Fail") == "Ignore"
        versions = hook.get("admissionReviewVersions") or ["v1"]
        try:
            if "v1" not in versions:
                raise _CallError(f"failed to call webhook: webhook does not accept v1 AdmissionReview: "
                                 f"{', '.join(versions)}")
            missing = None if self.resolve_service else self._service_missing(hook)
            if missing:
                raise _CallError(missing)
            url = self._url(hook)
            ca = (hook.get("clientConfig") or {}).get("caBundle") or ""
            timeout = hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
            answer = self._transport.post(url, review, ca_bundle=ca, timeout=float(timeout))
            response = _verify_response(answer, review["request"]["uid"], mutating=mutating)
        except _CallError as exc:
            if ignore:
                return None
            raise calling_failed(name, str(exc)) from exc
        if warnings is not None:
            warnings.extend(response.get("warnings") or [])
        if not response.get("allowed"):
            raise denied(name, response.get("status"))
        return response


def _copy(obj: Obj) -> Obj:
    """A deep copy of a JSON object, through orjson (several times faster than `copy.deepcopy`)."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except (TypeError, ValueError):  # not plain JSON (or integers beyond 64 bits)
        return copy.deepcopy(obj)


def _warnings_list(attrs: Any) -> list[str] | None:
    request = getattr(attrs, "request", None)
    if request is None:
        return None
    warnings = getattr(request, "warnings", None)
    return warnings if isinstance(warnings, list) else None


def _replace_obj(call: AdmissionCall, obj: Obj) -> AdmissionCall:
    from dataclasses import replace  # noqa: PLC0415

    return replace(call, obj=obj)


def _rt(registry: Any, kind: str, plural: str, *, group: str = GROUP) -> ResourceType:
    if registry is not None:
        found = registry.get(group, "v1", plural)
        if found is not None:
            return found
    namespaced = plural in ("services",)
    return ResourceType(group=group, version="v1", kind=kind, plural=plural, namespaced=namespaced)
