"""The policies in examples/policies/ do what the README says, on the manifests next to them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.policies import admission_policies as ap
from lahar.policies import loading

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "policies"


def documents() -> list[dict]:
    return [d for f in sorted(EXAMPLES.glob("*.yaml")) if f.name != "manifests.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]


def manifests() -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / "manifests.yaml").read_text()) if d]


def stage(name: str) -> ap.PolicyStage:
    objects = manifests()
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Queue"}
    obj = next(o for o in objects if o["metadata"]["name"] == name)
    return ap.policy_stage(loading.policies_from_documents(documents()), ap.request_for_object(obj),
                           queue_lookup=queues.get)


def test_every_example_compiles() -> None:
    names = sorted(p.name for p in loading.policies_from_documents(documents()))
    assert names == ["default-priority-class", "gpu-jobs-need-gpu-queue", "job-team-label", "research-gpu-limit"]


@pytest.mark.parametrize(("job", "denied", "warned", "priority"), [
    ("train-ok", None, None, "research-high"),
    ("gpu-in-cpu-queue", "job asks for 1 GPUs but queue cpu-only is not labelled gpu: \"true\"", None, None),
    ("research-too-big", "job asks for 72 GPUs; queue research allows at most 64 per job", None, None),
    ("no-team", None, "every Job needs a team label (metadata.labels.team)", "batch-low"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_examples_on_their_manifests(job: str, denied: str | None, warned: str | None, priority: str | None) -> None:
    s = stage(job)
    assert [d.message for d in s.denials] == ([denied] if denied else [])
    assert [w.split(": ", 1)[1] for w in s.warnings] == ([warned] if warned else [])
    expected = [{"op": "add", "path": "/spec/priorityClassName", "value": priority}] if priority else []
    assert s.patches == expected


def test_team_label_is_audited_too() -> None:
    assert [a.policy for a in stage("no-team").audits] == ["job-team-label"]


def test_the_readme_command() -> None:
    result = CliRunner().invoke(app, ["policy", "test", "-p", str(EXAMPLES), "-f", str(EXAMPLES / "manifests.yaml")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert "Job/train-ok: allowed" in lines
    assert "Job/no-team: warned: Validation failed for AdmissionPolicy 'job-team-label': every Job needs a team " \
           "label (metadata.labels.team)" in lines
    assert any(line.startswith("Job/research-too-big: denied: AdmissionPolicy 'research-gpu-limit'") for line in lines)
