"""`lahar dashboard` as a command: its address carries the token once, a missing cluster or a port in use is a
usage error naming the flag (no traceback), and `lahar` lists the command."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lahar.cli import app
from lahar.commands import dashboard

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("host", "url"), [
    ("127.0.0.1", "http://127.0.0.1:8470/?token=t0k"),
    ("::1", "http://[::1]:8470/?token=t0k"),
], ids=["ipv4", "ipv6"])
def test_url_of(host: str, url: str) -> None:
    assert dashboard.url_of(host, 8470, "t0k") == url


def test_the_command_is_listed() -> None:
    out = CliRunner().invoke(app, ["--help"])
    assert "dashboard" in out.output


def test_no_cluster_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["dashboard", "--kubeconfig", str(tmp_path / "missing"), "--port", "0"])
    assert out.exit_code == 2 and "--kubeconfig" in out.output and "no cluster to show" in out.output
    assert "Traceback" not in out.output


def test_a_port_in_use_is_a_usage_error_naming_the_flag(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "users: [{name: u, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                          "current-context: x\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = CliRunner().invoke(app, ["dashboard", "--kubeconfig", str(kubeconfig), "--port", str(port)])
    assert out.exit_code == 2 and "--port" in out.output and "cannot listen" in out.output


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/metrics", "127.0.0.1:9443/metrics", ""],
                         ids=["other-scheme", "no-scheme", "empty"])
def test_a_webhook_metrics_address_that_is_no_url_is_a_usage_error(tmp_path: Path, url: str) -> None:
    out = CliRunner().invoke(app, ["dashboard", "--kubeconfig", str(tmp_path / "missing"), "--port", "0",
                                   "--webhook-metrics", url])
    assert out.exit_code == 2 and "--webhook-metrics" in out.output and "is no http(s) address" in out.output
    assert "Traceback" not in out.output
