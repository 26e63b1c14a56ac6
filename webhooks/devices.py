"""Device request checks and normalization for pods and job task templates: vGPU, MIG, GPU + RDMA VF pairing.

Called by `/pods/mutate` (`normalize_pod`), `/pods/validate` and `/jobs/validate` (`check_pod_spec` on each task
template, so a bad job is refused before any pod exists). Pure functions over plain dicts; the rules and their
upstream evidence are `spec/devices.md` §4, the names and tables come from `AdmissionConfig.devices`.

What `normalize_pod` changes (JSON patch ops on the pod), per container (init containers too):
- vGPU, for each vocabulary (Volcano `volcano.sh/vgpu-*`, HAMi `nvidia.com/gpu|gpumem|gpumem-percentage|gpucores`):
  a vGPU resource given only in `requests` is copied to `limits` (Volcano reads limits only); memory,
  percentage or cores without a count gets the count `default_gpu_num` (1); with `default_memory` set, a
  request with neither memory nor percentage gets that memory; an exclusive request (count with percentage 100,
  or count with neither memory nor percentage) gets cores 100; HAMi's `nvidia.com/priority` becomes env
  `CUDA_TASK_PRIORITY`.
- MIG (`strategy: mixed`): a memory-style request (memory and/or percentage, or a bare count) in a pod that
  selects MIG mode (`<vocabulary>/vgpu-mode: mig`) and names one configured GPU model (annotation
  `nvidia.com/use-gputype` or nodeSelector `nvidia.com/gpu.product`) is replaced by
  `nvidia.com/mig-<profile>: <count>`, the smallest allowed profile whose NVML memory holds the request.
- RDMA: a pod requesting GPUs and RDMA VFs with pairing on (pod annotation `lahar.sh/rdma-pairing`, else the
  configuration) gets `scheduling.koordinator.sh/device-joint-allocate:
  {"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}` and, for VFs,
  `scheduling.koordinator.sh/device-allocate-hint: {"rdma":{"vfSelector":{}}}` unless the pod sets them.

What `check_pod_spec` refuses (each a message naming the container and the numbers): malformed or out-of-range
vGPU quantities (percentage and cores outside 0–100, memory not a whole non-negative MiB count or overflowing
int32, count not a whole number ≥ 1); memory together with memory percentage; a vGPU pod that is privileged or
already bound to a node; an unknown `vgpu-mode`; a whole GPU and a MIG device in one container; two MIG
profiles in one container; a MIG memory request larger than the largest allowed profile of its model; Koordinator
device quantities above 100 that are not multiples of 100 and its invalid combinations; a malformed
joint-allocate or allocate-hint annotation, one naming device types the pod does not request or a scope other
than SamePCIe; pairing demanded without a GPU; more VFs than GPUs under one-to-one pairing.
Warnings (from `normalize_pod`, also `device_warnings`): more than one MIG device per container, MIG cores
below 100, a MIG profile name no configured model offers, a MIG-mode request whose GPU model is unknown.
A well-formed pod spec that names no resource and carries no annotation any of these rules reads (most pods and
task templates) is answered at once — nothing to refuse, change or warn about — without running them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import quantity
from lahar.policies.admission import AdmissionConfig, GPUModel, PairingMode, VGPUNames
from lahar.webhooks.review import escape

__all__ = [
    "ALLOCATE_HINT_ANNOTATION",
    "JOINT_ALLOCATE_ANNOTATION",
    "PARTITION_SPEC_ANNOTATION",
    "check_pod_spec",
    "device_warnings",
    "normalize_pod",
    "pairing_mode",
]

JOINT_ALLOCATE_ANNOTATION = "scheduling.koordinator.sh/device-joint-allocate"
ALLOCATE_HINT_ANNOTATION = "scheduling.koordinator.sh/device-allocate-hint"
PARTITION_SPEC_ANNOTATION = "scheduling.koordinator.sh/gpu-partition-spec"
KOORD_GPU = "koordinator.sh/gpu"
KOORD_FPGA = "koordinator.sh/fpga"
KOORD_GPU_CORE = "koordinator.sh/gpu-core"
KOORD_GPU_MEMORY = "koordinator.sh/gpu-memory"
KOORD_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
KOORD_UNITS = 100
_KOORD_NAMES = frozenset({"koordinator.sh/rdma", KOORD_FPGA, KOORD_GPU, KOORD_GPU_CORE, KOORD_GPU_MEMORY,
                          KOORD_GPU_MEMORY_RATIO})
INT32_MAX = 2**31 - 1
CUDA_TASK_PRIORITY = "CUDA_TASK_PRIORITY"
_MIG_PROFILE_RE = re.compile(r"^(\d+c\.)?(\d+)g\.(\d+)gb([.+-](me|me\.all|gfx))?$")
_DEVICE_TYPES = ("gpu", "rdma", "fpga")


# --- reading a container's resources ---------------------------------------------------------------------------------


@dataclass
class _Container:
    path: str                      # JSON pointer of the container, e.g. /spec/containers/0
    obj: dict
    limits: dict = field(default_factory=dict)
    requests: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.obj.get("name") or self.path.rsplit("/", 1)[-1])

    def has(self, name: str) -> bool:
        return bool(name) and (name in self.limits or name in self.requests)

    def raw(self, name: str) -> Any:
        return self.limits[name] if name in self.limits else self.requests.get(name)


def _containers(spec: Mapping[str, Any], base: str = "/spec") -> Iterator[_Container]:
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or ()):
            if not isinstance(c, dict):
                continue
            res = c.get("resources") or {}
            yield _Container(f"{base}/{key}/{i}", c, dict(res.get("limits") or {}), dict(res.get("requests") or {}))


def _app_containers(spec: Mapping[str, Any]) -> Iterator[_Container]:
    return (c for c in _containers(spec) if "/containers/" in c.path)


def _number(value: Any) -> quantity.Quantity | None:
    try:
        return quantity.parse(value)
    except (quantity.QuantityError, TypeError, ValueError):
        return None


def _whole(value: Any) -> int | None:
    """The integer a quantity stands for, or None when it is malformed or fractional."""
    q = _number(value)
    if q is None or q.fraction.denominator != 1:
        return None
    return int(q.fraction)


def _show(value: Any) -> str:
    q = _number(value)
    return str(q) if q is not None else repr(value)


# --- vGPU ----------------------------------------------------------------------------------------------------------


def _vgpu_active(c: _Container, v: VGPUNames, annotations: Mapping[str, str]) -> bool:
    if any(c.has(n) for n in (v.memory, v.memory_percentage, v.cores)):
        return True
    if c.has(v.number):
        return v.count_only_is_vgpu or bool(v.mode_annotation and annotations.get(v.mode_annotation))
    return False


def _vgpu_errors(c: _Container, v: VGPUNames, config: AdmissionConfig) -> list[str]:
    errs: list[str] = []
    who = f'container "{c.name}"'
    factor = config.devices.vgpu.memory_factor
    if c.has(v.number):
        n = _whole(c.raw(v.number))
        if n is None or n < 1:
            errs.append(f"{who}: {v.number} must be a whole number of GPUs >= 1, got {_show(c.raw(v.number))}")
    if c.has(v.memory):
        m = _whole(c.raw(v.memory))
        if m is None or m < 0:
            errs.append(f"{who}: {v.memory} must be a whole non-negative number of MiB, got {_show(c.raw(v.memory))}")
        elif m * factor > INT32_MAX:
            errs.append(f"{who}: {v.memory} {m} MiB (x{factor}) is larger than {INT32_MAX}")
    for name, what in ((v.memory_percentage, "percentage of GPU memory"), (v.cores, "percentage of GPU cores")):
        if c.has(name):
            p = _whole(c.raw(name))
            if p is None or not 0 <= p <= 100:
                errs.append(f"{who}: {name} is a {what} and must be an integer between 0 and 100, "
                            f"got {_show(c.raw(name))}")
    if c.has(v.memory) and c.has(v.memory_percentage):
        errs.append(f"{who}: {v.memory} ({_show(c.raw(v.memory))} MiB) and {v.memory_percentage} "
                    f"({_show(c.raw(v.memory_percentage))}%) cannot be used together; request one of them")
    return errs


def _vgpu_target(c: _Container, v: VGPUNames, config: AdmissionConfig) -> tuple[dict, dict]:
    """The container's (limits, requests) after vGPU defaulting (only the names of vocabulary `v` change)."""
    vc = config.devices.vgpu
    limits, requests = dict(c.limits), dict(c.requests)
    for name in v.names():
        if name in requests and name not in limits:
            limits[name] = requests[name]
    mirror = any(n in requests for n in v.names())   # keep requests == limits for the names we add

    def put(name: str, value: int) -> None:
        limits[name] = str(value)
        if mirror:
            requests[name] = str(value)

    has_mem, has_pct = v.memory in limits, bool(v.memory_percentage) and v.memory_percentage in limits
    if v.number not in limits:
        put(v.number, vc.default_gpu_num)
    if vc.default_memory and not has_mem and not has_pct:
        put(v.memory, vc.default_memory)
        has_mem = True
    if v.cores and v.cores not in limits:
        pct = _whole(limits[v.memory_percentage]) if has_pct else None
        if (has_pct and pct == 100) or (not has_pct and not has_mem):
            put(v.cores, vc.exclusive_cores)
    return limits, requests


