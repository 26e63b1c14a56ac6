"""A worker dying inside a kill (RestartJob, AbortJob, ...), played on the in-memory cluster: the crash is injected at
our own boundary (the cluster client raises mid-way), then fresh reconciles must finish what the dead one started.

The restart's intent (phase Restarting, retryCount + 1, the new status.version) is stored before any pod goes, so
whatever the next reconcile sees — pods half deleted, the other pods finished meanwhile, its inbox not yet holding the
PodFailed — it continues the restart and never decides Failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lahar.controllers import _fanout, _job_state, jobs
from lahar.controllers.context import Context
from lahar.kube.apiserver.memory import MemoryClient
from tests.unit.controllers.test_job_reconciler import NS, World, vcjob

RESTART = [{"event": "PodFailed", "action": "RestartJob"}]


class Crash(Exception):
    """The process dying (SIGKILL) at this call: nothing after it runs."""


class Crashing:
    """The cluster client, raising `Crash` from the first call that `when(verb, plural, calls so far)` picks on (the
    process is dead: calls still in flight on other threads fail too)."""

    def __init__(self, inner: MemoryClient, when: Callable[[str, str, list[tuple[str, str]]], bool]) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.when = when
        self.calls: list[tuple[str, str]] = []
        self.fired = False

    def __getattr__(self, verb: str) -> Any:
        fn = getattr(self.inner, verb)

        def call(rt: Any = None, *args: Any, **kwargs: Any) -> Any:
            what = (verb, getattr(rt, "plural", ""))
            if self.fired or self.when(verb, what[1], self.calls):
                self.fired = True
                raise Crash(f"killed at {verb} {what[1]}")
            self.calls.append(what)
            return fn(rt, *args, **kwargs) if rt is not None else fn(*args, **kwargs)
        return call


def _nth_pod_delete(n: int) -> Callable[[str, str, list[tuple[str, str]]], bool]:
    return lambda verb, plural, calls: (verb, plural) == ("delete", "pods") and calls.count(("delete", "pods")) == n - 1


def _status_after_deletes(verb: str, plural: str, calls: list[tuple[str, str]]) -> bool:
    return (verb, plural) == ("update_status", "jobs") and ("delete", "pods") in calls


def _podgroup_delete(verb: str, plural: str, calls: list[tuple[str, str]]) -> bool:
    return (verb, plural) == ("delete", "podgroups")


CRASH_POINTS = {
    "before-any-pod-delete": _nth_pod_delete(1),
    "between-pod-deletes": _nth_pod_delete(2),
    "at-podgroup-delete": _podgroup_delete,
    "at-status-write-after-deletes": _status_after_deletes,
}


@pytest.fixture
def world() -> Any:
    w = World()
    yield w
    _fanout.shutdown()


def _crash_once(world: World, when: Callable[[str, str, list[tuple[str, str]]], bool]) -> None:
    """One reconcile on a client that dies at `when`; the world's own context is left as it was."""
    crashing = Crashing(world.client, when)
    ctx = Context(client=crashing, clock=world.clock, timers=world.timers, inbox=world.inbox,  # type: ignore[arg-type]
                  pod_concurrency=1)  # one call after another: the crash point is exact
    with pytest.raises(Crash):
        jobs.reconcile(ctx, NS, world.name)
    assert crashing.fired


def _finish_restart(world: World, phases: list[str]) -> None:
    """Reconcile (playing the scheduler and the kubelet) until the restarted job runs again."""
    for _ in range(6):
        world.reconcile()
        phases.append(world.phase())
        if world.podgroup() is not None and (world.podgroup().get("status") or {}).get("phase") != "Inqueue":
            world.enqueue()
        if world.phase() == "Running":
            return
        world.run_all()
    raise AssertionError(f"never ran again: {phases}")


@pytest.mark.parametrize("point", list(CRASH_POINTS), ids=list(CRASH_POINTS))
def test_restart_job_survives_a_crash_mid_kill(world: World, point: str) -> None:
    world.start(vcjob(policies=RESTART))
    world.pod_failed("job1-worker-0")
    _crash_once(world, CRASH_POINTS[point])
    status = world.status()
    assert (status["state"]["phase"], status["retryCount"], status["version"]) == ("Restarting", 1, 1)
    assert world.inbox.peek("Job", NS, "job1"), "the PodFailed is acked only once the restart is done"
    phases: list[str] = []
    _finish_restart(world, phases)
    status = world.status()
    assert "Failed" not in phases and (status["retryCount"], status["version"]) == (1, 1), phases
    pods = world.pods()
    assert [p["metadata"]["name"] for p in pods] == ["job1-worker-0", "job1-worker-1"]
    assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods} == {"1"}
    assert world.inbox.peek("Job", NS, "job1") == []


