"""`lahar policy test` and `lahar policy report` (against an injected in-memory cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lahar.cli import app
from lahar.kube.apiserver.memory import MemoryClient
from tests.builders import pod_template, vcjob

RULE = {"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["jobs"]}


def policy(name: str, expression: str, actions: list[str], message: str) -> dict:
    return {"apiVersion": "lahar.sh/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [RULE]}, "validationActions": actions,
                     "validations": [{"expression": expression, "message": message}]}}


POLICIES = [policy("min-available", "!has(object.spec.minAvailable) || object.spec.minAvailable <= 4", ["Deny"],
                   "minAvailable above 4"),
            policy("team", "'team' in object.metadata.labels", ["Warn"], "no team")]


def job(name: str, *, labels: dict | None = None, min_available: int = 1) -> dict:
    return vcjob(name).label(**(labels or {})).min_available(min_available).task("t", 1, template=pod_template()).build()


def write(tmp_path: Path, name: str, docs: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def run(*args: str, client: Any = None) -> Any:
    return CliRunner().invoke(app, list(args), obj={"client": client} if client else None)


def as_configmap(docs: list[dict], name: str = "pols") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"lahar.sh/policy": "true"}},
            "data": {"policy.yaml": yaml.safe_dump_all(docs)}}


@pytest.mark.parametrize("form", ["documents", "configmap"])
def test_verdict_per_object(tmp_path: Path, form: str) -> None:
    docs = POLICIES if form == "documents" else [as_configmap(POLICIES)]
    p = write(tmp_path, "p.yaml", docs)
    f = write(tmp_path, "m.yaml", [job("ok", labels={"team": "a"}), job("big", labels={"team": "a"}, min_available=9),
                                   job("anon")])
    result = run("policy", "test", "-p", str(p), "-f", str(f))
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Job/ok: allowed",
        "Job/big: denied: AdmissionPolicy 'min-available' denied request: minAvailable above 4",
        "Job/anon: warned: Validation failed for AdmissionPolicy 'team': no team",
    ]


def test_exit_zero_without_denials(tmp_path: Path) -> None:
    result = run("policy", "test", "-p", str(write(tmp_path, "p.yaml", POLICIES)),
                 "-f", str(write(tmp_path, "m.yaml", [job("anon")])))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("docs", "fragment"), [
    ([policy("bad", "object.spec ==", ["Deny"], "m")], "spec.validations[0].expression: compilation failed"),
    ([job("not-a-policy")], "no AdmissionPolicy found"),
], ids=["compile-error", "no-policies"])
def test_bad_policies_exit_2(tmp_path: Path, docs: list[dict], fragment: str) -> None:
    result = run("policy", "test", "-p", str(write(tmp_path, "p.yaml", docs)),
                 "-f", str(write(tmp_path, "m.yaml", [job("a")])))
    assert result.exit_code == 2
    assert fragment in result.output


def test_report_lists_violations_of_existing_objects() -> None:
    client = MemoryClient.with_crds()
    cms, jobs = client.registry.get("", "v1", "configmaps"), client.registry.get("batch.volcano.sh", "v1alpha1", "jobs")
    client.create(cms, as_configmap(POLICIES), namespace="default")
    for obj in (job("ok", labels={"team": "a"}), job("big", min_available=9)):
        client.create(jobs, obj, namespace="default")
    result = run("policy", "report", client=client)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "min-available" in out and "Job default/big" in out and "minAvailable above 4" in out
    assert "team" in out and "no team" in out
    assert "Job default/ok" not in out
    assert "2 violation(s) in 2 object(s) checked against 2 policies" in out


def test_report_with_local_policies(tmp_path: Path) -> None:
    client = MemoryClient.with_crds()
    client.create(client.registry.get("batch.volcano.sh", "v1alpha1", "jobs"), job("x", labels={"team": "t"}),
                  namespace="default")
    result = run("policy", "report", "-p", str(write(tmp_path, "p.yaml", POLICIES)), client=client)
    assert result.exit_code == 0, result.output
    assert "0 violation(s) in 1 object(s) checked against 2 policies" in result.output
