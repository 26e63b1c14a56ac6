"""Processes started with `--log-format json` write JSON lines only: the Celery worker, devcluster (uvicorn), and
`lahar up` with every process it starts (issue 12: JSON logs on every process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lahar import logs

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("argv", "want"), [
    (["worker", "--no-supervise", "-P", "solo"], "celery.worker"),
    (["devcluster", "--port", "0", "--data-dir", "dc", "--nodes", "1"], "lahar.devcluster"),
], ids=["worker-celery", "devcluster-uvicorn"])
def test_a_process_started_with_log_format_json_writes_json_lines(argv, want, tmp_path) -> None:
    """A real process (the Celery worker, against a Redis that is not there; devcluster with its uvicorn) started
    with --log-format json: until it is stopped with SIGTERM, every line it writes, stdout and stderr, is one JSON
    object (Celery's banner and shutdown notices included)."""
    env = dict(os.environ, REDIS_URL="redis://127.0.0.1:9/0", LAHAR_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    env.pop(logs.ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", *argv, "--log-format", "json", "--log-level", "info"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(want in line for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        os.killpg(proc.pid, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        lines += rest.splitlines()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    lines = [line for line in lines if line.strip()]
    assert any(want in line for line in lines), lines
    for line in lines:
        doc = json.loads(line)
        assert {"time", "level", "logger", "message", "pid"} <= doc.keys(), doc


def test_lahar_up_with_log_format_json_writes_json_lines_and_so_do_its_processes(tmp_path) -> None:
    """`lahar up --log-format json` until it is up, then SIGINT: its own lines and every line of every process's log
    (webhook, dispatch, worker, scheduler, beat, flower) are JSON objects; the embedded redis-server keeps its own."""
    env = dict(os.environ, LAHAR_DATA_DIR=str(tmp_path / "d"), PYTHONUNBUFFERED="1")
    for name in (logs.ENV, "REDIS_URL", "KUBECONFIG"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "up", "--port", "0", "--data-dir", str(tmp_path / "d"),
                             "--log-format", "json"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any("=running" in line and "starting" not in line
                                                      for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        time.sleep(3)  # the processes write their first lines
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        lines += rest.splitlines()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    own = [json.loads(line) for line in lines if line.strip()]
    assert any(d["message"].startswith("lahar is up") for d in own)
    assert own[-1]["message"] == "stopped."
    logs_dir = tmp_path / "d" / "logs"
    seen = {}
    for path in sorted(logs_dir.glob("*.log")):
        if path.stem == "redis":  # redis-server's own log format, not a lahar process
            continue
        text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        seen[path.stem] = len(text)
        for line in text:
            assert isinstance(json.loads(line), dict), f"{path.name}: {line}"
    assert {"webhook", "dispatch", "worker", "scheduler", "beat", "flower"} <= seen.keys()
