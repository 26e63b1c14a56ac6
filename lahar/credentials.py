"""Generated local credentials of lahar's processes: Flower's basic-auth login and the dashboard's token, kept in
the data dir (0600).

`lahar flower` and `lahar up` call `flower_login(data_dir)`; Flower then answers no request without it, on
loopback too, and (Flower's own check once any auth is on) refuses cross-site requests: a web page the user visits
cannot drive Flower's task API.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["DASHBOARD_FILE", "FLOWER_FILE", "FLOWER_USER", "CredentialsError", "check_login", "dashboard_token",
           "flower_login"]

FLOWER_FILE = "flower-auth"
FLOWER_USER = "lahar"


class CredentialsError(ValueError):
    """A login that Flower's `--basic-auth` cannot take; the message says which part is wrong."""


def check_login(text: str) -> str:
    """`user:password[,user:password]` with a non-empty user and password in each pair; returns it stripped."""
    text = text.strip()
    if not text:
        raise CredentialsError("basic auth is empty; want user:password")
    for pair in text.split(","):
        user, sep, password = pair.partition(":")
        if not sep or not user or not password:
            raise CredentialsError(f"basic auth {pair.split(':', 1)[0]!r}: want user:password with both non-empty")
    return text


def flower_login(data_dir: Path) -> tuple[str, Path]:
    """Flower's login (`user:password`) and the file that holds it: read from `<data_dir>/flower-auth`, or made
    there (a random password, the file created 0600). A file found with wider permissions is narrowed to 0600."""
    path = Path(data_dir) / FLOWER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        return check_login(path.read_text()), path
    login = f"{FLOWER_USER}:{secrets.token_urlsafe(18)}"
    with os.fdopen(fd, "w") as f:
        f.write(login + "\n")
    return login, path


DASHBOARD_FILE = "dashboard-token"


def dashboard_token(path: Path) -> str:
    """The dashboard's bearer token kept in the file `path` (`<data_dir>/dashboard-token` for `lahar up`): read, or
    made there (random, the file created 0600). A file found with wider permissions is narrowed to 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.chmod(path, 0o600)
        if text := path.read_text().strip():
            return text
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token
