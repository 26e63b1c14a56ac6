"""PodGroup `subGroupPolicy` as pure functions (Volcano SubJobInfo): which subgroup a pod belongs to (labelSelector,
then the values of matchLabelKeys), the subgroups of a job, and the subgroup-level gang rule (minSubGroups per
policy). The allocate action's subgroup placement (scheduler/actions/_subgroups.py) is built on these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import selectors

__all__ = ["SubGroup", "count_ready", "match_values", "minimums", "partition", "ready", "subgroup_id"]


@dataclass(slots=True)
class SubGroup:
    """One subgroup: its policy, its label values, the pods (uids) in it, and its own networkTopology."""

    policy: str
    values: tuple[str, ...]
    size: int
    network_topology: Mapping[str, Any] | None
    members: list[str] = field(default_factory=list)

    @property
    def uid(self) -> str:
        return subgroup_id(self.policy, self.values)


def subgroup_id(policy: str, values: Sequence[str]) -> str:
    """"<policy>-<v1>-<v2>" (Volcano getSubJobID, without the job prefix)."""
    return f"{policy}-{'-'.join(values)}"


def match_values(policy: Mapping[str, Any], labels: Mapping[str, str] | None) -> tuple[str, ...] | None:
    """Volcano getSubJobMatchValues: None when the pod is not in this policy (its labels do not match the
    labelSelector, or a matchLabelKeys label is missing or empty, or the selector is invalid); else the values of
    matchLabelKeys in order (empty: the policy has no keys)."""
    labels = labels or {}
    sel = policy.get("labelSelector")
    if sel is not None:
        try:
            if not isinstance(sel, Mapping) or not selectors.from_label_selector(sel).matches(labels):
                return None
        except (selectors.SelectorError, AttributeError, TypeError):
            return None
    out = []
    keys = policy.get("matchLabelKeys") or ()
    for key in keys if isinstance(keys, list | tuple) else ():
        value = labels.get(key)
        if not value:
            return None
        out.append(value)
    return tuple(out)


def partition(policies: Sequence[Mapping[str, Any]],
              pods: Iterable[tuple[str, Mapping[str, str] | None]]) -> dict[str, SubGroup]:
    """The subgroups of a job: each pod (uid, labels) goes to the first policy whose match values are non-empty
    (Volcano getOrCreateSubJob: a policy without matchLabelKeys takes no pod); pods that match none are in no
    subgroup. Subgroups by id, in order of first member."""
    out: dict[str, SubGroup] = {}
    for uid, labels in pods:
        for policy in policies:
            values = match_values(policy, labels)
            if not values:
                continue
            name = str(policy.get("name") or "")
            key = subgroup_id(name, values)
            group = out.get(key)
            if group is None:
                topology = policy.get("networkTopology")
                group = out[key] = SubGroup(name, values, max(_int(policy.get("subGroupSize"), 1), 1),
                                            topology if isinstance(topology, Mapping) and topology else None)
            group.members.append(uid)
            break
    return out


def minimums(policies: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """minSubGroups per policy name (unset: 0)."""
    return {str(p.get("name") or ""): _int(p.get("minSubGroups"), 0) for p in policies}


def _int(value: Any, default: int) -> int:
    """An int32 field as stored; admission refuses anything else, one that got stored anyway reads as `default`."""
    if value is None or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def ready(counts: Mapping[str, int], mins: Mapping[str, int]) -> bool:
    """Volcano checkSubJobCondition: every policy has at least minSubGroups ready subgroups (0: no rule)."""
    return all(counts.get(name, 0) >= m for name, m in mins.items() if m > 0)


def count_ready(groups: Iterable[SubGroup], placed: Mapping[str, int]) -> Counter[str]:
    """Per policy, the subgroups with at least `size` members ready or placed (`placed`: per subgroup id)."""
    out: Counter[str] = Counter()
    for g in groups:
        if placed.get(g.uid, 0) >= g.size:
            out[g.policy] += 1
    return out
