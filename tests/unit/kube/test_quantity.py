"""Tables ported from apimachinery's pkg/api/resource/quantity_test.go, plus resource-list arithmetic."""

from __future__ import annotations

import pickle
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lahar.kube import quantity
from lahar.kube.quantity import ERR_FORMAT_WRONG, ERR_NUMERIC, ERR_SUFFIX, Format, Quantity, QuantityError, parse

D, B, X = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT
MAX_INT64 = 2**63 - 1


def dec(i: int, exponent: int) -> Fraction:
    """Go's dec(i, exponent): i * 10^exponent."""
    return Fraction(i) * Fraction(10) ** exponent


# TestQuantityParse: input -> (value, format)
PARSE = [
    ("0", dec(0, 0), D),
    ("0n", dec(0, 0), D),
    ("0u", dec(0, 0), D),
    ("0m", dec(0, 0), D),
    ("0Ki", dec(0, 0), B),
    ("0k", dec(0, 0), D),
    ("0Mi", dec(0, 0), B),
    ("0M", dec(0, 0), D),
    ("0Gi", dec(0, 0), B),
    ("0G", dec(0, 0), D),
    ("0Ti", dec(0, 0), B),
    ("0T", dec(0, 0), D),
    ("1", dec(1, 0), D),
    ("1Ki", dec(1024, 0), B),
    ("8Ki", dec(8 * 1024, 0), B),
    ("7Mi", dec(7 * 1024**2, 0), B),
    ("6Gi", dec(6 * 1024**3, 0), B),
    ("5Ti", dec(5 * 1024**4, 0), B),
    ("4Pi", dec(4 * 1024**5, 0), B),
    ("3Ei", dec(3 * 1024**6, 0), B),
    ("10Ti", dec(10 * 1024**4, 0), B),
    ("100Ti", dec(100 * 1024**4, 0), B),
    ("5n", dec(5, -9), D),
    ("4u", dec(4, -6), D),
    ("3m", dec(3, -3), D),
    ("9", dec(9, 0), D),
    ("8k", dec(8, 3), D),
    ("50k", dec(5, 4), D),
    ("7M", dec(7, 6), D),
    ("6G", dec(6, 9), D),
    ("5T", dec(5, 12), D),
    ("40T", dec(4, 13), D),
    ("300T", dec(3, 14), D),
    ("2P", dec(2, 15), D),
    ("1E", dec(1, 18), D),
    ("1E-3", dec(1, -3), X),
    ("1e3", dec(1, 3), X),
    ("1E6", dec(1, 6), X),
    ("1e9", dec(1, 9), X),
    ("1E12", dec(1, 12), X),
    ("1e15", dec(1, 15), X),
    ("1E18", dec(1, 18), X),
    ("1e14", dec(1, 14), X),
    ("1e13", dec(1, 13), X),
    ("100.035k", dec(100035, 0), D),
    ("0.001", dec(1, -3), D),
    ("0.0005k", dec(5, -1), D),
    ("0.005", dec(5, -3), D),
    ("0.05", dec(5, -2), D),
    ("0.5", dec(5, -1), D),
    ("0.00050k", dec(5, -1), D),
    ("0.00500", dec(5, -3), D),
    ("0.05000", dec(5, -2), D),
    ("0.50000", dec(5, -1), D),
    ("0.5e0", dec(5, -1), X),
    ("0.5e-1", dec(5, -2), X),
    ("0.5e-2", dec(5, -3), X),
    ("10.035M", dec(10035, 3), D),
    ("1.2e3", dec(12, 2), X),
    ("1.3E+6", dec(13, 5), X),
    ("1.40e9", dec(14, 8), X),
    ("1.53E12", dec(153, 10), X),
    ("1.6e15", dec(16, 14), X),
    ("1.7E18", dec(17, 17), X),
    ("9.01", dec(901, -2), D),
    ("8.1k", dec(81, 2), D),
    ("7.123456M", dec(7123456, 0), D),
    ("6.987654321G", dec(6987654321, 0), D),
    ("5.444T", dec(5444, 9), D),
    ("40.1T", dec(401, 11), D),
    ("300.2T", dec(3002, 11), D),
    ("2.5P", dec(25, 14), D),
    ("1.01E", dec(101, 16), D),
    # things that saturate / round
    ("3.001n", dec(4, -9), D),
    ("1.1E-9", dec(2, -9), X),
    ("0.0000000001", dec(1, -9), D),
    ("0.0000000005", dec(1, -9), D),
    ("0.00000000050", dec(1, -9), D),
    ("0.5e-9", dec(1, -9), X),
    ("0.9n", dec(1, -9), D),
    ("0.00000012345", dec(124, -9), D),
    ("0.00000012354", dec(124, -9), D),
    ("9Ei", Fraction(MAX_INT64), B),
    ("9223372036854775807Ki", Fraction(MAX_INT64), B),
    ("12E", dec(12, 18), D),
    # fractional binary
    ("100.035Ki", dec(10243584, -2), B),
    ("0.5Mi", dec(512 * 1024, 0), B),
    ("0.05Gi", dec(536870912, -1), B),
    ("0.025Ti", dec(274877906944, -1), B),
    # things written by trolls
    ("0.000000000001Ki", dec(2, -9), D),
    (".001", dec(1, -3), D),
    (".0001k", dec(100, -3), D),
    ("1.", dec(1, 0), D),
    ("1.G", dec(1, 9), D),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE, ids=[p[0] for p in PARSE])
