"""The native matchConditions shapes (`devcluster.admission.cel_shapes`) against cel-python: for every expression
and object of the tables the native answer, where it gives one, is CEL's; the rest falls back to CEL.
"""

from __future__ import annotations

from pathlib import Path

import celpy
import pytest
import yaml

from lahar.devcluster import admission
from lahar.devcluster.admission import AdmissionCall, conditions
from lahar.devcluster.admission.cel_shapes import Fallback, compile_shape

REPO = Path(__file__).resolve().parents[3]

SCHED = "has(object.spec.schedulerName) && object.spec.schedulerName in ['volcano']"
CONFIGMAPS = ("object.metadata.name in ['lahar-admission-config', 'lahar-scheduler-configmap'] || "
              "(has(object.metadata.labels) && 'lahar.sh/policy' in object.metadata.labels && "
              "object.metadata.labels['lahar.sh/policy'] == 'true')")

EXPRESSIONS = [
    ("scheduler-names", SCHED),
    ("scheduler-names-several", "object.spec.schedulerName in ['volcano', \"lahar\"]"),
    ("configmaps", CONFIGMAPS),
    ("equals", "object.metadata.name == 'p1'"),
    ("not-equals", "object.metadata.name != 'p1'"),
    ("negated-has", "!has(object.spec.schedulerName)"),
    ("negated-group", "!(object.metadata.name == 'p1' || object.metadata.name == 'p2')"),
    ("key-in-map", "'app' in object.metadata.labels"),
    ("index-equals", "object.metadata.labels['app'] == 'web'"),
    ("bool-field", "object.spec.hostNetwork"),
    ("negated-bool-field", "!object.spec.hostNetwork"),
    ("literals", "true && !false"),
    ("request-operation", "request.operation in ['CREATE', 'UPDATE']"),
    ("old-object", "has(oldObject.metadata) || true"),
    ("error-or-true", "object.metadata.nope == 'x' || true"),
    ("error-and-false", "object.metadata.nope == 'x' && false"),
    ("error-or-false", "object.metadata.nope == 'x' || false"),
    ("has-deep-missing", "has(object.status.phase)"),
    ("empty-list", "object.metadata.name in []"),
]

OBJECTS = [
    ("volcano-pod", {"metadata": {"name": "p1", "labels": {"app": "web"}},
                     "spec": {"schedulerName": "volcano", "hostNetwork": True}}),
    ("default-pod", {"metadata": {"name": "p2", "labels": {}}, "spec": {"schedulerName": "default-scheduler"}}),
    ("no-scheduler-name", {"metadata": {"name": "p3"}, "spec": {"hostNetwork": False}}),
    ("no-spec", {"metadata": {"name": "lahar-admission-config"}}),
    ("policy-configmap", {"metadata": {"name": "cm", "labels": {"lahar.sh/policy": "true"}}}),
    ("policy-label-false", {"metadata": {"name": "cm", "labels": {"lahar.sh/policy": "false"}}}),
    ("odd-types", {"metadata": {"name": 7, "labels": ["app"]}, "spec": {"schedulerName": None, "hostNetwork": "yes"}}),
]

_ENV = celpy.Environment()


def _cel(expression: str, act: dict) -> object:
    """cel-python's answer: a bool, or the exception it gives."""
    program = _ENV.program(_ENV.compile(expression))
    try:
        result = program.evaluate({k: admission.to_cel(v) for k, v in act.items()})
    except Exception as exc:  # noqa: BLE001 — an error is an answer too
        return exc
    return result if isinstance(result, Exception) else bool(result)


@pytest.mark.parametrize("expression", [e for _, e in EXPRESSIONS], ids=[i for i, _ in EXPRESSIONS])
@pytest.mark.parametrize("obj", [o for _, o in OBJECTS], ids=[i for i, _ in OBJECTS])
def test_native_agrees_with_cel(expression, obj):
    shape = compile_shape(expression)
    assert shape is not None, "in the subset"
    act = {"object": obj, "oldObject": None, "request": {"operation": "CREATE"}}
    want = _cel(expression, act)
    try:
        got = shape(act)
    except Fallback:
        return  # CEL answers this one (an error, or a type the subset leaves to CEL)
    assert got is want


