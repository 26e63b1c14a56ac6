"""`policies.cel_native`: the closure path gives the engine's answer, or is unsure and lets the engine answer.

Every expression below is run both ways on the same input: where the closures answer, the value must equal the
engine's; the cases marked unsure must fall back (and `Program.evaluate` then gives the engine's value or error).
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.policies import admission_policies as ap
from lahar.policies import cel, cel_native
from tests.builders import vcjob

JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "ml", "labels": {"team": "vision", "tier": ""},
                 "annotations": {"a/b": "c"}},
    "spec": {"queue": "gpu", "minAvailable": 3, "priorityClassName": "", "ratio": 0.5, "maybe": None,
             "tasks": [
                 {"name": "master", "replicas": 1, "template": {"spec": {"containers": [
                     {"name": "m", "image": "reg/x:1", "resources": {"requests": {"cpu": "1"}}}]}}},
                 {"name": "worker", "template": {"spec": {"containers": [
                     {"name": "w", "image": "reg/y:1",
                      "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}}}]}}},
             ]},
}
DATA = {"object": JOB, "oldObject": None, "request": {"namespace": "ml", "operation": "CREATE"},
        "params": {"data": {"ml": "high", "maxGPUs": "64"}}, "queueObject": {"metadata": {"labels": {"gpu": "true"}}},
        "namespaceObject": None, "variables": {"gpus": 8}}

SURE = [
    ("label", "has(object.metadata.labels) && 'team' in object.metadata.labels", True),
    ("label-empty", "object.metadata.labels['tier'] != ''", False),
    ("has-missing", "!has(object.spec.priorityClass) || object.spec.priorityClass == ''", True),
    ("ternary", "has(object.spec.queue) && object.spec.queue != '' ? object.spec.queue : 'default'", "gpu"),
    ("gpu-sum", "object.spec.tasks.map(t, (has(t.replicas) ? t.replicas : 1) * t.template.spec.containers.map(c, "
                "has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits "
                "? int(q(c.resources.limits['nvidia.com/gpu'])) : 0).sum()).sum()", 8),
    ("registry", "object.spec.tasks.all(t, t.template.spec.containers.all(c, c.image.startsWith('reg/')))", True),
    ("exists", "object.spec.tasks.exists(t, t.name == 'worker')", True),
    ("exists-one", "object.spec.tasks.exists_one(t, t.name.endsWith('er'))", False),
    ("filter-map", "object.spec.tasks.filter(t, has(t.replicas)).map(t, t.name)", ["master"]),
    ("map-3", "[1, 2, 3].map(x, x > 1, x * 2)", [4, 6]),
    ("map-keys", "object.metadata.labels.all(k, k.size() > 1)", True),
    ("null-ne", "queueObject != null && queueObject.metadata.labels['gpu'] == 'true'", True),
    ("null-eq", "object.spec.maybe == null", True),
    ("has-null", "has(object.spec.maybe)", True),
    ("params", "request.namespace in params.data ? params.data[request.namespace] : ''", "high"),
    ("int-of-string", "variables.gpus <= int(params.data.maxGPUs)", True),
    ("message", "'job asks for ' + string(variables.gpus) + ' GPUs'", "job asks for 8 GPUs"),
    ("arith", "(7 - 2) * 3 / 2 % 4 + 1", 4),
    ("float", "object.spec.ratio * 2.0 - 0.5", 0.5),
    ("neg", "-object.spec.minAvailable < 0", True),
    ("int-trunc", "int(-2.7)", -2),
    ("double", "double(object.spec.minAvailable) / 2.0", 1.5),
    ("size", "size(object.spec.tasks) + size('abc') + size(object.metadata.labels)", 7),
    ("in-list", "'b' in ['a', 'b']", True),
    ("concat-list", "[1] + [2]", [1, 2]),
    ("list-index", "object.spec.tasks[1].name", "worker"),
    ("map-literal", "[{'op': 'add', 'path': '/metadata/annotations', 'value': {'k': object.spec.queue}}]",
     [{"op": "add", "path": "/metadata/annotations", "value": {"k": "gpu"}}]),
    ("escape-key", "jsonpatch.escapeKey('a/b~c')", "a~1b~0c"),
    ("library", "quantity('1Gi').isGreaterThan(quantity('1000Mi')) && 'a,b'.split(',').size() == 2", True),
    ("false-and-absorbs", "false && object.nope == 1", False),
    ("true-or-absorbs", "true || object.nope == 1", True),
    ("contains", "object.spec.queue.contains('p')", True),
]

UNSURE = [
    ("missing-key", "object.spec.nope == 1"),
    ("mixed-numbers", "1 == 1.0"),
    ("mixed-types", "'a' == 1"),
    ("list-equality", "[1, 2] == [1, 2]"),
    ("negative-division", "-7 / 2"),
    ("negative-modulo", "-7 % 2"),
    ("overflow", "9223372036854775807 + 1"),
    ("index-out-of-range", "[1, 2][5]"),
    ("error-and-false", "(1 / 0 == 1) && false"),
    ("heterogeneous-in", "'a' in ['a', 1]"),
    ("bad-int", "int(' 12')"),
    ("non-ascii-size", "size('héllo')"),
    ("library-raises", "quantity('not-a-quantity').isGreaterThan(quantity('1'))"),
    ("quantity-equality", "quantity('1Gi') == quantity('1024Mi')"),
    ("non-bool-and", "true && 1"),
]

UNSUPPORTED = [
    ("bytes", "b'abc' == b'abc'"),
    ("uint", "1u == 1u"),
    ("hex", "0x10 == 16"),
    ("escape", "'a\\n' == 'a'"),
    ("raw", "r'a' == 'a'"),
    ("matches", "'abc'.matches('^a')"),
    ("timestamp", "timestamp('2024-01-01T00:00:00Z') < timestamp('2025-01-01T00:00:00Z')"),
    ("duration", "duration('1h') > duration('1m')"),
]


def _engine(program: cel.Program) -> tuple[str, Any]:
    try:
        return "ok", program._program.execute(cel.Activation(dict(DATA)).context())
    except Exception as e:  # noqa: BLE001 — the engine's failure is an answer too
        return "error", type(e).__name__


def _native(program: cel.Program) -> Any:
    assert program._native is not None, "the expression has no closures"
    return program._native.run(cel.Activation(dict(DATA)).data)


@pytest.mark.parametrize(("expr", "expected"), [c[1:] for c in SURE], ids=[c[0] for c in SURE])
def test_closures_answer_as_the_engine_does(expr: str, expected: Any) -> None:
    program = cel.compile(expr)
    assert _native(program) == expected
    assert _engine(program) == ("ok", expected)
    assert program.evaluate(cel.Activation(dict(DATA))) == expected


@pytest.mark.parametrize("expr", [c[1] for c in UNSURE], ids=[c[0] for c in UNSURE])
def test_unsure_closures_leave_the_answer_to_the_engine(expr: str) -> None:
    program = cel.compile(expr)
    with pytest.raises(Exception):  # noqa: B017 — Unsure, or any failure: both mean "ask the engine"
        _native(program)
    kind, value = _engine(program)
    if kind == "ok":
        assert program.evaluate(cel.Activation(dict(DATA))) == value
    else:
        with pytest.raises(cel.EvaluationError):
            program.evaluate(cel.Activation(dict(DATA)))


@pytest.mark.parametrize("expr", [c[1] for c in UNSUPPORTED], ids=[c[0] for c in UNSUPPORTED])
def test_outside_the_subset_there_are_no_closures(expr: str) -> None:
    assert cel.compile(expr)._native is None


def test_results_share_no_container_with_the_input() -> None:
    value = cel.compile("object.spec.tasks").evaluate(cel.Activation({"object": JOB}))
    assert value == JOB["spec"]["tasks"] and value is not JOB["spec"]["tasks"]
    assert value[0] is not JOB["spec"]["tasks"][0]


def test_a_review_on_closures_converts_nothing_for_the_engine() -> None:
    act = cel.Activation(dict(DATA))
    for expr, _ in [c[1:] for c in SURE]:
        cel.compile(expr).evaluate(act)
    assert act._ctx is None                       # the engine's context (the conversion) was never built
    cel.compile("'abc'.matches('^a')").evaluate(act)
    assert act._ctx is not None


def test_expensive_expressions_run_on_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    run = cel_native.Native.run
    monkeypatch.setattr(cel_native.Native, "run", lambda self, data: calls.append(1) or run(self, data))
    program = cel.compile("object.spec.tasks.all(t, t.name != '')")
    assert program.evaluate(cel.Activation({"object": JOB})) is True and calls == [1]
    monkeypatch.setattr(cel, "NATIVE_MAX_COST", program.estimate(cel.Activation({"object": JOB})) - 1)
    assert program.evaluate(cel.Activation({"object": JOB})) is True and calls == [1]


def test_cost_limit_and_budget_hold_on_the_closure_path() -> None:
    program = cel.compile("object.spec.tasks.all(t, t.name != '')", cost_limit=2)
    with pytest.raises(cel.CostLimitExceeded):
        program.evaluate(cel.Activation({"object": JOB}))
    cheap = cel.compile("object.spec.tasks.all(t, t.name != '')")
    act = cel.Activation({"object": JOB}, budget=cheap.estimate(cel.Activation({"object": JOB})) + 1)
    assert cheap.evaluate(act) is True
    with pytest.raises(cel.CostBudgetExhausted):
        cheap.evaluate(act)


def test_sizes_of_a_rebound_variable_are_recomputed() -> None:
    program = cel.compile("variables.xs.all(x, x > 0)")
    values: dict[str, Any] = {"xs": [1]}
    act = cel.Activation({"variables": values})
    small = program.estimate(act)
    values["xs"] = list(range(1, 100))
    act.bind("variables", values)               # filled in place: its sizes must be forgotten
    assert program.estimate(act) > small
    assert program.evaluate(act) is True


def _doc(expression: str) -> dict:
    return {"apiVersion": "lahar.sh/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"],
                                                              "operations": ["CREATE"], "resources": ["jobs"]}]},
                     "validations": [{"expression": expression, "message": "no"}]}}


def test_a_changed_policy_is_compiled_again() -> None:
    job = vcjob("j", "default").queue("default").task("t", 1).build()
    req = ap.request_for_object(job)
    (v1,) = ap.load_documents([_doc("object.spec.queue == 'default'")])
    (v2,) = ap.load_documents([_doc("object.spec.queue == 'other'")])
    assert ap.evaluate([v1], req) == []
    assert [r.kind for r in ap.evaluate([v2], req)] == ["validation"]
    assert v1.validations[0][1].program._native is not v2.validations[0][1].program._native


def test_a_map_is_ranged_over_in_its_keys_order() -> None:
    # The engine ranges over a map in its hash order (`['s', 'v', 'z', ...]` for keys 'z'..'q'); the closures take
    # the object's own order, which is one of the orders CEL allows and the same on every run.
    keys = list("zyxwvutsrq")
    program = cel.compile("object.m.map(k, k)")
    assert program.evaluate(cel.Activation({"object": {"m": dict.fromkeys(keys, 1)}})) == keys
    assert sorted(program._program.execute(cel.Activation({"object": {"m": dict.fromkeys(keys, 1)}}).context())) \
        == sorted(keys)
