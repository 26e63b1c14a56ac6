"""Simulated machines for devcluster: a profile becomes Node, Volcano Numatopology and Koordinator Device objects.

Sits between `devcluster.profiles` (data) and the API: `build(profile, count)` is pure and deterministic (names,
GPU UUIDs, PCI addresses and IPs derive from the node name and index); `publish(client, objects)` writes them,
skipping kinds whose CRD is not registered. Formats follow spec/devices.md (HAMi JSON and Volcano CSV vGPU
registrations, NVIDIA device-plugin MIG "mixed" resources and GFD labels, Koordinator `Device` with GPU + RDMA
PCIe topology) and volcano.md §1.0 (Numatopology).

Hardware layout per node: CPUs are numbered like Linux on x86 (first hardware thread of every core, socket by
socket, then the sibling threads); NUMA nodes split each socket's cores evenly. PCIe switch s holds GPUs
`s*perSwitch ..` and the NICs `i` with `i * switches // nics == s`; switch s is on the NUMA node of its first GPU.
GPU i sits on NUMA node `i * numaNodes // gpus`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from lahar.devcluster.profiles import Network, NodeGroup, Profile
from lahar.kube import errors
from lahar.kube.client import ClusterClient, Obj
from lahar.kube.quantity import Format, Quantity
from lahar.kube.quantity import parse as parse_quantity

__all__ = [
    "GPU_MODELS",
    "GPU_TOPOLOGY_ANNOTATION",
    "NUMA_MEMORY_ANNOTATION",
    "DISCOVERY_CONFIGMAP",
    "GPUModel",
    "build",
    "cpuset",
    "discovery_configmap",
    "fabric_labels",
    "gpu_topology",
    "node_names",
    "numa_memory",
    "plan_names",
    "publish",
]

_NS = uuid.UUID("6c616861-7200-4000-8000-000000000000")  # "lahar": names → stable UUIDs
KUBELET_VERSION = "v1.32.0"
GPU_TOPOLOGY_ANNOTATION = "lahar.sh/gpu-topology"
# on the Numatopology: allocatable memory and hugepages per NUMA node (Volcano's `numares` has no per-NUMA memory,
# and a real Volcano CRD prunes unknown spec fields), read by the scheduler's numa-aware memory hints
NUMA_MEMORY_ANNOTATION = "lahar.sh/numa-memory"


@dataclass(frozen=True)
class MIGProfile:
    name: str
    slices: int
    max_instances: int
    memory_mib: int
    sms: int
    placements: tuple[tuple[int, int], ...]  # (start, size)


@dataclass(frozen=True)
class GPUModel:
    nvml_name: str       # as NVML reports it
    memory_mib: int
    family: str
    compute: tuple[int, int]
    mig: tuple[MIGProfile, ...] = ()

    @property
    def product(self) -> str:
        """GPU feature discovery's `nvidia.com/gpu.product` (spaces → dashes)."""
        return self.nvml_name.replace(" ", "-")

    @property
    def hami_type(self) -> str:
        """HAMi v2.8+ `type`: the NVML name, "NVIDIA-" prefixed only when it does not start with NVIDIA."""
        return self.nvml_name if self.nvml_name.startswith("NVIDIA") else f"NVIDIA-{self.nvml_name}"

    @property
    def volcano_type(self) -> str:
        """volcano-vgpu-device-plugin's `type`: always "NVIDIA-" + NVML name."""
        return f"NVIDIA-{self.nvml_name}"


def _mig(*rows: tuple[str, int, int, int, int, tuple[tuple[int, int], ...]]) -> tuple[MIGProfile, ...]:
    return tuple(MIGProfile(*row) for row in rows)


def _seq(starts: Iterable[int], size: int) -> tuple[tuple[int, int], ...]:
    return tuple((s, size) for s in starts)