def test_parse(text: str, value: Fraction, fmt: Format) -> None:
    q = parse(text)
    assert q.fraction == value
    assert q.format is fmt
    # the negative and explicitly positive spellings parse to -value / value with the same format
    neg, pos = parse("-" + text), parse("+" + text)
    assert (neg.fraction, neg.format) == (-value, fmt)
    assert (pos.fraction, pos.format) == (value, fmt)


INVALID = [
    ("", ERR_FORMAT_WRONG),
    ("1.1.M", ERR_FORMAT_WRONG),
    ("1+1.0M", ERR_FORMAT_WRONG),
    ("0.1mi", ERR_SUFFIX),
    ("0.1am", ERR_FORMAT_WRONG),
    ("aoeu", ERR_FORMAT_WRONG),
    (".5i", ERR_SUFFIX),
    ("1i", ERR_SUFFIX),
    ("-3.01i", ERR_SUFFIX),
    ("-3.01e-", ERR_SUFFIX),
    (" 1", ERR_FORMAT_WRONG),
    ("1 ", ERR_FORMAT_WRONG),
    ("1K", ERR_SUFFIX),
    ("1Ee3", ERR_SUFFIX),
    ("1ke3", ERR_SUFFIX),
    ("1e3k", ERR_FORMAT_WRONG),
    ("1M+", ERR_SUFFIX),
    ("Non-Numeric", ERR_FORMAT_WRONG),
    (".Pi", ERR_NUMERIC),
    ("1e99999", ERR_SUFFIX),  # lahar bounds decimal exponents at ±1000
]


