"""`policies.admission.AdmissionConfig`: built-in defaults, loading Volcano's admission conf, field-path errors,
and the device tables of spec/devices.md §2.1."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
import yaml

from lahar.policies import AdmissionConfig
from lahar.policies.admission import GPUModel, MIGProfile, PairingMode

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"


def test_defaults() -> None:
    cfg = AdmissionConfig()
    assert cfg.scheduler_names == ("volcano",)
    assert cfg.default_queue == "default"
    assert cfg.max_queue_depth == 5
    assert (cfg.enable_queue_allocated_pods_check, cfg.enable_root_queue_protection) == (False, True)
    assert cfg.resource_groups == ()
    assert [v.vendor for v in cfg.devices.vgpu.vocabularies] == ["volcano", "hami"]
    assert cfg.devices.vgpu.default_gpu_num == 1 and cfg.devices.vgpu.exclusive_cores == 100
    assert cfg.devices.rdma.pairing is PairingMode.OFF
    assert [m.name for m in cfg.devices.mig.models] == ["A100-40GB", "A100-80GB", "H100-80GB", "H200"]


def test_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        AdmissionConfig().default_queue = "other"  # type: ignore[misc]


def test_volcano_admission_conf_example_loads() -> None:
    path = EXAMPLES / "scheduler-conf" / "volcano-admission.conf"
    if not path.exists():
        pytest.skip("Volcano examples not present")
    # the shipped file is all comments; uncomment it the way a user would
    text = "\n".join(line[1:] if line.startswith("#") else line for line in path.read_text().splitlines())
    cfg = AdmissionConfig.load(yaml.safe_load(text))
    assert [g.resource_group for g in cfg.resource_groups] == ["management", "cpu", "gpu"]
    mng, cpu, gpu = cfg.resource_groups
    assert (mng.object.key, mng.object.value, mng.scheduler_name) == ("namespace", ("mng-ns-1",), "default-scheduler")
    assert mng.tolerations == ({"effect": "NoSchedule", "key": "taint", "operator": "Exists"},)
    assert cpu.object.value == ("volcano.sh/resource-group: cpu",) and cpu.labels == {"volcano.sh/nodetype": "cpu"}
    assert gpu.object.key == "" and gpu.scheduler_name == "volcano"


def test_snake_case_also_loads() -> None:
    cfg = AdmissionConfig.load({"scheduler_names": ["volcano", "lahar"], "max_queue_depth": 3})
    assert cfg.scheduler_names == ("volcano", "lahar") and cfg.max_queue_depth == 3


@pytest.mark.parametrize(("data", "loc"), [
    ({"resourceGroups": [{"resourceGroup": "g", "colour": "red"}]}, ("resourceGroups", 0, "colour")),
    ({"resourceGroups": [{"resourceGroup": "g", "object": {"key": "label"}}]}, ("resourceGroups", 0, "object", "key")),
    ({"resourceGroups": [{"resourceGroup": "g", "affinity": "{not json"}]}, ("resourceGroups", 0, "affinity")),
    ({"resourceGroups": [{"object": {"key": "namespace"}}]}, ("resourceGroups", 0, "resourceGroup")),
    ({"schedulerNames": []}, ("schedulerNames",)),
    ({"maxQueueDepth": 0}, ("maxQueueDepth",)),
    ({"devices": {"mig": {"strategy": "single"}}}, ("devices", "mig", "strategy")),
    ({"devices": {"rdma": {"pairing": "sometimes"}}}, ("devices", "rdma", "pairing")),
    ({"devices": {"rdma": {"requiredScope": "SameNUMA"}}}, ("devices", "rdma", "requiredScope")),
    ({"devices": {"vgpu": {"exclusiveCores": 101}}}, ("devices", "vgpu", "exclusiveCores")),
], ids=["unknown field", "unknown object key", "affinity not JSON", "group name missing", "no scheduler names",
        "depth 0", "unknown MIG strategy", "unknown pairing mode", "unknown scope", "cores above 100"])
def test_errors_name_the_field(data: dict, loc: tuple) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        AdmissionConfig.load(data)
    assert info.value.errors()[0]["loc"] == loc


def test_affinity_is_decoded() -> None:
    cfg = AdmissionConfig.load({"resourceGroups": [{"resourceGroup": "g", "affinity": '{"nodeAffinity": {}}'}]})
    assert cfg.resource_groups[0].affinity_object() == {"nodeAffinity": {}}


# devices.md §2.1: (model, profile, slices, max instances, NVML MiB)
PROFILE_ROWS = [
    ("A100-40GB", "1g.5gb", 1, 7, 4864), ("A100-40GB", "2g.10gb", 2, 3, 9856), ("A100-40GB", "3g.20gb", 3, 2, 19968),
    ("A100-40GB", "7g.40gb", 7, 1, 40192), ("A100-80GB", "1g.10gb", 1, 7, 9856), ("A100-80GB", "7g.80gb", 7, 1, 80384),
    ("H100-80GB", "1g.10gb", 1, 7, 10240), ("H100-80GB", "3g.40gb", 3, 2, 40960), ("H100-80GB", "7g.80gb", 7, 1, 81920),
    ("H200", "1g.18gb", 1, 7, 18432), ("H200", "3g.71gb", 3, 2, 72704), ("H200", "7g.141gb", 7, 1, 144384),
]


@pytest.mark.parametrize(("model", "profile", "slices", "instances", "mib"), PROFILE_ROWS,
                         ids=[f"{r[0]} {r[1]}" for r in PROFILE_ROWS])
def test_mig_profile_tables(model: str, profile: str, slices: int, instances: int, mib: int) -> None:
    m = next(m for m in AdmissionConfig().devices.mig.models if m.name == model)
    p = m.profile(profile)
    assert p is not None and (p.slices, p.max_instances, p.memory_mib) == (slices, instances, mib)


@pytest.mark.parametrize(("product", "model"), [
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("NVIDIA-A100-PCIE-80GB", "A100-80GB"), ("NVIDIA H100 80GB HBM3", "H100-80GB"),
    ("NVIDIA H200", "H200"), ("A100", None), ("Tesla V100-PCIE-32GB", None),
], ids=["a100 40 sxm", "a100 80 pcie", "h100", "h200", "ambiguous", "not MIG-capable"])
def test_model_for_product_names(product: str, model: str | None) -> None:
    found = AdmissionConfig().devices.mig.model_for(product)
    assert (found.name if found else None) == model


def test_allowed_profiles_sorted_smallest_first() -> None:
    m = AdmissionConfig().devices.mig.models[0]
    assert [p.name for p in m.allowed_profiles()] == ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"]


def test_allowed_profile_must_be_in_the_table() -> None:
    with pytest.raises(pydantic.ValidationError, match="not in the profile table"):
        GPUModel(name="X", memory_mib=1, profiles=(MIGProfile(name="1g.1gb", slices=1, max_instances=1, memory_mib=1),),
                 allowed=("2g.2gb",))
