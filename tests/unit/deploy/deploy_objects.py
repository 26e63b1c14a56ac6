"""Rendering lahar's install for the deploy tests: the kustomize base (`kubectl kustomize deploy/`) and the Helm
chart (`lahar.chart`, no helm binary), plus small look-ups over the rendered objects."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "lahar"
NS = "lahar-system"


def kustomize() -> list[dict]:
    if shutil.which("kubectl") is None:
        import pytest

        pytest.skip("kubectl not on PATH (it renders the kustomize base)")
    out = subprocess.run(["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.load_all(out.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def chart(values: dict[str, Any] | None = None) -> list[dict]:
    from lahar import chart as charts

    return charts.render_objects(CHART, values=values or {})


def by_kind(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def workloads(objs: list[dict]) -> Iterator[tuple[str, dict]]:
    """(name, pod template spec) of every Deployment, StatefulSet, Job and CronJob."""
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield o["metadata"]["name"], o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            yield o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def container(objs: list[dict], workload: str) -> dict:
    spec = dict(workloads(objs))[workload]
    return spec["containers"][0]
