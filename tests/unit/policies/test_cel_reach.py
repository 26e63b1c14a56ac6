"""`policies.cel.Reach`: what the engine is handed of `object` is only what the expressions can read.

Each expression must evaluate the same (value or error) on the pruned view as on the whole object.
"""

from __future__ import annotations

import pytest

from lahar.policies import cel

JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "ml", "labels": {"team": "vision", "tier": "gold"},
                 "annotations": {"a/b": "c"}},
    "spec": {"queue": "gpu", "minAvailable": 3, "priorityClassName": "",
             "tasks": [
                 {"name": "master", "replicas": 1, "template": {"spec": {"containers": [
                     {"name": "m", "image": "reg/x:1", "resources": {"requests": {"cpu": "1"}}}]}}},
                 {"name": "worker", "template": {"spec": {"containers": [
                     {"name": "w", "image": "reg/y:1", "env": [{"name": "A", "value": "1"}],
                      "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}}}]}}},
             ]},
}

CASES = [
    ("label", "has(object.metadata.labels) && 'team' in object.metadata.labels"),
    ("label-index", "object.metadata.labels['tier'] == 'gold'"),
    ("labels-iterated", "object.metadata.labels.all(k, k.startsWith('t'))"),
    ("gpu-sum", "object.spec.tasks.map(t, (has(t.replicas) ? t.replicas : 1) * t.template.spec.containers.map(c, "
                "has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits "
                "? int(q(c.resources.limits['nvidia.com/gpu'])) : 0).sum()).sum()"),
    ("iterate-only", "object.spec.tasks.map(t, 1).sum()"),
    ("size-of-list", "size(object.spec.tasks)"),
    ("element-whole", "object.spec.tasks.exists(t, t == {'name': 'x'})"),
    ("filter-then-map", "object.spec.tasks.filter(t, has(t.replicas)).map(t, t.template.spec.containers[0].name)"),
    ("index", "object.spec.tasks[1].template.spec.containers[0].env[0].value"),
    ("has-only", "has(object.spec.tasks[0].template.spec.containers[0].resources)"),
    ("has-missing", "has(object.spec.tasks[1].replicas)"),
    ("missing-key-error", "object.spec.tasks[1].replicas == 1"),
    ("whole-spec", "size(object.spec) == 4"),
    ("ternary", "(object.spec.queue == 'gpu' ? object.metadata : object.spec).name"),
    ("map-of-element-fields", "object.spec.tasks.map(t, t.name).join(',')"),
    ("whole-object", "object.kind == 'Job' && object != null"),
    ("no-object", "request.namespace == 'ml'"),
]


def _run(expression: str, views: dict | None) -> object:
    program = cel.compile(expression)
    act = cel.Activation({"object": JOB, "request": {"namespace": "ml"}}, views=views)
    try:
        return program.evaluate(act)
    except cel.EvaluationError as e:
        return ("error", type(e).__name__)


@pytest.mark.parametrize(("expression"), [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_view_evaluates_like_the_whole_object(expression: str) -> None:
    reach = cel.Reach("object", [cel.compile(expression)])
    assert _run(expression, None if reach.whole else {"object": reach.view}) == _run(expression, None)


def test_view_of_many_programs_evaluates_each_like_the_whole_object() -> None:
    programs = [cel.compile(e) for _, e in CASES if "object !=" not in e and "object.spec)" not in e]
    reach = cel.Reach("object", programs)
    assert not reach.whole
    for program in programs:
        assert _run(program.source, {"object": reach.view}) == _run(program.source, None), program.source


@pytest.mark.parametrize(("expressions", "expected"), [
    (["object.metadata.name"], {"metadata": {"name": "train"}}),
    (["has(object.spec.queue)"], {"spec": {"queue": "gpu"}}),
    (["object.spec.tasks.map(t, t.name)"], {"spec": {"tasks": [{"name": "master"}, {"name": "worker"}]}}),
    (["object.spec.tasks.all(t, true)"], {"spec": {"tasks": [None, None]}}),
    (["request.name"], {}),
], ids=["one-field", "presence", "element-field", "iterated-only", "not-read"])
def test_view_keeps_only_what_is_read(expressions: list[str], expected: dict) -> None:
    assert cel.Reach("object", [cel.compile(e) for e in expressions]).view(JOB) == expected


@pytest.mark.parametrize("expression", ["object", "object != null", "has(object.x) || size(object) > 0"],
                         ids=["bare", "compared", "size"])
def test_whole_object_use_disables_the_view(expression: str) -> None:
    assert cel.Reach("object", [cel.compile(expression)]).whole


def test_mutation_outside_the_view_does_not_rebuild_the_context() -> None:
    program = cel.compile("object.metadata.name")
    reach = cel.Reach("object", [program])
    act = cel.Activation({"object": JOB}, views={"object": reach.view})
    assert program.evaluate(act) == "train"
    ctx = act.context()
    act.bind("object", {**JOB, "spec": {}})
    assert act.context() is ctx and program.evaluate(act) == "train"
    act.bind("object", {**JOB, "metadata": {"name": "renamed"}})
    assert program.evaluate(act) == "renamed"
