"""conformance: never evict critical system pods (`system-cluster-critical`, `system-node-critical`, kube-system).

Volcano's `plugins/conformance` (spec §5.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.scheduler.framework.snapshot import Task

__all__ = ["Conformance"]

CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


class Conformance:
    name = "conformance"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    @staticmethod
    def _evictable(tasks: list[Task]) -> list[Task]:
        out = []
        for t in tasks:
            spec = t.pod.get("spec") or {}
            if spec.get("priorityClassName") in CRITICAL or t.namespace == "kube-system":
                continue
            out.append(t)
        return out

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        return self._evictable(preemptees)

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        return self._evictable(reclaimees)

    def victim_filter(self, victims: list[Task]) -> list[Task]:
        """shuffle's victims, less critical pods and those in kube-system."""
        return self._evictable(victims)
