"""Fuzzing policies.cel: any text compiles to a Program or raises CompileError, and a compiled program evaluates to a
value or raises a CelError; nothing crashes, recurses out or runs unbounded. Bounded: a fixed number of examples."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.policies import cel

# CEL's own tokens, so that most examples get past the lexer and reach the parser, the analysis and the engine.
TOKENS = ["1", "2.5", "-", "+", "*", "/", "%", "!", "&&", "||", "==", "!=", "<", ">=", "?", ":", "(", ")", "[",
          "]", "{", "}", ",", ".", "'s'", '"JSONPatch{"', "true", "null", "in", "object", "variables", "x",
          ".all(x, ", ".map(x, ", ".exists(x, ", ".split('')", ".size()", "size(", "has(", "JSONPatch{op: ",
          "q('1Gi')", "quantity(", ".replace('a', 'bb')", "object.spec.tasks", "object.metadata.name", " ", "\n",
          "// c\n", "r'\\('", "'''(('''"]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
OBJECT = {"metadata": {"name": "j", "labels": {"a": "b"}, "annotations": {"big": "x" * 2000}},
          "spec": {"tasks": [{"name": f"t{i}", "replicas": i} for i in range(4)]}}

# A run of one token repeated many times: what broke the parsers (chains, nesting).
runs = st.tuples(st.sampled_from(TOKENS), st.integers(1, 3000)).map(lambda t: t[0] * t[1])
texts = st.lists(st.one_of(st.sampled_from(TOKENS), runs), max_size=40).map("".join)


def _compile(text: str) -> cel.Program | None:
    try:
        return cel.compile(text)
    except cel.CompileError as e:
        assert str(e)                                    # the CEL error a user reads
        assert len(str(e)) < 1000
        return None


@SETTINGS
@given(texts)
def test_compile_raises_only_compile_errors(text: str) -> None:
    _compile(text)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25).map("".join))
def test_compiled_programs_evaluate_or_raise_cel_errors(text: str) -> None:
    program = _compile(text)
    if program is None:
        return
    act = cel.Activation({"object": OBJECT, "variables": {}}, budget=cel.DEFAULT_REVIEW_BUDGET)
    try:
        value: Any = program.evaluate(act)
    except cel.CelError:
        return
    assert value is None or isinstance(value, bool | int | float | str | bytes | list | dict)
