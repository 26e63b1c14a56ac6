"""Which webhooks an admission request reaches: `AdmissionCall` (one request, in kube-apiserver's terms) and the
pure matching of rules, namespace and object selectors (`rule_matches`, `selector_matches`, `webhook_matches`) and
the order webhooks are called in (`sorted_webhooks`).

Bottom of `devcluster.admission`; `conditions` adds the CEL matchConditions, `chain` the shell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import errors
from lahar.kube.resources import ResourceType

Obj = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
# kube-apiserver never calls webhooks for its own admission configuration objects (IsExemptAdmissionConfigurationResource)
_EXEMPT = frozenset({MUTATING, VALIDATING, "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                     "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})
DEFAULT_TIMEOUT_SECONDS = 10
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


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