# --- MIG -----------------------------------------------------------------------------------------------------------


def _mig_model(spec: Mapping[str, Any], annotations: Mapping[str, str], config: AdmissionConfig) -> GPUModel | None:
    mig = config.devices.mig
    wanted = [t.strip() for t in str(annotations.get(mig.gpu_type_annotation) or "").split(",") if t.strip()]
    product = str((spec.get("nodeSelector") or {}).get(mig.product_label) or "")
    if product:
        wanted.append(product)
    models = {m.name: m for w in wanted if (m := mig.model_for(w)) is not None}
    return next(iter(models.values())) if len(models) == 1 else None


def _mig_mode(v: VGPUNames, annotations: Mapping[str, str]) -> bool:
    return bool(v.mode_annotation) and annotations.get(v.mode_annotation) == "mig"


@dataclass
class _MigChoice:
    profile: str | None            # chosen profile name, None when nothing fits
    request_mib: int
    count: int
    model: GPUModel


def _mig_choice(c: _Container, v: VGPUNames, model: GPUModel, config: AdmissionConfig) -> _MigChoice | None:
    """The profile a memory-style request maps to on `model` (None when the request is malformed)."""
    count = _whole(c.raw(v.number)) if c.has(v.number) else config.devices.vgpu.default_gpu_num
    if count is None or count < 1:
        return None
    if c.has(v.memory):
        mem = _whole(c.raw(v.memory))
        if mem is None or mem < 0:
            return None
        need = mem * config.devices.vgpu.memory_factor
    elif v.memory_percentage and c.has(v.memory_percentage):
        pct = _whole(c.raw(v.memory_percentage))
        if pct is None or not 0 <= pct <= 100:
            return None
        need = math.ceil(model.memory_mib * pct / 100)
    else:
        need = model.memory_mib  # count only: the whole GPU → the largest allowed profile
    allowed = model.allowed_profiles()
    if not c.has(v.memory) and not (v.memory_percentage and c.has(v.memory_percentage)):
        return _MigChoice(allowed[-1].name if allowed else None, need, count, model)
    hit = next((p for p in allowed if p.memory_mib >= need), None)
    return _MigChoice(hit.name if hit else None, need, count, model)


