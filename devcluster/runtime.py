"""One running devcluster: the API server, the simulated nodes of a profile, their kubelets and the workload controllers.

What `lahar devcluster` and `lahar up` start; the parts themselves live in `server`, `nodes`, `kubelet` and `workloads`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from lahar.devcluster import kubelet, nodes, profiles, workloads
from lahar.devcluster.server import DevCluster
from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient

__all__ = ["POD_PORTS_ENV", "Cluster", "pod_ports_enabled"]

log = logging.getLogger(__name__)

SIMULATED_LABEL = "lahar.sh/simulated"
POD_PORTS_ENV = "LAHAR_SIM_POD_PORTS"  # "0", "false", "off" or "no": simulated pods get 10.244 IPs and serve nothing


def pod_ports_enabled(value: str | None) -> bool:
    """Whether simulated pods listen on their ports (`POD_PORTS_ENV`'s value; unset or empty means on)."""
    return (value or "").strip().lower() not in ("0", "false", "off", "no")


class Cluster:
    """`start()` serves the API and brings the profile's nodes up; `stop()` ends it all, keeping the state on disk."""

    def __init__(self, *, data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
                 profile: str = "cpu-small", nodes: int | None = None, republish_interval: float = 2.0,
                 sim_default_duration: float | None = None, serve_pod_ports: bool | None = None) -> None:
        """`sim_default_duration`: seconds a simulated restartPolicy Never/OnFailure pod without
        `lahar.sh/sim-duration` runs (None: until deleted). `serve_pod_ports`: Running pods get loopback IPs and
        answer on their declared TCP ports (see `podports`); None reads `POD_PORTS_ENV` (default on)."""
        if serve_pod_ports is None:
            serve_pod_ports = pod_ports_enabled(os.environ.get(POD_PORTS_ENV))
        self.serve_pod_ports = serve_pod_ports
        self.data_dir = Path(data_dir)
        self.sim_default_duration = sim_default_duration
        self.server = DevCluster(self.data_dir, host=host, port=port)
        self.profile = profiles.load(profile)
        self.node_count = nodes
        self.republish_interval = republish_interval
        self.objects: list[dict[str, Any]] = []
        self.node_names: list[str] = []
        self.kubelets: kubelet.SimulatedKubelets | None = None
        self.client: MemoryClient | None = None
        self.workloads: workloads.WorkloadControllers | None = None
        self._stop = threading.Event()
        self._republisher: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def kubeconfig(self) -> Path:
        return self.server.kubeconfig

    @property
    def profile_name(self) -> str:
        return self.profile.name

    def start(self) -> Cluster:
        """Serve, publish the profile's nodes and start their kubelets; /readyz answers ok only after that."""
        self.server.pending_checks.add("lahar-profile-nodes")
        self.server.start()
        self.client = MemoryClient(store=self.server.store)
        self.objects = nodes.build(self.profile, self.node_count) if self.node_count != 0 else []
        self.node_names = nodes.node_names(self.objects)
        self._retire_other_nodes()
        nodes.publish(self.client, self.objects)
        if self.node_names:
            node_objs = [o for o in self.objects if o["kind"] == "Node"]
            self.kubelets = kubelet.SimulatedKubelets(self.client, self.node_names, nodes=node_objs,
                                                       default_duration=self.sim_default_duration,
                                                       serve_ports=self.serve_pod_ports)
            self.kubelets.start()
        self.workloads = workloads.WorkloadControllers(self.client).start()
        self._stop.clear()
        self._republisher = threading.Thread(target=self._republish_loop, name="devcluster-inventory", daemon=True)
        self._republisher.start()
        self.server.pending_checks.discard("lahar-profile-nodes")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._republisher is not None:
            self._republisher.join(timeout=10)
            self._republisher = None
        if self.workloads is not None:
            self.workloads.stop()
            self.workloads = None
        if self.kubelets is not None:
            self.kubelets.stop()
            self.kubelets = None
        self.server.stop()

    def _retire_other_nodes(self) -> None:
        """Simulated nodes of an earlier start that this start's profile and count no longer have are removed."""
        assert self.client is not None
        rt = self.client.registry.get("", "v1", "nodes")
        assert rt is not None
        wanted = set(self.node_names)
        for node in self.client.list(rt, label_selector=f"{SIMULATED_LABEL}=true")["items"]:
            name = node["metadata"]["name"]
            if name not in wanted:
                with contextlib.suppress(errors.NotFound):
                    self.client.delete(rt, name)

    def _republish_loop(self) -> None:
        """Inventory objects whose CRDs are applied later (Numatopology, Device) are published once they can be."""
        published = {(o["apiVersion"], o["kind"]) for o in self.objects
                     if self.client and self.client.registry.by_kind(o["apiVersion"], o["kind"])}
        while not self._stop.wait(self.republish_interval):
            assert self.client is not None
            pending = [o for o in self.objects if (o["apiVersion"], o["kind"]) not in published
                       and self.client.registry.by_kind(o["apiVersion"], o["kind"]) is not None]
            if not pending:
                continue
            try:
                nodes.publish(self.client, pending, include_nodes=False)
                published |= {(o["apiVersion"], o["kind"]) for o in pending}
            except errors.ApiError as exc:
                log.warning("publishing the node inventory failed: %s", exc)
