"""Fractional GPUs with Koordinator's names on `lahar up --profile dgx-h100 --nodes 1`, through the real kubectl.

With `deviceshare` in `lahar-scheduler-configmap`, two pods asking `koordinator.sh/gpu-memory-ratio: 50` share one
card, a third asking 60 gets another card, and each bound pod carries `scheduling.koordinator.sh/device-allocated`
naming its card (minor and UUID of the node's Koordinator Device) with what it holds of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.scheduler.framework.conf import DEFAULT_CONF
from tests.e2e import test_lahar_up as base
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
CONF = DEFAULT_CONF + "  - name: deviceshare\n"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    u = Up(tmp_path / "lahar", args=("--profile", "dgx-h100", "--nodes", "1"))
    try:
        yield u
    finally:
        u.kill()


def apply(up: Up, tmp_path: Path, obj: dict[str, Any]) -> None:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    up.kubectl("apply", "-f", str(path))


def share_pod(name: str, ratio: int) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi", "koordinator.sh/gpu-memory-ratio": str(ratio)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                     "resources": {"requests": resources, "limits": resources}}]}}


def allocated(up: Up, name: str) -> dict[str, Any] | None:
    pod = json.loads(up.kubectl("get", "pod", name, "-o", "json").stdout)
    raw = (pod["metadata"].get("annotations") or {}).get(ALLOCATED)
    return json.loads(raw) if raw and pod["spec"].get("nodeName") else None


def test_two_halves_share_a_card_and_sixty_goes_to_another(up: Up, tmp_path: Path) -> None:
    up.start()
    apply(up, tmp_path, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "lahar-scheduler-configmap", "namespace": "default"},
                         "data": {"volcano-scheduler.conf": CONF}})
    log = up.data_dir / "logs" / "scheduler.log"
    wait_for("the scheduler to load the conf", lambda: "configuration default/lahar-scheduler-configmap@" in
             log.read_text(errors="replace"), 30)
    device = json.loads(up.kubectl("get", "devices.scheduling.koordinator.sh", "dgx-h100-0", "-o", "json").stdout)
    uuids = {d["minor"]: d["id"] for d in device["spec"]["devices"] if d["type"] == "gpu"}

    got: dict[str, dict[str, Any]] = {}
    for name, ratio in (("half-a", 50), ("half-b", 50), ("sixty", 60)):
        apply(up, tmp_path, share_pod(name, ratio))
        got[name] = wait_for(f"{name} bound with its card", lambda n=name: allocated(up, n), 60)

    cards = {name: value["gpu"][0] for name, value in got.items()}
    assert all(len(value["gpu"]) == 1 for value in got.values()), got
    assert cards["half-a"]["minor"] == cards["half-b"]["minor"], cards
    assert cards["sixty"]["minor"] != cards["half-a"]["minor"], cards
    for name, ratio in (("half-a", "50"), ("half-b", "50"), ("sixty", "60")):
        entry = cards[name]
        assert entry["id"] == uuids[entry["minor"]], (entry, uuids)
        assert entry["resources"]["koordinator.sh/gpu-memory-ratio"] == ratio, entry
        assert entry["resources"]["koordinator.sh/gpu-memory"].endswith("Mi"), entry