# MIG tables: spec/devices.md §2.1 (NVML MiB, SM counts and placements of the go-nvml mocks)
GPU_MODELS: dict[str, GPUModel] = {
    "H100-SXM5-80GB": GPUModel("NVIDIA H100 80GB HBM3", 81559, "hopper", (9, 0), _mig(
        ("1g.10gb", 1, 7, 10240, 16, _seq(range(7), 1)),
        ("1g.20gb", 1, 4, 20480, 16, _seq(range(7), 1)),
        ("2g.20gb", 2, 3, 20480, 32, _seq((0, 2, 4), 2)),
        ("3g.40gb", 3, 2, 40960, 48, _seq((0, 4), 3)),
        ("4g.40gb", 4, 1, 40960, 64, _seq((0,), 4)),
        ("7g.80gb", 7, 1, 81920, 112, _seq((0,), 7)),
    )),
    "A100-SXM4-80GB": GPUModel("NVIDIA A100-SXM4-80GB", 81920, "ampere", (8, 0), _mig(
        ("1g.10gb", 1, 7, 9856, 14, _seq(range(7), 1)),
        ("1g.20gb", 1, 4, 19968, 14, _seq((0, 2, 4, 6), 2)),
        ("2g.20gb", 2, 3, 19968, 28, _seq((0, 2, 4), 2)),
        ("3g.40gb", 3, 2, 40192, 42, _seq((0, 4), 4)),
        ("4g.40gb", 4, 1, 40192, 56, _seq((0,), 4)),
        ("7g.80gb", 7, 1, 80384, 98, _seq((0,), 8)),
    )),
    "A100-SXM4-40GB": GPUModel("NVIDIA A100-SXM4-40GB", 40960, "ampere", (8, 0), _mig(
        ("1g.5gb", 1, 7, 4864, 14, _seq(range(7), 1)),
        ("1g.10gb", 1, 4, 9856, 14, _seq((0, 2, 4, 6), 2)),
        ("2g.10gb", 2, 3, 9856, 28, _seq((0, 2, 4), 2)),
        ("3g.20gb", 3, 2, 19968, 42, _seq((0, 4), 4)),
        ("4g.20gb", 4, 1, 19968, 56, _seq((0,), 4)),
        ("7g.40gb", 7, 1, 40192, 98, _seq((0,), 8)),
    )),
    "T4": GPUModel("Tesla T4", 15360, "turing", (7, 5)),
    "V100-SXM2-32GB": GPUModel("Tesla V100-SXM2-32GB", 32768, "volta", (7, 0)),
}


# ---------------------------------------------------------------------------------------------------------------
# layout (pure)


@dataclass(frozen=True)
class _CPU:
    id: int
    socket: int
    core: int
    numa: int


