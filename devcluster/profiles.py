"""Cluster profiles for devcluster: what simulated machines look like (CPUs, NUMA, memory, GPUs, NICs), as data.

A profile is YAML (bundled ones in `devcluster/profiles/*.yaml`, or any file path) parsed into frozen pydantic
models at the edge, unknown fields rejected with their path named; `devcluster.nodes.build` turns it into objects.

Node count: a profile lists node groups, each with a default `count`; `nodes.build(profile, count=N)` instead assigns
N nodes round-robin over the groups in profile order, each group taking `weight` consecutive turns (so the `mixed`
profile with weights 1/1/1 gives a100, t4, cpu, a100, t4, ...).
"""

from __future__ import annotations

from importlib import resources as importlib_resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lahar.kube import limits

__all__ = [
    "CPU",
    "GPUs",
    "MIG",
    "Network",
    "NodeGroup",
    "Profile",
    "ProfileError",
    "RDMA",
    "VGPU",
    "bundled",
    "load",
    "parse",
]


class ProfileError(ValueError):
    """A profile that cannot be found or does not validate; the message names the file and field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CPU(_Model):
    sockets: int = Field(1, ge=1)
    cores_per_socket: int = Field(4, ge=1, alias="coresPerSocket")
    threads_per_core: int = Field(1, ge=1, le=8, alias="threadsPerCore")

    @property
    def count(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


class MIG(_Model):
    """NVIDIA MIG: `strategy: mixed` with static geometries on `gpus` (the device plugin's mixed strategy)."""

    strategy: Literal["mixed", "single"] = "mixed"
    gpus: tuple[int, ...] = ()  # indexes of MIG-enabled GPUs; the others stay whole
    geometry: dict[str, int] = Field(default_factory=dict)  # profile → instances per MIG GPU, e.g. {"1g.10gb": 2}


class VGPU(_Model):
    """HAMi / Volcano vGPU sharing (devices.md §1): which registrations to publish and the split factors."""

    providers: tuple[Literal["hami", "volcano"], ...] = ("hami", "volcano")
    split_count: int = Field(10, ge=1, alias="splitCount")
    memory_factor: int = Field(1, ge=1, alias="memoryFactor")
    core_scaling: int = Field(1, ge=1, alias="coreScaling")


class GPUs(_Model):
    model: str  # a key of `devcluster.nodes.GPU_MODELS`
    count: int = Field(ge=1)
    nvlink: int = Field(0, ge=0, le=18)  # NVLinks between every pair (18 = NV18 on NVSwitch systems; 0 = PCIe only)
    per_switch: int = Field(2, ge=1, alias="perSwitch")  # GPUs behind one PCIe switch
    sharing: Literal["exclusive", "vgpu", "mig"] = "exclusive"
    vgpu: VGPU = Field(default_factory=VGPU)
    mig: MIG = Field(default_factory=MIG)


class RDMA(_Model):
    nics: int = Field(ge=1)
    vfs_per_nic: int = Field(0, ge=0, le=127, alias="vfsPerNic")
    model: str = "ConnectX-7"
    resource_name: str = Field("nvidia.com/rdma_vf", alias="resourceName")  # SR-IOV device plugin pool (VFs)


class NodeGroup(_Model):
    name: str  # node name prefix: nodes are `<name>-<i>`
    count: int = Field(1, ge=0)
    weight: int = Field(1, ge=1)
    instance_type: str = Field(alias="instanceType")
    cpu: CPU = Field(default_factory=CPU)
    numa_nodes: int = Field(1, ge=1, le=64, alias="numaNodes")
    memory: str = "8Gi"
    hugepages: dict[str, str] = Field(default_factory=lambda: {"1Gi": "0", "2Mi": "0"})
    pods: int = Field(110, ge=1)
    ephemeral_storage: str = Field("100Gi", alias="ephemeralStorage")
    reserved: dict[str, str] = Field(default_factory=dict)  # system-reserved: allocatable = capacity − reserved
    cpu_manager_policy: Literal["none", "static"] = Field("static", alias="cpuManagerPolicy")
    topology_manager_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = Field(
        "best-effort", alias="topologyManagerPolicy")
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    gpus: GPUs | None = None
    rdma: RDMA | None = None

    @model_validator(mode="after")
    def _numa_fits_sockets(self) -> NodeGroup:
        if self.numa_nodes % self.cpu.sockets and self.cpu.sockets % self.numa_nodes:
            raise ValueError(f"numaNodes ({self.numa_nodes}) must be a multiple or divisor of cpu.sockets "
                             f"({self.cpu.sockets})")
        if self.cpu.sockets * self.cpu.cores_per_socket % self.numa_nodes:
            raise ValueError(f"cores ({self.cpu.sockets * self.cpu.cores_per_socket}) do not split evenly over "
                             f"{self.numa_nodes} NUMA nodes")
        return self


class Network(_Model):
    """A fabric shape: racks of `nodesPerLeaf` nodes under one leaf (ToR) switch each, `leavesPerSpine` leaves under
    each spine. Node i (in build order) gets `leafLabel: leaf-<i // nodesPerLeaf>` and `spineLabel: spine-<...>`, the
    labels a fabric-discovery tool sets; with `discovery`, the hypernode controller's ConfigMap (Volcano's label
    source, one chain spine → leaf → hostname under `topologyType`) is published too, so the tree appears by itself."""

    topology_type: str = Field("superpod", alias="topologyType", min_length=1, max_length=20)
    nodes_per_leaf: int = Field(8, ge=1, alias="nodesPerLeaf")
    leaves_per_spine: int = Field(2, ge=1, alias="leavesPerSpine")
    leaf_label: str = Field("volcano.sh/tor", alias="leafLabel", min_length=1)
    spine_label: str = Field("volcano.sh/hypercluster", alias="spineLabel", min_length=1)
    discovery: bool = True

    @model_validator(mode="after")
    def _distinct_labels(self) -> Network:
        if self.leaf_label == self.spine_label or "kubernetes.io/hostname" in (self.leaf_label, self.spine_label):
            raise ValueError("leafLabel and spineLabel must differ from each other and from kubernetes.io/hostname")
        return self


class Profile(_Model):
    name: str
    description: str = ""
    groups: tuple[NodeGroup, ...] = Field(min_length=1)
    network: Network | None = None

    @model_validator(mode="after")
    def _unique_groups(self) -> Profile:
        names = [g.name for g in self.groups]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate group names: {', '.join(dupes)}")
        return self


def bundled() -> list[str]:
    """Names of the profiles shipped with devcluster."""
    folder = importlib_resources.files("lahar.devcluster") / "profiles"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def parse(data: object, *, source: str = "<profile>") -> Profile:
    """Validate already-loaded YAML data; errors name the field path."""
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                             for err in exc.errors())
        raise ProfileError(f"{source}: {problems}") from None


def load(name_or_path: str | Path) -> Profile:
    """A bundled profile by name (`cpu-small`, `dgx-h100`, `mixed`) or a YAML file by path."""
    text: str
    source = str(name_or_path)
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or "/" in source:
        if not path.is_file():
            raise ProfileError(f"profile file {source} not found")
        text = path.read_text()
    else:
        resource = importlib_resources.files("lahar.devcluster") / "profiles" / f"{source}.yaml"
        if not resource.is_file():
            raise ProfileError(f'unknown profile "{source}": bundled profiles are {", ".join(bundled())}; '
                               "or give a path to a YAML file")
        text = resource.read_text()
    try:
        data = limits.safe_load(text)
    except (yaml.YAMLError, limits.LimitError) as exc:
        raise ProfileError(f"{source}: not valid YAML: {exc}") from None
    return parse(data, source=source)
