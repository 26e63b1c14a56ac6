"""The built-in actions and plugins, by Volcano's names. Adding a plugin = one module + one line here.

Lives outside `scheduler.framework` on purpose: the framework never imports a plugin.
"""

from __future__ import annotations

from lahar.scheduler.actions.allocate import Allocate
from lahar.scheduler.actions.backfill import Backfill
from lahar.scheduler.actions.enqueue import Enqueue
from lahar.scheduler.actions.gangpreempt import GangPreempt, GangReclaim
from lahar.scheduler.actions.preempt import Preempt
from lahar.scheduler.actions.reclaim import Reclaim
from lahar.scheduler.actions.shuffle import Shuffle
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.plugins.binpack import BinPack
from lahar.scheduler.plugins.capacity import Capacity
from lahar.scheduler.plugins.cdp import CooldownProtection
from lahar.scheduler.plugins.conformance import Conformance
from lahar.scheduler.plugins.deviceshare import DeviceShare
from lahar.scheduler.plugins.drf import Drf
from lahar.scheduler.plugins.extender import Extender
from lahar.scheduler.plugins.gang import Gang
from lahar.scheduler.plugins.networktopology import NetworkTopologyAware
from lahar.scheduler.plugins.nodegroup import NodeGroup
from lahar.scheduler.plugins.nodeorder import NodeOrder
from lahar.scheduler.plugins.numaaware import NumaAware
from lahar.scheduler.plugins.overcommit import Overcommit
from lahar.scheduler.plugins.pdb import Pdb
from lahar.scheduler.plugins.predicates import Predicates
from lahar.scheduler.plugins.priority import Priority
from lahar.scheduler.plugins.proportion import Proportion
from lahar.scheduler.plugins.rescheduling import Rescheduling
from lahar.scheduler.plugins.resource_strategy_fit import ResourceStrategyFit
from lahar.scheduler.plugins.resourcequota import ResourceQuota
from lahar.scheduler.plugins.sla import Sla
from lahar.scheduler.plugins.tasktopology import TaskTopology
from lahar.scheduler.plugins.tdm import Tdm
from lahar.scheduler.plugins.usage import Usage

__all__ = ["in_tree_registry"]


def in_tree_registry() -> Registry:
    """A fresh registry with every built-in action and plugin."""
    return (Registry()
            .add_action("enqueue", Enqueue)
            .add_action("allocate", Allocate)
            .add_action("backfill", Backfill)
            .add_action("preempt", Preempt)
            .add_action("reclaim", Reclaim)
            .add_action("gangpreempt", GangPreempt)
            .add_action("gangreclaim", GangReclaim)
            .add_action("shuffle", Shuffle)
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
            .add_plugin("deviceshare", DeviceShare)
            .add_plugin("network-topology-aware", NetworkTopologyAware)
            .add_plugin("nodegroup", NodeGroup)
            .add_plugin("resource-strategy-fit", ResourceStrategyFit)
            .add_plugin("pdb", Pdb)
            .add_plugin("cdp", CooldownProtection)
            .add_plugin("tdm", Tdm)
            .add_plugin("resourcequota", ResourceQuota)
            .add_plugin("task-topology", TaskTopology)
            .add_plugin("usage", Usage)
            .add_plugin("rescheduling", Rescheduling)
            .add_plugin("extender", Extender))
