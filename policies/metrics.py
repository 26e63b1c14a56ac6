"""A tiny in-process Prometheus registry: labelled counters that `policies` increments and a process serves.

Config reloads (`lahar_config_reload_failures_total`) and policy Audit results (`lahar_policy_audit_total`) count
here; the webhook and scheduler processes append `REGISTRY.render()` to their `/metrics` text.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

__all__ = ["AUDITS", "REGISTRY", "RELOAD_FAILURES", "Counter", "Registry"]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Counter:
    """A monotonically increasing count per label set; thread-safe."""

    def __init__(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> None:
        self.name, self.help, self.labels = name, help_text, labels
        self._lock = threading.Lock()
        self._values: dict[tuple[str, ...], float] = {}

    def _key(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {tuple(labels)}")
        return tuple(str(labels[k]) for k in self.labels)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def total(self) -> float:
        with self._lock:
            return sum(self._values.values())

    def reset(self) -> None:
        with self._lock:
            self._values.clear()

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        if not self.labels and not items:
            items = [((), 0.0)]
        for key, v in items:
            labels = ",".join(f'{k}="{_label(x)}"' for k, x in zip(self.labels, key, strict=True))
            value = int(v) if float(v).is_integer() else v
            lines.append(f"{self.name}{{{labels}}} {value}" if labels else f"{self.name} {value}")
        return lines


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[str, Counter] = {}

    def counter(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
        """The counter called `name`, created on first use (same name, same counter)."""
        with self._lock:
            existing = self._metrics.get(name)
            if existing is None:
                existing = self._metrics[name] = Counter(name, help_text, labels)
            return existing

    def render(self) -> str:
        """Prometheus text exposition (0.0.4) of every counter, sorted by name."""
        with self._lock:
            metrics = sorted(self._metrics.values(), key=lambda m: m.name)
        return "".join(line + "\n" for m in metrics for line in m.render())


REGISTRY = Registry()
RELOAD_FAILURES = REGISTRY.counter(
    "lahar_config_reload_failures_total", "ConfigMaps whose new content was rejected (the last good one stays).",
    ("configmap",))
AUDITS = REGISTRY.counter(
    "lahar_policy_audit_total", "Audit results of AdmissionPolicies, by policy and enforcement.",
    ("policy", "kind"))
