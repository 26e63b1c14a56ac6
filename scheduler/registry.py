"""The built-in actions and plugins, by Volcano's names. Adding a plugin = one module + one line here.

Lives outside `scheduler.framework` on purpose: the framework never imports a plugin.
"""

from __future__ import annotations

from scheduler.actions.allocate import Allocate
from scheduler.actions.backfill import Backfill
from scheduler.actions.enqueue import Enqueue
from scheduler.actions.preempt import Preempt
from scheduler.actions.reclaim import Reclaim
from scheduler.framework.registry import Registry
from scheduler.plugins.binpack import BinPack
from scheduler.plugins.capacity import Capacity
from scheduler.plugins.conformance import Conformance
from scheduler.plugins.deviceshare import DeviceShare
from scheduler.plugins.drf import Drf
from scheduler.plugins.gang import Gang
from scheduler.plugins.nodeorder import NodeOrder
from scheduler.plugins.numaaware import NumaAware
from scheduler.plugins.overcommit import Overcommit
from scheduler.plugins.predicates import Predicates
from scheduler.plugins.priority import Priority
from scheduler.plugins.proportion import Proportion
from scheduler.plugins.sla import Sla

__all__ = ["in_tree_registry"]


def in_tree_registry() -> Registry:
    """A fresh registry with every built-in action and plugin."""
    return (Registry()
            .add_action("enqueue", Enqueue)
            .add_action("allocate", Allocate)
            .add_action("backfill", Backfill)
            .add_action("preempt", Preempt)
            .add_action("reclaim", Reclaim)
            .add_plugin("priority", Priority)
            .add_plugin("gang", Gang)
            .add_plugin("conformance", Conformance)
            .add_plugin("predicates", Predicates)
            .add_plugin("proportion", Proportion)
            .add_plugin("drf", Drf)
            .add_plugin("capacity", Capacity)
            .add_plugin("binpack", BinPack)
            .add_plugin("overcommit", Overcommit)
            .add_plugin("sla", Sla)
            .add_plugin("nodeorder", NodeOrder)
            .add_plugin("numa-aware", NumaAware)
            .add_plugin("deviceshare", DeviceShare))
