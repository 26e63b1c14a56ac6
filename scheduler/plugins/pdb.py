"""pdb: keep preempt, reclaim and shuffle from evicting pods a PodDisruptionBudget protects (Volcano's `plugins/pdb`).

The budgets are the snapshot's policy/v1 PodDisruptionBudgets (`Snapshot.extras["poddisruptionbudgets"]`). Victims
are taken in the order offered; each one uses up one disruption of every budget in its namespace whose selector
matches its labels, unless the pod is already in the budget's `status.disruptedPods`; a pod that would drive any
matching budget below zero is kept, and then uses up none of them. The decision is the pure `allowed_victims` over plain `Budget`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.kube import selectors
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins._shared.victims import VictimFilter

__all__ = ["Budget", "Pdb", "allowed_victims", "budgets"]


@dataclass(frozen=True, slots=True)
class Budget:
    """One PodDisruptionBudget as the plugin reads it: where, whom, how many may go, and who is already going."""

    namespace: str
    selector: selectors.LabelSelector
    allowed: int
    disrupted: frozenset[str] = frozenset()


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def budgets(pdbs: Iterable[Mapping[str, Any]]) -> list[Budget]:
    """`Budget`s of policy/v1 objects: `status.disruptionsAllowed` (absent or not an integer: 0) and the names in
    `status.disruptedPods`. A budget whose selector does not parse is skipped, as upstream skips it."""
    out = []
    for pdb in pdbs:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        try:
            sel = selectors.from_label_selector(spec.get("selector"))
        except selectors.SelectorError:
            continue
        disrupted = status.get("disruptedPods")
        out.append(Budget(meta.get("namespace") or "default", sel, _int(status.get("disruptionsAllowed")),
                          frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset()))
    return out


def allowed_victims(budget_list: Sequence[Budget], pods: Sequence[tuple[str, str, Mapping[str, str]]]) -> list[bool]:
    """For each (namespace, name, labels), in order: may it be evicted? Evicting one takes one disruption from
    every matching budget it is not already disrupted under; a pod that would leave any of them below zero may
    not, and takes nothing from the others."""
    left = [b.allowed for b in budget_list]
    out = []
    for ns, name, labels in pods:
        hits = [i for i, b in enumerate(budget_list)
                if b.namespace == ns and name not in b.disrupted and b.selector.matches(labels)]
        ok = all(left[i] > 0 for i in hits)
        if ok:  # a pod that stays uses up nothing (Volcano also counts the kept pod against its other budgets)
            for i in hits:
                left[i] -= 1
        out.append(ok)
    return out


class Pdb(VictimFilter):
    name = "pdb"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.budgets: list[Budget] = []

    def on_session_open(self, ssn: Session) -> None:
        self.budgets = budgets((ssn.snapshot.extras.get("poddisruptionbudgets") or {}).values())

    def _filter(self, tasks: list[Task]) -> list[Task]:
        if not self.budgets:
            return list(tasks)
        keep = allowed_victims(self.budgets, [
            (t.namespace, t.name, (t.pod.get("metadata") or {}).get("labels") or {}) for t in tasks])
        return [t for t, ok in zip(tasks, keep, strict=True) if ok]


    def on_session_close(self, ssn: Session) -> None:
        self.budgets = []
