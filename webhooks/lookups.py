"""Read-only cluster state the admission rules look up: queues, namespaces, Volcano Jobs, PodGroups, PriorityClasses.

Handlers get a `Lookups`; the webhook server passes `InformerLookups` (watch-fed caches; the only API call is an
object the cache has not seen yet), `lahar admit` and unit tests pass `StaticLookups` (a list of objects). Objects returned are shared:
read them, never change them. Both also answer `child_queue_count(name)` from an index (the job rules' leaf-queue
check, on every Job review), where a plain `Lookups` is scanned with `queues()`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from lahar.kube import errors, resources
from lahar.kube.client import ClusterClient
from lahar.kube.informers import Informer, InformerFactory

__all__ = ["BUILTIN_QUEUES", "QUEUE_PARENT_INDEX", "InformerLookups", "Lookups", "StaticLookups", "builtin_queue",
           "queue_parent"]

log = logging.getLogger(__name__)

QUEUE = ("scheduling.volcano.sh", "Queue")
NAMESPACE = ("", "Namespace")
JOB = ("batch.volcano.sh", "Job")
PODGROUP = ("scheduling.volcano.sh", "PodGroup")
PRIORITY_CLASS = ("scheduling.k8s.io", "PriorityClass")
BUILTIN_QUEUES = ("root", "default")
QUEUE_PARENT_INDEX = "webhook-queue-parent"   # an informer index name


@runtime_checkable
class Lookups(Protocol):
    def queue(self, name: str) -> dict | None:
        """The scheduling.volcano.sh/v1beta1 Queue `name`, or None."""

    def queues(self) -> list[dict]:
        """Every Queue."""

    def namespace(self, name: str) -> dict | None: ...

    def job(self, namespace: str, name: str) -> dict | None:
        """The batch.volcano.sh/v1alpha1 Job, or None."""

    def podgroup(self, namespace: str, name: str) -> dict | None: ...

    def priority_class(self, name: str) -> dict | None: ...


def builtin_queue(name: str) -> dict:
    """The Open queue Volcano installs as `default` (weight 1, reclaimable) or creates as `root`."""
    spec: dict = {"weight": 1, "reclaimable": name != "root"}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": spec, "status": {"state": "Open"}}


def queue_parent(queue: dict) -> str | None:
    """The queue's `spec.parent` when it is a string (what a child count compares), else None."""
    spec = queue.get("spec")
    parent = spec.get("parent") if isinstance(spec, dict) else None
    return parent if isinstance(parent, str) else None


def _group_kind(obj: dict) -> tuple[str, str]:
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return group, str(obj.get("kind") or "")


