"""A one-call scheduler session for the tests (tests/builders): scheduler conf tiers and `run(pods=..., nodes=...)`.

`run` builds a snapshot from builders or plain dicts and runs one session of the in-tree registry over it.
"""

from __future__ import annotations

from typing import Any

import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Decisions
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_session

from ._base import objs

__all__ = ["ALLOCATE_CONF", "run", "tiers_conf"]


def tiers_conf(actions: str, *tiers: list[str | dict[str, Any]]) -> str:
    return yaml.safe_dump({"actions": actions, "tiers": [
        {"plugins": [p if isinstance(p, dict) else {"name": p} for p in tier]} for tier in tiers]})


# Volcano's allocate_test tier, minus drf (not in this plugin set).
ALLOCATE_CONF = tiers_conf("allocate", ["gang", "proportion", "predicates", "nodeorder"])


def run(*, pods: list[Any] = (), nodes: list[Any] = (), podgroups: list[Any] = (), queues: list[Any] = (),
        priority_classes: list[Any] = (), conf: str = ALLOCATE_CONF,  # type: ignore[assignment]
        **others: list[Any]) -> Decisions:
    """One session; `others` are more of `snapshot.build`'s kinds (e.g. `persistentvolumeclaims=[...]`)."""
    registry = in_tree_registry()
    c = confs.load(conf, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=objs(list(pods)), nodes=objs(list(nodes)), podgroups=objs(list(podgroups)),
                           queues=objs(list(queues)), priority_classes=objs(list(priority_classes)),
                           **{kind: objs(list(items)) for kind, items in others.items()})
    return run_session(snap, c, registry=registry, uid="ssn-1")
