"""Field errors as apimachinery's `field` package has them (`field.Error`, its types and constructors) and the Go
value rendering (`%v`, `%q`, `%#v`) their messages use, so a 422 reads exactly like kube-apiserver's.

Used by the structural-schema engine `kube.schemas` and by whoever builds an Invalid from field errors; pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lahar.kube import errors

__all__ = [
    "OMIT",
    "ErrorType",
    "FieldError",
    "duplicate",
    "errors_message",
    "forbidden",
    "go_float",
    "go_quote",
    "go_value",
    "invalid",
    "invalid_error",
    "not_supported",
    "required",
    "too_long",
    "too_many",
    "type_invalid",
]


class ErrorType:
    """`field.ErrorType` values (the `reason` of a Status cause) and their rendering."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    INTERNAL = "InternalError"
    TYPE_INVALID = "FieldValueTypeInvalid"

    TEXT = {
        NOT_FOUND: "Not found",
        REQUIRED: "Required value",
        DUPLICATE: "Duplicate value",
        INVALID: "Invalid value",
        NOT_SUPPORTED: "Unsupported value",
        FORBIDDEN: "Forbidden",
        TOO_LONG: "Too long",
        TOO_MANY: "Too many",
        INTERNAL: "Internal error",
        TYPE_INVALID: "Invalid value",
    }
    # Types whose rendering never shows the bad value.
    VALUELESS = frozenset({REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL})


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()
"""A bad value that is not shown in the message (Go's `omitValue`)."""


@dataclass(frozen=True)
class FieldError:
    """One `field.Error`: `field` is the dotted path, `type` an `ErrorType` value."""

    field: str
    type: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """`ErrorBody()`: the message without the field path (the `message` of a Status cause)."""
        text = ErrorType.TEXT.get(self.type, self.type)
        if self.type not in ErrorType.VALUELESS and self.value is not OMIT:
            text = f"{text}: {go_value(self.value, top=True)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def message(self) -> str:
        """`Error()`: `<field>: <body>`."""
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        """The Status `details.causes[]` entry kube-apiserver builds for this error."""
        return {"reason": self.type, "message": self.body(), "field": self.field}

    def __str__(self) -> str:
        return self.message()


# ---------------------------------------------------------------------------------------------------------------
# field.* constructors (k8s.io/apimachinery/pkg/util/validation/field)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.REQUIRED, "", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, value, detail)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.TYPE_INVALID, value, detail)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    values = list(supported)
    detail = ("supported values: " + ", ".join(go_quote(v) for v in values)) if values else ""
    return FieldError(path, ErrorType.NOT_SUPPORTED, value, detail)


def too_long(path: str, value: Any, max_length: int) -> FieldError:
    detail = f"may not be more than {max_length} bytes" if max_length >= 0 else "value is too long"
    return FieldError(path, ErrorType.TOO_LONG, value, detail)


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    detail = f"must have at most {maximum} items" if maximum >= 0 else "has too many items"
    return FieldError(path, ErrorType.TOO_MANY, actual if actual >= 0 else OMIT, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, ErrorType.FORBIDDEN, "", detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, ErrorType.DUPLICATE, value, "")


# ---------------------------------------------------------------------------------------------------------------
# Go value rendering (fmt %v / %q / %#v), so messages read exactly like kube-apiserver's


def go_quote(text: str) -> str:
    """`strconv.Quote`."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_float(value: float) -> str:
    """`%v` of a float64 (strconv 'g', shortest): exponent form when the exponent is < -4 or >= 6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign_bit, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent = int(exponent) + (len(digit_tuple) - len(digits))
    exp = len(digits) + exponent - 1  # decimal exponent of the first digit
    sign = "-" if sign_bit else ""
    if exp < -4 or exp >= 6:
        tail = digits[1:]
        return f"{sign}{digits[0]}{'.' + tail if tail else ''}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if exponent >= 0:
        return sign + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}0.{'0' * -point}{digits}"


def _go_syntax(value: Any) -> str:
    """`%#v` of a decoded-JSON value (what the Go apiserver prints for maps and slices)."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{go_quote(str(k))}:{_go_syntax(value[k])}" for k in sorted(value, key=str))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, (list, tuple)):
        return "[]interface {}{" + ", ".join(_go_syntax(v) for v in value) + "}"
    return go_quote(str(value))


def go_value(value: Any, *, top: bool = False) -> str:
    """How `field.Error` prints a bad value: `%v` for numbers and bools, `%q` for strings, `%#v` otherwise."""
    if value is None:
        return '"null"' if top else "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return _go_syntax(value)


# ---------------------------------------------------------------------------------------------------------------
# error messages


def _unique_messages(errs: Iterable[FieldError | str]) -> list[str]:
    seen: dict[str, None] = {}
    for err in errs:
        seen.setdefault(err.message() if isinstance(err, FieldError) else str(err), None)
    return list(seen)


def errors_message(kind: str, group: str, name: str, errs: Iterable[FieldError | str]) -> str:
    """`<Kind>.<group> "<name>" is invalid: <errors>` — brackets only around more than one (distinct) error."""
    qualified = f"{kind}.{group}" if group else kind
    messages = _unique_messages(errs)
    head = f"{qualified} {go_quote(name)} is invalid"
    if not messages:
        return head
    if len(messages) == 1:
        return f"{head}: {messages[0]}"
    return f"{head}: [{', '.join(messages)}]"


def invalid_error(kind: str, group: str, name: str, errs: Iterable[FieldError]) -> errors.Invalid:
    """The 422 `Invalid` ApiError kube-apiserver returns for these field errors (`apierrors.NewInvalid`)."""
    errs = list(errs)
    details = {"name": name, "group": group, "kind": kind, "causes": [e.cause() for e in errs]}
    if not group:
        del details["group"]
    return errors.Invalid(errors_message(kind, group, name, errs), details=details)
