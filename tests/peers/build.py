"""Build the real programs lahar is tested against (kube-apiserver, etcd, kube-controller-manager, kwok, helm, and
Volcano's vc-scheduler, vc-controller-manager and vc-webhook-manager).

`make peers` runs this; tests/realcluster finds the binaries through `binary(name)`. Each peer is built
with the Go toolchain from the module proxy at a pinned version, into a cache outside the work tree
(`$LAHAR_PEERS_CACHE`, default `~/.cache/lahar-peers/<name>-<version>/<name>`). A cached peer is skipped,
so a second run takes seconds. Builds run under `nice -n 19` with one package at a time (`-p=1`;
`LAHAR_PEERS_BUILD_JOBS=N` on a machine of one's own), so they never starve the tests of whoever shares it.

Modules whose go.mod points other modules at local directories (k8s.io/kubernetes and its staging
`k8s.io/*` modules, etcd's server and its api/client/pkg modules) cannot be `go install`ed by version,
so each peer is built from a small generated wrapper module that requires the module at its version
and replaces each locally-replaced module by the same module at the matching released version
(`k8s.io/kubernetes v1.X.Y` ↔ staging `v0.X.Y`; etcd's modules share one version).

Volcano's go.mod replaces modules by other versions (not directories), which a wrapper would have to repeat, so its
programs are built inside the module's own tree (`in_module`): the tree `go mod download` unpacks, copied to a
writable directory. Where the module proxy refuses the module (some proxies answer 403 for volcano.sh/volcano), the
tree is taken from a git repository at the release tag instead: `$LAHAR_PEERS_VOLCANO_GIT` (a local clone or
mirror), else the upstream URL. `--list` and the skip reasons say which source was tried and why it failed.

Usage: python tests/peers/build.py [--list] [name ...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["PEERS", "Peer", "binary", "cache_root", "main", "missing_reason"]


@dataclasses.dataclass(frozen=True)
class Peer:
    """One program: the module it comes from, its version and the main package inside it."""

    name: str
    module: str
    version: str
    package: str
    ldflags: tuple[str, ...] = ()
    # Built inside the module's own tree (its go.mod and replaces as they are) rather than from a wrapper module.
    in_module: bool = False
    # Where the tree comes from when the proxy refuses the module: a git URL, overridable by an environment variable.
    git_url: str = ""
    git_env: str = ""
    # Modules the tree requires that the proxy may refuse too, each (module, git URL, environment variable): taken
    # from git at the required version into the tree's `_deps/` and pointed at by a replace directive.
    git_deps: tuple[tuple[str, str, str], ...] = ()


_KUBE = "v1.35.4"
_KUBE_LDFLAGS = tuple(
    f"-X {pkg}.{key}={value}"
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for key, value in (("gitVersion", _KUBE), ("gitMajor", "1"), ("gitMinor", _KUBE.split(".")[1]),
                       ("gitTreeState", "clean"))
)

_VOLCANO = "v1.13.3"
_VOLCANO_LDFLAGS = (f"-X volcano.sh/volcano/pkg/version.Version={_VOLCANO}",)


def _volcano(name: str, cmd: str) -> Peer:
    return Peer(name, "volcano.sh/volcano", _VOLCANO, f"volcano.sh/volcano/cmd/{cmd}", _VOLCANO_LDFLAGS,
                in_module=True, git_url="https://github.com/volcano-sh/volcano.git", git_env="LAHAR_PEERS_VOLCANO_GIT",
                git_deps=(("volcano.sh/apis", "https://github.com/volcano-sh/apis.git", "LAHAR_PEERS_VOLCANO_APIS_GIT"),))


# In build order: the essential pair first, then the controllers, then the simulated nodes, then Volcano's own.
PEERS: tuple[Peer, ...] = (
    Peer("etcd", "go.etcd.io/etcd/server/v3", "v3.6.16", "go.etcd.io/etcd/server/v3"),
    Peer("kube-apiserver", "k8s.io/kubernetes", _KUBE, "k8s.io/kubernetes/cmd/kube-apiserver", _KUBE_LDFLAGS),
    Peer("kube-controller-manager", "k8s.io/kubernetes", _KUBE, "k8s.io/kubernetes/cmd/kube-controller-manager",
         _KUBE_LDFLAGS),
    Peer("kwok", "sigs.k8s.io/kwok", "v0.8.0", "sigs.k8s.io/kwok/cmd/kwok"),
    Peer("helm", "helm.sh/helm/v3", "v3.22.0", "helm.sh/helm/v3/cmd/helm"),
    _volcano("vc-scheduler", "scheduler"),
    _volcano("vc-controller-manager", "controller-manager"),
    _volcano("vc-webhook-manager", "webhook-manager"),
)


def cache_root() -> Path:
    return Path(os.environ.get("LAHAR_PEERS_CACHE") or Path.home() / ".cache" / "lahar-peers")


def _peer(name: str) -> Peer:
    for peer in PEERS:
        if peer.name == name:
            return peer
    raise KeyError(f"unknown peer {name!r}; known: {', '.join(p.name for p in PEERS)}")


def binary(name: str) -> Path | None:
    """The cached binary of peer `name`, or None when it has not been built."""
    peer = _peer(name)
    path = cache_root() / f"{peer.name}-{peer.version}" / peer.name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing_reason(name: str) -> str:
    """Why `binary(name)` is None, for a pytest skip: names the peer, its module and what to run."""
    peer = _peer(name)
    failed = cache_root() / f"{peer.name}-{peer.version}" / "build-failed.txt"
    why = f"{peer.name} ({peer.module}@{peer.version}) is not built"
    if failed.is_file():
        why += f"; its last build failed: {failed.read_text(errors='replace').strip().splitlines()[-1][:200]}"
    elif shutil.which("go") is None:
        why += "; no Go toolchain on this machine"
    return why + "; run `make peers`"


def staging_version(module: str, version: str, replaced: str) -> str:
    """The released version of a module that `module@version` replaces with a local directory.

    k8s.io/kubernetes v1.X.Y publishes its staging modules (k8s.io/api, k8s.io/apiserver, ...) as v0.X.Y;
    every other multi-module repository (etcd) tags its modules with one shared version.
    """
    if module == "k8s.io/kubernetes" and replaced.startswith("k8s.io/"):
        major, minor, patch = version.lstrip("v").split(".", 2)
        return f"v0.{minor}.{patch}"
    return version


_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\S+)\s*$")


def local_replaces(gomod: str) -> list[str]:
    """The modules a go.mod replaces with a local directory (`k8s.io/api => ./staging/src/k8s.io/api`)."""
    found = []
    for line in gomod.splitlines():
        match = _REPLACE.match(line.split("//", 1)[0])
        if match and match.group(2).startswith(".") and "FORBIDDEN" not in match.group(2):
            found.append(match.group(1))
    return found


def wrapper_gomod(peer: Peer, upstream_gomod: str) -> str:
    """A go.mod that requires `peer.module@peer.version` with its local replaces pinned to released versions."""
    go_line = next((ln for ln in upstream_gomod.splitlines() if ln.startswith("go ")), "go 1.25.0")
    lines = [f"module lahar.local/peers/{peer.name}", "", go_line, "", f"require {peer.module} {peer.version}", ""]
    for mod in local_replaces(upstream_gomod):
        lines.append(f"replace {mod} => {mod} {staging_version(peer.module, peer.version, mod)}")
    return "\n".join(lines) + "\n"


def proxy_error(download: dict[str, Any]) -> str | None:
    """The proxy's refusal in `go mod download -json` output (`{"Error": "...403 Forbidden..."}`), else None."""
    error = download.get("Error")
    if error:
        return str(error).strip().splitlines()[0]
    if not download.get("Dir") and not download.get("GoMod"):
        return "go mod download gave neither Dir nor GoMod"
    return None


