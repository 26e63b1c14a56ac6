"""Kubernetes' pod-spec knowledge in one place: names, label keys and values, QoS class, effective requests and limits.

Pure functions over plain dicts, at the bottom of the layers (only `kube.quantity` below): the API-server store,
devcluster's kubelet and default scheduler, the webhooks, the selectors and the podgroup reconciler all ask here.

- Names: apimachinery `util/validation` (`IsDNS1123Label`, `IsDNS1123Subdomain`, `IsQualifiedName`,
  `IsValidLabelValue`) with its exact messages (lengths in "characters", as `MaxLenError` says). Memoized (bounded
  LRU; each call returns a fresh list): the same names come back in every review.
- `qos_class`: kube's `ComputePodQOS` — app and init containers, cpu and memory only, positive quantities only,
  sums per resource compared at the end; pod-level `spec.resources` (PodLevelResources) take over when set. A
  missing request counts as its limit, as the API server's defaulting makes it before the class is computed.
- `pod_requests` / `pod_limits`: component-helpers' `PodRequests` / `PodLimits` — the app containers' sum; each
  init container runs alone on top of the sidecars started before it (restartable init containers,
  `restartPolicy: Always`, also add to the sum); the larger of the two per resource; pod-level values for cpu and
  memory replace the aggregate; `spec.overhead` is added (to limits only where a limit is set).
- `tolerates`: core/v1 `Toleration.ToleratesTaint` (effect and key match when set; Equal compares values, Exists
  matches any value, an unknown operator tolerates nothing).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lahar.kube import quantity

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "aggregate",
    "container_limits",
    "container_requests",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_sidecar",
    "is_valid_label_value",
    "pod_limits",
    "pod_requests",
    "qos_class",
    "toleration_tolerates",
    "tolerates",
]

# -- names (apimachinery util/validation) --------------------------------------------------------------------------

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                          "'-' or '.', and must start and end with an alphanumeric character")
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_QNAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character")
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """`validation.RegexError`: note Go's double space before each "or"."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def _max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


_MEMO_MAX = 4096


def _memo(fn: Callable[[str], tuple[str, ...]]) -> Callable[[str], tuple[str, ...]]:
    return functools.lru_cache(maxsize=_MEMO_MAX)(fn)


