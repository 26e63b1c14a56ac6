"""Differential test: one scheduling cycle of Volcano's vc-scheduler and one of lahar's on the same small cluster.

Hypothesis draws small clusters (nodes with taints, zone labels and GPUs), weighted queues and gangs with
minAvailable: one explicit case and CASES drawn ones, derandomized (no example database, no shrinking: each case is
a few real scheduling cycles), so CI sees the same cases every run.
Each case is written to a real kube-apiserver with kwok nodes: PodGroups (Pending) and their pods directly, no job
controller. lahar runs one session (`lahar scheduler --once`); then the pods and PodGroups are written again and
vc-scheduler runs its first cycle (one-hour period; stopped after `End scheduling` and its binds). Per gang: bound (at
least minAvailable pods on nodes), pending (none), or partial (some but fewer than minAvailable, a gang violation
whichever scheduler did it). Placements are not compared: both may choose different nodes where scores tie.

Marked `real`; skips naming the peer when vc-scheduler, kube-apiserver or kwok are not built.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from lahar.kube import kubeconfig
from lahar.kube.rest import RestClient
from tests.peers import build as peers
from tests.realcluster.cluster import RealCluster, missing
from tests.support import free_port

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("realcluster")]

CONF = """\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
NS = "diff"
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------- the cases
@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    n_nodes = draw(st.integers(1, 4))
    nodes = [{"cpu": draw(st.sampled_from([2, 4, 8])), "gpu": draw(st.sampled_from([0, 0, 4])),
              "zone": draw(st.sampled_from(["a", "b"])), "tainted": draw(st.booleans() if i else st.just(False))}
             for i in range(n_nodes)]
    n_queues = draw(st.integers(1, 3))
    queues = [draw(st.integers(1, 4)) for _ in range(n_queues)]
    gangs = []
    for _ in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 4))
        gangs.append({"size": size, "min": draw(st.integers(1, size)), "cpu": draw(st.integers(1, 3)),
                      "gpu": draw(st.sampled_from([0, 0, 1])), "queue": draw(st.integers(0, n_queues - 1)),
                      "tolerates": draw(st.booleans()), "zone": draw(st.sampled_from([None, None, "a", "b"]))})
    return {"nodes": nodes, "queues": queues, "gangs": gangs}


def manifests(case: dict[str, Any], tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                       list[dict[str, Any]]]:
    """(nodes, queues, podgroups + pods) of one case; names carry `tag` so cases never meet."""
    nodes = []
    for i, n in enumerate(case["nodes"]):
        cap = {"cpu": str(n["cpu"]), "memory": "32Gi", "pods": "110"}
        if n["gpu"]:
            cap["nvidia.com/gpu"] = str(n["gpu"])
        name = f"diff-{tag}-n{i}"
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"type": "kwok", "kubernetes.io/hostname": name, "zone": n["zone"],
                                     "diff": tag},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if n["tainted"] else []},
            "status": {"capacity": cap, "allocatable": cap}})
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": f"diff-{tag}-q{i}"}, "spec": {"weight": w, "reclaimable": True}}
              for i, w in enumerate(case["queues"])]
    work: list[dict[str, Any]] = []
    for g, gang in enumerate(case["gangs"]):
        pg = f"g{g}"
        work.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": pg, "namespace": NS},
                     "spec": {"minMember": gang["min"], "queue": f"diff-{tag}-q{gang['queue']}"},
                     # as Volcano's pg controller leaves a new group (PodGroups have no status subresource)
                     "status": {"phase": "Pending"}})
        req = {"cpu": str(gang["cpu"]), "memory": "1Gi"}
        if gang["gpu"]:
            req["nvidia.com/gpu"] = str(gang["gpu"])
        spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": req, "limits": req}}],
            "nodeSelector": {"diff": tag, **({"zone": gang["zone"]} if gang["zone"] else {})}}
        if gang["tolerates"]:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
        for k in range(gang["size"]):
            work.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{pg}-{k}", "namespace": NS, "annotations": {"scheduling.k8s.io/group-name": pg}},
                "spec": spec})
    return nodes, queues, work