def git_sources(peer: Peer, env: dict[str, str]) -> list[str]:
    """The git repositories to take `peer`'s tree from when the proxy refuses it, in order: the override, the URL."""
    return _sources(peer.git_url, peer.git_env, env)


def _sources(url: str, env_name: str, env: dict[str, str]) -> list[str]:
    return ([env[env_name]] if env_name and env.get(env_name) else []) + ([url] if url else [])


def required_version(gomod: str, module: str) -> str | None:
    """The version a go.mod requires of `module` (`require x v1` or inside a `require (...)` block), else None;
    a replace of the module by another version wins."""
    required, block = None, False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith(("require (", "replace (")):
            block = line.split()[0]
            continue
        if block and line == ")":
            block = False
            continue
        words = line.split()
        if block == "require" and len(words) >= 2 and words[0] == module:
            required = words[1]
        elif words[:2] == ["require", module] and len(words) >= 3:
            required = words[2]
        elif "=>" in words:
            left = words[1:words.index("=>")] if words[0] == "replace" else words[:words.index("=>")]
            right = words[words.index("=>") + 1:]
            if left and left[0] == module and len(right) == 2 and not right[0].startswith("."):
                required = right[1]
    return required


def build_jobs() -> int:
    """Go's `-p` for the builds: `$LAHAR_PEERS_BUILD_JOBS` (a positive integer), else 1."""
    raw = os.environ.get("LAHAR_PEERS_BUILD_JOBS", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"LAHAR_PEERS_BUILD_JOBS must be a positive integer, not {raw!r}")
    return int(raw)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # One package at a time unless told otherwise (LAHAR_PEERS_BUILD_JOBS on a machine of one's own).
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + f" -p={build_jobs()} -mod=mod").strip()
    env.setdefault("CGO_ENABLED", "0")
    env["GOTOOLCHAIN"] = "local"
    return env