def cpu_layout(group: NodeGroup) -> list[_CPU]:
    """Every logical CPU with its socket, (machine-unique) core and NUMA node, Linux x86 numbering."""
    c = group.cpu
    cores = c.sockets * c.cores_per_socket
    cores_per_numa = cores // group.numa_nodes
    out = []
    for cpu_id in range(c.count):
        core = cpu_id % cores
        out.append(_CPU(id=cpu_id, socket=core // c.cores_per_socket, core=core, numa=core // cores_per_numa))
    return out


def cpuset(ids: Iterable[int]) -> str:
    """Linux cpuset list syntax: `0-3,8-11`."""
    ranges: list[str] = []
    run: list[int] = []
    for i in sorted(ids):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            ranges.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        ranges.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(ranges)


@dataclass(frozen=True)
class _PCIDevice:
    kind: str       # gpu | rdma
    index: int      # minor
    numa: int
    socket: int
    switch: int
    bus_id: str     # 0000:BB:00.0
    pcie_id: str    # koordinator's root complex id pciDDDD:BB
    vfs: tuple[str, ...] = ()
    uuid: str = ""


def _switch_numa(group: NodeGroup, switch: int, switches: int) -> int:
    return switch * group.numa_nodes // max(switches, 1)


def pci_layout(group: NodeGroup, node_name: str) -> list[_PCIDevice]:
    gpus = group.gpus
    rdma = group.rdma
    n_gpus = gpus.count if gpus else 0
    per_switch = gpus.per_switch if gpus else 1
    n_nics = rdma.nics if rdma else 0
    switches = math.ceil(n_gpus / per_switch) if n_gpus else n_nics
    numa_per_socket = max(group.numa_nodes // group.cpu.sockets, 1)
    slots = [0] * max(switches, 1)
    out: list[_PCIDevice] = []

    def bus(switch: int) -> tuple[str, str]:
        root = 0x10 + 0x20 * switch
        slots[switch] += 1
        return f"0000:{root + slots[switch]:02x}:00.0", f"pci0000:{root:02x}"

    for i in range(n_gpus):
        sw = i // per_switch
        numa = i * group.numa_nodes // n_gpus
        bus_id, pcie = bus(sw)
        gpu_uuid = "GPU-" + str(uuid.uuid5(_NS, f"{node_name}/gpu/{i}"))
        out.append(_PCIDevice("gpu", i, numa, numa // numa_per_socket if group.cpu.sockets > 1 else 0, sw, bus_id,
                              pcie, uuid=gpu_uuid))
    for i in range(n_nics):
        sw = i * switches // n_nics
        numa = _switch_numa(group, sw, switches) if not n_gpus else next(
            d.numa for d in out if d.kind == "gpu" and d.switch == sw)
        bus_id, pcie = bus(sw)
        b = bus_id.split(":")[1]
        vfs = []
        for k in range(rdma.vfs_per_nic if rdma else 0):
            devfn = k + 1
            vfs.append(f"0000:{b}:{devfn // 8:02x}.{devfn % 8}")
        out.append(_PCIDevice("rdma", i, numa, numa // numa_per_socket if group.cpu.sockets > 1 else 0, sw, bus_id,
                              pcie, tuple(vfs)))
    return out


def plan_names(profile: Profile, count: int | None = None) -> list[tuple[NodeGroup, str]]:
    """(group, node name) for every node: defaults from each group's `count`, else `count` nodes round-robin."""
    if count is None:
        return [(g, f"{g.name}-{i}") for g in profile.groups for i in range(g.count)]
    turns = [g for g in profile.groups for _ in range(g.weight)]
    seen: dict[str, int] = {}
    out = []
    for k in range(count):
        g = turns[k % len(turns)]
        i = seen.get(g.name, 0)
        seen[g.name] = i + 1
        out.append((g, f"{g.name}-{i}"))
    return out


# ---------------------------------------------------------------------------------------------------------------
# objects (pure)


def _mib(n: int) -> str:
    return f"{n}Mi"


def _ki(quantity: str) -> str:
    """Memory as the kubelet reports it: Ki."""
    return f"{parse_quantity(quantity).value() // 1024}Ki"


def _resources(group: NodeGroup, devices: list[_PCIDevice]) -> tuple[dict[str, str], dict[str, str]]:
    hugepages = {f"hugepages-{size}": str(v) for size, v in group.hugepages.items()}
    capacity: dict[str, str] = {
        "cpu": str(group.cpu.count),
        "ephemeral-storage": _ki(group.ephemeral_storage),
        **hugepages,
        "memory": _ki(group.memory),
        "pods": str(group.pods),
    }
    gpus = [d for d in devices if d.kind == "gpu"]
    nics = [d for d in devices if d.kind == "rdma"]
    if group.gpus:
        model = GPU_MODELS[group.gpus.model]
        g = group.gpus
        if g.sharing == "vgpu":
            if "hami" in g.vgpu.providers:
                capacity["nvidia.com/gpu"] = str(len(gpus) * g.vgpu.split_count)
            if "volcano" in g.vgpu.providers:
                capacity["volcano.sh/vgpu-number"] = str(len(gpus) * g.vgpu.split_count)
                capacity["volcano.sh/vgpu-memory"] = str(len(gpus) * model.memory_mib // g.vgpu.memory_factor)
                capacity["volcano.sh/vgpu-cores"] = str(len(gpus) * 100 * g.vgpu.core_scaling)
        elif g.sharing == "mig":
            mig_gpus = set(g.mig.gpus)
            capacity["nvidia.com/gpu"] = str(len([d for d in gpus if d.index not in mig_gpus]))
            for prof, n in sorted(g.mig.geometry.items()):
                capacity[f"nvidia.com/mig-{prof.replace('+', '.')}"] = str(n * len(mig_gpus))
        else:
            capacity["nvidia.com/gpu"] = str(len(gpus))
        if g.sharing == "exclusive" or nics:
            # koord-manager's device resource plugins: 100 units per device
            capacity["koordinator.sh/gpu-core"] = str(100 * len(gpus))
            capacity["koordinator.sh/gpu-memory-ratio"] = str(100 * len(gpus))
            capacity["koordinator.sh/gpu-memory"] = _mib(model.memory_mib * len(gpus))
    if group.rdma:
        capacity["koordinator.sh/rdma"] = str(100 * len(nics))
        if group.rdma.vfs_per_nic:
            capacity[group.rdma.resource_name] = str(len(nics) * group.rdma.vfs_per_nic)
    allocatable = dict(capacity)
    for name, value in group.reserved.items():
        if name in allocatable:
            left = parse_quantity(allocatable[name]) - parse_quantity(value)
            allocatable[name] = str(left)
    return dict(sorted(capacity.items())), dict(sorted(allocatable.items()))


def _labels(profile: Profile, group: NodeGroup, name: str, devices: list[_PCIDevice]) -> dict[str, str]:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": group.instance_type,
        "lahar.sh/simulated": "true",
        "lahar.sh/profile": profile.name,
        "lahar.sh/node-group": group.name,
    }
    if group.gpus:
        g = group.gpus
        model = GPU_MODELS[g.model]
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": model.product,
            "nvidia.com/gpu.count": str(g.count),
            "nvidia.com/gpu.memory": str(model.memory_mib),
            "nvidia.com/gpu.family": model.family,
            "nvidia.com/gpu.compute.major": str(model.compute[0]),
            "nvidia.com/gpu.compute.minor": str(model.compute[1]),
            "nvidia.com/mig.capable": "true" if model.mig else "false",
            "nvidia.com/mig.strategy": g.mig.strategy if g.sharing == "mig" else "none",
            "nvidia.com/gpu.sharing-strategy": "none",
        })
        if g.sharing == "mig":
            by_name = {p.name: p for p in model.mig}
            for prof, n in sorted(g.mig.geometry.items()):
                key = f"nvidia.com/mig-{prof.replace('+', '.')}"
                labels[f"{key}.count"] = str(n * len(g.mig.gpus))
                if prof in by_name:
                    labels[f"{key}.memory"] = str(by_name[prof].memory_mib)
                    labels[f"{key}.multiprocessors"] = str(by_name[prof].sms)
                    labels[f"{key}.slices.gi"] = str(by_name[prof].slices)
                    labels[f"{key}.slices.ci"] = str(by_name[prof].slices)
        if g.sharing == "vgpu":
            labels["gpu"] = "on"  # HAMi's device-plugin node selector
            labels["volcano.sh/vgpu.enabled"] = "true"
    if group.rdma:
        labels["feature.node.kubernetes.io/network-sriov.capable"] = "true"
        labels["feature.node.kubernetes.io/rdma.available"] = "true"
    labels.update(group.labels)
    return dict(sorted(labels.items()))


def _hami_register(group: NodeGroup, gpus: list[_PCIDevice]) -> str:
    g = group.gpus
    assert g is not None
    model = GPU_MODELS[g.model]
    out = []
    for d in gpus:
        entry: dict[str, Any] = {"id": d.uuid, "index": d.index, "count": g.vgpu.split_count,
                                 "devmem": model.memory_mib * 1, "devcore": 100 * g.vgpu.core_scaling,
                                 "type": model.hami_type, "numa": d.numa, "mode": "hami-core", "health": True}
        out.append({k: v for k, v in entry.items() if v not in (0, "", None)})  # Go omitempty
    return json.dumps(out, separators=(",", ":"))


def _volcano_register(group: NodeGroup, gpus: list[_PCIDevice]) -> str:
    g = group.gpus
    assert g is not None
    model = GPU_MODELS[g.model]
    return "".join(f"{d.uuid},{g.vgpu.split_count},{model.memory_mib // g.vgpu.memory_factor},"
                   f"{model.volcano_type},true,hami-core:" for d in gpus)


def _node(profile: Profile, group: NodeGroup, name: str, index: int, devices: list[_PCIDevice]) -> Obj:
    capacity, allocatable = _resources(group, devices)
    annotations: dict[str, str] = {"node.alpha.kubernetes.io/ttl": "0",
                                   "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    gpus = [d for d in devices if d.kind == "gpu"]
    if gpus:
        annotations[GPU_TOPOLOGY_ANNOTATION] = json.dumps(gpu_topology(group, devices), separators=(",", ":"))
    if group.gpus and group.gpus.sharing == "vgpu":
        if "hami" in group.gpus.vgpu.providers:
            annotations["hami.io/node-nvidia-register"] = _hami_register(group, gpus)
        if "volcano" in group.gpus.vgpu.providers:
            annotations["volcano.sh/node-vgpu-register"] = _volcano_register(group, gpus)
    ip = node_ip(index)
    system_uuid = str(uuid.uuid5(_NS, f"{name}/system"))
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": _labels(profile, group, name, devices), "annotations": annotations},
        "spec": {"podCIDR": f"10.244.{index % 256}.0/24", "podCIDRs": [f"10.244.{index % 256}.0/24"],
                 "providerID": f"lahar://{name}"},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid5(_NS, f"{name}/boot")),
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.8.0-lahar",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": system_uuid.replace("-", ""),
                "operatingSystem": "linux",
                "osImage": "lahar simulated node",
                "systemUUID": system_uuid,
            },
        },
    }
    if group.taints:
        node["spec"]["taints"] = [dict(t) for t in group.taints]
    return node


