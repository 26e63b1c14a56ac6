"""lahar's admission configuration: scheduler names, queue rules, Volcano's `resourceGroups`, device tables.

Read by every webhook rule (`webhooks.*`) as the `config` argument; `AdmissionConfig()` is the built-in default.

The model is declarative and frozen: it loads from a mapping in Volcano's camelCase (`resourceGroups`,
`schedulerName`, ...) or snake_case, an unknown field is an error naming its path (pydantic `extra="forbid"`),
and nothing in it changes after load. Device tables follow `spec/devices.md`:

- `devices.vgpu`: the two vGPU vocabularies (Volcano's `volcano.sh/vgpu-*`, HAMi's `nvidia.com/gpu|gpumem|...`)
  and the defaults of §1.2 (count 1, exclusive cores 100, no default memory);
- `devices.mig`: GPU models in MIG mode with their profile tables (§2.1: A100-40GB, A100-80GB, H100-80GB, H200;
  memory in NVML MiB, never the name's GB) and the profiles a memory-style request may be normalized to
  (HAMi's chart allowlist);
- `devices.rdma`: GPU + RDMA VF pairing via Koordinator's `scheduling.koordinator.sh/device-joint-allocate`
  (§3.2), the pairing mode and the resource names counted as GPUs and as RDMA VFs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "AdmissionConfig",
    "DeviceConfig",
    "GPUModel",
    "MIGConfig",
    "MIGProfile",
    "PairingMode",
    "RDMAConfig",
    "ResourceGroup",
    "ResourceGroupObject",
    "VGPUConfig",
    "VGPUNames",
    "default_gpu_models",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel)


# --- Volcano's resourceGroups (`--admission-conf`, spec §4.3) ------------------------------------------------------


class ResourceGroupObject(_Model):
    """Which pods a resource group takes: `key: namespace` (pod namespace in `value`) or `key: annotation`
    (any `k: v` YAML line in `value` equal to a pod annotation). Empty key: annotation
    `volcano.sh/resource-group` equal to the group's name."""

    key: str = ""
    value: tuple[str, ...] = ()

    @field_validator("key")
    @classmethod
    def _known_key(cls, v: str) -> str:
        if v not in ("", "namespace", "annotation"):
            raise ValueError(f"must be 'namespace' or 'annotation', got {v!r}")
        return v


class ResourceGroup(_Model):
    """One entry of Volcano's admission `resourceGroups`: what to patch into a matching pod."""

    resource_group: str
    object: ResourceGroupObject = ResourceGroupObject()
    scheduler_name: str = ""
    tolerations: tuple[dict[str, Any], ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    affinity: str = ""             # a JSON-encoded corev1.Affinity, as Volcano's config carries it

    @field_validator("affinity")
    @classmethod
    def _affinity_is_json_object(cls, v: str) -> str:
        if v:
            try:
                parsed = json.loads(v)
            except ValueError as e:
                raise ValueError(f"must be a JSON-encoded Affinity object: {e}") from None
            if not isinstance(parsed, dict):
                raise ValueError("must be a JSON-encoded Affinity object")
        return v

    def affinity_object(self) -> dict[str, Any] | None:
        return json.loads(self.affinity) if self.affinity else None


# --- devices (spec/devices.md) ---------------------------------------------------------------------------------------


class VGPUNames(_Model):
    """One vGPU vocabulary: the resource names of count, memory (MiB), memory percentage and cores (percent)."""

    vendor: str                    # "volcano" | "hami" (used in messages and for the vgpu-mode annotation)
    number: str
    memory: str
    memory_percentage: str = ""
    cores: str = ""
    priority: str = ""
    mode_annotation: str = ""      # pod annotation selecting the device mode (hami-core | mig | mps)
    modes: tuple[str, ...] = ("hami-core", "mig")
    # A bare count (`number` with no other vGPU resource) is a vGPU request only when this is true. HAMi's count
    # name `nvidia.com/gpu` is also the NVIDIA device plugin's whole-GPU resource, so it is off for HAMi by default.
    count_only_is_vgpu: bool = True

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.number, self.memory, self.memory_percentage, self.cores, self.priority) if n)