def _mig_resources(c: _Container, config: AdmissionConfig) -> list[str]:
    prefix = config.devices.mig.resource_prefix
    return sorted({n for n in (*c.limits, *c.requests) if n.startswith(prefix)})


def _mig_errors(c: _Container, config: AdmissionConfig, annotations: Mapping[str, str],
                model: GPUModel | None) -> list[str]:
    errs: list[str] = []
    who = f'container "{c.name}"'
    mig = config.devices.mig
    found = _mig_resources(c, config)
    if len(found) > 1:
        errs.append(f"{who} requests {len(found)} MIG profiles ({', '.join(found)}); a container sees only one "
                    "MIG device type, request one profile")
    whole = mig.whole_gpu_resource
    if found and c.has(whole) and (_number(c.raw(whole)) or quantity.Quantity()) > 0:
        errs.append(f"{who} requests both whole GPUs ({whole}: {_show(c.raw(whole))}) and a MIG device "
                    f"({found[0]}: {_show(c.raw(found[0]))}); request one or the other")
    if model is None:
        return errs
    for v in config.devices.vgpu.vocabularies:
        if not _mig_mode(v, annotations) or not _vgpu_active_any(c, v):
            continue
        choice = _mig_choice(c, v, model, config)
        if choice is not None and choice.profile is None:
            allowed = model.allowed_profiles()
            largest = f"{allowed[-1].name}, has {allowed[-1].memory_mib} MiB" if allowed else "none is allowed"
            errs.append(f"{who} asks for {choice.request_mib} MiB of GPU memory but the largest allowed MIG profile "
                        f"of {model.name}, {largest}; it can never be scheduled")
    return errs


