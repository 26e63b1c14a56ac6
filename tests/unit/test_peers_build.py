"""The pure parts of tests/peers/build.py (`make peers`): which modules a wrapper go.mod must pin, to what version,
and the skip reason a real-cluster test gives when a peer is not built."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers import build

KUBE_GOMOD = """\
module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
\tgithub.com/spf13/cobra v1.10.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver // the staging copy
)
"""

ETCD_GOMOD = """\
module go.etcd.io/etcd/server/v3

go 1.26.0

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
\tgo.etcd.io/etcd/client/v3 => ../client/v3
)

// Bad imports are sometimes causing attempts to pull that code.
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
replace github.com/example/fork => github.com/example/fork v1.2.3
"""


@pytest.mark.parametrize(("gomod", "expected"), [
    (KUBE_GOMOD, ["k8s.io/api", "k8s.io/apiserver"]),
    (ETCD_GOMOD, ["go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/client/v3"]),
    ("module sigs.k8s.io/kwok\n\ngo 1.26.0\n\nrequire k8s.io/api v0.36.1\n", []),
], ids=["kubernetes-staging", "etcd-siblings-without-forbidden-and-module-replaces", "kwok-none"])
def test_local_replaces(gomod: str, expected: list[str]) -> None:
    assert build.local_replaces(gomod) == expected


@pytest.mark.parametrize(("module", "version", "replaced", "expected"), [
    ("k8s.io/kubernetes", "v1.35.4", "k8s.io/apiserver", "v0.35.4"),
    ("k8s.io/kubernetes", "v1.34.0", "k8s.io/api", "v0.34.0"),
    ("go.etcd.io/etcd/server/v3", "v3.6.16", "go.etcd.io/etcd/api/v3", "v3.6.16"),
], ids=["kube-staging-v0", "kube-staging-patch-zero", "etcd-shared-version"])
def test_staging_version(module: str, version: str, replaced: str, expected: str) -> None:
    assert build.staging_version(module, version, replaced) == expected


def test_wrapper_gomod_pins_every_staging_module() -> None:
    peer = build.Peer("kube-apiserver", "k8s.io/kubernetes", "v1.35.4", "k8s.io/kubernetes/cmd/kube-apiserver")
    out = build.wrapper_gomod(peer, KUBE_GOMOD)
    assert out.splitlines() == [
        "module lahar.local/peers/kube-apiserver", "", "go 1.25.0", "", "require k8s.io/kubernetes v1.35.4", "",
        "replace k8s.io/api => k8s.io/api v0.35.4",
        "replace k8s.io/apiserver => k8s.io/apiserver v0.35.4",
    ]


def test_every_peer_is_pinned_and_unique() -> None:
    names = [p.name for p in build.PEERS]
    assert len(names) == len(set(names))
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "vc-scheduler"} <= set(names)
    assert all(p.version.startswith("v") and p.package.startswith(p.module) for p in build.PEERS)


def test_missing_peer_skip_reason_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAHAR_PEERS_CACHE", str(tmp_path))
    assert build.binary("kube-apiserver") is None
    reason = build.missing_reason("kube-apiserver")
    assert "kube-apiserver (k8s.io/kubernetes@v1.35.4) is not built" in reason and "make peers" in reason


def test_failed_build_is_named_in_the_skip_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAHAR_PEERS_CACHE", str(tmp_path))
    (tmp_path / "kwok-v0.8.0").mkdir()
    (tmp_path / "kwok-v0.8.0" / "build-failed.txt").write_text("go get failed\nmodule not found\n")
    assert "its last build failed: module not found" in build.missing_reason("kwok")


def test_cached_binary_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAHAR_PEERS_CACHE", str(tmp_path))
    exe = tmp_path / "etcd-v3.6.16" / "etcd"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert build.binary("etcd") == exe
    assert build.build(build._peer("etcd"))[0] == "cached"


def test_unknown_peer_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown peer 'vcctl'; known: etcd"):
        build.binary("vcctl")


def test_no_go_toolchain_builds_nothing_and_succeeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LAHAR_PEERS_CACHE", str(tmp_path))
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert build.main([]) == 0
    assert "no Go toolchain" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("raw", "expected"), [(None, 1), ("4", 4)], ids=["default-one", "set"])
def test_build_jobs(monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: int) -> None:
    if raw is None:
        monkeypatch.delenv("LAHAR_PEERS_BUILD_JOBS", raising=False)
    else:
        monkeypatch.setenv("LAHAR_PEERS_BUILD_JOBS", raw)
    assert build.build_jobs() == expected


@pytest.mark.parametrize("raw", ["0", "-2", "many"], ids=["zero", "negative", "word"])
def test_bad_build_jobs_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("LAHAR_PEERS_BUILD_JOBS", raw)
    with pytest.raises(ValueError, match=f"LAHAR_PEERS_BUILD_JOBS must be a positive integer, not '{raw}'"):
        build.build_jobs()


@pytest.mark.parametrize(("download", "expected"), [
    ({"Path": "volcano.sh/volcano", "Version": "v1.13.3",
      "Error": "volcano.sh/volcano@v1.13.3: reading https://proxy.golang.org/volcano.sh/volcano/@v/v1.13.3.info: "
               "403 Forbidden\n\tserver response: This module version is not available."},
     "volcano.sh/volcano@v1.13.3: reading https://proxy.golang.org/volcano.sh/volcano/@v/v1.13.3.info: 403 Forbidden"),
    ({"Path": "volcano.sh/volcano", "Version": "v1.13.3", "Dir": "/mod/volcano.sh/volcano@v1.13.3",
      "GoMod": "/mod/cache/volcano.sh/volcano/@v/v1.13.3.mod"}, None),
    ({"Path": "volcano.sh/volcano", "Version": "v1.13.3"}, "go mod download gave neither Dir nor GoMod"),
], ids=["proxy-403-first-line", "served", "empty-answer"])
def test_proxy_error(download: dict[str, str], expected: str | None) -> None:
    assert build.proxy_error(download) == expected


@pytest.mark.parametrize(("env", "expected"), [
    ({}, ["https://github.com/volcano-sh/volcano.git"]),
    ({"LAHAR_PEERS_VOLCANO_GIT": "/src/volcano"}, ["/src/volcano", "https://github.com/volcano-sh/volcano.git"]),
    ({"LAHAR_PEERS_VOLCANO_GIT": ""}, ["https://github.com/volcano-sh/volcano.git"]),
], ids=["upstream-only", "override-first", "empty-override-ignored"])
def test_git_sources_for_volcano(env: dict[str, str], expected: list[str]) -> None:
    assert build.git_sources(build._peer("vc-scheduler"), env) == expected


def test_module_peers_have_no_git_fallback() -> None:
    assert build.git_sources(build._peer("kwok"), {"LAHAR_PEERS_VOLCANO_GIT": "/src/volcano"}) == []


def test_volcano_peers_build_in_their_own_module_at_one_release() -> None:
    vc = [p for p in build.PEERS if p.module == "volcano.sh/volcano"]
    assert [p.name for p in vc] == ["vc-scheduler", "vc-controller-manager", "vc-webhook-manager"]
    assert {p.version for p in vc} == {"v1.13.3"} and all(p.in_module for p in vc)
    assert [p.package.rsplit("/", 1)[1] for p in vc] == ["scheduler", "controller-manager", "webhook-manager"]


def test_refused_module_without_git_names_what_was_tried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The proxy refuses and no git source answers: the build fails naming both, and the skip reason says so."""
    monkeypatch.setenv("LAHAR_PEERS_CACHE", str(tmp_path))
    monkeypatch.setenv("LAHAR_PEERS_VOLCANO_GIT", str(tmp_path / "no-such-clone"))

    def fake_run(cmd: list[str], **kwargs: object) -> build.subprocess.CompletedProcess[str]:
        if "download" in cmd:
            out = '{"Path": "volcano.sh/volcano", "Error": "reading proxy: 403 Forbidden"}'
            return build.subprocess.CompletedProcess(cmd, 1, out, "")
        return build.subprocess.CompletedProcess(cmd, 128, "", "fatal: unable to access: Could not resolve host\n")

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    peer = build._peer("vc-scheduler")
    with pytest.raises(RuntimeError, match="could not be had .set LAHAR_PEERS_VOLCANO_GIT") as info:
        build.build(peer)
    assert "module proxy: reading proxy: 403 Forbidden" in str(info.value)
    assert "git https://github.com/volcano-sh/volcano.git: fatal: unable to access" in str(info.value)
    assert "vc-scheduler (volcano.sh/volcano@v1.13.3) is not built" in build.missing_reason("vc-scheduler")


VOLCANO_GOMOD = """\
module volcano.sh/volcano

go 1.24.0

require (
\tgithub.com/spf13/cobra v1.8.1
\tvolcano.sh/apis v1.13.3 // the CRD types
)

require k8s.io/klog/v2 v2.130.1

replace (
\tk8s.io/api => k8s.io/api v0.33.2
\tk8s.io/client-go => ../client-go
)
"""


@pytest.mark.parametrize(("module", "expected"), [
    ("volcano.sh/apis", "v1.13.3"),
    ("k8s.io/klog/v2", "v2.130.1"),
    ("k8s.io/api", "v0.33.2"),
    ("k8s.io/client-go", None),
    ("volcano.sh/volcano", None),
], ids=["in-require-block", "single-line-require", "replaced-by-version", "replaced-by-directory", "absent"])
def test_required_version(module: str, expected: str | None) -> None:
    assert build.required_version(VOLCANO_GOMOD, module) == expected


def test_volcano_apis_come_from_git_when_refused() -> None:
    deps = build._peer("vc-scheduler").git_deps
    assert deps == (("volcano.sh/apis", "https://github.com/volcano-sh/apis.git", "LAHAR_PEERS_VOLCANO_APIS_GIT"),)
