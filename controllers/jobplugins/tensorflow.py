"""The `tensorflow` job plugin: `TF_CONFIG` = `{"cluster": {ps, worker, chief, evaluator: ["<host>:<port>"]},
"task": {"type", "index"}}` in every container (not for a single-task, single-replica job).
Flags: `--ps=ps --worker=worker --chief=chief --evaluator=evaluator --port=2222`.
"""

from __future__ import annotations

import json
from typing import Any

from lahar.controllers import _job_pods
from lahar.controllers.jobplugins import JobPlugin
from lahar.controllers.jobplugins._hosts import domain_name

__all__ = ["TF_CONFIG_ENV", "TensorflowPlugin"]

TF_CONFIG_ENV = "TF_CONFIG"


class TensorflowPlugin(JobPlugin):
    name = "tensorflow"
    defaults = {"ps": "ps", "worker": "worker", "chief": "chief", "evaluator": "evaluator", "port": 2222}

    def cluster_spec(self, pod: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
        roles = {self.flags["ps"]: "ps", self.flags["worker"]: "worker", self.flags["chief"]: "chief",
                 self.flags["evaluator"]: "evaluator"}
        task = _job_pods.task_of(pod)
        cluster: dict[str, list[str]] = {}
        job_name = str(job["metadata"]["name"])
        for ts in (job.get("spec") or {}).get("tasks") or ():
            role = roles.get(ts.get("name"))
            if role is None:
                continue
            cluster[role] = [f"{domain_name(ts, job_name, i)}:{int(self.flags['port'])}"
                             for i in range(int(ts.get("replicas") or 0))]
        ordered = {r: cluster[r] for r in ("ps", "worker", "chief", "evaluator") if cluster.get(r)}
        return {"cluster": ordered, "task": {"type": roles.get(task, task), "index": _job_pods.pod_index(pod) or 0}}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        tasks = (job.get("spec") or {}).get("tasks") or ()
        if len(tasks) == 1 and int(tasks[0].get("replicas") or 0) == 1:
            return
        raw = json.dumps(self.cluster_spec(pod, job), separators=(",", ":"))
        for c in pod.setdefault("spec", {}).get("containers") or ():
            c.setdefault("env", []).append({"name": TF_CONFIG_ENV, "value": raw})