@pytest.mark.parametrize("expression", [
    pytest.param("request.userInfo.groups.exists(g, g == 'system:masters')", id="macro"),
    pytest.param("object.spec.replicas == 3", id="number"),
    pytest.param("object.metadata.name.startsWith('p')", id="method"),
    pytest.param("object.metadata.name == r'p1'", id="raw-string"),
    pytest.param("object.metadata.name == 'a\\'b'", id="escape"),
    pytest.param("!object.metadata.name == 'p1'", id="not-binds-tighter"),
    pytest.param("'a' == object.metadata.name", id="literal-first"),
    pytest.param("has(object)", id="has-without-field"),
    pytest.param("object.metadata.name in ['a',", id="unterminated"),
    pytest.param("oldObject == null", id="null"),
    pytest.param("", id="empty"),
])
def test_outside_the_subset_goes_to_cel(expression):
    assert compile_shape(expression) is None


def _deployed_conditions() -> list[str]:
    out = []
    for name in ("mutating.yaml", "validating.yaml"):
        for doc in yaml.safe_load_all((REPO / "deploy" / "webhooks" / name).read_text()):
            for hook in (doc or {}).get("webhooks") or []:
                out += [c["expression"] for c in hook.get("matchConditions") or []]
    return out


def test_deployed_match_conditions_are_native():
    exprs = _deployed_conditions()
    assert SCHED in exprs and len(exprs) >= 3
    assert [e for e in exprs if compile_shape(e) is None] == []


def test_match_conditions_use_the_native_shape_and_fall_back(monkeypatch):
    """A plain pod is answered without celpy; a missing field still gets CEL's error (and Ignore skips)."""
    calls = []
    real = conditions.to_cel
    monkeypatch.setattr(conditions, "to_cel", lambda v: calls.append(v) or real(v))
    hook = {"name": "h", "matchConditions": [{"name": "c", "expression": SCHED}], "failurePolicy": "Fail"}
    pod = AdmissionCall(operation="CREATE", group="", version="v1", resource="pods", namespace="default", name="p",
                        kind=("", "v1", "Pod"), obj={"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano"}})
    assert conditions.match_conditions(hook, pod, lambda: {}) is True
    assert calls == []
    no_spec = AdmissionCall(operation="CREATE", group="", version="v1", resource="pods", name="p",
                            kind=("", "v1", "Pod"), obj={"metadata": {"name": "p"}})
    assert conditions.match_conditions({**hook, "failurePolicy": "Ignore"}, no_spec, lambda: {}) is False
    assert calls, "the missing spec went to CEL"


SPEC_CHANGES = ("request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || "
                "object.spec != oldObject.spec")
PAIRS = [
    ("same-spec", {"spec": {"minMember": 2, "queue": "q"}}, {"spec": {"queue": "q", "minMember": 2}}),
    ("other-value", {"spec": {"minMember": 3}}, {"spec": {"minMember": 2}}),
    ("other-keys", {"spec": {"minMember": 2, "queue": "q"}}, {"spec": {"minMember": 2}}),
    ("nested-lists", {"spec": {"a": [{"b": "c"}, True, None]}}, {"spec": {"a": [{"b": "c"}, True, None]}}),
    ("list-order", {"spec": {"a": ["x", "y"]}}, {"spec": {"a": ["y", "x"]}}),
    ("int-against-double", {"spec": {"n": 1}}, {"spec": {"n": 1.0}}),
    ("bool-against-string", {"spec": {"n": True}}, {"spec": {"n": "true"}}),
    ("no-old-spec", {"spec": {"n": 1}}, {"metadata": {}}),
]


@pytest.mark.parametrize("expression", ["object.spec == oldObject.spec", "object.spec != oldObject.spec",
                                        SPEC_CHANGES], ids=["equal", "not-equal", "spec-changes"])
@pytest.mark.parametrize(("new", "old"), [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_native_comparison_of_two_selections_agrees_with_cel(expression, new, old, operation):
    shape = compile_shape(expression)
    assert shape is not None, "in the subset"
    act = {"object": new, "oldObject": old, "request": {"operation": operation}}
    want = _cel(expression, act)
    try:
        got = shape(act)
    except Fallback:
        return
    assert got is want


def test_a_native_shape_builds_no_celpy_program_until_it_falls_back():
    cel = conditions._Cel()
    program, _, shape = cel._compile(SCHED)
    assert shape is not None and program is None and cel._env is None, "celpy's parser not built for a shape"
    assert cel.evaluate(SCHED, {"object": {"spec": {"schedulerName": "volcano"}}}) is True
    assert cel._env is None
    # a missing field: only CEL knows the answer (an error), so now the program is built, once
    with pytest.raises(Exception):  # noqa: B017,PT011 — celpy's own error type
        cel.evaluate("object.spec.schedulerName == 'volcano'", {"object": {"metadata": {}}})
    assert cel._programs["object.spec.schedulerName == 'volcano'"][0] is not None
