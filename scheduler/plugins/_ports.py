"""Host ports: kube-scheduler's NodePorts filter over the session's pod view (ports of pods already on a node
and of pods placed earlier in the session). Used by `plugins/predicates.py`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from lahar.scheduler.plugins._podview import PodView

__all__ = ["PORTS_IN_USE", "conflicts", "port_conflict"]

PORTS_IN_USE = "node(s) didn't have free ports for the requested pod ports"
ALL_IPS = "0.0.0.0"

Port = tuple[str, str, int]  # (hostIP, protocol, hostPort), sanitised: "" → 0.0.0.0 / TCP


def port_conflict(want: Port, used: Counter[Port] | set[Port]) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 conflicts with the same protocol/port on any IP; a specific IP with
    the same IP or 0.0.0.0."""
    ip, proto, port = want
    if port <= 0:
        return False
    if ip == ALL_IPS:
        return any(p[1] == proto and p[2] == port for p in used)
    return (ALL_IPS, proto, port) in used or (ip, proto, port) in used


def conflicts(view: PodView, want: tuple[Port, ...]) -> np.ndarray:
    """Per node: does any wanted host port clash with the ports in use there?"""
    bad = np.zeros(view.n, dtype=bool)
    for node, used in view.port_index().items():
        if used and any(port_conflict(w, used) for w in want):
            bad[node] = True
    return bad
