"""Volcano's `volcano-scheduler.conf` (spec §5.1): YAML in, frozen `SchedulerConf` out.

Read at the edge (ConfigMap `lahar-scheduler-configmap`, `lahar simulate --conf`); sessions only see the frozen
model. An unknown action, plugin or field is a `ConfError` naming it, never a log line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lahar.kube import limits

__all__ = [
    "DEFAULT_CONF",
    "SWITCHES",
    "ConfError",
    "Configuration",
    "PluginOption",
    "SchedulerConf",
    "Tier",
    "default_conf",
    "load",
    "validate",
]

# Per-plugin switches Volcano accepts (pkg/scheduler/conf/scheduler_conf.go); all default to true when omitted.
SWITCHES: tuple[str, ...] = (
    "enableJobOrder", "enableNamespaceOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined",
    "enableTaskOrder", "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder",
    "enabledClusterOrder", "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob",
    "enableReservedNodes", "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused",
    "enabledAllocatable", "enabledHyperNodeOrder", "enabledSubJobReady", "enabledSubJobPipelined",
    "enabledSubJobOrder", "enabledHyperNodeGradient",
)

DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


_OFF_BY_DEFAULT = frozenset({"enableHierarchy"})


class ConfError(ValueError):
    """A scheduler configuration that cannot be used; the message names the offending action, plugin or field."""


class PluginOption(BaseModel):
    """One plugin of a tier: its name, the hook switches set in the file, and its free-form `arguments`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    switches: Mapping[str, bool] = Field(default_factory=dict)
    arguments: Mapping[str, Any] = Field(default_factory=dict)

    def enabled(self, switch: str | None) -> bool:
        """A switch not written in the file is on (Volcano's `ApplyPluginConfDefaults`), except `enableHierarchy`."""
        if switch is None:
            return True
        return self.switches.get(switch, switch not in _OFF_BY_DEFAULT)


class Tier(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    plugins: tuple[PluginOption, ...] = ()


class Configuration(BaseModel):
    """Per-action arguments (`configurations: [{name: preempt, arguments: {...}}]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: Mapping[str, Any] = Field(default_factory=dict)


class SchedulerConf(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...] = ()
    configurations: tuple[Configuration, ...] = ()
    metrics: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("actions", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(a.strip() for a in v.split(",") if a.strip())
        return v

    def action_arguments(self, name: str) -> Mapping[str, Any]:
        for c in self.configurations:
            if c.name == name:
                return c.arguments
        return {}

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]


def _plugin(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfError(f"{where}: a plugin must be a mapping, got {type(raw).__name__}")
    out: dict[str, Any] = {"switches": {}}
    for key, value in raw.items():
        if key == "name":
            out["name"] = value
        elif key == "arguments":
            out["arguments"] = dict(value or {})
        elif key in SWITCHES:
            if not isinstance(value, bool):
                raise ConfError(f"{where}.{key}: must be true or false, got {value!r}")
            out["switches"][key] = value
        else:
            raise ConfError(f"{where}: unknown field {key!r}")
    if not out.get("name"):
        raise ConfError(f"{where}: plugin without a name")
    return out


def load(text: str, *, actions: Iterable[str] | None = None, plugins: Iterable[str] | None = None) -> SchedulerConf:
    """Parse the YAML; with `actions` / `plugins` (a registry's names), reject names it does not know."""
    try:
        raw = limits.safe_load(text)  # bounded: the conf comes from a ConfigMap anyone with edit rights can write
    except (yaml.YAMLError, limits.LimitError) as e:
        raise ConfError(f"invalid YAML: {e}") from e
    if not isinstance(raw, Mapping):
        raise ConfError("the scheduler configuration must be a mapping")
    data: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "tiers":
            tiers = []
            for i, tier in enumerate(value or []):
                if not isinstance(tier, Mapping) or set(tier) - {"plugins"}:
                    raise ConfError(f"tiers[{i}]: unknown field(s) {sorted(set(tier) - {'plugins'})}"
                                    if isinstance(tier, Mapping) else f"tiers[{i}]: must be a mapping")
                tiers.append({"plugins": [_plugin(p, f"tiers[{i}].plugins[{j}]")
                                          for j, p in enumerate(tier.get("plugins") or [])]})
            data["tiers"] = tiers
        elif key in ("actions", "configurations", "metrics"):
            data[key] = value if value is not None else ({} if key == "metrics" else [])
        else:
            raise ConfError(f"unknown field {key!r}")
    if "actions" not in data:
        raise ConfError("actions: required")
    try:
        conf = SchedulerConf.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfError(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from e
    validate(conf, actions=actions, plugins=plugins)
    return conf


def validate(conf: SchedulerConf, *, actions: Iterable[str] | None = None,
             plugins: Iterable[str] | None = None) -> None:
    """Volcano's checks: known actions and plugins; proportion and hierarchical drf never together."""
    if actions is not None:
        known = set(actions)
        for name in conf.actions:
            if name not in known:
                raise ConfError(f"failed to find Action {name}")
    if plugins is not None:
        known = set(plugins)
        for name in conf.plugin_names():
            if name not in known:
                raise ConfError(f"failed to find Plugin {name}")
    options = [p for t in conf.tiers for p in t.plugins]
    hdrf = any(p.name == "drf" and p.enabled("enableHierarchy") for p in options)
    if hdrf and any(p.name == "proportion" for p in options):
        raise ConfError("proportion and drf with hierarchy enabled conflicts")


def default_conf(plugins: Iterable[str] | None = None) -> SchedulerConf:
    """Volcano's built-in default (`DefaultSchedulerConf`); with `plugins`, only the ones a registry has."""
    conf = load(DEFAULT_CONF)
    if plugins is None:
        return conf
    known = set(plugins)
    tiers = tuple(Tier(plugins=tuple(p for p in t.plugins if p.name in known)) for t in conf.tiers)
    return conf.model_copy(update={"tiers": tiers})
