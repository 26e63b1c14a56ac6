"""The gang scheduler end to end: devcluster (cpu-small nodes, CRDs applied) + a real Redis + `lahar beat` ticking
`scheduler.session` + `lahar scheduler` running it. Gangs bind all-or-nothing; `kubectl describe pod` of a pending
pod says why (the `FailedScheduling` event, per node class); a gang waiting for room binds once a node is added.

No controllers: the test creates PodGroups and pods itself, as a Volcano Job controller would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "deploy" / "crds"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 60, logs: Callable[[], str] = str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}\n{logs()}")


class Stack:
    """devcluster in-process; `lahar scheduler` and `lahar beat` as subprocesses against it and a real Redis."""

    def __init__(self, tmp: Path, redis_url: str) -> None:
        from lahar.devcluster.runtime import Cluster

        self.tmp = tmp
        self.cluster = Cluster(data_dir=tmp / "devcluster", port=0, profile="cpu-small", nodes=2).start()
        self.client = self.cluster.client
        self.env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig), REDIS_URL=redis_url,
                        LAHAR_DATA_DIR=str(tmp / "state"), LAHAR_SCHEDULE_PERIOD="0.5", LAHAR_LOG_LEVEL="INFO",
                        PYTHONUNBUFFERED="1")
        self.procs: dict[str, subprocess.Popen] = {}

    def apply_crds(self) -> None:
        from lahar.kube import errors

        crd_rt = self.rt("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for path in sorted(CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    with contextlib.suppress(errors.AlreadyExists):
                        self.client.create(crd_rt, doc)
        pg_rt = self.rt("scheduling.volcano.sh", "v1beta1", "podgroups")
        wait_for("the PodGroup CRD to be served", lambda: self._served(pg_rt))

    def _served(self, rt: Any) -> bool:
        from lahar.kube import errors

        try:
            self.client.list(rt)
            return True
        except errors.ApiError:
            return False

    def start(self, name: str, *args: str) -> None:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps its own descriptor
        self.procs[name] = subprocess.Popen([sys.executable, "-m", "lahar.cli", *args], env=self.env, cwd=self.tmp,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def logs(self) -> str:
        return "\n".join(f"--- {name}.log (tail) ---\n{(self.tmp / f'{name}.log').read_text(errors='replace')[-3000:]}"
                         for name in self.procs)

    def close(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.cluster.stop()

    def rt(self, group: str, version: str, plural: str) -> Any:
        rt = self.client.registry.get(group, version, plural)
        assert rt is not None, plural
        return rt

    def kubectl(self, *args: str) -> str:
        out = subprocess.run(["kubectl", *args], env=self.env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout

    # -- the world ------------------------------------------------------------------------------------------------

    def gang(self, ns: str, name: str, size: int, *, cpu: str = "1") -> None:
        self.client.create(self.rt("scheduling.volcano.sh", "v1beta1", "podgroups"), {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": size, "queue": "e2e"}}, namespace=ns)
        for i in range(size):
            self.client.create(self.rt("", "v1", "pods"), {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-w-{i}", "namespace": ns,
                             "annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {"schedulerName": "volcano", "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            }, namespace=ns)

    def nodes_of(self, ns: str, prefix: str) -> dict[str, str]:
        pods = self.client.list(self.rt("", "v1", "pods"), namespace=ns)["items"]
        return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in pods
                if p["metadata"]["name"].startswith(prefix)}

    def events(self, ns: str, reason: str) -> list[dict]:
        return [e for e in self.client.list(self.rt("", "v1", "events"), namespace=ns)["items"]
                if e.get("reason") == reason]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Iterator[Stack]:
    if not CRDS.is_dir():
        pytest.skip("deploy/crds is absent")
    s = Stack(tmp_path_factory.mktemp("scheduler-e2e"), redis_server.url.rsplit("/", 1)[0] + "/5")
    try:
        s.apply_crds()
        s.client.create(s.rt("scheduling.volcano.sh", "v1beta1", "queues"), {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "e2e"},
            "spec": {"weight": 1}})
        s.start("scheduler", "scheduler")
        s.start("beat", "beat")
        yield s
    finally:
        s.close()


def test_gangs_all_or_nothing_with_beat_and_scheduler(stack: Stack) -> None:
    ns = f"e2e-{uuid.uuid4().hex[:6]}"
    stack.client.create(stack.rt("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": ns}})
    # 2 nodes x 4 CPUs. A gang of 4 x 1 CPU fits: every pod binds.
    stack.gang(ns, "small", 4)
    placed = wait_for("the gang of 4 to bind", lambda: all((n := stack.nodes_of(ns, "small-")).values()) and n,
                      logs=stack.logs)
    assert len(placed) == 4 and set(placed.values()) <= {"cpu-small-0", "cpu-small-1"}
    pg = stack.client.get(stack.rt("scheduling.volcano.sh", "v1beta1", "podgroups"), "small", namespace=ns)
    wait_for("PodGroup small Running", lambda: (stack.client.get(
        stack.rt("scheduling.volcano.sh", "v1beta1", "podgroups"), "small", namespace=ns).get("status") or {})
        .get("phase") == "Running", logs=stack.logs)

    # A gang of 8 x 1 CPU with 4 CPUs free: nothing binds, and the pending pods say why.
    stack.gang(ns, "wide", 8)
    events = wait_for("FailedScheduling for the gang of 8", lambda: [
        e for e in stack.events(ns, "FailedScheduling") if e["involvedObject"]["name"].startswith("wide-")
        and "nodes are available" in e["message"]], logs=stack.logs)
    for _ in range(6):  # several more session ticks: still all or nothing
        assert not any(stack.nodes_of(ns, "wide-").values()), stack.nodes_of(ns, "wide-")
        time.sleep(0.5)
    event = events[0]
    assert event["type"] == "Warning" and event["source"]["component"] == "volcano"
    assert "0/2 nodes are available: 2 Insufficient cpu." in event["message"]
    described = stack.kubectl("describe", "pod", event["involvedObject"]["name"], "-n", ns)
    assert "FailedScheduling" in described and "0/2 nodes are available: 2 Insufficient cpu." in described
    assert "PodScheduled" in described and "False" in described
    pg = stack.client.get(stack.rt("scheduling.volcano.sh", "v1beta1", "podgroups"), "wide", namespace=ns)
    assert any(c["type"] == "Unschedulable" and c["reason"] == "NotEnoughResources"
               for c in (pg.get("status") or {}).get("conditions") or [])

    # One more node (4 CPUs): now 8 are free, and the whole gang binds.
    from lahar.devcluster import nodes, profiles

    extra = [o for o in nodes.build(profiles.load("cpu-small"), 3) if o["metadata"]["name"] == "cpu-small-2"]
    nodes.publish(stack.client, extra)
    placed = wait_for("the gang of 8 to bind", lambda: all((n := stack.nodes_of(ns, "wide-")).values()) and n,
                      logs=stack.logs)
    assert len(placed) == 8 and "cpu-small-2" in placed.values()
    assert "scheduler.session" in (stack.tmp / "scheduler.log").read_text(errors="replace")
