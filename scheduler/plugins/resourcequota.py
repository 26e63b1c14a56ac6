"""resourcequota: a PodGroup is enqueued only when its minResources fit its namespace's ResourceQuotas (Volcano's
`plugins/resourcequota`).

The quotas are the snapshot's v1 ResourceQuotas (`Snapshot.extras["resourcequotas"]`). For each quota of the job's
namespace, the PodGroup's `spec.minResources` restricted to the names the quota limits, added to the quota's
`status.used` and to what this session already enqueued in the namespace, must stay within `status.hard`; else the
job is rejected and its PodGroup gets an `Unschedulable` event naming the requested, used and limited amounts. A
quota's `requests.<name>` limits `<name>` as well (Volcano compares bare names only), and a quota without a status
yet counts with `spec.hard` and nothing used. Quota scopes are not supported (as upstream). The decision is the
pure `check` over plain resource lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import quantity
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Job

__all__ = ["Quota", "ResourceQuota", "check", "quotas_by_namespace"]

REASON = "Unschedulable"  # scheduling.PodGroupUnschedulableType


@dataclass(frozen=True, slots=True)
class Quota:
    """One ResourceQuota's limits and usage, by the resource names a PodGroup's minResources uses."""

    name: str
    hard: dict[str, quantity.Quantity] = field(default_factory=dict)
    used: dict[str, quantity.Quantity] = field(default_factory=dict)


def _list(rl: Any) -> dict[str, quantity.Quantity]:
    """A ResourceList; values that are not quantities are dropped (they cannot be compared)."""
    out: dict[str, quantity.Quantity] = {}
    for name, v in (rl or {}).items() if isinstance(rl, Mapping) else ():
        try:
            out[str(name)] = quantity.parse(v)
        except (ValueError, TypeError):
            continue
    return out


def _bare(rl: Mapping[str, quantity.Quantity], *, tighter: bool) -> dict[str, quantity.Quantity]:
    """`requests.<name>` as `<name>`; when the bare name is given too, the smaller of the two limits (`tighter`)
    or the larger of the two usages."""
    out: dict[str, quantity.Quantity] = {}
    for name, v in rl.items():
        key = name.removeprefix("requests.")
        if key not in out or (v < out[key] if tighter else v > out[key]):
            out[key] = v
    return out


def quota_of(obj: Mapping[str, Any]) -> Quota:
    """`status.hard` and `status.used`; `spec.hard` and nothing used while the quota has no status yet."""
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    hard = status.get("hard") if status.get("hard") else spec.get("hard")
    return Quota((obj.get("metadata") or {}).get("name") or "", _bare(_list(hard), tighter=True),
                 _bare(_list(status.get("used")), tighter=False))


def quotas_by_namespace(objs: Iterable[Mapping[str, Any]]) -> dict[str, list[Quota]]:
    """Quotas per namespace, in name order."""
    out: dict[str, list[Quota]] = {}
    for obj in sorted(objs, key=lambda o: ((o.get("metadata") or {}).get("namespace") or "",
                                           (o.get("metadata") or {}).get("name") or "")):
        out.setdefault((obj.get("metadata") or {}).get("namespace") or "default", []).append(quota_of(obj))
    return out


def _text(rl: Mapping[str, quantity.Quantity], names: Sequence[str]) -> str:
    return ",".join(f"{n}={rl[n]}" for n in names if n in rl) or "<none>"


def check(min_resources: Mapping[str, Any] | None, quotas: Sequence[Quota],
          pending: Mapping[str, quantity.Quantity] | None = None) -> str | None:
    """None when `min_resources` fits every quota (with `pending`, what this session already let in), else the
    reason for the first quota it does not fit."""
    request = _list(min_resources)
    for q in quotas:
        asked = {n: v for n, v in request.items() if n in q.hard}
        if not asked:
            continue
        used = quantity.add(q.used, pending) if pending else dict(q.used)
        over = sorted(n for n, v in asked.items() if used.get(n, quantity.Quantity()) + v > q.hard[n])
        if over:
            return (f"resource quota insufficient, requested: {_text(asked, over)}, used: {_text(q.used, over)}, "
                    f"limited: {_text(q.hard, over)}")
    return None


class ResourceQuota:
    name = "resourcequota"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.quotas: dict[str, list[Quota]] = {}
        self.pending: dict[str, dict[str, quantity.Quantity]] = {}
        self._ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self.quotas = quotas_by_namespace((ssn.snapshot.extras.get("resourcequotas") or {}).values())
        self.pending = {}

    @staticmethod
    def _min_resources(job: Job) -> Any:
        return (job.podgroup.get("spec") or {}).get("minResources")

    def job_enqueueable(self, job: Job) -> Vote:
        mr = self._min_resources(job)
        quotas = self.quotas.get(job.namespace)
        if mr is None or not quotas:
            return Vote.PERMIT
        reason = check(mr, quotas, self.pending.get(job.namespace))
        if reason is None:
            return Vote.PERMIT
        if self._ssn is not None:
            self._ssn.record_podgroup_event(job, "Normal", REASON, reason)
        return Vote.REJECT

    def job_enqueued(self, job: Job) -> None:
        mr = self._min_resources(job)
        if mr is None or not self.quotas.get(job.namespace):
            return
        self.pending[job.namespace] = quantity.add(self.pending.get(job.namespace), _list(mr))

    def on_session_close(self, ssn: Session) -> None:
        self._ssn = None
        self.quotas, self.pending = {}, {}