VOLCANO_VGPU = VGPUNames(
    vendor="volcano", number="volcano.sh/vgpu-number", memory="volcano.sh/vgpu-memory",
    memory_percentage="volcano.sh/vgpu-memory-percentage", cores="volcano.sh/vgpu-cores",
    mode_annotation="volcano.sh/vgpu-mode", modes=("hami-core", "mig"))
HAMI_VGPU = VGPUNames(
    vendor="hami", number="nvidia.com/gpu", memory="nvidia.com/gpumem",
    memory_percentage="nvidia.com/gpumem-percentage", cores="nvidia.com/gpucores", priority="nvidia.com/priority",
    mode_annotation="nvidia.com/vgpu-mode", modes=("hami-core", "mig", "mps"), count_only_is_vgpu=False)


class VGPUConfig(_Model):
    """vGPU normalization (devices.md §1.2, §4.1)."""

    vocabularies: tuple[VGPUNames, ...] = (VOLCANO_VGPU, HAMI_VGPU)
    default_gpu_num: int = Field(1, ge=1)      # count added when memory/cores/percentage come without a count
    default_memory: int = Field(0, ge=0)       # MiB added when neither memory nor percentage is given (0: none)
    exclusive_cores: int = Field(100, ge=1, le=100)  # cores added to an exclusive (whole-memory) request
    memory_factor: int = Field(1, ge=1)        # HAMi memoryFactor / Volcano gpuMemoryFactor: MiB per memory unit
    reject_privileged: bool = True             # HAMi: privileged containers bypass HAMi-core limits
    reject_node_name: bool = True              # HAMi: a pre-bound pod cannot get vGPU devices


class MIGProfile(_Model):
    """One MIG profile of a GPU model: name `<G>g.<GB>gb[+attr]`, GPU slices, max instances, NVML memory in MiB."""

    name: str
    slices: int
    max_instances: int
    memory_mib: int
    sms: int = 0


class GPUModel(_Model):
    """A MIG-capable GPU model: the names it goes by (matched as case-insensitive substrings of a product name),
    its full memory, its profile table and the profiles memory-style requests may be normalized to."""

    name: str
    aliases: tuple[str, ...] = ()
    memory_mib: int
    profiles: tuple[MIGProfile, ...]
    allowed: tuple[str, ...]

    @model_validator(mode="after")
    def _allowed_are_profiles(self) -> GPUModel:
        known = {p.name for p in self.profiles}
        unknown = [a for a in self.allowed if a not in known]
        if unknown:
            raise ValueError(f"allowed profiles {unknown} are not in the profile table of {self.name}")
        return self

    def profile(self, name: str) -> MIGProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    def allowed_profiles(self) -> list[MIGProfile]:
        """Allowed profiles, smallest first (memory, then slices) — the order a memory request is matched in."""
        chosen = [p for p in self.profiles if p.name in self.allowed]
        return sorted(chosen, key=lambda p: (p.memory_mib, p.slices))

    def matches(self, product: str) -> bool:
        text = product.lower()
        return any(a.lower() in text for a in (self.name, *self.aliases))


def _profiles(rows: tuple[tuple[str, int, int, int, int], ...]) -> tuple[MIGProfile, ...]:
    return tuple(MIGProfile(name=n, slices=s, max_instances=i, memory_mib=m, sms=sm) for n, s, i, m, sm in rows)


