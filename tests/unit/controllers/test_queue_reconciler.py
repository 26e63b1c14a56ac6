"""The Queue state machine, status counts and hierarchy (Volcano queue controller + queue/state/*_test shapes)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import queues
from lahar.controllers.context import Context
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"


def make_ctx() -> Context:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    return Context(client=MemoryClient.with_crds(store), clock=lambda: T0)


def qrt(ctx: Context) -> Any:
    return ctx.client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")


def pgrt(ctx: Context) -> Any:
    return ctx.client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")


def add_queue(ctx: Context, name: str, *, state: str | None = None, parent: str | None = None,
              annotations: dict | None = None) -> dict:
    spec: dict[str, Any] = {"weight": 1}
    if parent:
        spec["parent"] = parent
    q = ctx.client.create(qrt(ctx), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                     "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec})
    if state:
        q["status"] = {"state": state}
        q = ctx.client.update_status(qrt(ctx), q)
    return q


def add_pg(ctx: Context, name: str, queue: str, phase: str = "Pending", namespace: str = "default") -> None:
    ctx.client.create(pgrt(ctx), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                  "metadata": {"name": name, "namespace": namespace},
                                  "spec": {"minMember": 1, "queue": queue}, "status": {"phase": phase}},
                      namespace=namespace)


def get(ctx: Context, name: str) -> dict:
    return ctx.client.get(qrt(ctx), name)


def state(ctx: Context, name: str) -> str:
    return (get(ctx, name).get("status") or {}).get("state", "")


def reasons(ctx: Context, name: str) -> list[tuple[str, str, str]]:
    evs = ctx.client.list(ctx.client.registry.get("", "v1", "events"), namespace="default")["items"]
    return sorted((e["type"], e["reason"], e["message"]) for e in evs if e["involvedObject"]["name"] == name)


# --- the pure state table (queue/state/{open,closed,closing,unknown}.go) -----------------------------------------

STATE_TABLE = [
    # current, action, podgroups, expected
    ("Open", "OpenQueue", 0, "Open"),
    ("Open", "CloseQueue", 0, "Closed"),
    ("Open", "CloseQueue", 2, "Closing"),
    ("Open", "SyncQueue", 2, "Open"),
    ("", "SyncQueue", 0, "Open"),
    (None, "CloseQueue", 1, "Closing"),
    ("Closing", "OpenQueue", 1, "Open"),
    ("Closing", "CloseQueue", 1, "Closing"),
    ("Closing", "CloseQueue", 0, "Closed"),
    ("Closing", "SyncQueue", 1, "Closing"),
    ("Closing", "SyncQueue", 0, "Closed"),
    ("Closed", "OpenQueue", 0, "Open"),
    ("Closed", "CloseQueue", 3, "Closed"),
    ("Closed", "SyncQueue", 3, "Closed"),
    ("Unknown", "OpenQueue", 0, "Open"),
    ("Unknown", "CloseQueue", 0, "Closed"),
    ("Unknown", "CloseQueue", 1, "Closing"),
    ("Unknown", "SyncQueue", 0, "Unknown"),
]


@pytest.mark.parametrize(("current", "action", "podgroups", "expected"), STATE_TABLE,
                         ids=[f"{c or 'empty'}-{a}-{n}pg" for c, a, n, _ in STATE_TABLE])
def test_next_state(current: str | None, action: str, podgroups: int, expected: str) -> None:
    assert queues.next_state(current, action, podgroups) == expected


@pytest.mark.parametrize(("queue_state", "closed_by_parent", "parent_state", "expected"), [
    ("Open", None, "Closed", "CloseQueue"),
    ("Open", None, "Closing", "CloseQueue"),
    ("Closed", "true", "Open", "OpenQueue"),
    ("Closing", "true", "Open", "OpenQueue"),
    ("Closed", "false", "Open", None),
    ("Closed", None, "Closed", None),
    ("Open", None, "Open", None),
], ids=["parent-closed", "parent-closing", "reopen-closed", "reopen-closing", "closed-by-user-stays",
        "both-closed", "both-open"])
def test_hierarchy_action(queue_state: str, closed_by_parent: str | None, parent_state: str,
                          expected: str | None) -> None:
    ann = {CLOSED_BY_PARENT: closed_by_parent} if closed_by_parent else {}
    q = {"metadata": {"name": "c", "annotations": ann}, "status": {"state": queue_state}}
    assert queues.hierarchy_action(q, {"status": {"state": parent_state}}) == expected


def test_counts_by_phase() -> None:
    pgs = [{"status": {"phase": p}} for p in ("Pending", "Pending", "Running", "Inqueue", "Unknown", "Completed")]
    assert queues.counts(pgs) == {"pending": 2, "running": 1, "inqueue": 1, "unknown": 1, "completed": 1}


# --- reconcile ----------------------------------------------------------------------------------------------------


def test_sync_writes_counts_state_and_defaults_parent() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "q1")
    add_pg(ctx, "a", "q1", "Pending")
    add_pg(ctx, "b", "q1", "Running")
    add_pg(ctx, "c", "q1", "Running", namespace="kube-system")
    add_pg(ctx, "d", "other", "Running")
    assert queues.reconcile(ctx, "", "q1").requeue_after is None
    q = get(ctx, "q1")
    assert q["spec"]["parent"] == "root"
    assert q["status"] == {"state": "Open", "pending": 1, "running": 2}
    rv = q["metadata"]["resourceVersion"]
    queues.reconcile(ctx, "", "q1")
    assert get(ctx, "q1")["metadata"]["resourceVersion"] == rv  # nothing changed: no write


def test_podgroups_without_queue_count_for_default() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "default", parent="root")
    ctx.client.create(pgrt(ctx), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                  "metadata": {"name": "x", "namespace": "default"}, "spec": {"minMember": 1},
                                  "status": {"phase": "Inqueue"}}, namespace="default")
    queues.reconcile(ctx, "", "default")
    assert get(ctx, "default")["status"]["inqueue"] == 1


def test_close_with_podgroups_is_closing_until_they_are_gone() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "q1", state="Open", parent="root")
    add_pg(ctx, "a", "q1", "Running")
    result = queues.execute(ctx, "q1", "CloseQueue")
    assert state(ctx, "q1") == "Closing"
    assert result.requeue_after == queues.CLOSING_POLL_SECONDS
    assert ("Normal", "CloseQueue", "Close queue succeed") in reasons(ctx, "q1")
    assert queues.reconcile(ctx, "", "q1").requeue_after == queues.CLOSING_POLL_SECONDS
    ctx.client.delete(pgrt(ctx), "a", namespace="default")
    assert queues.reconcile(ctx, "", "q1").requeue_after is None
    assert state(ctx, "q1") == "Closed"


def test_open_closed_queue_records_event_and_marks_not_closed_by_parent() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "q1", state="Closed", parent="root")
    queues.execute(ctx, "q1", "OpenQueue")
    q = get(ctx, "q1")
    assert q["status"]["state"] == "Open"
    assert q["metadata"]["annotations"][CLOSED_BY_PARENT] == "false"
    assert reasons(ctx, "q1") == [("Normal", "OpenQueue", "Open queue succeed")]


def test_closing_parent_closes_open_children_and_marks_them() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "parent", state="Open", parent="root")
    add_queue(ctx, "child", state="Open", parent="parent")
    add_queue(ctx, "grandchild", state="Open", parent="child")
    add_queue(ctx, "closed-child", state="Closed", parent="parent")
    add_pg(ctx, "busy", "grandchild", "Running")
    queues.execute(ctx, "parent", "CloseQueue")
    assert [state(ctx, n) for n in ("parent", "child", "grandchild", "closed-child")] == [
        "Closed", "Closed", "Closing", "Closed"]
    assert get(ctx, "child")["metadata"]["annotations"][CLOSED_BY_PARENT] == "true"
    assert get(ctx, "grandchild")["metadata"]["annotations"][CLOSED_BY_PARENT] == "true"
    assert CLOSED_BY_PARENT not in (get(ctx, "closed-child")["metadata"].get("annotations") or {})

    queues.execute(ctx, "parent", "OpenQueue")
    assert [state(ctx, n) for n in ("parent", "child", "grandchild", "closed-child")] == [
        "Open", "Open", "Open", "Closed"]  # a queue the user closed stays closed


def test_child_cannot_open_under_closed_parent() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "parent", state="Closed", parent="root")
    add_queue(ctx, "child", state="Closed", parent="parent")
    queues.execute(ctx, "child", "OpenQueue")
    assert state(ctx, "child") == "Closed"
    assert reasons(ctx, "child") == [("Warning", "OpenQueue",
                                      "Failed to open queue child because its parent queue parent is closing or "
                                      "closed. Open the parent queue first.")]


def test_sync_closes_an_open_child_of_a_closed_parent_and_reopens_it_later() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    add_queue(ctx, "parent", state="Closed", parent="root")
    add_queue(ctx, "child", parent="parent")  # created under a closed parent
    queues.reconcile(ctx, "", "child")
    assert state(ctx, "child") == "Closed"
    assert get(ctx, "child")["metadata"]["annotations"][CLOSED_BY_PARENT] == "true"
    p = get(ctx, "parent")
    p["status"]["state"] = "Open"
    ctx.client.update_status(qrt(ctx), p)
    queues.reconcile(ctx, "", "child")
    assert state(ctx, "child") == "Open"


def test_root_cannot_be_closed() -> None:
    ctx = make_ctx()
    add_queue(ctx, "root", state="Open")
    queues.execute(ctx, "root", "CloseQueue")
    assert state(ctx, "root") == "Open"
    assert ("Warning", "CloseQueue", "Root queue cannot be closed") in reasons(ctx, "root")


def test_missing_queue_is_done() -> None:
    assert queues.reconcile(make_ctx(), "", "nope").requeue_after is None


def test_parent_cycle_terminates() -> None:
    ctx = make_ctx()
    add_queue(ctx, "a", state="Open", parent="b")
    add_queue(ctx, "b", state="Open", parent="a")
    queues.execute(ctx, "a", "CloseQueue")
    assert {state(ctx, "a"), state(ctx, "b")} == {"Closed"}


def test_ensure_builtin_queues_is_idempotent() -> None:
    ctx = make_ctx()
    assert queues.ensure_builtin_queues(ctx) == ["root", "default"]
    assert queues.ensure_builtin_queues(ctx) == []
    root, default = get(ctx, "root"), get(ctx, "default")
    assert root["spec"] == {"weight": 1, "reclaimable": False}
    assert default["spec"] == {"weight": 1, "reclaimable": True, "parent": "root"}
    assert root["status"]["state"] == default["status"]["state"] == "Open"
