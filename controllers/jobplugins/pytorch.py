"""The `pytorch` job plugin: `MASTER_ADDR` (`<job>-<master>-0.<job>`), `MASTER_PORT`, `WORLD_SIZE` (Σ replicas),
`RANK` (master 0, worker index+1), container port `pytorchjob-port`; with `--wait-master-enabled` a
`wait-for-master` init container on workers polls the master port for `--wait-master-timeout` seconds.
Flags: `--master=master --worker=worker --port=23456 --wait-master-enabled=false --wait-master-timeout=300
--wait-master-image=busybox:1.36.1`.
"""

from __future__ import annotations

from typing import Any

from lahar.controllers import _job_pods
from lahar.controllers.jobplugins import JobPlugin
from lahar.controllers.jobplugins._hosts import domain_name, task_named

__all__ = ["PytorchPlugin", "wait_for_master_script"]

WAIT_CONTAINER = "wait-for-master"


def wait_for_master_script(address: str, port: int, timeout: int) -> str:
    """A POSIX sh loop: `nc -z`, else bash-style /dev/tcp, until the master answers or `timeout` seconds pass."""
    return (
        f"echo 'waiting for master {address}:{port}'; end=$(( $(date +%s) + {timeout} )); "
        f"until nc -z {address} {port} 2>/dev/null || (echo > /dev/tcp/{address}/{port}) 2>/dev/null; do "
        f"if [ $(date +%s) -ge $end ]; then echo 'timed out waiting for master {address}:{port}'; exit 1; fi; "
        "sleep 2; done; echo 'master is ready'"
    )


class PytorchPlugin(JobPlugin):
    name = "pytorch"
    defaults = {"master": "master", "worker": "worker", "port": 23456, "wait-master-enabled": False,
                "wait-master-timeout": 300, "wait-master-image": "busybox:1.36.1"}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        master = task_named(job, str(self.flags["master"]))
        if master is None:
            return  # Volcano logs "job doesn't have task master" and leaves the pod alone
        job_name = str(job["metadata"]["name"])
        address = domain_name(master, job_name, 0)
        port = int(self.flags["port"])
        task = _job_pods.task_of(pod)
        world = sum(int(t.get("replicas") or 0) for t in (job.get("spec") or {}).get("tasks") or ())
        rank: int | None = None
        if task == self.flags["worker"]:
            index = _job_pods.pod_index(pod)
            rank = (index or 0) + 1
        elif task == self.flags["master"]:
            rank = 0
        spec = pod.setdefault("spec", {})
        for c in spec.get("containers") or ():
            if not any(int(p.get("containerPort") or 0) == port for p in c.get("ports") or ()):
                c.setdefault("ports", []).append({"name": "pytorchjob-port", "containerPort": port})
            env = c.setdefault("env", [])
            env += [{"name": "MASTER_ADDR", "value": address}, {"name": "MASTER_PORT", "value": str(port)},
                    {"name": "WORLD_SIZE", "value": str(world)}]
            if rank is not None:
                env.append({"name": "RANK", "value": str(rank)})
        if self.flags["wait-master-enabled"] and task == self.flags["worker"]:
            inits = spec.setdefault("initContainers", [])
            if not any(c.get("name") == WAIT_CONTAINER for c in inits):
                script = wait_for_master_script(address, port, int(self.flags["wait-master-timeout"]))
                inits.insert(0, {"name": WAIT_CONTAINER, "image": str(self.flags["wait-master-image"]),
                                 "command": ["sh", "-c", script]})