def default_gpu_models() -> tuple[GPUModel, ...]:
    """devices.md §2.1 (NVML MiB, go-nvml mocks) with HAMi's chart allowlist as the normalization targets."""
    return (
        GPUModel(
            name="A100-40GB", memory_mib=40960,
            aliases=("A100-SXM4-40GB", "A100-PCIE-40GB", "A100 40GB", "A800-SXM4-40GB", "A800-40GB", "A800 40GB"),
            profiles=_profiles((
                ("1g.5gb", 1, 7, 4864, 14), ("1g.5gb+me", 1, 1, 4864, 14), ("1g.10gb", 1, 4, 9856, 14),
                ("2g.10gb", 2, 3, 9856, 28), ("3g.20gb", 3, 2, 19968, 42), ("4g.20gb", 4, 1, 19968, 56),
                ("7g.40gb", 7, 1, 40192, 98))),
            allowed=("1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb")),
        GPUModel(
            name="A100-80GB", memory_mib=81920,
            aliases=("A100-SXM4-80GB", "A100-PCIE-80GB", "A100 80GB", "A100 PCIe 80GB", "A800-SXM4-80GB",
                     "A800-80GB", "A800 80GB"),
            profiles=_profiles((
                ("1g.10gb", 1, 7, 9856, 14), ("1g.10gb+me", 1, 1, 9856, 14), ("1g.20gb", 1, 4, 19968, 14),
                ("2g.20gb", 2, 3, 19968, 28), ("3g.40gb", 3, 2, 40192, 42), ("4g.40gb", 4, 1, 40192, 56),
                ("7g.80gb", 7, 1, 80384, 98))),
            allowed=("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")),
        GPUModel(
            name="H100-80GB", memory_mib=81920,
            aliases=("H100-SXM5-80GB", "H100-PCIE-80GB", "H100 80GB", "H100 PCIe", "H800-80GB", "H800 80GB",
                     "H800-SXM5-80GB", "H800-PCIE-80GB"),
            profiles=_profiles((
                ("1g.10gb", 1, 7, 10240, 16), ("1g.10gb+me", 1, 1, 10240, 16), ("1g.20gb", 1, 4, 20480, 16),
                ("2g.20gb", 2, 3, 20480, 32), ("3g.40gb", 3, 2, 40960, 48), ("4g.40gb", 4, 1, 40960, 64),
                ("7g.80gb", 7, 1, 81920, 112))),
            allowed=("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")),
        GPUModel(
            name="H200", memory_mib=144384,
            aliases=("H200-141GB", "H200 141GB", "H200-SXM5-141GB", "H200 NVL", "H200-NVL"),
            profiles=_profiles((
                ("1g.18gb", 1, 7, 18432, 16), ("1g.18gb+me", 1, 1, 18432, 16), ("1g.35gb", 1, 4, 35840, 16),
                ("2g.35gb", 2, 3, 35840, 32), ("3g.71gb", 3, 2, 72704, 48), ("4g.71gb", 4, 1, 72704, 64),
                ("7g.141gb", 7, 1, 144384, 112))),
            allowed=("1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb")),
    )


class MIGConfig(_Model):
    """MIG request handling (devices.md §2, §4.2).

    A container with a memory-style vGPU request (memory and/or percentage) in a pod that selects MIG mode
    (`volcano.sh/vgpu-mode: mig` or `nvidia.com/vgpu-mode: mig`) and names one GPU model (annotation
    `nvidia.com/use-gputype` or nodeSelector `nvidia.com/gpu.product`) is translated, with `strategy: mixed`,
    into the mixed-strategy resource `nvidia.com/mig-<profile>` of the smallest allowed profile whose NVML
    memory holds the request. With `strategy: dynamic` the request stays (HAMi dynamic MIG picks the profile at
    scheduling time) and is only checked to fit the largest allowed profile.
    """

    strategy: str = "mixed"        # mixed | dynamic
    resource_prefix: str = "nvidia.com/mig-"
    product_label: str = "nvidia.com/gpu.product"
    gpu_type_annotation: str = "nvidia.com/use-gputype"
    whole_gpu_resource: str = "nvidia.com/gpu"
    models: tuple[GPUModel, ...] = Field(default_factory=default_gpu_models)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        if v not in ("mixed", "dynamic"):
            raise ValueError(f"must be 'mixed' or 'dynamic', got {v!r}")
        return v

    def model_for(self, product: str) -> GPUModel | None:
        """The configured model `product` names (exactly one match), else None."""
        hits = [m for m in self.models if m.matches(product)]
        return hits[0] if len(hits) == 1 else None