@pytest.mark.parametrize(("text", "reason"), INVALID, ids=[repr(i[0]) for i in INVALID])
def test_parse_invalid(text: str, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse(text)
    assert info.value.reason == reason
    assert info.value.value == text
    assert str(info.value) == f"cannot parse '{text}': {reason}"
    assert isinstance(info.value, ValueError)


def test_format_wrong_message_is_apimachinerys() -> None:
    assert ERR_FORMAT_WRONG == (
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


@pytest.mark.parametrize("bad", [None, True, [], {}, float("nan"), float("inf")], ids=repr)
def test_parse_rejects_non_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("number", "expect"), [(2, "2"), (0, "0"), (0.5, "500m"), (1e-05, "10e-6"), (-3, "-3")], ids=repr
)
def test_parse_json_numbers(number: float, expect: str) -> None:
    assert parse(number).canonical == expect


# TestQuantityString: (value, format) -> String(); parsing the string remembers it; the alternate renders the same
STRING = [
    (dec(1024**3, 0), B, "1Gi", "1024Mi"),
    (dec(300 * 1024**2, 0), B, "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), B, "6Ki", ""),
    (dec(1001 * 1024**3, 0), B, "1001Gi", "1025024Mi"),
    (dec(1024**4, 0), B, "1Ti", "1024Gi"),
    (dec(5, 0), B, "5", "5000m"),
    (dec(500, -3), B, "500m", "0.5"),
    (dec(1, 9), D, "1G", "1000M"),
    (dec(1000, 6), D, "1G", "0.001T"),
    (dec(1000000, 3), D, "1G", ""),
    (dec(1000000000, 0), D, "1G", ""),
    (dec(1, -3), D, "1m", "1000u"),
    (dec(80, -3), D, "80m", ""),
    (dec(1080, -3), D, "1080m", "1.08"),
    (dec(108, -2), D, "1080m", "1080000000n"),
    (dec(10800, -4), D, "1080m", ""),
    (dec(300, 6), D, "300M", ""),
    (dec(1, 12), D, "1T", ""),
    (dec(1, 18), D, "1E", ""),
    (dec(1, 21), D, "1e21", "1000E"),
    (dec(5, 21), D, "5e21", "5000E"),
    (dec(1, 24), D, "1e24", "1000000E"),
    (dec(1234567, 6), D, "1234567M", ""),
    (dec(1234567, -3), B, "1234567m", ""),
    (dec(3, 3), D, "3k", ""),
    (dec(1025, 0), B, "1025", ""),
    (dec(0, 0), D, "0", ""),
    (dec(0, 0), B, "0", ""),
    (dec(1, 9), X, "1e9", ".001e12"),
    (dec(1, -3), X, "1e-3", "0.001e0"),
    (dec(1, -9), X, "1e-9", "1000e-12"),
    (dec(80, -3), X, "80e-3", ""),
    (dec(300, 6), X, "300e6", ""),
    (dec(1, 12), X, "1e12", ""),
    (dec(1, 3), X, "1e3", ""),
    (dec(3, 3), X, "3e3", ""),
    (dec(3, 3), D, "3k", ""),
    (dec(0, 0), X, "0", "00"),
    (dec(1, -9), D, "1n", ""),
    (dec(80, -9), D, "80n", ""),
    (dec(1080, -9), D, "1080n", ""),
    (dec(108, -8), D, "1080n", ""),
    (dec(10800, -10), D, "1080n", ""),
    (dec(1, -6), D, "1u", ""),
    (dec(80, -6), D, "80u", ""),
    (dec(1080, -6), D, "1080u", ""),
]


@pytest.mark.parametrize(("value", "fmt", "expect", "alternate"), STRING, ids=[f"{s[2]}-{s[1]}" for s in STRING])
def test_string(value: Fraction, fmt: Format, expect: str, alternate: str) -> None:
    q = Quantity(value, fmt)
    assert str(q) == expect
    assert str(parse(expect)) == expect
    if alternate:
        assert str(parse(alternate)) == expect
        assert parse(alternate).canonical == expect
    if value:
        assert str(-q) == "-" + expect


# TestQuantityParseEmit plus the brief's examples
EMIT = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    ("1.5Gi", "1536Mi"),
    ("1000m", "1"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("1e3", "1e3"),
    ("12e1", "120"),
    ("0.1", "100m"),
    ("100Ki", "100Ki"),
    ("2048Ki", "2Mi"),
    ("1P", "1P"),
    ("1000P", "1E"),
    ("1Ei", "1Ei"),
    ("1.1Ki", "1126400m"),
    ("500m", "500m"),
]


@pytest.mark.parametrize(("text", "expect"), EMIT, ids=[e[0] for e in EMIT])
def test_parse_emit(text: str, expect: str) -> None:
    assert str(parse(text)) == expect
    assert str(parse("-" + text)) == "-" + expect


# Go's parse fast path remembers the input when it looks canonical; String() (and the API server) echo it.
REMEMBERED = [
    ("+1", "+1", "1"),
    ("01", "01", "1"),
    ("1E3", "1E3", "1e3"),
    ("1e+3", "1e+3", "1e3"),
    ("1.001", "1.001", "1001m"),  # kubernetes#138165
    ("1.441k", "1.441k", "1441"),
    ("+1Ki", "+1Ki", "1Ki"),
    ("1.G", "1.G", "1G"),
    ("1000", "1k", "1k"),
    ("0.100", "100m", "100m"),
    ("-0", "0", "0"),
    ("-", "0", "0"),
    (".", "0", "0"),
]


@pytest.mark.parametrize(("text", "string", "canonical"), REMEMBERED, ids=[r[0] for r in REMEMBERED])
def test_remembered_input(text: str, string: str, canonical: str) -> None:
    q = parse(text)
    assert str(q) == string
    assert q.canonical == canonical
    assert str(q + Quantity()) == canonical  # arithmetic forgets the input


CMP = [
    ("0", "0", 0),
    ("100m", "50m", 1),
    ("50m", "100m", -1),
    ("10000T", "100Gi", 1),
    ("1Gi", "1073741824", 0),
    ("1G", "1Gi", -1),
    ("1n", "0", 1),
    ("-1n", "0", -1),
    ("1e3", "1k", 0),
]


@pytest.mark.parametrize(("x", "y", "expect"), CMP, ids=[f"{c[0]}~{c[1]}" for c in CMP])
def test_cmp(x: str, y: str, expect: int) -> None:
    a, b = parse(x), parse(y)
    assert a.cmp(b) == expect
    assert b.cmp(a) == -expect
    assert (a < b, a == b, a > b) == (expect < 0, expect == 0, expect > 0)
    assert (a <= b, a >= b) == (expect <= 0, expect >= 0)
    if expect == 0:
        assert hash(a) == hash(b)


def test_compare_with_plain_numbers() -> None:
    assert parse("1k") == 1000
    assert parse("500m") < 1
    assert parse("1500m") > Fraction(1)
    assert parse("1") != "1"  # strings are not parsed implicitly


# TestAdd / TestSub: a zero left side takes the right side's format
ADD = [
    (Quantity(10, D), Quantity(10, D), dec(20, 0), D),
    (Quantity(10, D), Quantity(1, B), dec(11, 0), D),
    (Quantity(10, B), Quantity(1, D), dec(11, 0), B),
    (Quantity(0, D), Quantity(50, D), dec(50, 0), D),
    (Quantity(50, D), Quantity(0, D), dec(50, 0), D),
    (Quantity(0, D), Quantity(0, D), dec(0, 0), D),
    (Quantity(0, D), Quantity(1024, B), dec(1024, 0), B),
]


@pytest.mark.parametrize(("a", "b", "value", "fmt"), ADD, ids=[f"{a}+{b}/{a.format}" for a, b, _, _ in ADD])
def test_add(a: Quantity, b: Quantity, value: Fraction, fmt: Format) -> None:
    got = a + b
    assert (got.fraction, got.format) == (value, fmt)


SUB = [
    (Quantity(10, D), Quantity(10, D), dec(0, 0), D),
    (Quantity(10, D), Quantity(1, B), dec(9, 0), D),
    (Quantity(10, B), Quantity(1, D), dec(9, 0), B),
    (Quantity(0, D), Quantity(50, D), dec(-50, 0), D),
    (Quantity(50, D), Quantity(0, D), dec(50, 0), D),
    (Quantity(0, D), Quantity(0, D), dec(0, 0), D),
]


@pytest.mark.parametrize(("a", "b", "value", "fmt"), SUB, ids=[f"{a}-{b}/{a.format}" for a, b, _, _ in SUB])
def test_sub(a: Quantity, b: Quantity, value: Fraction, fmt: Format) -> None:
    got = a - b
    assert (got.fraction, got.format) == (value, fmt)


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_zero_keeps_suffix(text: str) -> None:
    zero, q = parse("0"), parse(text)
    assert str(q + zero) == text
    assert str(zero + q) == text
    assert str(q - zero) == text
    assert str(zero - q) == str(-q) == "-" + text


MUL = [
    (Quantity(10, D), 10, dec(100, 0)),
    (Quantity(10, D), 1, dec(10, 0)),
    (Quantity(10, B), 1, dec(10, 0)),
    (Quantity(0, D), 50, dec(0, 0)),
    (Quantity(50, D), 0, dec(0, 0)),
    (Quantity(10, D), -10, dec(-100, 0)),
    (Quantity(-50, D), -50, dec(2500, 0)),
    (Quantity(MAX_INT64, D), 2, Fraction(MAX_INT64 * 2)),  # no int64 overflow
    (Quantity(-(2**63), D), -1, Fraction(2**63)),
]


@pytest.mark.parametrize(("a", "b", "value"), MUL, ids=[f"{m[0]}*{m[1]}" for m in MUL])
def test_mul(a: Quantity, b: int, value: Fraction) -> None:
    assert (a * b).fraction == value
    assert (b * a).fraction == value
    assert (a * b).format == a.format


def test_mul_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        parse("1") * 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        parse("1") * parse("1")  # type: ignore[operator]


def test_neg_keeps_format() -> None:
    assert str(-Quantity(Fraction(901, 100), D)) == "-9010m"
    assert str(-parse("1Gi")) == "-1Gi"
    negated = -parse("1Gi")
    assert -negated == parse("1Gi")


# TestMilliNewSet / TestNewSet / TestNewScaledSet / TestScaledValue
@pytest.mark.parametrize(
    ("milli", "fmt", "expect"),
    [
        (1, D, "1m"),
        (1000, D, "1"),
        (1234000, D, "1234"),
        (1024, B, "1024m"),
        (1000000, X, "1e3"),
        (1024 * 1024, B, "1048576m"),
    ],
    ids=str,
)
def test_from_milli(milli: int, fmt: Format, expect: str) -> None:
    q = Quantity.from_milli(milli, fmt)
    assert str(q) == expect
    assert parse(str(q)).milli_value() == milli


@pytest.mark.parametrize(
    ("value", "fmt", "expect"),
    [
        (1, D, "1"),
        (1000, D, "1k"),
        (1234000, D, "1234k"),
        (1024, B, "1Ki"),
        (1000000, X, "1e6"),
        (1024 * 1024, B, "1Mi"),
    ],
    ids=str,
)
def test_new(value: int, fmt: Format, expect: str) -> None:
    q = Quantity(value, fmt)
    assert str(q) == expect
    assert parse(expect).value() == value


@pytest.mark.parametrize(
    ("value", "scale", "expect"),
    [
        (1, -9, "1n"),
        (1000, -9, "1u"),
        (1, -6, "1u"),
        (1000, -6, "1m"),
        (1, -3, "1m"),
        (1000, -3, "1"),
        (1, 0, "1"),
        (0, -9, "0"),
    ],
    ids=str,
)
def test_from_scaled(value: int, scale: int, expect: str) -> None:
    q = Quantity.from_scaled(value, scale)
    assert str(q) == expect
    assert parse(expect).scaled_value(scale) == value


@pytest.mark.parametrize(
    ("from_scale", "to_scale", "expect"),
    [
        (-9, -9, 1),
        (-9, -6, 1),
        (-9, -3, 1),
        (-9, 0, 1),
        (-6, -9, 1000),
        (-3, -9, 10**6),
        (0, -9, 10**9),
        (0, -3, 1000),
        (2, -2, 10**4),
    ],
    ids=str,
)
def test_scaled_value(from_scale: int, to_scale: int, expect: int) -> None:
    assert Quantity.from_scaled(1, from_scale).scaled_value(to_scale) == expect


VALUES = [
    ("1", 1, 1000),
    ("1500m", 2, 1500),
    ("1n", 1, 1),
    ("1Gi", 2**30, 2**30 * 1000),
    ("0", 0, 0),
    ("-1500m", -2, -1500),
    ("-1n", -1, -1),
    ("12E", 12 * 10**18, 12 * 10**21),  # beyond int64: exact, no overflow
]


@pytest.mark.parametrize(("text", "value", "milli"), VALUES, ids=[v[0] for v in VALUES])
def test_value_and_milli_value_round_away_from_zero(text: str, value: int, milli: int) -> None:
    q = parse(text)
    assert q.value() == value
    assert q.milli_value() == milli


@pytest.mark.parametrize(
    ("text", "expect"),
    [("2Ki", 2048.0), ("1.1Ki", 1126.4), ("1Mi", 1.048576e06), ("2Gi", 2.147483648e09), ("100m", 0.1)],
    ids=str,
)
def test_float(text: str, expect: float) -> None:
    assert float(parse(text)) == expect


def test_quantity_is_immutable_and_picklable() -> None:
    q = parse("1.001")
    with pytest.raises(AttributeError):
        q._v = Fraction(2)  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(q))
    assert again == q and str(again) == "1.001"


def test_constructor_rejects_non_decimal_values() -> None:
    with pytest.raises(ValueError, match="finite decimal"):
        Quantity(Fraction(1, 3))
    with pytest.raises(TypeError):
        Quantity(0.1)  # type: ignore[arg-type]
    assert parse(0.1) == Quantity(Fraction(1, 10))


def test_pydantic_field() -> None:
    from pydantic import BaseModel, ValidationError

    class Limits(BaseModel):
        cpu: Quantity

    assert Limits(cpu="1500m").cpu == parse("1.5")
    assert Limits(cpu=2).model_dump(mode="json") == {"cpu": "2"}
    assert Limits.model_validate_json('{"cpu": "1.5Gi"}').model_dump(mode="json") == {"cpu": "1536Mi"}
    with pytest.raises(ValidationError, match="unable to parse quantity's suffix"):
        Limits(cpu="1K")


# --- resource lists -----------------------------------------------------------------------------------------


def test_add_and_sub_lists() -> None:
    a = {"cpu": "1", "memory": "1Gi"}
    b = {"cpu": "500m", "nvidia.com/gpu": 2}
    assert quantity.render(quantity.add(a, b)) == {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2"}
    assert quantity.render(quantity.sub(a, b)) == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "-2"}
    assert quantity.add(None, None) == {}
    assert quantity.resource_list_add is quantity.add
    assert quantity.resource_list_sub is quantity.sub


FITS = [
    ({"cpu": "1"}, {"cpu": "2"}, []),
    ({"cpu": "2"}, {"cpu": "2000m"}, []),
    ({"cpu": "2001m"}, {"cpu": "2"}, ["cpu"]),
    ({"memory": "1Gi", "cpu": "3"}, {"cpu": "2", "memory": "1000Mi"}, ["cpu", "memory"]),
    ({"nvidia.com/gpu": "1"}, {"cpu": "8"}, ["nvidia.com/gpu"]),
    ({"nvidia.com/gpu": "0"}, {}, []),
    ({}, {"cpu": "1"}, []),
    (None, None, []),
]


@pytest.mark.parametrize(("request_", "available", "short"), FITS, ids=[str(f[0]) for f in FITS])
def test_fits(request_: dict | None, available: dict | None, short: list[str]) -> None:
    assert quantity.fits(request_, available) == short
    assert quantity.le(request_, available) is (not short)
    assert quantity.resource_list_le(request_, available) is (not short)


def test_resource_list_parses_and_reports_the_bad_value() -> None:
    assert quantity.resource_list({"cpu": "1", "memory": parse("1Gi")}) == {"cpu": parse("1"), "memory": parse("1Gi")}
    with pytest.raises(QuantityError, match="cannot parse '1x'"):
        quantity.resource_list({"cpu": "1x"})


# --- invariants ---------------------------------------------------------------------------------------------

_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**12))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,10}", fullmatch=True)))
    suffix = draw(
        st.one_of(
            st.sampled_from(_SUFFIXES),
            st.integers(min_value=-30, max_value=30).map(lambda e: f"e{e}"),
            st.integers(min_value=-30, max_value=30).map(lambda e: f"E{e:+d}"),
        )
    )
    return f"{sign}{whole}{frac}{suffix}"


