"""lahar.logs: the JSON formatter, the checks of --log-format and --log-level, `lahar up`'s separator lines
(the processes started with `--log-format json` are tests/e2e/test_json_logs.py)."""

from __future__ import annotations

import io
import json
import logging
import os

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


def test_the_prefork_pools_records_are_json_lines_too() -> None:
    """billiard logs to "multiprocessing" with propagate off and no handler: its worker-exit line came out bare,
    the one non-JSON line of a `lahar up --log-format json` that was stopped while a pool child was exiting."""
    mp = logging.getLogger("multiprocessing")
    handlers, propagate = list(mp.handlers), mp.propagate
    out = io.StringIO()
    try:
        logs.setup(level="info", fmt="json", stream=out)
        mp.propagate = False  # as billiard.util.get_logger leaves it
        mp.error("Process %r pid:%r exited with %r", "ForkPoolWorker-2", 7, "signal 15 (SIGTERM)")
    finally:
        mp.handlers[:] = handlers
        mp.propagate = propagate
    line = json.loads(out.getvalue().splitlines()[-1])
    assert (line["level"], line["logger"]) == ("ERROR", "multiprocessing") and "ForkPoolWorker-2" in line["message"]


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


@pytest.mark.parametrize("json_lines", [True, False], ids=["json", "text"])
def test_up_writes_its_separator_lines_in_the_log_format(json_lines) -> None:
    from lahar.up import children

    line = children._starting_line("worker", ["lahar", "worker"], json_lines=json_lines).decode()
    if json_lines:
        doc = json.loads(line)
        assert doc["logger"] == "lahar.up" and doc["message"] == "lahar up: starting worker: lahar worker"
    else:
        assert line == "\n--- lahar up: starting worker: lahar worker\n"
