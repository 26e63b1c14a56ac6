"""Kubernetes' own validation texts, as Volcano's job webhook quotes them: field errors and a pod-template subset.

Used by the job and cronjob rules (`webhooks._jobs_rules`, `webhooks.cronjobs`); pure functions over plain dicts.

Ports of `field.Error` rendering (`<path>: Invalid value: "<v>": <msg>`) and of the part of `ValidatePodTemplate`
a batch job's template realistically trips over: template name, labels, containers (required, names, duplicates),
resources (names, non-negative, request <= limit, extended resources integral and request == limit),
restartPolicy, dnsPolicy, and pod-level resources (requests <= limits, requests >= the containers' aggregate,
sidecars included). Volumes, probes, security contexts, affinity syntax and the rest of the pod spec are left to
the API server, which checks them again when the job controller creates the pods. The name checks (apimachinery's
`IsQualifiedName`, `IsDNS1123Label`, ... with their exact messages) and the aggregate are `kube.podspec`'s.
`validate_pod_template` = `pod_template_meta_errors` (the task name and namespace) + `pod_template_errors` (the
template alone, which tasks sharing a template share).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from lahar.kube import podspec, quantity

__all__ = [
    "field_duplicate",
    "field_invalid",
    "field_not_supported",
    "field_required",
    "go_list",
    "pod_template_errors",
    "pod_template_meta_errors",
    "validate_pod_template",
]

_MEMO_MAX = 4096  # bound of the memoized resource-name checks below


def go_list(items: Iterable[Any]) -> str:
    """Go's `%v` of a slice: `[a b c]`."""
    return "[" + " ".join(str(i) for i in items) + "]"


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
    return not podspec.is_qualified_name("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


@functools.lru_cache(maxsize=_MEMO_MAX)
def _resource_name_problems(name: str) -> tuple[str, ...]:
    """The `field_invalid` details of a resource name (memoized: names repeat in every review)."""
    details = list(podspec.is_qualified_name(name))
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
            if name_errs := podspec.is_dns1123_label(str(name)):
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
        errs.extend(field_invalid("metadata.name", name, m) for m in podspec.is_dns1123_subdomain(name))
    if namespace:
        errs.extend(field_invalid("metadata.namespace", namespace, m) for m in podspec.is_dns1123_label(namespace))
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
            if key_errs := podspec.is_qualified_name(str(k)):
                errs.extend(field_invalid("template.metadata.labels", k, m) for m in key_errs)
            if value_errs := podspec.is_valid_label_value(str(v or "")):
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
        init_items = [c for c in spec.get("initContainers") or () if isinstance(c, dict)]
        aggregate = podspec.aggregate(ctr_requests, zip(init_requests, map(podspec.is_sidecar, init_items),
                                                         strict=True))
        for rname, agg in aggregate.items():
            pod_q = pod_requests.get(rname)
            if pod_q is not None and agg.milli_value() > pod_q.milli_value():
                errs.append(field_invalid(f"template.spec.resources.requests[{rname}]", str(pod_q),
                                          f"must be greater than or equal to aggregate container requests of "
                                          f"{agg.canonical}"))
    return errs
