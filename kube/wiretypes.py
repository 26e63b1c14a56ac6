"""Decode-time checks of built-in kinds, as kube-apiserver's typed decoder does them: JSON types, unknown fields,
integer ranges, label keys and values, and resource quantities.

Called by `kube.apiserver` on every create and update of a built-in kind; pure functions over plain dicts. The
field types come from the official `kubernetes` client's generated models (`openapi_types` + `attribute_map`,
generated from kube's own OpenAPI), so the rules follow the API as published rather than a hand-written list.
Two results: `decode_problems` -> (type errors: a 400, unknown fields: refused under `fieldValidation=Strict`,
warned about otherwise); `meta_problems` -> `(field, detail)` pairs for a 422 Invalid.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import podspec, quantity

__all__ = ["DecodeProblems", "decode_problems", "meta_problems", "model_for"]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# int64 fields of the core API (every other integer field of a built-in kind is an int32 in kube's Go types)
_INT64_FIELDS = frozenset({
    "activeDeadlineSeconds", "terminationGracePeriodSeconds", "deletionGracePeriodSeconds", "generation",
    "observedGeneration", "runAsUser", "runAsGroup", "fsGroup", "supplementalGroups", "startingDeadlineSeconds",
    "expirationSeconds", "gracePeriodSeconds", "value", "count", "limit", "seconds",
})
_QUANTITY_MAPS = frozenset({"requests", "limits", "capacity", "allocatable", "hard", "used", "overhead", "default",
                            "defaultRequest", "max", "min", "maxLimitRequestRatio"})
_QUANTITY_FIELDS = frozenset({"sizeLimit"})
_GROUP_PREFIX = {"": "", "apps": "", "batch": "", "policy": "", "scheduling.k8s.io": "",
                 "coordination.k8s.io": "", "rbac.authorization.k8s.io": "", "admissionregistration.k8s.io": "",
                 "networking.k8s.io": "", "storage.k8s.io": "", "node.k8s.io": "", "discovery.k8s.io": ""}


@dataclass
class DecodeProblems:
    """What the typed decoder found: type errors refuse the request; unknown fields depend on fieldValidation."""

    type_errors: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    unknown_at: list[tuple[dict[str, Any], str]] = field(default_factory=list, repr=False)

    def drop_unknown(self) -> None:
        """Remove the unknown fields from the object walked, as kube's typed decoder drops them."""
        for parent, key in self.unknown_at:
            parent.pop(key, None)


@functools.cache
def model_for(group: str, version: str, kind: str) -> Any:
    """The official client's model class of a built-in kind (`V1Pod`, ...), or None (custom resources, or a kind
    the client does not know)."""
    if group not in _GROUP_PREFIX:
        return None
    try:
        from kubernetes.client import models
    except ImportError:  # pragma: no cover - the client is a dependency
        return None
    return getattr(models, version[:1].upper() + version[1:] + kind, None)


@functools.cache
def _fields(model: Any) -> dict[str, str]:
    """JSON name -> type string of a model."""
    return {model.attribute_map[attr]: kind for attr, kind in model.openapi_types.items()}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


@functools.cache
def _resolve(name: str) -> Any:
    from kubernetes.client import models

    return getattr(models, name, None)


