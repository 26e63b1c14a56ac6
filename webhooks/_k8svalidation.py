"""Kubernetes' own validation texts, as Volcano's job webhook quotes them: names and a pod-template subset.

Used by the job and cronjob rules (`webhooks._jobs_rules`, `webhooks.cronjobs`); pure functions over plain dicts.

Ports of `k8s.io/apimachinery/pkg/util/validation` (`IsQualifiedName`, `IsDNS1123Label`, `IsDNS1123Subdomain`,
`IsValidLabelValue`, with their exact messages), of `field.Error` rendering (`<path>: Invalid value: "<v>": <msg>`),
and of the part of `ValidatePodTemplate` a batch job's template realistically trips over: template name,
labels, containers (required, names, duplicates), resources (names, non-negative, request <= limit, extended
resources integral and request == limit), restartPolicy, dnsPolicy, and pod-level resources (requests <= limits,
requests >= the containers' aggregate). Volumes, probes, security contexts, affinity syntax and the rest of the
pod spec are left to the API server, which checks them again when the job controller creates the pods.
The name checks are memoized (bounded LRU; each call returns a fresh list): the same resource names, label keys
and namespaces come back in every review. `validate_pod_template` = `pod_template_meta_errors` (the task name and
namespace) + `pod_template_errors` (the template alone, which tasks sharing a template share).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from lahar.kube import quantity

__all__ = [
    "field_duplicate",
    "field_invalid",
    "field_not_supported",
    "field_required",
    "go_list",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "pod_template_errors",
    "pod_template_meta_errors",
    "validate_pod_template",
]

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


def go_list(items: Iterable[Any]) -> str:
    """Go's `%v` of a slice: `[a b c]`."""
    return "[" + " ".join(str(i) for i in items) + "]"


# The name checks are pure functions of one string and the same few strings (resource names, label keys, the
# namespace) come back in every review: their answers are memoized (bounded), returned as fresh lists.
_MEMO_MAX = 4096


def _memo(fn: Callable[[str], tuple[str, ...]]) -> Callable[[str], tuple[str, ...]]:
    return functools.lru_cache(maxsize=_MEMO_MAX)(fn)


@_memo
def _dns1123_label(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len_error(63))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return tuple(errs)


@_memo
def _dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len_error(253))
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
    elif len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return tuple(errs)


