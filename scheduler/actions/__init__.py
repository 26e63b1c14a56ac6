"""Actions of a session (Volcano `pkg/scheduler/actions`): enqueue, allocate, backfill, preempt, reclaim,
gangpreempt, gangreclaim.

Each is a class with `name` and `execute(ssn)`, built by a factory(arguments) listed in `scheduler.registry`.
"""

from __future__ import annotations

from lahar.scheduler.actions.allocate import Allocate
from lahar.scheduler.actions.backfill import Backfill
from lahar.scheduler.actions.enqueue import Enqueue
from lahar.scheduler.actions.gangpreempt import GangPreempt, GangReclaim
from lahar.scheduler.actions.preempt import Preempt
from lahar.scheduler.actions.reclaim import Reclaim

__all__ = ["Allocate", "Backfill", "Enqueue", "GangPreempt", "GangReclaim", "Preempt", "Reclaim"]
