"""A JobFlow step's `dependsOn.probe`: is it satisfied by the pods of the step's target Jobs?

Pure over observed pods plus an injected `Checker` (the network call), so `jobflows` can table-test it. A probe
entry names a task of the target Jobs: `taskStatusList` wants every pod of that task in `phase`; `httpGetList`
and `tcpSocketList` want every Running pod of that task to answer on `podIP:port` (HTTP: a status 200-399, as a
kubelet probe). An entry that matches no pod is not satisfied. `network_checker` is the real checker.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.kube.models import labels

__all__ = ["Checker", "Endpoint", "network_checker", "satisfied"]

Obj = Mapping[str, Any]
TIMEOUT = 1.0  # seconds per connection attempt; a reconcile re-checks a probe every few seconds


@dataclass(frozen=True)
class Endpoint:
    """One check to make: `scheme` is "http" or "tcp"; `headers` only for http."""

    scheme: str
    host: str
    port: int
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = field(default=())


Checker = Callable[[Endpoint], bool]


def _task(pod: Obj) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(labels.TASK_SPEC_KEY)


def _phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def _pods_of(pods: Sequence[Obj], task: str | None) -> list[Obj]:
    return [p for p in pods if task and _task(p) == task]


def _headers(entry: Obj) -> tuple[tuple[str, str], ...]:
    header = entry.get("httpHeader") or {}
    if isinstance(header, Mapping) and header.get("name"):
        return ((str(header["name"]), str(header.get("value") or "")),)
    return ()


def _reachable(entry: Obj, pods: Sequence[Obj], scheme: str, check: Checker) -> bool:
    running = [p for p in _pods_of(pods, entry.get("taskName")) if _phase(p) == "Running"]
    if not running or not entry.get("port"):
        return False
    for pod in running:
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            return False
        path = str(entry.get("path") or "/")
        ep = Endpoint(scheme=scheme, host=str(ip), port=int(entry["port"]),
                      path=path if path.startswith("/") else "/" + path,
                      headers=_headers(entry) if scheme == "http" else ())
        if not check(ep):
            return False
    return True


def satisfied(probe: Obj | None, pods: Sequence[Obj], check: Checker) -> bool:
    """True when every entry of `probe` holds for `pods` (the target Jobs' pods); no probe or an empty one holds."""
    if not probe:
        return True
    for entry in probe.get("taskStatusList") or ():
        matching = _pods_of(pods, entry.get("taskName"))
        if not matching or any(_phase(p) != entry.get("phase") for p in matching):
            return False
    for entry in probe.get("httpGetList") or ():
        if not _reachable(entry, pods, "http", check):
            return False
    return all(_reachable(entry, pods, "tcp", check) for entry in probe.get("tcpSocketList") or ())


def network_checker(ep: Endpoint) -> bool:
    """The real checker: an HTTP GET answered 200-399, or a TCP connection accepted, within `TIMEOUT`."""
    try:
        if ep.scheme == "tcp":
            with socket.create_connection((ep.host, ep.port), timeout=TIMEOUT):
                return True
        conn = http.client.HTTPConnection(ep.host, ep.port, timeout=TIMEOUT)
        try:
            conn.request("GET", ep.path, headers=dict(ep.headers))
            return 200 <= conn.getresponse().status < 400
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False