@_memo
def _label_value(value: str) -> tuple[str, ...]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len_error(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return tuple(errs)


def is_dns1123_label(value: str) -> list[str]:
    return list(_dns1123_label(value))


def is_dns1123_subdomain(value: str) -> list[str]:
    return list(_dns1123_subdomain(value))


def is_qualified_name(value: str) -> list[str]:
    return list(_qualified_name(value))


def is_valid_label_value(value: str) -> list[str]:
    return list(_label_value(value))


# -- field.Error rendering -----------------------------------------------------------------------------------------


def _go_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(str(value), ensure_ascii=False)


def field_invalid(path: str, value: Any, detail: str = "") -> str:
    body = f"Invalid value: {_go_value(value)}"
    return f"{path}: {body}: {detail}" if detail else f"{path}: {body}"


def field_required(path: str, detail: str = "") -> str:
    return f"{path}: Required value: {detail}" if detail else f"{path}: Required value"


def field_duplicate(path: str, value: Any) -> str:
    return f"{path}: Duplicate value: {_go_value(value)}"


def field_not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    values = ", ".join(json.dumps(s) for s in supported)
    return f"{path}: Unsupported value: {_go_value(value)}: supported values: {values}"


# -- pod template (subset of ValidatePodTemplate) ------------------------------------------------------------------

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_RESTART_POLICIES = ("Always", "Never", "OnFailure")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


@functools.lru_cache(maxsize=_MEMO_MAX)
def _is_extended(name: str) -> bool:
    if _is_native(name) or name.startswith("requests."):
        return False
    return not _qualified_name("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


@functools.lru_cache(maxsize=_MEMO_MAX)
def _resource_name_problems(name: str) -> tuple[str, ...]:
    """The `field_invalid` details of a resource name (memoized: names repeat in every review)."""
    details = list(_qualified_name(name))
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            details.append("must be a standard resource type or fully qualified")
            details.append("must be a standard resource for containers")
    elif not _is_native(name) and not _is_extended(name):
        details.append("doesn't follow extended resource name standard")
    return tuple(details)


def _resource_name_errors(name: str, path: str) -> list[str]:
    return [field_invalid(path, name, m) for m in _resource_name_problems(name)]


def _quantities(rl: Any, path: str, errs: list[str]) -> dict[str, quantity.Quantity]:
    out: dict[str, quantity.Quantity] = {}
    if not isinstance(rl, dict):
        return out
    for name, raw in rl.items():
        name = str(name)
        problems = _resource_name_problems(name)
        if problems:
            key_path = f"{path}[{name}]"
            errs.extend(field_invalid(key_path, name, m) for m in problems)
        try:
            q = quantity.parse(raw)
        except (quantity.QuantityError, ValueError, TypeError) as e:
            errs.append(field_invalid(f"{path}[{name}]", raw, str(e)))
            continue
        out[name] = q
        milli = q.milli_value()
        if milli < 0:
            errs.append(field_invalid(f"{path}[{name}]", str(q), "must be greater than or equal to 0"))
        if milli % 1000 != 0 and _is_extended(name):
            errs.append(field_invalid(f"{path}[{name}]", str(q), "must be an integer"))
    return out


def _resource_requirements(res: Any, path: str) -> tuple[list[str], dict[str, quantity.Quantity],
                                                          dict[str, quantity.Quantity]]:
    errs: list[str] = []
    if not isinstance(res, dict):
        return errs, {}, {}
    limits = _quantities(res.get("limits"), f"{path}.limits", errs)
    requests = _quantities(res.get("requests"), f"{path}.requests", errs)
    for name, req in requests.items():
        lim = limits.get(name)
        if lim is not None:
            req_milli, lim_milli = req.milli_value(), lim.milli_value()
            if req_milli != lim_milli and not _overcommit_allowed(name):
                errs.append(field_invalid(f"{path}.requests", str(req), f"must be equal to {name} limit of {lim}"))
            elif req_milli > lim_milli:
                errs.append(field_invalid(f"{path}.requests", str(req),
                                          f"must be less than or equal to {name} limit of {lim}"))
        elif not _overcommit_allowed(name):
            errs.append(field_required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    if not ("cpu" in limits or "memory" in limits or "cpu" in requests or "memory" in requests) \
            and any(_is_hugepages(n) for n in (*limits, *requests)):
        errs.append(f"{path}: Forbidden: HugePages require cpu or memory")
    return errs, requests, limits


def _containers(items: Any, path: str, names: set[str], errs: list[str]) -> list[dict[str, quantity.Quantity]]:
    requests: list[dict[str, quantity.Quantity]] = []
    for i, c in enumerate(items if isinstance(items, list) else []):
        if not isinstance(c, dict):
            continue
        name = c.get("name") or ""
        if not name:
            errs.append(field_required(f"{path}[{i}].name"))
        else:
            if name_errs := _dns1123_label(str(name)):
                errs.extend(field_invalid(f"{path}[{i}].name", name, m) for m in name_errs)
            if name in names:
                errs.append(field_duplicate(f"{path}[{i}].name", name))
            names.add(str(name))
        res = c.get("resources")
        if isinstance(res, dict):
            res_errs, reqs, _ = _resource_requirements(res, f"{path}[{i}].resources")
            if res_errs:
                errs.extend(res_errs)
            requests.append(reqs)
        else:
            requests.append({})
    return requests


def _sum(lists: Iterable[dict[str, quantity.Quantity]]) -> dict[str, quantity.Quantity]:
    total: dict[str, quantity.Quantity] = {}
    for rl in lists:
        total = quantity.add(total, rl)
    return total


def validate_pod_template(template: Any, *, name: str, namespace: str) -> list[str]:
    """Errors of `ValidatePodTemplate` (the subset above) for a PodTemplate named `name`, rendered like Go:
    `pod_template_meta_errors(name, namespace) + pod_template_errors(template)`."""
    return pod_template_meta_errors(name, namespace) + pod_template_errors(template)


def pod_template_meta_errors(name: str, namespace: str) -> list[str]:
    """The PodTemplate's ObjectMeta errors (its name is the task name), the first part of `validate_pod_template`."""
    errs: list[str] = []
    if not name:
        errs.append(field_required("metadata.name", "name or generateName is required"))
    else:
        errs.extend(field_invalid("metadata.name", name, m) for m in _dns1123_subdomain(name))
    if namespace:
        errs.extend(field_invalid("metadata.namespace", namespace, m) for m in _dns1123_label(namespace))
    return errs


def pod_template_errors(template: Any) -> list[str]:
    """The errors of the template itself (labels, containers, policies, pod resources), the second part of
    `validate_pod_template`: a function of the template alone, so tasks sharing a template share the answer."""
    errs: list[str] = []
    template = template if isinstance(template, dict) else {}
    meta = template.get("metadata") or {}
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if isinstance(labels, dict):
        for k, v in labels.items():
            if key_errs := _qualified_name(str(k)):
                errs.extend(field_invalid("template.metadata.labels", k, m) for m in key_errs)
            if value_errs := _label_value(str(v or "")):
                errs.extend(field_invalid("template.metadata.labels", v, m) for m in value_errs)
    spec = template.get("spec") or {}
    if not isinstance(spec, dict):
        spec = {}
    containers = spec.get("containers")
    if not containers:
        errs.append(field_required("template.spec.containers"))
    names: set[str] = set()
    ctr_requests = _containers(containers, "template.spec.containers", names, errs)
    init_requests = _containers(spec.get("initContainers"), "template.spec.initContainers", names, errs)
    restart = spec.get("restartPolicy") or "Always"
    if restart not in _RESTART_POLICIES:
        errs.append(field_not_supported("template.spec.restartPolicy", restart, _RESTART_POLICIES))
    dns = spec.get("dnsPolicy") or "ClusterFirst"
    if dns not in _DNS_POLICIES:
        errs.append(field_not_supported("template.spec.dnsPolicy", dns, _DNS_POLICIES))
    pod_res = spec.get("resources")
    if isinstance(pod_res, dict):
        res_errs, pod_requests, _ = _resource_requirements(pod_res, "template.spec.resources")
        errs.extend(res_errs)
        aggregate = _sum(ctr_requests)
        for init in init_requests:
            for rname, q in init.items():
                if rname not in aggregate or q.milli_value() > aggregate[rname].milli_value():
                    aggregate[rname] = q
        for rname, agg in aggregate.items():
            pod_q = pod_requests.get(rname)
            if pod_q is not None and agg.milli_value() > pod_q.milli_value():
                errs.append(field_invalid(f"template.spec.resources.requests[{rname}]", str(pod_q),
                                          f"must be greater than or equal to aggregate container requests of "
                                          f"{agg.canonical}"))
    return errs
