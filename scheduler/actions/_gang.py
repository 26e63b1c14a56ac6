"""The victim-set choice of gangpreempt / gangreclaim: pure data in, the cheapest set of victim bundles out.

A victim job offers at most two bundles in a domain (Volcano `actions/utils/bundle.go`): a *safe* bundle, the
tasks it can lose while staying at or above its minAvailable, and a *whole* bundle, every running task of the job
(the gang is broken, so all of it goes). `choose` picks, per job, none, safe or whole so that the domain's idle
resources plus what the bundles free cover the preemptor's need, with the fewest broken gangs, then the fewest
evicted pods, then the lowest victim priority. Used by `actions/gangpreempt.py`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lahar.scheduler.framework.nodes import EPSILON

__all__ = ["EXHAUSTIVE_JOBS", "Bundle", "Plan", "bundles_of", "choose"]

# Beyond this many candidate victim jobs only the lowest-ranked ones are searched (3^8 = 6,561 combinations)
EXHAUSTIVE_JOBS = 8


@dataclass(frozen=True, slots=True)
class Bundle:
    """Tasks of one victim job evicted together; `freed` is what they free inside the domain."""

    job: str
    whole: bool
    tasks: tuple[str, ...]
    freed: np.ndarray
    priority: int = 0
    rank: int = 0  # lower = offered first (lowest job order / least-served queue first)


@dataclass(frozen=True, slots=True)
class Plan:
    bundles: tuple[Bundle, ...]

    @property
    def tasks(self) -> list[str]:
        return [t for b in self.bundles for t in b.tasks]

    @property
    def cost(self) -> tuple[int, int, int, tuple[int, ...]]:
        return (sum(b.whole for b in self.bundles), len(self.tasks), sum(b.priority for b in self.bundles),
                tuple(sorted(b.rank for b in self.bundles)))


def bundles_of(job: str, *, local: Sequence[tuple[str, np.ndarray]], running: int, min_available: int,
               everywhere: Sequence[str], priority: int = 0, rank: int = 0, allow_whole: bool = True,
               budget: int | None = None) -> list[Bundle]:
    """The bundles a victim job offers: `local` = its evictable tasks inside the domain, lowest task order first,
    with their requests; `running` = its ready tasks; `everywhere` = all its running tasks (what a whole bundle
    evicts). `budget` = pods a PodDisruptionBudget still lets go (None: no PDB); a bundle above it is not offered."""
    if not local:
        return []
    out: list[Bundle] = []
    surplus = running - min_available
    if surplus > 0:
        safe = local[:surplus]
        if budget is None or len(safe) <= budget:
            out.append(Bundle(job, False, tuple(t for t, _ in safe), _sum(r for _, r in safe), priority, rank))
    elif surplus < 0:  # already broken: whatever runs may go without breaking anything more (Volcano)
        if budget is None or len(local) <= budget:
            out.append(Bundle(job, False, tuple(t for t, _ in local), _sum(r for _, r in local), priority, rank))
        return out
    if allow_whole and (budget is None or len(everywhere) <= budget):
        out.append(Bundle(job, True, tuple(everywhere), _sum(r for _, r in local), priority, rank))
    return out


def choose(need: np.ndarray, idle: np.ndarray, bundles: Sequence[Bundle]) -> list[Plan]:
    """Every set of bundles (at most one per job) whose freed resources with `idle` cover `need`, cheapest
    first; [] when none does. An empty plan comes first when `idle` already covers `need`."""
    by_job: dict[str, list[Bundle]] = {}
    for b in sorted(bundles, key=lambda b: (b.rank, b.job, b.whole)):
        by_job.setdefault(b.job, []).append(b)
    jobs = sorted(by_job, key=lambda j: (by_job[j][0].rank, j))[:EXHAUSTIVE_JOBS]
    options = [[None, *by_job[j]] for j in jobs]
    plans: list[Plan] = []
    for combo in itertools.product(*options):
        chosen = tuple(b for b in combo if b is not None)
        freed = idle.astype(float, copy=True)
        for b in chosen:
            freed = freed + b.freed
        if bool(np.all(need <= freed + EPSILON)):
            plans.append(Plan(chosen))
    plans.sort(key=lambda p: p.cost)
    return plans


def _sum(rows: object) -> np.ndarray:
    rows = list(rows)  # type: ignore[call-overload]
    return np.sum(rows, axis=0) if rows else np.zeros(0)
