"""Pod and PriorityClass builders for the tests (tests/builders): `pod("p1").req(cpu="1").group("pg1")`.

A pod starts Pending, asks for the `volcano` scheduler and has one container `c` with empty requests.
"""

from __future__ import annotations

from typing import Any

from ._base import TS, Builder, scalars

__all__ = ["container", "guaranteed_pod", "pod", "priority_class"]


def container(name: str = "c", image: str = "busybox", *, requests: dict[str, str] | None = None,
              limits: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    """One container; `resources` only when requests or limits are given; `fields` in the API's own spelling."""
    c: dict[str, Any] = {"name": name, "image": image}
    if requests is not None or limits is not None:
        c["resources"] = {k: dict(v) for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    c.update(fields)
    return c


class pod(Builder):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str, namespace: str = "c1") -> None:
        self.obj = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                                 "creationTimestamp": TS.format(0)},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox",
                                                                         "resources": {"requests": {}}}]},
                    "status": {"phase": "Pending"}}

    def req(self, cpu: str | None = None, memory: str | None = None, **extended: str) -> pod:
        r = self.obj["spec"]["containers"][0]["resources"]["requests"]
        if cpu is not None:
            r["cpu"] = cpu
        if memory is not None:
            r["memory"] = memory
        r.update(scalars(extended))
        return self

    def containers(self, *containers: dict[str, Any]) -> pod:
        """Replace the one default container (`container(...)` dicts)."""
        self.obj["spec"]["containers"] = [dict(c) for c in containers]
        return self

    def group(self, pg: str) -> pod:
        self.obj["metadata"].setdefault("annotations", {})["scheduling.k8s.io/group-name"] = pg
        return self

    def role(self, name: str) -> pod:
        self.obj["metadata"].setdefault("annotations", {})["volcano.sh/task-spec"] = name
        return self

    def on(self, node_name: str, phase: str = "Running") -> pod:
        self.obj["spec"]["nodeName"] = node_name
        self.obj["status"]["phase"] = phase
        return self

    def phase(self, phase: str) -> pod:
        self.obj["status"]["phase"] = phase
        return self

    def priority(self, value: int) -> pod:
        self.obj["spec"]["priority"] = value
        return self

    def selector(self, **kv: str) -> pod:
        self.obj["spec"].setdefault("nodeSelector", {}).update(kv)
        return self

    def affinity(self, terms: list[dict[str, Any]]) -> pod:
        self.obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
        return self

    def tolerate(self, key: str, value: str = "", effect: str = "NoSchedule", operator: str = "Equal") -> pod:
        self.obj["spec"].setdefault("tolerations", []).append(
            {"key": key, "value": value, "effect": effect, "operator": operator})
        return self

    def scheduler(self, name: str) -> pod:
        self.obj["spec"]["schedulerName"] = name
        return self

    def preemptable(self, value: bool) -> pod:
        return self.annotate(**{"volcano.sh/preemptable": "true" if value else "false"})

    def deleting(self) -> pod:
        self.obj["metadata"]["deletionTimestamp"] = TS.format(59)
        return self


def guaranteed_pod(name: str, cpu: str = "1", memory: str = "1Gi", *, policy: str | None = None,
                   group: str = "pg1", **extra: str) -> pod:
    """A Guaranteed pod (limits = requests) of PodGroup `group`, with an optional `volcano.sh/numa-topology-policy`."""
    p = pod(name).req(cpu=cpu, memory=memory, **extra).group(group)
    c = p.obj["spec"]["containers"][0]["resources"]
    c["limits"] = dict(c["requests"])
    if policy:
        p.annotate(**{"volcano.sh/numa-topology-policy": policy})
    return p


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}
