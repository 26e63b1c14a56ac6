"""lahar.logs: the JSON formatter, the checks of --log-format and --log-level, and one process started with
`--log-format json` writing only JSON lines."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from lahar import logs


@pytest.fixture(autouse=True)
def _restore_root(monkeypatch):
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.delenv(logs.ENV, raising=False)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


def test_json_lines_carry_level_logger_message_extra_and_traceback() -> None:
    out = io.StringIO()
    assert logs.setup(level="info", fmt="json", stream=out) == "json"
    log = logging.getLogger("lahar.test")
    log.info("reconciled %s", "Job/ns/j", extra={"key": "Job/ns/j", "outcome": "ok"})
    log.debug("not shown at info")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["level"], d["logger"], d["message"]) for d in lines] == [
        ("INFO", "lahar.test", "reconciled Job/ns/j"), ("ERROR", "lahar.test", "failed")]
    assert lines[0]["key"] == "Job/ns/j" and lines[0]["outcome"] == "ok" and lines[0]["pid"] == os.getpid()
    assert lines[0]["time"].endswith("Z") and "RuntimeError: boom" in lines[1]["exc"]
    assert os.environ[logs.ENV] == "json"  # what the processes it starts inherit


def test_text_is_the_default() -> None:
    out = io.StringIO()
    assert logs.setup(stream=out) == "text"
    logging.getLogger("x").warning("hello")
    assert out.getvalue().rstrip().endswith("WARNING x: hello")


@pytest.mark.parametrize(("given", "env", "want"), [
    (None, None, "text"), (None, "json", "json"), ("JSON", "text", "json"), ("text", "json", "text"),
    ("yaml", None, ValueError), (None, "xml", ValueError),
], ids=["default", "from-env", "flag-wins-case-insensitive", "flag-wins-over-env", "bad-flag", "bad-env"])
def test_check_format(given, env, want, monkeypatch) -> None:
    if env is not None:
        monkeypatch.setenv(logs.ENV, env)
    if want is ValueError:
        with pytest.raises(ValueError, match="is not one of text, json"):
            logs.check_format(given)
    else:
        assert logs.check_format(given) == want


@pytest.mark.parametrize(("given", "want"), [
    (None, "INFO"), ("debug", "DEBUG"), ("warn", "WARNING"), (logging.ERROR, "ERROR"), ("loud", ValueError),
], ids=["default", "lower-case", "warn-alias", "celery-int", "bad"])
def test_check_level(given, want) -> None:
    if want is ValueError:
        with pytest.raises(ValueError, match="log level 'loud' is not one of"):
            logs.check_level(given)
    else:
        assert logs.check_level(given) == want


def test_a_bad_log_format_is_a_usage_error_naming_the_flag() -> None:
    from typer.testing import CliRunner

    from lahar.cli import app

    res = CliRunner().invoke(app, ["dispatch", "--log-format", "yaml"])
    assert res.exit_code == 2 and "--log-format" in res.output and "is not one of text, json" in res.output


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
