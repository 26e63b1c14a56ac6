"""Volcano Queue builder for the tests (tests/builders): `queue("q1").weight(2).capability(cpu="4")`.

A queue starts Open with weight 1; `queue("q1").bare()` is what a client creates (no status, no timestamp).
"""

from __future__ import annotations

from ._base import TS, Builder

__all__ = ["queue"]


class queue(Builder):  # noqa: N801 - reads as a noun in tables
    def __init__(self, name: str) -> None:
        self.obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name, "creationTimestamp": TS.format(0)},
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
