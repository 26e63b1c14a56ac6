"""The job reconciler's read cache: Jobs, their pods and PodGroups served from informers in the worker process.

`controllers.jobs` asks `JobCache` first and reads the API when it says no (`None`): the write path is unchanged. A
cached read is served only when it is fresh enough (`fresh_enough`, pure): the informer has synced and its watch has
reached every resourceVersion the read must see — the newest event `lahar dispatch` routed to the Job for that kind
(kept in Redis by the dispatcher, `seen`), and this process's own last write for that Job. A Conflict, or a write
whose answer carries no resourceVersion, makes the next read of that Job go to the API. resourceVersions are compared
as integers (etcd's and devcluster's); one that is not an integer is never fresh.

The Queue and the PriorityClasses a Job names (`named`) come from informers too when their types are given: nothing
routes their versions to a Job, so a synced informer is fresh enough (as Volcano's listers are), and a name it does not
hold (not created yet, or gone) is asked of the API.

The Queue reconciler's world (every Queue and every PodGroup, `queue_world`) is served the same way as a Job's reads:
once the informers have reached the Queue and PodGroup versions the dispatcher routed to that Queue (`TRACKED`) and
this process's own last Queue write; else None, and it lists them from the API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from lahar.kube.informers import Informer
from lahar.kube.models import labels as keys
from lahar.kube.resources import ResourceType

__all__ = ["KINDS", "NAMED_KINDS", "TRACKED", "JobCache", "fresh_enough", "seen_key"]

Obj = dict[str, Any]
KINDS = ("Job", "Pod", "PodGroup")
NAMED_KINDS = ("Queue", "PriorityClass")  # cluster-scoped, read by name; optional in `types`
TRACKED = {"Job": KINDS, "Queue": ("Queue", "PodGroup")}  # reconciled kind → kinds whose routed versions it must see
_QUEUE = ("", "\0queues")  # the key of this process's own Queue writes in `_own` (no Job has it)
_JOB_INDEX = "job"
_FORCE = "force"  # a write we cannot place: the next read of the Job goes to the API
_MAX_TRACKED = 50_000


def seen_key(prefix: str, namespace: str, name: str, kind: str = "Job") -> str:
    """The Redis hash where the dispatcher keeps, per kind, the newest resourceVersion it routed to `kind` ns/name
    (a Job, or a Queue with namespace "")."""
    return f"{prefix}seen:{kind}/{namespace}/{name}"


def _int(rv: Any) -> int | None:
    try:
        return int(rv)
    except (TypeError, ValueError):
        return None


def fresh_enough(*, synced: bool, watched: str | None, needed: list[Any]) -> bool:
    """Whether an informer that has synced (`synced`) and whose watch has reached resourceVersion `watched` may serve
    a read that must see every version in `needed` (None entries need nothing; `_FORCE` can never be met)."""
    if not synced:
        return False
    need = [n for n in needed if n is not None]
    if not need:
        return True
    have = _int(watched)
    if have is None:
        return False
    for n in need:
        v = _int(n)
        if v is None or v > have:
            return False
    return True


def _pod_job(pod: Obj) -> list[str]:
    meta = pod.get("metadata") or {}
    job = (meta.get("labels") or {}).get(keys.JOB_NAME_KEY)
    return [f"{meta.get('namespace')}/{job}"] if job else []


class JobCache:
    """Informers on Jobs, pods labelled `volcano.sh/job-name` and PodGroups; `start()`, read, `stop()`."""

    def __init__(self, client: Any, types: Mapping[str, ResourceType], *,
                 seen: Callable[[str, str], Mapping[str, Any]] | None = None, wait: float = 0.1,
                 informer_options: Mapping[str, Any] | None = None,
                 queue_seen: Callable[[str], Mapping[str, Any]] | None = None) -> None:
        opts = dict(informer_options or {})
        self.informers: dict[str, Informer] = {
            "Job": Informer(client, types["Job"], **opts),
            "Pod": Informer(client, types["Pod"], label_selector=keys.JOB_NAME_KEY, **opts),
            "PodGroup": Informer(client, types["PodGroup"], **opts),
        }
        for kind in NAMED_KINDS:
            if types.get(kind) is not None:
                self.informers[kind] = Informer(client, types[kind], **opts)
        self.informers["Pod"].add_index(_JOB_INDEX, _pod_job)
        self.seen = seen or (lambda _ns, _name: {})
        self.queue_seen = queue_seen  # None: nothing says what a Queue reconcile must see, it lists from the API
        self.wait = wait
        self.stats = {"hits": 0, "misses": 0}
        self._own: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, job) → kind → our last write's version
        self._mu = threading.Lock()
        self._needs: dict[tuple[str, str], dict[str, Any]] = {}
        self._deadlines: dict[tuple[str, str], float] = {}  # one wait budget per reconcile, shared by its reads

    # -- life --------------------------------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> JobCache:
        for inf in self.informers.values():
            inf.start()
        if timeout:
            for inf in self.informers.values():
                inf.wait_for_sync(timeout)
        return self

    def stop(self) -> None:
        for inf in self.informers.values():
            inf.stop()

    def take_stats(self) -> dict[str, int]:
        """Reads served from the informers (`hits`) and sent to the API (`misses`) since the last call."""
        with self._mu:
            out, self.stats = self.stats, {"hits": 0, "misses": 0}
        return out

    # -- freshness ---------------------------------------------------------------------------------------------

    def begin(self, namespace: str, name: str) -> None:
        """Start of one reconcile of Job ns/name: fetch what the dispatcher saw (one Redis read) for its reads."""
        try:
            seen = dict(self.seen(namespace, name) or {})
        except Exception:  # noqa: BLE001 - Redis away: nothing proves the cache fresh, read the API
            seen = {kind: _FORCE for kind in KINDS}
        with self._mu:
            own = dict(self._own.get((namespace, name)) or {})
            self._needs[(namespace, name)] = {kind: [seen.get(kind), own.get(kind)] for kind in KINDS}
            self._deadlines[(namespace, name)] = time.monotonic() + self.wait

    def end(self, namespace: str, name: str) -> None:
        """End of the reconcile `begin` started: its per-reconcile state goes."""
        with self._mu:
            self._needs.pop((namespace, name), None)
            self._deadlines.pop((namespace, name), None)

    def _ready(self, kind: str, namespace: str, name: str) -> Informer | None:
        with self._mu:
            needed = (self._needs.get((namespace, name)) or {}).get(kind, [_FORCE])
            deadline = self._deadlines.get((namespace, name), 0.0)
        inf = self.informers[kind]
        while True:
            if fresh_enough(synced=inf.has_synced(), watched=inf.resource_version, needed=needed):
                with self._mu:
                    self.stats["hits"] += 1
                return inf
            if _FORCE in needed or time.monotonic() >= deadline or not inf.has_synced():
                with self._mu:
                    self.stats["misses"] += 1
                return None
            time.sleep(0.01)  # the watch is a moment behind the dispatcher's: let it catch up

    def wrote(self, kind: str, namespace: str, name: str, obj: Any) -> None:
        """Our write of a `kind` object of Job ns/name answered `obj`: later reads must see at least its version (an
        answer without one: the next read goes to the API). A later version covers every earlier write."""
        rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
        self._note(kind, namespace, name, rv if _int(rv) is not None else _FORCE)

    def covered(self, kind: str, namespace: str, name: str, rv: Any) -> None:
        """An API read of `kind` for Job ns/name answered at version `rv`: it covers our writes before it."""
        if _int(rv) is not None:
            self._note(kind, namespace, name, rv)

    def _note(self, kind: str, namespace: str, name: str, rv: Any) -> None:
        with self._mu:
            if len(self._own) > _MAX_TRACKED:
                self._own.clear()  # forgetting our writes only costs reads that wait or go to the API
            own = self._own.setdefault((namespace, name), {})
            cur = own.get(kind)
            if rv == _FORCE or cur is None or cur == _FORCE or _int(rv) > _int(cur):  # type: ignore[operator]
                own[kind] = rv

    def forget(self, namespace: str, name: str) -> None:
        """A Conflict (someone wrote first): the next reads of this Job go to the API."""
        with self._mu:
            self._own[(namespace, name)] = {kind: _FORCE for kind in KINDS}

    # -- reads (None: ask the API) -----------------------------------------------------------------------------

    def job(self, namespace: str, name: str) -> tuple[bool, Obj | None]:
        inf = self._ready("Job", namespace, name)
        if inf is None:
            return False, None
        return True, inf.get(namespace, name)

    def pods(self, namespace: str, name: str) -> list[Obj] | None:
        inf = self._ready("Pod", namespace, name)
        if inf is None:
            return None
        return list(inf.by_index(_JOB_INDEX, f"{namespace}/{name}"))

    def podgroup(self, namespace: str, job: str, pg_name: str) -> tuple[bool, Obj | None]:
        inf = self._ready("PodGroup", namespace, job)
        if inf is None:
            return False, None
        return True, inf.get(namespace, pg_name)

    def named(self, kind: str, name: str) -> Obj | None:
        """The Queue or PriorityClass `name` from its synced informer; None: not served (no such informer, not
        synced, or the name not in it) — ask the API."""
        inf = self.informers.get(kind)
        found = None
        if inf is not None and fresh_enough(synced=inf.has_synced(), watched=inf.resource_version, needed=[]):
            found = inf.get(None, name)
        with self._mu:
            self.stats["hits" if found is not None else "misses"] += 1
        return found

    # -- the Queue reconciler's world (None: list from the API) ------------------------------------------------

    def queue_world(self, name: str) -> tuple[list[Obj], list[Obj]] | None:
        """Every Queue and every PodGroup, once the informers have reached what the dispatcher routed to Queue
        `name` and this process's last Queue write (waiting up to `wait`); None: not served. Not counted in `stats`
        (those are the job reconciler's reads)."""
        queues, pgs = self.informers.get("Queue"), self.informers["PodGroup"]
        if queues is None or self.queue_seen is None:
            return None
        try:
            seen = dict(self.queue_seen(name) or {})
        except Exception:  # noqa: BLE001 - Redis away: nothing proves the cache fresh, read the API
            return None
        with self._mu:
            own = (self._own.get(_QUEUE) or {}).get("Queue")
        needs = ((queues, [seen.get("Queue"), own]), (pgs, [seen.get("PodGroup")]))
        deadline = time.monotonic() + self.wait
        while not all(fresh_enough(synced=inf.has_synced(), watched=inf.resource_version, needed=need)
                      for inf, need in needs):
            if own == _FORCE or time.monotonic() >= deadline or not all(inf.has_synced() for inf, _ in needs):
                return None
            time.sleep(0.01)
        return queues.list(), pgs.list()

    def wrote_queue(self, obj: Any) -> None:
        """Our write of a Queue answered `obj`: later Queue reconciles here must see at least its version."""
        rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
        self._note("Queue", *_QUEUE, rv if _int(rv) is not None else _FORCE)

    def listed_queues(self, rv: Any) -> None:
        """An API list of the Queues answered at version `rv`: it covers our Queue writes before it."""
        if _int(rv) is not None:
            self._note("Queue", *_QUEUE, rv)
