"""Host names of a Job's pods as the headless Service publishes them: `<hostname>.<subdomain>` (helpers.MakeDomainName).
Shared by the svc, ssh, mpi, pytorch and tensorflow plugins. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["domain_name", "pod_name", "task_hosts", "task_named"]


def pod_name(job_name: str, task: str, index: int) -> str:
    return f"{job_name}-{task}-{index}"


def domain_name(task: Mapping[str, Any], job_name: str, index: int) -> str:
    spec = (task.get("template") or {}).get("spec") or {}
    host = spec.get("hostname") or pod_name(job_name, str(task.get("name")), index)
    return f"{host}.{spec.get('subdomain') or job_name}"


def task_hosts(task: Mapping[str, Any], job_name: str) -> list[str]:
    """One host per replica; a template with a fixed `hostname` yields a single host (every replica shares it)."""
    spec = (task.get("template") or {}).get("spec") or {}
    hosts = []
    for i in range(int(task.get("replicas") or 0)):
        hosts.append(domain_name(task, job_name, i))
        if spec.get("hostname"):
            break
    return hosts


def task_named(job: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for task in (job.get("spec") or {}).get("tasks") or ():
        if task.get("name") == name:
            return task
    return None