def outcomes(case: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, str]:
    """Per gang: 'bound' (>= minAvailable on nodes), 'pending' (none) or 'partial:<n>' (a gang violation)."""
    out = {}
    for g, gang in enumerate(case["gangs"]):
        n = sum(1 for p in pods if p["metadata"]["name"].startswith(f"g{g}-") and p["spec"].get("nodeName"))
        out[f"g{g}"] = "bound" if n >= gang["min"] else ("pending" if n == 0 else f"partial:{n}")
    return out


# ------------------------------------------------------------------------------------------------------ fixtures
@contextlib.contextmanager
def differential_cluster(workdir: Path, conf: str, extra: list[dict[str, Any]] = ()) -> Iterator[RealCluster]:  # type: ignore[assignment]
    """A real cluster with kwok nodes, lahar's CRDs, the namespaces, `conf` for both schedulers (lahar's from its
    ConfigMap, vc-scheduler's from a file) and `extra` objects; skips naming a missing peer."""
    reason = missing("etcd", "kube-apiserver", "kwok", "vc-scheduler")
    if reason:
        pytest.skip(reason)
    c = RealCluster(workdir).start()
    try:
        _kubectl(c, "apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
        _kubectl(c, "wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
        _kubectl(c, "apply", "-f", "-", stdin=yaml.safe_dump_all([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "lahar-scheduler-configmap", "namespace": "volcano-system"},
             "data": {"volcano-scheduler.conf": conf}}, *extra]))
        (c.workdir / "volcano-scheduler.conf").write_text(conf)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    with differential_cluster(tmp_path_factory.mktemp("differential"), CONF) as c:
        yield c


def _kubectl(c: RealCluster, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "KUBECONFIG": str(c.kubeconfig)})
    assert proc.returncode == 0, f"kubectl {' '.join(args[:3])}: {proc.stderr[-1500:]}"
    return proc.stdout


def _pods(c: RealCluster) -> list[dict[str, Any]]:
    with RestClient(kubeconfig.load(c.kubeconfig)) as client:
        return list(client.list(client.registry.get("", "v1", "pods"), namespace=NS).get("items", []))


def _reset(c: RealCluster, work: list[dict[str, Any]]) -> None:
    _kubectl(c, "delete", "-n", NS, "pods,podgroups.scheduling.volcano.sh", "--all", "--grace-period=0", "--force",
             "--wait=true")
    _kubectl(c, "create", "-f", "-", stdin=yaml.safe_dump_all(work))


