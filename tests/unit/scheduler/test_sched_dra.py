"""DynamicResources in the predicates plugin (scheduler/plugins/_dra.py): sessions over the in-memory cluster with
DeviceClasses, ResourceSlices and ResourceClaims — devices reserved within a session, claims allocated and reserved
at commit, gangs whose claims cannot all be allocated, claims from templates, and Volcano's switch."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from lahar.kube.apiserver.memory import MemoryClient
from lahar.scheduler import commit as commits
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.plugins import _dra
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once
from tests.builders import node, pod, podgroup, queue

NS = "c1"
DRIVER = "gpu.example.com"
RES = "resource.k8s.io"


def _conf(enable: bool | None = True) -> str:
    predicates: dict[str, Any] = {"name": "predicates"}
    if enable is not None:
        predicates["arguments"] = {"predicate.DynamicResourceAllocationEnable": enable}
    return yaml.safe_dump({"actions": "enqueue, allocate", "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "priority"}]},
        {"plugins": [{"name": "proportion"}, predicates, {"name": "nodeorder"}]}]})


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{RES}/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def _cluster(*, gpus: int = 2, groups: dict[str, list[str]], claims: list[str] = (),  # type: ignore[assignment]
             templated: dict[str, str] | None = None) -> MemoryClient:
    """Nodes n1 (with `gpus` devices in one ResourceSlice) and n2 (none); per PodGroup (minMember = its size) pods
    each using the named claim ("tmpl:<claim>" for a template whose claim `templated` maps the pod to)."""
    c = MemoryClient.with_crds()
    reg = c.registry
    c.create(reg.get("", "v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for i in (1, 2):
        c.create(reg.get("", "v1", "nodes"), node(f"n{i}").alloc("8", "16Gi").obj)
    c.create(reg.get("scheduling.volcano.sh", "v1beta1", "queues"), queue("default").obj)
    c.create(reg.get(RES, "v1", "deviceclasses"), {
        "apiVersion": f"{RES}/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    c.create(reg.get(RES, "v1", "resourceslices"), {
        "apiVersion": f"{RES}/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
        "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{k}", "attributes": {"model": {"string": "a100"}}}
                             for k in range(gpus)]}})
    for name in claims:
        c.create(reg.get(RES, "v1", "resourceclaims"), _claim(name), namespace=NS)
    for group, members in groups.items():
        pg = podgroup(group, NS).min(len(members)).queue("default").obj
        pg.setdefault("status", {})["phase"] = "Inqueue"
        c.create(reg.get("scheduling.volcano.sh", "v1beta1", "podgroups"), pg, namespace=NS)
        for k, ref in enumerate(members):
            p = pod(f"{group}-{k}", NS).req(cpu="1").group(group).obj
            p["metadata"].pop("uid")
            made = (templated or {}).get(f"{group}-{k}")
            if ref.startswith("tmpl:"):
                p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": ref[5:]}]
            else:
                p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": ref}]
            created = c.create(reg.get("", "v1", "pods"), p, namespace=NS)
            if made:  # what kube-controller-manager writes once it has created the claim from the template
                created["status"] = {**created.get("status", {}), "resourceClaimStatuses": [
                    {"name": "gpu", "resourceClaimName": made}]}
                c.update_status(reg.get("", "v1", "pods"), created, namespace=NS)
    return c


def _session(c: MemoryClient, conf: str | None = None) -> Any:
    reg = in_tree_registry()
    return run_once(c, confs.load(conf or _conf(), actions=reg.action_names, plugins=reg.plugin_names), registry=reg)


def _get(c: MemoryClient, plural: str, name: str) -> dict[str, Any]:
    group = "" if plural == "pods" else RES
    return c.get(c.registry.get(group, "v1", plural), name, namespace=NS)


def test_two_claims_get_the_two_devices_and_a_third_waits() -> None:
    c = _cluster(groups={"a": ["ca"], "b": ["cb"], "x": ["cx"]}, claims=["ca", "cb", "cx"])
    decisions, result = _session(c)
    assert sorted(result.bound) == ["c1/a-0", "c1/b-0"], result.bind_failures
    devices = set()
    for name, pod_name in (("ca", "a-0"), ("cb", "b-0")):
        status = _get(c, "resourceclaims", name)["status"]
        [r] = status["allocation"]["devices"]["results"]
        assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, "n1")
        devices.add(r["device"])
        assert status["allocation"]["nodeSelector"] == _dra.node_selector_for("n1")
        assert status["reservedFor"] == [{"resource": "pods", "name": pod_name,
                                          "uid": _get(c, "pods", pod_name)["metadata"]["uid"]}]
        assert _get(c, "pods", pod_name)["spec"]["nodeName"] == "n1"
        # kube-controller-manager deallocates an unreserved claim only when it carries this finalizer
        assert _get(c, "resourceclaims", name)["metadata"]["finalizers"] == [commits.CLAIM_FINALIZER]
    assert devices == {"gpu-0", "gpu-1"}  # one device each: the session reserved the first pod's
    assert "status" not in _get(c, "resourceclaims", "cx") or not _get(c, "resourceclaims", "cx")["status"]
    [cond] = [p for p in decisions.pod_conditions if p.name == "x-0"]
    assert "claim c1/cx, request gpu: needs 1 device(s), 0 of 2 matching free" in cond.event_message


def _add_claim_job(c: MemoryClient, group: str, claim: str) -> None:
    """An Inqueue PodGroup `group` with one pod whose claim `gpu` is the ResourceClaim `claim`."""
    pg = podgroup(group, NS).min(1).queue("default").obj
    pg.setdefault("status", {})["phase"] = "Inqueue"
    c.create(c.registry.get("scheduling.volcano.sh", "v1beta1", "podgroups"), pg, namespace=NS)
    p = pod(f"{group}-0", NS).req(cpu="1").group(group).obj
    p["metadata"].pop("uid")
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    c.create(c.registry.get("", "v1", "pods"), p, namespace=NS)


def test_next_session_sees_the_allocations() -> None:
    c = _cluster(gpus=1, groups={"a": ["ca"]}, claims=["ca", "cb"])
    _, first = _session(c)
    assert first.bound == ["c1/a-0"]
    _add_claim_job(c, "b", "cb")
    _, second = _session(c)
    assert second.bound == []  # gpu-0 belongs to ca now


def test_gang_whose_claims_cannot_all_be_allocated_binds_nothing() -> None:
    c = _cluster(gpus=1, groups={"g": ["c0", "c1"]}, claims=["c0", "c1"])
    decisions, result = _session(c)
    assert result.bound == [] and decisions.binds == [] and decisions.claims == {}
    for name in ("c0", "c1"):
        assert not (_get(c, "resourceclaims", name).get("status") or {}).get("allocation")


def test_a_shared_claim_keeps_its_pods_on_one_node() -> None:
    c = _cluster(gpus=1, groups={"g": ["shared", "shared"]}, claims=["shared"])
    _, result = _session(c)
    assert sorted(result.bound) == ["c1/g-0", "c1/g-1"], result.bind_failures
    status = _get(c, "resourceclaims", "shared")["status"]
    assert len(status["allocation"]["devices"]["results"]) == 1
    assert sorted(r["name"] for r in status["reservedFor"]) == ["g-0", "g-1"]


def test_an_allocated_claim_pins_its_pod_to_the_allocation_node() -> None:
    c = _cluster(gpus=0, groups={"a": ["ca"]}, claims=["ca"])
    rt = c.registry.get(RES, "v1", "resourceclaims")
    claim = _get(c, "resourceclaims", "ca")
    claim["status"] = {"allocation": {"devices": {"results": []}, "nodeSelector": _dra.node_selector_for("n2")}}
    c.update_status(rt, claim, namespace=NS)
    _, result = _session(c)
    assert result.bound == ["c1/a-0"] and _get(c, "pods", "a-0")["spec"]["nodeName"] == "n2"
    assert [r["name"] for r in _get(c, "resourceclaims", "ca")["status"]["reservedFor"]] == ["a-0"]


@pytest.mark.parametrize(("templated", "bound"), [({}, []), ({"t-0": "t-0-gpu"}, ["c1/t-0"])],
                         ids=["template-claim-not-created-yet", "template-claim-from-pod-status"])
def test_template_claims_are_read_from_the_pod_status(templated: dict[str, str], bound: list[str]) -> None:
    c = _cluster(groups={"t": ["tmpl:gpu-template"]}, claims=["t-0-gpu"], templated=templated)
    decisions, result = _session(c)
    assert result.bound == bound
    if not bound:
        [cond] = decisions.pod_conditions
        assert "waiting for the ResourceClaim of pod claim gpu (template gpu-template) to be created" in cond.message
    else:
        assert _get(c, "resourceclaims", "t-0-gpu")["status"]["reservedFor"][0]["name"] == "t-0"


def test_missing_claim_is_unresolvable_everywhere() -> None:
    c = _cluster(groups={"a": ["nope"]})
    decisions, result = _session(c)
    assert result.bound == []
    [cond] = decisions.pod_conditions
    assert 'resourceclaim "nope" not found' in cond.event_message


@pytest.mark.parametrize("enable", [None, False], ids=["default-off-as-volcano", "off"])
def test_without_the_switch_claims_are_not_read(enable: bool | None) -> None:
    c = _cluster(gpus=0, groups={"a": ["ca"]}, claims=["ca"])
    decisions, result = _session(c, _conf(enable))
    assert result.bound == ["c1/a-0"] and decisions.claims == {}


POD_CLAIMS = [
    ("none", {}, []),
    ("by-name", {"spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}}, [_dra.ClaimRef("g", "c")]),
    ("template-pending", {"spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}},
     [_dra.ClaimRef("g", "", "t")]),
    ("template-created", {"spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]},
                          "status": {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "p-g-x1"}]}},
     [_dra.ClaimRef("g", "p-g-x1", "t")]),
]


@pytest.mark.parametrize(("obj", "want"), [p[1:] for p in POD_CLAIMS], ids=[p[0] for p in POD_CLAIMS])
def test_pod_claims(obj: dict[str, Any], want: list[_dra.ClaimRef]) -> None:
    assert _dra.pod_claims(obj) == want


def test_a_claim_allocated_meanwhile_fails_the_bind() -> None:
    """Between the session and its commit another scheduler allocated the claim elsewhere: commit refuses to
    overwrite it, and the pod is not bound (the next session sees the claim as it is)."""
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.session import list_objects, run_session

    c = _cluster(groups={"a": ["ca"]}, claims=["ca"])
    reg = in_tree_registry()
    conf = confs.load(_conf(), actions=reg.action_names, plugins=reg.plugin_names)
    decisions = run_session(snapshots.build(**list_objects(c)), conf, registry=reg)
    assert [b.name for b in decisions.binds] == ["a-0"]
    rt = c.registry.get(RES, "v1", "resourceclaims")
    claim = _get(c, "resourceclaims", "ca")
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-1"}]},
        "nodeSelector": _dra.node_selector_for("n1")}}
    c.update_status(rt, claim, namespace=NS)
    result = commits.apply(c, decisions)
    assert result.bound == [] and "allocated meanwhile" in result.bind_failures["c1/a-0"]
    assert not _get(c, "pods", "a-0")["spec"].get("nodeName")


def test_a_device_for_all_nodes_is_taken_once() -> None:
    """A slice for all nodes (a network-attached device): the first pod's reservation must reach every node's
    cached answer, so the second pod finds it taken wherever it looks."""
    c = _cluster(gpus=0, groups={"a": ["ca"], "b": ["cb"]}, claims=["ca", "cb"])
    c.create(c.registry.get(RES, "v1", "resourceslices"), {
        "apiVersion": f"{RES}/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
        "spec": {"driver": DRIVER, "allNodes": True, "pool": {"name": "fabric", "generation": 1,
                                                              "resourceSliceCount": 1},
                 "devices": [{"name": "net-gpu-0"}]}})
    _, result = _session(c)
    assert len(result.bound) == 1, result.bound


class _Node:
    name = "n1"
    labels = {"zone": "a", "gpus": "8"}


SELECTORS = [
    ("none", None, True),
    ("field-in", _dra.node_selector_for("n1"), True),
    ("field-other-node", _dra.node_selector_for("n2"), False),
    ("label-in", {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
     True),
    ("label-notin", {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "NotIn", "values": ["a"]}]}]}, False),
    ("terms-ored", {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]},
                                          {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                            "values": ["n1"]}]}]}, True),
    ("empty-term-matches-nothing", {"nodeSelectorTerms": [{}]}, False),
    ("malformed-requirement", {"nodeSelectorTerms": [{"matchExpressions": ["zone"]}]}, False),
    ("label-gt", {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}]},
     True),
    ("gt-not-a-number", {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpus", "operator": "Gt", "values": ["many"]}]}]}, False),
    ("term-not-a-map", {"nodeSelectorTerms": ["zone=a"]}, False),
]


@pytest.mark.parametrize(("selector", "ok"), [s[1:] for s in SELECTORS], ids=[s[0] for s in SELECTORS])
def test_allocation_node_selector(selector: dict[str, Any] | None, ok: bool) -> None:
    assert _dra._node_selector_ok(selector, _Node()) is ok


def test_the_scheduler_cache_carries_claims_slices_and_classes() -> None:
    """The informer cache (incremental snapshots) follows the DRA kinds: after a commit writes the allocation, the
    next session on the cache's snapshot sees the device taken."""
    import time

    from lahar.scheduler.cache import SchedulerCache
    from lahar.scheduler.session import run_session

    c = _cluster(gpus=1, groups={"a": ["ca"]}, claims=["ca", "cb"])
    reg = in_tree_registry()
    conf = confs.load(_conf(), actions=reg.action_names, plugins=reg.plugin_names)
    cache = SchedulerCache(c)

    def wait(what: str, ok: Any) -> None:
        deadline = time.monotonic() + 10
        while not ok():
            assert time.monotonic() < deadline, what
            time.sleep(0.02)

    try:
        assert cache.start(10)
        wait("the cache never saw the DRA objects", lambda: {"c1/ca", "c1/cb"} <= set(
            cache.snapshot().extras.get("resourceclaims") or {}) and cache.snapshot().extras.get("resourceslices")
            and cache.snapshot().extras.get("deviceclasses") and cache.snapshot().jobs.get("c1/a")
            and cache.snapshot().jobs["c1/a"].tasks)
        result = commits.apply(c, run_session(cache.snapshot(), conf, registry=reg))
        assert result.bound == ["c1/a-0"], result.bind_failures
        wait("the cache never saw the allocation", lambda: (cache.snapshot().extras["resourceclaims"]["c1/ca"]
                                                            .get("status") or {}).get("allocation"))
        _add_claim_job(c, "b", "cb")
        wait("the cache never saw pod b-0", lambda: cache.snapshot().jobs.get("c1/b") is not None
             and cache.snapshot().jobs["c1/b"].tasks)
        assert run_session(cache.snapshot(), conf, registry=reg).binds == []  # gpu-0 is ca's
    finally:
        cache.stop()


@pytest.mark.parametrize(("finalizers", "want"), [
    (None, [commits.CLAIM_FINALIZER]),
    (["example.com/keep"], ["example.com/keep", commits.CLAIM_FINALIZER]),
    ([commits.CLAIM_FINALIZER], [commits.CLAIM_FINALIZER]),
], ids=["none", "kept-in-order", "once"])
def test_with_claim_finalizer(finalizers: list[str] | None, want: list[str]) -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c", **({"finalizers": finalizers} if finalizers else {})}}
    got = commits.with_claim_finalizer(claim)
    assert got["metadata"]["finalizers"] == want and got["metadata"]["name"] == "c"
    assert claim["metadata"].get("finalizers") == finalizers  # the input is not changed
