"""controllers: level-based reconcilers for Volcano's kinds, run as Celery tasks by `lahar.worker`.

`reconcile(ctx, kind, namespace, name)` routes one key to its kind's reconciler (`RECONCILERS`); the modules
`jobs`, `podgroups`, `queues`, `cronjobs`, `gc` and `commands` each expose `reconcile(ctx, namespace, name)`.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterator, MutableMapping

from lahar.controllers.context import Context, PermanentError, Result

__all__ = ["KINDS", "RECONCILERS", "reconcile"]

log = logging.getLogger(__name__)

Reconciler = Callable[[Context, str, str], Result]

# kind → module holding its `reconcile(ctx, namespace, name)`; "GC" is keyed by the Job it may delete,
# "PodGroup" by the plain pod that needs a PodGroup (spec/volcano.md §3 pg-controller).
KINDS: dict[str, str] = {
    "Job": "lahar.controllers.jobs",
    "PodGroup": "lahar.controllers.podgroups",
    "Queue": "lahar.controllers.queues",
    "CronJob": "lahar.controllers.cronjobs",
    "Command": "lahar.controllers.commands",
    "GC": "lahar.controllers.gc",
}


def _load() -> dict[str, Reconciler]:
    out: dict[str, Reconciler] = {}
    for kind, module_name in KINDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:  # the module exists but something it imports does not: a real error
                raise
            log.debug("no reconciler module %s yet", module_name)
            continue
        out[kind] = module.reconcile
    return out


class _Reconcilers(MutableMapping[str, Reconciler]):
    """kind → reconcile, imported on first use (importing `controllers.context` stays cheap); tests may assign."""

    def __init__(self) -> None:
        self._data: dict[str, Reconciler] | None = None
        self._lock = threading.Lock()

    def _d(self) -> dict[str, Reconciler]:
        if self._data is None:
            with self._lock:
                if self._data is None:
                    self._data = _load()
        return self._data

    def __getitem__(self, kind: str) -> Reconciler:
        return self._d()[kind]

    def __setitem__(self, kind: str, fn: Reconciler) -> None:
        self._d()[kind] = fn

    def __delitem__(self, kind: str) -> None:
        del self._d()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())


RECONCILERS: MutableMapping[str, Reconciler] = _Reconcilers()


def reconcile(ctx: Context, kind: str, namespace: str, name: str) -> Result:
    """Run the reconciler of `kind`; a kind with no reconciler (module not written yet) is a PermanentError."""
    fn = RECONCILERS.get(kind)
    if fn is None:
        raise PermanentError(f"no reconciler for kind {kind!r}")
    return fn(ctx, namespace, name) or Result()
