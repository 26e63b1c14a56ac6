"""Device request normalization and checks (`webhooks.devices`), one table per rule of spec/devices.md §4:
vGPU (§4.1, Volcano and HAMi names), MIG (§4.2, the §2.1 profile tables) and GPU + RDMA VF pairing (§4.3)."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from lahar.policies.admission import AdmissionConfig, DeviceConfig, MIGConfig, PairingMode, RDMAConfig, VGPUConfig
from lahar.webhooks import devices

CFG = AdmissionConfig()
V = "volcano.sh/vgpu-"
L = "/spec/containers/0/resources/limits/"


def pod(limits: dict | None = None, *, requests: dict | None = None, annotations: dict | None = None,
        node_selector: dict | None = None, **container: Any) -> dict:
    res: dict[str, Any] = {}
    if limits is not None:
        res["limits"] = limits
    if requests is not None:
        res["requests"] = requests
    c: dict[str, Any] = {"name": "main", "image": "cuda", **container}
    if res:
        c["resources"] = res
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [c]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def limits_after(p: dict, config: AdmissionConfig = CFG) -> dict:
    ops, _ = devices.normalize_pod(p, config=config)
    return jsonpatch.apply_patch(p, ops)["spec"]["containers"][0]["resources"].get("limits", {})


def errors(p: dict, config: AdmissionConfig = CFG) -> list[str]:
    return devices.check_pod_spec(p["spec"], config=config, annotations=p["metadata"].get("annotations"))


# --- vGPU normalization (§4.1) -------------------------------------------------------------------------------------

VGPU_NORMALIZE = [
    # Volcano names
    ("volcano: memory only gets number 1", {V + "memory": "1024"}, {V + "memory": "1024", V + "number": "1"}),
    ("volcano: number only is exclusive: cores 100", {V + "number": "2"}, {V + "number": "2", V + "cores": "100"}),
    ("volcano: number and memory unchanged", {V + "number": "1", V + "memory": "2048"},
     {V + "number": "1", V + "memory": "2048"}),
    ("volcano: percentage 100 is exclusive", {V + "number": "1", V + "memory-percentage": "100"},
     {V + "number": "1", V + "memory-percentage": "100", V + "cores": "100"}),
    ("volcano: percentage below 100 unchanged", {V + "number": "1", V + "memory-percentage": "50"},
     {V + "number": "1", V + "memory-percentage": "50"}),
    ("volcano: cores only gets number 1", {V + "cores": "30"}, {V + "cores": "30", V + "number": "1"}),
    ("volcano: percentage only gets number 1", {V + "memory-percentage": "25"},
     {V + "memory-percentage": "25", V + "number": "1"}),
    ("volcano: explicit cores kept", {V + "number": "1", V + "cores": "50"}, {V + "number": "1", V + "cores": "50"}),
    # HAMi names
    ("hami: gpumem without gpu gets gpu 1", {"nvidia.com/gpumem": "3000"},
     {"nvidia.com/gpumem": "3000", "nvidia.com/gpu": "1"}),
    ("hami: gpucores without gpu gets gpu 1", {"nvidia.com/gpucores": "20"},
     {"nvidia.com/gpucores": "20", "nvidia.com/gpu": "1"}),
    ("hami: gpu with gpumem unchanged", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}),
    ("hami: gpu with percentage 100 gets gpucores 100", {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"},
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100", "nvidia.com/gpucores": "100"}),
    ("hami: gpu with percentage 40 unchanged", {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "40"},
     {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "40"}),
    ("hami: a bare nvidia.com/gpu is a whole GPU (device plugin), untouched", {"nvidia.com/gpu": "1"},
     {"nvidia.com/gpu": "1"}),
    ("non-GPU container untouched", {"cpu": "1"}, {"cpu": "1"}),
]


@pytest.mark.parametrize(("limits", "expected"), [c[1:] for c in VGPU_NORMALIZE], ids=[c[0] for c in VGPU_NORMALIZE])
def test_vgpu_normalization(limits: dict, expected: dict) -> None:
    assert limits_after(pod(limits)) == expected


def test_hami_count_only_is_exclusive_when_hami_owns_the_count() -> None:
    vocab = tuple(v.model_copy(update={"count_only_is_vgpu": True}) if v.vendor == "hami" else v
                  for v in CFG.devices.vgpu.vocabularies)
    cfg = CFG.model_copy(update={"devices": DeviceConfig(vgpu=VGPUConfig(vocabularies=vocab))})
    assert limits_after(pod({"nvidia.com/gpu": "1"}), cfg) == {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}


def test_hami_count_with_vgpu_mode_annotation_is_a_vgpu_request() -> None:
    p = pod({"nvidia.com/gpu": "1"}, annotations={"nvidia.com/vgpu-mode": "hami-core"})
    assert limits_after(p) == {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}


def test_default_memory_applies_before_the_exclusive_rule() -> None:
    cfg = AdmissionConfig(devices=DeviceConfig(vgpu=VGPUConfig(default_memory=4096)))
    assert limits_after(pod({V + "number": "1"}), cfg) == {V + "number": "1", V + "memory": "4096"}


def test_requests_only_move_to_limits_and_stay_mirrored() -> None:
    p = pod(requests={V + "memory": "1024"})
    ops, _ = devices.normalize_pod(p, config=CFG)
    res = jsonpatch.apply_patch(p, ops)["spec"]["containers"][0]["resources"]
    assert res == {"limits": {V + "memory": "1024", V + "number": "1"},
                   "requests": {V + "memory": "1024", V + "number": "1"}}


def test_patch_ops_are_key_by_key_and_escaped() -> None:
    ops, warnings = devices.normalize_pod(pod({V + "memory": "1024"}), config=CFG)
    assert ops == [{"op": "add", "path": L + "volcano.sh~1vgpu-number", "value": "1"}]
    assert warnings == []


def test_container_without_resources_gets_a_resources_object() -> None:
    p = pod()
    p["spec"]["containers"][0]["resources"] = None
    assert devices.normalize_pod(p, config=CFG) == ([], [])


def test_init_containers_are_normalized_too() -> None:
    p = pod({"cpu": "1"})
    p["spec"]["initContainers"] = [{"name": "warm", "resources": {"limits": {V + "memory": "512"}}}]
    ops, _ = devices.normalize_pod(p, config=CFG)
    assert ops == [{"op": "add", "path": "/spec/initContainers/0/resources/limits/volcano.sh~1vgpu-number",
                    "value": "1"}]


def test_hami_priority_becomes_cuda_task_priority() -> None:
    p = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/priority": "0"})
    ops, _ = devices.normalize_pod(p, config=CFG)
    assert {"op": "add", "path": "/spec/containers/0/env", "value": [{"name": "CUDA_TASK_PRIORITY", "value": "0"}]} \
        in ops
    p["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    ops, _ = devices.normalize_pod(p, config=CFG)
    assert {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "CUDA_TASK_PRIORITY", "value": "0"}} \
        in ops


def test_invalid_requests_are_left_for_validation() -> None:
    assert devices.normalize_pod(pod({V + "memory": "1024", V + "cores": "150"}), config=CFG) == ([], [])


# --- vGPU rejections (§4.1) ----------------------------------------------------------------------------------------

C = 'container "main"'
VGPU_REJECT = [
    ("percentage above 100", pod({V + "number": "1", V + "memory-percentage": "101"}),
     [f"{C}: {V}memory-percentage is a percentage of GPU memory and must be an integer between 0 and 100, got 101"]),
    ("hami percentage below 0", pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "-5"}),
     [f"{C}: nvidia.com/gpumem-percentage is a percentage of GPU memory and must be an integer between 0 and 100, "
      "got -5"]),
    ("cores above 100", pod({"nvidia.com/gpucores": "120"}),
     [f"{C}: nvidia.com/gpucores is a percentage of GPU cores and must be an integer between 0 and 100, got 120"]),
    ("memory and percentage together", pod({V + "memory": "1024", V + "memory-percentage": "50"}),
     [f"{C}: {V}memory (1024 MiB) and {V}memory-percentage (50%) cannot be used together; request one of them"]),
    ("fractional memory", pod({"nvidia.com/gpumem": "1.5"}),
     [f"{C}: nvidia.com/gpumem must be a whole non-negative number of MiB, got 1500m"]),
    ("memory overflowing int32", pod({"nvidia.com/gpumem": "3000000000"}),
     [f"{C}: nvidia.com/gpumem 3000000000 MiB (x1) is larger than 2147483647"]),
    ("zero count with memory", pod({V + "number": "0", V + "memory": "100"}),
     [f"{C}: {V}number must be a whole number of GPUs >= 1, got 0"]),
    ("both vocabularies in one container", pod({V + "memory": "100", "nvidia.com/gpumem": "100"}),
     [f"{C} mixes volcano and hami vGPU resources; use one vocabulary"]),
    ("privileged vGPU container", pod({V + "memory": "100"}, securityContext={"privileged": True}),
     [f"{C} is privileged in a pod with vGPU requests; a privileged container bypasses vGPU memory and core limits"]),
    ("unknown vgpu-mode", pod({V + "memory": "100"}, annotations={"volcano.sh/vgpu-mode": "mps"}),
     ["annotation volcano.sh/vgpu-mode must be one of hami-core, mig, got 'mps'"]),
    ("valid request", pod({V + "number": "1", V + "memory": "1024", V + "cores": "30"}), []),
    ("privileged container without vGPU", pod({"nvidia.com/gpu": "1"}, securityContext={"privileged": True}), []),
]


@pytest.mark.parametrize(("p", "expected"), [c[1:] for c in VGPU_REJECT], ids=[c[0] for c in VGPU_REJECT])
def test_vgpu_rejections(p: dict, expected: list[str]) -> None:
    assert errors(p) == expected


def test_vgpu_pod_with_node_name_is_refused() -> None:
    p = pod({V + "memory": "100"})
    p["spec"]["nodeName"] = "n1"
    assert errors(p) == ["pod is already assigned to node 'n1'; vGPU devices are chosen by the scheduler, leave "
                         "spec.nodeName empty"]


# --- MIG (§4.2, tables of §2.1) ------------------------------------------------------------------------------------

A100_40 = {"nvidia.com/vgpu-mode": "mig", "nvidia.com/use-gputype": "A100-SXM4-40GB"}
MIG_NORMALIZE = [
    ("A100-40GB 3000 MiB → 1g.5gb", A100_40, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
     {"nvidia.com/mig-1g.5gb": "1"}),
    ("A100-40GB 4864 MiB (exactly 1g.5gb in NVML MiB) → 1g.5gb", A100_40,
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4864"}, {"nvidia.com/mig-1g.5gb": "1"}),
    ("A100-40GB 5120 MiB (the name's 5 GB, HAMi#1074) → 2g.10gb", A100_40,
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5120"}, {"nvidia.com/mig-2g.10gb": "1"}),
    ("A100-40GB 20 % (8192 MiB) → 2g.10gb", A100_40, {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "20"},
     {"nvidia.com/mig-2g.10gb": "1"}),
    ("A100-40GB 25 % (10240 MiB, above 2g.10gb's 9856) → 3g.20gb", A100_40,
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}, {"nvidia.com/mig-3g.20gb": "1"}),
    ("A100-40GB 40 % → 3g.20gb", A100_40, {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "40"},
     {"nvidia.com/mig-3g.20gb": "1"}),
    ("A100-40GB count only → 7g.40gb", A100_40, {"nvidia.com/gpu": "1"}, {"nvidia.com/mig-7g.40gb": "1"}),
    ("A100-80GB 12000 MiB → 2g.20gb", {"nvidia.com/vgpu-mode": "mig", "nvidia.com/use-gputype": "A100-SXM4-80GB"},
     {"nvidia.com/gpumem": "12000"}, {"nvidia.com/mig-2g.20gb": "1"}),
    ("H100-80GB 10240 MiB → 1g.10gb", {"nvidia.com/vgpu-mode": "mig", "nvidia.com/use-gputype": "NVIDIA H100 80GB HBM3"},
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"}, {"nvidia.com/mig-1g.10gb": "1"}),
    ("H200 40000 MiB → 3g.71gb", {"volcano.sh/vgpu-mode": "mig", "nvidia.com/use-gputype": "H200"},
     {V + "memory": "40000"}, {"nvidia.com/mig-3g.71gb": "1"}),
    ("volcano names, two devices", {"volcano.sh/vgpu-mode": "mig", "nvidia.com/use-gputype": "A100-PCIE-40GB"},
     {V + "number": "2", V + "memory": "8000"}, {"nvidia.com/mig-2g.10gb": "2"}),
    ("no MIG mode: plain vGPU", {"nvidia.com/use-gputype": "A100-SXM4-40GB"},
     {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}),
]


@pytest.mark.parametrize(("annotations", "limits", "expected"), [c[1:] for c in MIG_NORMALIZE],
                         ids=[c[0] for c in MIG_NORMALIZE])
def test_mig_memory_requests_become_the_smallest_allowed_profile(annotations: dict, limits: dict,
                                                                  expected: dict) -> None:
    assert limits_after(pod(limits, annotations=annotations)) == expected


def test_mig_model_from_the_node_selector() -> None:
    p = pod({"nvidia.com/gpumem": "9000"}, annotations={"nvidia.com/vgpu-mode": "mig"},
            node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    assert limits_after(p) == {"nvidia.com/mig-1g.10gb": "1"}


def test_mig_dynamic_strategy_keeps_the_request() -> None:
    cfg = AdmissionConfig(devices=DeviceConfig(mig=MIGConfig(strategy="dynamic")))
    p = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, annotations=A100_40)
    assert limits_after(p, cfg) == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
    big = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "50000"}, annotations=A100_40)
    assert errors(big, cfg)


def test_mig_unknown_model_is_left_with_a_warning() -> None:
    p = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, annotations={"nvidia.com/vgpu-mode": "mig"})
    ops, warnings = devices.normalize_pod(p, config=CFG)
    assert ops == []
    assert warnings == ['container "main" asks for a MIG device (nvidia.com/vgpu-mode: mig) without naming one GPU '
                        "model (nvidia.com/use-gputype or nodeSelector nvidia.com/gpu.product); the request is left "
                        "for the scheduler"]


MIG_REJECT = [
    ("memory above the largest allowed profile", pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "50000"},
                                                     annotations=A100_40),
     [f"{C} asks for 50000 MiB of GPU memory but the largest allowed MIG profile of A100-40GB, 7g.40gb, has 40192 "
      "MiB; it can never be scheduled"]),
    ("whole GPU and MIG device in one container", pod({"nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": "1"}),
     [f"{C} requests both whole GPUs (nvidia.com/gpu: 1) and a MIG device (nvidia.com/mig-1g.5gb: 1); request one "
      "or the other"]),
    ("two MIG profiles in one container", pod({"nvidia.com/mig-1g.5gb": "1", "nvidia.com/mig-2g.10gb": "1"}),
     [f"{C} requests 2 MIG profiles (nvidia.com/mig-1g.5gb, nvidia.com/mig-2g.10gb); a container sees only one MIG "
      "device type, request one profile"]),
    ("one MIG profile", pod({"nvidia.com/mig-3g.20gb": "1"}), []),
]


@pytest.mark.parametrize(("p", "expected"), [c[1:] for c in MIG_REJECT], ids=[c[0] for c in MIG_REJECT])
def test_mig_rejections(p: dict, expected: list[str]) -> None:
    assert errors(p) == expected


MIG_WARN = [
    ("two devices of one profile", pod({"nvidia.com/mig-1g.5gb": "2"}),
     [f"{C} requests 2 MIG devices (nvidia.com/mig-1g.5gb); CUDA uses one MIG device per process"]),
    ("malformed profile name", pod({"nvidia.com/mig-big": "1"}),
     [f"{C}: nvidia.com/mig-big is not a MIG profile name of the form <n>g.<m>gb"]),
    ("profile no model offers", pod({"nvidia.com/mig-1g.6gb": "1"}),
     [f"{C}: no configured GPU model offers MIG profile 1g.6gb; the pod can only run where a node advertises it"]),
    ("+me profile in its mixed-strategy spelling", pod({"nvidia.com/mig-1g.10gb.me": "1"}), []),
    ("MIG with fractional cores", pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
                                      annotations=A100_40),
     [f"{C}: nvidia.com/gpucores: 30 has no effect on a MIG device; its cores are fixed by the profile"]),
]


@pytest.mark.parametrize(("p", "expected"), [c[1:] for c in MIG_WARN], ids=[c[0] for c in MIG_WARN])
def test_mig_warnings(p: dict, expected: list[str]) -> None:
    assert devices.normalize_pod(p, config=CFG)[1] == expected


# --- RDMA VF pairing (§4.3) ----------------------------------------------------------------------------------------

JOINT = devices.JOINT_ALLOCATE_ANNOTATION
HINT = devices.ALLOCATE_HINT_ANNOTATION
JOINT_VALUE = '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'
HINT_VALUE = '{"rdma":{"vfSelector":{}}}'
PAIR = "lahar.sh/rdma-pairing"


def annotations_after(p: dict, config: AdmissionConfig = CFG) -> dict:
    ops, _ = devices.normalize_pod(p, config=config)
    return jsonpatch.apply_patch(p, ops)["metadata"].get("annotations", {})


ON = AdmissionConfig(devices=DeviceConfig(rdma=RDMAConfig(pairing=PairingMode.ONE_TO_ONE)))
RDMA_NORMALIZE = [
    ("pairing by annotation", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"}, {PAIR: "true"}, CFG,
     {PAIR: "true", JOINT: JOINT_VALUE, HINT: HINT_VALUE}),
    ("pairing by configuration", {"nvidia.com/gpu": "4", "koordinator.sh/rdma": "1"}, None, ON,
     {JOINT: JOINT_VALUE, HINT: HINT_VALUE}),
    ("sr-iov VF resource", {"nvidia.com/gpu": "2", "mellanox.com/mlnx_sriov_rdma": "2"}, {PAIR: "same-pcie"}, CFG,
     {PAIR: "same-pcie", JOINT: JOINT_VALUE, HINT: HINT_VALUE}),
    ("pairing off by annotation", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"}, {PAIR: "false"}, ON,
     {PAIR: "false"}),
    ("pairing off by default", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"}, None, CFG, {}),
    ("GPUs without RDMA", {"nvidia.com/gpu": "2"}, None, ON, {}),
    ("user's own joint annotation kept", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"},
     {PAIR: "true", JOINT: '{"deviceTypes":["gpu","rdma"]}'}, CFG,
     {PAIR: "true", JOINT: '{"deviceTypes":["gpu","rdma"]}', HINT: HINT_VALUE}),
]


@pytest.mark.parametrize(("limits", "ann", "config", "expected"), [c[1:] for c in RDMA_NORMALIZE],
                         ids=[c[0] for c in RDMA_NORMALIZE])
def test_rdma_pairing_annotations(limits: dict, ann: dict | None, config: AdmissionConfig, expected: dict) -> None:
    assert annotations_after(pod(limits, annotations=ann), config) == expected


def test_rdma_pairing_patch_creates_the_annotations_map() -> None:
    ops, _ = devices.normalize_pod(pod({"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"}), config=ON)
    assert ops == [{"op": "add", "path": "/metadata/annotations", "value": {JOINT: JOINT_VALUE, HINT: HINT_VALUE}}]


def test_rdma_requests_only_move_to_limits() -> None:
    p = pod(requests={"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"})
    ops, _ = devices.normalize_pod(p, config=CFG)
    res = jsonpatch.apply_patch(p, ops)["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"}


RDMA_REJECT = [
    ("more VFs than GPUs, one-to-one", {"nvidia.com/gpu": "2", "mellanox.com/mlnx_sriov_rdma": "4"}, {PAIR: "true"},
     ["pod requests 4 RDMA VFs but only 2 GPUs; one-to-one GPU-VF pairing allows at most one VF per GPU"]),
    ("more VFs than GPUs, koordinator units", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "300"}, {PAIR: "true"},
     ["pod requests 3 RDMA VFs but only 1 GPUs; one-to-one GPU-VF pairing allows at most one VF per GPU"]),
    ("more VFs than GPUs, same-pcie allows it", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "300"},
     {PAIR: "same-pcie"}, []),
    ("pairing without a GPU", {"koordinator.sh/rdma": "100"}, {PAIR: "one-to-one"},
     ["lahar.sh/rdma-pairing: one-to-one asks to pair GPUs with RDMA VFs but the pod requests no GPU"]),
    ("unknown pairing value", {"nvidia.com/gpu": "1"}, {PAIR: "always"},
     ["annotation lahar.sh/rdma-pairing must be one of true, false, off, same-pcie, one-to-one, got 'always'"]),
    ("koordinator rdma above 100, not a multiple", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "150"}, None,
     ["koordinator.sh/rdma: 150 is invalid: Koordinator counts 100 per device, so a value above 100 must be a "
      "multiple of 100"]),
    ("gpu-core alone", {"koordinator.sh/gpu-core": "50"}, None,
     ["koordinator.sh/gpu-core needs koordinator.sh/gpu-memory or koordinator.sh/gpu-memory-ratio with it"]),
    ("nvidia.com/gpu with gpu-memory-ratio", {"nvidia.com/gpu": "1", "koordinator.sh/gpu-memory-ratio": "50"}, None,
     ["nvidia.com/gpu cannot be combined with koordinator.sh/gpu-core, koordinator.sh/gpu-memory or "
      "koordinator.sh/gpu-memory-ratio"]),
    ("malformed joint annotation", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"}, {JOINT: "{nope"},
     ["annotation scheduling.koordinator.sh/device-joint-allocate is not valid JSON: Expecting property name "
      "enclosed in double quotes: line 1 column 2 (char 1)"]),
    ("joint annotation naming an unrequested type", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"},
     {JOINT: '{"deviceTypes":["gpu","fpga"]}'},
     ["annotation scheduling.koordinator.sh/device-joint-allocate lists device type fpga but the pod requests no "
      "fpga device"]),
    ("joint annotation with another scope", {"nvidia.com/gpu": "1", "koordinator.sh/rdma": "1"},
     {JOINT: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SameNUMA"}'},
     ["annotation scheduling.koordinator.sh/device-joint-allocate: requiredScope must be SamePCIe, got 'SameNUMA'"]),
    ("joint annotation without a GPU", {"koordinator.sh/rdma": "1"}, {JOINT: '{"deviceTypes":["rdma"]}'},
     ["annotation scheduling.koordinator.sh/device-joint-allocate asks for joint allocation but the pod requests no "
      "GPU"]),
    ("malformed allocate hint", {"nvidia.com/gpu": "1"}, {HINT: "[]"},
     ["annotation scheduling.koordinator.sh/device-allocate-hint must be a JSON object"]),
    ("valid pairing", {"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"}, {PAIR: "true"}, []),
]


@pytest.mark.parametrize(("limits", "ann", "expected"), [c[1:] for c in RDMA_REJECT], ids=[c[0] for c in RDMA_REJECT])
def test_rdma_rejections(limits: dict, ann: dict | None, expected: list[str]) -> None:
    assert errors(pod(limits, annotations=ann)) == expected


def test_rdma_counts_sum_over_containers() -> None:
    p = pod({"nvidia.com/gpu": "1", "mellanox.com/mlnx_sriov_rdma": "1"}, annotations={PAIR: "true"})
    p["spec"]["containers"].append({"name": "side", "resources": {"limits": {"mellanox.com/mlnx_sriov_rdma": "1"}}})
    assert errors(p) == ["pod requests 2 RDMA VFs but only 1 GPUs; one-to-one GPU-VF pairing allows at most one VF "
                         "per GPU"]


def test_normalized_pod_passes_validation() -> None:
    for p in (pod({V + "memory": "1024"}), pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
                                               annotations=A100_40),
              pod({"nvidia.com/gpu": "2", "koordinator.sh/rdma": "200"}, annotations={PAIR: "true"})):
        ops, _ = devices.normalize_pod(p, config=CFG)
        after = jsonpatch.apply_patch(p, ops)
        assert errors(after) == []


def test_task_template_check_signature() -> None:
    template_spec = {"containers": [{"name": "w", "resources": {"limits": {V + "cores": "101"}}}]}
    assert devices.check_pod_spec(template_spec, config=CFG) == [
        'container "w": volcano.sh/vgpu-cores is a percentage of GPU cores and must be an integer between 0 and 100, '
        "got 101"]