def _vgpu_active_any(c: _Container, v: VGPUNames) -> bool:
    return any(c.has(n) for n in (v.number, v.memory, v.memory_percentage, v.cores))


def _mig_warnings(c: _Container, config: AdmissionConfig, annotations: Mapping[str, str],
                  model: GPUModel | None) -> list[str]:
    warns: list[str] = []
    who = f'container "{c.name}"'
    prefix = config.devices.mig.resource_prefix
    for name in _mig_resources(c, config):
        n = _whole(c.raw(name))
        if n is not None and n > 1:
            warns.append(f"{who} requests {n} MIG devices ({name}); CUDA uses one MIG device per process")
        profile = name[len(prefix):]
        if not _MIG_PROFILE_RE.match(profile):
            warns.append(f"{who}: {name} is not a MIG profile name of the form <n>g.<m>gb")
        elif not any(m.profile(profile) or m.profile(profile.replace(".me", "+me")) for m in
                     config.devices.mig.models):
            warns.append(f"{who}: no configured GPU model offers MIG profile {profile}; the pod can only run "
                         "where a node advertises it")
    for v in config.devices.vgpu.vocabularies:
        if not _mig_mode(v, annotations) or not _vgpu_active_any(c, v):
            continue
        if model is None:
            warns.append(f"{who} asks for a MIG device ({v.mode_annotation}: mig) without naming one GPU model "
                         f"({config.devices.mig.gpu_type_annotation} or nodeSelector "
                         f"{config.devices.mig.product_label}); the request is left for the scheduler")
        if v.cores and c.has(v.cores):
            cores = _whole(c.raw(v.cores))
            if cores is not None and cores < 100:
                warns.append(f"{who}: {v.cores}: {cores} has no effect on a MIG device; its cores are fixed by the "
                             "profile")
        n = _whole(c.raw(v.number)) if c.has(v.number) else None
        if n is not None and n > 1:
            warns.append(f"{who} asks for {n} MIG devices; CUDA uses one MIG device per process")
    return warns


# --- RDMA / Koordinator ------------------------------------------------------------------------------------------


def pairing_mode(annotations: Mapping[str, str] | None, config: AdmissionConfig) -> tuple[PairingMode, bool, str]:
    """(mode, demanded by the pod, error) from the pod annotation, else the configuration."""
    rdma = config.devices.rdma
    raw = (annotations or {}).get(rdma.pairing_annotation)
    if raw is None:
        return rdma.pairing, False, ""
    value = raw.strip().lower()
    if value in ("true", "on"):
        return rdma.on_mode, True, ""
    if value in ("false", "off", ""):
        return PairingMode.OFF, False, ""
    try:
        return PairingMode(value), True, ""
    except ValueError:
        return rdma.pairing, False, (f"annotation {rdma.pairing_annotation} must be one of true, false, off, "
                                     f"same-pcie, one-to-one, got {raw!r}")


@dataclass
class _PodDevices:
    gpus: int = 0
    vfs: int = 0
    fpgas: int = 0
    totals: dict[str, quantity.Quantity] = field(default_factory=dict)


