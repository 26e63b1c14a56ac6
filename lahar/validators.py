"""ConfigMap checks that cross layers: the scheduler's conf parser, registered with `policies.loading` from here.

`policies` sits below `scheduler` and `webhooks` must not import `scheduler`, so `lahar webhook` (and tests) call
`register()` before serving: `validate_configmap` — and so `/configmaps/validate` — then refuses a
`lahar-scheduler-configmap` the scheduler would reject (unknown action or plugin, bad YAML, missing key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar.policies import loading
from lahar.policies.errors import ConfigError

__all__ = ["parse_scheduler_configmap", "register"]


def parse_scheduler_configmap(cm: Mapping[str, Any]) -> Any:
    """`lahar-scheduler-configmap` → `SchedulerConf`, against the in-tree actions and plugins; `ConfigError` at
    `data[volcano-scheduler.conf]` with the scheduler's own reason (`failed to find Action bogus`)."""
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.registry import in_tree_registry

    where = f"data[{loading.SCHEDULER_KEY}]"
    text = (cm.get("data") or {}).get(loading.SCHEDULER_KEY)
    if text is None:
        raise ConfigError([(where, "required key is missing")], source=f"ConfigMap {loading.key_of(cm)}")
    registry = in_tree_registry()
    try:
        conf = confs.load(text, actions=registry.action_names, plugins=registry.plugin_names)
        registry.check_arguments(conf)
        return conf
    except confs.ConfError as e:
        raise ConfigError([(where, " ".join(str(e).split()))], source=f"ConfigMap {loading.key_of(cm)}") from None


def register() -> None:
    """Make `policies.loading.validate_configmap` check `lahar-scheduler-configmap` (idempotent)."""
    loading.register_validator(loading.SCHEDULER_CONFIGMAP, parse_scheduler_configmap)