def test_a_reconcile_blind_to_the_pod_failed_does_not_fail_a_half_restarted_job(world: World) -> None:
    """The e2e symptom: the worker dies before deleting anything, the job's other pod finishes meanwhile, and a
    reconcile whose inbox view predates the PodFailed (another worker's) reads one Failed and one Succeeded pod.
    Without the stored intent the job was Running, and the Running rule made it Failed with retryCount 0."""
    world.start(vcjob(policies=RESTART))
    world.pod_failed("job1-worker-0")
    _crash_once(world, _nth_pod_delete(1))
    world.set_phase("job1-worker-1", "Succeeded", 0)
    items = world.inbox.peek("Job", NS, "job1")
    world.inbox.ack("Job", NS, "job1", len(items))
    world.reconcile()  # sees no PodFailed
    assert (world.phase(), world.status()["retryCount"]) == ("Restarting", 1)
    assert world.pods() == []  # it finished the kill: the old-version pods are gone
    for item in items:
        world.push(item)
    phases: list[str] = []
    _finish_restart(world, phases)
    assert "Failed" not in phases and world.status()["retryCount"] == 1, phases


@pytest.mark.parametrize(("action", "phase", "final"), [
    ("AbortJob", "Aborting", "Aborted"),
    ("TerminateJob", "Terminating", "Terminated"),
    ("CompleteJob", "Completing", "Completed"),
], ids=["abort", "terminate", "complete"])
def test_other_kills_store_their_phase_before_deleting(world: World, action: str, phase: str, final: str) -> None:
    world.start(vcjob())
    world.push({"event": "CommandIssued", "action": action, "command": "c-1"})
    _crash_once(world, _nth_pod_delete(2))
    assert (world.phase(), world.status()["version"]) == (phase, 1)
    world.reconcile()  # the replayed command in the new phase finishes the kill
    world.reconcile()
    assert world.phase() == final and world.pods() == []
    assert world.status()["retryCount"] == 0


def test_a_normal_restart_writes_its_intent_then_its_outcome(world: World) -> None:
    world.start(vcjob(policies=RESTART))
    world.pod_failed("job1-worker-1")
    before = world.job()["metadata"]["resourceVersion"]
    world.reconcile()
    status = world.status()
    assert (status["state"]["phase"], status["retryCount"], status["version"]) == ("Restarting", 1, 1)
    assert [c["status"] for c in status["conditions"]].count("Restarting") == 1
    assert world.job()["metadata"]["resourceVersion"] != before


# --- the pure parts -------------------------------------------------------------------------------------------------

S = _job_state


@pytest.mark.parametrize(("step", "phase", "want"), [
    (S.Step(S.Op.KILL_JOB, S.RETAIN_NONE, phase="Restarting", retry=1), "Running", True),
    (S.Step(S.Op.KILL_TARGET, phase="Restarting", retry=1), "Pending", True),
    (S.Step(S.Op.KILL_JOB, S.RETAIN_SOFT, phase="Aborting"), "", True),
    (S.Step(S.Op.KILL_JOB, S.RETAIN_SOFT, phase="Restarting"), "Aborted", True),
    (S.Step(S.Op.KILL_JOB, S.RETAIN_NONE, rule=S.Rule.RESTARTING), "Restarting", False),
    (S.Step(S.Op.KILL_JOB, S.RETAIN_SOFT, rule=S.Rule.ABORTING), "Aborting", False),
    (S.Step(S.Op.SYNC, rule=S.Rule.RUNNING), "Running", False),
    (S.Step(S.Op.KILL_JOB, S.RETAIN_SOFT, phase="Pending"), "", False),
], ids=["restart-job", "restart-task", "abort-new-job", "resume", "restarting-kill", "aborting-kill", "sync",
        "same-phase"])
def test_stores_intent(step: S.Step, phase: str, want: bool) -> None:
    assert S.stores_intent(step, phase) is want


def _pod(name: str, version: int | str | None, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": {} if version is None
                            else {"volcano.sh/job-version": str(version)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize(("pods", "retry", "max_retry", "want"), [
    ([_pod("a", 0), _pod("b", 0, "Failed")], 1, 3, ["a", "b"]),
    ([_pod("a", 1), _pod("b", 0, "Pending")], 1, 3, ["b"]),
    ([_pod("a", 0, deleting=True)], 1, 3, []),
    ([_pod("a", 0, "Succeeded"), _pod("b", 0, "Failed"), _pod("c", 0)], 3, 3, ["c"]),
    ([_pod("a", 0, "Succeeded"), _pod("b", 0)], 0, 3, ["b"]),
    ([_pod("a", None), _pod("b", "x")], 1, 3, []),
], ids=["restart-kills-all-old", "new-version-kept", "already-deleting", "last-retry-keeps-finished",
        "resume-keeps-finished", "no-or-bad-version-annotation"])
def test_unfinished_kill(pods: list[dict[str, Any]], retry: int, max_retry: int, want: list[str]) -> None:
    got = jobs.unfinished_kill(pods, version=1, retry_count=retry, max_retry=max_retry)
    assert [p["metadata"]["name"] for p in got] == want
