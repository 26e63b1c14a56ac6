"""Controller flows end to end, beyond `test_controllers_celery.py` (whose stack and helpers this reuses): devcluster
with simulated kubelets, a real redis-server, `lahar worker`, `lahar dispatch` and `lahar beat` as subprocesses.

Flows: `lahar job suspend` → Aborted and `lahar job resume` → Running again without using a retry (volcano#3067
fixed); a CronJob on `*/1 * * * *` creates the job of its schedule and prunes its history to
`successfulJobsHistoryLimit`. The test plays the scheduler (PodGroup → Inqueue, binds) as the other module does.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import simulated_job
from tests.integration.test_controllers_celery import (
    CRDS,
    FakeScheduler,
    Stack,
    submit,
    wait_for,
    watch_phases,
)

pytestmark = pytest.mark.integration

REDIS_DB = 4  # test_controllers_celery's stack uses 3 on the same session server


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[Stack]:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    s = Stack(tmp_path_factory.mktemp("flows"), redis_server)
    s.redis_url = s.redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}"
    s.env["REDIS_URL"] = s.redis_url
    try:
        s.start_worker("worker")
        s.start("dispatch", "dispatch")
        s.start("beat", "beat")
        with FakeScheduler(s.client, s.cluster.node_names):
            yield s
    finally:
        s.close()


def lahar(stack: Stack, *args: str) -> str:
    """Run the CLI against the stack's cluster; its stdout (a failure shows stderr)."""
    done = subprocess.run([sys.executable, "-m", "lahar.cli", *args], env=stack.env, cwd=stack.tmp,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"lahar {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def running_pods(stack: Stack, ns: str) -> list[dict[str, Any]]:
    return [p for p in stack.pods(ns)
            if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


# --- suspend / resume ------------------------------------------------------------------------------------------


def test_suspend_aborts_and_resume_runs_again_without_a_retry(stack: Stack) -> None:
    ns = stack.namespace()
    tasks = {"worker": 2}
    # maxRetry 1: had the resume consumed a retry (Volcano's #3067), the job would go Failed instead of Running
    submit(stack, ns, simulated_job("j", tasks=tasks, duration="600s", max_retry=1))
    watch_phases(stack, ns, "j", "Running")
    wait_for("both pods to run", lambda: len(running_pods(stack, ns)) == 2)
    first_uids = {p["metadata"]["uid"] for p in stack.pods(ns)}
    before = stack.job(ns, "j")["status"]

    assert "suspend job j successfully" in lahar(stack, "job", "suspend", "j", "-n", ns)
    phases = watch_phases(stack, ns, "j", "Aborted")
    assert phases[-1] == "Aborted" and "Running" not in phases[1:]
    wait_for("the pods to be gone", lambda: not stack.pods(ns))
    aborted = stack.job(ns, "j")["status"]
    assert aborted.get("retryCount", 0) == before.get("retryCount", 0) == 0

    assert "resume job j successfully" in lahar(stack, "job", "resume", "-N", "j", "-n", ns)
    phases = watch_phases(stack, ns, "j", "Running")
    assert "Failed" not in phases
    wait_for("both pods to run again", lambda: len(running_pods(stack, ns)) == 2)
    resumed = wait_for("the status to count both", lambda: (st := stack.job(ns, "j")["status"]).get("running") == 2
                       and st)
    assert resumed.get("retryCount", 0) == 0 and resumed["state"]["phase"] == "Running"
    assert sorted(p["metadata"]["name"] for p in stack.pods(ns)) == ["j-worker-0", "j-worker-1"]
    assert not {p["metadata"]["uid"] for p in stack.pods(ns)} & first_uids  # new pods, same names
    commands = stack.client.list(stack.rt("bus.volcano.sh", "v1alpha1", "commands"), namespace=ns)["items"]
    assert commands == []  # each Command is deleted by the controller that acted on it
    assert "j" in lahar(stack, "job", "list", "-n", ns)


# --- CronJob ---------------------------------------------------------------------------------------------------


def cronjob(name: str, *, history: int) -> dict[str, Any]:
    task = simulated_job("unused", tasks={"t": 1}, duration="1s")["spec"]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "*/1 * * * *", "suspend": True, "concurrencyPolicy": "Allow",
                     "successfulJobsHistoryLimit": history, "failedJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": task}}}


