"""The scheduler's view of the cluster kept warm in memory: informers on pods, nodes, PodGroups, queues and
PriorityClasses, and the scheduler ConfigMap (hot-reloaded, last good kept). `snapshot()` feeds one session.

Thin I/O shell around `scheduler.incremental.SnapshotInputs` (the snapshot updated from informer events, so an
idle tick does not rebuild it) and `scheduler.framework.conf.load`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from lahar.kube.client import ClusterClient
from lahar.kube.informers import Informer, InformerFactory
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.incremental import SnapshotInputs

__all__ = ["CONFIGMAP_KEY", "CONFIGMAP_NAME", "ConfSource", "ConfState", "SchedulerCache"]

log = logging.getLogger(__name__)

CONFIGMAP_NAME = "lahar-scheduler-configmap"
CONFIGMAP_KEY = "volcano-scheduler.conf"
PREFERRED_NAMESPACES = ("lahar-system", "volcano-system")

_KINDS = {
    "pods": ("", "v1", "pods"),
    "nodes": ("", "v1", "nodes"),
    "podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "queues": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "priority_classes": ("scheduling.k8s.io", "v1", "priorityclasses"),
}
# per-node inventories for numa-aware / deviceshare; their CRDs may be absent, so startup does not wait on them
_OPTIONAL_KINDS = {
    "numatopologies": ("nodeinfo.volcano.sh", "v1alpha1", "numatopologies"),
    "devices": ("scheduling.koordinator.sh", "v1alpha1", "devices"),
    "namespaces": ("", "v1", "namespaces"),  # pod affinity namespaceSelector (plugins/predicates)
    "hypernodes": ("topology.volcano.sh", "v1alpha1", "hypernodes"),  # network topology (framework/hypernodes)
    "poddisruptionbudgets": ("policy", "v1", "poddisruptionbudgets"),  # gangpreempt / gangreclaim victims
    "resourcequotas": ("", "v1", "resourcequotas"),  # plugins/resourcequota
    # volume predicates and binding at commit (plugins/predicates, plugins/_volumes)
    "persistentvolumeclaims": ("", "v1", "persistentvolumeclaims"),
    "persistentvolumes": ("", "v1", "persistentvolumes"),
    "storageclasses": ("storage.k8s.io", "v1", "storageclasses"),
    "csinodes": ("storage.k8s.io", "v1", "csinodes"),
    "csidrivers": ("storage.k8s.io", "v1", "csidrivers"),  # which drivers opt into storage capacity tracking
    "csistoragecapacities": ("storage.k8s.io", "v1", "csistoragecapacities"),
    # Dynamic Resource Allocation (plugins/_dra, devices/dra; claims allocated at commit)
    "resourceclaims": ("resource.k8s.io", "v1", "resourceclaims"),
    "resourceslices": ("resource.k8s.io", "v1", "resourceslices"),
    "deviceclasses": ("resource.k8s.io", "v1", "deviceclasses"),
}


class SchedulerCache:
    """Informers for everything a snapshot needs; `snapshot()` returns one for their current contents.

    Incremental (default): informer events mark objects dirty and `snapshot()` updates the previous snapshot with
    them — it returns the same object every time, which the caller's session may mutate until the next call.
    `incremental=False` builds a fresh snapshot from the informer stores on every call.

    `shared` is what the sessions keep across ticks (`Session.shared_state`): the placement's cache of what it
    derives from API objects by resourceVersion (`scheduler.placement.DerivedCache`) lives here, not in a module."""

    def __init__(self, client: ClusterClient, *, scheduler_names: Iterable[str] = snapshots.DEFAULT_SCHEDULER_NAMES,
                 default_queue: str = "default", incremental: bool = True) -> None:
        self.client = client
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.factory = InformerFactory(client)
        self.informers: dict[str, Informer] = {}
        for key, (group, version, plural) in _KINDS.items():
            rt = client.registry.get(group, version, plural)
            if rt is not None:
                self.informers[key] = self.factory.informer(rt)
        self.optional_factory = InformerFactory(client)
        self.optional: dict[str, Informer] = {}
        for key, (group, version, plural) in _OPTIONAL_KINDS.items():
            rt = client.registry.get(group, version, plural)
            if rt is not None:
                self.optional[key] = self.optional_factory.informer(rt)
        self.incremental = incremental
        self.shared: dict[Hashable, Any] = {}
        self.inputs = incremental_inputs = SnapshotInputs(scheduler_names=self.scheduler_names,
                                                          default_queue=default_queue)
        if incremental:
            for key, inf in (*self.informers.items(), *self.optional.items()):
                inf.add_handler(on_add=functools.partial(incremental_inputs.upsert, key),
                                on_update=functools.partial(_on_update, incremental_inputs, key),
                                on_delete=functools.partial(incremental_inputs.delete, key))

    def start(self, timeout: float | None = 60.0) -> bool:
        """Start every informer; wait up to `timeout` until the required ones are watching (see `unsynced`)."""
        self.factory.start()
        self.optional_factory.start()
        return self.wait_synced(timeout)

    def unsynced(self) -> list[str]:
        """The required informers that are not yet watching (first list applied, handlers run, the watch from its
        resourceVersion open with its backlog applied); a session before that would see part of the cluster
        (volcano#2821, #5174). The optional kinds' CRDs may be absent, so they are not waited for."""
        return [key for key, inf in self.informers.items() if not inf.is_watching()]

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.informers.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_watch(left):
                return False
        return True

    def sync_report(self) -> dict[str, dict[str, float]]:
        """Per required kind: objects, and the first list's request and store-fill seconds."""
        return {key: {"objects": len(inf.keys()), "list_s": round(inf.list_seconds, 3),
                      "fill_s": round(inf.fill_seconds, 3)} for key, inf in self.informers.items()}

    def stop(self) -> None:
        self.factory.stop()
        self.optional_factory.stop()

    def snapshot(self) -> snapshots.Snapshot:
        if self.incremental:
            return self.inputs.snapshot()
        lists = {key: inf.list() for key, inf in self.informers.items()}
        lists.update({key: inf.list() for key, inf in self.optional.items()})
        return snapshots.build(**lists, scheduler_names=self.scheduler_names, default_queue=self.default_queue)


def _on_update(inputs: SnapshotInputs, kind: str, old: dict, new: dict) -> None:
    inputs.upsert(kind, new)


@dataclass(frozen=True)
class ConfState:
    conf: confs.SchedulerConf
    source: str  # "default" or "<namespace>/<name>@<resourceVersion>"
    error: str = ""  # why the newest ConfigMap content was not taken ("" when it was)


class ConfSource:
    """The scheduler configuration from ConfigMap `lahar-scheduler-configmap` (key `volcano-scheduler.conf`),
    re-parsed when it changes; a bad version keeps the last good configuration and reports why once.

    `namespaces` limits the look-up to those namespaces (one informer each, so the process needs only a Role
    there, as deploy/ grants); empty looks cluster-wide. Either way lahar-system wins over volcano-system."""

    def __init__(self, client: ClusterClient, registry: Registry, *, name: str = CONFIGMAP_NAME,
                 key: str = CONFIGMAP_KEY, on_error: Callable[[dict, str], None] | None = None,
                 namespaces: tuple[str, ...] = ()) -> None:
        self.registry = registry
        self.name = name
        self.key = key
        self.on_error = on_error
        rt = client.registry.get("", "v1", "configmaps")
        assert rt is not None
        self.informers = [Informer(client, rt, namespace=ns, field_selector=f"metadata.name={name}")
                          for ns in (namespaces or (None,))]
        self._default = confs.default_conf(registry.plugin_names)
        self._state = ConfState(self._default, "default")
        self._seen: str | None = None

    @property
    def informer(self) -> Informer:
        """The first (with no namespaces: the only) informer."""
        return self.informers[0]

    def start(self, timeout: float | None = 30.0) -> bool:
        for informer in self.informers:
            informer.start()
        return all([informer.wait_for_watch(timeout) for informer in self.informers])

    def synced(self) -> bool:
        return all(informer.is_watching() for informer in self.informers)

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def _pick(self) -> dict | None:
        items = [cm for informer in self.informers for cm in informer.list() if cm["metadata"]["name"] == self.name]
        if not items:
            return None
        items.sort(key=lambda cm: (PREFERRED_NAMESPACES.index(cm["metadata"].get("namespace"))
                                   if cm["metadata"].get("namespace") in PREFERRED_NAMESPACES else 99,
                                   cm["metadata"].get("namespace", "")))
        return items[0]

    def current(self) -> ConfState:
        cm = self._pick()
        if cm is None:
            if self._seen is not None:
                self._seen = None
                self._state = ConfState(self._default, "default")
            return self._state
        meta = cm["metadata"]
        version = f"{meta.get('namespace')}/{meta['name']}@{meta.get('resourceVersion')}"
        if version == self._seen:
            return self._state
        self._seen = version
        text = (cm.get("data") or {}).get(self.key)
        try:
            if text is None:
                raise confs.ConfError(f"ConfigMap {meta.get('namespace')}/{meta['name']} has no key {self.key!r}")
            conf = confs.load(text, actions=self.registry.action_names, plugins=self.registry.plugin_names)
            self.registry.check_arguments(conf)
        except confs.ConfError as e:
            log.error("scheduler configuration %s rejected, keeping %s: %s", version, self._state.source, e)
            self._state = ConfState(self._state.conf, self._state.source, str(e))
            if self.on_error is not None:
                self.on_error(cm, str(e))
            return self._state
        log.info("scheduler configuration %s loaded: actions %s", version, ", ".join(conf.actions))
        self._state = ConfState(conf, version)
        return self._state
