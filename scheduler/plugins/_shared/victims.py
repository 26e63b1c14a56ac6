"""A base for plugins that only take victims away (pdb, cdp): one filter answers preempt's `preemptable`, reclaim's
`reclaimable` and shuffle's `victim_filter` hooks, so the three actions protect the same pods."""

from __future__ import annotations

from lahar.scheduler.framework.snapshot import Task


class VictimFilter:
    """Subclasses define `_filter(tasks) -> the tasks that may still be evicted`."""

    def _filter(self, tasks: list[Task]) -> list[Task]:
        raise NotImplementedError

    def preemptable(self, preemptor: Task, preemptees: list[Task]) -> list[Task] | None:
        return self._filter(preemptees)

    def reclaimable(self, reclaimer: Task, reclaimees: list[Task]) -> list[Task] | None:
        return self._filter(reclaimees)

    def victim_filter(self, victims: list[Task]) -> list[Task]:
        return self._filter(victims)