def _pod_devices(spec: Mapping[str, Any], config: AdmissionConfig) -> _PodDevices:
    rdma = config.devices.rdma
    out = _PodDevices()
    counted = {*rdma.rdma_resources, *rdma.gpu_resources, *_KOORD_NAMES}
    for c in _app_containers(spec):
        for name in {*c.limits, *c.requests} & counted:
            q = _number(c.raw(name))
            if q is None:
                continue
            out.totals[name] = out.totals.get(name, quantity.Quantity()) + q
    for name, q in out.totals.items():
        v = math.ceil(q.fraction) if q > 0 else 0
        if name in rdma.rdma_resources:
            out.vfs += _koord_devices(v) if name == rdma.koordinator_rdma else v
        elif name in rdma.gpu_resources:
            out.gpus += _koord_devices(v) if name == KOORD_GPU else v
        elif name == KOORD_FPGA:
            out.fpgas += _koord_devices(v)
    return out


def _koord_devices(units: int) -> int:
    """Koordinator: a quantity up to 100 is one (possibly shared) device, 100·k is k devices."""
    if units <= 0:
        return 0
    return 1 if units <= KOORD_UNITS else units // KOORD_UNITS


def _koordinator_errors(devs: _PodDevices) -> list[str]:
    errs: list[str] = []
    t = devs.totals
    for name in ("koordinator.sh/rdma", KOORD_FPGA, KOORD_GPU, KOORD_GPU_CORE, KOORD_GPU_MEMORY_RATIO):
        q = t.get(name)
        if q is None:
            continue
        units = _whole(q)
        if units is None or units < 0 or (units > KOORD_UNITS and units % KOORD_UNITS):
            errs.append(f"{name}: {q} is invalid: Koordinator counts 100 per device, so a value above 100 must be a "
                        "multiple of 100")
    if KOORD_GPU_CORE in t and KOORD_GPU_MEMORY not in t and KOORD_GPU_MEMORY_RATIO not in t:
        errs.append(f"{KOORD_GPU_CORE} needs {KOORD_GPU_MEMORY} or {KOORD_GPU_MEMORY_RATIO} with it")
    if "nvidia.com/gpu" in t and any(n in t for n in (KOORD_GPU_CORE, KOORD_GPU_MEMORY, KOORD_GPU_MEMORY_RATIO)):
        errs.append(f"nvidia.com/gpu cannot be combined with {KOORD_GPU_CORE}, {KOORD_GPU_MEMORY} or "
                    f"{KOORD_GPU_MEMORY_RATIO}")
    if KOORD_GPU in t and KOORD_GPU_CORE in t:
        errs.append(f"{KOORD_GPU} cannot be combined with {KOORD_GPU_CORE}")
    return errs


def _joint_allocate_errors(raw: str, devs: _PodDevices) -> list[str]:
    key = JOINT_ALLOCATE_ANNOTATION
    try:
        value = json.loads(raw)
    except ValueError as e:
        return [f"annotation {key} is not valid JSON: {e}"]
    if not isinstance(value, dict):
        return [f"annotation {key} must be a JSON object"]
    errs: list[str] = []
    types = value.get("deviceTypes")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        errs.append(f"annotation {key}: deviceTypes must be a list of device types")
        types = []
    requested = {"gpu": devs.gpus, "rdma": devs.vfs, "fpga": devs.fpgas}
    for t in types:
        if t not in _DEVICE_TYPES:
            errs.append(f"annotation {key}: unknown device type {t!r} (known: {', '.join(_DEVICE_TYPES)})")
        elif not requested[t]:
            errs.append(f"annotation {key} lists device type {t} but the pod requests no {t} device")
    scope = value.get("requiredScope")
    if scope not in (None, "", "SamePCIe"):
        errs.append(f"annotation {key}: requiredScope must be SamePCIe, got {scope!r}")
    if not devs.gpus:
        errs.append(f"annotation {key} asks for joint allocation but the pod requests no GPU")
    return errs


