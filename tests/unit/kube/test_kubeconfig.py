"""Finding the cluster like kubectl: explicit path, KUBECONFIG, ~/.kube/config, in-cluster; clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from lahar.kube import kubeconfig


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


# --- credential refresh: free when nothing can change ------------------------------------------------------------

def _exec_user(expiry: str | None) -> dict:
    status: dict = {"token": "from-exec"}
    if expiry:
        status["expirationTimestamp"] = expiry
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": status}
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                     "args": ["-c", f"print({json.dumps(json.dumps(credential))})"]}}


@pytest.mark.parametrize(
    ("user", "hook", "token"),
    [
        ({"token": "t0k"}, False, "bearer t0k"),
        ({"tokenFile": "TOKEN_FILE"}, False, "bearer from-file"),
        ({"username": "u", "password": "p"}, False, "basic dtpw"),
        (_exec_user(None), True, "bearer from-exec"),
        (_exec_user("2999-01-01T00:00:00Z"), True, "bearer from-exec"),
    ],
    ids=["static-token", "token-file-read-once", "basic-auth", "exec-plugin", "exec-plugin-expiring"],
)
def test_refresh_hook_only_when_credentials_can_change(tmp_path: Path, user: dict, hook: bool, token: str) -> None:
    (tmp_path / "token").write_text("from-file")
    user = {k: (str(tmp_path / "token") if v == "TOKEN_FILE" else v) for k, v in user.items()}
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://k:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    cfg = kubeconfig.load(path, environ={}, home=tmp_path, service_account_dir=tmp_path / "sa")
    assert (cfg.refresh_api_key_hook is not None) is hook
    assert cfg.auth_settings()["BearerToken"]["value"].lower() == token
    assert cfg.host == "https://k:6443"


def test_in_cluster_token_is_reread_once_a_period(layout: dict[str, Path]) -> None:
    _sa(layout)
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = kubeconfig.load(environ=environ, home=layout["home"], service_account_dir=layout["sa"])
    refresher = cfg.refresh_api_key_hook
    assert isinstance(refresher, kubeconfig.TokenFileRefresher)
    now = [0.0]
    refresher = kubeconfig.TokenFileRefresher(layout["sa"] / "token", period=60.0, clock=lambda: now[0])
    cfg.refresh_api_key_hook = refresher
    (layout["sa"] / "token").write_text("rotated\n")
    assert cfg.auth_settings()["BearerToken"]["value"] == "bearer in-cluster-token"  # within the period
    now[0] = 60.0
    assert cfg.auth_settings()["BearerToken"]["value"] == "bearer rotated"
    (layout["sa"] / "token").write_text("")
    now[0] = 121.0
    with pytest.raises(Exception, match="empty"):
        cfg.auth_settings()
    assert cfg.host == "https://10.0.0.1:443"


# --- a KUBECONFIG list, merged as kubectl merges it; --context ------------------------------------------------------


def _doc(server: str, *, cluster: str, user: str, context: str, current: str | None, token: str) -> dict:
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": cluster, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
           "users": [{"name": user, "user": {"token": token}}],
           "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}]}
    if current:
        doc["current-context"] = current
    return doc


@pytest.mark.parametrize(("first_current", "context", "host", "token"), [
    ("a", None, "https://a:6443", "ta"),
    (None, None, "https://b:6443", "tb"),
    ("a", "b", "https://b:6443", "tb"),
    ("a", "shared", "https://a:6443", "ta"),
], ids=["first-files-current-context", "current-context-from-the-first-file-that-sets-one",
        "context-flag-picks-a-context-of-the-second-file", "first-definition-of-a-name-wins"])
def test_kubeconfig_list_is_merged_like_kubectl(tmp_path: Path, first_current, context, host, token) -> None:
    first = _doc("https://a:6443", cluster="ka", user="ua", context="a", current=first_current, token="ta")
    first["contexts"].append({"name": "shared", "context": {"cluster": "ka", "user": "ua"}})
    second = _doc("https://b:6443", cluster="kb", user="ub", context="b", current="b", token="tb")
    second["contexts"].append({"name": "shared", "context": {"cluster": "kb", "user": "ub"}})
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(first))
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(second))
    environ = {"KUBECONFIG": f"{tmp_path / 'missing.yaml'}:{tmp_path / 'one.yaml'}:{tmp_path / 'two.yaml'}"}
    source = kubeconfig.find(environ=environ, home=tmp_path, service_account_dir=tmp_path / "sa")
    assert source.files == (tmp_path / "one.yaml", tmp_path / "two.yaml")
    cfg = kubeconfig.load(context=context, environ=environ, home=tmp_path, service_account_dir=tmp_path / "sa")
    assert cfg.host == host
    assert cfg.auth_settings()["BearerToken"]["value"].lower() == f"bearer {token}"


def test_an_unknown_context_is_reported(layout: dict[str, Path]) -> None:
    with pytest.raises(kubeconfig.ClusterNotFound, match="not usable.*nope"):
        kubeconfig.load(layout["explicit"], context="nope", environ={}, home=layout["home"],
                        service_account_dir=layout["sa"])


@pytest.mark.parametrize(("docs", "want"), [
    ([{"current-context": "a"}, {"current-context": "b"}], "a"),
    ([{}, {"current-context": "b"}], "b"),
    ([None, {"current-context": ""}, {"current-context": "c"}], "c"),
    ([{}, {}], None),
], ids=["first", "first-that-sets-one", "empty-and-unreadable-skipped", "none"])
def test_merged_current_context(docs, want) -> None:
    assert kubeconfig.merged_current_context(docs) == want
