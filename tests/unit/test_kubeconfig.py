"""Finding the cluster like kubectl: explicit path, KUBECONFIG, ~/.kube/config, in-cluster; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kube import kubeconfig


def _write_kubeconfig(path: Path, server: str, token: str = "t0k") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "default"}}],
    }))
    return path


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "home"
    home.mkdir()
    sa = tmp_path / "sa"
    return {
        "home": home,
        "explicit": _write_kubeconfig(tmp_path / "explicit.yaml", "https://explicit:6443"),
        "env": _write_kubeconfig(tmp_path / "env.yaml", "https://env:6443"),
        "homecfg": home / ".kube" / "config",
        "sa": sa,
    }


def _sa(layout: dict[str, Path]) -> None:
    sa = layout["sa"]
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text("in-cluster-token")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")


@pytest.mark.parametrize(
    ("explicit", "env", "home", "incluster", "kind", "host"),
    [
        (True, True, True, True, "explicit", "https://explicit:6443"),
        (False, True, True, True, "KUBECONFIG", "https://env:6443"),
        (False, False, True, True, "home", "https://home:6443"),
        (False, False, False, True, "incluster", "https://10.0.0.1:443"),
    ],
    ids=["explicit-wins", "kubeconfig-env", "home", "in-cluster"],
)
def test_source_order(layout: dict[str, Path], explicit: bool, env: bool, home: bool, incluster: bool,
                      kind: str, host: str) -> None:
    environ: dict[str, str] = {}
    if env:
        environ["KUBECONFIG"] = f"{layout['home'] / 'missing.yaml'}:{layout['env']}"
    if home:
        _write_kubeconfig(layout["homecfg"], "https://home:6443")
    if incluster:
        _sa(layout)
        environ |= {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    path = layout["explicit"] if explicit else None
    source = kubeconfig.find(path, environ=environ, home=layout["home"], service_account_dir=layout["sa"])
    assert source.kind == kind
    cfg = kubeconfig.load(path, environ=environ, home=layout["home"], service_account_dir=layout["sa"])
    assert cfg.host == host
    token = "in-cluster-token" if kind == "incluster" else "t0k"
    assert cfg.auth_settings()["BearerToken"]["value"].lower() == f"bearer {token}"


def test_nothing_found_names_everything_tried(layout: dict[str, Path]) -> None:
    with pytest.raises(kubeconfig.ClusterNotFound) as ei:
        kubeconfig.find(environ={"KUBECONFIG": "/nonexistent/kc"}, home=layout["home"],
                        service_account_dir=layout["sa"])
    msg = str(ei.value)
    assert "KUBECONFIG=/nonexistent/kc" in msg
    assert str(layout["homecfg"]) in msg
    assert "KUBERNETES_SERVICE_HOST" in msg and "token" in msg


def test_explicit_missing_path_is_an_error(layout: dict[str, Path]) -> None:
    with pytest.raises(kubeconfig.ClusterNotFound, match="given explicitly"):
        kubeconfig.find(layout["home"] / "nope.yaml", environ={}, home=layout["home"],
                        service_account_dir=layout["sa"])


def test_broken_kubeconfig_is_reported(layout: dict[str, Path]) -> None:
    bad = layout["home"] / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: missing\n")
    with pytest.raises(kubeconfig.ClusterNotFound, match="not usable"):
        kubeconfig.load(bad, environ={}, home=layout["home"], service_account_dir=layout["sa"])