def _partition_spec_errors(raw: str | None, key: str = PARTITION_SPEC_ANNOTATION) -> list[str]:
    """Koordinator's `gpu-partition-spec`: allocatePolicy Restricted | BestEffort, ringBusBandwidth a quantity."""
    try:
        value = json.loads(raw) if raw is not None else {}
    except ValueError as e:
        return [f"annotation {key} is not valid JSON: {e}"]
    if not isinstance(value, dict):
        return [f"annotation {key} must be a JSON object"]
    policy, bandwidth = value.get("allocatePolicy"), value.get("ringBusBandwidth")
    return ([f"annotation {key}: allocatePolicy must be Restricted or BestEffort, got {policy!r}"]
            if policy not in (None, "", "Restricted", "BestEffort") else []) + (
        [f"annotation {key}: ringBusBandwidth {bandwidth!r} is not a quantity"]
        if bandwidth is not None and _number(bandwidth) is None else [])


def _rdma_errors(spec: Mapping[str, Any], annotations: Mapping[str, str], config: AdmissionConfig) -> list[str]:
    devs = _pod_devices(spec, config)
    errs = _koordinator_errors(devs)
    mode, demanded, err = pairing_mode(annotations, config)
    if err:
        errs.append(err)
    joint = annotations.get(JOINT_ALLOCATE_ANNOTATION)
    if joint is not None:
        errs.extend(_joint_allocate_errors(joint, devs))
    hint = annotations.get(ALLOCATE_HINT_ANNOTATION)
    if hint is not None:
        try:
            if not isinstance(json.loads(hint), dict):
                errs.append(f"annotation {ALLOCATE_HINT_ANNOTATION} must be a JSON object")
        except ValueError as e:
            errs.append(f"annotation {ALLOCATE_HINT_ANNOTATION} is not valid JSON: {e}")
    errs.extend(_partition_spec_errors(annotations.get(PARTITION_SPEC_ANNOTATION)))
    if mode is PairingMode.OFF:
        return errs
    if demanded and not devs.gpus:
        errs.append(f"{config.devices.rdma.pairing_annotation}: {annotations.get(config.devices.rdma.pairing_annotation)}"
                    " asks to pair GPUs with RDMA VFs but the pod requests no GPU")
    if mode is PairingMode.ONE_TO_ONE and devs.gpus and devs.vfs > devs.gpus:
        errs.append(f"pod requests {devs.vfs} RDMA VFs but only {devs.gpus} GPUs; one-to-one GPU-VF pairing allows "
                    "at most one VF per GPU")
    return errs


# --- the device-free fast path ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Relevant:
    """What any device rule reads under one configuration: resource names, the MIG prefix, pod annotations."""

    names: frozenset[str]
    mig_prefix: str
    annotations: frozenset[str]


_RELEVANT: dict[int, tuple[AdmissionConfig, _Relevant]] = {}   # id(config) → (config, its _Relevant)


def _relevant(config: AdmissionConfig) -> _Relevant:
    hit = _RELEVANT.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    d = config.devices
    names = {n for v in d.vgpu.vocabularies for n in v.names()}
    names |= {d.mig.whole_gpu_resource, d.rdma.koordinator_rdma, *d.rdma.rdma_resources, *d.rdma.gpu_resources,
              *_KOORD_NAMES}
    annotations = {v.mode_annotation for v in d.vgpu.vocabularies}
    annotations |= {d.mig.gpu_type_annotation, d.rdma.pairing_annotation, JOINT_ALLOCATE_ANNOTATION,
                    ALLOCATE_HINT_ANNOTATION, PARTITION_SPEC_ANNOTATION}
    out = _Relevant(frozenset(names - {""}), d.mig.resource_prefix, frozenset(annotations - {""}))
    if len(_RELEVANT) >= 64:   # configurations change rarely; the entry keeps its config alive, so ids stay unique
        _RELEVANT.clear()
    _RELEVANT[id(config)] = (config, out)
    return out


def _device_free(spec: Any, rel: _Relevant) -> bool:
    """True when no container of a well-formed pod spec names a resource any device rule reads: then there is
    nothing to check or normalize. Anything unusual in its shape answers False (the full rules decide)."""
    if not isinstance(spec, dict):
        return False
    selector = spec.get("nodeSelector")
    if selector and not isinstance(selector, dict):
        return False
    names, prefix = rel.names, rel.mig_prefix
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if not items:
            continue
        if not isinstance(items, list):
            return False
        for c in items:
            if not isinstance(c, dict):
                continue
            res = c.get("resources")
            if not res:
                continue
            if not isinstance(res, dict):
                return False
            for part in (res.get("limits"), res.get("requests")):
                if not part:
                    continue
                if not isinstance(part, dict):
                    return False
                for name in part:
                    if type(name) is not str or name in names or name.startswith(prefix):
                        return False
    return True