@given(quantity_strings())
def test_string_round_trips(text: str) -> None:
    q = parse(text)
    assert parse(str(q)) == q
    assert parse(q.canonical) == q
    assert str(parse(q.canonical)) == q.canonical  # canonical strings are fixed points
    assert q.fraction == 0 or q.fraction.denominator <= 10**9  # kept down to nano
    assert q.milli_value() * 1000 >= q.fraction * 10**6 if q.sign() >= 0 else True


@given(st.lists(quantity_strings(), min_size=1, max_size=6))
def test_add_sub_cancel(texts: list[str]) -> None:
    total = Quantity()
    for t in texts:
        total = total + parse(t)
    for t in texts:
        total = total - parse(t)
    assert total.is_zero()
    assert str(total) == "0"


@given(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=-9, max_value=30),
    st.sampled_from(list(Format)),
)
def test_generated_quantities_round_trip(mantissa: int, exponent: int, fmt: Format) -> None:
    q = Quantity(dec(mantissa, exponent), fmt)
    back = parse(str(q))
    if fmt is Format.BINARY_SI and abs(q.fraction) > MAX_INT64 and str(q)[-1] == "i":
        assert abs(back.fraction) == MAX_INT64  # parse caps BinarySI, like Go (kubernetes#140674)
        return
    assert back == q
    assert str(parse(str(back))) == str(back)  # the second rendering is stable
