"""Slow-client limits for lahar's two HTTPS servers (the webhook and devcluster's API server), both on uvicorn.

uvicorn only times out idle keep-alive connections: a client that sends half a request line, half its headers
or half its body holds the connection, and a task, for as long as it likes. `protocol(...)` returns uvicorn's
HTTP protocol with two deadlines -- the headers must be complete `header_timeout` seconds after the connection
(or the previous response), the body `body_timeout` seconds after the headers -- and a bound on header bytes;
past either the client gets `408` (or `431`) and the connection is closed. `Limits` carries the values, and
`uvicorn_options` turns them into `uvicorn.Config` arguments (with `limit_concurrency`, uvicorn's connection
limit, answered with 503).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_LIMITS", "Limits", "protocol", "uvicorn_options"]


@dataclass(frozen=True)
class Limits:
    """Seconds for the request headers and for the body; most connections (with tasks) served at once;
    largest request head (kube-apiserver's, Go's default, is 1 MiB)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_connections: int = 1000
    max_header_bytes: int = 1 << 20


DEFAULT_LIMITS = Limits()

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


class _Deadlines:
    """Mixed into uvicorn's httptools or h11 protocol; both keep the current request in `self.cycle`."""

    limits: Limits = DEFAULT_LIMITS
    cycle: Any
    transport: Any
    loop: asyncio.AbstractEventLoop

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._deadline: asyncio.TimerHandle | None = None
        self._seen_cycle: Any = None
        self._head_bytes = 0
        self._phase = ""
        self._arm(self.limits.header_timeout, "headers")

    def _arm(self, seconds: float, phase: str) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expire, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _body_arriving(self) -> bool:
        """The current request's body is still coming in -- also after the app answered without reading it (a
        413): uvicorn then discards the rest, and those bytes are neither a new request's head nor its deadline."""
        raise NotImplementedError

    def _waiting_for_headers(self) -> bool:
        cycle = self.cycle
        return cycle is None or cycle is self._seen_cycle and cycle.response_complete and not self._body_arriving()

    def _expire(self, phase: str) -> None:
        self._deadline = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        cycle = self.cycle
        if phase == "headers" and not self._waiting_for_headers():
            return  # the headers came in time
        if phase == "body":
            if cycle is None or not self._body_arriving():
                return  # the body came in time
            if cycle.response_started:
                if cycle.response_complete:  # answered without it (a 413), and the rest is still dribbling in
                    transport.close()
                return
        transport.write(_TOO_LARGE if phase == "head-size" else _TIMEOUT)
        transport.close()

    def data_received(self, data: bytes) -> None:
        over = False
        if self._waiting_for_headers():
            if self._deadline is None:  # a new request on a kept-alive connection
                self._head_bytes = 0
                self._arm(self.limits.header_timeout, "headers")
            self._head_bytes += len(data)
            over = self._head_bytes > self.limits.max_header_bytes
        super().data_received(data)  # type: ignore[misc]
        cycle = self.cycle
        if cycle is not None and cycle is not self._seen_cycle:  # the headers just completed (the rest of this
            self._seen_cycle = cycle                             # data, the body's start, is not head bytes)
            if cycle.more_body:
                self._arm(self.limits.body_timeout, "body")
            else:
                self._disarm()
        elif over and self._waiting_for_headers():  # past the limit and still no complete head
            self._disarm()
            self._expire("head-size")
        elif cycle is not None and self._deadline is not None and self._phase == "body" and not self._body_arriving():
            self._disarm()  # the body completed in time (or the rest of one the app did not read)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


class _HttpToolsBody(_Deadlines):
    """httptools calls `on_message_complete` at the end of every request body, read or not."""

    _received: Any = None

    def on_message_complete(self) -> None:
        self._received = self.cycle
        super().on_message_complete()  # type: ignore[misc]

    def _body_arriving(self) -> bool:
        cycle = self.cycle
        return cycle is not None and cycle.more_body and self._received is not cycle


class _H11Body(_Deadlines):
    """h11 keeps the peer's state: SEND_BODY until the request's end has been parsed."""

    conn: Any

    def _body_arriving(self) -> bool:
        import h11

        return self.cycle is not None and self.conn.their_state is h11.SEND_BODY


def protocol(http: str = "httptools", limits: Limits = DEFAULT_LIMITS) -> type:
    """uvicorn's `http` protocol class ("httptools" or "h11") with the deadlines of `limits`."""
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

        mixin: type = _H11Body
    else:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base

        mixin = _HttpToolsBody
    return type(f"Limited{base.__name__}", (mixin, base), {"limits": limits})


def uvicorn_options(http: str = "httptools", limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments: the protocol class and the connection limit."""
    return {"http": protocol(http, limits), "limit_concurrency": limits.max_connections,
            "h11_max_incomplete_event_size": limits.max_header_bytes}
