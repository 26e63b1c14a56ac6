"""topology.volcano.sh/v1alpha1: HyperNode, the network-topology tree, and the NetworkTopologySpec jobs use.

Read by the scheduler's network-topology-aware placement; Job, PodGroup and partitions refer to its tiers.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from lahar.kube.models._base import LEFT_TO_RIGHT, Int, Kind, VolcanoModel

__all__ = [
    "ExactMatch",
    "HyperNode",
    "HyperNodeSpec",
    "HyperNodeStatus",
    "MemberSelector",
    "MemberSpec",
    "MemberType",
    "NetworkTopologyMode",
    "NetworkTopologySpec",
    "RegexMatch",
]

GROUP_VERSION = "topology.volcano.sh/v1alpha1"


class NetworkTopologyMode(enum.StrEnum):
    HARD = "hard"
    SOFT = "soft"


class MemberType(enum.StrEnum):
    NODE = "Node"
    HYPER_NODE = "HyperNode"


class NetworkTopologySpec(VolcanoModel):
    """`{mode, highestTierAllowed, highestTierName}` on a Job, a PodGroup, a partition or a sub-group."""

    mode: Annotated[NetworkTopologyMode | str, LEFT_TO_RIGHT] | None = None
    highest_tier_allowed: Int | None = None
    highest_tier_name: str | None = None


class ExactMatch(VolcanoModel):
    name: str | None = None


class RegexMatch(VolcanoModel):
    pattern: str | None = None


class MemberSelector(VolcanoModel):
    """Exactly one of exactMatch, regexMatch, labelMatch (a LabelSelector, Node members only)."""

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: dict[str, Any] | None = None


class MemberSpec(VolcanoModel):
    type: Annotated[MemberType | str, LEFT_TO_RIGHT] | None = None
    selector: MemberSelector | None = None


class HyperNodeSpec(VolcanoModel):
    tier: Int | None = None
    tier_name: str | None = None
    members: list[MemberSpec] | None = None


class HyperNodeStatus(VolcanoModel):
    conditions: list[dict[str, Any]] | None = None  # metav1.Condition
    node_count: Int | None = None


class HyperNode(Kind):
    API_VERSION: ClassVar[str] = GROUP_VERSION
    KIND: ClassVar[str] = "HyperNode"

    spec: HyperNodeSpec | None = None
    status: HyperNodeStatus | None = None
