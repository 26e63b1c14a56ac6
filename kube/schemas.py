"""Structural-schema engine for custom resources: defaulting, validation, pruning, unknown-field detection.
Sits under kube.apiserver (and devcluster) the way apiextensions-apiserver sits under kube-apiserver; pure functions.

The rules and the wording follow kube-apiserver (1.32):

- `apply_defaults` is apiextensions' structural defaulting: first non-nullable nulls without a default are
  dropped (`PruneNonNullableNullsWithoutDefaults`), then `default` values are filled in where a property is
  absent (or a non-nullable null), recursively through `properties`, `items` and `additionalProperties`;
  a nested object is defaulted only when it is present (or was itself just defaulted).
- `validate` is kube-openapi's schema validator with apiextensions' conversion of its errors into a
  `field.ErrorList` (`kubeOpenAPIResultToFieldErrors`): `Required value`, `Unsupported value`, `Too long`,
  `Too many`, and `Invalid value: <v>: <path> in body should ...` for the rest.
  Not evaluated: `x-kubernetes-validations` (CEL rules; the admission webhooks cover what lahar needs),
  `x-kubernetes-list-type`/`map-type` uniqueness, `uniqueItems`, and formats other than the common ones
  (`date-time`, `date`, `duration`, `uuid*`, `ipv4`, `ipv6`, `cidr`, `mac`, `hostname`, `email`, `byte`,
  `uri`, `hexcolor`, `rgbcolor`, `bsonobjectid`, `ssn`); `int32`/`int64` and unknown formats are ignored,
  as kube-apiserver strips them.
- `unknown_fields` / `prune` are apiextensions' structural pruning: a field is unknown when no `properties`
  entry or `additionalProperties` schema declares it and no enclosing schema has
  `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind`, `metadata` at the root (and in
  `x-kubernetes-embedded-resource` objects) are never reported.

Errors are `kube.fielderrors.FieldError`s (apimachinery's `field.Error`, with the Go value rendering).
"""

from __future__ import annotations

import base64
import copy
import datetime as _dt
import ipaddress
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lahar.kube.fielderrors import (
    FieldError,
    go_float,
    go_quote,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
    type_invalid,
)

__all__ = ["apply_defaults", "crd_schema", "prune", "unknown_fields", "validate"]

Schema = Mapping[str, Any]


# ---------------------------------------------------------------------------------------------------------------
# helpers over decoded JSON


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _preserves(schema: Schema | None) -> bool:
    return bool(schema and schema.get("x-kubernetes-preserve-unknown-fields"))


def _additional(schema: Schema) -> Schema | None:
    """The `additionalProperties` schema; `true` means "any value" (an empty schema)."""
    extra = schema.get("additionalProperties")
    if extra is True:
        return {}
    if isinstance(extra, Mapping):
        return extra
    return None


# ---------------------------------------------------------------------------------------------------------------
# defaulting


def apply_defaults(schema: Schema | None, obj: Any) -> Any:
    """A defaulted deep copy of `obj` (structural defaulting, after dropping non-nullable nulls)."""
    result = copy.deepcopy(obj)
    if schema:
        _prune_nulls(result, schema)
        _default(result, schema)
    return result


def _prune_nulls(value: Any, schema: Schema | None) -> None:
    if not schema:
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = _additional(schema)
        for key in list(value):
            item = value[key]
            if key in props:
                prop = props[key]
                if item is None and "default" not in prop and not prop.get("nullable"):
                    del value[key]
                else:
                    _prune_nulls(item, prop)
            elif extra is not None:
                _prune_nulls(item, extra)
    elif isinstance(value, list):
        for item in value:
            _prune_nulls(item, schema.get("items"))


