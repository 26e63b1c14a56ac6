"""devcluster's watch streaming: `WatchStream` turns one store watch into kube-apiserver's chunked watch response
(JSON lines, Table rows or PartialObjectMetadata, bookmarks, the timeout, a 410 Gone as an ERROR event).

Below `devcluster.server` (`ApiServer._watch` builds one per request); uses `devcluster.routing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from lahar.devcluster import tables
from lahar.devcluster.routing import Obj, Receive, Send, _dumps, _partial
from lahar.kube import errors
from lahar.kube.resources import ResourceType

if TYPE_CHECKING:
    from lahar.devcluster.server import ApiServer


class WatchStream:
    """One chunked watch response: bridges a StoreWatch's `on_ready` callback into the event loop."""

    def __init__(self, app: ApiServer, rt: ResourceType, wanted: str | None, printer_columns: list[Obj] | None,
                 include_object: str, bookmarks: bool, timeout: float) -> None:
        self.app, self.rt, self.wanted = app, rt, wanted
        self.printer_columns, self.include_object = printer_columns, include_object
        self.bookmarks, self.timeout = bookmarks, timeout
        self.watch: Any = None
        self.gone: errors.ApiError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._done = False
        self._columns_sent = False

    def close(self) -> None:
        self._done = True
        if self.watch is not None:
            self.watch.stop()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    def _on_ready(self) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # loop closed while shutting down
                loop.call_soon_threadsafe(self._wake.set)

    def _encode(self, event: Obj) -> bytes:
        kind, obj = event["type"], event["object"]
        if kind != "ERROR":
            if self.wanted == "Table":
                if kind == "BOOKMARK":
                    rv = (obj.get("metadata") or {}).get("resourceVersion", "")
                    obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
                           "columnDefinitions": [], "rows": []}
                else:
                    obj = tables.table(self.rt.group, self.rt.kind, [obj], now=self.app.clock(),
                                       resource_version=(obj.get("metadata") or {}).get("resourceVersion", ""),
                                       printer_columns=self.printer_columns, include_object=self.include_object,
                                       with_columns=not self._columns_sent)
                    self._columns_sent = True
            elif self.wanted in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                obj = _partial(obj)
        return _dumps({"type": kind, "object": obj}) + b"\n"

    async def _listen(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._done = True
                self._wake.set()
                return

    async def run(self, receive: Receive, send: Send) -> None:
        self._loop = asyncio.get_running_loop()
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache, private"),
                   (b"transfer-encoding", b"chunked")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if self.gone is not None:
            await send({"type": "http.response.body", "more_body": False,
                        "body": self._encode({"type": "ERROR", "object": self.gone.status()})})
            return
        watch = self.watch
        watch.on_ready = self._on_ready
        with self.app._watches_lock:
            self.app._watches.add(self)
        if self.app._closing:
            self._done = True
        listener = asyncio.ensure_future(self._listen(receive))
        deadline = time.monotonic() + self.timeout
        next_bookmark = time.monotonic() + self.app.bookmark_interval
        try:
            while not self._done:
                self._wake.clear()
                chunks = []
                if self.wanted is None:  # plain JSON lines: the store encodes each stored object once
                    while (line := watch.next_line(0)) is not None:
                        chunks.append(line)
                        if len(chunks) >= 500:
                            break
                else:
                    while (event := watch.next_event(0)) is not None:
                        chunks.append(self._encode(event))
                        if len(chunks) >= 500:
                            break
                if chunks:
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                    if len(chunks) >= 500:
                        continue
                now = time.monotonic()
                if now >= deadline:
                    break
                if self.bookmarks and now >= next_bookmark:
                    watch.bookmark()
                    next_bookmark = now + self.app.bookmark_interval
                    continue
                wait = deadline - now
                if self.bookmarks:
                    wait = min(wait, next_bookmark - now)
                try:
                    async with asyncio.timeout(max(wait, 0.0)):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            listener.cancel()
            watch.on_ready = None
            watch.stop()
            with self.app._watches_lock:
                self.app._watches.discard(self)
        with contextlib.suppress(Exception):  # the client may be gone already
            await send({"type": "http.response.body", "body": b"", "more_body": False})
