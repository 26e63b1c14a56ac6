"""lahar.credentials: Flower's generated login (made once, 0600, kept across starts) and the check of a given one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lahar import credentials


def test_the_login_is_made_once_0600_and_kept(tmp_path) -> None:
    login, path = credentials.flower_login(tmp_path / "data")
    user, _, password = login.partition(":")
    assert user == credentials.FLOWER_USER and len(password) >= 20
    assert path == tmp_path / "data" / credentials.FLOWER_FILE
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert credentials.flower_login(tmp_path / "data") == (login, path)


def test_a_wider_file_is_narrowed_on_reopen(tmp_path) -> None:
    path = tmp_path / credentials.FLOWER_FILE
    path.write_text("me:secret\n")
    os.chmod(path, 0o644)
    assert credentials.flower_login(tmp_path) == ("me:secret", path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("text", "ok"), [
    ("a:b", True), ("a:b,c:d", True), ("a:b:c", True), ("", False), ("nocolon", False), (":pw", False),
    ("user:", False), ("a:b,", False),
], ids=["one", "two", "colon-in-password", "empty", "no-colon", "no-user", "no-password", "empty-second"])
def test_check_login(text, ok) -> None:
    if ok:
        assert credentials.check_login(text) == text
    else:
        with pytest.raises(credentials.CredentialsError, match="want user:password"):
            credentials.check_login(text)


def test_the_dashboard_token_is_made_once_0600_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / credentials.DASHBOARD_FILE
    token = credentials.dashboard_token(path)
    assert len(token) >= 24 and path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    assert credentials.dashboard_token(path) == token and path.stat().st_mode & 0o777 == 0o600
    path.write_text("\n")
    assert credentials.dashboard_token(path) not in ("", token)