def _meta(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class StaticLookups:
    """Lookups over a fixed list of objects (kinds it does not know are ignored); `add` more as they are admitted.

    With `builtin_queues`, Open queues `root` and `default` exist unless the objects define them.
    """

    def __init__(self, objects: Iterable[dict] = (), *, builtin_queues: bool = True) -> None:
        self._by_kind: dict[tuple[str, str], dict[tuple[str, str], dict]] = {
            QUEUE: {}, NAMESPACE: {}, JOB: {}, PODGROUP: {}, PRIORITY_CLASS: {}}
        self._children: dict[str, int] | None = None   # parent → child queues, rebuilt after an `add`
        for obj in objects:
            self.add(obj)
        if builtin_queues:
            for name in BUILTIN_QUEUES:
                self._by_kind[QUEUE].setdefault(("", name), builtin_queue(name))

    def add(self, obj: dict) -> bool:
        """Remember `obj` (replacing one with the same name); False when its kind is not one the rules read."""
        table = self._by_kind.get(_group_kind(obj))
        if table is None:
            return False
        ns, name = _meta(obj)
        if _group_kind(obj) in (QUEUE, NAMESPACE, PRIORITY_CLASS):
            ns = ""
        elif not ns:
            ns = "default"
        table[(ns, name)] = obj
        self._children = None
        return True

    def ready(self) -> bool:
        return True

    def queue(self, name: str) -> dict | None:
        return self._by_kind[QUEUE].get(("", name))

    def queues(self) -> list[dict]:
        return list(self._by_kind[QUEUE].values())

    def child_queue_count(self, name: str) -> int:
        """How many queues name `name` as their parent."""
        children = self._children
        if children is None:
            children = {}
            for q in self._by_kind[QUEUE].values():
                parent = queue_parent(q)
                if parent is not None:
                    children[parent] = children.get(parent, 0) + 1
            self._children = children
        return children.get(name, 0)

    def namespace(self, name: str) -> dict | None:
        return self._by_kind[NAMESPACE].get(("", name))

    def job(self, namespace: str, name: str) -> dict | None:
        return self._by_kind[JOB].get((namespace, name))

    def podgroup(self, namespace: str, name: str) -> dict | None:
        return self._by_kind[PODGROUP].get((namespace, name))

    def priority_class(self, name: str) -> dict | None:
        return self._by_kind[PRIORITY_CLASS].get(("", name))


class InformerLookups:
    """Lookups over informers on a live cluster (`kube.informers`), started with `start()`, stopped with `stop()`.

    Volcano's CRDs may not be installed yet when the webhook starts: a Volcano type whose list answers 404 is
    marked missing (its look-ups return None / []) and probed again every `probe_interval` seconds; its informer
    starts once the CRD is served. `ready()` is true when every informer has synced or its type is missing.
    """

    CORE = (("", "v1", "namespaces"), ("scheduling.k8s.io", "v1", "priorityclasses"))
    VOLCANO = (("scheduling.volcano.sh", "v1beta1", "queues"), ("batch.volcano.sh", "v1alpha1", "jobs"),
               ("scheduling.volcano.sh", "v1beta1", "podgroups"))

    def __init__(self, client: ClusterClient, *, factory: InformerFactory | None = None,
                 probe_interval: float = 5.0) -> None:
        self.client = client
        self.factory = factory or InformerFactory(client)
        self.probe_interval = probe_interval
        registry = resources.in_tree()
        self._informers: dict[str, Informer] = {}
        self._volcano: list[str] = []
        for group, version, plural in (*self.CORE, *self.VOLCANO):
            rt = registry.get(group, version, plural)
            assert rt is not None, plural
            self._informers[plural] = self.factory.informer(rt)
        self._volcano = [plural for _, _, plural in self.VOLCANO]
        with contextlib.suppress(ValueError):  # a shared factory's informer already has it (same function)
            self._informers["queues"].add_index(QUEUE_PARENT_INDEX, queue_parent)
        self._missing: set[str] = set()       # list answered 404: CRD not installed (yet)
        self._pending: set[str] = set(self._volcano)  # not probed successfully yet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._prober: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> InformerLookups:
        for _, _, plural in self.CORE:
            self._informers[plural].start()
        self._probe_once()
        if self._pending:
            self._prober = threading.Thread(target=self._probe_loop, name="lookups-crd-probe", daemon=True)
            self._prober.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._prober is not None:
            self._prober.join(10)
        self.factory.stop()

    def __enter__(self) -> InformerLookups:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _probe_once(self) -> None:
        with self._lock:
            pending = sorted(self._pending)
        for plural in pending:
            informer = self._informers[plural]
            try:
                self.client.list(informer.rt)
            except errors.NotFound:
                with self._lock:
                    if plural not in self._missing:
                        log.warning("lookups: %s.%s is not served (Volcano CRDs not installed?); "
                                    "treating it as empty and checking again every %.0fs",
                                    plural, informer.rt.group, self.probe_interval)
                    self._missing.add(plural)
                continue
            except Exception as e:  # noqa: BLE001 - API down or forbidden: not ready, try again later
                log.warning("lookups: probing %s.%s failed: %s", plural, informer.rt.group, e)
                continue
            with self._lock:
                self._missing.discard(plural)
                self._pending.discard(plural)
            informer.start()

    def _probe_loop(self) -> None:
        while not self._stop.wait(self.probe_interval):
            self._probe_once()
            with self._lock:
                if not self._pending:
                    return

    def ready(self) -> bool:
        with self._lock:
            missing, pending = set(self._missing), set(self._pending)
        for plural, informer in self._informers.items():
            if plural in missing:
                continue
            if plural in pending or not informer.has_synced():
                return False
        return True

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until `ready()` (or `timeout` seconds); the result of `ready()`."""
        waited = 0.0
        while not self.ready():
            if timeout is not None and waited >= timeout:
                return False
            if self._stop.wait(0.05):
                return False
            waited += 0.05
        return True

    # -- look-ups -----------------------------------------------------------------------------------------------

    def _get(self, plural: str, namespace: str | None, name: str) -> dict | None:
        """The object from the informer; on a miss, read once from the API server: an object applied just before
        the one under review (`kubectl apply -f` of one file: a Queue before its Job, a PodGroup before its pods)
        may not have reached the informer yet."""
        informer = self._informers[plural]
        found = informer.get(namespace, name)
        if found is not None or not name:
            return found
        with self._lock:
            if plural in self._missing:
                return None
        try:
            return self.client.get(informer.rt, name, namespace=namespace)
        except errors.NotFound:
            return None
        except Exception as e:  # noqa: BLE001 - API unreachable: answer as the informer does (not found)
            log.warning("lookups: reading %s %s failed: %s", plural, name, e)
            return None

    def queue(self, name: str) -> dict | None:
        return self._get("queues", None, name)

    def queues(self) -> list[dict]:
        return self._informers["queues"].list()

    def child_queue_count(self, name: str) -> int:
        """How many queues name `name` as their parent (an informer index, not a scan)."""
        return len(self._informers["queues"].by_index(QUEUE_PARENT_INDEX, name))

    def namespace(self, name: str) -> dict | None:
        return self._get("namespaces", None, name)

    def job(self, namespace: str, name: str) -> dict | None:
        return self._get("jobs", namespace, name)

    def podgroup(self, namespace: str, name: str) -> dict | None:
        return self._get("podgroups", namespace, name)

    def priority_class(self, name: str) -> dict | None:
        return self._get("priorityclasses", None, name)
