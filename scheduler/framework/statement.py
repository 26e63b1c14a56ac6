"""A session's transaction (Volcano `Statement`): allocate, pipeline and evict change the session view at once;
`commit()` turns them into decisions, `discard()` undoes them in reverse order.

Gang all-or-nothing is "commit if job_ready else discard" in the allocate action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lahar.scheduler.framework.snapshot import Task, TaskStatus

if TYPE_CHECKING:
    from lahar.scheduler.framework.session import Session

__all__ = ["Operation", "Statement"]

Operation = tuple[str, Task, object]  # (kind, task, undo data)


class Statement:
    """Operations on one session, applied immediately to its view and recorded for commit or discard."""

    __slots__ = ("ssn", "operations")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []

    def __len__(self) -> int:
        return len(self.operations)

    def evicts(self) -> bool:
        """Whether any operation of the statement is an eviction."""
        return any(kind == "evict" for kind, _, _ in self.operations)

    def allocate(self, task: Task, node: int) -> None:
        """Task → Allocated on `node` (its idle resources)."""
        self.ssn.place(task, node, TaskStatus.ALLOCATED)
        self.operations.append(("allocate", task, None))

    def pipeline(self, task: Task, node: int) -> None:
        """Task → Pipelined on `node`, booked against resources that are being released."""
        self.ssn.place(task, node, TaskStatus.PIPELINED)
        self.operations.append(("pipeline", task, None))

    def evict(self, task: Task, reason: str) -> None:
        """Task → Releasing; its resources become future idle for pipelined preemptors."""
        previous = task.status
        self.ssn.release(task)
        self.operations.append(("evict", task, (previous, reason)))

    def discard(self) -> None:
        """Undo every operation, last first; the session view is as before the statement."""
        for kind, task, data in reversed(self.operations):
            if kind == "evict":
                previous, _ = data  # type: ignore[misc]
                self.ssn.unrelease(task, previous)
            else:
                self.ssn.unplace(task)
        self.operations.clear()

    def commit(self) -> list[tuple[Task, str]]:
        """Record evictions and binds as session decisions; returns (task, error) failures (none in a pure session:
        binding errors surface when the decisions are applied to the cluster)."""
        failures: list[tuple[Task, str]] = []
        for kind, task, data in self.operations:
            if kind == "evict":
                _, reason = data  # type: ignore[misc]
                self.ssn.record_eviction(task, reason)
            elif kind == "allocate":
                self.ssn.record_bind(task)
        self.operations.clear()
        return failures

    def merge(self, other: Statement) -> None:
        """Append another statement's operations (their effects are already applied)."""
        self.operations.extend(other.operations)
        other.operations.clear()