def _run(cmd: list[str], *, cwd: Path) -> str:
    proc = subprocess.run(["nice", "-n", "19", *cmd], cwd=cwd, env=_go_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


@contextlib.contextmanager
def _locked(path: Path) -> Any:
    """One builder per peer at a time (two `make peers` at once wait for each other instead of both compiling)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build(peer: Peer) -> tuple[str, float]:
    """Build one peer into the cache unless it is there; returns ("cached"|"built", seconds)."""
    started = time.monotonic()
    out_dir = cache_root() / f"{peer.name}-{peer.version}"
    with _locked(cache_root() / "locks" / f"{peer.module.replace('/', '_')}-{peer.version}.lock"):
        if binary(peer.name) is not None:
            return "cached", time.monotonic() - started
        _build(peer, out_dir)
    return "built", time.monotonic() - started


def _build(peer: Peer, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "build-failed.txt").unlink(missing_ok=True)
    src = cache_root() / "src" / f"{peer.module.replace('/', '_')}-{peer.version}"
    src.mkdir(parents=True, exist_ok=True)
    if peer.in_module:
        try:
            _module_tree(peer, src)
            _go_build(peer, src, out_dir)
        except (RuntimeError, OSError, KeyError, ValueError) as exc:
            (out_dir / "build-failed.txt").write_text(f"{exc}\n")
            raise
        return
    try:
        info = json.loads(_run(["go", "mod", "download", "-json", f"{peer.module}@{peer.version}"], cwd=src))
        upstream = Path(info["GoMod"]).read_text()
        gomod = src / "go.mod"
        wanted = wrapper_gomod(peer, upstream)
        if not gomod.is_file() or not (src / "go.sum").is_file() or gomod.read_text() != wanted:
            gomod.write_text(wanted)
            (src / "go.sum").unlink(missing_ok=True)
        _run(["go", "get", f"{peer.package}@{peer.version}"], cwd=src)
        _go_build(peer, src, out_dir)
    except (RuntimeError, OSError, KeyError, ValueError) as exc:
        (out_dir / "build-failed.txt").write_text(f"{exc}\n")
        raise


def _go_build(peer: Peer, src: Path, out_dir: Path) -> None:
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        target = Path(tmp) / peer.name
        ldflags = " ".join(("-s", "-w", *peer.ldflags))
        _run(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(target), peer.package], cwd=src)
        target.replace(out_dir / peer.name)


def _module_tree(peer: Peer, src: Path) -> None:
    """Put `peer.module@peer.version`'s own tree (go.mod at its root) into `src`: from the proxy, else from git."""
    if (src / "go.mod").is_file() and (src / ".lahar-source").is_file():
        return
    tried = []
    with tempfile.TemporaryDirectory() as scratch:
        # Not through _run: a refused module exits 1 with its reason in the JSON on stdout.
        proc = subprocess.run(["nice", "-n", "19", "go", "mod", "download", "-json", f"{peer.module}@{peer.version}"],
                              cwd=scratch, env=_go_env(), capture_output=True, text=True)
        try:
            download = json.loads(proc.stdout)
        except ValueError:
            download = {"Error": (proc.stderr or proc.stdout or f"go exited {proc.returncode}").strip()}
        refused = proxy_error(download)
        if refused is None:
            shutil.copytree(download["Dir"], src, dirs_exist_ok=True)
            for path in src.rglob("*"):  # the module cache is read-only; go build writes nothing there but be sure
                path.chmod(path.stat().st_mode | 0o200)
            origin = f"module proxy {peer.module}@{peer.version}"
        else:
            tried.append(f"module proxy: {refused}")
            origin = _from_git(peer.module, peer.version, git_sources(peer, dict(os.environ)), peer.git_env, src,
                               tried)
    for module, url, env_name in peer.git_deps:
        _git_dep(src, module, _sources(url, env_name, dict(os.environ)), env_name)
    (src / ".lahar-source").write_text(origin + "\n")


def _from_git(module: str, version: str, repos: list[str], env_name: str, dest: Path, tried: list[str]) -> str:
    for repo in repos:
        try:
            _git_tree(repo, version, dest)
        except RuntimeError as exc:
            tried.append(f"git {repo}: {str(exc).strip().splitlines()[-1][:200]}")
            continue
        return f"git {repo} {version}"
    hint = f" (set {env_name} to a local git clone of it)" if env_name else ""
    raise RuntimeError(f"{module}@{version} could not be had{hint}; tried " + "; ".join(tried))


def _git_dep(src: Path, module: str, repos: list[str], env_name: str) -> None:
    """Point the tree's go.mod at `module` from git when the proxy refuses the version the tree requires."""
    version = required_version((src / "go.mod").read_text(), module)
    if version is None:
        return
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(["nice", "-n", "19", "go", "mod", "download", "-json", f"{module}@{version}"],
                              cwd=scratch, env=_go_env(), capture_output=True, text=True)
    with contextlib.suppress(ValueError):
        if proxy_error(json.loads(proc.stdout)) is None:
            return
    dest = src / "_deps" / module
    shutil.rmtree(dest, ignore_errors=True)
    _from_git(module, version, repos, env_name, dest, [f"module proxy: {module}@{version} refused"])
    _run(["go", "mod", "edit", f"-replace={module}=./_deps/{module}"], cwd=src)


def _git_tree(repo: str, tag: str, src: Path) -> None:
    """Export `tag` of git repository `repo` (a path or URL) into `src`."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "tree.tar"
        if Path(repo).exists():
            cmd = ["git", f"--git-dir={_git_dir(Path(repo))}", "archive", "-o", str(archive), tag]
            proc = subprocess.run(cmd, capture_output=True, text=True)
        else:
            clone = Path(scratch) / "clone"
            proc = subprocess.run(["git", "clone", "-q", "--depth=1", f"--branch={tag}", repo, str(clone)],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                proc = subprocess.run(["git", "-C", str(clone), "archive", "-o", str(archive), "HEAD"],
                                      capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr or proc.stdout or f"git exited {proc.returncode}")
        src.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xf", str(archive), "-C", str(src)], check=True)


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="peers to build (default: all)")
    parser.add_argument("--list", action="store_true", help="print each peer's state and exit")
    args = parser.parse_args(argv)
    peers = [_peer(n) for n in args.names] if args.names else list(PEERS)
    if args.list:
        for peer in peers:
            path = binary(peer.name)
            print(f"{peer.name:24} {peer.module}@{peer.version:10} {path or missing_reason(peer.name)}")
        return 0
    if shutil.which("go") is None:
        print("peers: no Go toolchain; the real-cluster tests will skip", file=sys.stderr)
        return 0
    failed = 0
    total = time.monotonic()
    for peer in peers:
        try:
            state, seconds = build(peer)
            print(f"peers: {peer.name} {peer.version}: {state} in {seconds:.1f} s", flush=True)
        except (RuntimeError, OSError, KeyError, ValueError) as exc:
            failed += 1
            print(f"peers: {peer.name} {peer.version}: FAILED: {str(exc)[-600:]}", file=sys.stderr, flush=True)
    print(f"peers: done in {time.monotonic() - total:.1f} s ({failed} failed)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
