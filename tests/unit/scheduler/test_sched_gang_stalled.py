"""Gangs never stall (issue 20 item 4, volcano#5805): a gang that runs below minAvailable after losing pods gets freed
capacity before a fresh gang of the same queue and priority, whatever drf's share says — gang's job order as a pure
function, then in a session with drf."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework.nodes import ResourceIndex
from lahar.scheduler.framework.snapshot import Job, Task, TaskStatus
from lahar.scheduler.plugins.gang import Progress, order_by_progress, progress_of
from tests.builders import node, pod, podgroup, queue, run, tiers_conf

ORDER = [
    ("stalled-before-waiting", Progress.STALLED, Progress.WAITING, -1),
    ("waiting-after-stalled", Progress.WAITING, Progress.STALLED, 1),
    ("waiting-before-ready", Progress.WAITING, Progress.READY, -1),
    ("stalled-before-ready", Progress.STALLED, Progress.READY, -1),
    ("ready-after-waiting", Progress.READY, Progress.WAITING, 1),
    ("two-stalled-tie", Progress.STALLED, Progress.STALLED, 0),
    ("two-waiting-tie", Progress.WAITING, Progress.WAITING, 0),
    ("two-ready-tie", Progress.READY, Progress.READY, 0),
]


@pytest.mark.parametrize(("left", "right", "want"), [c[1:] for c in ORDER], ids=[c[0] for c in ORDER])
def test_order_by_progress(left: Progress, right: Progress, want: int) -> None:
    assert order_by_progress(left, right) == want


def _job(min_available: int, *statuses: TaskStatus) -> Job:
    res = ResourceIndex()
    job = Job(podgroup("pg").min(min_available).obj, res, queue="q1", priority=0)
    for i, s in enumerate(statuses):
        t = Task(pod(f"p{i}").req("1", "1G").group("pg").obj, res)
        t.status = s
        job.add_task(t)
    return job


R, P, A, S = TaskStatus.RUNNING, TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.SUCCEEDED
PROGRESS = [
    ("lost-a-pod-runs-below-min", (2, R, P), Progress.STALLED),
    ("bound-counts-as-running", (3, TaskStatus.BOUND, R, P), Progress.STALLED),
    ("nothing-runs-yet", (2, P, P), Progress.WAITING),
    ("allocated-this-session-is-not-stalled", (2, A, P), Progress.WAITING),
    ("whole-gang-runs", (2, R, R), Progress.READY),
    ("succeeded-count-for-ready", (2, S, R, P), Progress.READY),
    ("min-zero-is-ready", (0, P), Progress.READY),
]


@pytest.mark.parametrize(("shape", "want"), [c[1:] for c in PROGRESS], ids=[c[0] for c in PROGRESS])
def test_progress_of(shape: tuple[Any, ...], want: Progress) -> None:
    assert progress_of(_job(shape[0], *shape[1:])) == want


CONF = tiers_conf("enqueue, allocate, backfill", ["priority", "gang", "conformance"],
                  ["drf", "predicates", "proportion", "nodeorder"])


def test_freed_node_goes_to_the_stalled_gang_not_the_fresh_one() -> None:
    """`old` ran 2 of 2 pods and lost one with its node; the node is back, and `fresh` (same queue, same priority,
    ahead by name, drf share 0) waits for the same room: `old` is whole again in this session."""
    d = run(nodes=[node("n1").alloc("2", "4G"), node("n2").alloc("2", "4G")],
            queues=[queue("q1")],
            podgroups=[podgroup("old").min(2).queue("q1").phase("Running"),
                       podgroup("fresh").min(1).queue("q1").phase("Inqueue")],
            pods=[pod("old-0").req("2", "1G").group("old").on("n1"), pod("old-1").req("2", "1G").group("old"),
                  pod("fresh-0").req("2", "1G").group("fresh")],
            conf=CONF)
    assert d.bind_map() == {"c1/old-1": "n2"}
