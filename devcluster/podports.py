"""Simulated pods that answer on their ports: the devcluster kubelet's stand-in for a container listening.

Used by `kubelet.SimulatedKubelets` when `serve_ports` is on (devcluster and `lahar up` turn it on): a Running pod
gets an IP from a loopback range (`LOOPBACK_PREFIX`, Linux routes all of 127.0.0.0/8 to `lo`) and a listener on
`podIP:containerPort` for each TCP port its containers declare. A connection that sends an HTTP request gets
`200 OK` with a short body; any other connection is accepted and closed, which is what a TCP probe wants. So a
JobFlow `dependsOn.probe`, a readiness check or `curl` against a simulated pod passes while the pod runs.

`declared_ports(pod)` is the pure part (which ports to open); `PortServer` is the shell: one selector thread for all
listeners, opened when a pod turns Running, closed when it stops or goes away, at most `limit` at once.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["LOOPBACK_PREFIX", "PortServer", "can_listen", "declared_ports"]

log = logging.getLogger(__name__)

LOOPBACK_PREFIX = "127.244"  # pod IPs are 127.244.<node index>.<n> when ports are served
DEFAULT_LIMIT = 256  # listeners open at once over all pods; beyond it a pod's ports stay closed (logged)
_METHODS = (b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE ", b"OPTIONS ", b"PATCH ")
_BODY = b"ok\n"

Key = tuple[str, str]


def declared_ports(pod: Mapping[str, Any]) -> list[int]:
    """The distinct TCP `containerPort`s of the pod's containers (not init containers), in order; a port that is
    not an integer in 1-65535, or has another protocol, is left out."""
    out: list[int] = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in (container or {}).get("ports") or ():
            if not isinstance(port, Mapping) or str(port.get("protocol") or "TCP").upper() != "TCP":
                continue
            number = port.get("containerPort")
            if isinstance(number, int) and not isinstance(number, bool) and 0 < number < 65536 \
                    and number not in out:
                out.append(number)
    return out


def can_listen(ip: str, ports: list[int]) -> bool:
    """Whether every port is free on `ip` now (another devcluster on this machine may hold the same pod IP)."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((ip, port))
            except OSError:
                return False
    return True


class PortServer:
    """Listeners per pod on one selector thread; `open` and `close` are cheap and idempotent."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[Key, list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self, key: Key, ip: str, ports: list[int]) -> list[int]:
        """Listen on `ip:port` for each port, unless the pod already has listeners; returns the ports listening."""
        with self._lock:
            if key in self._listeners:
                return [s.getsockname()[1] for s in self._listeners[key]]
            socks: list[socket.socket] = []
            for port in ports:
                if sum(len(v) for v in self._listeners.values()) + len(socks) >= self.limit:
                    log.warning("pod %s/%s: %d port listeners open already; %s:%d not served", *key, self.limit,
                                ip, port)
                    break
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((ip, port))
                    sock.listen(16)
                    sock.setblocking(False)
                except OSError as exc:
                    sock.close()
                    log.warning("pod %s/%s: cannot listen on %s:%d: %s", *key, ip, port, exc)
                    continue
                self._selector.register(sock, selectors.EVENT_READ, "listen")
                socks.append(sock)
            self._listeners[key] = socks
            self._ensure_thread()
            return [s.getsockname()[1] for s in socks]

    def close(self, key: Key) -> None:
        with self._lock:
            for sock in self._listeners.pop(key, ()):
                self._drop(sock)

    def serving(self, key: Key) -> bool:
        with self._lock:
            return bool(self._listeners.get(key))

    def stop(self) -> None:
        with self._lock:
            for socks in self._listeners.values():
                for sock in socks:
                    self._drop(sock)
            self._listeners.clear()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # internals ----------------------------------------------------------------------------------------------

    def _drop(self, sock: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        sock.close()

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="sim-pod-ports", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                ready = self._selector.select(timeout=0.2) if self._selector.get_map() else []
            except (OSError, ValueError):  # a socket closed under select: look again
                ready = []
            if not ready and not self._selector.get_map():
                self._stop.wait(0.2)
            for selkey, _ in ready:
                sock: socket.socket = selkey.fileobj  # type: ignore[assignment]
                if selkey.data == "listen":
                    self._accept(sock)
                else:
                    self._answer(sock)

    def _accept(self, sock: socket.socket) -> None:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        conn.setblocking(False)
        with self._lock:
            self._selector.register(conn, selectors.EVENT_READ, "conn")

    def _answer(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
            if data.startswith(_METHODS):
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                body = b"" if data.startswith(b"HEAD ") else _BODY
                conn.setblocking(True)
                conn.settimeout(1.0)
                conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(_BODY) + body)
        except OSError:
            pass
        with self._lock:
            self._drop(conn)
