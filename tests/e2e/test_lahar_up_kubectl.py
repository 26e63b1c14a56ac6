"""Issue 13 on `lahar up`, as a user meets it with the real kubectl: a new Queue and its Job in one file, the same
file applied again, a Job applied server-side twice (lahar's webhooks in the path), the job's pod logs,
`kubectl explain` on built-in kinds.

Uses `Up` of `test_lahar_up` (the whole stack in its own process on a temporary data dir).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e import test_lahar_up as base
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark
up = base.up


TEAM = [
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team"},
     "spec": {"weight": 1}},
    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "team-job"},
     "spec": {"queue": "team", "tasks": [{"name": "worker", "replicas": 2, "template": {
         "metadata": {"annotations": {"lahar.sh/sim-duration": "2s"}},
         "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                            "resources": {"requests": {"cpu": "1"}}}]}}}]}},
]


def test_queue_and_job_in_one_file_reapplied_logged_and_explained(up: Up, tmp_path: Path) -> None:
    up.start()
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump_all(TEAM))
    out = up.kubectl("apply", "-f", str(team)).stdout
    assert "queue.scheduling.volcano.sh/team created" in out and "job.batch.volcano.sh/team-job created" in out, out
    again = up.kubectl("apply", "-f", str(team))                    # the same file again: nothing refused
    assert "job.batch.volcano.sh/team-job" in again.stdout and "denied" not in again.stderr, again.stderr

    wait_for("team-job to be Completed",
             lambda: up.jsonpath("vcjob", "team-job", "{.status.state.phase}") == "Completed", 90)
    assert up.jsonpath("queue", "team", "{.status.state}") == "Open"
    logs = up.kubectl("logs", "team-job-worker-0").stdout
    assert 'lahar simulated container "main" (image busybox) started on node' in logs, logs
    assert logs.endswith("exited with code 0 (Completed)\n"), logs
    assert up.kubectl("logs", "team-job-worker-1", "--tail=1").stdout == "exited with code 0 (Completed)\n"

    # a Job applied server-side, twice, through lahar's mutating and validating webhooks: the second is a no-op
    ssa_file = tmp_path / "ssa-job.yaml"
    ssa_job = {**TEAM[1], "metadata": {"name": "ssa-job"}}
    ssa_file.write_text(yaml.safe_dump(ssa_job))
    first = up.kubectl("apply", "--server-side", "-f", str(ssa_file))
    assert "job.batch.volcano.sh/ssa-job serverside-applied" in first.stdout, first.stderr
    generation = up.jsonpath("vcjob", "ssa-job", "{.metadata.generation}")
    second = up.kubectl("apply", "--server-side", "-f", str(ssa_file))
    assert "job.batch.volcano.sh/ssa-job serverside-applied" in second.stdout, second.stderr
    assert up.jsonpath("vcjob", "ssa-job", "{.metadata.generation}") == generation
    assert "kubectl" in up.jsonpath("vcjob", "ssa-job", "{.metadata.managedFields[*].manager}").split()
    assert "List of containers belonging to the pod" in up.kubectl("explain", "pod.spec.containers").stdout
    assert up.interrupt() == 0, up.output()
