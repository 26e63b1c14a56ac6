"""Volcano Job (`batch.volcano.sh/v1alpha1`) builder for the tests (tests/builders), and its task and template parts.

`vcjob("j1").queue("q1").task("worker", 2, template=pod_template(requests={"cpu": "1"})).min_available(2)`; a job
starts with no tasks, `.obj` is the plain dict and `.build()` a copy. `namespace=None` leaves the namespace out (what
`kubectl create -f` sends before defaulting).
"""

from __future__ import annotations

import copy
from typing import Any

from ._base import Builder
from .pods import container

__all__ = ["API_VERSION", "SIM_DURATION", "pod_template", "simulated_job", "task", "vcjob"]

API_VERSION = "batch.volcano.sh/v1alpha1"
SIM_DURATION = "lahar.sh/sim-duration"  # how long a simulated kubelet runs the container


def pod_template(*containers: dict[str, Any], restart_policy: str | None = None,
                 annotations: dict[str, str] | None = None, requests: dict[str, str] | None = None,
                 **spec: Any) -> dict[str, Any]:
    """A task's pod template: the given containers, or one busybox container `c` (with `requests` if given)."""
    pod_spec: dict[str, Any] = {}
    if restart_policy is not None:
        pod_spec["restartPolicy"] = restart_policy
    pod_spec["containers"] = list(containers) or [container(requests=requests)]
    pod_spec.update(spec)
    out: dict[str, Any] = {"spec": pod_spec}
    if annotations is not None:
        out = {"metadata": {"annotations": dict(annotations)}, **out}
    return out


def task(name: str = "t", replicas: int = 1, *, template: dict[str, Any] | None = None,
         **fields: Any) -> dict[str, Any]:
    """One entry of `spec.tasks`; `fields` are the task's other keys in the API's own spelling (minAvailable,
    policies, dependsOn, ...)."""
    out: dict[str, Any] = {"name": name, "replicas": replicas}
    if template is not None:
        out["template"] = copy.deepcopy(template)  # tasks built from one template share nothing
    out.update(fields)
    return out


class vcjob(Builder):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str = "j1", namespace: str | None = "default") -> None:
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        self.obj = {"apiVersion": API_VERSION, "kind": "Job", "metadata": meta, "spec": {"tasks": []}}

    def task(self, name: str = "t", replicas: int = 1, *, template: dict[str, Any] | None = None,
             **fields: Any) -> vcjob:
        self.obj["spec"]["tasks"].append(task(name, replicas, template=template, **fields))
        return self

    def tasks(self, *entries: dict[str, Any], **replicas: int) -> vcjob:
        """Whole task entries (`task(...)` dicts), then bare `name=replicas` tasks without a template."""
        self.obj["spec"]["tasks"].extend(entries)
        self.obj["spec"]["tasks"].extend(task(n, r) for n, r in replicas.items())
        return self

    def spec(self, **fields: Any) -> vcjob:
        """Other `spec` keys in the API's own spelling: `.spec(minAvailable=2, schedulerName="volcano")`."""
        self.obj["spec"].update(fields)
        return self

    def queue(self, q: str) -> vcjob:
        return self.spec(queue=q)

    def min_available(self, n: int) -> vcjob:
        return self.spec(minAvailable=n)

    def max_retry(self, n: int) -> vcjob:
        return self.spec(maxRetry=n)

    def policies(self, *policies: dict[str, Any]) -> vcjob:
        return self.spec(policies=list(policies))

    def plugins(self, **plugins: list[str]) -> vcjob:
        return self.spec(plugins=dict(plugins))

    def uid(self, uid: str) -> vcjob:
        self.obj["metadata"]["uid"] = uid
        return self

    def generation(self, g: int) -> vcjob:
        self.obj["metadata"]["generation"] = g
        return self

    def owned_by(self, kind: str, name: str, uid: str, api_version: str = API_VERSION) -> vcjob:
        self.obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
                                                    "controller": True}]
        return self

    def phase(self, phase: str) -> vcjob:
        self.obj.setdefault("status", {}).setdefault("state", {})["phase"] = phase
        return self

    def status(self, **fields: Any) -> vcjob:
        self.obj.setdefault("status", {}).update(fields)
        return self


def simulated_job(name: str, *, tasks: dict[str, int], duration: str = "2s",
                  policies: list[dict[str, Any]] | None = None, max_retry: int = 3) -> dict[str, Any]:
    """A gang Job (minAvailable = all replicas, queue `default`) whose containers run `duration` on devcluster's
    simulated kubelets; no namespace (the caller creates it in one)."""
    template = pod_template(container("main", requests={"cpu": "100m", "memory": "64Mi"}), restart_policy="Never",
                            annotations={SIM_DURATION: duration})
    job = vcjob(name, namespace=None).spec(schedulerName="volcano", queue="default",
                                           minAvailable=sum(tasks.values()), maxRetry=max_retry)
    if policies:
        job.policies(*policies)
    return job.tasks(*(task(t, n, template=template) for t, n in tasks.items())).build()