def decode_problems(model: Any, obj: Any) -> DecodeProblems:
    """Walk `obj` against `model`; iterative, so depth is bounded only by the caller's depth limit."""
    out = DecodeProblems()
    # paths are built only for what is reported: (parent, segment) chains, rendered by _path
    stack: list[tuple[Any, Any, str, str]] = [(None, obj, model.__name__, "")]
    while stack:
        node, value, kind, name = stack.pop()
        if value is None or kind == "object":
            continue
        path: Any = _Path(node)
        if kind.startswith("List["):
            if not isinstance(value, list):
                out.type_errors.append(_mismatch(path, value, kind))
                continue
            inner = kind[5:-1]
            stack.extend(((node, i), item, inner, name) for i, item in enumerate(value))
        elif kind.startswith("Dict["):
            if not isinstance(value, dict):
                out.type_errors.append(_mismatch(path, value, kind))
                continue
            inner = kind[kind.index(",") + 1:-1].strip()
            stack.extend(((node, (k,)), item, inner, name if name in _QUANTITY_MAPS else "")
                         for k, item in value.items())
        elif kind in ("str", "datetime", "date", "bytes"):
            quantity_ok = name in _QUANTITY_MAPS or name in _QUANTITY_FIELDS
            if not isinstance(value, str) and not (quantity_ok and _json_type(value) == "number"):
                out.type_errors.append(_mismatch(path, value, "string"))
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                out.type_errors.append(_mismatch(path, value, "integer"))
                continue
            low, high = INT64 if name in _INT64_FIELDS else INT32
            if not low <= value <= high:
                bits = 64 if name in _INT64_FIELDS else 32
                out.type_errors.append(f"{path}: Invalid value: {value}: out of range for an int{bits}")
        elif kind == "float":
            if _json_type(value) != "number":
                out.type_errors.append(_mismatch(path, value, "number"))
        elif kind == "bool":
            if not isinstance(value, bool):
                out.type_errors.append(_mismatch(path, value, "boolean"))
        else:
            sub = _resolve(kind)
            if sub is None:
                continue
            if not isinstance(value, dict):
                out.type_errors.append(_mismatch(path, value, "object"))
                continue
            known = _fields(sub)
            for key, item in value.items():
                if key not in known:
                    out.unknown.append(str(_Path((node, str(key)))))
                    out.unknown_at.append((value, key))
                else:
                    stack.append(((node, str(key)), item, known[key], str(key)))
    out.type_errors.sort()
    out.unknown.sort()
    return out


class _Path:
    """A field path rendered on demand: `spec.containers[0].resources.requests[cpu]`."""

    __slots__ = ("node",)

    def __init__(self, node: Any) -> None:
        self.node = node

    def __str__(self) -> str:
        parts: list[str] = []
        node = self.node
        while node is not None:
            node, segment = node
            if isinstance(segment, int):
                parts.append(f"[{segment}]")
            elif isinstance(segment, tuple):
                parts.append(f"[{segment[0]}]")
            else:
                parts.append(f".{segment}")
        return "".join(reversed(parts)).lstrip(".")

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _mismatch(path: Any, value: Any, wanted: str) -> str:
    wanted = {"Dict": "object", "List": "array"}.get(wanted.split("[")[0], wanted)
    return f"{path}: cannot unmarshal {_json_type(value)} into a field of type {wanted}"


# --- metadata and quantities (apimachinery's IsQualifiedName / IsValidLabelValue via podspec, ValidateResourceQuantity)


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def meta_problems(obj: dict[str, Any], *, pod: bool = False) -> list[tuple[str, str]]:
    """`(field, detail)` for invalid label keys and values, annotation keys, and (pods) unparsable quantities."""
    out: list[tuple[str, str]] = []
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for key, value in sorted(labels.items(), key=lambda kv: str(kv[0])):
            out.extend(("metadata.labels", f"Invalid value: {_quote(key)}: {why}")
                       for why in podspec.is_qualified_name(str(key)))
            if not isinstance(value, str):
                out.append((f"metadata.labels[{key}]", f"Invalid value: {_quote(value)}: must be a string"))
            else:
                out.extend(("metadata.labels", f"Invalid value: {_quote(value)}: {why}")
                           for why in podspec.is_valid_label_value(value))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in sorted(annotations, key=str):  # ValidateAnnotations checks the lower-cased key
            out.extend(("metadata.annotations", f"Invalid value: {_quote(key)}: {why}")
                       for why in podspec.is_qualified_name(str(key).lower()))
    if pod:
        out.extend(_quantity_problems(obj.get("spec")))
    return out


def _quantity_problems(spec: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(spec, dict):
        return out
    for group in ("initContainers", "containers"):
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for which in ("requests", "limits"):
                values = resources.get(which)
                if not isinstance(values, dict):
                    continue
                for name, value in sorted(values.items(), key=lambda kv: str(kv[0])):
                    try:
                        quantity.parse(value)
                    except (quantity.QuantityError, ValueError, TypeError):
                        out.append((f"spec.{group}[{i}].resources.{which}[{name}]",
                                    f"Invalid value: {_quote(value)}: quantities must match the regular expression "
                                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
    return out
