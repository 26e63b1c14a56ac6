"""policies.cel costs by size, and the per-review cost budget, down to what the webhook answers.

Regressions of the hardening issue's second finding: a 3-task Job with a 1 MB annotation, met by `split('')` inside
`.all()`, was estimated at a few dozen units and froze the webhook for 9.7 s; variables that double a list reached
853 MB; nothing bounded the cost of one review as a whole.
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.policies import admission_policies as ap
from lahar.policies import cel, cel_costs
from lahar.policies.admission_policies import evaluation
from tests.builders import task, vcjob

BIG = "x" * 400_000


def job(annotation: str = BIG, tasks: int = 3) -> dict[str, Any]:
    return vcjob("j").annotate(a=annotation).queue("default").tasks(*(task(f"t{i}") for i in range(tasks))).build()


@pytest.mark.parametrize(("expression", "at_least"), [
    ("object.spec.tasks.all(t, object.metadata.annotations['a'].split('').size() > 0)", 3 * len(BIG)),
    ("object.metadata.annotations['a'].split('').all(c, c == 'x')", 2 * len(BIG)),
    ("object.metadata.annotations['a'].replace('x', 'yyyy').size() > 0", 5 * len(BIG)),
    ("(object.metadata.annotations['a'] + object.metadata.annotations['a']).size() > 0", 2 * len(BIG)),
    ("object.spec.tasks.all(t, object.metadata.annotations['a'].contains('y') == false)", 3 * len(BIG)),
    ("object.spec.tasks.all(t, object.metadata.annotations['a'].matches('^x+$'))", 3 * len(BIG)),
], ids=["split in all (the 9.7 s freeze)", "split as a range", "replace grows", "+ on strings", "contains",
        "matches"])
def test_costs_follow_sizes(expression: str, at_least: int) -> None:
    program = cel.compile(expression)
    assert program.estimate(cel.Activation({"object": job()})) >= at_least


@pytest.mark.parametrize(("expression", "at_most"), [
    ("object.spec.tasks.all(t, t.replicas > 0)", 20),
    ("object.metadata.name.startsWith('j')", 10),
    ("object.spec.tasks.size() + 1 > 2", 10),
], ids=["a small comprehension", "a short string", "integer arithmetic"])
def test_small_inputs_stay_cheap(expression: str, at_most: int) -> None:
    program = cel.compile(expression)
    assert program.estimate(cel.Activation({"object": job("short")})) <= at_most


def test_a_split_converted_element_by_element_is_weighted() -> None:
    # 3 × 300k was 900k, under the limit, and took 7.3 s: each element of split's list is converted from Python
    program = cel.compile("object.spec.tasks.all(t, object.metadata.annotations['a'].split('').size() > 0)")
    act = cel.Activation({"object": job("x" * 300_000)})
    assert program.estimate(act) >= 3 * 300_000 * cel_costs.CONVERSION_WEIGHT
    with pytest.raises(cel.CostLimitExceeded):
        program.evaluate(act)
    small = cel.Activation({"object": job("x" * 1_000)})
    assert program.estimate(small) < cel.DEFAULT_COST_LIMIT


def test_the_1mb_split_is_refused_before_it_runs() -> None:
    program = cel.compile("object.spec.tasks.all(t, object.metadata.annotations['a'].split('').size() > 0)")
    with pytest.raises(cel.CostLimitExceeded):
        program.evaluate(cel.Activation({"object": job("x" * 1_000_000)}))


# --- the per-review budget ----------------------------------------------------------------------------------------

def test_budget_is_spent_by_each_evaluation_and_refuses_what_does_not_fit() -> None:
    program = cel.compile("object.metadata.annotations['a'].contains('y')")
    act = cel.Activation({"object": job()}, budget=1_000_000)
    cost = program.estimate(act)
    assert program.evaluate(act) is False
    assert act.budget == 1_000_000 - cost
    assert program.evaluate(act) is False
    with pytest.raises(cel.CostBudgetExhausted, match="running out of cost budget"):
        program.evaluate(act)
    assert act.budget == 0
    with pytest.raises(cel.CostBudgetExhausted):
        cel.compile("true").evaluate(act)          # nothing more runs on this review


def policy(failure_policy: str, count: int = 40, **spec: Any) -> dict[str, Any]:
    rule = {"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
            "resources": ["jobs"]}
    body = {"matchConstraints": {"resourceRules": [rule]}, "failurePolicy": failure_policy,
            "validations": [{"expression": "!object.metadata.annotations['a'].contains('y')"}] * count}
    body.update(spec)
    return {"apiVersion": "lahar.sh/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": "big"}, "spec": body}


@pytest.mark.parametrize(("failure_policy", "kinds"), [
    ("Fail", {"error"}),
    ("Ignore", set()),
], ids=["Fail: an error result", "Ignore: nothing"])
def test_a_review_past_its_budget_is_answered_by_the_failure_policy(failure_policy: str, kinds: set[str]) -> None:
    # 40 validations of ~400k each: 16M, past the review's 10M, though each is under the 1M per-expression limit
    results = ap.evaluate(ap.load_documents([policy(failure_policy)]), ap.request_for_object(job()))
    assert {r.kind for r in results} == kinds
    if kinds:
        assert "running out of cost budget" in results[0].message


def test_variables_that_double_a_list_are_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation, "MAX_VARIABLE_ELEMENTS", 1_000)      # the same rule as 100,000, on small values
    doubling = [{"name": "v0", "expression": "object.metadata.annotations['a'].split('')"}]
    doubling += [{"name": f"v{i}", "expression": f"variables.v{i - 1} + variables.v{i - 1}"} for i in range(1, 12)]
    doc = policy("Fail", count=1, variables=doubling,
                 validations=[{"expression": "variables.v2.size() > 0"}, {"expression": "variables.v1.size() > 0"}])
    results = ap.evaluate(ap.load_documents([doc]), ap.request_for_object(job("x" * 300)))
    assert [r.kind for r in results] == ["error"]      # v2 (1,200 elements) failed; v1 (600) is fine
    assert results[0].message == "variable 'v2' failed: its value has 1200 elements, more than the limit of 1000"


@pytest.mark.parametrize("head", [
    "object.metadata.annotations['a'].split('').size() > 0",
    "(object.metadata.annotations['a'] + object.metadata.annotations['a']).size() > 0",
], ids=["split", "+"])
def test_past_the_analysis_the_coarse_bound_still_counts_sizes(head: str) -> None:
    # more than ANALYSIS_TOKENS tokens: no fine analysis, the coarse bound must still see the 1 MB walk
    filler = "[" + ", ".join(["1"] * (cel.ANALYSIS_TOKENS // 2 + 10)) + "].size() > 0"   # tokens, not depth
    program = cel.compile(f"{head} && {filler}")
    assert program.accesses is None
    with pytest.raises(cel.CostLimitExceeded):
        program.evaluate(cel.Activation({"object": job("x" * 1_000_000)}))
    assert program.estimate(cel.Activation({"object": job("short")})) < cel.DEFAULT_COST_LIMIT
