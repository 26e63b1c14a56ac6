"""The `mpi` job plugin: the master's containers get `MPI_HOST` (comma list of worker hosts); every container and
init container opens `--port` (default 22) as `mpijob-port`. Flags: `--master=master --worker=worker --port=22`.
"""

from __future__ import annotations

from typing import Any

from lahar.controllers import _job_pods
from lahar.controllers.jobplugins import JobPlugin
from lahar.controllers.jobplugins._hosts import task_hosts, task_named

__all__ = ["MPI_HOST_ENV", "MpiPlugin"]

MPI_HOST_ENV = "MPI_HOST"


class MpiPlugin(JobPlugin):
    name = "mpi"
    defaults = {"master": "master", "worker": "worker", "port": 22}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        env = None
        if _job_pods.task_of(pod) == self.flags["master"]:
            worker = task_named(job, str(self.flags["worker"]))
            hosts = task_hosts(worker, str(job["metadata"]["name"])) if worker is not None else []
            env = {"name": MPI_HOST_ENV, "value": ",".join(hosts)}
        port = int(self.flags["port"])
        spec = pod.setdefault("spec", {})
        for group in ("initContainers", "containers"):
            for c in spec.get(group) or ():
                if not any(int(p.get("containerPort") or 0) == port for p in c.get("ports") or ()):
                    c.setdefault("ports", []).append({"name": "mpijob-port", "containerPort": port})
                if env is not None:
                    c.setdefault("env", []).append(dict(env))
