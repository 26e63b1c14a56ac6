"""overcommit: admit (enqueue) a PodGroup while the minResources of everything admitted fits in the cluster total
× `overcommit-factor` (default 1.2; per resource `overcommit-factor.<name>`) minus what is in use.

Volcano's `plugins/overcommit` (spec §5.4). A factor below 1 falls back to the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.nodes import EPSILON
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import ALLOCATED, Job

__all__ = ["DEFAULT_FACTOR", "FACTOR_KEY", "Overcommit", "parse_factors"]

FACTOR_KEY = "overcommit-factor"
DEFAULT_FACTOR = 1.2


def parse_factors(args: Mapping[str, Any]) -> dict[str, float]:
    """`overcommit-factor` (key kept as is) and `overcommit-factor.<resource>` (key = the resource); numbers only;
    any factor < 1 is reset to the default."""
    out = {FACTOR_KEY: DEFAULT_FACTOR}
    for key, value in args.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if key == FACTOR_KEY:
            out[FACTOR_KEY] = float(value)
        elif key.startswith(FACTOR_KEY + "."):
            out[key[len(FACTOR_KEY) + 1:]] = float(value)
    return {k: (DEFAULT_FACTOR if v < 1.0 else v) for k, v in out.items()}


class Overcommit:
    name = "overcommit"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.factors = parse_factors(self.arguments)
        self.ssn: Session | None = None
        self.idle = np.zeros(0)
        self.inqueue = np.zeros(0)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        default = self.factors[FACTOR_KEY]
        ratios = np.array([self.factors.get(n, default) for n in ssn.resources.names])
        used = ssn.arrays.used.sum(axis=0) if len(ssn.arrays) else ssn.resources.zeros()
        self.idle = ssn.total * ratios - used
        self.inqueue = ssn.resources.zeros()
        for job in ssn.jobs.values():
            if job.min_resources is None:
                continue
            if job.phase == "Inqueue":
                self.inqueue += job.min_resources
            elif job.phase == "Running" and job.count(*ALLOCATED) >= job.min_available:
                self.inqueue += np.maximum(job.min_resources - job.allocated, 0.0)

    def job_enqueueable(self, job: Job) -> Vote:
        """Permit when inqueue + minResources ≤ idle on the dimensions the job asks for."""
        assert self.ssn is not None
        if job.min_resources is None:
            return Vote.PERMIT
        req = job.min_resources
        need = self.inqueue + req
        dims = req > 0
        if bool(np.all(need[dims] <= self.idle[dims] + EPSILON)):
            return Vote.PERMIT
        self.ssn.record_podgroup_event(job, "Normal", "Unschedulable", "resource in cluster is overused")
        return Vote.REJECT

    def job_enqueued(self, job: Job) -> None:
        if job.min_resources is not None:
            self.inqueue += job.min_resources
