"""In-tree plugins (Volcano `pkg/scheduler/plugins`): one module per plugin, one class with `name` and the hook
methods of `scheduler.framework.hooks` it implements; listed by name in `scheduler.registry.in_tree_registry`.
"""

from __future__ import annotations

from lahar.scheduler.plugins.conformance import Conformance
from lahar.scheduler.plugins.gang import Gang
from lahar.scheduler.plugins.nodeorder import NodeOrder
from lahar.scheduler.plugins.predicates import Predicates
from lahar.scheduler.plugins.priority import Priority
from lahar.scheduler.plugins.proportion import Proportion

__all__ = ["Conformance", "Gang", "NodeOrder", "Predicates", "Priority", "Proportion"]
