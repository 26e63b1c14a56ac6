"""The scheduler's ConfigMap, hot-reloaded: `kubectl apply` of `lahar-scheduler-configmap` without `allocate`
changes what the next session does (nothing binds), a bad version keeps the last good one (and says why), and
putting `allocate` back binds the waiting pod — `scheduler.cache.ConfSource` + `scheduler.session.run_once` on
devcluster with simulated nodes, over HTTPS."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.kube import kubeconfig
from lahar.kube.rest import RestClient
from lahar.scheduler.cache import ConfSource
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import podgroup, queue
from tests.support import install_crds

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")]

NS = "lahar-system"
RELOAD_WITHIN = 2.0
TIERS = """tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


@dataclass
class World:
    client: RestClient
    kubeconfig: Path
    home: Path
    source: ConfSource
    errors: list[str]

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        proc = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir",
                               str(self.home / "cache"), *args], input=stdin, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "HOME": str(self.home)})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def apply_conf(self, actions: str) -> float:
        """kubectl apply the scheduler ConfigMap; the seconds until ConfSource reports the new content."""
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lahar-scheduler-configmap",
                                                                    "namespace": NS},
              "data": {"volcano-scheduler.conf": f'actions: "{actions}"\n{TIERS}'}}
        before = self.source.current()
        sent = time.monotonic()
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(cm))
        deadline = time.monotonic() + RELOAD_WITHIN
        while True:
            state = self.source.current()
            if state.source != before.source or state.error != before.error:
                return time.monotonic() - sent
            if time.monotonic() > deadline:
                raise AssertionError(f"scheduler ConfigMap not seen within {RELOAD_WITHIN} s")
            time.sleep(0.01)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from lahar.devcluster.runtime import Cluster

    tmp = tmp_path_factory.mktemp("sched-conf")
    c = Cluster(data_dir=tmp / "data", port=0, profile="cpu-small", nodes=1).start()
    client = RestClient(kubeconfig.load(str(c.kubeconfig)))
    source = None
    try:
        install_crds(client, "scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml")
        client.create(client.registry.get("", "v1", "namespaces"),
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        client.create(client.registry.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("q1").bare())
        seen: list[str] = []
        source = ConfSource(client, in_tree_registry(), on_error=lambda cm, e: seen.append(e))
        assert source.start(timeout=20)
        yield World(client, Path(c.kubeconfig), tmp / "home", source, seen)
    finally:
        if source is not None:
            source.stop()
        client.close()
        c.stop()


def _gang_of_one(client: RestClient, name: str) -> None:
    reg = client.registry
    client.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"),
                  podgroup(name, "default").min(1).queue("q1").bare(status=True), namespace="default")
    client.create(reg.get("", "v1", "pods"),
                  {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{name}-0", "namespace": "default",
                                "annotations": {"scheduling.k8s.io/group-name": name}},
                   "spec": {"schedulerName": "volcano",
                            "containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}},
                  namespace="default")


def _session(world: World) -> Any:
    state = world.source.current()
    _, result = run_once(world.client, state.conf, registry=in_tree_registry())
    return sorted(result.bound)


def _node_of(world: World, pod: str) -> str | None:
    return world.client.get(world.client.registry.get("", "v1", "pods"), pod, namespace="default")["spec"].get(
        "nodeName")


def test_actions_change_the_next_session(world: World) -> None:
    took = world.apply_conf("enqueue, allocate, backfill")
    print(f"scheduler ConfigMap seen {took * 1000:.0f} ms after `kubectl apply` started")
    assert world.source.current().conf.actions == ("enqueue", "allocate", "backfill")
    _gang_of_one(world.client, "first")
    _session(world)
    assert _node_of(world, "first-0")

    world.apply_conf("enqueue")                                     # allocate removed: the next session binds nothing
    assert world.source.current().conf.actions == ("enqueue",)
    _gang_of_one(world.client, "second")
    _session(world)
    assert _node_of(world, "second-0") is None

    world.apply_conf("enqueue, allocate, bogus")                    # rejected: the last good conf stays in force
    state = world.source.current()
    assert state.conf.actions == ("enqueue",) and "failed to find Action bogus" in state.error
    assert any("bogus" in e for e in world.errors)
    _session(world)
    assert _node_of(world, "second-0") is None

    world.apply_conf("enqueue, allocate")                           # allocate back: the waiting pod binds
    _session(world)
    assert _node_of(world, "second-0")
