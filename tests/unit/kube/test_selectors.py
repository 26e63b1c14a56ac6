"""Label and field selector tables, shaped after apimachinery's labels/selector_test.go and fields tests."""

from __future__ import annotations

import pytest

from lahar.kube import selectors
from lahar.kube.selectors import SelectorError

# --- parsing: accepted / rejected (TestSelectorParse) -----------------------------------------------------------

GOOD = [
    "", "x=a", "x=a,y=b,z=c", "x = a", "x!=a", "x==a", "x in (a)", "x in (a,b)", "x notin (a)",
    "x in (,a)", "x in ()", "x", "!x", "x>1", "x<1", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x,y", "x in(a)",
    "x, y in (a)", "a.b/c-d_e=f", "example.com/key in (v1, v2)",
]
BAD = [
    "x=a||y=b", "x=a||y=b ,", "x==a==b", "!x=a", "x<a", "x>a", "=a", "x in a", "x in (a", "x in (a b)", "x notin ( a) b",
    "-x=a", "x=-a", "a/b/c=d", "x in (a),", ",x", "x in (,", "x!", "x=a b",
]


@pytest.mark.parametrize("text", GOOD, ids=[repr(t) for t in GOOD])
def test_parse_accepts(text: str) -> None:
    selectors.parse_labels(text)


@pytest.mark.parametrize("text", BAD, ids=[repr(t) for t in BAD])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(SelectorError):
        selectors.parse_labels(text)