def _lahar_once(c: RealCluster) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAHAR_") and k != "REDIS_URL"}
    env.update(KUBECONFIG=str(c.kubeconfig), LAHAR_SCHEDULER_CONF_NAMESPACES="volcano-system",
               LAHAR_DATA_DIR=str(c.workdir / "lahar"))
    proc = subprocess.run([sys.executable, "-m", "lahar.cli", "scheduler", "--once"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=c.workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _volcano_cycle(c: RealCluster, settle: float = 3.0, timeout: float = 90.0) -> None:
    """Start vc-scheduler (its first cycle at once, the next in an hour), wait for the cycle's end in its log
    (`End scheduling`, at -v=4), then for its binds (made asynchronously) to settle, and stop it."""
    log_path = c.workdir / "vc-scheduler.log"
    offset = log_path.stat().st_size if log_path.is_file() else 0
    log = log_path.open("ab")
    proc = subprocess.Popen([str(peers.binary("vc-scheduler")), f"--kubeconfig={c.kubeconfig}",
                             f"--scheduler-conf={c.workdir / 'volcano-scheduler.conf'}", "--leader-elect=false",
                             "--schedule-period=1h", f"--listen-address=127.0.0.1:{free_port()}",
                             f"--healthz-address=127.0.0.1:{free_port()}", "--v=4"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while b"End scheduling" not in log_path.read_bytes()[offset:]:
            assert proc.poll() is None, f"vc-scheduler exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"vc-scheduler ran no cycle in {timeout:.0f} s"
            time.sleep(0.3)
        last, since = None, time.monotonic()
        while time.monotonic() - since < settle and time.monotonic() < deadline:
            bound = sorted(p["metadata"]["name"] for p in _pods(c) if p["spec"].get("nodeName"))
            if bound != last:
                last, since = bound, time.monotonic()
            time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()


# Hand-written first: a tainted GPU node only a tolerating gang may use, and a gang too big for what is left.
EXPLICIT = {"nodes": [{"cpu": 4, "gpu": 0, "zone": "a", "tainted": False},
                      {"cpu": 8, "gpu": 4, "zone": "b", "tainted": True}],
            "queues": [1, 2],
            "gangs": [{"size": 3, "min": 2, "cpu": 1, "gpu": 0, "queue": 0, "tolerates": False, "zone": None},
                      {"size": 2, "min": 2, "cpu": 3, "gpu": 1, "queue": 1, "tolerates": True, "zone": "b"},
                      {"size": 4, "min": 4, "cpu": 3, "gpu": 0, "queue": 1, "tolerates": False, "zone": None}]}
CASES = 8  # drawn cases (derandomized: the same ones every run), plus the explicit one
_counter = iter(range(10_000))


@settings(max_examples=CASES, derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@example(case=EXPLICIT)
@given(case=cases())
def test_volcano_and_lahar_agree_on_gangs(cluster: RealCluster, case: dict[str, Any]) -> None:
    tag = f"c{next(_counter)}"
    nodes, queues, work = manifests(case, tag)
    _kubectl(cluster, "create", "-f", "-", stdin=yaml.safe_dump_all(nodes + queues))
    try:
        _kubectl(cluster, "wait", "--for=condition=Ready", "--timeout=60s", "node", "-l", f"diff={tag}")
        _kubectl(cluster, "taint", "nodes", "-l", f"diff={tag}", "node.kubernetes.io/not-ready:NoSchedule-")
        for q in queues:  # what Volcano's queue controller writes; vc-scheduler allocates to no queue without it
            _kubectl(cluster, "patch", "queues.scheduling.volcano.sh", q["metadata"]["name"], "--subresource=status",
                     "--type=merge", "-p", '{"status": {"state": "Open"}}')
        _reset(cluster, work)
        _lahar_once(cluster)
        ours = outcomes(case, _pods(cluster))
        _reset(cluster, work)
        _volcano_cycle(cluster)
        theirs = outcomes(case, _pods(cluster))
        assert not [g for g, o in {**ours, **theirs}.items() if o.startswith("partial")], (ours, theirs)
        assert ours == theirs, f"case {json.dumps(case)}: lahar {ours} vs volcano {theirs}"
    finally:
        _kubectl(cluster, "delete", "-n", NS, "pods,podgroups.scheduling.volcano.sh", "--all",
                 "--grace-period=0", "--force", "--wait=true")
        _kubectl(cluster, "delete", "nodes", "-l", f"diff={tag}", "--wait=false")
        _kubectl(cluster, "delete", "queues.scheduling.volcano.sh", *[q["metadata"]["name"] for q in queues],
                 "--wait=false")


@pytest.mark.parametrize(("pods", "expected"), [
    ([], {"g0": "pending"}),
    ([{"metadata": {"name": "g0-0"}, "spec": {"nodeName": "n"}}], {"g0": "partial:1"}),
    ([{"metadata": {"name": f"g0-{k}"}, "spec": {"nodeName": "n"}} for k in range(2)], {"g0": "bound"}),
], ids=["none-bound", "short-of-min", "min-bound"])
def test_outcomes(pods: list[dict[str, Any]], expected: dict[str, str]) -> None:
    case = {"gangs": [{"size": 3, "min": 2}]}
    assert outcomes(case, pods) == expected
