"""Fluent builders of Kubernetes-shaped objects for the scheduler tests, and a one-call session runner.

`pod("p1").req(cpu="1", memory="1Gi").group("pg1")`, `node("n1").alloc(cpu="2", memory="4Gi")`,
`podgroup("pg1").min(2).queue("q1").phase("Inqueue")`, `queue("q1").weight(1)`; `.obj` is the plain dict.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session

__all__ = ["ALLOCATE_CONF", "node", "pod", "podgroup", "priority_class", "queue", "run", "tiers_conf"]

_TS = "2024-01-01T00:00:{:02d}Z"


class _B:
    obj: dict[str, Any]

    def label(self, **kv: str) -> _B:
        self.obj["metadata"].setdefault("labels", {}).update(kv)
        return self

    def annotate(self, **kv: str) -> _B:
        self.obj["metadata"].setdefault("annotations", {}).update(kv)
        return self

    def created(self, second: int) -> _B:
        self.obj["metadata"]["creationTimestamp"] = _TS.format(second)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.obj)


class pod(_B):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str, namespace: str = "c1") -> None:
        self.obj = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                                 "creationTimestamp": _TS.format(0)},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox",
                                                                         "resources": {"requests": {}}}]},
                    "status": {"phase": "Pending"}}

    def req(self, cpu: str | None = None, memory: str | None = None, **scalars: str) -> pod:
        r = self.obj["spec"]["containers"][0]["resources"]["requests"]
        if cpu is not None:
            r["cpu"] = cpu
        if memory is not None:
            r["memory"] = memory
        r.update({k.replace("__", "/").replace("_", "-"): v for k, v in scalars.items()})
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
        return self.annotate(**{"volcano.sh/preemptable": "true" if value else "false"})  # type: ignore[return-value]

    def deleting(self) -> pod:
        self.obj["metadata"]["deletionTimestamp"] = _TS.format(59)
        return self


class node(_B):  # noqa: N801
    def __init__(self, name: str) -> None:
        self.obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
                    "status": {"allocatable": {"pods": "110"}, "capacity": {},
                               "conditions": [{"type": "Ready", "status": "True"}]}}

    def alloc(self, cpu: str, memory: str, pods: int = 110, **scalars: str) -> node:
        a = {"cpu": cpu, "memory": memory, "pods": str(pods)}
        a.update({k.replace("__", "/").replace("_", "-"): v for k, v in scalars.items()})
        self.obj["status"]["allocatable"] = a
        self.obj["status"]["capacity"] = dict(a)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> node:
        self.obj["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self) -> node:
        self.obj["spec"]["unschedulable"] = True
        return self

    def not_ready(self) -> node:
        self.obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        return self

    def conditions(self, **types: str) -> node:
        """Replace the node's conditions: `conditions()` none at all, `conditions(Ready="Unknown")` one."""
        self.obj["status"]["conditions"] = [{"type": t, "status": v} for t, v in types.items()]
        return self


class podgroup(_B):  # noqa: N801
    def __init__(self, name: str, namespace: str = "c1") -> None:
        self.obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                                 "creationTimestamp": _TS.format(0)},
                    "spec": {"minMember": 0, "queue": "c1"}, "status": {"phase": "Inqueue"}}

    def min(self, n: int) -> podgroup:
        self.obj["spec"]["minMember"] = n
        return self

    def queue(self, q: str) -> podgroup:
        self.obj["spec"]["queue"] = q
        return self

    def phase(self, phase: str) -> podgroup:
        self.obj["status"]["phase"] = phase
        return self

    def min_task(self, **roles: int) -> podgroup:
        self.obj["spec"]["minTaskMember"] = dict(roles)
        return self

    def min_resources(self, **rl: str) -> podgroup:
        self.obj["spec"]["minResources"] = dict(rl)
        return self

    def priority_class(self, name: str) -> podgroup:
        self.obj["spec"]["priorityClassName"] = name
        return self


class queue(_B):  # noqa: N801
    def __init__(self, name: str) -> None:
        self.obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name, "creationTimestamp": _TS.format(0)},
                    "spec": {"weight": 1}, "status": {"state": "Open"}}

    def weight(self, w: int) -> queue:
        self.obj["spec"]["weight"] = w
        return self

    def capability(self, **rl: str) -> queue:
        self.obj["spec"]["capability"] = dict(rl)
        return self

    def guarantee(self, **rl: str) -> queue:
        self.obj["spec"]["guarantee"] = {"resource": dict(rl)}
        return self

    def state(self, s: str) -> queue:
        self.obj["status"]["state"] = s
        return self

    def reclaimable(self, v: bool) -> queue:
        self.obj["spec"]["reclaimable"] = v
        return self

    def priority(self, p: int) -> queue:
        self.obj["spec"]["priority"] = p
        return self

    def parent(self, p: str) -> queue:
        self.obj["spec"]["parent"] = p
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


def tiers_conf(actions: str, *tiers: list[str | dict[str, Any]]) -> str:
    return yaml.safe_dump({"actions": actions, "tiers": [
        {"plugins": [p if isinstance(p, dict) else {"name": p} for p in tier]} for tier in tiers]})


# Volcano's allocate_test tier, minus drf (not in this plugin set).
ALLOCATE_CONF = tiers_conf("allocate", ["gang", "proportion", "predicates", "nodeorder"])


def _objs(items: list[Any]) -> list[dict[str, Any]]:
    return [i.build() if isinstance(i, _B) else copy.deepcopy(i) for i in items]


def run(*, pods: list[Any] = (), nodes: list[Any] = (), podgroups: list[Any] = (), queues: list[Any] = (),
        priority_classes: list[Any] = (), conf: str = ALLOCATE_CONF) -> Decisions:  # type: ignore[assignment]
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=_objs(list(pods)), nodes=_objs(list(nodes)), podgroups=_objs(list(podgroups)),
                           queues=_objs(list(queues)), priority_classes=_objs(list(priority_classes)))
    return run_session(snap, c, registry=registry, uid="ssn-1")
