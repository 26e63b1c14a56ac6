"""policies.cel: compilation errors with positions, evaluation, the Kubernetes-style library, the cost limit."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.policies import cel

JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns", "labels": {"team": "vision"}},
    "spec": {"queue": "research", "tasks": [
        {"name": f"t{i}", "replicas": 2, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4", "memory": "1Gi"}}}]}}}
        for i in range(3)]},
}


def run(expr: str, **bindings: Any) -> Any:
    return cel.compile(expr).evaluate(cel.Activation({"object": JOB, **bindings}))


@pytest.mark.parametrize(("expr", "expected"), [
    ("has(object.metadata.labels) && 'team' in object.metadata.labels", True),
    ("has(object.spec.priorityClassName)", False),
    ("size(object.spec.tasks)", 3),
    ("object.spec.tasks.all(t, t.replicas == 2)", True),
    ("object.spec.tasks.exists(t, t.name == 't1')", True),
    ("object.spec.tasks.exists_one(t, t.name.startsWith('t'))", False),
    ("object.spec.tasks.filter(t, t.name != 't0').map(t, t.name)", ["t1", "t2"]),
    ("object.spec.tasks.map(t, t.replicas * int(q(t.template.spec.containers[0].resources.limits['nvidia.com/gpu'])))"
     ".sum()", 24),
    ("quantity('1Gi').isGreaterThan(quantity('1000Mi'))", True),
    ("quantity('500m').isLessThan(quantity('1'))", True),
    ("quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
    ("quantity('1Gi') == quantity('1024Mi')", True),
    ("quantity('1').add(quantity('500m')).asApproximateFloat()", 1.5),
    ("quantity('2Gi').sub(quantity('1Gi')).asInteger()", 1073741824),
    ("isQuantity('12x')", False),
    ("q('500m') == 0.5 && q('1Gi') == 1073741824.0 && q(8) == 8.0", True),
    ("'A-b'.lowerAscii() + 'c'.upperAscii()", "a-bC"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("['a', 'b'].join('-')", "a-b"),
    ("' x '.trim().replace('x', 'y')", "y"),
    ("'abcb'.indexOf('b') + 'abcb'.lastIndexOf('b')", 4),
    ("'hello'.substring(1, 3)", "el"),
    ("[3, 1, 2].max() - [3, 1, 2].min()", 2),
    ("[1, 2, 3].isSorted() && ![2, 1].isSorted()", True),
    ("jsonpatch.escapeKey('a/b~c')", "a~1b~0c"),
    ('[JSONPatch{op: "add", path: "/x", value: {"k": 1}}][0].op', "add"),
    ('JSONPatch{op: "test", path: "/a,b", value: "JSONPatch{x: 1}"}.value', "JSONPatch{x: 1}"),
    ("oldObject == null", True),
], ids=lambda v: v if isinstance(v, str) else None)
def test_evaluates(expr: str, expected: Any) -> None:
    assert run(expr, oldObject=None) == expected


@pytest.mark.parametrize(("expr", "reason", "line", "column"), [
    ("object.spec.queue == ", "Syntax error", 1, 22),
    ("object.metadata.labels['x' ", "missing ']'", 1, 28),
    ("1 +\n  * 2", "Syntax error", 2, 3),
    ("objects.metadata.name", "undeclared reference to 'objects'", 1, 1),
    ("object.metadata.name.splt(',')", "undeclared function 'splt'", 1, 22),
    ("frobnicate(object)", "undeclared function 'frobnicate'", 1, 1),
], ids=["eof", "unclosed-index", "second-line", "unknown-variable", "unknown-method", "unknown-function"])
def test_compile_errors_carry_position(expr: str, reason: str, line: int, column: int) -> None:
    with pytest.raises(cel.CompileError) as info:
        cel.compile(expr)
    err = info.value
    assert reason in err.reason
    assert (err.line, err.column) == (line, column)
    assert f"at line {line}, column {column}" in str(err)


def test_empty_expression_is_refused() -> None:
    with pytest.raises(cel.CompileError, match="empty expression"):
        cel.compile("  ")


def test_comprehension_variables_are_not_undeclared() -> None:
    cel.compile("object.spec.tasks.all(t, t.template.spec.containers.all(c, has(c.name)))")


@pytest.mark.parametrize(("expr", "message"), [
    ("object.spec.nope", "no such key: nope"),
    ("1 / 0", "division by zero"),
    ("object.spec.queue + 1", "Unsupported operation: string \\+ int"),
    ("quantity('12x')", "quantities must match"),
    ("'ab'.substring(3)", "out of range"),
], ids=["missing-key", "div-zero", "overload", "bad-quantity", "substring-range"])
def test_evaluation_errors(expr: str, message: str) -> None:
    with pytest.raises(cel.EvaluationError, match=message):
        run(expr)


BIG = "[" + ",".join(str(i) for i in range(20)) + "]"
RUNAWAY = f"{BIG}.all(a, {BIG}.all(b, {BIG}.all(c, {BIG}.all(d, {BIG}.all(e, a + b + c + d + e >= 0)))))"


def test_runaway_expression_is_cut_off_before_it_runs() -> None:
    program = cel.compile(RUNAWAY)
    act = cel.Activation({})
    assert program.estimate(act) > cel.DEFAULT_COST_LIMIT
    with pytest.raises(cel.CostLimitExceeded, match=r"estimated cost \d+ exceeds the limit 1000000"):
        program.evaluate(act)


def test_cost_follows_the_input_sizes() -> None:
    program = cel.compile("object.items.all(a, object.items.all(b, a != b || a == b))", cost_limit=10_000)
    small = cel.Activation({"object": {"items": list(range(10))}})
    large = cel.Activation({"object": {"items": list(range(1000))}})
    assert program.evaluate(small) is True
    assert program.estimate(large) > 100 * program.estimate(small)
    with pytest.raises(cel.CostLimitExceeded):
        program.evaluate(large)


def test_nested_paths_are_sized_from_the_elements() -> None:
    program = cel.compile("object.spec.tasks.all(t, t.template.spec.containers.all(c, has(c.name)))")
    act = cel.Activation({"object": JOB})
    # 3 tasks x 1 container: a few dozen units, nowhere near "largest collection squared" bounds
    assert program.estimate(act) < 100


def test_deadline_stops_further_evaluation() -> None:
    act = cel.Activation({"object": JOB}, deadline=0.0)
    with pytest.raises(cel.EvaluationError, match="time budget"):
        cel.compile("true").evaluate(act)


def test_activation_bind_replaces_a_variable() -> None:
    program = cel.compile("params.n + 1")
    act = cel.Activation({"params": {"n": 1}})
    assert program.evaluate(act) == 2
    act.bind("params", {"n": 41})
    assert program.evaluate(act) == 42