class PairingMode(StrEnum):
    """GPU ↔ RDMA VF pairing: off; `same-pcie` (Koordinator joint allocation, VFs on the GPUs' PCIe roots);
    `one-to-one` (same-pcie, and never more VFs than GPUs)."""

    OFF = "off"
    SAME_PCIE = "same-pcie"
    ONE_TO_ONE = "one-to-one"


class RDMAConfig(_Model):
    """RDMA VF pairing (devices.md §3, §4.3). The pod annotation `pairing_annotation` overrides `pairing`
    (`true` means `on_mode`, `false` means off)."""

    pairing: PairingMode = PairingMode.OFF
    on_mode: PairingMode = PairingMode.ONE_TO_ONE
    pairing_annotation: str = "lahar.sh/rdma-pairing"
    required_scope: str = "SamePCIe"
    allocate_vf: bool = True       # also ask for VFs (not PFs): device-allocate-hint {"rdma":{"vfSelector":{}}}
    # Koordinator counts 100 units per device: `koordinator.sh/rdma: 100·k` = k devices, `<= 100` = one device.
    koordinator_rdma: str = "koordinator.sh/rdma"
    rdma_resources: tuple[str, ...] = ("koordinator.sh/rdma", "mellanox.com/mlnx_sriov_rdma", "mellanox.com/mlnx_rdma",
                                       "intel.com/intel_rdma", "nvidia.com/rdma_vf")
    # Whole-GPU counts; `koordinator.sh/gpu` counts 100 units per GPU.
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "koordinator.sh/gpu")

    @field_validator("required_scope")
    @classmethod
    def _known_scope(cls, v: str) -> str:
        if v not in ("", "SamePCIe"):
            raise ValueError(f"must be 'SamePCIe' or empty, got {v!r}")
        return v


class DeviceConfig(_Model):
    vgpu: VGPUConfig = VGPUConfig()
    mig: MIGConfig = MIGConfig()
    rdma: RDMAConfig = RDMAConfig()


# --- the whole configuration -------------------------------------------------------------------------------------


class AdmissionConfig(_Model):
    """Everything the admission rules are configured by; `AdmissionConfig()` is lahar's built-in default."""

    scheduler_names: tuple[str, ...] = ("volcano",)      # Volcano `--scheduler-name` (pods of other schedulers pass)
    default_queue: str = "default"                       # Volcano `--default-queue`
    max_queue_depth: int = Field(5, ge=1)                # Volcano `--max-queue-depth`
    enable_queue_allocated_pods_check: bool = False      # Volcano `--enable-queue-allocated-pods-check`
    enable_root_queue_protection: bool = True            # Volcano `--enable-root-queue-protection`
    scheduling_gates_queue_admission: bool = False       # Volcano feature gate SchedulingGatesQueueAdmission
    resource_groups: tuple[ResourceGroup, ...] = ()      # Volcano `--admission-conf` resourceGroups
    devices: DeviceConfig = DeviceConfig()

    @field_validator("scheduler_names")
    @classmethod
    def _some_scheduler(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or any(not s for s in v):
            raise ValueError("must list at least one non-empty scheduler name")
        return v

    @classmethod
    def load(cls, data: Mapping[str, Any] | None) -> AdmissionConfig:
        """From a decoded YAML/JSON mapping (camelCase or snake_case); pydantic's ValidationError names the path."""
        return cls.model_validate(dict(data or {}))
