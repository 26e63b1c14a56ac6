"""The `ray` job plugin (Volcano's distributed-framework/ray): a Ray cluster from a Job's head and worker tasks.

The head task's `--headContainer` container runs `ray start --head --block --dashboard-host=0.0.0.0 --port=<port>
--dashboard-port=<dashboardPort> --ray-client-server-port=<clientPort>` and gets the container ports `gcs`,
`dashboard`, `client-server` it does not already expose; the worker task's `--workerContainer` container runs
`ray start --block --address=<head pod 0's host>:<port>`. On job add, the Service `<job>-head-svc` selects the head
pods and publishes those three ports by name; it goes on job delete. A Job without its head task gets a PluginError
(`job <name> doesn't have head task <head>`) and no pods. Flags: `--head=head --headContainer=head --worker=worker
--workerContainer=worker --port=6379 --dashboardPort=8265 --clientPort=10001`.
"""

from __future__ import annotations

from typing import Any

from lahar.controllers import _job_pods
from lahar.controllers._job_pods import controller_ref
from lahar.controllers.jobplugins import Children, JobPlugin, controlled
from lahar.controllers.jobplugins._hosts import domain_name, task_named
from lahar.kube.models import labels

__all__ = ["RayPlugin", "head_service_name"]

PORT_NAMES = ("gcs", "dashboard", "client-server")


def head_service_name(job: dict[str, Any]) -> str:
    return f"{job['metadata']['name']}-head-svc"


class RayPlugin(JobPlugin):
    name = "ray"
    defaults = {"head": "head", "headContainer": "head", "worker": "worker", "workerContainer": "worker",
                "port": 6379, "dashboardPort": 8265, "clientPort": 10001}

    def _ports(self) -> tuple[tuple[str, int], ...]:
        return tuple(zip(PORT_NAMES, (int(self.flags["port"]), int(self.flags["dashboardPort"]),
                                      int(self.flags["clientPort"])), strict=True))

    def _head(self, job: dict[str, Any]) -> Any:
        head = task_named(job, str(self.flags["head"]))
        if head is None:
            raise LookupError(f"job {job['metadata']['name']} doesn't have head task {self.flags['head']}")
        return head

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        head = task_named(job, str(self.flags["head"]))
        if head is None:
            return  # on_job_add refused the Job already
        task = _job_pods.task_of(pod)
        port, dashboard, client = (p for _, p in self._ports())
        for c in (pod.get("spec") or {}).get("containers") or ():
            if task == self.flags["head"] and c.get("name") == self.flags["headContainer"]:
                have = {int(p.get("containerPort") or 0) for p in c.get("ports") or ()}
                for name, number in self._ports():
                    if number not in have:
                        c.setdefault("ports", []).append({"name": name, "containerPort": number})
                c["command"] = ["sh", "-c", f"ray start --head --block --dashboard-host=0.0.0.0 --port={port} "
                                            f"--dashboard-port={dashboard} --ray-client-server-port={client}"]
            if task == self.flags["worker"] and c.get("name") == self.flags["workerContainer"]:
                address = domain_name(head, str(job["metadata"]["name"]), 0)
                c["command"] = ["sh", "-c", f"ray start --block --address={address}:{port}"]

    def head_service(self, job: dict[str, Any]) -> dict[str, Any]:
        meta = job["metadata"]
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": head_service_name(job), "namespace": meta["namespace"],
                             "ownerReferences": [controller_ref(job)]},
                "spec": {"selector": {labels.JOB_NAME_KEY: meta["name"], labels.JOB_NAMESPACE_KEY: meta["namespace"],
                                      labels.TASK_SPEC_KEY: str(self.flags["head"])},
                         "ports": [{"name": name, "port": number, "targetPort": name, "protocol": "TCP"}
                                   for name, number in self._ports()]}}

    def on_job_add(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) == self.name:
            return
        self._head(job)
        children.ensure(self.head_service(job))
        controlled(status)[self.key] = self.name

    def on_job_delete(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) != self.name:
            return
        children.delete("v1", "Service", job["metadata"]["namespace"], head_service_name(job))
        controlled(status).pop(self.key, None)