def link(group: NodeGroup, a: _PCIDevice, b: _PCIDevice) -> str:
    """nvidia-smi `topo -m` word for a GPU pair: `NV<n>` when NVLinked, else PIX (same PCIe switch), NODE (same NUMA
    node), SYS (across sockets). go-gpuallocator scores these as 100·n, 50, 20, 10 (spec/topology.md §8.2)."""
    if a.index == b.index:
        return "X"
    if group.gpus and group.gpus.nvlink:
        return f"NV{group.gpus.nvlink}"
    if a.switch == b.switch:
        return "PIX"
    return "NODE" if a.numa == b.numa else "SYS"


def gpu_topology(group: NodeGroup, devices: list[_PCIDevice]) -> Obj:
    """The node's GPU inventory and link matrix, published as the `lahar.sh/gpu-topology` node annotation.

    A GPU in MIG mode carries `migDevices` ({profile: count}, the static "mixed" geometry it is partitioned into)."""
    gpus = [d for d in devices if d.kind == "gpu"]
    nics = [d for d in devices if d.kind == "rdma"]
    mig = group.gpus.mig if group.gpus and group.gpus.sharing == "mig" else None

    def entry(d: _PCIDevice) -> Obj:
        out: Obj = {"index": d.index, "uuid": d.uuid, "busID": d.bus_id, "numa": d.numa, "pcieSwitch": d.switch}
        if mig is not None and d.index in mig.gpus:  # MIG mode on: the GPU's static MIG devices ("mixed")
            out["migDevices"] = dict(sorted(mig.geometry.items()))
        return out

    return {
        "gpus": [entry(d) for d in gpus],
        "links": [[link(group, a, b) for b in gpus] for a in gpus],
        "nics": [{"index": d.index, "busID": d.bus_id, "numa": d.numa, "pcieSwitch": d.switch, "vfs": len(d.vfs)}
                 for d in nics],
    }