def _default(value: Any, schema: Schema | None) -> None:
    if not schema:
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, prop in props.items():
            if "default" in prop and (key not in value or (value[key] is None and not prop.get("nullable"))):
                value[key] = copy.deepcopy(prop["default"])
        extra = _additional(schema)
        for key, item in list(value.items()):
            if key in props:
                _default(item, props[key])
            elif extra is not None:
                if item is None and not extra.get("nullable") and "default" in extra:
                    value[key] = item = copy.deepcopy(extra["default"])
                _default(item, extra)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return
        for index, item in enumerate(value):
            if item is None and not items.get("nullable") and "default" in items:
                value[index] = item = copy.deepcopy(items["default"])
            _default(item, items)


# ---------------------------------------------------------------------------------------------------------------
# validation


def validate(schema: Schema | None, obj: Any, *, root: str = "") -> list[FieldError]:
    """Field errors of `obj` against the structural schema; `root` prefixes every path (e.g. "spec")."""
    found: list[FieldError] = []
    if schema:
        _validate(schema, obj, root, found)
    return found


def _validate(schema: Schema, value: Any, path: str, out: list[FieldError]) -> None:
    if not _check_type(schema, value, path, out):
        return
    if value is None:
        return
    _check_combinators(schema, value, path, out)
    if isinstance(value, str):
        _check_string(schema, value, path, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_number(schema, value, path, out)
    elif isinstance(value, list):
        _check_array(schema, value, path, out)
    if "enum" in schema and schema["enum"] is not None:
        _check_enum(schema["enum"], value, path, out)
    if isinstance(value, dict):
        _check_object(schema, value, path, out)


def _schema_types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    declared = schema.get("type")
    if not declared:
        return []
    return [declared] if isinstance(declared, str) else list(declared)


def _check_type(schema: Schema, value: Any, path: str, out: list[FieldError]) -> bool:
    types = _schema_types(schema)
    if value is None:
        if types and "null" not in types and not schema.get("nullable"):
            out.append(type_invalid(path, "null", _msg_type(path, ",".join(types), "null")))
            return False
        return True
    if not types:
        return True
    actual = _json_type(value)
    if actual in types:
        return True
    if actual == "number" and "integer" in types and float(value).is_integer():
        return True
    if actual == "integer" and "number" in types:
        return True
    out.append(type_invalid(path, actual, _msg_type(path, ",".join(types), actual)))
    return False


def _check_combinators(schema: Schema, value: Any, path: str, out: list[FieldError]) -> None:
    name = go_quote(path)
    for sub in schema.get("allOf") or ():
        errs = validate(sub, value, root=path)
        if errs:
            out.append(invalid(path, "", f"{name} must validate all the schemas (allOf)"))
            out.extend(errs)
            break
    any_of = schema.get("anyOf")
    if any_of:
        results = [validate(sub, value, root=path) for sub in any_of]
        if all(results):
            out.append(invalid(path, "", f"{name} must validate at least one schema (anyOf)"))
            out.extend(results[0])
    one_of = schema.get("oneOf")
    if one_of:
        passing = sum(1 for sub in one_of if not validate(sub, value, root=path))
        if passing != 1:
            out.append(invalid(path, "", f"{name} must validate one and only one schema (oneOf)"))
    if "not" in schema and isinstance(schema["not"], Mapping) and not validate(schema["not"], value, root=path):
        out.append(invalid(path, "", f"{name} must not validate the schema (not)"))


def _check_string(schema: Schema, value: str, path: str, out: list[FieldError]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(too_long(path, value, int(schema["maxLength"])))
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
    pattern = schema.get("pattern")
    if pattern:
        try:
            matched = _regex(pattern).search(value) is not None
        except re.error as exc:
            out.append(invalid(path, value, f"{path} in body should match '{pattern}, but pattern is invalid: {exc}'"))
        else:
            if not matched:
                out.append(invalid(path, value, f"{path} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if fmt:
        check = _FORMATS.get(fmt.replace("-", "").replace("_", "").lower())
        if check is not None and not check(value):
            out.append(type_invalid(path, value, _msg_type(path, fmt, value)))


def _check_number(schema: Schema, value: int | float, path: str, out: list[FieldError]) -> None:
    is_int = isinstance(value, int)

    def limit(bound: Any) -> str:
        return str(int(bound)) if is_int else go_float(float(bound))

    factor = schema.get("multipleOf")
    if factor:
        if factor < 0:
            out.append(invalid(path, factor, f"factor MultipleOf declared for {path} must be positive: {factor}"))
        elif not float(value / factor).is_integer():
            out.append(invalid(path, value, f"{path} in body should be a multiple of {limit(factor)}"))
    if schema.get("maximum") is not None:
        maximum, exclusive = schema["maximum"], bool(schema.get("exclusiveMaximum"))
        bound = int(maximum) if is_int else maximum
        if value > bound or (exclusive and value >= bound):
            words = "less than" if exclusive else "less than or equal to"
            out.append(invalid(path, value, f"{path} in body should be {words} {limit(maximum)}"))
    if schema.get("minimum") is not None:
        minimum, exclusive = schema["minimum"], bool(schema.get("exclusiveMinimum"))
        bound = int(minimum) if is_int else minimum
        if value < bound or (exclusive and value <= bound):
            words = "greater than" if exclusive else "greater than or equal to"
            out.append(invalid(path, value, f"{path} in body should be {words} {limit(minimum)}"))


def _check_array(schema: Schema, value: list[Any], path: str, out: list[FieldError]) -> None:
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            _validate(items, item, f"{path}[{index}]", out)
    elif isinstance(items, list):
        for index, (sub, item) in enumerate(zip(items, value, strict=False)):
            _validate(sub, item, f"{path}[{index}]", out)
    if schema.get("minItems") is not None and len(value) < schema["minItems"]:
        out.append(invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} items"))
    if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
        out.append(too_many(path, len(value), int(schema["maxItems"])))


def _check_enum(enum: list[Any], value: Any, path: str, out: list[FieldError]) -> None:
    if any(_json_equal(value, allowed) for allowed in enum):
        return
    supported = [v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in enum]
    out.append(not_supported(path, value, supported))


def _check_object(schema: Schema, value: dict[str, Any], path: str, out: list[FieldError]) -> None:
    count = len(value)
    if schema.get("maxProperties") is not None and count > schema["maxProperties"]:
        out.append(too_many(path, count, int(schema["maxProperties"])))
    if schema.get("minProperties") is not None and count < schema["minProperties"]:
        out.append(invalid(path, schema["minProperties"],
                           f"{path} in body should have at least {schema['minProperties']} properties"))
    for name in schema.get("required") or ():
        if name not in value:
            out.append(required(_child(path, name)))
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key in sorted(value):
        child = _child(path, key)
        if key in props:
            _validate(props[key], value[key], child, out)
        elif isinstance(extra, Mapping):
            _validate(extra, value[key], child, out)
        elif extra is False:
            out.append(invalid(path, key, f"{child} in body is a forbidden property"))


def _msg_type(path: str, type_name: str, value: Any) -> str:
    if isinstance(value, str):
        return f"{path} in body must be of type {type_name}: {go_quote(value)}"
    return f"{path} in body must be of type {type_name}"


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# ---------------------------------------------------------------------------------------------------------------
# formats (kube-openapi strfmt, the subset kube-apiserver keeps)

_RX_DATETIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_RX_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_RX_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
_RX_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$|"
                     r"^([0-9A-Fa-f]{2}[:-]){19}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$")
_RX_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")
_RX_DURATION = re.compile(
    r"^(([+-]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|0)$|"
    r"^(\d+)\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$"
)


def _is_datetime(text: str) -> bool:
    match = _RX_DATETIME.match(text)
    if not match:
        return False
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        _dt.datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return False
    return second <= 60


def _is_date(text: str) -> bool:
    try:
        _dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _is_ip(version: int) -> Any:
    def check(text: str) -> bool:
        try:
            return ipaddress.ip_address(text).version == version
        except ValueError:
            return False
    return check


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _is_byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        return False
    return True


def _is_uri(text: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S*$", text) or text.startswith("/")) and " " not in text


_FORMATS: dict[str, Any] = {
    "datetime": _is_datetime,
    "date": _is_date,
    "duration": lambda t: bool(_RX_DURATION.match(t)),
    "uuid": lambda t: bool(_RX_UUID.match(t)),
    "uuid3": lambda t: bool(_RX_UUID.match(t)),
    "uuid4": lambda t: bool(_RX_UUID.match(t)),
    "uuid5": lambda t: bool(_RX_UUID.match(t)),
    "ipv4": _is_ip(4),
    "ipv6": _is_ip(6),
    "cidr": _is_cidr,
    "mac": lambda t: bool(_RX_MAC.match(t)),
    "hostname": lambda t: len(t) <= 255 and bool(_RX_HOSTNAME.match(t)),
    "email": lambda t: bool(_RX_EMAIL.match(t)),
    "byte": _is_byte,
    "uri": _is_uri,
    "hexcolor": lambda t: bool(re.match(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", t)),
    "rgbcolor": lambda t: bool(re.match(r"^rgb\(\s*\d{1,3}%?\s*,\s*\d{1,3}%?\s*,\s*\d{1,3}%?\s*\)$", t)),
    "bsonobjectid": lambda t: bool(re.match(r"^[0-9a-fA-F]{24}$", t)),
    "ssn": lambda t: bool(re.match(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", t)),
}


# ---------------------------------------------------------------------------------------------------------------
# pruning / unknown fields

_ROOT_META = ("apiVersion", "kind", "metadata")


def unknown_fields(schema: Schema | None, obj: Any) -> list[str]:
    """Paths (`spec.foo`, `spec.tasks[0].bar`) of the fields structural pruning would drop, in document order."""
    found: list[str] = []
    if schema is not None:
        _walk_unknown(schema, obj, "", found, drop=False, root=True)
    return found


def prune(schema: Schema | None, obj: Any) -> Any:
    """A deep copy of `obj` without its unknown fields."""
    result = copy.deepcopy(obj)
    if schema is not None:
        _walk_unknown(schema, result, "", [], drop=True, root=True)
    return result


def _walk_unknown(schema: Schema | None, value: Any, path: str, found: list[str], *, drop: bool,
                  root: bool = False) -> None:
    preserve = _preserves(schema)
    if isinstance(value, dict):
        if schema is None:
            for key in list(value):
                found.append(_child(path, key))
                if drop:
                    del value[key]
            return
        props = schema.get("properties") or {}
        extra = _additional(schema)
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if embedded and key in _ROOT_META:
                continue
            child = _child(path, key)
            if key in props:
                _walk_unknown(props[key], value[key], child, found, drop=drop)
            elif extra is not None:
                _walk_unknown(extra, value[key], child, found, drop=drop)
            elif not preserve:
                found.append(child)
                if drop:
                    del value[key]
    elif isinstance(value, list):
        if schema is None:
            if not preserve:
                for index, item in enumerate(value):
                    _walk_unknown(None, item, f"{path}[{index}]", found, drop=drop)
            return
        items = schema.get("items")
        if preserve and not isinstance(items, Mapping):
            return
        for index, item in enumerate(value):
            _walk_unknown(items if isinstance(items, Mapping) else None, item, f"{path}[{index}]", found,
                          drop=drop)


# ---------------------------------------------------------------------------------------------------------------
# CRD helpers


def crd_schema(crd: Mapping[str, Any], version: str) -> dict[str, Any] | None:
    """The `openAPIV3Schema` of `version` in a CustomResourceDefinition (v1, or v1beta1's top-level one)."""
    spec = crd.get("spec") or {}
    shared = (spec.get("validation") or {}).get("openAPIV3Schema")
    for entry in spec.get("versions") or ():
        if entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            return schema if schema is not None else shared
    return shared if spec.get("version") == version else None
