"""Which nodes a session sees (issue 13 item 1): Volcano's setNodeState, as a table over node conditions.

A node is NotReady only when its `Ready` condition is present and not "True"; no conditions at all is Ready, as
the nodes of Volcano's own scheduler test tables are. The full and the incremental snapshot agree.
"""

from __future__ import annotations

import pytest

from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.incremental import SnapshotInputs
from tests.builders import node, pod, podgroup, queue, run

CASES = [
    ("no-conditions", None, True),
    ("empty-conditions", {}, True),
    ("ready-true", {"Ready": "True"}, True),
    ("ready-false", {"Ready": "False"}, False),
    ("ready-unknown", {"Ready": "Unknown"}, False),
    ("ready-empty-status", {"Ready": ""}, False),
    ("only-other-conditions", {"MemoryPressure": "False", "DiskPressure": "False"}, True),
    ("pressure-true-ready-true", {"MemoryPressure": "True", "Ready": "True"}, True),
    ("other-then-ready-false", {"NetworkUnavailable": "False", "Ready": "False"}, False),
]


def _node(conditions: dict[str, str] | None) -> dict:
    n = node("n1").alloc(cpu="4", memory="8Gi")
    if conditions is None:
        del n.obj["status"]["conditions"]
    else:
        n.conditions(**conditions)
    return n.build()


@pytest.mark.parametrize(("conditions", "ready"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_node_ready(conditions: dict[str, str] | None, ready: bool) -> None:
    assert snapshots.node_ready(_node(conditions)) is ready


@pytest.mark.parametrize(("conditions", "ready"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_snapshot_and_incremental_agree(conditions: dict[str, str] | None, ready: bool) -> None:
    obj = _node(conditions)
    full = snapshots.build(nodes=[obj])
    inputs = SnapshotInputs()
    inputs.upsert("nodes", obj)
    inc = inputs.snapshot()
    assert [n.name for n in full.nodes] == [n.name for n in inc.nodes] == (["n1"] if ready else [])


def test_pod_binds_on_node_without_conditions() -> None:
    """An upstream-style table: one node built with no status conditions, one pod; the pod is placed there."""
    d = run(pods=[pod("p1").req(cpu="1", memory="1Gi").group("pg1")],
            nodes=[node("n1").alloc(cpu="2", memory="4Gi").conditions()],
            podgroups=[podgroup("pg1").min(1).queue("c1")], queues=[queue("c1")])
    assert d.bind_map() == {"c1/p1": "n1"}


def test_pod_not_bound_on_not_ready_node() -> None:
    d = run(pods=[pod("p1").req(cpu="1", memory="1Gi").group("pg1")],
            nodes=[node("n1").alloc(cpu="2", memory="4Gi").conditions(Ready="Unknown")],
            podgroups=[podgroup("pg1").min(1).queue("c1")], queues=[queue("c1")])
    assert d.bind_map() == {}