# --- the public checks -----------------------------------------------------------------------------------------------


def check_pod_spec(spec: dict, *, config: AdmissionConfig, annotations: Mapping[str, str] | None = None) -> list[str]:
    """Denial messages for the device requests of a pod spec (a pod's `spec` or a task template's `spec`).

    `annotations` are the pod's (or the template's) annotations; they select vGPU/MIG modes and RDMA pairing.
    An empty list means nothing is wrong. Requests `normalize_pod` would fix (a missing count, requests without
    limits) are not errors.
    """
    ann = annotations or {}
    rel = _relevant(config)
    if isinstance(ann, dict) and rel.annotations.isdisjoint(ann) and _device_free(spec, rel):
        return []
    errs: list[str] = []
    vocabularies = config.devices.vgpu.vocabularies
    vc = config.devices.vgpu
    model = _mig_model(spec, ann, config)
    any_vgpu = False
    for c in _containers(spec):
        active = [v for v in vocabularies if _vgpu_active(c, v, ann)]
        if len(active) > 1:
            errs.append(f'container "{c.name}" mixes {" and ".join(v.vendor for v in active)} vGPU resources; '
                        "use one vocabulary")
        for v in active:
            any_vgpu = True
            errs.extend(_vgpu_errors(c, v, config))
        errs.extend(_mig_errors(c, config, ann, model))
    for v in vocabularies:
        mode = ann.get(v.mode_annotation) if v.mode_annotation else None
        if mode is not None and mode not in v.modes:
            errs.append(f"annotation {v.mode_annotation} must be one of {', '.join(v.modes)}, got {mode!r}")
    if any_vgpu:
        if vc.reject_privileged:
            for c in _containers(spec):
                if (c.obj.get("securityContext") or {}).get("privileged"):
                    errs.append(f'container "{c.name}" is privileged in a pod with vGPU requests; a privileged '
                                "container bypasses vGPU memory and core limits")
        if vc.reject_node_name and spec.get("nodeName"):
            errs.append(f"pod is already assigned to node {spec['nodeName']!r}; vGPU devices are chosen by the "
                        "scheduler, leave spec.nodeName empty")
    errs.extend(_rdma_errors(spec, ann, config))
    return errs


def device_warnings(spec: dict, *, config: AdmissionConfig, annotations: Mapping[str, str] | None = None) -> list[str]:
    """Warnings (not denials) about device requests: MIG counts above 1, MIG cores, unknown MIG profiles."""
    ann = annotations or {}
    return _warnings(list(_containers(spec)), config, ann, _mig_model(spec, ann, config))


def _warnings(containers: list[_Container], config: AdmissionConfig, ann: Mapping[str, str],
              model: GPUModel | None) -> list[str]:
    out: list[str] = []
    for c in containers:
        out.extend(_mig_warnings(c, config, ann, model))
    return out


# --- normalization -------------------------------------------------------------------------------------------------


def _resource_ops(c: _Container, limits: dict, requests: dict) -> list[dict]:
    """JSON patch ops turning the container's limits/requests into `limits`/`requests` (key by key)."""
    ops: list[dict] = []
    res = c.obj.get("resources")
    base = f"{c.path}/resources"
    if not isinstance(res, dict):
        value = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
        return [{"op": "add", "path": base, "value": value}] if value else []
    for key, new in (("limits", limits), ("requests", requests)):
        old = res.get(key)
        if not isinstance(old, dict):
            if new:
                ops.append({"op": "add", "path": f"{base}/{key}", "value": new})
            continue
        for name in old:
            if name not in new:
                ops.append({"op": "remove", "path": f"{base}/{key}/{escape(name)}"})
        for name, value in new.items():
            if name not in old or old[name] != value:
                ops.append({"op": "add", "path": f"{base}/{key}/{escape(name)}", "value": value})
    return ops


