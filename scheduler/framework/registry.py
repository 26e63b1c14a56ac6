"""Explicit registries of actions and plugins: name → factory(arguments). Nothing registers itself on import.

`scheduler.registry.in_tree_registry()` fills one with the built-ins; tests and embedders build their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lahar.scheduler.framework.conf import ConfError, SchedulerConf
from lahar.scheduler.framework.conf import load as load_text
from lahar.scheduler.framework.hooks import Action, Plugin

__all__ = ["ActionFactory", "PluginFactory", "Registry"]

PluginFactory = Callable[[Mapping[str, Any]], Plugin]
ActionFactory = Callable[[Mapping[str, Any]], Action]


class Registry:
    """Two name spaces, actions and plugins; registering a name twice raises `ValueError`."""

    def __init__(self) -> None:
        self._plugins: dict[str, PluginFactory] = {}
        self._actions: dict[str, ActionFactory] = {}

    def add_plugin(self, name: str, factory: PluginFactory) -> Registry:
        if name in self._plugins:
            raise ValueError(f"plugin {name!r} is already registered")
        self._plugins[name] = factory
        return self

    def add_action(self, name: str, factory: ActionFactory) -> Registry:
        if name in self._actions:
            raise ValueError(f"action {name!r} is already registered")
        self._actions[name] = factory
        return self

    def plugin(self, name: str, arguments: Mapping[str, Any] | None = None) -> Plugin:
        try:
            factory = self._plugins[name]
        except KeyError:
            raise KeyError(f"failed to find Plugin {name}") from None
        return factory(dict(arguments or {}))

    def action(self, name: str, arguments: Mapping[str, Any] | None = None) -> Action:
        try:
            factory = self._actions[name]
        except KeyError:
            raise KeyError(f"failed to find Action {name}") from None
        return factory(dict(arguments or {}))

    def load_conf(self, text: str) -> SchedulerConf:
        """A volcano-scheduler.conf against this registry's actions and plugins, with every plugin's arguments
        checked (`check_arguments`): what the scheduler's ConfigMap loader does, for the CLI's `--conf` files."""
        conf = load_text(text, actions=self.action_names, plugins=self.plugin_names)
        self.check_arguments(conf)
        return conf

    def check_arguments(self, conf: SchedulerConf) -> None:
        """Build each configured plugin once, so an argument its factory refuses (a `ValueError` naming the field)
        is a `ConfError` when the conf is loaded, not a failed session."""
        for tier in conf.tiers:
            for option in tier.plugins:
                if option.name not in self._plugins:
                    continue
                try:
                    self.plugin(option.name, option.arguments)
                except ValueError as e:
                    raise ConfError(f"plugin {option.name}: arguments: {e}") from None

    @property
    def plugin_names(self) -> list[str]:
        return list(self._plugins)

    @property
    def action_names(self) -> list[str]:
        return list(self._actions)

    def copy(self) -> Registry:
        other = Registry()
        other._plugins = dict(self._plugins)
        other._actions = dict(self._actions)
        return other
