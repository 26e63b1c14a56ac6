"""Watches: one queue per watcher, the event history that a watch resumes from, fan-out of committed changes, and
bookmarks.

`Watches` is mixed into `kube.apiserver.store.Store`: every flush hands its changes to `_publish` under the store
lock, in resourceVersion order; `StoreWatch` is what `Store.watch` returns and `kube.apiserver.memory` wraps.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson

from lahar.kube import errors, limits, selectors
from lahar.kube.apiserver.objects import ADDED, BOOKMARK, DELETED, MODIFIED, split_key
from lahar.kube.client import Obj, WatchEvent
from lahar.kube.resources import ResourceType

__all__ = ["Change", "StoreWatch", "Watches"]


@dataclass
class Change:
    """One committed change, as persisted, kept in the history and offered to watchers."""

    rv: int
    type: str
    key: str
    obj: Obj
    prev: Obj | None


# the watch lines encoded lately, by (id of the stored object, event type, apiVersion, kind); each entry holds its
# object, so an id is not reused while its entry lives
_LINES: dict[tuple[int, str, str, str], tuple[Obj, bytes]] = {}
_LINES_MAX = 2048


def _event_line(rt: ResourceType, etype: str, obj: Obj) -> bytes:
    key = (id(obj), etype, rt.api_version, rt.kind)
    hit = _LINES.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    out = obj
    if etype != BOOKMARK and (obj.get("apiVersion") != rt.api_version or obj.get("kind") != rt.kind):
        out = {"apiVersion": rt.api_version, "kind": rt.kind,
               **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
    line = orjson.dumps({"type": etype, "object": out}, option=orjson.OPT_NON_STR_KEYS) + b"\n"
    if len(_LINES) >= _LINES_MAX:
        _LINES.clear()
    _LINES[key] = (obj, line)
    return line


class StoreWatch:
    """One watcher's queue. Events are queued by the writer under the store lock; the reader copies them out."""

    def __init__(self, store: Watches, rt: ResourceType, namespace: str | None,
                 match: Callable[[Obj], bool] | None, allow_bookmarks: bool) -> None:
        self._store = store
        self.rt = rt
        self.namespace = namespace or None
        self._match = match
        self.allow_bookmarks = allow_bookmarks
        self._queue: deque[tuple[str, Obj]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self.on_ready: Callable[[], None] | None = None

    # writer side (store lock held)
    def _offer(self, etype: str, obj: Obj, prev: Obj | None) -> None:
        if self.namespace is not None and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return
        match = self._match
        if match is None:
            self._push(etype, obj)
            return
        if etype != MODIFIED:
            if match(obj):
                self._push(etype, obj)
            return
        now_ok = match(obj)
        was_ok = prev is None or match(prev)
        if now_ok and was_ok:
            self._push(MODIFIED, obj)
        elif now_ok:
            self._push(ADDED, obj)
        elif was_ok and prev is not None:
            rv = obj["metadata"]["resourceVersion"]
            self._push(DELETED, {**prev, "metadata": {**prev["metadata"], "resourceVersion": rv}})

    def _push(self, etype: str, obj: Obj) -> None:
        with self._cond:
            if self._stopped:
                return
            self._queue.append((etype, obj))
            self._cond.notify()
        callback = self.on_ready
        if callback is not None:
            callback()

    # reader side
    def next_event(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None on timeout or once stopped."""
        popped = self._pop(timeout)
        if popped is None:
            return None
        etype, obj = popped
        if etype == BOOKMARK:
            return {"type": BOOKMARK, "object": obj}
        return {"type": etype, "object": self._store._out(self.rt, obj)}

    def next_view(self, timeout: float | None = None) -> WatchEvent | None:
        """`next_event` without its copy: the stored object itself, read-only (`Store.peek`), for the server's own
        in-process watchers that only read (devcluster's workload controllers)."""
        popped = self._pop(timeout)
        if popped is None:
            return None
        etype, obj = popped
        return {"type": etype, "object": obj if etype == BOOKMARK else self._store._view(self.rt, obj)}

    def next_line(self, timeout: float | None = None) -> bytes | None:
        """The next event as kube-apiserver's watch line (`{"type":...,"object":...}` and a newline), or None on
        timeout or once stopped: `next_event` and a JSON encoding in one step, without its copy. The line of one
        stored object is encoded once for every watcher of its type (the stored object is never changed in
        place, so it can be encoded as it is)."""
        popped = self._pop(timeout)
        return None if popped is None else _event_line(self.rt, *popped)

    def _pop(self, timeout: float | None) -> tuple[str, Obj] | None:
        with self._cond:
            if not self._queue and not self._stopped:
                self._cond.wait_for(lambda: self._queue or self._stopped, timeout)
            if self._stopped or not self._queue:
                return None
            return self._queue.popleft()

    def pending(self) -> int:
        return len(self._queue)

    def bookmark(self) -> None:
        """Queue a BOOKMARK carrying the current resourceVersion (no-op unless bookmarks were allowed)."""
        if not self.allow_bookmarks:
            return
        with self._store._lock:
            rv = str(self._store._rv)
            self._push(BOOKMARK, {"kind": self.rt.kind, "apiVersion": self.rt.api_version,
                                  "metadata": {"resourceVersion": rv}})

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._cond.notify_all()
        self._store._remove_watcher(self)
        callback = self.on_ready
        if callback is not None:
            with contextlib.suppress(Exception):
                callback()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        event = self.next_event(None)
        if event is None:
            raise StopIteration
        return event

    def __enter__(self) -> StoreWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Watches:
    """Mixed into `Store`: the watchers per type and the bounded history of changes (events at or below `_floor`
    are gone: a watch from there is a 410)."""

    # what this part uses of the others (set or defined by `Store` and its other parts), named for readers
    _lock: threading.RLock
    _rv: int
    history_size: int
    _by_type: dict[tuple[str, str], dict[str, Obj]]
    _out: Callable[[ResourceType, Obj], Obj]
    _view: Callable[[ResourceType, Obj], Obj]
    _matcher: Callable[..., Callable[[Obj], bool] | None]
    _select_keys: Callable[..., list[str]]

    def _init_watches(self) -> None:
        self._history: deque[Change] = deque()
        self._floor = 0  # events with rv <= floor are no longer available
        self._watchers: dict[tuple[str, str], set[StoreWatch]] = {}

    def _load_history(self, events: list[tuple[int, str, str, Obj]]) -> None:
        """The persisted event log, newest `history_size` events (skipping any too deep to serve)."""
        events = [e for e in sorted(events, key=lambda e: e[0])[-self.history_size:]
                  if limits.depth(e[3]) <= limits.MAX_DEPTH]
        last: dict[str, Obj] = {}
        for erv, etype, key, obj in events:
            self._history.append(Change(int(erv), etype, key, obj, last.get(key)))
            last[key] = obj
        self._floor = (self._history[0].rv - 1) if self._history else self._rv

    def _publish(self, changes: list[Change]) -> None:
        """Under the lock: append to the history (dropping the oldest) and offer each change to its type's watchers."""
        hist = self._history
        for c in changes:
            if len(hist) >= self.history_size:
                self._floor = hist.popleft().rv
            hist.append(c)
            watchers = self._watchers.get(split_key(c.key)[0])
            if watchers:
                for w in list(watchers):
                    w._offer(c.type, c.obj, c.prev)

    def watch(self, rt: ResourceType, namespace: str | None = None, *, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              allow_bookmarks: bool = False) -> StoreWatch:
        match = self._matcher(rt, label_selector, field_selector)
        ns = namespace if rt.namespaced else None
        w = StoreWatch(self, rt, ns, match, allow_bookmarks)
        gp = (rt.group, rt.plural)
        start: int | None = None
        if resource_version not in (None, "", "0"):
            text = str(resource_version)
            if not (text.isascii() and text.isdigit()):  # kube parses it as an unsigned integer: "-1" and "abc" are both refused
                raise errors.BadRequest(f"invalid resource version: {resource_version!r}")
            start = int(text)
        with self._lock:
            if start is None:
                objs = self._by_type.get(gp, {})
                for key in self._select_keys(rt, ns or None, selectors.everything(), selectors.FieldSelector(())):
                    w._offer(ADDED, objs[key], None)
            else:
                if start < self._floor:
                    raise errors.Gone(f"too old resource version: {start} ({self._floor})")
                replay: list[Change] = []
                for c in reversed(self._history):
                    if c.rv <= start:
                        break
                    if split_key(c.key)[0] == gp:
                        replay.append(c)
                for c in reversed(replay):
                    w._offer(c.type, c.obj, c.prev)
            self._watchers.setdefault(gp, set()).add(w)
        return w

    def _remove_watcher(self, w: StoreWatch) -> None:
        with self._lock:
            ws = self._watchers.get((w.rt.group, w.rt.plural))
            if ws is not None:
                ws.discard(w)