def node_ip(index: int) -> str:
    return f"10.0.{index // 250}.{index % 250 + 2}"


def _go_omitempty(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


def numa_memory(group: NodeGroup) -> dict[str, dict[str, str]]:
    """Allocatable memory and hugepages per NUMA node (the `lahar.sh/numa-memory` annotation's content): the node's
    allocatable (capacity − reserved, as on the Node) split evenly over its NUMA nodes, in Ki for memory and in
    whole pages for hugepages; what does not divide evenly goes to the lowest NUMA ids."""
    sizes = {"memory": (_ki(group.memory), 1024)}
    for size, value in group.hugepages.items():
        sizes[f"hugepages-{size}"] = (value, max(1, parse_quantity(size).value()))
    per_numa: dict[str, dict[str, str]] = {str(n): {} for n in range(group.numa_nodes)}
    for resource, (capacity, unit) in sorted(sizes.items()):
        total = parse_quantity(capacity).value()
        if resource in group.reserved:
            total -= parse_quantity(group.reserved[resource]).value()
        units, _ = divmod(max(0, total), unit)
        share, extra = divmod(units, group.numa_nodes)
        for n in range(group.numa_nodes):
            amount = (share + (1 if n < extra else 0)) * unit
            per_numa[str(n)][resource] = Quantity(amount, Format.BINARY_SI).canonical
    return per_numa


def _numatopology(group: NodeGroup, name: str) -> Obj:
    cpus = cpu_layout(group)
    reserved_cpus = 0
    if "cpu" in group.reserved:
        reserved_cpus = math.ceil(parse_quantity(group.reserved["cpu"]).milli_value() / 1000)
    allocatable = [c.id for c in cpus][reserved_cpus:]  # the kubelet reserves the lowest-numbered CPUs
    spec: Obj = {
        "policies": {"CPUManagerPolicy": group.cpu_manager_policy,
                     "TopologyManagerPolicy": group.topology_manager_policy},
    }
    if group.reserved:
        spec["resReserved"] = dict(group.reserved)
    spec["numares"] = {"cpu": {"allocatable": cpuset(allocatable), "capacity": len(cpus)}}
    spec["cpuDetail"] = {str(c.id): _go_omitempty({"numa": c.numa, "socket": c.socket, "core": c.core}) for c in cpus}
    memory = json.dumps(numa_memory(group), sort_keys=True, separators=(",", ":"))
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
            "metadata": {"name": name, "annotations": {NUMA_MEMORY_ANNOTATION: memory}}, "spec": spec}


