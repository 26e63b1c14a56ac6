"""The victim-set choice of gangpreempt / gangreclaim: pure data in, the cheapest set of victim bundles out.

A victim job offers at most two bundles in a domain (Volcano `actions/utils/bundle.go`): a *safe* bundle, the
tasks it can lose while staying at or above its minAvailable, and a *whole* bundle, every running task of the job
(the gang is broken, so all of it goes). `choose` picks, per job, none, safe or whole so that the domain's idle
resources plus what the bundles free cover the preemptor's need, with the fewest broken gangs, then the fewest
evicted pods, then the lowest victim priority. Used by `actions/gangpreempt.py`.
"""

from __future__ import annotations

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
    def cost(self) -> tuple[int, int, int]:
        """What `choose` minimises: broken gangs, evicted pods, the victims' priority (then rank order)."""
        return (sum(b.whole for b in self.bundles), len(self.tasks), sum(b.priority for b in self.bundles))


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


def choose(need: np.ndarray, idle: np.ndarray, bundles: Sequence[Bundle], limit: int = 4) -> list[Plan]:
    """The `limit` cheapest sets of bundles (at most one per job) whose freed resources with `idle` cover `need`,
    cheapest first; [] when none does. An empty plan comes first when `idle` already covers `need`. Every
    combination is scored at once as arrays (3^8 rows at most), only the winners become Plans."""
    by_job: dict[str, list[Bundle]] = {}
    for b in sorted(bundles, key=lambda b: (b.rank, b.job, b.whole)):
        by_job.setdefault(b.job, []).append(b)
    jobs = sorted(by_job, key=lambda j: (by_job[j][0].rank, j))[:EXHAUSTIVE_JOBS]
    dims = len(need)
    freed = np.zeros((1, dims))
    whole = np.zeros(1, dtype=np.int64)
    pods = np.zeros(1, dtype=np.int64)
    prio = np.zeros(1, dtype=np.int64)
    picks = np.zeros((1, 0), dtype=np.int64)  # per job: 0 = none, k = its k-th bundle
    for j in jobs:
        opts = by_job[j]
        f = np.vstack([np.zeros(dims), *[_vec(o.freed, dims) for o in opts]])
        w = np.array([0, *[int(o.whole) for o in opts]])
        c = np.array([0, *[len(o.tasks) for o in opts]])
        p = np.array([0, *[o.priority for o in opts]])
        k = len(opts) + 1
        freed = (freed[:, None, :] + f[None, :, :]).reshape(-1, dims)
        whole = (whole[:, None] + w[None, :]).reshape(-1)
        pods = (pods[:, None] + c[None, :]).reshape(-1)
        prio = (prio[:, None] + p[None, :]).reshape(-1)
        picks = np.hstack([np.repeat(picks, k, axis=0), np.tile(np.arange(k), len(picks))[:, None]])
    ok = np.all(need[None, :] <= idle[None, :] + freed + EPSILON, axis=1)
    rows = np.flatnonzero(ok)
    if len(rows) == 0:
        return []
    # last tie-break: the set holding the earliest job in rank order that the other lacks (a bit per job, the
    # first-ranked job the highest bit, the larger mask first)
    n = len(jobs)
    mask = ((picks[rows] > 0) * (1 << np.arange(n - 1, -1, -1, dtype=np.int64))).sum(axis=1) if n else rows * 0
    order = np.lexsort((-mask, prio[rows], pods[rows], whole[rows]))[:limit]
    return [Plan(tuple(by_job[jobs[i]][int(v) - 1] for i, v in enumerate(picks[r]) if v)) for r in rows[order]]


def _vec(v: np.ndarray, dims: int) -> np.ndarray:
    return v if len(v) == dims else np.zeros(dims)


def _sum(rows: object) -> np.ndarray:
    rows = list(rows)  # type: ignore[call-overload]
    return np.sum(rows, axis=0) if rows else np.zeros(0)
