"""Hint generation against the kubelet's tables: cpumanager `topology_hints_test.go` (GetTopologyHints,
podGuaranteedCPUs, align-by-socket) and devicemanager `topology_hints_test.go` (getCommonTestCases, pod scope).

Upstream sorts hints before comparing; so do we. Hints are written "01T" = nodes {0,1}, preferred.
"""

from __future__ import annotations

import pytest

from lahar.scheduler.topology import TopologyHint, merge
from lahar.scheduler.topology.hints import (
    NUMAMemory,
    cpu_hints,
    cpu_provider,
    cpus_per_numa,
    device_hints,
    memory_hints,
    parse_cpuset,
    pod_request,
)


def hints(spec: str | None):
    if spec is None:
        return None
    return [TopologyHint(frozenset(int(c) for c in t[:-1]), t[-1] == "T") for t in spec.split()]


def ordered(hs):
    """`TopologyHint.LessThan` order: preferred first, then narrower (count, then numeric)."""
    if hs is None:
        return None
    return sorted(hs, key=lambda h: (not h.preferred, len(h.affinity), h.mask))


# --- CPU manager --------------------------------------------------------------------------------------------------

# returnMachineInfo: 2 NUMA nodes × 3 cores × 2 threads; node 0 = CPUs 0-2,6-8, node 1 = CPUs 3-5,9-11.
CPU_NUMA = {c: 0 for c in (0, 1, 2, 6, 7, 8)} | {c: 1 for c in (3, 4, 5, 9, 10, 11)}
CAPACITY = cpus_per_numa(CPU_NUMA, CPU_NUMA)

CPU_CASES = [
    ("request-2-four-free-on-0-six-on-1", 2, "2-11", None, "0T 1T 01F"),
    ("request-5-four-free-on-0-six-on-1", 5, "2-11", None, "1T 01F"),
    ("request-7-four-free-on-0-six-on-1", 7, "2-11", None, "01T"),
    ("request-11-four-free-on-0-six-on-1", 11, "2-11", None, ""),
    ("request-2-one-free-per-node", 2, "0,3", None, "01F"),
    ("request-more-than-available", 5, "0-3", None, ""),
    ("regenerate-single-node-hints-node-0", 2, "", "0,6", "0T 01F"),
    ("regenerate-single-node-hints-node-1", 2, "", "3,9", "1T 01F"),
    ("regenerate-cross-numa-hints", 11, "", "0-10", "01T"),
    ("requested-less-than-already-allocated", 2, "", "0,6,3,9", ""),
    ("requested-more-than-already-allocated", 11, "", "0,6,3,9", ""),
]


@pytest.mark.parametrize(("request_", "free", "assigned", "expected"), [pytest.param(*r[1:], id=r[0]) for r in CPU_CASES])
def test_cpu_manager_topology_hints(request_, free, assigned, expected):
    available = cpus_per_numa(parse_cpuset(free), CPU_NUMA)
    owned = cpus_per_numa(parse_cpuset(assigned), CPU_NUMA) if assigned else None
    got = cpu_provider(request_, CAPACITY, available, assigned=owned)
    assert ordered(got["cpu"]) == ordered(hints(expected))


def test_cpu_manager_no_integer_request_means_no_preference():
    assert cpu_provider(0, CAPACITY, CAPACITY) is None


def test_cpu_hints_come_in_kubelet_mask_order():
    got = cpu_hints(2, {0: 4, 1: 4, 2: 4}, {0: 4, 1: 4, 2: 4})
    assert [sorted(h.affinity) for h in got] == [[0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]]


def test_cpu_hints_reusable_cpus_pin_the_mask():
    # 1 CPU released by an init container on node 1: every hint must contain node 1.
    got = cpu_hints(2, {0: 4, 1: 4}, {0: 4, 1: 1}, reusable={1: 1})
    assert ordered(got) == ordered(hints("1T 01F"))


