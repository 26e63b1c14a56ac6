"""Topology Manager policy names and policy options, parsed like the kubelet's `NewPolicyOptions`.

Read by `scheduler.topology.merging.merge` (and by the numa-aware plugin, which reads the node's policy from its
Numatopology). Errors carry the kubelet's own messages, so "why is this node unusable" reads like a kubelet log.

`max-allowable-numa-nodes` in lahar: the value is parsed and validated exactly like the kubelet (an integer, at
least 8, default 8), but the merge itself has no cap: it is exact and fast for any number of NUMA nodes, so a
node is never refused for having more. `numa_limit_error()` answers the separate question "would this node's
kubelet refuse to start its Topology Manager?" with the kubelet's message, for callers that want to report it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "BEST_EFFORT",
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "MAX_ALLOWABLE_NUMA_NODES",
    "NONE",
    "POLICIES",
    "PREFER_CLOSEST_NUMA_NODES",
    "RESTRICTED",
    "SINGLE_NUMA_NODE",
    "PolicyOptionError",
    "PolicyOptions",
    "check_policy",
    "numa_limit_error",
    "parse_options",
]

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

_KNOWN = (PREFER_CLOSEST_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES)
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class PolicyOptionError(ValueError):
    """A policy, a policy option or the NUMA information is unusable (the kubelet would not start)."""


@dataclass(frozen=True)
class PolicyOptions:
    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES


def _go_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _atoi(value: str) -> int | None:
    """Go's `strconv.Atoi`: optional sign, then ASCII digits only."""
    body = value[1:] if value[:1] in "+-" else value
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(value)


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise PolicyOptionError(f"unknown policy: {_go_quote(policy)}")


def parse_options(options: Mapping[str, str] | PolicyOptions | None) -> PolicyOptions:
    """The kubelet's `--topology-manager-policy-options` map → `PolicyOptions` (both options are GA/beta and need
    no feature gate; anything else is unknown, including upstream's alpha options, which lahar does not model)."""
    if options is None:
        return PolicyOptions()
    if isinstance(options, PolicyOptions):
        return options
    prefer = False
    limit = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    for name, value in options.items():
        if name not in _KNOWN:
            raise PolicyOptionError(f"unknown Topology Manager Policy option: {_go_quote(name)}")
        value = str(value)
        if name == PREFER_CLOSEST_NUMA_NODES:
            if value in _TRUE:
                prefer = True
            elif value in _FALSE:
                prefer = False
            else:
                raise PolicyOptionError(f"bad value for option {_go_quote(name)}: "
                                        f"strconv.ParseBool: parsing {_go_quote(value)}: invalid syntax")
        else:
            n = _atoi(value)
            if n is None:
                raise PolicyOptionError(f"unable to convert policy option to integer {_go_quote(name)}: "
                                        f"strconv.Atoi: parsing {_go_quote(value)}: invalid syntax")
            if n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                raise PolicyOptionError(f"the minimum value of {_go_quote(name)} should not be less than "
                                        f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}")
            limit = n
    return PolicyOptions(prefer_closest_numa=prefer, max_allowable_numa_nodes=limit)


def numa_limit_error(policy: str, numa_node_count: int, options: Mapping[str, str] | PolicyOptions | None = None
                     ) -> str | None:
    """The kubelet's `NewManager` refusal for a machine with too many NUMA nodes, or None if it would start.

    Policy `none` never parses options nor checks the limit. lahar's merge does not call this: it has no cap.
    """
    if policy == NONE:
        return None
    opts = parse_options(options)
    if numa_node_count > opts.max_allowable_numa_nodes:
        return f"unsupported on machines with more than {opts.max_allowable_numa_nodes} NUMA Nodes"
    return None
