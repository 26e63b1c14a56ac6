"""The structured-parameters allocator (scheduler/devices/dra.py) as tables: which devices a node's ResourceSlices
give a pod's claims. Rows follow k8s.io/dynamic-resource-allocation structured allocator_test.go (simple,
other-node, small-and-large backtracking, all-devices, obsolete-slice, invalid and runtime CEL), in our words."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.devices import dra

DRIVER = "gpu.example.com"
CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
CLASSES = {"gpu": CLASS, "any": {"metadata": {"name": "any"}, "spec": {}},
           "broken": {"metadata": {"name": "broken"},
                      "spec": {"selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].healthy'}}]}}}


def dev(name: str, *, model: str = "a100", memory: str = "40Gi", **attrs: Any) -> dict[str, Any]:
    attributes = {"model": {"string": model}, **{k: {"bool": v} if isinstance(v, bool) else {"int": v}
                                                 for k, v in attrs.items()}}
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def slice_(*devices: dict[str, Any], node: str = "n1", pool: str = "", generation: int = 1,
           driver: str = DRIVER, **where: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or "shared", "generation": generation,
                                                       "resourceSliceCount": 1}, "devices": list(devices)}
    if where:
        spec.update(where)
    elif node:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{pool or node}-{generation}"}, "spec": spec}


def req(name: str = "req-0", cls: str = "gpu", *, count: int | None = None, mode: str | None = None,
        cel: tuple[str, ...] = ()) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if cel:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in cel]
    return {"name": name, "exactly": exactly}


def claim(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "spec": {"devices": {"requests": list(requests), **devices}}}


def got(result: list[list[dict[str, str]]] | str) -> list[list[str]] | str:
    return result if isinstance(result, str) else [[f"{r['request']}:{r['device']}" for r in c] for c in result]


TWO = slice_(dev("gpu-0"), dev("gpu-1"))
ALLOCATE: list[dict[str, Any]] = [
    dict(id="simple", claims=[claim(req())], slices=[TWO], want=[["req-0:gpu-0"]]),
    dict(id="other-node", claims=[claim(req())], slices=[slice_(dev("gpu-0"), node="n2")],
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 0 matching free"),
    dict(id="no-slices", claims=[claim(req())], slices=[],
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 0 matching free"),
    dict(id="unknown-class", claims=[claim(req(cls="nope"))], slices=[TWO],
         want="claim claim-0, request req-0: device class nope does not exist"),
    dict(id="count-two", claims=[claim(req(count=2))], slices=[TWO], want=[["req-0:gpu-0", "req-0:gpu-1"]]),
    dict(id="not-enough-devices", claims=[claim(req(count=3))], slices=[TWO],
         want="claim claim-0, request req-0: needs 3 device(s), 2 of 2 matching free"),
    dict(id="already-allocated", claims=[claim(req())], slices=[TWO], allocated={(DRIVER, "n1", "gpu-0")},
         want=[["req-0:gpu-1"]]),
    dict(id="all-allocated", claims=[claim(req())], slices=[TWO],
         allocated={(DRIVER, "n1", "gpu-0"), (DRIVER, "n1", "gpu-1")},
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 2 matching free"),
    dict(id="two-claims-two-devices", claims=[claim(req()), claim(req())], slices=[TWO],
         want=[["req-0:gpu-0"], ["req-0:gpu-1"]]),
    dict(id="two-claims-one-device", claims=[claim(req()), claim(req())], slices=[slice_(dev("gpu-0"))],
         want="requests claim-0/req-0, claim-1/req-0: not enough distinct free devices for all of them"),
    # the first request takes any device, the second only a large one: the first must give the large one back
    dict(id="small-and-large-backtrack-requests",
         claims=[claim(req("small", "any"), req("large", "any", cel=(
             f'device.capacity["{DRIVER}"].memory.compareTo(quantity("30Gi")) >= 0',)))],
         slices=[slice_(dev("big", memory="40Gi"), dev("small", memory="8Gi"))],
         want=[["small:small", "large:big"]]),
    dict(id="class-selector-filters-driver", claims=[claim(req())],
         slices=[slice_(dev("nic-0"), driver="nic.example.com"), TWO], want=[["req-0:gpu-0"]]),
    dict(id="request-selector-on-attribute", claims=[claim(req(cel=(f'device.attributes["{DRIVER}"].model == "t4"',)))],
         slices=[slice_(dev("gpu-0"), dev("gpu-1", model="t4"))], want=[["req-0:gpu-1"]]),
    dict(id="qualified-attribute-name", claims=[claim(req(cel=('device.attributes["vendor.com"].gen == 3',)))],
         slices=[slice_(dev("gpu-0"), {"name": "gpu-1", "attributes": {"vendor.com/gen": {"int": 3}}})],
         want=[["req-0:gpu-1"]]),
    dict(id="all-devices-single", claims=[claim(req(mode="All"))], slices=[slice_(dev("gpu-0"))],
         want=[["req-0:gpu-0"]]),
    dict(id="all-devices-many", claims=[claim(req(mode="All"))], slices=[TWO],
         want=[["req-0:gpu-0", "req-0:gpu-1"]]),
    dict(id="all-devices-some-allocated", claims=[claim(req(mode="All"))], slices=[TWO],
         allocated={(DRIVER, "n1", "gpu-1")},
         want="claim claim-0, request req-0: asks for all devices, but gpu-1 already allocated"),
    dict(id="all-devices-none", claims=[claim(req(mode="All"))], slices=[],
         want="claim claim-0, request req-0: no device matches"),
    dict(id="all-devices-and-exact-count-share-nothing", claims=[claim(req("a", mode="All"), req("b"))],
         slices=[TWO], want="requests claim-0/b: not enough distinct free devices for all of them"),
    dict(id="obsolete-slice", claims=[claim(req(count=2))],
         slices=[slice_(dev("old-0"), dev("old-1"), generation=1), slice_(dev("gpu-0"), generation=2)],
         want="claim claim-0, request req-0: needs 2 device(s), 1 of 1 matching free"),
    dict(id="all-nodes-slice", claims=[claim(req())], slices=[slice_(dev("net-0"), node="", pool="fabric",
                                                                        allNodes=True)],
         want=[["req-0:net-0"]]),
    dict(id="node-selector-slice", claims=[claim(req())], slices=[slice_(dev("rack-0"), node="", pool="rack-a",
         nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
             {"key": "rack", "operator": "In", "values": ["a"]}]}]})], labels={"rack": "a"}, want=[["req-0:rack-0"]]),
    dict(id="node-selector-slice-other-rack", claims=[claim(req())], slices=[slice_(dev("rack-0"), node="",
         pool="rack-a", nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
             {"key": "rack", "operator": "In", "values": ["a"]}]}]})], labels={"rack": "b"},
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 0 matching free"),
    dict(id="invalid-CEL-one-device", claims=[claim(req(cel=("device.driver ==",)))], slices=[TWO],
         want=lambda r: r.startswith("claim claim-0, request req-0: selector #1: CEL compile error: ")),
    # a device without the attribute the class reads is a runtime error: it does not match, the reason says why
    dict(id="runtime-CEL-errors-skip-devices", claims=[claim(req(cls="broken"))],
         slices=[slice_(dev("gpu-0"), dev("gpu-1", healthy=True))], want=[["req-0:gpu-1"]]),
    dict(id="runtime-CEL-error-reported", claims=[claim(req(cls="broken"))], slices=[slice_(dev("gpu-0"))],
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 0 matching free (selector #0: CEL runtime "
              "error on device gpu-0: no such key: healthy)"),
    dict(id="CEL-result-not-bool", claims=[claim(req(cel=("1",)))], slices=[slice_(dev("gpu-0"))],
         want="claim claim-0, request req-0: needs 1 device(s), 0 of 0 matching free (selector #1: CEL runtime "
              "error on device gpu-0: expression must return a bool, got int)"),
    # malformed objects (devcluster has no resource.k8s.io/v1 schema to refuse them): skipped, never a crash
    dict(id="malformed-slice-skipped", claims=[claim(req())],
         slices=[{"metadata": {"name": "bad"}, "spec": "oops"},
                 slice_({"name": "gpu-0", "attributes": ["not", "a", "map"], "capacity": "x"}, {"noname": True},
                        generation="two")],  # type: ignore[arg-type]
         want=[["req-0:gpu-0"]]),
    dict(id="selector-without-cel-is-a-compile-error", claims=[claim({"name": "req-0", "exactly": {
        "deviceClassName": "gpu", "selectors": [{"nope": {}}]}})], slices=[TWO],
         want=lambda r: r.startswith("claim claim-0, request req-0: selector #1: CEL compile error: ")),
    dict(id="v1beta1-basic-device", claims=[claim({"name": "req-0", "deviceClassName": "gpu", "count": 1})],
         slices=[slice_({"name": "gpu-0", "basic": {"attributes": {"model": {"string": "a100"}}}})],
         want=[["req-0:gpu-0"]]),
]


@pytest.mark.parametrize("case", ALLOCATE, ids=[c["id"] for c in ALLOCATE])
def test_allocate(case: dict[str, Any]) -> None:
    devices = dra.node_devices(case["slices"], node_name="n1", node_labels=case.get("labels"))
    claims = []
    for i, c in enumerate(case["claims"]):
        requests = dra.requests_of(c)
        assert not isinstance(requests, str), requests
        claims.append((f"claim-{i}", requests))
    result = got(dra.allocate(claims, classes=CLASSES, devices=devices, allocated=frozenset(case.get("allocated", ()))))
    want = case["want"]
    assert want(result) if callable(want) else result == want, result


UNSUPPORTED = [
    ("first-available", claim({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]}),
     "request r: prioritized lists (firstAvailable) are not supported"),
    ("admin-access", claim({"name": "r", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}),
     "request r: adminAccess is not supported"),
    ("constraints", claim(req(), constraints=[{"matchAttribute": f"{DRIVER}/model"}]),
     "device constraints (matchAttribute) are not supported"),
    ("unknown-allocation-mode", claim(req(mode="Some")), "request req-0: unsupported allocationMode 'Some'"),
    ("zero-count", claim(req(count=0)), "request req-0: count must be a positive integer, got 0"),
    ("count-not-a-number", claim(req(count="two")),  # type: ignore[arg-type]
     "request req-0: count must be a positive integer, got 'two'"),
    ("requests-not-a-list", {"spec": {"devices": {"requests": "gpu"}}}, "spec.devices.requests must be a list"),
    ("request-not-an-object", {"spec": {"devices": {"requests": ["gpu"]}}},
     "spec.devices.requests: each request must be an object"),
]


@pytest.mark.parametrize(("obj", "reason"), [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED])
def test_requests_lahar_cannot_allocate_name_the_feature(obj: dict[str, Any], reason: str) -> None:
    assert dra.requests_of(obj) == reason


def test_requests_default_to_one_device_exact_count() -> None:
    assert dra.requests_of(claim(req())) == [dra.DeviceRequest("req-0", "gpu")]
