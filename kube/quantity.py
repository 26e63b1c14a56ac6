"""Kubernetes resource quantities (`500m`, `1Gi`, `1e3`): exact parsing, arithmetic and canonical strings.

Sits under everything that reads requests, limits, capacities and queue shares (models, scheduler, quota).

This is a port of `k8s.io/apimachinery/pkg/api/resource` (quantity.go, amount.go, suffix.go) onto
`fractions.Fraction`, keeping its observable behaviour:

- the grammar and the three error texts of `ParseQuantity` (`ErrFormatWrong`, `ErrNumeric`, `ErrSuffix`);
- parsing keeps a value only down to nano, rounding finer non-zero values away from zero (`0.9n` → `1n`);
  a BinarySI value is capped, silently, at 2^63-1 (`9Ei`); a BinarySI value below 1 becomes DecimalSI;
- `str(q)` is Go's `String()`: parsing remembers the input when Go's fast path judges it canonical, so
  `str(parse("+1")) == "+1"` and `str(parse("1.001")) == "1.001"` exactly as the API server echoes them
  (kubernetes#138165); every other value, and every arithmetic result, renders canonically:
  `1.5Gi` → `1536Mi`, `1000m` → `1`, `0.5` → `500m`, `1e3` → `1e3`, `1000E` → `1e21`.
  `q.canonical` is the canonical form without that remembered input;
- `value()` / `milli_value()` round away from zero like `Value()` / `MilliValue()`, without int64 overflow.

Deliberate differences, all at absurd magnitudes: a decimal exponent beyond ±1000 is rejected with
`ErrSuffix` (Go would accept `1e999999`; exact arithmetic on it would not terminate here), and a binary
value of 1024^7 or more renders with an `Ei` suffix where Go drops the magnitude.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

__all__ = [
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "Format",
    "Quantity",
    "QuantityError",
    "ResourceList",
    "add",
    "fits",
    "le",
    "parse",
    "render",
    "resource_list",
    "resource_list_add",
    "resource_list_le",
    "resource_list_sub",
    "sub",
]

SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

MAX_EXPONENT = 1000  # see the module docstring
_MAX_INT64 = 2**63 - 1
_NANO = 10**9
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


class Format(enum.StrEnum):
    """How a quantity prints; remembered from the suffix it was parsed with."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_SI = "DecimalSI"  # 12M


_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]  # index k: 1024**k


class QuantityError(ValueError):
    """A malformed quantity. `reason` is apimachinery's error text; the message also names the value."""

    def __init__(self, value: object, reason: str = ERR_FORMAT_WRONG) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"cannot parse '{value}': {reason}")


