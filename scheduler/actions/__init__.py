"""Actions of a session (Volcano `pkg/scheduler/actions`): enqueue, allocate, backfill, preempt, reclaim.

Each is a class with `name` and `execute(ssn)`, built by a factory(arguments) listed in `scheduler.registry`.
"""

from __future__ import annotations

from scheduler.actions.allocate import Allocate
from scheduler.actions.backfill import Backfill
from scheduler.actions.enqueue import Enqueue
from scheduler.actions.preempt import Preempt
from scheduler.actions.reclaim import Reclaim

__all__ = ["Allocate", "Backfill", "Enqueue", "Preempt", "Reclaim"]
