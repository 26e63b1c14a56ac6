"""allocate: the pending reason of a gang that cannot be ready although some node fits its first task (allocate's
`_exhausted`): per node the plugin that rejects it, else the pod count or the resource that runs out first."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session
from tests.builders import node, pod, podgroup, queue, tiers_conf
from tests.builders import objs as _objs

CONF = tiers_conf("allocate", ["gang", "proportion", "predicates", "nodeorder"])


def message(nodes: list[Any], size: int = 3, cpu: str = "1") -> str:
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    pods = [pod(f"p{i}").req(cpu, "1G").group("pg1").role("master" if i == 0 else "worker") for i in range(size)]
    snap = snapshots.build(pods=_objs(pods), nodes=_objs(nodes), podgroups=_objs([podgroup("pg1").queue("q1")
                                                                                  .min(size)]),
                           queues=_objs([queue("q1")]))
    d = run_session(snap, c, registry=registry, uid="ssn-1")
    assert d.binds == []
    return d.pod_conditions[0].event_message


CASES = [
    pytest.param([node("a").alloc("4", "8Gi", 1), node("b").alloc("1", "8Gi", 10)],
                 "0/2 nodes are available: 1 Insufficient cpu, 1 Too many pods.", id="pods-then-cpu"),
    pytest.param([node("a").alloc("1", "8Gi", 10), node("b").alloc("1", "8Gi", 10),
                  node("c").alloc("8", "8Gi", 10).taint("gpu")],
                 "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: }, 2 Insufficient cpu.",
                 id="taint-and-cpu"),
    pytest.param([node("a").alloc("2", "8Gi", 1), node("b").alloc("4", "1Gi", 10)],
                 "0/2 nodes are available: 1 Insufficient memory, 1 Too many pods.", id="memory-runs-out-first"),
]


@pytest.mark.parametrize(("nodes", "want"), CASES)
def test_reason_per_node_class(nodes: list[Any], want: str) -> None:
    got = message(nodes)
    assert got == want, got