ERRORS = [
    ("=a", "found '=', expected: !, identifier, or 'end of string'"),
    ("x,", "found '', expected: identifier after ','"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x a", "unable to parse requirement: found 'a', expected: in, notin, =, ==, !=, gt, lt"),
    ("x in a", "unable to parse requirement: found 'a' expected: '('"),
    ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
    ("x>a", "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be "
            "an integer"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_parse_error_messages(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        selectors.parse_labels(text)
    assert str(err.value) == message


def test_invalid_key_message_names_the_rule() -> None:
    with pytest.raises(SelectorError) as err:
        selectors.parse_labels("-x=a")
    assert str(err.value).startswith('unable to parse requirement: key: Invalid value: "-x": name part must consist')


LENGTH_ERRORS = [
    # apimachinery's MaxLenError says "characters" (the selectors' own copy said "bytes")
    ("key-name-too-long", "k" * 64 + "=a", "name part must be no more than 63 characters"),
    ("value-too-long", "k=" + "v" * 64, "must be no more than 63 characters"),
    # IsQualifiedName reports a prefix's length and its shape together
    ("prefix-too-long-and-bad", "-" + "p" * 253 + "/k=a",
     "prefix part must be no more than 253 characters; prefix part a lowercase RFC 1123 subdomain"),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in LENGTH_ERRORS], ids=[c[0] for c in LENGTH_ERRORS])
def test_length_errors_say_characters(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as err:
        selectors.parse_labels(text)
    assert fragment in str(err.value)


# --- matching (TestSelectorMatches / TestSetSelectorMatches) ----------------------------------------------------

MATCHES = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x in (y,z)", {"x": "z"}, True),
    ("x notin (y,z)", {"x": "a"}, True),
    ("x notin (y)", {}, True),
    ("x!=y", {}, True),
    ("x=", {"x": ""}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("x>1", {}, False),
    ("x in (y,z)", {"x": "a"}, False),
    ("x in (y,z)", {}, False),
    ("x notin (y,z)", {"x": "y"}, False),
]


@pytest.mark.parametrize(("text", "labels", "want"), MATCHES, ids=[f"{m[0]!r}-{m[2]}" for m in MATCHES])
def test_label_matching(text: str, labels: dict[str, str], want: bool) -> None:
    assert selectors.match_labels(text, labels) is want


def test_string_form_is_canonical_and_sorted() -> None:
    assert str(selectors.parse_labels("z=1, a in (c,b), !m")) == "a in (b,c),!m,z=1"


# --- metav1.LabelSelector objects (LabelSelectorAsSelector) ------------------------------------------------------

LS = [
    ("nil matches nothing", None, {"a": "b"}, False),
    ("empty matches everything", {}, {"a": "b"}, True),
    ("matchLabels", {"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
    ("matchLabels miss", {"matchLabels": {"a": "b"}}, {"a": "c"}, False),
    ("In", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}, {"a": "c"}, True),
    ("NotIn", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {"a": "b"}, False),
    ("Exists", {"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ("DoesNotExist", {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "x"}, True),
    ("both must hold", {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]},
     {"a": "b"}, False),
]


@pytest.mark.parametrize(("sel", "labels", "want"), [c[1:] for c in LS], ids=[c[0] for c in LS])
def test_label_selector_objects(sel: dict | None, labels: dict[str, str], want: bool) -> None:
    assert selectors.from_label_selector(sel).matches(labels) is want


LS_ERRORS = [
    ("unknown operator", {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
     '"Gt" is not a valid label selector operator'),
    ("In without values", {"matchExpressions": [{"key": "a", "operator": "In"}]},
     "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"),
    ("Exists with values", {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     "values: Invalid value: ['x']: values set must be empty for exists and does not exist"),
]


@pytest.mark.parametrize(("sel", "message"), [c[1:] for c in LS_ERRORS], ids=[c[0] for c in LS_ERRORS])
def test_label_selector_object_errors(sel: dict, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        selectors.from_label_selector(sel)
    assert str(err.value) == message


def test_label_selector_string() -> None:
    sel = {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b", "a"]}]}
    assert selectors.label_selector_string(sel) == "app=x,tier notin (a,b)"
    assert selectors.label_selector_string({}) == "<none>"


# --- field selectors ---------------------------------------------------------------------------------------------

POD = {"metadata": {"name": "p1", "namespace": "ns1"}, "spec": {"nodeName": "", "hostNetwork": True},
       "status": {"phase": "Running"}}
UNBOUND = {"metadata": {"name": "p2", "namespace": "ns1"}, "spec": {}, "status": {"phase": "Pending"}}
EVENT = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p1"}}

FIELDS = [
    ("metadata.name=p1", POD, True),
    ("metadata.name==p1", POD, True),
    ("metadata.name!=p1", POD, False),
    ("metadata.namespace!=ns2", POD, True),
    ("spec.nodeName=", UNBOUND, True),
    ("spec.nodeName!=", UNBOUND, False),
    ("status.phase=Running", POD, True),
    ("status.phase=Running,metadata.name=p2", POD, False),
    ("spec.hostNetwork=true", POD, True),
    ("involvedObject.kind=Pod,involvedObject.name=p1", EVENT, True),
    ("involvedObject.kind=Node", EVENT, False),
    ("", POD, True),
]


@pytest.mark.parametrize(("text", "obj", "want"), FIELDS, ids=[f"{f[0]!r}-{f[2]}" for f in FIELDS])
def test_field_matching(text: str, obj: dict, want: bool) -> None:
    assert selectors.parse_fields(text).matches(obj) is want


FIELD_PARSE = [
    ("a=b\\,c", [("a", "=", "b,c")]),
    ("a=b\\=c,d!=e", [("a", "=", "b=c"), ("d", "!=", "e")]),
    ("a==", [("a", "=", "")]),
    ("a=b\\\\", [("a", "=", "b\\")]),
]


@pytest.mark.parametrize(("text", "want"), FIELD_PARSE, ids=[f[0] for f in FIELD_PARSE])
def test_field_parse_escapes(text: str, want: list[tuple[str, str, str]]) -> None:
    got = selectors.parse_fields(text)
    assert [(r.path, r.op, r.value) for r in got.requirements] == want


@pytest.mark.parametrize("text", ["abc", "a=b,c", "a=b\\x"], ids=["no operator", "second term bare", "bad escape"])
def test_field_parse_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        selectors.parse_fields(text)


def test_field_error_message() -> None:
    with pytest.raises(SelectorError) as err:
        selectors.parse_fields("abc")
    assert str(err.value) == "invalid selector: 'abc'; can't understand 'abc'"


def test_matcher_combines_both() -> None:
    m = selectors.matcher("app=x", "spec.nodeName=n1")
    assert m({"metadata": {"labels": {"app": "x"}}, "spec": {"nodeName": "n1"}})
    assert not m({"metadata": {"labels": {"app": "x"}}, "spec": {"nodeName": "n2"}})
    assert not m({"metadata": {"labels": {"app": "y"}}, "spec": {"nodeName": "n1"}})