@_memo
def _dns1123_label(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return tuple(errs)


@_memo
def _dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return tuple(errs)


@_memo
def _qualified_name(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain(prefix))
    else:
        return ("a qualified name " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(QUALIFIED_NAME_MAX))
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return tuple(errs)


@_memo
def _label_value(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return tuple(errs)


def is_dns1123_label(value: str) -> list[str]:
    """`IsDNS1123Label`: at most 63 characters of [a-z0-9-], alphanumeric at both ends; [] when valid."""
    return list(_dns1123_label(value))


def is_dns1123_subdomain(value: str) -> list[str]:
    """`IsDNS1123Subdomain`: dot-separated DNS labels, at most 253 characters; [] when valid."""
    return list(_dns1123_subdomain(value))


def is_qualified_name(value: str) -> list[str]:
    """`IsQualifiedName` (label and annotation keys, resource names): `[prefix/]name`; [] when valid."""
    return list(_qualified_name(value))


def is_valid_label_value(value: str) -> list[str]:
    """`IsValidLabelValue`: empty, or at most 63 characters shaped like a qualified name part; [] when valid."""
    return list(_label_value(value))


# -- requests, limits and QoS --------------------------------------------------------------------------------------

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

_QOS_RESOURCES = ("cpu", "memory")
_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
Obj = Mapping[str, Any]


def _spec(pod: Obj) -> Obj:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _resources(holder: Obj) -> Obj:
    res = holder.get("resources")
    return res if isinstance(res, Mapping) else {}


def _pod_level(pod: Obj) -> Obj:
    return _resources(_spec(pod))


def _containers(spec: Obj, key: str) -> list[Obj]:
    return [c for c in spec.get(key) or () if isinstance(c, Mapping)]


def container_limits(container: Obj) -> dict[str, quantity.Quantity]:
    """The container's limits, parsed."""
    return quantity.resource_list(_resources(container).get("limits"))


def container_requests(container: Obj) -> dict[str, quantity.Quantity]:
    """The container's requests, a missing request being its limit (the API server's `SetDefaults_Pod`)."""
    res = _resources(container)
    return {**quantity.resource_list(res.get("limits")), **quantity.resource_list(res.get("requests"))}


def is_sidecar(container: Obj) -> bool:
    """A restartable init container (`restartPolicy: Always`): it keeps running beside the app containers."""
    return container.get("restartPolicy") == "Always"


def _max_into(target: dict[str, quantity.Quantity], other: Mapping[str, quantity.Quantity]) -> None:
    for name, q in other.items():
        if name not in target or q > target[name]:
            target[name] = q


def aggregate(app: Iterable[Mapping[str, quantity.Quantity]],
              init: Iterable[tuple[Mapping[str, quantity.Quantity], bool]]) -> dict[str, quantity.Quantity]:
    """`AggregateContainerRequests` / `...Limits` over parsed lists: `app` per app container, `init` as
    (resources, is_sidecar) in order. max(app sum + sidecars, each init container over the sidecars before it)."""
    total: dict[str, quantity.Quantity] = {}
    for rl in app:
        total = quantity.add(total, rl)
    sidecars: dict[str, quantity.Quantity] = {}
    init_peak: dict[str, quantity.Quantity] = {}
    for own, sidecar in init:
        if sidecar:
            total = quantity.add(total, own)
            sidecars = quantity.add(sidecars, own)
            _max_into(init_peak, sidecars)
        else:
            _max_into(init_peak, quantity.add(sidecars, own))
    _max_into(total, init_peak)
    return total


def _aggregate(pod: Obj, per_container: Callable[[Obj], dict[str, quantity.Quantity]]) -> dict[str, quantity.Quantity]:
    spec = _spec(pod)
    return aggregate((per_container(c) for c in _containers(spec, "containers")),
                     ((per_container(c), is_sidecar(c)) for c in _containers(spec, "initContainers")))


def pod_requests(pod: Obj, *, overhead: bool = True) -> dict[str, quantity.Quantity]:
    """The pod's effective requests (kube's `PodRequests`): what the scheduler must find free on a node."""
    total = _aggregate(pod, container_requests)
    pod_res = _pod_level(pod)
    pod_reqs = {**quantity.resource_list(pod_res.get("limits")), **quantity.resource_list(pod_res.get("requests"))}
    total.update({k: v for k, v in pod_reqs.items() if k in _POD_LEVEL_RESOURCES})
    if overhead and _spec(pod).get("overhead"):
        total = quantity.add(total, _spec(pod)["overhead"])
    return total


def pod_limits(pod: Obj, *, overhead: bool = True) -> dict[str, quantity.Quantity]:
    """The pod's effective limits (kube's `PodLimits`): overhead is added only to resources that have a limit."""
    total = _aggregate(pod, container_limits)
    pod_lims = quantity.resource_list(_pod_level(pod).get("limits"))
    total.update({k: v for k, v in pod_lims.items() if k in _POD_LEVEL_RESOURCES})
    if overhead:
        for name, q in quantity.resource_list(_spec(pod).get("overhead")).items():
            if name in total:
                total[name] = total[name] + q
    return total


def _positive_qos(rl: Mapping[str, quantity.Quantity]) -> dict[str, quantity.Quantity]:
    return {k: v for k, v in rl.items() if k in _QOS_RESOURCES and v.sign() > 0}


def qos_class(pod: Obj) -> str:
    """Guaranteed / Burstable / BestEffort (kube's `ComputePodQOS`; `status.qosClass` is not consulted)."""
    requests: dict[str, quantity.Quantity] = {}
    limits: dict[str, quantity.Quantity] = {}
    guaranteed = True
    pod_res = _pod_level(pod)
    if pod_res.get("requests") or pod_res.get("limits"):
        requests = _positive_qos(container_requests(_spec(pod)))
        limits = _positive_qos(container_limits(_spec(pod)))
        guaranteed = all(k in limits for k in _QOS_RESOURCES)
    else:
        spec = _spec(pod)
        for c in (*_containers(spec, "containers"), *_containers(spec, "initContainers")):
            requests = quantity.add(requests, _positive_qos(container_requests(c)))
            lims = _positive_qos(container_limits(c))
            limits = quantity.add(limits, lims)
            if not all(k in lims for k in _QOS_RESOURCES):
                guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[k] == q for k, q in requests.items()):
        return GUARANTEED
    return BURSTABLE


# -- tolerations ---------------------------------------------------------------------------------------------------


def toleration_tolerates(toleration: Obj, taint: Obj) -> bool:
    """core/v1 `Toleration.ToleratesTaint`: one toleration against one taint."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerates(pod: Obj, taint: Obj) -> bool:
    """Whether any of the pod's tolerations tolerates `taint`."""
    return any(toleration_tolerates(t, taint) for t in _spec(pod).get("tolerations") or () if isinstance(t, Mapping))
