"""`kubectl apply -k deploy/` against a fresh devcluster: the whole base is accepted, CRDs first, and a second
`--dry-run=server` apply of the same base passes too (what `kubectl diff`/GitOps tools do before a real apply).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[Any]:
    from lahar.devcluster.server import DevCluster

    dc = DevCluster(tmp_path / "data").start()
    env = {**os.environ, "KUBECONFIG": str(dc.kubeconfig)}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out

    try:
        yield run
    finally:
        dc.stop()


def test_apply_kustomize_base_to_devcluster(kubectl: Any) -> None:
    rendered = kubectl("kustomize", str(REPO / "deploy")).stdout
    count = sum(1 for line in rendered.splitlines() if line.startswith("kind: "))

    out = kubectl("apply", "-k", str(REPO / "deploy")).stdout
    assert len([line for line in out.splitlines() if line.strip()]) == count, out
    assert "created" in out and "error" not in out.lower()

    for kind, name in [("deployment", "lahar-webhook"), ("statefulset", "lahar-redis"), ("job", "lahar-certs"),
                       ("cronjob", "lahar-certs-renew"), ("poddisruptionbudget", "lahar-webhook"),
                       ("networkpolicy", "lahar-default-deny"), ("configmap", "lahar-scheduler-configmap")]:
        kubectl("get", kind, name, "-n", "lahar-system")
    kubectl("get", "crd", "jobs.batch.volcano.sh")
    kubectl("get", "queues")  # the CRDs are served
    hooks = json.loads(kubectl("get", "validatingwebhookconfiguration", "lahar-validating-webhooks",
                               "-o", "json").stdout)
    assert {h["clientConfig"]["service"]["name"] for h in hooks["webhooks"]} == {"lahar-webhook"}

    again = kubectl("apply", "-k", str(REPO / "deploy"), "--dry-run=server").stdout
    assert "(server dry run)" in again
    assert len([line for line in again.splitlines() if line.strip()]) == count
