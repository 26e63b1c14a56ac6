"""policies.cel_text bounds and policies.cel.compile on hostile expressions: every one is a CompileError, never a crash.

Regressions of the hardening issue's first finding: a 40k-term `1+1+…` killed the process (SIGSEGV in the Rust
parser), 100k nested parentheses raised a PanicException, and `&&`, `!`, `+` chains of a few hundred terms raised
RecursionError in the analysis.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from lahar.policies import cel, cel_text


@pytest.mark.parametrize(("expression", "depth"), [
    ("true", 0),
    ("1 + 2 + 3", 2),
    ("a.b.c", 2),
    ("(1 + 2) * 3", 3),
    ("f(1 + 2, 3 + 4 + 5)", 4),
    ("[1, 2, 3]", 2),
    ("'((((' + \"))))\"", 1),
    ("r'\\\\((' + '''(\n(''' // ((((((\n + 1", 2),
    ("1.5 + 2.25", 1),
    ("x in [1]", 3),
    ("a <= b && c != d", 3),
], ids=["literal", "chain", "selection", "group", "call args", "list", "brackets in strings",
        "raw, triple-quoted, comment", "floats", "in", "two-char operators"])
def test_shape_estimates_the_depth(expression: str, depth: int) -> None:
    measured = cel_text.shape(expression)
    assert measured.violation is None
    assert measured.depth == depth


@pytest.mark.parametrize(("expression", "reason", "position"), [
    ("1" + "+1" * 40_000, "nested more than 250 levels deep", (1, 502)),
    ("(" * 100_000 + "1" + ")" * 100_000, "200001 characters long, more than the limit of 100000", (0, 0)),
    ("true" + "&&true" * 600, "nested more than 250 levels deep", (1, 1505)),
    ("!" * 1000 + "true", "nested more than 250 levels deep", (1, 251)),
    ("1" + "+1" * 1000, "nested more than 250 levels deep", (1, 502)),
    ("x" + "\n.a" * 300, "nested more than 250 levels deep", (252, 1)),
    ("[" + ",".join(["1"] * 6000) + "]", "more than 10000 tokens", (1, 10001)),
], ids=["+ x40k (SIGSEGV)", "parens x100k (panic)", "&& x600", "! x1000", "+ x1000", "selection x300, lines",
        "tokens"])
def test_check_refuses_with_reason_and_position(expression: str, reason: str, position: tuple[int, int]) -> None:
    violation = cel_text.check(expression)
    assert violation is not None
    assert reason in violation.reason
    assert (violation.line, violation.column) == position


@pytest.mark.parametrize("expression", [
    "(" * 100_000 + "1" + ")" * 100_000,
    "true" + "&&true" * 600,
    "!" * 1000 + "true",
    "-" * 1000 + "1",
    "1" + "+1" * 1000,
    "object" + ".a" * 1000,
    "(" * 250 + "1" + ")" * 250,
    "[" * 1000 + "]" * 1000,
    "size(" * 500 + "1" + ")" * 500,
    "true ? 1 : " * 1000 + "1",
    "[" + ",".join(['"JSONPatch{"'] * 7000) + "].size() > 0",   # the rewrite was quadratic: minutes
    "true" * 20_000,                                             # an undeclared name was echoed whole
], ids=["parens x100k", "&& x600", "! x1000", "- x1000", "+ x1000", "selection x1000", "parens x250",
        "lists x1000", "calls x500", "ternaries x1000", "JSONPatch in 7000 strings", "80 KB identifier"])
def test_compile_turns_every_hostile_expression_into_a_compile_error(expression: str) -> None:
    with pytest.raises(cel.CompileError) as info:
        cel.compile(expression)
    assert info.value.line >= 1 or "characters long" in info.value.reason
    assert len(str(info.value)) < 600          # a 100 KB line is shown as a window around the column


def test_the_40k_term_chain_no_longer_kills_the_process() -> None:
    script = ("from lahar.policies import cel\n"
              "try:\n    cel.compile('1' + '+1' * 40000)\n"
              "except cel.CompileError as e:\n    print('CompileError', e.line, e.column)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["CompileError", "1", "502"]


@pytest.mark.parametrize("expression", [
    "!" * 249 + "true",
    "true" + "&&true" * 249,
    "object" + ".a" * 249,
    "(" * 95 + "1" + ")" * 95,
    "(" * 90 + "1" + "+1" * 150 + ")" * 90,
], ids=["! x249", "&& x249", "selection x249", "parens x95", "parens x90 around + x150"])
def test_expressions_just_inside_the_bounds_compile(expression: str) -> None:
    program = cel.compile(expression)
    assert program.source == expression


def test_a_deep_expression_past_the_analysis_still_compiles_and_evaluates() -> None:
    program = cel.compile("(" * 90 + "1" + "+1" * 150 + ")" * 90 + " == 151")
    assert program.evaluate(cel.Activation({})) is True


def test_the_parser_recursion_limit_reads_as_a_positioned_error() -> None:
    with pytest.raises(cel.CompileError) as info:
        cel.compile("(" * 120 + "1" + ")" * 120)
    assert info.value.reason.startswith("Syntax error: nesting too deep (recursion limit of 96 exceeded)")
    assert (info.value.line, info.value.column) == (1, 97)


@pytest.mark.parametrize(("expression", "rewritten"), [
    ('JSONPatch{op: "add", path: "/a", value: 1}', '{ "op": "add", "path": "/a", "value": 1}'),
    ('["JSONPatch{", JSONPatch{op: "remove"}]', '["JSONPatch{", { "op": "remove"}]'),
    ("'JSONPatch{op: 1}'", "'JSONPatch{op: 1}'"),
    ("notJSONPatch{op: 1}", "notJSONPatch{op: 1}"),
    ('[JSONPatch{op: "add", value: {"k": [1, 2]}}, JSONPatch{ op : "test" }]',
     '[{ "op": "add", "value": {"k": [1, 2]}}, { "op": "test" }]'),
], ids=["literal", "inside and outside a string", "only in a string", "longer identifier", "nested values, two"])
def test_rewrite_struct_literals(expression: str, rewritten: str) -> None:
    assert cel_text.rewrite_struct_literals(expression) == rewritten
