"""`lahar admit`: manifests through mutate + validate offline (text and JSON output, exit codes, --state), and
single AdmissionReviews answered by one path or the whole chain."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.webhooks import review
from tests import builders
from tests.builders import pod_template, vcjob

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"


def job(name: str, *, queue: str | None = None, replicas: int = 2, min_available: int | None = None) -> dict:
    template = pod_template(restart_policy="OnFailure", requests={"cpu": "1"})
    j = vcjob(name, namespace=None).task("worker", replicas, template=template)
    if queue is not None:
        j.queue(queue)
    if min_available is not None:
        j.min_available(min_available)
    return j.build()


def queue(name: str, *, parent: str | None = None, state: str = "Open") -> dict:
    q = builders.queue(name).state(state)
    return (q.parent(parent) if parent else q).bare(status=True)


def write(path: Path, *objects: dict) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def run(*args: str):
    return CliRunner().invoke(app, ["admit", *args])


@pytest.fixture
def state(tmp_path) -> Path:
    return write(tmp_path / "state.yaml", queue("parent"), queue("leaf", parent="parent"),
                 queue("closed", state="Closed"))


def test_manifests_text_output_and_exit_code(tmp_path, state):
    manifests = write(tmp_path / "jobs.yaml", job("ok"), job("to-leaf", queue="leaf"), job("to-parent", queue="parent"),
                      job("to-missing", queue="missing"), job("too-few", replicas=1, min_available=3),
                      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}})
    res = run("-f", str(manifests), "--state", str(state))
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "Job/ok: allowed"
    assert lines[1] == "Job/to-leaf: allowed"
    assert lines[2].startswith("Job/to-parent: denied: ") and "can only submit job to leaf queue" in lines[2]
    assert lines[3].startswith("Job/to-missing: denied: ") and "unable to find job queue" in lines[3]
    assert lines[4].startswith("Job/too-few: denied: ") and "'minAvailable'" in lines[4]
    assert lines[5] == "ConfigMap/cfg: allowed"


def test_all_allowed_exits_zero_and_builtin_queues_exist(tmp_path):
    res = run("-f", str(write(tmp_path / "ok.yaml", job("a"), job("b", queue="default"))))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["Job/a: allowed", "Job/b: allowed"]


def test_root_queue_is_refused_without_state(tmp_path):
    res = run("-f", str(write(tmp_path / "root.yaml", job("r", queue="root"))))
    assert res.exit_code == 1
    assert "root queue" in res.stdout


def test_objects_earlier_in_the_manifests_are_visible_later(tmp_path):
    res = run("-f", str(write(tmp_path / "both.yaml", queue("team"), job("j", queue="team"))))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["Queue/team: allowed", "Job/j: allowed"]


def test_json_output_carries_patches(tmp_path):
    res = run("-f", str(write(tmp_path / "j.yaml", job("j"))), "-o", "json")
    assert res.exit_code == 0, res.output
    [result] = json.loads(res.stdout)
    assert (result["object"], result["namespace"], result["allowed"]) == ("Job/j", "default", True)
    paths = {op["path"] for op in result["patch"]}
    assert "/spec/queue" in paths, result["patch"]


def test_directory_and_list_documents(tmp_path):
    (tmp_path / "m").mkdir()
    write(tmp_path / "m" / "a.yaml", {"apiVersion": "v1", "kind": "List", "items": [job("x"), job("y")]})
    (tmp_path / "m" / "notes.txt").write_text("not a manifest")
    res = run("-f", str(tmp_path / "m"))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["Job/x: allowed", "Job/y: allowed"]


@pytest.mark.parametrize(("name", "message"), [
    ("duplicatedTaskName-webhook-deny.yaml", "duplicated task name task-1;"),
    ("minAvailable-webhook-deny.yaml", "job 'minAvailable' should not be greater than total replicas in tasks;"),
    ("duplicatedPolicyEvent-webhook-deny.yaml", "duplicate event PodFailed  across different policy"),
], ids=["duplicated-task", "min-available", "duplicated-policy-event"])
def test_volcano_invalid_examples_are_denied_with_volcanos_messages(name, message):
    path = EXAMPLES / "invalid_jobs" / name
    if not path.exists():
        pytest.skip("Volcano's example manifests are not available")
    res = run("-f", str(path))
    assert res.exit_code == 1
    assert "Job/test-job-webhook-disallow: denied: " in res.stdout
    assert message in res.stdout


# -- --review --------------------------------------------------------------------------------------------------------


def review_file(tmp_path: Path, obj: dict, *, resource: str = "jobs", operation: str = "CREATE",
                old: dict | None = None, api_version: str = review.V1) -> Path:
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": "team-a"}}
    req = review.request_for(obj, resource=resource, operation=operation, old_object=old, uid="uid-7")
    path = tmp_path / "review.json"
    path.write_text(json.dumps(review.to_review(req, api_version=api_version)))
    return path


def test_review_whole_chain_mutates_then_validates(tmp_path):
    res = run("--review", str(review_file(tmp_path, job("j"), api_version=review.V1BETA1)))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["apiVersion"] == review.V1BETA1 and out["response"]["uid"] == "uid-7"
    assert out["response"]["allowed"] is True and out["response"]["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(out["response"]["patch"]))
    assert {"op": "add", "path": "/spec/queue", "value": "default"} in ops


def test_review_one_path_only(tmp_path, state):
    path = review_file(tmp_path, job("j", queue="parent"))
    res = run("--review", str(path), "--path", "/jobs/validate", "--state", str(state))
    assert res.exit_code == 1
    out = json.loads(res.stdout)["response"]
    assert out["allowed"] is False and "can only submit job to leaf queue" in out["status"]["message"]
    assert "patch" not in out
    res = run("--review", str(path), "--path", "/jobs/mutate")
    assert res.exit_code == 0
    ops = json.loads(base64.b64decode(json.loads(res.stdout)["response"]["patch"]))
    assert "/spec/queue" not in {op["path"] for op in ops}, "the queue was set: only other defaults"


def test_review_update_runs_only_webhooks_registered_for_update(tmp_path):
    old = job("j", queue="default", replicas=2)
    new = job("j", queue="other", replicas=2)
    res = run("--review", str(review_file(tmp_path, new, operation="UPDATE", old=old)))
    assert res.exit_code == 1
    out = json.loads(res.stdout)["response"]
    assert "job updates may not change fields other than" in out["status"]["message"]


@pytest.mark.parametrize(("content", "message"), [
    ('{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', "request.uid is required"),
    ("[1, 2", "error: "),
], ids=["no-uid", "not-json"])
def test_bad_review_exits_2(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    res = run("--review", str(path))
    assert res.exit_code == 2
    assert message in res.output


def test_unknown_path_and_flag_combinations(tmp_path):
    path = review_file(tmp_path, job("j"))
    res = run("--review", str(path), "--path", "/nope")
    assert res.exit_code == 2 and "no admission webhook at /nope" in res.output
    assert run().exit_code == 2
    assert run("--review", str(path), "-f", str(path)).exit_code == 2
    assert run("-f", str(path), "--path", "/jobs/validate").exit_code == 2
