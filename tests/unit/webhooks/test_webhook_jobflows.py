"""`/jobflows/validate`: the cases of Volcano's validate_jobflow_test.go and util_test.go, and lahar's duplicate rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lahar.webhooks import jobflows, review, routes
from lahar.webhooks.lookups import StaticLookups

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"


def flow(*steps: tuple[str, list[str] | None]) -> dict:
    """A JobFlow whose steps are (name, targets or None for no dependsOn)."""
    flows = [{"name": n} if t is None else {"name": n, "dependsOn": {"targets": t}} for n, t in steps]
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": "valid-jobflow", "namespace": "default"},
            "spec": {"jobRetainPolicy": "delete", "flows": flows}}


DIAMOND = [("b", ["a"]), ("c", ["a", "b"]), ("d", ["b"]), ("e", ["c", "d"])]
CASES = [
    ("valid-dag", flow(("a", None), *DIAMOND), ""),
    ("missing-vertex", flow(*DIAMOND), "jobflow Flow is not DAG: vertex is not defined: a"),
    ("two-step-cycle", flow(("a", ["b"]), ("b", ["a"]), ("c", ["a", "b"]), ("d", ["b"]), ("e", ["c", "d"])),
     "jobflow Flow is not DAG"),
    ("self-dependency", flow(("a", ["a"])), "jobflow Flow is not DAG"),
    ("long-cycle", flow(("a", ["d"]), ("b", ["a"]), ("c", ["b"]), ("d", ["c"])), "jobflow Flow is not DAG"),
    ("cycle-off-the-root", flow(("a", None), ("b", ["a", "c"]), ("c", ["b"])), "jobflow Flow is not DAG"),
    ("empty-targets", flow(("a", None), ("b", [])), ""),
    ("no-flows", {"spec": {}}, ""),
    ("flows-not-a-list", {"spec": {"flows": 3}}, ""),
    ("targets-not-a-list", {"spec": {"flows": [{"name": "a", "dependsOn": {"targets": 7}}, "junk"]}}, ""),
    ("probe-without-targets", {"spec": {"flows": [{"name": "a", "dependsOn": {"probe": {
        "taskStatusList": [{"taskName": "t", "phase": "Running"}]}}}]}}, ""),
    # Volcano accepts these two ("valid-jobflow with duplicate flow name", "... with muti c"); lahar refuses them:
    # the steps would share one Job (docs/compatibility.md)
    ("duplicate-root", flow(("a", None), ("a", None), *DIAMOND), "jobflow Flow is not DAG: duplicate flow name: a"),
    ("duplicate-step", flow(("a", None), ("b", ["a"]), ("c", ["a"]), ("c", ["b"])),
     "jobflow Flow is not DAG: duplicate flow name: c"),
]


@pytest.mark.parametrize(("obj", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check(obj: dict, want: str) -> None:
    assert jobflows.check(obj) == want


@pytest.mark.parametrize(("graph", "cycle"), [
    ({"a": [], "b": ["a"]}, None),
    ({"a": ["a"]}, ["a", "a"]),
    ({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"]),
    ({"x": [], "a": ["x", "b"], "b": ["a"]}, ["a", "b", "a"]),
    ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, None),
], ids=["chain", "self-loop", "triangle", "after-a-visited-leaf", "diamond"])
def test_find_cycle(graph: dict, cycle: list | None) -> None:
    assert jobflows.find_cycle(graph) == cycle


def verdict(obj: dict, operation: str = "CREATE") -> review.Verdict:
    req = review.request_for(obj, resource="jobflows", operation=operation,
                             old_object=obj if operation != "CREATE" else None)
    route = routes.default_routes()["/jobflows/validate"]
    got, _ = routes.admit(route, req, StaticLookups(), None)
    return got


def test_the_route_denies_a_cycle_and_allows_a_dag() -> None:
    assert verdict(flow(("a", None), *DIAMOND)).allowed
    denied = verdict(flow(("a", ["b"]), ("b", ["a"])), "UPDATE")
    assert not denied.allowed and denied.message == "jobflow Flow is not DAG"


def test_other_operations_are_refused_as_volcano_does() -> None:
    got = verdict(flow(("a", None)), "DELETE")
    assert not got.allowed and got.message == "expect operation to be 'CREATE' or 'UPDATE'"


def test_jobflow_objects_go_through_the_chain() -> None:
    assert routes.resource_for("flow.volcano.sh/v1alpha1", "JobFlow") == "jobflows"
    assert [r.path for r in routes.chain("jobflows")[1]] == ["/jobflows/validate"]


@pytest.mark.skipif(not (EXAMPLES / "jobflow").is_dir(), reason="the shared Volcano examples are absent")
def test_volcanos_example_is_allowed() -> None:
    doc = yaml.safe_load((EXAMPLES / "jobflow" / "JobFlow.yaml").read_text())
    assert jobflows.check(doc) == ""
