"""The base of the fluent builders in tests/builders: chained setters over a plain Kubernetes-shaped dict.

Every builder keeps its object in `.obj` and hands out a deep copy with `.build()` (or `.bare()`, what a client
creates); `objs()` turns a mixed list of builders and plain dicts into plain dicts.
"""

from __future__ import annotations

import copy
from typing import Any, Self

__all__ = ["TS", "Builder", "objs", "scalars"]

TS = "2024-01-01T00:00:{:02d}Z"  # creationTimestamp of the scheduler fixtures: second 0..59 of one minute


class Builder:
    obj: dict[str, Any]

    def label(self, **kv: str) -> Self:
        self.obj["metadata"].setdefault("labels", {}).update(kv)
        return self

    def annotate(self, **kv: str) -> Self:
        self.obj["metadata"].setdefault("annotations", {}).update(kv)
        return self

    def created(self, second: int) -> Self:
        self.obj["metadata"]["creationTimestamp"] = TS.format(second)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.obj)

    def bare(self, *, status: bool = False) -> dict[str, Any]:
        """The object as a client sends it to create: a copy without uid and creationTimestamp, and without status
        unless `status` (the tests that play a controller create a PodGroup already Inqueue)."""
        o = self.build()
        if not status:
            o.pop("status", None)
        for field in ("uid", "creationTimestamp"):
            o["metadata"].pop(field, None)
        return o


def scalars(kv: dict[str, str]) -> dict[str, str]:
    """Keyword names to resource names: `__` is `/` and `_` is `-` (`example__gpu_mem` -> `example/gpu-mem`);
    names with dots are passed as `**{"nvidia.com/gpu": "1"}`."""
    return {k.replace("__", "/").replace("_", "-"): v for k, v in kv.items()}


def objs(items: list[Any]) -> list[dict[str, Any]]:
    return [i.build() if isinstance(i, Builder) else copy.deepcopy(i) for i in items]
