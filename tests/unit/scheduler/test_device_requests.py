"""scheduler.devices.requests: a pod's device requests read as Volcano, HAMi and Koordinator read them."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.devices import requests


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), annotations: dict[str, str] | None = None,
        ) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}}, "spec": spec}


def c(name: str = "c", *, limits: dict[str, Any] | None = None, requests_: dict[str, Any] | None = None,
      ) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": limits or {}, "requests": requests_ or {}}}


# (id, pod, vendor, expected per container: (count, memory, percentage, cores, count_only) or None for no request)
VGPU_CASES = [
    ("volcano-number-memory", pod(c(limits={"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 3000})),
     "volcano", [(2, 3000, None, 0, False)]),
    ("volcano-memory-only-is-one-gpu", pod(c(limits={"volcano.sh/vgpu-memory": "1024"})),
     "volcano", [(1, 1024, None, 0, False)]),
    ("volcano-count-only-is-100-percent", pod(c(limits={"volcano.sh/vgpu-number": 1})),
     "volcano", [(1, 0, 100, 0, False)]),
    ("volcano-cores-only-ignored", pod(c(limits={"volcano.sh/vgpu-cores": 50})), "volcano", None),
    ("volcano-requests-only-ignored", pod(c(requests_={"volcano.sh/vgpu-number": 1})), "volcano", None),
    ("volcano-percentage", pod(c(limits={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory-percentage": 50,
                                         "volcano.sh/vgpu-cores": 30})),
     "volcano", [(1, 0, 50, 30, False)]),
    ("volcano-init-containers-ignored", pod(c(), init=(c(limits={"volcano.sh/vgpu-number": 1}),)), "volcano", None),
    ("hami-count-only-exclusive", pod(c(limits={"nvidia.com/gpu": 1})), "hami", [(1, 0, 100, 100, True)]),
    ("hami-memory-no-cores", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})),
     "hami", [(1, 3000, None, 0, False)]),
    ("hami-memory-without-count-defaults-to-one", pod(c(limits={"nvidia.com/gpumem": 3000})),
     "hami", [(1, 3000, None, 0, False)]),
    ("hami-requests-read-when-no-limits", pod(c(requests_={"nvidia.com/gpu": 2, "nvidia.com/gpucores": 30})),
     "hami", [(2, 0, 100, 30, False)]),
    ("hami-percentage-100-is-exclusive", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100})),
     "hami", [(1, 0, 100, 100, False)]),
    ("hami-percentage-clamped", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 150,
                                              "nvidia.com/gpucores": 20})),
     "hami", [(1, 0, 100, 20, False)]),
    ("hami-cores-clamped", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10, "nvidia.com/gpucores": 150})),
     "hami", [(1, 10, None, 100, False)]),
    ("hami-negative-memory-drops-container", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": -5})),
     "hami", None),
    ("hami-init-and-app", pod(c("app", limits={"nvidia.com/gpumem": 1000}),
                              init=(c("init", limits={"nvidia.com/gpumem": 2000}),)),
     "hami", [(1, 2000, None, 0, False), (1, 1000, None, 0, False)]),
]


@pytest.mark.parametrize(("the_pod", "vendor", "expected"), [x[1:] for x in VGPU_CASES], ids=[x[0] for x in VGPU_CASES])
def test_vgpu_request(the_pod: dict[str, Any], vendor: str, expected: list[tuple] | None) -> None:
    got = requests.vgpu_request(the_pod, vendor)
    if expected is None:
        assert got is None
        return
    assert got is not None and got.vendor == vendor
    assert [(r.count, r.memory_mib, r.memory_percentage, r.cores, r.count_only) for r in got.containers] == expected


def test_hami_container_index_counts_init_containers() -> None:
    got = requests.vgpu_request(pod(c("a"), c("b", limits={"nvidia.com/gpumem": 10}), init=(c("i"),)), "hami")
    assert got is not None and [r.container for r in got.containers] == [2] and got.container_count == 3


MEMORY_ON = [
    ("hami-memory-wins", "hami", 3000, 50, 3000),
    ("volcano-percentage-wins", "volcano", 3000, 50, 8000),
    ("hami-percentage-when-no-memory", "hami", 0, 25, 4000),
    ("memory-only", "volcano", 1234, None, 1234),
]


@pytest.mark.parametrize(("vendor", "memory", "pct", "expected"), [x[1:] for x in MEMORY_ON],
                         ids=[x[0] for x in MEMORY_ON])
def test_memory_precedence(vendor: str, memory: int, pct: int | None, expected: int) -> None:
    r = requests.VGPURequest(0, "c", vendor, 1, memory, pct)
    assert r.memory_on(16000) == expected


FILTERS = [
    ("no-constraint", "hami", {}, "NVIDIA-Tesla T4", "GPU-1", True),
    ("use-type-substring-case-insensitive", "hami", {"nvidia.com/use-gputype": "t4,a10"}, "NVIDIA-Tesla T4",
     "GPU-1", True),
    ("use-type-miss", "hami", {"nvidia.com/use-gputype": "A100"}, "NVIDIA-Tesla T4", "GPU-1", False),
    ("hami-nouse-applies-after-use", "hami", {"nvidia.com/use-gputype": "Tesla", "nvidia.com/nouse-gputype": "T4"},
     "NVIDIA-Tesla T4", "GPU-1", False),
    ("volcano-ignores-nouse-when-use", "volcano",
     {"nvidia.com/use-gputype": "Tesla", "nvidia.com/nouse-gputype": "T4"}, "NVIDIA-Tesla T4", "GPU-1", True),
    ("nouse-type", "volcano", {"nvidia.com/nouse-gputype": "t4"}, "NVIDIA-Tesla T4", "GPU-1", False),
    ("hami-use-uuid", "hami", {"nvidia.com/use-gpuuuid": " GPU-2 , GPU-1"}, "T4", "GPU-1", True),
    ("hami-use-uuid-miss", "hami", {"nvidia.com/use-gpuuuid": "GPU-2"}, "T4", "GPU-1", False),
    ("volcano-deny-wins", "volcano", {"volcano.sh/vgpu-use-gpuuuid": "GPU-1", "volcano.sh/vgpu-nouse-gpuuuid": "GPU-1"},
     "T4", "GPU-1", False),
    ("volcano-reads-its-own-uuid-keys", "volcano", {"nvidia.com/use-gpuuuid": "GPU-2"}, "T4", "GPU-1", True),
    ("empty-value-no-constraint", "hami", {"nvidia.com/use-gpuuuid": ""}, "T4", "GPU-1", True),
]


@pytest.mark.parametrize(("vendor", "annotations", "card_type", "uuid", "allowed"), [x[1:] for x in FILTERS],
                         ids=[x[0] for x in FILTERS])
def test_filters(vendor: str, annotations: dict[str, str], card_type: str, uuid: str, allowed: bool) -> None:
    assert requests.filters(annotations, vendor).allows(card_type, uuid) is allowed


WHOLE = [
    ("nvidia-gpu", pod(c(limits={"nvidia.com/gpu": 8})), 8),
    ("sum-of-app-containers", pod(c("a", limits={"nvidia.com/gpu": 2}), c("b", limits={"nvidia.com/gpu": 1})), 3),
    ("init-peak", pod(c(limits={"nvidia.com/gpu": 1}), init=(c("i", limits={"nvidia.com/gpu": 4}),)), 4),
    ("hami-memory-is-not-whole", pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10})), 0),
    ("koordinator-gpu-200", pod(c(limits={"koordinator.sh/gpu": 200})), 2),
    ("koordinator-gpu-50-is-a-share-not-whole", pod(c(limits={"koordinator.sh/gpu": 50})), 0),
    ("none", pod(c(limits={"cpu": "1"})), 0),
]


@pytest.mark.parametrize(("the_pod", "expected"), [x[1:] for x in WHOLE], ids=[x[0] for x in WHOLE])
def test_whole_gpus(the_pod: dict[str, Any], expected: int) -> None:
    assert requests.whole_gpus(the_pod) == expected


def test_mig_requests_profile_names() -> None:
    got = requests.mig_requests(pod(c(limits={"nvidia.com/mig-1g.10gb": 1}),
                                    c("b", limits={"nvidia.com/mig-1g.10gb.me": 2})))
    assert [(m.resource, m.profile, m.count, m.container) for m in got] == [
        ("nvidia.com/mig-1g.10gb", "1g.10gb", 1, 0), ("nvidia.com/mig-1g.10gb.me", "1g.10gb+me", 2, 1)]


RDMA = [
    ("koordinator-100-is-one-device", {"koordinator.sh/rdma": 100}, (1, 100, 0)),
    ("koordinator-1-is-one-device-of-1-unit", {"koordinator.sh/rdma": 1}, (1, 1, 0)),
    ("koordinator-800-is-eight", {"koordinator.sh/rdma": 800}, (8, 100, 0)),
    ("sriov-vfs", {"nvidia.com/rdma_vf": 8}, (0, 0, 8)),
]


@pytest.mark.parametrize(("limits", "expected"), [x[1:] for x in RDMA], ids=[x[0] for x in RDMA])
def test_rdma_request(limits: dict[str, Any], expected: tuple[int, int, int]) -> None:
    got = requests.rdma_request(pod(c(limits=limits)))
    assert got is not None and (got.devices, got.units, got.vfs) == expected
    assert got.count == max(expected[0], expected[2])


def test_parse_joint_allocation_pod() -> None:
    ann = {requests.JOINT_ALLOCATE_ANNOTATION: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}',
           requests.ALLOCATE_HINT_ANNOTATION: '{"rdma":{"vfSelector":{}}}'}
    got = requests.parse(pod(c(limits={"nvidia.com/gpu": 8, "nvidia.com/rdma_vf": 8}), annotations=ann))
    assert got.gpus == 8 and got.rdma == requests.RDMARequest(vfs=8, vf_resource="nvidia.com/rdma_vf")
    assert got.joint == requests.JointAllocate(("gpu", "rdma"), "SamePCIe")
    assert got.must_allocate_vf and got.same_pcie and not got.errors
    assert got.hami is not None and got.hami.containers[0].count_only  # on a HAMi node it is an exclusive slice


def test_parse_without_pairing_is_not_same_pcie() -> None:
    got = requests.parse(pod(c(limits={"nvidia.com/gpu": 1, "koordinator.sh/rdma": 100})))
    assert not got.same_pcie and not got.must_allocate_vf and got.pairing == "off"


@pytest.mark.parametrize(("value", "mode"), [("true", "one-to-one"), ("same-pcie", "same-pcie"), ("off", "off"),
                                              ("bogus", "off")], ids=["true", "same-pcie", "off", "bogus"])
def test_pairing_annotation(value: str, mode: str) -> None:
    got = requests.parse(pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/rdma_vf": 1}),
                             annotations={"lahar.sh/rdma-pairing": value}))
    assert got.pairing == mode and got.same_pcie is (mode != "off")


BAD = [
    ("joint-not-json", {requests.JOINT_ALLOCATE_ANNOTATION: "{"}, "is not valid JSON"),
    ("joint-scope", {requests.JOINT_ALLOCATE_ANNOTATION: '{"deviceTypes":["gpu"],"requiredScope":"NUMA"}'},
     "requiredScope must be SamePCIe"),
    ("hint-not-object", {requests.ALLOCATE_HINT_ANNOTATION: "[]"}, "must be a JSON object"),
]


@pytest.mark.parametrize(("annotations", "message"), [x[1:] for x in BAD], ids=[x[0] for x in BAD])
def test_malformed_annotations_are_errors_not_exceptions(annotations: dict[str, str], message: str) -> None:
    got = requests.parse(pod(c(limits={"nvidia.com/gpu": 1}), annotations=annotations))
    assert len(got.errors) == 1 and message in got.errors[0]


def test_steering_annotations() -> None:
    got = requests.vgpu_request(pod(c(limits={"nvidia.com/gpumem": 10}), annotations={
        "nvidia.com/numa-bind": "true", "hami.io/gpu-scheduler-policy": "binpack", "nvidia.com/vgpu-mode": "mig"}),
        "hami")
    assert got is not None and got.numa_bind and got.gpu_policy == "binpack" and got.mode == "mig"
    v = requests.vgpu_request(pod(c(limits={"volcano.sh/vgpu-number": 1}), annotations={
        "volcano.sh/vgpu-podgroup-policy": "spread", "scheduling.k8s.io/group-name": "pg"}), "volcano")
    assert v is not None and v.podgroup_spread and v.group == "pg"
