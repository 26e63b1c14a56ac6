"""Small helpers the integration and e2e tests share: a free loopback port, polling until the world settles, CRDs and
a first Queue (the objects themselves come from tests.builders)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.builders import queue

CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"

__all__ = ["create_queue", "free_port", "install_crds", "scheduling_devcluster", "wait_for"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 90.0, interval: float = 0.2) -> Any:
    """Call `fn` until it returns something truthy (exceptions count as "not yet"); AssertionError naming `what`
    and the last answer after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # noqa: BLE001 - the world is settling
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def install_crds(client: Any, *names: str, timeout: float = 20.0) -> None:
    """Create the named CRD files of `deploy/crds/` and wait until PodGroups are served (the API registers CRDs
    asynchronously to the create)."""
    crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for name in names:
        client.create(crd_rt, yaml.safe_load((CRDS / name).read_text()))
    pg_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    wait_for("PodGroups to be served", lambda: client.list(pg_rt, namespace="default") is not None, timeout, 0.2)


def create_queue(client: Any, name: str = "q1", weight: int = 1) -> dict:
    """An Open-able Volcano Queue (`scheduling.volcano.sh/v1beta1`) created through `client`."""
    q_rt = client.registry.get("scheduling.volcano.sh", "v1beta1", "queues")
    return client.create(q_rt, queue(name).weight(weight).bare())


@contextlib.contextmanager
def scheduling_devcluster(data_dir: Path, *, profile: str = "cpu-small", nodes: int = 2,
                          crds: tuple[str, ...] = ()) -> Iterator[tuple[Any, Any]]:
    """devcluster in this process (`devcluster.runtime.Cluster`) with the PodGroup and Queue CRDs (and `crds`)
    installed; yields (the cluster, a RestClient over HTTPS) and stops it."""
    from lahar.devcluster.runtime import Cluster
    from lahar.kube import kubeconfig
    from lahar.kube.rest import RestClient

    c = Cluster(data_dir=data_dir, port=0, profile=profile, nodes=nodes).start()
    client = RestClient(kubeconfig.load(str(c.kubeconfig)))
    try:
        install_crds(client, "scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml", *crds)
        yield c, client
    finally:
        c.stop()
