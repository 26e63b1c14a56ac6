"""`admission_policies.evaluation.patch_copying_paths`: JSON Patch by copying only the containers along the paths.

Each patch must give what `jsonpatch` gives, leave its input as it was, and share the untouched subtrees; whatever
it does not take (`test`, `move`, a missing step, a bad index) is handed back for `jsonpatch` to apply or refuse.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from lahar.policies.admission_policies import evaluation

DOC = {"metadata": {"name": "j", "annotations": {"a/b": "1"}, "labels": {"team": "x"}},
       "spec": {"queue": "q", "tasks": [{"name": "t0"}, {"name": "t1"}], "policies": []}}

SIMPLE = [
    ("add-key", [{"op": "add", "path": "/metadata/annotations/new", "value": "v"}]),
    ("add-replaces", [{"op": "add", "path": "/spec/queue", "value": "other"}]),
    ("add-map", [{"op": "add", "path": "/spec/priorityClassName", "value": {"x": [1]}}]),
    ("add-then-into", [{"op": "add", "path": "/metadata/extra", "value": {}},
                       {"op": "add", "path": "/metadata/extra/k", "value": 1}]),
    ("escaped", [{"op": "replace", "path": "/metadata/annotations/a~1b", "value": "2"}]),
    ("append", [{"op": "add", "path": "/spec/tasks/-", "value": {"name": "t2"}}]),
    ("insert", [{"op": "add", "path": "/spec/tasks/0", "value": {"name": "first"}}]),
    ("insert-at-end", [{"op": "add", "path": "/spec/tasks/2", "value": {"name": "last"}}]),
    ("replace-element", [{"op": "replace", "path": "/spec/tasks/1/name", "value": "w"}]),
    ("remove-key", [{"op": "remove", "path": "/metadata/labels/team"}]),
    ("remove-element", [{"op": "remove", "path": "/spec/tasks/0"}]),
    ("several", [{"op": "add", "path": "/metadata/labels/a", "value": "1"},
                 {"op": "replace", "path": "/spec/queue", "value": "z"},
                 {"op": "remove", "path": "/spec/policies"}]),
]

HANDED_BACK = [
    ("test", [{"op": "test", "path": "/spec/queue", "value": "q"}]),
    ("move", [{"op": "move", "from": "/spec/queue", "path": "/spec/q"}]),
    ("missing-parent", [{"op": "add", "path": "/status/phase", "value": "x"}]),
    ("replace-missing", [{"op": "replace", "path": "/spec/nope", "value": 1}]),
    ("remove-missing", [{"op": "remove", "path": "/metadata/nope"}]),
    ("index-too-far", [{"op": "add", "path": "/spec/tasks/3", "value": {}}]),
    ("leading-zero", [{"op": "replace", "path": "/spec/tasks/01", "value": {}}]),
    ("through-a-string", [{"op": "add", "path": "/spec/queue/x", "value": 1}]),
    ("whole-document", [{"op": "replace", "path": "", "value": {}}]),
    ("no-value", [{"op": "add", "path": "/spec/x"}]),
]


@pytest.mark.parametrize("ops", [c[1] for c in SIMPLE], ids=[c[0] for c in SIMPLE])
def test_simple_patches_match_jsonpatch_and_leave_the_input(ops: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(DOC)
    out = evaluation.patch_copying_paths(DOC, ops)
    assert out == jsonpatch.JsonPatch(copy.deepcopy(ops)).apply(copy.deepcopy(DOC))
    assert before == DOC
    touched = {op["path"].split("/")[1] for op in ops}
    for key in DOC:
        if key not in touched:
            assert out[key] is DOC[key]               # off the patched paths: shared, not copied


@pytest.mark.parametrize("ops", [c[1] for c in HANDED_BACK], ids=[c[0] for c in HANDED_BACK])
def test_other_patches_are_handed_back_untouched(ops: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(DOC)
    assert evaluation.patch_copying_paths(DOC, ops) is evaluation._NOT_SIMPLE
    assert before == DOC
