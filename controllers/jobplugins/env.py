"""The `env` job plugin: `VK_TASK_INDEX` and `VC_TASK_INDEX` (the pod's index in its task) in every container."""

from __future__ import annotations

from typing import Any

from lahar.controllers.jobplugins import JobPlugin

__all__ = ["TASK_INDEX_ENV", "TASK_VK_INDEX_ENV", "EnvPlugin"]

TASK_VK_INDEX_ENV = "VK_TASK_INDEX"
TASK_INDEX_ENV = "VC_TASK_INDEX"


class EnvPlugin(JobPlugin):
    name = "env"

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        parts = str(pod["metadata"].get("name") or "").split("-")
        index = parts[-1] if len(parts) >= 3 else ""
        spec = pod.setdefault("spec", {})
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or ():
                c.setdefault("env", []).extend([{"name": TASK_VK_INDEX_ENV, "value": index},
                                                {"name": TASK_INDEX_ENV, "value": index}])
