"""Shared pytest fixtures: `live_devcluster`, a real devcluster over HTTPS on a free loopback port.

Session-scoped (one per xdist worker): tests isolate themselves with fresh namespaces. In-process, so `.store` is
the engine behind it; `small_history()` lazily starts a second cluster whose store keeps few watch events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SMALL_HISTORY = 20


@dataclass
class LiveCluster:
    url: str
    kubeconfig: Path
    token: str
    ca_path: Path
    store: Any
    data_dir: Path
    devcluster: Any
    _extra: list[Any] = field(default_factory=list)
    _small: tuple[Any, int] | None = None

    def small_history(self) -> tuple[Any, int]:
        """(a RestClient on a second devcluster keeping only SMALL_HISTORY watch events, that size)."""
        if self._small is None:
            from lahar.devcluster.server import DevCluster
            from lahar.kube import kubeconfig
            from lahar.kube.apiserver import store
            from lahar.kube.rest import RestClient

            dc = DevCluster(self.data_dir.parent / "small", store=store.Store(history=SMALL_HISTORY),
                            bookmark_interval=1.0).start()
            client = RestClient(kubeconfig.load(dc.kubeconfig))
            self._extra += [client, dc]
            self._small = (client, SMALL_HISTORY)
        return self._small

    def close(self) -> None:
        for thing in self._extra:
            thing.close() if hasattr(thing, "close") else thing.stop()
        self.devcluster.stop()


@pytest.fixture(autouse=True)
def _fresh_event_recorder() -> None:
    """Each test starts as a new process would: no Event remembered in `kube.events`' aggregation cache (tests reuse
    object names and UIDs across clusters)."""
    from lahar.kube import events

    events.RECORDER.clear()


@pytest.fixture(scope="session")
def live_devcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    """A devcluster (SQLite state, TLS, bearer token) serving on 127.0.0.1:<free port> for this session."""
    from lahar.devcluster.server import DevCluster

    data_dir = tmp_path_factory.mktemp("devcluster") / "data"
    dc = DevCluster(data_dir, bookmark_interval=1.0).start()
    live = LiveCluster(url=dc.url, kubeconfig=dc.kubeconfig, token=dc.token, ca_path=dc.ca_path, store=dc.store,
                       data_dir=data_dir, devcluster=dc)
    try:
        yield live
    finally:
        live.close()


@dataclass
class RedisServer:
    url: str
    port: int
    proc: Any
    data_dir: Path

    def restart(self) -> None:
        """Stop and start the same server (same port, no persistence): what a Redis restart looks like."""
        self.proc.terminate()
        self.proc.wait(10)
        self.proc = _start_redis(self.port, self.data_dir)


def _start_redis(port: int, data_dir: Path) -> Any:
    import socket
    import subprocess
    import time

    from lahar.up import find_redis_server

    proc = subprocess.Popen(
        [find_redis_server().binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(data_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start in 20 s")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server (or the valkey-server lahar's install brings) on a free loopback port for this session
    (one per xdist worker)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data_dir = tmp_path_factory.mktemp("redis")
    server = RedisServer(url=f"redis://127.0.0.1:{port}/0", port=port, proc=_start_redis(port, data_dir),
                         data_dir=data_dir)
    try:
        yield server
    finally:
        server.proc.terminate()
        server.proc.wait(10)
