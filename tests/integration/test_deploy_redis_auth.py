"""The Redis container of deploy/ (kustomize base and chart), run for real: its start script with a real
redis-server refuses unauthenticated clients, answers with the Secret's password, keeps protected mode on, writes
the password only to a 0600 file, and never shows it on the server's command line (/proc/<pid>/cmdline)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import free_port
from tests.unit.deploy.deploy_objects import chart, container, kustomize

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not on PATH")
PASSWORD = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.mark.parametrize("render", [kustomize, chart], ids=["kustomize", "chart"])
def test_redis_start_script_requires_the_password(tmp_path: Path, render: object) -> None:
    c = container(render(), "lahar-redis")  # type: ignore[operator]
    port = free_port()
    script = c["args"][0].replace("/tmp/redis.conf", str(tmp_path / "redis.conf")).replace(
        "--dir /data", f"--dir {tmp_path}") + f" --port {port} --bind 127.0.0.1"
    proc = subprocess.Popen([*c["command"], script], env={**os.environ, "REDIS_PASSWORD": PASSWORD},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=PASSWORD, socket_timeout=2)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, socket_timeout=2).ping()
        assert client.config_get("protected-mode") == {"protected-mode": "yes"}
        assert (tmp_path / "redis.conf").stat().st_mode & 0o777 == 0o600
        assert PASSWORD.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    finally:
        proc.terminate()
        proc.wait(10)
