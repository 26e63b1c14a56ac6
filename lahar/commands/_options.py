"""Options that every process command spells the same way (`--log-level`, `--log-format`) and their set-up.

Used by the command modules of `lahar.commands`; the logging itself is `lahar.logs`.
"""

from __future__ import annotations

from typing import Any

import typer

__all__ = ["celery_globals", "init_logging", "log_format_option", "log_level_option"]


def log_level_option(default: str | None = None, *, help_text: str | None = None) -> Any:
    return typer.Option(default, "--log-level", "-l", metavar="LEVEL",
                        help=help_text or "Log level: debug, info, warning, error (default LAHAR_LOG_LEVEL, info).")


def log_format_option() -> Any:
    return typer.Option(None, "--log-format", metavar="FORMAT",
                        help="Log lines as text or json (default LAHAR_LOG_FORMAT, text).")


def init_logging(level: str | None, fmt: str | None, *, default_level: str | None = None,
                 capture_stdout: bool = False) -> str:
    """Set up logging from the flags (else the environment); a bad value is a usage error naming the flag."""
    from lahar import logs
    from lahar.settings import Settings

    try:
        checked_fmt = logs.check_format(fmt)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-format") from e
    try:
        checked_level = logs.check_level(level or default_level or Settings().log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-level") from e
    logs.setup(level=checked_level, fmt=checked_fmt)
    if capture_stdout:
        logs.capture_stdout()
    return checked_level


def celery_globals() -> list[str]:
    """Celery's global options before its sub-command: no banner on stdout when the logs are JSON lines."""
    import os

    from lahar import logs

    return ["--quiet"] if os.environ.get(logs.ENV) == "json" else []
