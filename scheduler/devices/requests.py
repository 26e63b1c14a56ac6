"""A pod's device requests, read the way the upstream schedulers read them: whole GPUs, vGPU slices (Volcano's
`volcano.sh/vgpu-*` and HAMi's `nvidia.com/gpu|gpumem|...`), Koordinator GPU shares (`koordinator.sh/gpu-memory-ratio`
below a card) and partition specs, MIG devices, RDMA devices/VFs and joint allocation.

First step of the deviceshare plugin for a task: `parse(pod)` → `DeviceRequest`; then, per node, `vgpu.fit`,
`mig.fit_mixed` / `mig.fit_dynamic`, `gpu.allocate` and `rdma.allocate`. Pure; rules from spec/devices.md §1.2
(per-container derivation), §1.6 (steering annotations), §2.2 (MIG resources), §3.1–3.3 (Koordinator).

Container order everywhere is init containers, then app containers, in spec order — the index HAMi's
`hami.io/vgpu-devices-allocated` aligns on. A plain `nvidia.com/gpu: N` appears twice on purpose: as `gpus`
(whole GPUs, NVIDIA device plugin / Koordinator) and as an exclusive HAMi request (on a node with a HAMi
registration `nvidia.com/gpu` counts HAMi slots); the plugin uses the one the node speaks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lahar.kube import quantity
from lahar.policies.admission import HAMI_VGPU, VOLCANO_VGPU, AdmissionConfig, VGPUConfig, VGPUNames
from lahar.scheduler.devices import partitions

__all__ = [
    "ALLOCATE_HINT_ANNOTATION",
    "GPU_POLICY_ANNOTATION",
    "JOINT_ALLOCATE_ANNOTATION",
    "KOORD_UNITS",
    "NODE_POLICY_ANNOTATION",
    "NUMA_BIND_ANNOTATION",
    "PODGROUP_POLICY_ANNOTATION",
    "AllocateHint",
    "DeviceRequest",
    "GPUFilters",
    "GPUShareRequest",
    "JointAllocate",
    "MIGRequest",
    "RDMARequest",
    "RequestError",
    "VGPUPodRequest",
    "VGPURequest",
    "allocate_hints",
    "containers",
    "filters",
    "gpu_share",
    "joint_allocate",
    "mig_requests",
    "pairing",
    "parse",
    "profile_of",
    "rdma_request",
    "vgpu_request",
    "whole_gpus",
]

JOINT_ALLOCATE_ANNOTATION = "scheduling.koordinator.sh/device-joint-allocate"
ALLOCATE_HINT_ANNOTATION = "scheduling.koordinator.sh/device-allocate-hint"
NUMA_BIND_ANNOTATION = "nvidia.com/numa-bind"
GPU_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
NODE_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"
PODGROUP_POLICY_ANNOTATION = "volcano.sh/vgpu-podgroup-policy"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
KOORD_UNITS = 100
KOORD_GPU = "koordinator.sh/gpu"
KOORD_RDMA = "koordinator.sh/rdma"
MIG_PREFIX = "nvidia.com/mig-"
PERCENT_UNSET = 101  # upstream's sentinel, kept out of the public API (None there)

# steering annotations per vocabulary (devices.md §1.6)
_FILTER_KEYS = {
    "hami": ("nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "nvidia.com/use-gpuuuid",
             "nvidia.com/nouse-gpuuuid"),
    "volcano": ("nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "volcano.sh/vgpu-use-gpuuuid",
                "volcano.sh/vgpu-nouse-gpuuuid"),
}


class RequestError(ValueError):
    """A malformed device annotation (joint-allocate / allocate-hint JSON); the message names the annotation."""


# --- containers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Container:
    index: int        # position in init + app order
    name: str
    init: bool
    limits: Mapping[str, Any]
    requests: Mapping[str, Any]

    def value(self, name: str, *, limits_only: bool = False) -> int | None:
        """The resource as a whole number (limits first, then requests), None when absent or not a number."""
        raw = self.limits.get(name)
        if raw is None and not limits_only:
            raw = self.requests.get(name)
        if raw is None or not name:
            return None
        try:
            q = quantity.parse(raw)
        except (quantity.QuantityError, TypeError, ValueError):
            return None
        return math.ceil(q.fraction)

    def has(self, name: str, *, limits_only: bool = False) -> bool:
        return bool(name) and (name in self.limits or (not limits_only and name in self.requests))


def containers(pod: Mapping[str, Any]) -> list[_Container]:
    """Init containers then app containers, each with its limits and requests."""
    spec = pod.get("spec") or {}
    out: list[_Container] = []
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            res = c.get("resources") or {}
            out.append(_Container(len(out), str(c.get("name") or ""), key == "initContainers",
                                  dict(res.get("limits") or {}), dict(res.get("requests") or {})))
    return out


def _annotations(pod: Mapping[str, Any]) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("annotations") or {})


def _pod_total(per_container: Iterator[tuple[bool, int]]) -> int:
    """What a pod holds of a device resource: max(largest init container, sum of app containers)."""
    init_peak, app = 0, 0
    for init, n in per_container:
        if init:
            init_peak = max(init_peak, n)
        else:
            app += n
    return max(init_peak, app)


# --- vGPU --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VGPURequest:
    """One container's vGPU request as the vendor's scheduler resolves it (devices.md §1.2).

    `memory_mib` 0 = not given; `memory_percentage` None = not given. `count_only`: only the count was given
    (HAMi: an exclusive whole card — percentage 100, cores 100).
    """

    container: int
    name: str
    vendor: str
    count: int
    memory_mib: int = 0
    memory_percentage: int | None = None
    cores: int = 0
    init: bool = False
    count_only: bool = False

    def memory_on(self, card_memory_mib: int) -> int:
        """MiB this request takes on a card of `card_memory_mib`: HAMi's Fit lets memory win over a percentage,
        Volcano lets the percentage win (§1.2 rule 6 / Volcano rule 5)."""
        pct = self.memory_percentage
        if pct is not None and (self.vendor == "volcano" or not self.memory_mib):
            return card_memory_mib * pct // 100
        return self.memory_mib

    @property
    def exclusive(self) -> bool:
        return self.cores >= 100


@dataclass(frozen=True)
class GPUFilters:
    """Type and UUID steering (`nvidia.com/use-gputype`, ... ; devices.md §1.6). Empty tuples = no constraint."""

    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    vendor: str = "hami"

    def type_ok(self, card_type: str) -> bool:
        """HAMi: `use` then `nouse`; Volcano ignores `nouse` when `use` is present. Case-insensitive substrings."""
        text = card_type.upper()
        if self.use_types:
            if not any(t.upper() in text for t in self.use_types):
                return False
            if self.vendor == "volcano":
                return True
        return not any(t.upper() in text for t in self.nouse_types)

    def uuid_ok(self, uuid: str) -> bool:
        """Exact UUIDs; deny wins."""
        if uuid in self.nouse_uuids:
            return False
        return not self.use_uuids or uuid in self.use_uuids

    def allows(self, card_type: str, uuid: str) -> bool:
        return self.type_ok(card_type) and self.uuid_ok(uuid)


@dataclass(frozen=True)
class VGPUPodRequest:
    """A pod's vGPU request in one vocabulary, with its steering annotations.

    `mode`: the pod's `<vendor>/vgpu-mode` (None: any mode); `gpu_policy`/`node_policy`: HAMi's per-pod policy
    annotations (None: the scheduler's default); `podgroup_spread`: Volcano's `volcano.sh/vgpu-podgroup-policy:
    spread` with the pod's group in `group`.
    """

    vendor: str
    containers: tuple[VGPURequest, ...]
    filters: GPUFilters = GPUFilters()
    mode: str | None = None
    numa_bind: bool = False
    gpu_policy: str | None = None
    node_policy: str | None = None
    podgroup_spread: bool = False
    group: str = ""
    container_count: int = 0   # init + app containers of the pod (HAMi's annotation has one segment each)

    @property
    def max_count(self) -> int:
        return max((c.count for c in self.containers), default=0)


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def filters(annotations: Mapping[str, str], vendor: str) -> GPUFilters:
    use_t, nouse_t, use_u, nouse_u = _FILTER_KEYS[vendor]
    return GPUFilters(_split(annotations.get(use_t)), _split(annotations.get(nouse_t)), _split(annotations.get(use_u)),
                      _split(annotations.get(nouse_u)), vendor)


def _volcano_container(c: _Container, names: VGPUNames) -> VGPURequest | None:
    """Volcano `resourcereqs`: app containers with `vgpu-number` or `vgpu-memory` in limits; memory-only = 1 GPU."""
    if c.init or not (c.has(names.number, limits_only=True) or c.has(names.memory, limits_only=True)):
        return None
    count = c.value(names.number, limits_only=True) if c.has(names.number, limits_only=True) else 1
    memory = c.value(names.memory) or 0
    pct = c.value(names.memory_percentage) if names.memory_percentage else None
    if pct is None and memory == 0:
        pct = 100
    return VGPURequest(c.index, c.name, "volcano", count or 0, max(memory, 0), pct, max(c.value(names.cores) or 0, 0),
                       init=False)


def _hami_container(c: _Container, names: VGPUNames, config: VGPUConfig) -> VGPURequest | None:
    """HAMi `GenerateResourceRequests` + the webhook's count/exclusive-core defaulting (§1.2, §1.3 steps 6–7)."""
    others = [n for n in (names.memory, names.memory_percentage, names.cores) if c.has(n)]
    if not c.has(names.number) and not others:
        return None
    count = c.value(names.number) if c.has(names.number) else config.default_gpu_num
    if not count or count <= 0:
        return None
    memory = c.value(names.memory) if c.has(names.memory) else 0
    if memory is None or memory < 0:
        return None  # upstream drops the whole container request
    pct = c.value(names.memory_percentage) if c.has(names.memory_percentage) else None
    if pct is not None:
        pct = None if pct <= 0 else min(pct, 100)
    if pct is None and memory == 0:
        if config.default_memory:
            memory = config.default_memory
        else:
            pct = 100
    memory *= config.memory_factor
    if c.has(names.cores):
        cores = min(max(c.value(names.cores) or 0, 0), 100)
    elif pct == 100 and not memory:
        cores = config.exclusive_cores
    else:
        cores = 0
    return VGPURequest(c.index, c.name, "hami", count, memory, pct, cores, init=c.init, count_only=not others)


def vgpu_request(pod: Mapping[str, Any], vendor: str, *, config: VGPUConfig | None = None) -> VGPUPodRequest | None:
    """The pod's vGPU request in `vendor`'s vocabulary ("volcano" or "hami"), or None when it has none."""
    config = config or VGPUConfig()
    names = next((v for v in config.vocabularies if v.vendor == vendor), None)
    if names is None:
        names = VOLCANO_VGPU if vendor == "volcano" else HAMI_VGPU
    cs = containers(pod)
    if vendor == "volcano":
        reqs = [r for c in cs if (r := _volcano_container(c, names)) is not None]
    else:
        reqs = [r for c in cs if (r := _hami_container(c, names, config)) is not None]
    if not reqs:
        return None
    ann = _annotations(pod)
    mode = ann.get(names.mode_annotation) if names.mode_annotation else None
    return VGPUPodRequest(
        vendor=vendor, containers=tuple(reqs), filters=filters(ann, vendor), mode=mode or None,
        numa_bind=vendor == "hami" and ann.get(NUMA_BIND_ANNOTATION, "").strip().lower() == "true",
        gpu_policy=(ann.get(GPU_POLICY_ANNOTATION) or None) if vendor == "hami" else None,
        node_policy=(ann.get(NODE_POLICY_ANNOTATION) or None) if vendor == "hami" else None,
        podgroup_spread=vendor == "volcano" and ann.get(PODGROUP_POLICY_ANNOTATION, "").strip() == "spread",
        group=ann.get(GROUP_NAME_ANNOTATION, ""), container_count=len(cs))


# --- whole GPUs, MIG ---------------------------------------------------------------------------------------------


def whole_gpus(pod: Mapping[str, Any], *, resources: tuple[str, ...] = ("nvidia.com/gpu", KOORD_GPU)) -> int:
    """Whole GPUs the pod holds: `nvidia.com/gpu` of containers without other vGPU resources, plus
    `koordinator.sh/gpu` / 100 (a value below 100 is a share of one card, see `gpu_share`); max(init peak,
    app sum)."""
    hami_extras = (HAMI_VGPU.memory, HAMI_VGPU.memory_percentage, HAMI_VGPU.cores)

    def per(c: _Container) -> int:
        n = 0
        for name in resources:
            v = c.value(name)
            if not v or v <= 0:
                continue
            if name == KOORD_GPU:
                n += v // KOORD_UNITS  # below 100 it is a share of one card (`gpu_share`), not a whole GPU
            elif not any(c.has(x) for x in hami_extras):
                n += v
        return n

    return _pod_total((c.init, per(c)) for c in containers(pod))


@dataclass(frozen=True)
class MIGRequest:
    """A container's NVIDIA "mixed"-strategy MIG device: `resource` `nvidia.com/mig-1g.10gb.me`, `profile`
    `1g.10gb+me` (the resource name's `.me`/`.gfx` back to `+`), `count`."""

    container: int
    name: str
    resource: str
    profile: str
    count: int
    init: bool = False


def profile_of(resource: str, prefix: str = MIG_PREFIX) -> str:
    """`nvidia.com/mig-1g.10gb.me` → `1g.10gb+me` (the device plugin writes `+` as `.` in resource names)."""
    prof = resource[len(prefix):] if resource.startswith(prefix) else resource
    head, dot, tail = prof.partition("gb.")
    return f"{head}gb+{tail}" if dot else prof


def mig_requests(pod: Mapping[str, Any], *, prefix: str = MIG_PREFIX) -> tuple[MIGRequest, ...]:
    out = []
    for c in containers(pod):
        for name in sorted({*c.limits, *c.requests}):
            if name.startswith(prefix):
                n = c.value(name)
                if n and n > 0:
                    out.append(MIGRequest(c.index, c.name, name, profile_of(name, prefix), n, c.init))
    return tuple(out)


# --- Koordinator GPU shares ---------------------------------------------------------------------------------------

KOORD_GPU_CORE = "koordinator.sh/gpu-core"
KOORD_GPU_MEMORY = "koordinator.sh/gpu-memory"
KOORD_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"


@dataclass(frozen=True)
class GPUShareRequest:
    """A Koordinator request below one card (`koordinator.sh/gpu-memory-ratio` < 100, `gpu-memory` bytes, or
    `koordinator.sh/gpu` < 100), per card: `core` percent of the SMs, `ratio` percent of the memory (None when
    given as bytes), `memory_mib` (0 when given as a ratio). Koordinator's `calcDesiredRequestsAndCountForGPU`:
    the ratio wins over bytes; a ratio of k·100 is k whole cards (counted in `DeviceRequest.gpus`)."""

    core: int = 0
    ratio: int | None = None
    memory_mib: int = 0

    def memory_on(self, card_memory_mib: int) -> int:
        """MiB taken on a card of `card_memory_mib` (Koordinator `memoryRatioToBytes`: rounded down)."""
        return self.ratio * card_memory_mib // 100 if self.ratio is not None else self.memory_mib

    def ratio_on(self, card_memory_mib: int) -> int:
        """Percent of the card's memory (Koordinator `memoryBytesToRatio`: rounded down)."""
        if self.ratio is not None:
            return self.ratio
        return self.memory_mib * 100 // card_memory_mib if card_memory_mib else 100


def _koord_totals(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's Koordinator GPU resources, max(init peak, app sum); `gpu-memory` in MiB (rounded up)."""
    cs = containers(pod)
    out: dict[str, int] = {}
    for name in (KOORD_GPU, KOORD_GPU_CORE, KOORD_GPU_MEMORY_RATIO, KOORD_GPU_MEMORY):
        if not any(c.has(name) for c in cs):
            continue
        if name == KOORD_GPU_MEMORY:
            out[name] = _pod_total((c.init, _mib_of(c, name)) for c in cs)
        else:
            out[name] = _pod_total((c.init, max(c.value(name) or 0, 0)) for c in cs)
    return out


def _mib_of(c: _Container, name: str) -> int:
    raw = c.limits.get(name, c.requests.get(name))
    if raw is None:
        return 0
    try:
        return max(math.ceil(quantity.parse(raw).fraction / (1024 * 1024)), 0)
    except (quantity.QuantityError, TypeError, ValueError):
        return 0


def gpu_share(pod: Mapping[str, Any]) -> tuple[GPUShareRequest | None, int, str]:
    """(the pod's share of one card or None, whole cards asked through `gpu-memory-ratio: k·100`, error or "")."""
    t = _koord_totals(pod)
    if not t:
        return None, 0, ""
    ratio = t.get(KOORD_GPU_MEMORY_RATIO)
    core = t.get(KOORD_GPU_CORE)
    if KOORD_GPU in t:
        if t[KOORD_GPU] >= KOORD_UNITS:
            return None, 0, ""   # whole cards, counted by `whole_gpus`
        ratio, core = t[KOORD_GPU], t[KOORD_GPU]
    if ratio is not None and ratio > KOORD_UNITS:
        if ratio % KOORD_UNITS:
            return None, 0, (f"{KOORD_GPU_MEMORY_RATIO}: {ratio} is invalid: Koordinator counts 100 per device, so a "
                             "value above 100 must be a multiple of 100")
        return None, ratio // KOORD_UNITS, ""
    if ratio is None and KOORD_GPU_MEMORY not in t:
        return None, 0, (f"{KOORD_GPU_CORE} needs {KOORD_GPU_MEMORY} or {KOORD_GPU_MEMORY_RATIO} with it"
                         if core is not None else "")
    if ratio == KOORD_UNITS:
        return None, 1, ""
    if (core or 0) > KOORD_UNITS:
        return None, 0, f"{KOORD_GPU_CORE}: {core} is more than one card (100) for a share of one card"
    if ratio is not None and ratio <= 0:
        return None, 0, ""
    return GPUShareRequest(core or 0, ratio, 0 if ratio is not None else t.get(KOORD_GPU_MEMORY, 0)), 0, ""


# --- RDMA, joint allocation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RDMARequest:
    """RDMA the pod asks for. `devices`: Koordinator devices (`koordinator.sh/rdma` ≤ 100 → 1 device of that many
    units, k·100 → k devices of 100, each on its own NIC); `vfs`: SR-IOV VF resources (e.g. `nvidia.com/rdma_vf`)
    counted by the kubelet, several may share a NIC; `units`: per Koordinator device."""

    devices: int = 0
    units: int = 0
    vfs: int = 0
    vf_resource: str = ""

    @property
    def count(self) -> int:
        """How many (NIC, VF) picks are wanted."""
        return max(self.devices, self.vfs)


def rdma_request(pod: Mapping[str, Any], *, config: AdmissionConfig | None = None) -> RDMARequest | None:
    rdma = (config or AdmissionConfig()).devices.rdma
    cs = containers(pod)
    units = _pod_total((c.init, max(c.value(rdma.koordinator_rdma) or 0, 0)) for c in cs)
    vfs, vf_resource = 0, ""
    for name in rdma.rdma_resources:
        if name == rdma.koordinator_rdma:
            continue
        n = _pod_total((c.init, max(c.value(name) or 0, 0)) for c in cs)
        if n:
            vfs += n
            vf_resource = vf_resource or name
    if not units and not vfs:
        return None
    devices = 0 if units <= 0 else (1 if units <= KOORD_UNITS else units // KOORD_UNITS)
    return RDMARequest(devices=devices, units=min(units, KOORD_UNITS) if units else 0, vfs=vfs,
                       vf_resource=vf_resource)


@dataclass(frozen=True)
class JointAllocate:
    """`scheduling.koordinator.sh/device-joint-allocate`: `{"deviceTypes": [...], "requiredScope": "SamePCIe"}`."""

    device_types: tuple[str, ...]
    required_scope: str = ""

    @property
    def same_pcie(self) -> bool:
        return self.required_scope == "SamePCIe"


def _json_object(annotations: Mapping[str, str], key: str) -> dict[str, Any] | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise RequestError(f"annotation {key} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise RequestError(f"annotation {key} must be a JSON object")
    return value


def joint_allocate(annotations: Mapping[str, str]) -> JointAllocate | None:
    value = _json_object(annotations, JOINT_ALLOCATE_ANNOTATION)
    if value is None:
        return None
    types = value.get("deviceTypes") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise RequestError(f"annotation {JOINT_ALLOCATE_ANNOTATION}: deviceTypes must be a list of device types")
    scope = value.get("requiredScope") or ""
    if scope not in ("", "SamePCIe"):
        raise RequestError(f"annotation {JOINT_ALLOCATE_ANNOTATION}: requiredScope must be SamePCIe, got {scope!r}")
    return JointAllocate(tuple(types), scope)


@dataclass(frozen=True)
class AllocateHint:
    """One device type's entry of `scheduling.koordinator.sh/device-allocate-hint` (§3.2). `vf_selector` is the
    VF group label selector (`{}` = any VF; None = no VF wanted, whole PFs)."""

    selector: Mapping[str, Any] | None = None
    vf_selector: Mapping[str, Any] | None = None
    allocate_strategy: str = ""
    required_topology_scope: str = ""
    exclusive_policy: str = ""

    @property
    def must_allocate_vf(self) -> bool:
        return self.vf_selector is not None


def allocate_hints(annotations: Mapping[str, str]) -> dict[str, AllocateHint]:
    value = _json_object(annotations, ALLOCATE_HINT_ANNOTATION)
    out: dict[str, AllocateHint] = {}
    for kind, hint in (value or {}).items():
        if not isinstance(hint, dict):
            raise RequestError(f"annotation {ALLOCATE_HINT_ANNOTATION}: {kind} must be a JSON object")
        out[kind] = AllocateHint(hint.get("selector"), hint.get("vfSelector"), str(hint.get("allocateStrategy") or ""),
                                 str(hint.get("requiredTopologyScope") or ""), str(hint.get("exclusivePolicy") or ""))
    return out


def pairing(annotations: Mapping[str, str], *, config: AdmissionConfig | None = None) -> str:
    """lahar's GPU ↔ RDMA pairing mode: "off", "same-pcie" or "one-to-one" (pod annotation `lahar.sh/rdma-pairing`,
    else the configuration; an unreadable value falls back to the configuration, as the webhook reports it)."""
    rdma = (config or AdmissionConfig()).devices.rdma
    raw = annotations.get(rdma.pairing_annotation)
    if raw is None:
        return str(rdma.pairing.value)
    value = raw.strip().lower()
    if value in ("true", "on"):
        return str(rdma.on_mode.value)
    if value in ("false", "off", ""):
        return "off"
    return value if value in ("same-pcie", "one-to-one") else str(rdma.pairing.value)


# --- everything ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceRequest:
    """Every device request of one pod (`parse`). Empty parts are 0 / None / ()."""

    gpus: int = 0
    volcano: VGPUPodRequest | None = None
    hami: VGPUPodRequest | None = None
    mig: tuple[MIGRequest, ...] = ()
    rdma: RDMARequest | None = None
    share: GPUShareRequest | None = None
    partition_spec: partitions.PartitionSpec | None = None
    joint: JointAllocate | None = None
    hints: Mapping[str, AllocateHint] = field(default_factory=dict)
    pairing: str = "off"
    errors: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.gpus or self.volcano or self.hami or self.mig or self.rdma or self.share)

    @property
    def must_allocate_vf(self) -> bool:
        hint = self.hints.get("rdma")
        return bool(hint and hint.must_allocate_vf) or bool(self.rdma and self.rdma.vfs)

    @property
    def same_pcie(self) -> bool:
        """GPUs and RDMA must share PCIe ids: Koordinator `requiredScope: SamePCIe`, or lahar pairing on."""
        return bool(self.joint and self.joint.same_pcie and "rdma" in self.joint.device_types) or \
            self.pairing in ("same-pcie", "one-to-one")


def with_group(request: DeviceRequest, pod: Mapping[str, Any]) -> DeviceRequest:
    """`request`, parsed from another pod of the same shape, for `pod`: its vGPU requests carry `pod`'s PodGroup
    name (the only thing `parse` reads that a pod shape leaves out)."""
    group = _annotations(pod).get(GROUP_NAME_ANNOTATION, "")
    volcano, hami = request.volcano, request.hami
    if volcano is not None and volcano.group != group:
        volcano = replace(volcano, group=group)
    if hami is not None and hami.group != group:
        hami = replace(hami, group=group)
    if volcano is request.volcano and hami is request.hami:
        return request
    return replace(request, volcano=volcano, hami=hami)


def parse(pod: Mapping[str, Any], *, config: AdmissionConfig | None = None) -> DeviceRequest:
    """All device requests of `pod`. Malformed Koordinator annotations do not raise: they are listed in
    `errors` (the webhook refuses them; a pod that got past it anyway is unschedulable with that message)."""
    config = config or AdmissionConfig()
    ann = _annotations(pod)
    errors: list[str] = []
    try:
        joint = joint_allocate(ann)
    except RequestError as e:
        joint, _ = None, errors.append(str(e))
    try:
        hints = allocate_hints(ann)
    except RequestError as e:
        hints, _ = {}, errors.append(str(e))
    vgpu = config.devices.vgpu
    share, share_whole, share_error = gpu_share(pod)
    if share_error:
        errors.append(share_error)
    try:
        partition_spec = partitions.spec(ann)
    except ValueError as e:
        partition_spec, _ = None, errors.append(str(e))
    return DeviceRequest(
        gpus=whole_gpus(pod, resources=config.devices.rdma.gpu_resources) + share_whole, share=share,
        partition_spec=partition_spec,
        volcano=vgpu_request(pod, "volcano", config=vgpu),
        hami=vgpu_request(pod, "hami", config=vgpu),
        mig=mig_requests(pod, prefix=config.devices.mig.resource_prefix),
        rdma=rdma_request(pod, config=config),
        joint=joint, hints=hints, pairing=pairing(ann, config=config), errors=tuple(errors))
