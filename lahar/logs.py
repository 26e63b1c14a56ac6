"""One logging setup for every `lahar` process: text lines or JSON lines (`--log-format`, `LAHAR_LOG_FORMAT`).

Each command calls `setup(level=..., fmt=...)` once before it starts its work; the Celery processes (worker,
scheduler, beat, flower) route Celery's own logging set-up here through its `setup_logging` signal, and the uvicorn
servers (webhook, devcluster) log through the root logger, so one process writes one format. The format is put into
the environment too, so the processes a command starts (`lahar up`'s children, the supervised worker) inherit it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO

__all__ = ["ENV", "FORMATS", "JsonFormatter", "TEXT_FORMAT", "capture_stdout", "check_format", "check_level", "setup"]

ENV = "LAHAR_LOG_FORMAT"
FORMATS = ("text", "json")
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# LogRecord attributes that are not `extra=` fields
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339, UTC, ms), level, logger, message, pid, then any `extra=` fields;
    `exc` holds a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exc"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


def check_format(fmt: str | None) -> str:
    """`text` or `json` (case-insensitive; None → `LAHAR_LOG_FORMAT`, else text); ValueError naming the choices."""
    value = (fmt if fmt is not None else os.environ.get(ENV) or "text").strip().lower()
    if value not in FORMATS:
        raise ValueError(f"log format {value!r} is not one of {', '.join(FORMATS)}")
    return value


def check_level(level: str | int | None) -> str:
    """A level name logging knows (case-insensitive; None → INFO); ValueError naming the choices."""
    if isinstance(level, int):
        return logging.getLevelName(level)
    value = (level or "INFO").strip().upper()
    if value == "WARN":
        value = "WARNING"
    if value not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS).lower()}")
    return value


def setup(*, level: str | int | None = None, fmt: str | None = None, stream: TextIO | None = None) -> str:
    """Configure the root logger (one handler on stderr, replacing any) and export the format; returns it."""
    fmt = check_format(fmt)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(check_level(level))
    # billiard (Celery's prefork pool) logs to "multiprocessing" with propagate off and no handler of its own, so
    # its records ("Process 'ForkPoolWorker-2' ... exited with 'signal 15'") met logging's bare last-resort handler
    mp = logging.getLogger("multiprocessing")
    for old in list(mp.handlers):
        mp.removeHandler(old)
    mp.addHandler(handler)
    os.environ[ENV] = fmt
    logging.captureWarnings(True)
    return fmt


class _LineLogger:
    """A text stream that turns each line written to it into a log record (stdout of a process in JSON mode)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if line.strip():
                self.logger.info(line.rstrip())
        return len(text)

    def flush(self) -> None:
        if self._buf.strip():
            self.logger.info(self._buf.rstrip())
        self._buf = ""

    def isatty(self) -> bool:
        return False


def announce(line: str, logger: str = "lahar") -> None:
    """A line for the person who started the process (where to open it, its token): on stderr as it is, or in
    JSON mode one JSON line (logged at WARNING, so it shows at every level but ERROR)."""
    if os.environ.get(ENV) == "json":
        logging.getLogger(logger).warning(line)
    else:
        print(line, file=sys.stderr, flush=True)


def capture_stdout() -> None:
    """In JSON mode, what a long-running process prints (Celery beat's banner, a library's notice) becomes JSON
    lines too, logged as `stdout`. A command whose output is its result (`lahar job list`) never calls this."""
    if os.environ.get(ENV) == "json" and not isinstance(sys.stdout, _LineLogger):
        sys.stdout = _LineLogger(logging.getLogger("stdout"))  # type: ignore[assignment]
