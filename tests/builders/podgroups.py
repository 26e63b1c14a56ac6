"""PodGroup builder for the tests (tests/builders): `podgroup("pg1").min(2).queue("q1").phase("Inqueue")`.

A PodGroup starts Inqueue in queue `c1` with minMember 0 (the scheduler tables' defaults).
"""

from __future__ import annotations

from ._base import TS, Builder

__all__ = ["podgroup"]


class podgroup(Builder):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str, namespace: str = "c1") -> None:
        self.obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                                 "creationTimestamp": TS.format(0)},
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
