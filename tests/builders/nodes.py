"""Node builder for the tests (tests/builders): `node("n1").alloc(cpu="2", memory="4Gi").taint("gpu")`.

A node starts Ready with room for 110 pods and nothing else allocatable.
"""

from __future__ import annotations

from ._base import Builder, scalars

__all__ = ["node"]


class node(Builder):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str) -> None:
        self.obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
                    "status": {"allocatable": {"pods": "110"}, "capacity": {},
                               "conditions": [{"type": "Ready", "status": "True"}]}}

    def alloc(self, cpu: str, memory: str, pods: int = 110, **extended: str) -> node:
        a = {"cpu": cpu, "memory": memory, "pods": str(pods)}
        a.update(scalars(extended))
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