# topoDualSocketMultiNumaPerSocketHT: 2 sockets × 2 NUMA nodes × 20 CPUs (node n = CPUs 10n..10n+9, 40+10n..).
XEON_NUMA = {c: (c % 40) // 10 for c in range(80)}
XEON_SOCKET = {0: 0, 1: 0, 2: 1, 3: 1}
ALIGN_CASES = [
    ("align-by-socket-false", 2, "2,3,11", False, "0T 01F 02F 03F 012F 013F 023F 0123F"),
    ("align-by-socket-true-adds-socket-aligned", 2, "2,3,11", True, "0T 01T 02F 03F 012F 013F 023F 0123F"),
    ("align-by-socket-two-sockets-required", 41, "0-28,40-57", True, "012T 0123T"),
]


@pytest.mark.parametrize(("request_", "free", "align", "expected"), [pytest.param(*r[1:], id=r[0]) for r in ALIGN_CASES])
def test_cpu_hints_align_by_socket(request_, free, align, expected):
    capacity = cpus_per_numa(XEON_NUMA, XEON_NUMA)
    available = cpus_per_numa(parse_cpuset(free), XEON_NUMA)
    got = cpu_hints(request_, capacity, available, sockets=XEON_SOCKET, align_by_socket=align)
    assert ordered(got) == ordered(hints(expected))


# TestPodGuaranteedCPUs (Guaranteed pods; QoS itself is the caller's test): (init (cpus, sidecar)...), (app...).
POD_REQUESTS = [
    ("zero", [(0, False)], [0], 0),
    ("init-2-app-2", [(2, False)], [2], 2),
    ("init-5-app-5", [(5, False)], [5], 5),
    ("app-bigger-than-init", [(2, False)], [5], 5),
    ("init-bigger-than-app", [(5, False)], [2], 5),
    ("sum-of-app-containers", [(2, False), (4, False)], [2, 4], 6),
    ("sidecar-plus-app", [(1, True)], [1], 2),
    ("several-sidecars", [(5, False), (1, True), (2, True), (3, True)], [1], 7),
    ("sidecars-and-regular-init", [(5, False), (1, True), (2, True), (5, False), (3, True)], [1], 8),
    ("sidecar-regular-init-and-app", [(10, True), (200, False)], [100], 210),
]


@pytest.mark.parametrize(("init", "app", "expected"), [pytest.param(*r[1:], id=r[0]) for r in POD_REQUESTS])
def test_pod_request(init, app, expected):
    assert pod_request(init, app) == expected


def test_parse_cpuset():
    assert parse_cpuset("0-2,8,10-11") == [0, 1, 2, 8, 10, 11]
    assert parse_cpuset("") == []
    with pytest.raises(ValueError):
        parse_cpuset("3-1")


# --- device manager -----------------------------------------------------------------------------------------------

ONE_PER_NODE = {"Dev1": [0], "Dev2": [1]}
TWO_PER_NODE = {"Dev1": [0], "Dev2": [1], "Dev3": [0], "Dev4": [1]}
DEVICE_CASES = [
    ("single-request-no-alignment", 1, {"Dev1": None, "Dev2": None}, None, None),
    ("single-request-only-one-with-alignment", 1, {"Dev1": None, "Dev2": [1]}, None, "1T 01F"),
    ("single-request-one-device-per-node", 1, ONE_PER_NODE, None, "0T 1T 01F"),
    ("request-2-one-device-per-node", 2, ONE_PER_NODE, None, "01T"),
    ("request-2-two-devices-per-node", 2, TWO_PER_NODE, None, "0T 1T 01F"),
    ("request-2-forced-cross-numa", 2, TWO_PER_NODE, ["Dev1", "Dev2"], "01F"),
    ("more-requested-than-available", 6, {"Dev1": [0], "Dev2": [0], "Dev3": [1], "Dev4": [1]}, None, ""),
]


@pytest.mark.parametrize(("request_", "devices", "taken", "expected"), [pytest.param(*r[1:], id=r[0]) for r in DEVICE_CASES])
def test_device_manager_topology_hints(request_, devices, taken, expected):
    available = [d for d in devices if d not in (taken or [])]
    got = device_hints(request_, devices, available, [0, 1])
    assert ordered(got) == ordered(hints(expected))


ALLOCATED_CASES = [
    ("all-already-allocated-to-container", 2, {"Dev1": [0], "Dev2": [0]}, ["Dev1", "Dev2"], "0T 01F"),
    ("less-already-allocated-than-requested", 4, {"Dev1": [0], "Dev2": [0], "Dev3": [1], "Dev4": [1]},
     ["Dev1", "Dev2"], ""),
    ("more-already-allocated-than-requested", 2, {"Dev1": [0], "Dev2": [0], "Dev3": [1], "Dev4": [1]},
     ["Dev1", "Dev2", "Dev3", "Dev4"], ""),
]


@pytest.mark.parametrize(("request_", "devices", "allocated", "expected"),
                         [pytest.param(*r[1:], id=r[0]) for r in ALLOCATED_CASES])
def test_device_hints_regenerated_from_allocated_devices(request_, devices, allocated, expected):
    available = [d for d in devices if d not in allocated]
    got = device_hints(request_, devices, available, [0, 1], allocated=allocated)
    assert ordered(got) == ordered(hints(expected))


def test_two_device_types_mixed_configuration():
    provider = {
        "testdevice1": device_hints(2, TWO_PER_NODE, list(TWO_PER_NODE), [0, 1]),
        "testdevice2": device_hints(1, {"Dev1": [0]}, ["Dev1"], [0, 1]),
    }
    assert ordered(provider["testdevice1"]) == ordered(hints("0T 1T 01F"))
    assert ordered(provider["testdevice2"]) == ordered(hints("0T 01F"))
    assert merge("single-numa-node", [provider], [0, 1]) == (TopologyHint(frozenset({0}), True), True)


# getPodScopeTestCases: the pod's request per resource is computed first (limits of init and app containers).
POD_SCOPE_CASES = [
    ("two-device-types-app-containers-only", [], [2, 0], "0T 1T 01F"),
    ("two-device-types-init-and-app-containers", [(1, False), (1, False)], [1, 1], "0T 1T 01F"),
]


@pytest.mark.parametrize(("init", "app", "expected"), [pytest.param(*r[1:], id=r[0]) for r in POD_SCOPE_CASES])
def test_device_pod_scope_hints(init, app, expected):
    request_ = pod_request(init, app)
    got = device_hints(request_, TWO_PER_NODE, list(TWO_PER_NODE), [0, 1])
    assert ordered(got) == ordered(hints(expected))


def test_multi_numa_device_counts_for_every_mask_it_touches():
    devices = {"nic": [0, 1], "gpu": [1]}
    assert ordered(device_hints(2, devices, list(devices), [0, 1, 2])) == ordered(hints("1T 01F 12F 012F"))


# --- memory manager -----------------------------------------------------------------------------------------------

GI = 1 << 30


def node(free_gi: int, allocatable_gi: int = 10, cells=(), assignments=0, huge_gi: int = 0) -> NUMAMemory:
    allocatable = {"memory": allocatable_gi * GI, "hugepages-1Gi": huge_gi * GI}
    free = {"memory": free_gi * GI, "hugepages-1Gi": huge_gi * GI}
    return NUMAMemory(allocatable, free, tuple(cells), assignments)


MEMORY_CASES = [
    ("fits-on-either-node", {"memory": 5 * GI}, {0: node(10), 1: node(10)}, "0T 1T 01F"),
    ("needs-both-nodes", {"memory": 15 * GI}, {0: node(10), 1: node(10)}, "01T"),
    ("node-0-mostly-used", {"memory": 5 * GI}, {0: node(2), 1: node(10)}, "1T 01F"),
    ("nodes-bound-in-a-group", {"memory": 5 * GI},
     {0: node(8, cells=(0, 1), assignments=1), 1: node(8, cells=(0, 1), assignments=1)}, "01F"),
    ("single-node-assignment-blocks-groups", {"memory": 5 * GI},
     {0: node(8, cells=(0,), assignments=1), 1: node(10)}, "0T 1T"),
]


@pytest.mark.parametrize(("requests", "machine", "expected"), [pytest.param(*r[1:], id=r[0]) for r in MEMORY_CASES])
def test_memory_manager_hints(requests, machine, expected):
    got = memory_hints(requests, machine)
    assert list(got) == list(requests)
    assert ordered(got["memory"]) == ordered(hints(expected))


def test_memory_and_hugepages_get_the_same_hints():
    got = memory_hints({"memory": 1 * GI, "hugepages-1Gi": 2 * GI}, {0: node(10, huge_gi=1), 1: node(10, huge_gi=4)})
    assert ordered(got["memory"]) == ordered(got["hugepages-1Gi"]) == ordered(hints("1T 01F"))


def test_memory_that_fits_nowhere_is_absent_like_the_kubelet():
    assert memory_hints({"memory": 50 * GI}, {0: node(10), 1: node(10)}) == {}