def _device(group: NodeGroup, name: str, devices: list[_PCIDevice]) -> Obj | None:
    if not devices:
        return None
    out = []
    for d in devices:
        topology = {"socketID": d.socket, "nodeID": d.numa, "pcieID": d.pcie_id, "busID": d.bus_id}
        if d.kind == "gpu":
            assert group.gpus is not None
            model = GPU_MODELS[group.gpus.model]
            out.append({"type": "gpu", "id": d.uuid, "minor": d.index, "moduleID": d.index, "health": True,
                        "resources": {"koordinator.sh/gpu-core": "100",
                                      "koordinator.sh/gpu-memory": _mib(model.memory_mib),
                                      "koordinator.sh/gpu-memory-ratio": "100"},
                        "topology": topology})
        else:
            entry: Obj = {"type": "rdma", "id": d.bus_id, "minor": d.index, "health": True,
                          "resources": {"koordinator.sh/rdma": "100"}, "topology": topology}
            if d.vfs:
                entry["vfGroups"] = [{"labels": {"type": "general"},
                                      "vfs": [{"minor": -1, "busID": vf} for vf in d.vfs]}]
            out.append(entry)
    meta: Obj = {"name": name}
    if group.gpus:
        meta["labels"] = {"node.koordinator.sh/gpu-model": GPU_MODELS[group.gpus.model].product}
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": meta,
            "spec": {"devices": out}}


DISCOVERY_CONFIGMAP = ("kube-system", "volcano-controller-configmap")  # found by the hypernode controller anywhere


def fabric_labels(network: Network, index: int) -> dict[str, str]:
    """The leaf and spine labels of the `index`-th node of a profile with a network shape."""
    leaf = index // network.nodes_per_leaf
    return {network.leaf_label: f"leaf-{leaf}", network.spine_label: f"spine-{leaf // network.leaves_per_spine}"}


def discovery_configmap(network: Network) -> Obj:
    """The hypernode controller's ConfigMap in Volcano's format: one label chain spine → leaf → hostname."""
    conf = {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": {
        network.topology_type: [{"nodeLabel": network.spine_label}, {"nodeLabel": network.leaf_label},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}}]}
    namespace, name = DISCOVERY_CONFIGMAP
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "lahar"}},
            "data": {"volcano-controller.conf": yaml.safe_dump(conf, sort_keys=False)}}


def build(profile: Profile, count: int | None = None) -> list[Obj]:
    """Every object for the profile's nodes, in order: per node its Node, Numatopology and (GPU/RDMA) Device; with a
    network shape, the nodes carry its fabric labels and (with `discovery`) the discovery ConfigMap comes last."""
    objects: list[Obj] = []
    for index, (group, name) in enumerate(plan_names(profile, count)):
        devices = pci_layout(group, name)
        node = _node(profile, group, name, index, devices)
        if profile.network is not None:
            node["metadata"]["labels"] = dict(sorted({**node["metadata"]["labels"],
                                                      **fabric_labels(profile.network, index)}.items()))
        objects.append(node)
        objects.append(_numatopology(group, name))
        device = _device(group, name, devices)
        if device is not None:
            objects.append(device)
    if profile.network is not None and profile.network.discovery:
        objects.append(discovery_configmap(profile.network))
    return objects


def node_names(objects: Iterable[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objects if o.get("kind") == "Node" and o.get("apiVersion") == "v1"]


def publish(client: ClusterClient, objects: Iterable[Obj], *, include_nodes: bool = True) -> list[Obj]:
    """Create (or replace) the objects; kinds not registered (CRD not applied) are skipped. Returns what was written.

    Nodes are created with their status; if the server drops status on create, it is written through `nodes/status`.
    """
    written = []
    for obj in objects:
        rt = client.registry.by_kind(obj["apiVersion"], obj["kind"])
        if rt is None:
            continue
        if obj["kind"] == "Node" and obj["apiVersion"] == "v1" and not include_nodes:
            continue
        name = obj["metadata"]["name"]
        try:
            out = client.create(rt, obj)
        except errors.AlreadyExists:
            current = client.get(rt, name)
            replacement = {**obj, "metadata": {**obj["metadata"],
                                               "resourceVersion": current["metadata"]["resourceVersion"]}}
            out = client.update(rt, replacement)
        if "status" in obj and "status" in rt.subresources and (out.get("status") or {}) != obj["status"]:
            out = client.patch(rt, name, {"status": obj["status"]}, subresource="status")
        written.append(out)
    return written
