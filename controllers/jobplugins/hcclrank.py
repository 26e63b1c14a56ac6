"""The `hcclrank` job plugin (Volcano's distributed-framework/hcclrank): the `hccl/rankIndex` annotation Ascend's HCCL
reads, ordered by task index — master pods take ranks 0..m-1, worker i takes m + i (m: the master task's replicas).

A pod that already has the annotation keeps it; a pod whose containers set `RANK` (the first found) gets that value.
Pods of other tasks are left alone. Flags: `--master=master --worker=worker`.
"""

from __future__ import annotations

from typing import Any

from lahar.controllers import _job_pods
from lahar.controllers.jobplugins import JobPlugin
from lahar.kube.models import labels

__all__ = ["HCCL_RANK_KEY", "HcclrankPlugin", "env_value"]

HCCL_RANK_KEY = "hccl/rankIndex"
ENV_RANK = "RANK"


def env_value(pod: dict[str, Any], name: str) -> str:
    """getEnv: the value of the first `name` env var over the containers in order, "" when none sets it."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        for env in container.get("env") or ():
            if env.get("name") == name:
                return str(env.get("value") or "")
    return ""


def _task_index(pod: dict[str, Any]) -> int | None:
    """GetTaskIndexOfPod: the `volcano.sh/task-index` label (lahar's pods carry it as an annotation too)."""
    text = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.TASK_INDEX_KEY)
    if text is None:
        return _job_pods.pod_index(pod)
    try:
        return int(text)
    except ValueError:
        return None


def _replicas(job: dict[str, Any], task: str) -> int:
    for t in (job.get("spec") or {}).get("tasks") or ():
        if t.get("name") == task:
            return int(t.get("replicas") or 0)
    return 0


class HcclrankPlugin(JobPlugin):
    name = "hcclrank"
    defaults = {"master": "master", "worker": "worker"}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        meta = pod.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        if annotations.get(HCCL_RANK_KEY) or not job:
            return
        rank = env_value(pod, ENV_RANK)
        if not rank:
            task = _job_pods.task_of(pod)
            if task not in (self.flags["master"], self.flags["worker"]):
                return
            index = _task_index(pod)
            if index is None:
                return  # Volcano fails the pod's creation; lahar's job pods always carry their index
            rank = str(index if task == self.flags["master"] else _replicas(job, str(self.flags["master"])) + index)
        meta["annotations"] = {**annotations, HCCL_RANK_KEY: rank}
