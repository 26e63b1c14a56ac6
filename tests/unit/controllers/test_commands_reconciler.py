"""bus Commands: deleted first, then handed to the Job (inbox) or executed on the Queue."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lahar.controllers import commands
from lahar.controllers.context import Context, MemoryInbox, MemoryTimers
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store
from lahar.kube.resources import Registry
from tests.builders import vcjob

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
NS = "default"


def make_ctx() -> Context:
    store = Store(registry=Registry.of(resources.core()), clock=lambda: T0)
    return Context(client=MemoryClient.with_crds(store), clock=lambda: T0, inbox=MemoryInbox(),
                   timers=MemoryTimers(clock=lambda: T0))


def rt(ctx: Context, group: str, version: str, plural: str) -> Any:
    return ctx.client.registry.get(group, version, plural)


def cmds(ctx: Context) -> Any:
    return rt(ctx, "bus.volcano.sh", "v1alpha1", "commands")


def add_job(ctx: Context, name: str = "j1") -> dict:
    return ctx.client.create(rt(ctx, "batch.volcano.sh", "v1alpha1", "jobs"), vcjob(name, NS).build(), namespace=NS)


def add_queue(ctx: Context, name: str, state: str = "Open") -> dict:
    q_rt = rt(ctx, "scheduling.volcano.sh", "v1beta1", "queues")
    q = ctx.client.create(q_rt, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                 "metadata": {"name": name}, "spec": {"weight": 1, "parent": "root"}})
    q["status"] = {"state": state}
    return ctx.client.update_status(q_rt, q)


def add_command(ctx: Context, target: dict, action: str, name: str = "cmd1") -> dict:
    ref = {"apiVersion": target["apiVersion"], "kind": target["kind"], "name": target["metadata"]["name"],
           "uid": target["metadata"]["uid"], "controller": True}
    return ctx.client.create(cmds(ctx), {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                                         "metadata": {"name": name, "namespace": NS}, "target": ref,
                                         "action": action}, namespace=NS)


def remaining(ctx: Context) -> list[str]:
    return [c["metadata"]["name"] for c in ctx.client.list(cmds(ctx), namespace=NS)["items"]]


@pytest.mark.parametrize(("target", "expected"), [
    ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j"}, "Job"),
    ({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "q"}, "Queue"),
    ({"apiVersion": "batch/v1", "kind": "Job", "name": "j"}, None),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, None),
    ({}, None),
], ids=["vcjob", "queue", "batch-job", "deployment", "none"])
def test_target_kind(target: dict, expected: str | None) -> None:
    assert commands.target_kind({"target": target}) == expected


@pytest.mark.parametrize("action", ["AbortJob", "ResumeJob", "RestartJob", "TerminateJob", "CompleteJob"])
def test_job_command_is_deleted_then_handed_to_the_job(action: str) -> None:
    ctx = make_ctx()
    job = add_job(ctx)
    add_command(ctx, job, action)
    commands.reconcile(ctx, NS, "cmd1")
    assert remaining(ctx) == []
    assert ctx.inbox.peek("Job", NS, "j1") == [{"event": "CommandIssued", "action": action, "command": "cmd1"}]
    assert ctx.timers.due(T0) == [("Job", NS, "j1")]
    evs = ctx.client.list(rt(ctx, "", "v1", "events"), namespace=NS)["items"]
    assert [(e["reason"], e["message"], e["involvedObject"]["name"]) for e in evs] == [
        ("CommandIssued", f"Start to execute command {action}, and clean it up to make sure executed not more "
                          "than once.", "j1")]


def test_a_second_delivery_does_nothing() -> None:
    ctx = make_ctx()
    add_command(ctx, add_job(ctx), "AbortJob")
    commands.reconcile(ctx, NS, "cmd1")
    commands.reconcile(ctx, NS, "cmd1")
    assert len(ctx.inbox.peek("Job", NS, "j1")) == 1


@pytest.mark.parametrize(("state", "action", "expected"), [
    ("Open", "CloseQueue", "Closed"),
    ("Closed", "OpenQueue", "Open"),
    ("Open", "OpenQueue", "Open"),
], ids=["close", "open", "open-open"])
def test_queue_command_executes_on_the_queue(state: str, action: str, expected: str) -> None:
    ctx = make_ctx()
    add_queue(ctx, "root")
    q = add_queue(ctx, "q1", state)
    add_command(ctx, q, action)
    commands.reconcile(ctx, NS, "cmd1")
    assert remaining(ctx) == []
    got = ctx.client.get(rt(ctx, "scheduling.volcano.sh", "v1beta1", "queues"), "q1")
    assert got["status"]["state"] == expected
    assert ctx.inbox.peek("Queue", "", "q1") == []


def test_command_for_someone_else_is_left_alone() -> None:
    ctx = make_ctx()
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "uid": "u"}}
    add_command(ctx, dep, "Whatever")
    commands.reconcile(ctx, NS, "cmd1")
    assert remaining(ctx) == ["cmd1"]


def test_job_command_for_a_missing_job_is_still_consumed() -> None:
    ctx = make_ctx()
    ghost = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "ghost", "uid": "u"}}
    add_command(ctx, ghost, "AbortJob")
    commands.reconcile(ctx, NS, "cmd1")
    assert remaining(ctx) == []
    assert ctx.inbox.peek("Job", NS, "ghost")[0]["action"] == "AbortJob"
