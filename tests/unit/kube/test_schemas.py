"""Table tests for kube.schemas: defaulting, validation messages, pruning, CRD helpers.
Shaped after apiextensions-apiserver's structural defaulting/pruning tests and its validation tests."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import errors, fielderrors, schemas

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def arr(items: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **kw}


def messages(schema: dict[str, Any], value: Any, root: str = "") -> list[str]:
    return [e.message() for e in schemas.validate(schema, value, root=root)]


# ---------------------------------------------------------------------------------------------------------------
# FieldError rendering (field.Error.Error())

RENDER = [
    ("required", fielderrors.required("spec.queue"), "spec.queue: Required value"),
    ("required-detail", fielderrors.required("spec.queue", "must be set"), "spec.queue: Required value: must be set"),
    ("invalid-int", fielderrors.invalid("spec.minAvailable", -1, "bad"), "spec.minAvailable: Invalid value: -1: bad"),
    ("invalid-str", fielderrors.invalid("spec.x", 'a"b', "bad"), 'spec.x: Invalid value: "a\\"b": bad'),
    ("invalid-float", fielderrors.invalid("spec.x", 1e6, "bad"), "spec.x: Invalid value: 1e+06: bad"),
    ("invalid-bool", fielderrors.invalid("spec.x", True, "bad"), "spec.x: Invalid value: true: bad"),
    ("invalid-null", fielderrors.invalid("spec.x", None, "bad"), 'spec.x: Invalid value: "null": bad'),
    ("invalid-map", fielderrors.invalid("spec.x", {"b": 1, "a": "x"}, "bad"),
     'spec.x: Invalid value: map[string]interface {}{"a":"x", "b":1}: bad'),
    ("invalid-list", fielderrors.invalid("spec.x", ["a", 1, None], "bad"),
     'spec.x: Invalid value: []interface {}{"a", 1, interface {}(nil)}: bad'),
    ("not-supported", fielderrors.not_supported("spec.a", "Foo", ["AbortJob", "RestartJob"]),
     'spec.a: Unsupported value: "Foo": supported values: "AbortJob", "RestartJob"'),
    ("too-long", fielderrors.too_long("spec.schedulerName", "x" * 64, 63),
     "spec.schedulerName: Too long: may not be more than 63 bytes"),
    ("too-long-unknown", fielderrors.too_long("spec.s", "xx", -1), "spec.s: Too long: value is too long"),
    ("too-many", fielderrors.too_many("spec.l", 3, 2), "spec.l: Too many: 3: must have at most 2 items"),
    ("too-many-omit", fielderrors.too_many("spec.l", -1, -1), "spec.l: Too many: has too many items"),
    ("forbidden", fielderrors.forbidden("spec.f", "not allowed"), "spec.f: Forbidden: not allowed"),
    ("duplicate", fielderrors.duplicate("spec.tasks[1].name", "a"), 'spec.tasks[1].name: Duplicate value: "a"'),
    ("type-invalid", fielderrors.type_invalid("spec.w", "string", "spec.w in body must be of type integer: \"string\""),
     'spec.w: Invalid value: "string": spec.w in body must be of type integer: "string"'),
]


@pytest.mark.parametrize(("error", "expected"), [r[1:] for r in RENDER], ids=[r[0] for r in RENDER])
def test_field_error_message(error: fielderrors.FieldError, expected: str) -> None:
    assert error.message() == expected
    assert str(error) == expected
    assert error.cause() == {"reason": error.type, "message": expected.split(": ", 1)[1], "field": error.field}


GO_FLOATS = [(1.5, "1.5"), (100.0, "100"), (1e6, "1e+06"), (123456.0, "123456"), (1048576.0, "1.048576e+06"),
             (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"), (0.0, "0"), (1e21, "1e+21")]


@pytest.mark.parametrize(("value", "expected"), GO_FLOATS, ids=[g[1] for g in GO_FLOATS])
def test_go_float_rendering(value: float, expected: str) -> None:
    assert fielderrors.go_value(value) == expected


@pytest.mark.parametrize(("text", "expected"), [("plain", '"plain"'), ("tab\there", '"tab\\there"'),
                                                ("nul\x00", '"nul\\x00"'), ("ünï", '"ünï"')],
                         ids=["plain", "tab", "control", "unicode"])
def test_go_quote(text: str, expected: str) -> None:
    assert fielderrors.go_quote(text) == expected


# ---------------------------------------------------------------------------------------------------------------
# errors_message / invalid_error (apierrors.NewInvalid)

def test_errors_message_single_error_has_no_brackets() -> None:
    errs = [fielderrors.required("spec.queue")]
    assert fielderrors.errors_message("Job", "batch.volcano.sh", "test-job", errs) == \
        'Job.batch.volcano.sh "test-job" is invalid: spec.queue: Required value'


def test_errors_message_many_errors_are_bracketed_and_deduplicated() -> None:
    a, b = fielderrors.required("spec.a"), fielderrors.required("spec.b")
    assert fielderrors.errors_message("Job", "batch.volcano.sh", "j", [a, b, a]) == \
        'Job.batch.volcano.sh "j" is invalid: [spec.a: Required value, spec.b: Required value]'


def test_errors_message_core_group_and_no_errors() -> None:
    assert fielderrors.errors_message("Pod", "", "p", []) == 'Pod "p" is invalid'
    assert fielderrors.errors_message("Pod", "", "p", ["x: y"]) == 'Pod "p" is invalid: x: y'


def test_invalid_error_carries_status_causes() -> None:
    err = fielderrors.invalid_error("Job", "batch.volcano.sh", "j", [fielderrors.invalid("spec.m", -1, "bad")])
    assert isinstance(err, errors.Invalid)
    status = err.status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == 'Job.batch.volcano.sh "j" is invalid: spec.m: Invalid value: -1: bad'
    assert status["details"]["kind"] == "Job" and status["details"]["group"] == "batch.volcano.sh"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "Invalid value: -1: bad", "field": "spec.m"}]


# ---------------------------------------------------------------------------------------------------------------
# validation, one keyword at a time

VALIDATE: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    # type
    ("type-ok", obj(a=INT), {"a": 1}, []),
    ("type-integer-got-string", obj(weight=INT), {"weight": "string"},
     ['weight: Invalid value: "string": weight in body must be of type integer: "string"']),
    ("type-integer-got-float", obj(a=INT), {"a": 1.5},
     ['a: Invalid value: "number": a in body must be of type integer: "number"']),
    ("type-integer-accepts-integral-float", obj(a=INT), {"a": 2.0}, []),
    ("type-number-accepts-int", obj(a={"type": "number"}), {"a": 2}, []),
    ("type-string-got-int", obj(a=STR), {"a": 1}, ['a: Invalid value: "integer": a in body must be of type string: "integer"']),
    ("type-boolean-got-int", obj(a={"type": "boolean"}), {"a": 1},
     ['a: Invalid value: "integer": a in body must be of type boolean: "integer"']),
    ("type-int-is-not-boolean", obj(a=INT), {"a": True},
     ['a: Invalid value: "boolean": a in body must be of type integer: "boolean"']),
    ("type-object-got-array", obj(a=obj()), {"a": []},
     ['a: Invalid value: "array": a in body must be of type object: "array"']),
    ("type-array-got-object", obj(a=arr(STR)), {"a": {}},
     ['a: Invalid value: "object": a in body must be of type array: "object"']),
    ("type-no-type-accepts-anything", obj(a={}), {"a": {"x": [1]}}, []),
    # nullable
    ("null-not-nullable", obj(a=STR), {"a": None}, ['a: Invalid value: "null": a in body must be of type string: "null"']),
    ("null-nullable", obj(a={"type": "string", "nullable": True}), {"a": None}, []),
    # required
    ("required-missing", {"type": "object", "required": ["queue"], "properties": {"queue": STR}}, {},
     ["queue: Required value"]),
    ("required-nested", obj(spec={"type": "object", "required": ["a", "b"]}), {"spec": {"b": 1}},
     ["spec.a: Required value"]),
    ("required-present-empty-string", {"type": "object", "required": ["a"], "properties": {"a": STR}}, {"a": ""}, []),
    # enum
    ("enum-ok", obj(a={"type": "string", "enum": ["hard", "soft"]}), {"a": "soft"}, []),
    ("enum-bad", obj(a={"type": "string", "enum": ["AbortJob", "RestartJob"]}), {"a": "Foo"},
     ['a: Unsupported value: "Foo": supported values: "AbortJob", "RestartJob"']),
    ("enum-numbers", obj(a={"type": "integer", "enum": [1, 2]}), {"a": 3},
     ['a: Unsupported value: 3: supported values: "1", "2"']),
    ("enum-number-matches-float", obj(a={"type": "number", "enum": [1, 2]}), {"a": 2.0}, []),
    ("enum-bool-is-not-int", obj(a={"enum": [1]}), {"a": True}, ['a: Unsupported value: true: supported values: "1"']),
    # minimum / maximum
    ("minimum", obj(minAvailable={"type": "integer", "minimum": 0}), {"minAvailable": -1},
     ["minAvailable: Invalid value: -1: minAvailable in body should be greater than or equal to 0"]),
    ("minimum-edge-ok", obj(a={"type": "integer", "minimum": 0}), {"a": 0}, []),
    ("minimum-exclusive", obj(a={"type": "integer", "minimum": 0, "exclusiveMinimum": True}), {"a": 0},
     ["a: Invalid value: 0: a in body should be greater than 0"]),
    ("maximum", obj(weight={"type": "integer", "maximum": 65535}), {"weight": 65536},
     ["weight: Invalid value: 65536: weight in body should be less than or equal to 65535"]),
    ("maximum-exclusive", obj(a={"type": "number", "maximum": 1.5, "exclusiveMaximum": True}), {"a": 1.5},
     ["a: Invalid value: 1.5: a in body should be less than 1.5"]),
    ("minimum-float-value", obj(a={"type": "number", "minimum": 1}), {"a": 0.5},
     ["a: Invalid value: 0.5: a in body should be greater than or equal to 1"]),
    ("multiple-of", obj(a={"type": "integer", "multipleOf": 5}), {"a": 7},
     ["a: Invalid value: 7: a in body should be a multiple of 5"]),
    # strings
    ("max-length", obj(s={"type": "string", "maxLength": 3}), {"s": "abcd"},
     ["s: Too long: may not be more than 3 bytes"]),
    ("max-length-counts-runes", obj(s={"type": "string", "maxLength": 3}), {"s": "äöü"}, []),
    ("min-length", obj(s={"type": "string", "minLength": 1}), {"s": ""},
     ['s: Invalid value: "": s in body should be at least 1 chars long']),
    ("pattern", obj(s={"type": "string", "pattern": "^[^:]+$"}), {"s": "a:b"},
     ['s: Invalid value: "a:b": s in body should match \'^[^:]+$\'']),
    ("pattern-is-a-search", obj(s={"type": "string", "pattern": "b"}), {"s": "abc"}, []),
    # formats
    ("format-date-time-ok", obj(t={"type": "string", "format": "date-time"}), {"t": "2024-05-01T10:00:00Z"}, []),
    ("format-date-time-bad", obj(t={"type": "string", "format": "date-time"}), {"t": "yesterday"},
     ['t: Invalid value: "yesterday": t in body must be of type date-time: "yesterday"']),
    ("format-int32-ignored", obj(n={"type": "integer", "format": "int32"}), {"n": 2**40}, []),
    ("format-unknown-ignored", obj(s={"type": "string", "format": "whatever"}), {"s": "x"}, []),
    ("format-uuid", obj(u={"type": "string", "format": "uuid"}), {"u": "nope"},
     ['u: Invalid value: "nope": u in body must be of type uuid: "nope"']),
    ("format-ipv4", obj(ip={"type": "string", "format": "ipv4"}), {"ip": "10.0.0.300"},
     ['ip: Invalid value: "10.0.0.300": ip in body must be of type ipv4: "10.0.0.300"']),
    # arrays
    ("min-items", obj(tasks=arr(obj(), minItems=1)), {"tasks": []},
     ["tasks: Invalid value: 0: tasks in body should have at least 1 items"]),
    ("max-items", obj(l=arr(STR, maxItems=2)), {"l": ["a", "b", "c"]}, ["l: Too many: 3: must have at most 2 items"]),
    ("items-paths", obj(tasks=arr(obj(replicas={"type": "integer", "minimum": 0}))),
     {"tasks": [{"replicas": 1}, {"replicas": -1}]},
     ["tasks[1].replicas: Invalid value: -1: tasks[1].replicas in body should be greater than or equal to 0"]),
    # objects
    ("additional-properties-schema", {"type": "object", "additionalProperties": INT}, {"a": 1, "b": "x"},
     ['b: Invalid value: "string": b in body must be of type integer: "string"']),
    ("additional-properties-false", obj(o={"type": "object", "properties": {"a": INT}, "additionalProperties": False}),
     {"o": {"a": 1, "b": 2}}, ['o: Invalid value: "b": o.b in body is a forbidden property']),
    ("unknown-fields-not-validated", obj(a=INT), {"zzz": "anything"}, []),
    ("max-properties", obj(m={"type": "object", "maxProperties": 1}), {"m": {"a": 1, "b": 2}},
     ["m: Too many: 2: must have at most 1 items"]),
    ("min-properties", obj(m={"type": "object", "minProperties": 1}), {"m": {}},
     ["m: Invalid value: 1: m in body should have at least 1 properties"]),
    # int-or-string
    ("int-or-string-int", obj(q={"x-kubernetes-int-or-string": True}), {"q": 2}, []),
    ("int-or-string-string", obj(q={"x-kubernetes-int-or-string": True}), {"q": "2Gi"}, []),
    ("int-or-string-bool", obj(q={"x-kubernetes-int-or-string": True}), {"q": True},
     ['q: Invalid value: "boolean": q in body must be of type integer,string: "boolean"']),
    ("quantity-pattern", obj(q={"x-kubernetes-int-or-string": True, "anyOf": [INT, STR], "pattern": "^[0-9]+(Gi)?$"}),
     {"q": "lots"}, ['q: Invalid value: "lots": q in body should match \'^[0-9]+(Gi)?$\'']),
    # preserve-unknown-fields keeps validating declared properties
    ("preserve-still-validates", {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                  "properties": {"a": INT}}, {"a": "x", "b": 1},
     ['a: Invalid value: "string": a in body must be of type integer: "string"']),
    # combinators
    ("any-of-none", obj(a={"anyOf": [{"minimum": 5}, {"maximum": 1}]}), {"a": 3},
     ['a: Invalid value: "": "a" must validate at least one schema (anyOf)',
      "a: Invalid value: 3: a in body should be greater than or equal to 5"]),
    ("all-of", obj(a={"allOf": [{"minimum": 5}]}), {"a": 3},
     ['a: Invalid value: "": "a" must validate all the schemas (allOf)',
      "a: Invalid value: 3: a in body should be greater than or equal to 5"]),
    ("one-of-two", obj(a={"oneOf": [{"minimum": 1}, {"minimum": 2}]}), {"a": 3},
     ['a: Invalid value: "": "a" must validate one and only one schema (oneOf)']),
    ("not", obj(a={"not": {"minimum": 1}}), {"a": 3}, ['a: Invalid value: "": "a" must not validate the schema (not)']),
    # x-kubernetes-validations (CEL) are not evaluated
    ("cel-skipped", obj(a={"type": "object", "x-kubernetes-validations": [{"rule": "false", "message": "no"}]}),
     {"a": {}}, []),
]


@pytest.mark.parametrize(("schema", "value", "expected"), [v[1:] for v in VALIDATE], ids=[v[0] for v in VALIDATE])
def test_validate(schema: dict[str, Any], value: Any, expected: list[str]) -> None:
    assert messages(schema, value) == expected


def test_validate_root_prefix() -> None:
    schema = obj(minAvailable={"type": "integer", "minimum": 0})
    assert messages(schema, {"minAvailable": -1}, root="spec") == [
        "spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0"]


def test_validate_nested_volcano_shape() -> None:
    schema = obj(spec=obj(tasks=arr(obj(policies=arr(obj(action={"type": "string", "enum": ["AbortJob", "RestartJob"]}))))))
    value = {"spec": {"tasks": [{"policies": [{"action": "Foo"}]}]}}
    assert messages(schema, value) == [
        'spec.tasks[0].policies[0].action: Unsupported value: "Foo": supported values: "AbortJob", "RestartJob"']


def test_validate_without_schema_accepts_everything() -> None:
    assert schemas.validate(None, {"anything": 1}) == []
    assert schemas.validate({}, {"anything": 1}) == []


# ---------------------------------------------------------------------------------------------------------------
# defaulting (structural defaulting algorithm tests)

A = {"type": "string", "default": "A"}

DEFAULTS: list[tuple[str, dict[str, Any] | None, Any, Any]] = [
    ("no-schema", None, {"a": 1}, {"a": 1}),
    ("scalar-untouched", {"type": "integer", "default": 3}, 4, 4),
    ("absent-property", obj(queue={"type": "string", "default": "default"}), {}, {"queue": "default"}),
    ("present-property-kept", obj(queue={"type": "string", "default": "default"}), {"queue": "q1"}, {"queue": "q1"}),
    ("falsy-values-kept", arr(obj(a=A)),
     [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []}, {"a": {}}],
     [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": "A"}, {"a": []}, {"a": {}}]),
    ("object-array", arr(obj(a=A, b={"type": "string", "default": "B"})), [{"a": 1}, {"b": 1}],
     [{"a": 1, "b": "B"}, {"a": "A", "b": 1}]),
    ("nested-object-only-if-present", obj(spec=obj(maxRetry={"type": "integer", "default": 3})), {}, {}),
    ("nested-object-present", obj(spec=obj(maxRetry={"type": "integer", "default": 3})), {"spec": {}},
     {"spec": {"maxRetry": 3}}),
    ("defaulted-object-gets-nested-defaults", obj(nt={"type": "object", "default": {}, "properties": {"mode": {
        "type": "string", "default": "hard"}}}), {}, {"nt": {"mode": "hard"}}),
    ("additional-properties", {"type": "object", "additionalProperties": obj(a=A)}, {"x": {}, "y": {"a": 1}},
     {"x": {"a": "A"}, "y": {"a": 1}}),
    ("null-in-nullable-list", arr({"type": "string", "nullable": True, "default": "A"}), [None], [None]),
    ("null-in-non-nullable-list", arr(A), [None], ["A"]),
    ("null-in-nullable-object", obj(a={"type": "string", "nullable": True, "default": "A"}), {"a": None}, {"a": None}),
    ("null-in-non-nullable-object", obj(a=A), {"a": None}, {"a": "A"}),
    ("null-without-default-dropped", obj(a=STR), {"a": None, "b": None}, {"b": None}),
    ("null-nullable-without-default-kept", obj(a={"type": "string", "nullable": True}), {"a": None}, {"a": None}),
    ("null-in-additional-properties", {"type": "object", "additionalProperties": A}, {"x": None}, {"x": "A"}),
    ("default-is-deep-copied", obj(l={"type": "array", "default": [], "items": STR}, m={
        "type": "array", "default": [], "items": STR}), {}, {"l": [], "m": []}),
]


@pytest.mark.parametrize(("schema", "value", "expected"), [d[1:] for d in DEFAULTS], ids=[d[0] for d in DEFAULTS])
def test_apply_defaults(schema: dict[str, Any] | None, value: Any, expected: Any) -> None:
    original = repr(value)
    assert schemas.apply_defaults(schema, value) == expected
    assert repr(value) == original, "apply_defaults must not modify its input"


def test_apply_defaults_copies_default_values() -> None:
    schema = obj(l={"type": "array", "default": [], "items": STR}, m={"type": "array", "default": [], "items": STR})
    result = schemas.apply_defaults(schema, {})
    result["l"].append("x")
    assert result["m"] == [] and schema["properties"]["l"]["default"] == []


# ---------------------------------------------------------------------------------------------------------------
# pruning / unknown fields (structural pruning tests)

ROOT = {"type": "object", "properties": {"apiVersion": STR, "kind": STR, "metadata": {"type": "object"},
                                         "spec": obj(a=INT, tasks=arr(obj(name=STR)),
                                                     template={"type": "object",
                                                               "x-kubernetes-preserve-unknown-fields": True},
                                                     labels={"type": "object", "additionalProperties": STR},
                                                     inner=obj(b=INT))}}

PRUNE: list[tuple[str, dict[str, Any], Any, list[str], Any]] = [
    ("nothing-unknown", ROOT, {"spec": {"a": 1}}, [], {"spec": {"a": 1}}),
    ("root-meta-ignored", ROOT, {"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "zzz": 1}},
     [], {"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "zzz": 1}}),
    ("root-unknown", ROOT, {"status": {}, "spec": {}}, ["status"], {"spec": {}}),
    ("spec-unknown", ROOT, {"spec": {"a": 1, "foo": 2}}, ["spec.foo"], {"spec": {"a": 1}}),
    ("array-item-unknown", ROOT, {"spec": {"tasks": [{"name": "a"}, {"name": "b", "bar": 1}]}},
     ["spec.tasks[1].bar"], {"spec": {"tasks": [{"name": "a"}, {"name": "b"}]}}),
    ("nested-unknown", ROOT, {"spec": {"inner": {"b": 1, "c": {"d": 1}}}}, ["spec.inner.c"],
     {"spec": {"inner": {"b": 1}}}),
    ("preserve-unknown-fields", ROOT, {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}, [],
     {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}),
    ("additional-properties-known", ROOT, {"spec": {"labels": {"any": "thing"}}}, [],
     {"spec": {"labels": {"any": "thing"}}}),
    ("scalar-where-object-expected", ROOT, {"spec": {"inner": 3}}, [], {"spec": {"inner": 3}}),
    ("several-in-document-order", ROOT, {"spec": {"z": 1, "a": 1, "y": 2}, "x": 0}, ["spec.z", "spec.y", "x"],
     {"spec": {"a": 1}}),
    ("preserve-with-properties-prunes-inside-known", {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                      "properties": {"k": obj(a=INT)}},
     {"k": {"a": 1, "b": 2}, "other": {"c": 1}}, ["k.b"], {"k": {"a": 1}, "other": {"c": 1}}),
    ("embedded-resource", obj(res={"type": "object", "x-kubernetes-embedded-resource": True,
                                   "properties": {"spec": obj(a=INT)}}),
     {"res": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"a": 1, "b": 2}}}, ["res.spec.b"],
     {"res": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"a": 1}}}),
    ("object-without-properties-prunes-all", obj(o={"type": "object"}), {"o": {"x": 1}}, ["o.x"], {"o": {}}),
]


@pytest.mark.parametrize(("schema", "value", "unknown", "pruned"), [p[1:] for p in PRUNE], ids=[p[0] for p in PRUNE])
def test_unknown_fields_and_prune(schema: dict[str, Any], value: Any, unknown: list[str], pruned: Any) -> None:
    original = repr(value)
    assert schemas.unknown_fields(schema, value) == unknown
    assert schemas.prune(schema, value) == pruned
    assert repr(value) == original, "prune must not modify its input"
    assert schemas.unknown_fields(schema, schemas.prune(schema, value)) == []


# ---------------------------------------------------------------------------------------------------------------
# crd_schema

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "spec": {"versions": [{"name": "v1alpha1", "schema": {"openAPIV3Schema": {"type": "object", "x": 1}}},
                             {"name": "v1beta1", "schema": {"openAPIV3Schema": {"type": "object", "x": 2}}},
                             {"name": "v1"}]}}
LEGACY = {"spec": {"version": "v1", "validation": {"openAPIV3Schema": {"type": "object", "x": 3}}}}


@pytest.mark.parametrize(("crd", "version", "expected"), [
    (CRD, "v1alpha1", {"type": "object", "x": 1}),
    (CRD, "v1beta1", {"type": "object", "x": 2}),
    (CRD, "v1", None),
    (CRD, "v2", None),
    (LEGACY, "v1", {"type": "object", "x": 3}),
    ({}, "v1", None),
], ids=["first", "second", "version-without-schema", "missing-version", "v1beta1-top-level", "empty"])
def test_crd_schema(crd: dict[str, Any], version: str, expected: Any) -> None:
    assert schemas.crd_schema(crd, version) == expected
