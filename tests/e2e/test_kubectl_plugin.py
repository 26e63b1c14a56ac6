"""`kubectl lahar ...`: the `kubectl-lahar` console script found by the real kubectl as a plugin on the PATH, against
devcluster over HTTPS (issue 12: `kubectl lahar job list -o json` works)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_vc_cli_live import rest  # noqa: F401 - the fixture: devcluster with Volcano's CRDs

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent  # the virtualenv's bin, where pip put kubectl-lahar


def kubectl(live: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", KUBECONFIG=str(live.kubeconfig))
    return subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_kubectl_lahar_job_list_o_json(live_devcluster: Any, rest: Any) -> None:  # noqa: F811
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    if not (BIN / "kubectl-lahar").exists():
        pytest.skip("the kubectl-lahar console script is not installed (pip install -e .)")
    ns = f"plug-{uuid.uuid4().hex[:6]}"
    rest.create(rest.registry.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}})
    plugins = kubectl(live_devcluster, "plugin", "list")
    assert "kubectl-lahar" in plugins.stdout, plugins.stdout + plugins.stderr
    ran = kubectl(live_devcluster, "lahar", "job", "run", "-N", "p1", "-n", ns, "-r", "2")
    assert ran.returncode == 0 and "run job p1 successfully" in ran.stdout, ran.stdout + ran.stderr
    listed = kubectl(live_devcluster, "lahar", "job", "list", "-n", ns, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["kind"] == "List" and [j["metadata"]["name"] for j in doc["items"]] == ["p1"]
    assert doc["items"][0]["spec"]["tasks"][0]["replicas"] == 2
    queue = f"pq-{uuid.uuid4().hex[:6]}"
    assert kubectl(live_devcluster, "lahar", "queue", "create", "-n", queue).returncode == 0
    names = kubectl(live_devcluster, "lahar", "queue", "list", "-o", "name")
    assert names.returncode == 0 and f"queue.scheduling.volcano.sh/{queue}\n" in names.stdout, names.stderr
    kubectl(live_devcluster, "lahar", "queue", "delete", "-n", queue)
    version = kubectl(live_devcluster, "lahar", "--version")
    assert version.returncode == 0 and version.stdout.strip()
