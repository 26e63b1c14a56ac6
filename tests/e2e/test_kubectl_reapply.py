"""Beyond Volcano, through the real kubectl and lahar's webhooks over HTTPS: re-applying a Job manifest (`kubectl apply`
twice, `kubectl diff`, scaling by editing the file) and a Queue applied in the same file as its Job.

Uses the admission fixture of `test_admission_kubectl` (its own devcluster, Volcano's CRDs, lahar's webhook).
"""

from __future__ import annotations

import uuid

import yaml

from tests.e2e import test_admission_kubectl as base
from tests.e2e.test_admission_kubectl import Admission, denial, queue, vcjob

pytestmark = base.pytestmark
admission = base.admission          # the same module-scoped fixture: a devcluster of this module's own


def test_reapplying_an_unchanged_job_is_a_no_op(admission: Admission, tmp_path) -> None:
    kubectl, ns = admission.kubectl, admission.ns
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(vcjob("again")))
    assert "job.batch.volcano.sh/again created" in kubectl("apply", "-n", ns, "-f", str(manifest)).stdout
    diff = kubectl("diff", "-n", ns, "-f", str(manifest), check=False)
    assert (diff.returncode, diff.stdout, diff.stderr) == (0, "", "")   # no difference, no denial
    again = kubectl("apply", "-n", ns, "-f", str(manifest)).stdout
    assert "job.batch.volcano.sh/again" in again, again
    stored = kubectl.json("get", "vcjob", "again", "-n", ns)
    assert stored["metadata"]["generation"] == 1                      # a no-op: the spec did not change
    assert stored["spec"]["tasks"][0]["maxRetry"] == 3 and stored["spec"]["tasks"][0]["minAvailable"] == 1


def test_scaling_by_reapplying_the_edited_manifest(admission: Admission, tmp_path) -> None:
    kubectl, ns = admission.kubectl, admission.ns
    job = vcjob("scaled")
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    kubectl("apply", "-n", ns, "-f", str(manifest))
    job["spec"]["tasks"][0]["replicas"] = 3
    manifest.write_text(yaml.safe_dump(job))
    assert "job.batch.volcano.sh/scaled configured" in kubectl("apply", "-n", ns, "-f", str(manifest)).stdout
    assert kubectl.json("get", "vcjob", "scaled", "-n", ns)["spec"]["tasks"][0]["replicas"] == 3
    job["spec"]["queue"] = "root"                           # still refused: Volcano's message and the field
    manifest.write_text(yaml.safe_dump(job))
    message = denial(kubectl("apply", "-n", ns, "-f", str(manifest), check=False))
    assert "job updates may not change fields other than" in message and "spec.queue changed" in message, message


def test_a_new_queue_and_its_job_in_one_file(admission: Admission, tmp_path) -> None:
    kubectl, ns = admission.kubectl, admission.ns
    name = f"team-{uuid.uuid4().hex[:6]}"
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump_all([queue(name), vcjob("team-job", queue=name)]))
    out = kubectl("apply", "-n", ns, "-f", str(team)).stdout
    assert f"queue.scheduling.volcano.sh/{name} created" in out and "job.batch.volcano.sh/team-job created" in out
    closed = f"closed-{uuid.uuid4().hex[:6]}"
    kubectl.apply(queue(closed))
    kubectl("patch", "queue", closed, "--subresource=status", "--type=merge", "-p", '{"status":{"state":"Closed"}}')
    message = denial(kubectl.apply(vcjob("to-closed", queue=closed), ns, check=False))
    assert f"queue `{closed}` status is `Closed`" in message, message