def _rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_cronjob_creates_its_job_on_schedule_and_prunes_history(stack: Stack) -> None:
    from lahar.controllers import cronjobs

    ns = stack.namespace()
    cj_rt = stack.rt("batch.volcano.sh", "v1alpha1", "cronjobs")
    job_rt = stack.rt("batch.volcano.sh", "v1alpha1", "jobs")
    cj = stack.client.create(cj_rt, cronjob("cj", history=1), namespace=ns)
    uid = cj["metadata"]["uid"]

    def owned() -> dict[str, dict[str, Any]]:
        return {j["metadata"]["name"]: j for j in stack.client.list(job_rt, namespace=ns)["items"]
                if any(r.get("uid") == uid and r.get("controller") for r in j["metadata"].get("ownerReferences") or [])}

    def phase(job: dict[str, Any]) -> str:
        return ((job.get("status") or {}).get("state") or {}).get("phase") or ""

    # the history a minute-by-minute schedule would have left 10 and 9 minutes ago (a test cannot wait minutes)
    minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    seeded = []
    for ago in (10, 9):
        body = cronjobs.job_from_template(cj, minute - dt.timedelta(minutes=ago), dt.UTC)
        seeded.append(stack.client.create(job_rt, body, namespace=ns)["metadata"]["name"])
    # both complete; the suspended CronJob still keeps only the newest successful one
    wait_for("the older seeded job to be pruned", lambda: list(owned()) == [seeded[1]]
             and phase(owned()[seeded[1]]) == "Completed", timeout=90)

    # the controller last scheduled 3 minutes ago; resumed now, it creates the job of the latest minute at once
    stack.client.patch(cj_rt, "cj", {"status": {"lastScheduleTime": _rfc3339(minute - dt.timedelta(minutes=3))}},
                       namespace=ns, patch_type="merge", subresource="status")
    resumed_at = dt.datetime.now(dt.UTC)
    stack.client.patch(cj_rt, "cj", {"spec": {"suspend": False}}, namespace=ns, patch_type="merge")
    created = wait_for("the scheduled job", lambda: [n for n in owned() if n not in seeded])
    name = created[0]
    job = owned()[name]
    stamp = job["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]
    scheduled = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert scheduled.second == 0 and resumed_at - dt.timedelta(minutes=1) < scheduled <= dt.datetime.now(dt.UTC)
    assert name == f"cj-{int(scheduled.timestamp()) // 60}"
    assert job["spec"]["tasks"][0]["name"] == "t"

    def pruned() -> bool:
        left = owned()
        return len(left) == 1 and not set(left) & set(seeded) and phase(next(iter(left.values()))) == "Completed"

    wait_for("the scheduled job to complete and the history to be pruned to it", pruned, timeout=90)
    (survivor,) = owned()
    assert survivor == name or survivor > name  # a later minute's job may have replaced it, never a seeded one
    # the status follows the Jobs one reconcile later; a new minute's Job (schedule "* * * * *") may be active by then
    def settled() -> dict[str, Any] | None:
        st = stack.client.get(cj_rt, "cj", namespace=ns)["status"]
        jobs = owned()
        active = [a["name"] for a in st.get("active") or ()]
        return st if all(n in jobs and phase(jobs[n]) != "Completed" for n in active) else None

    status = wait_for("the CronJob's status to list no finished Job as active", settled, timeout=30)
    assert status["lastScheduleTime"] >= stamp and status.get("lastSuccessfulTime")
    assert name not in [a["name"] for a in status.get("active") or ()]

    def job_names_of_pods() -> set[str]:
        return {(p["metadata"].get("labels") or {}).get("volcano.sh/job-name", "") for p in stack.pods(ns)}

    wait_for("the pruned jobs' pods to be collected", lambda: not job_names_of_pods() & set(seeded))