def _normalize_container(c: _Container, spec: Mapping[str, Any], ann: Mapping[str, str], config: AdmissionConfig,
                         model: GPUModel | None) -> list[dict]:
    limits, requests = dict(c.limits), dict(c.requests)
    mig = config.devices.mig
    env_ops: list[dict] = []
    for v in config.devices.vgpu.vocabularies:
        if not _vgpu_active(c, v, ann) or _vgpu_errors(c, v, config):
            continue
        if model is not None and mig.strategy == "mixed" and _mig_mode(v, ann):
            choice = _mig_choice(c, v, model, config)
            if choice is None or choice.profile is None:
                continue
            for name in v.names():
                if name != v.priority:
                    limits.pop(name, None)
                    requests.pop(name, None)
            resource = mig.resource_prefix + choice.profile.replace("+", ".")
            limits[resource] = str(choice.count)
            if requests:
                requests[resource] = str(choice.count)
            continue
        scratch = _Container(c.path, c.obj, limits, requests)
        limits, requests = _vgpu_target(scratch, v, config)
        if v.priority and v.priority in limits:
            env = c.obj.get("env")
            if not any(isinstance(e, dict) and e.get("name") == CUDA_TASK_PRIORITY for e in env or ()):
                item = {"name": CUDA_TASK_PRIORITY, "value": _show(limits[v.priority])}
                env_ops.append({"op": "add", "path": f"{c.path}/env/-", "value": item} if env
                               else {"op": "add", "path": f"{c.path}/env", "value": [item]})
    # Other device resources (MIG, RDMA, Koordinator) given only as requests: limits are where they are read.
    rdma = config.devices.rdma
    for name in list(requests):
        if name not in limits and (name.startswith(mig.resource_prefix) or name in rdma.rdma_resources
                                   or name in rdma.gpu_resources):
            limits[name] = requests[name]
    return _resource_ops(c, limits, requests) + env_ops


def _annotation_ops(pod: Mapping[str, Any], wanted: Mapping[str, str]) -> list[dict]:
    annotations = (pod.get("metadata") or {}).get("annotations")
    if not wanted:
        return []
    if not isinstance(annotations, dict):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(wanted)}]
    return [{"op": "add", "path": f"/metadata/annotations/{escape(k)}", "value": v} for k, v in wanted.items()]


def _pairing_annotations(spec: Mapping[str, Any], ann: Mapping[str, str], config: AdmissionConfig) -> dict[str, str]:
    mode, _, err = pairing_mode(ann, config)
    if err or mode is PairingMode.OFF:
        return {}
    devs = _pod_devices(spec, config)
    if not devs.gpus or not devs.vfs:
        return {}
    if mode is PairingMode.ONE_TO_ONE and devs.vfs > devs.gpus:
        return {}
    rdma = config.devices.rdma
    out: dict[str, str] = {}
    if JOINT_ALLOCATE_ANNOTATION not in ann:
        joint: dict[str, Any] = {"deviceTypes": ["gpu", "rdma"]}
        if rdma.required_scope:
            joint["requiredScope"] = rdma.required_scope
        out[JOINT_ALLOCATE_ANNOTATION] = json.dumps(joint, separators=(",", ":"))
    if rdma.allocate_vf and ALLOCATE_HINT_ANNOTATION not in ann:
        out[ALLOCATE_HINT_ANNOTATION] = json.dumps({"rdma": {"vfSelector": {}}}, separators=(",", ":"))
    return out


def normalize_pod(pod: dict, *, config: AdmissionConfig) -> tuple[list[dict], list[str]]:
    """(JSON patch ops, warnings) normalizing the pod's device requests; the pod itself is not changed.

    Containers whose requests `check_pod_spec` would refuse are left as they are (validation denies them).
    """
    spec = pod.get("spec") or {}
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    rel = _relevant(config)
    if isinstance(ann, dict) and rel.annotations.isdisjoint(ann) and _device_free(spec, rel):
        return [], []
    model = _mig_model(spec, ann, config)
    containers = list(_containers(spec))
    ops: list[dict] = []
    for c in containers:
        ops.extend(_normalize_container(c, spec, ann, config, model))
    ops.extend(_annotation_ops(pod, _pairing_annotations(spec, ann, config)))
    return ops, _warnings(containers, config, ann, model)