class Quantity:
    """An immutable fixed-point number with the format it prints in (resource.Quantity).

    Equality, ordering and hashing go by value only: `parse("1Gi") == parse("1073741824")`.
    """

    __slots__ = ("_format", "_s", "_v")

    _v: Fraction
    _format: Format
    _s: str | None

    def __init__(self, value: int | Fraction = 0, format: Format | str = Format.DECIMAL_SI) -> None:  # noqa: A002
        if isinstance(value, float):
            raise TypeError("Quantity() takes exact numbers; parse() a float to get Kubernetes' reading of it")
        v = Fraction(value)
        if not _is_decimal(v):
            raise ValueError(f"a quantity must be a finite decimal number, got {value!r}")
        object.__setattr__(self, "_v", v)
        object.__setattr__(self, "_format", Format(format))
        object.__setattr__(self, "_s", None)

    @classmethod
    def _make(cls, v: Fraction, fmt: Format, s: str | None = None) -> Quantity:
        q = object.__new__(cls)
        object.__setattr__(q, "_v", v)
        object.__setattr__(q, "_format", fmt)
        object.__setattr__(q, "_s", s)
        return q

    @classmethod
    def from_milli(cls, milli: int, format: Format | str = Format.DECIMAL_SI) -> Quantity:  # noqa: A002
        """NewMilliQuantity: `milli` thousandths."""
        return cls(Fraction(milli, 1000), format)

    @classmethod
    def from_scaled(cls, value: int, scale: int) -> Quantity:
        """NewScaledQuantity: value * 10^scale, DecimalSI."""
        return cls(Fraction(value) * Fraction(10) ** scale, Format.DECIMAL_SI)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Quantity is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Quantity._make, (self._v, self._format, self._s))

    # --- accessors -------------------------------------------------------------------------------------------

    @property
    def format(self) -> Format:
        return self._format

    @property
    def fraction(self) -> Fraction:
        """The exact value."""
        return self._v

    @property
    def canonical(self) -> str:
        """The canonical form, ignoring any input string remembered at parse time (`1.001` → `1001m`)."""
        return _canonical(self._v, self._format)

    def is_zero(self) -> bool:
        return self._v == 0

    def sign(self) -> int:
        return (self._v > 0) - (self._v < 0)

    def scaled_value(self, scale: int) -> int:
        """ScaledValue: the value in units of 10^scale, rounded away from zero."""
        return _round_away(self._v / Fraction(10) ** scale)

    def value(self) -> int:
        """Value: the value rounded away from zero to an integer (`1500m` → 2)."""
        v = self._v
        return v.numerator if v.denominator == 1 else _round_away(v)

    def milli_value(self) -> int:
        """MilliValue: the value in thousandths, rounded away from zero (`1n` → 1)."""
        v = self._v
        return v.numerator * 1000 if v.denominator == 1 else _round_away(v * 1000)

    def __float__(self) -> float:
        return float(self._v)

    def __bool__(self) -> bool:
        return self._v != 0

    def __str__(self) -> str:
        return self._s if self._s is not None else _canonical(self._v, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __hash__(self) -> int:
        return hash(self._v)

    # --- arithmetic (Add/Sub: a zero left side takes the right side's format) ---------------------------------

    def __add__(self, other: object) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._v == 0 else self._format
        return Quantity._make(self._v + other._v, fmt)

    def __sub__(self, other: object) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._v == 0 else self._format
        return Quantity._make(self._v - other._v, fmt)

    def __mul__(self, other: object) -> Quantity:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return Quantity._make(self._v * other, self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._v, self._format)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return self if self._v >= 0 else -self

    # --- comparison (with quantities and plain numbers) -------------------------------------------------------

    def _other(self, other: object) -> Fraction | None:
        if isinstance(other, Quantity):
            return other._v
        if isinstance(other, int | Fraction) and not isinstance(other, bool):
            return Fraction(other)
        return None

    def __eq__(self, other: object) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self._v == o

    def __lt__(self, other: object) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self._v < o

    def __le__(self, other: object) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self._v <= o

    def __gt__(self, other: object) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self._v > o

    def __ge__(self, other: object) -> bool:
        o = self._other(other)
        return NotImplemented if o is None else self._v >= o

    def cmp(self, other: Quantity) -> int:
        """Go's Cmp: -1, 0 or 1."""
        return (self._v > other._v) - (self._v < other._v)

    # --- pydantic: a field typed `Quantity` accepts "1Gi" / 2 / 0.5 and serializes to its string --------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            _coerce,
            json_schema_input_schema=core_schema.union_schema(
                [core_schema.str_schema(), core_schema.int_schema(), core_schema.float_schema()]
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


# --- parsing ---------------------------------------------------------------------------------------------------


_PARSED: dict[str, Quantity] = {}
_PARSED_MAX = 4096  # distinct strings remembered; admission parses the same few ("1", "8Gi", "100m") all day


def parse(s: str | int | float | Quantity) -> Quantity:
    """ParseQuantity. Also takes what a JSON/YAML number decodes to (`cpu: 2`), and quantities unchanged.

    Quantities are immutable, so valid strings are memoized (up to `_PARSED_MAX` of them).
    """
    if type(s) is str:
        q = _PARSED.get(s)
        if q is None:
            q = _parse(s)
            if len(_PARSED) < _PARSED_MAX:
                _PARSED[s] = q
        return q
    return _parse(s)


def _parse(s: str | int | float | Quantity) -> Quantity:
    if isinstance(s, Quantity):
        return s
    if isinstance(s, bool):
        s = "true" if s else "false"  # what Go sees in the JSON; fails below like it does there
    elif isinstance(s, int | float):
        s = repr(s)
    if not isinstance(s, str):
        raise QuantityError(s, ERR_FORMAT_WRONG)
    if s == "":
        raise QuantityError(s, ERR_FORMAT_WRONG)
    if s == "0":
        return Quantity._make(Fraction(0), Format.DECIMAL_SI, "0")

    positive, num, denom, suf, has_digits = _scan(s)
    base, exponent, fmt = _interpret(s, suf)

    # Go's int64 fast path: decides whether the input string is remembered as the rendered form.
    precision = -1
    if fmt is Format.BINARY_SI:
        if len(denom) == 0:  # exponent >= 0 always holds for binary suffixes
            precision = 15 - len(num) - (exponent * 3 // 10) - 1
    else:
        precision = 18 - len(num) - len(denom)
    if precision >= 0:
        scale = (0 if fmt is Format.BINARY_SI else exponent) - len(denom)
        if scale >= -9:
            shifted = num + denom
            digits = int(shifted)
            mantissa = 1 << exponent if fmt is Format.BINARY_SI else 1
            result = digits * mantissa
            if result <= _MAX_INT64:
                v = Fraction(result if positive else -result) * Fraction(10) ** scale
                if fmt is Format.BINARY_SI:
                    keep = digits & 0x07 != 0
                else:
                    keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                return Quantity._make(v, fmt, s if keep else None)

    if not has_digits:
        raise QuantityError(s, ERR_NUMERIC)
    try:
        amount = Fraction(int(num + denom), 10 ** len(denom))
    except ValueError as e:  # more digits than Python converts at once
        raise QuantityError(s, ERR_NUMERIC) from e
    amount *= Fraction(base) ** exponent
    if amount != 0:
        amount = _ceil_nano(amount)  # non-zero values round up to at least 1n
    if fmt is Format.BINARY_SI and amount > _MAX_INT64:
        amount = Fraction(_MAX_INT64)
    if fmt is Format.BINARY_SI and 0 < amount < 1:
        fmt = Format.DECIMAL_SI
    return Quantity._make(amount if positive else -amount, fmt)


def _scan(s: str) -> tuple[bool, str, str, str, bool]:
    """parseQuantityString: (positive, numerator without leading zeros, denominator, suffix, any digits)."""
    positive = True
    pos, end = 0, len(s)
    if s[0] == "-":
        positive = False
        pos = 1
    elif s[0] == "+":
        pos = 1
    start = pos
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:  # nothing but zeros (or nothing) after the sign
        return positive, "0", "", "", pos > start
    i = pos
    while i < end and s[i] in _DIGITS:
        i += 1
    num = s[pos:i] or "0"
    has_digits = i > start
    pos = i
    if pos >= end:
        return positive, num, "", "", has_digits
    denom = ""
    if s[pos] == ".":
        pos += 1
        i = pos
        while i < end and s[i] in _DIGITS:
            i += 1
        denom = s[pos:i]
        has_digits = has_digits or i > pos
        pos = i
        if pos >= end:
            return positive, num, denom, "", has_digits
    suffix_start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(s, ERR_FORMAT_WRONG)
    return positive, num, denom, s[suffix_start:], has_digits


def _interpret(s: str, suf: str) -> tuple[int, int, Format]:
    """suffixer.interpret: (base, exponent, format)."""
    if suf in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suf], Format.DECIMAL_SI
    if suf in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suf], Format.BINARY_SI
    if len(suf) > 1 and suf[0] in "eE":
        rest = suf[1:]
        body = rest[1:] if rest[0] in "+-" else rest
        if body and all(c in _DIGITS for c in body):
            parsed = int(rest)
            if -(2**63) <= parsed <= _MAX_INT64:
                exponent = (parsed + 2**31) % 2**32 - 2**31  # Go's int32(parsed)
                if abs(exponent) <= MAX_EXPONENT:
                    return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(s, ERR_SUFFIX)


# --- rendering -------------------------------------------------------------------------------------------------


def _canonical(v: Fraction, fmt: Format) -> str:
    """CanonicalizeBytes: no precision lost, no fractional digits, the largest exponent/suffix."""
    if v == 0:
        return "0"
    if fmt is Format.BINARY_SI and (-1024 < v < 1024 or v.denominator != 1):
        fmt = Format.DECIMAL_SI
    if fmt is Format.BINARY_SI:
        mantissa, power = _remove_factors(v.numerator, 1024)
        if power >= len(_BINARY_BY_POWER):
            mantissa *= 1024 ** (power - len(_BINARY_BY_POWER) + 1)
            power = len(_BINARY_BY_POWER) - 1
        return f"{mantissa}{_BINARY_BY_POWER[power]}"
    mantissa, exponent = _decimal_parts(v)
    e3 = exponent // 3 * 3
    mantissa *= 10 ** (exponent - e3)
    if fmt is Format.DECIMAL_SI and e3 in _DECIMAL_BY_EXPONENT:
        return f"{mantissa}{_DECIMAL_BY_EXPONENT[e3]}"
    return f"{mantissa}e{e3}" if e3 else str(mantissa)


def _remove_factors(n: int, factor: int) -> tuple[int, int]:
    times = 0
    while n != 0 and n % factor == 0:
        n //= factor
        times += 1
    return n, times


def _decimal_parts(v: Fraction) -> tuple[int, int]:
    """(m, e) with m * 10^e == v and m not divisible by 10."""
    if v.denominator == 1:
        return _remove_factors(v.numerator, 10)
    d = v.denominator
    twos = (d & -d).bit_length() - 1
    _, fives = _remove_factors(d >> twos, 5)
    k = max(twos, fives)
    m = v.numerator * 10**k // d
    m, back = _remove_factors(m, 10)
    return m, back - k


def _is_decimal(v: Fraction) -> bool:
    d = v.denominator
    d >>= (d & -d).bit_length() - 1
    while d % 5 == 0:
        d //= 5
    return d == 1


def _ceil_nano(amount: Fraction) -> Fraction:
    """Round a non-negative amount up to a multiple of 10^-9."""
    scaled = amount * _NANO
    if scaled.denominator == 1:
        return amount
    return Fraction(-(-scaled.numerator // scaled.denominator), _NANO)


def _round_away(v: Fraction) -> int:
    return math.ceil(v) if v >= 0 else math.floor(v)


def _coerce(value: object) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return parse(value)
    raise QuantityError(value, ERR_FORMAT_WRONG)


# --- resource lists (corev1.ResourceList arithmetic) --------------------------------------------------------

ResourceList = Mapping[str, "str | int | float | Quantity"]


def resource_list(rl: ResourceList | None) -> dict[str, Quantity]:
    """Parse every value of a ResourceList; `None` is the empty list."""
    return {name: parse(v) for name, v in (rl or {}).items()}


def render(rl: Mapping[str, Quantity | str | int | float]) -> dict[str, str]:
    """The wire form of a ResourceList: every value as its string."""
    return {name: str(parse(v)) for name, v in rl.items()}


def add(a: ResourceList | None, b: ResourceList | None) -> dict[str, Quantity]:
    """a + b over the union of names (quota.Add)."""
    out = resource_list(a)
    for name, v in (b or {}).items():
        q = parse(v)
        out[name] = out[name] + q if name in out else q
    return out


def sub(a: ResourceList | None, b: ResourceList | None) -> dict[str, Quantity]:
    """a - b over the union of names; a name only in b comes out negated (quota.Subtract)."""
    out = resource_list(a)
    for name, v in (b or {}).items():
        q = parse(v)
        out[name] = out[name] - q if name in out else -q
    return out


def fits(request: ResourceList | None, available: ResourceList | None) -> list[str]:
    """Names (sorted) whose request exceeds what is available; a name missing from `available` has 0."""
    have = resource_list(available)
    zero = Quantity()
    return sorted(name for name, v in (request or {}).items() if parse(v) > have.get(name, zero))


def le(a: ResourceList | None, b: ResourceList | None) -> bool:
    """Every quantity of a is <= the same name in b (missing in b counts as 0)."""
    return not fits(a, b)


resource_list_add = add
resource_list_sub = sub
resource_list_le = le
