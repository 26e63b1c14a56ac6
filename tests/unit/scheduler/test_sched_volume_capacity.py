"""CSIStorageCapacity and VolumeBinding's score (scheduler/plugins/_volumes.py): kube-scheduler's hasEnoughCapacity
and volumeCapacityScorer as tables (the cases of upstream's binder_test TestCapacity, scorer_test and
volume_binding_test Score, in our words), then sessions over the in-memory cluster: a gang placed by storage
capacity, room reserved within a session, scoring switched on, a bad shape refused at load."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework.snapshot import Node
from lahar.scheduler.plugins import _volumes as vol
from lahar.scheduler.registry import in_tree_registry
from tests.builders import csidriver, storage_capacity
from tests.unit.scheduler import test_sched_volumes as base
from tests.unit.scheduler.test_sched_volumes import NS, by_name, pv, pvc

DRIVER = "local.csi.lahar.sh"  # a CSI driver's name (a DNS subdomain, as a CSIDriver object needs)
GI = 1024**3


def sc(name: str, **fields: Any) -> dict[str, Any]:
    """A WaitForFirstConsumer class provisioned by DRIVER (unless `provisioner` says otherwise)."""
    return base.sc(name, **{"provisioner": DRIVER, **fields})


def snode(name: str = "n1") -> Node:
    return base.snode(name)


def storage(*capacities: dict[str, Any], driver: dict[str, Any] | None = None) -> vol.StorageCapacities:
    drivers = {DRIVER: csidriver(DRIVER)} if driver is None else ({driver["metadata"]["name"]: driver}
                                                                  if driver else {})
    return vol.StorageCapacities({f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in capacities},
                                 drivers)


def no_request(name: str) -> dict[str, Any]:
    o = pvc(name)
    del o["spec"]["resources"]
    return o


NONE: dict[str, Any] = {}  # no CSIDriver object at all

# (claim, classes, pvs, capacities, driver, reserved) → (ok, reason, action kind, capacity key)
CAPACITY_CASES = [
    ("network-attached", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "1Gi", labels={})],
     None, {}, (True, "", "provision", "kube-system/net")),
    ("local-storage", pvc("data"), [sc("local")], [], [storage_capacity("c-n1", "local", "1Gi", hostname="n1")],
     None, {}, (True, "", "provision", "kube-system/c-n1")),
    ("first-by-name-of-those-that-fit", pvc("data"), [sc("local")], [],
     [storage_capacity("c", "local", "5Gi", labels={}), storage_capacity("b", "local", "1Mi", labels={}),
      storage_capacity("a", "local", "2Gi", hostname="n1")], None, {}, (True, "", "provision", "kube-system/a")),
    ("no-storage", pvc("data"), [sc("local")], [], [], None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("wrong-node", pvc("data"), [sc("local")], [], [storage_capacity("c-n2", "local", "1Gi", hostname="n2")],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("wrong-storage-class", pvc("data"), [sc("local")], [], [storage_capacity("net", "other", "1Gi", labels={})],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("insufficient-storage", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "1Mi", labels={})],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("insufficient-volume-size", pvc("data"), [sc("local")], [],
     [storage_capacity("net", "local", "1Gi", labels={}, maximum_volume_size="1Mi")], None, {},
     (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("volume-size-preferred-over-capacity", pvc("data"), [sc("local")], [],
     [storage_capacity("net", "local", "1Mi", labels={}, maximum_volume_size="1Gi")], None, {},
     (True, "", "provision", "kube-system/net")),
    ("zero-storage", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "0Mi", labels={})],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("zero-volume-size", pvc("data"), [sc("local")], [],
     [storage_capacity("net", "local", None, labels={}, maximum_volume_size="0Mi")], None, {},
     (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("nil-storage", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", None, labels={})],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("no-node-topology", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "1Gi")],
     None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("bad-node-topology", pvc("data"), [sc("local")], [],
     [{**storage_capacity("net", "local", "1Gi"), "nodeTopology": {"matchExpressions": [
         {"key": "zone", "operator": "Near"}]}}], None, {}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    # a driver that does not opt in is not checked, whatever the capacities say
    ("driver-storage-capacity-false", pvc("data"), [sc("local")], [], [], csidriver(DRIVER, storage_capacity=False),
     {}, (True, "", "provision", "")),
    ("driver-storage-capacity-unset", pvc("data"), [sc("local")], [], [], csidriver(DRIVER, storage_capacity=None),
     {}, (True, "", "provision", "")),
    ("no-csidriver-object", pvc("data"), [sc("local")], [], [], NONE, {}, (True, "", "provision", "")),
    ("another-driver-opts-in", pvc("data"), [sc("local")], [], [], csidriver("other.csi"), {},
     (True, "", "provision", "")),
    ("claim-requests-no-storage", no_request("data"), [sc("local")], [], [], None, {}, (True, "", "provision", "")),
    # the class's topology answers first, then capacity; a static PV on the node needs no capacity
    ("topology-before-capacity", pvc("data"), [sc("local", topologies=base.ZONE_B)], [], [], None, {},
     (False, vol.BIND_CONFLICT, "", "")),
    ("static-pv-here-needs-no-capacity", pvc("data"), [sc("local")], [pv("pv1", host="n1")], [], None, {},
     (True, "", "bind", "")),
    ("static-pv-elsewhere-then-capacity", pvc("data"), [sc("local")], [pv("pv1", host="n2")], [], None, {},
     (False, vol.NOT_ENOUGH_SPACE, "", "")),
    # room already checked against this session by other claims (lahar's own: kube-scheduler places one pod at a time)
    ("reserved-leaves-room", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "2Gi", labels={})],
     None, {"kube-system/net": GI}, (True, "", "provision", "kube-system/net")),
    ("reserved-leaves-no-room", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "2Gi", labels={})],
     None, {"kube-system/net": GI + 1}, (False, vol.NOT_ENOUGH_SPACE, "", "")),
    ("reserved-other-capacity", pvc("data"), [sc("local")], [], [storage_capacity("net", "local", "1Gi", labels={})],
     None, {"kube-system/else": 10 * GI}, (True, "", "provision", "kube-system/net")),
    ("reserved-volume-size-only", pvc("data"), [sc("local")], [],
     [storage_capacity("net", "local", None, labels={}, maximum_volume_size="1Gi")], None, {"kube-system/net": GI},
     (True, "", "provision", "kube-system/net")),
]


@pytest.mark.parametrize(("claim", "classes", "pvs", "capacities", "driver", "reserved", "want"),
                         [c[1:] for c in CAPACITY_CASES], ids=[c[0] for c in CAPACITY_CASES])
def test_claim_on_node_checks_storage_capacity(claim, classes, pvs, capacities, driver, reserved, want) -> None:
    got = vol.claim_on_node(claim, snode(), name="data", namespace=NS, pvs=by_name(*pvs), classes=by_name(*classes),
                            storage=storage(*capacities, driver=driver), reserved=reserved)
    action = got.action
    assert (got.ok, got.reason, action.kind if action else "", action.capacity_key if action else "") == want
    if got.reason == vol.NOT_ENOUGH_SPACE:
        assert got.unresolvable  # kube-scheduler: UnschedulableAndUnresolvable


def test_without_storage_capacities_nothing_is_checked() -> None:
    got = vol.claim_on_node(pvc("data"), snode(), name="data", namespace=NS, pvs={}, classes=by_name(sc("local")))
    assert got.ok and got.action is not None and got.action.capacity_key == ""


# --- the scorer: (requested, capacity) per class → score (scorer_test, "default shape" is its 0→0 / 100→10) -------

PACK = ((0, 0), (100, 10))  # upstream's test shape (VolumeCapacityPriority's default before v1.33)
CUSTOM = ((50, 0), (80, 3), (100, 5))

SCORER_CASES = [
    ("pack-empty", PACK, {"hdd": (0, 100)}, 0),
    ("pack-30", PACK, {"hdd": (30, 100)}, 30),
    ("pack-50", PACK, {"hdd": (50, 100)}, 50),
    ("pack-full", PACK, {"hdd": (100, 100)}, 100),
    ("pack-two-classes-empty", PACK, {"hdd": (0, 100), "ssd": (0, 100)}, 0),
    ("pack-two-classes-0-30", PACK, {"hdd": (0, 100), "ssd": (30, 100)}, 15),
    ("pack-two-classes-30-30", PACK, {"hdd": (30, 100), "ssd": (30, 100)}, 30),
    ("pack-two-classes-30-60", PACK, {"hdd": (30, 100), "ssd": (60, 100)}, 45),
    ("pack-two-classes-50-100", PACK, {"hdd": (50, 100), "ssd": (100, 100)}, 75),
    ("pack-two-classes-full", PACK, {"hdd": (100, 100), "ssd": (100, 100)}, 100),
    ("custom-below-first-point", CUSTOM, {"hdd": (0, 100), "ssd": (30, 100)}, 0),
    ("custom-30-60", CUSTOM, {"hdd": (30, 100), "ssd": (60, 100)}, 5),
    ("custom-50-100", CUSTOM, {"hdd": (50, 100), "ssd": (100, 100)}, 25),
    ("custom-90-90", CUSTOM, {"hdd": (90, 100), "ssd": (90, 100)}, 40),
    ("custom-full", CUSTOM, {"hdd": (100, 100), "ssd": (100, 100)}, 50),
    ("default-empty-pool-scores-highest", vol.DEFAULT_SHAPE, {"hdd": (10, 100)}, 90),
    ("default-full-pool", vol.DEFAULT_SHAPE, {"hdd": (100, 100)}, 0),
    ("zero-capacity-is-full", PACK, {"hdd": (0, 0)}, 100),
    ("request-over-capacity-is-full", PACK, {"hdd": (200, 100)}, 100),
    ("no-class", PACK, {}, 0),
    ("rounds-half-away-from-zero", PACK, {"hdd": (5, 100), "ssd": (0, 100)}, 3),  # (5 + 0) / 2 = 2.5 → 3
]


@pytest.mark.parametrize(("shape", "resources", "want"), [c[1:] for c in SCORER_CASES],
                         ids=[c[0] for c in SCORER_CASES])
def test_storage_score(shape, resources, want) -> None:
    assert vol.storage_score(resources, shape) == want


# --- Score of a pod on nodes (volume_binding_test's Score cases): pod_on_node's choice, then volume_score ---------

def pod_with(*claims: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": NS},
            "spec": {"volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]}}


STATIC = sc("local", provisioner=vol.NO_PROVISIONER)
TRACKED = sc("tracked")  # provisioned by DRIVER, which opts into capacity tracking

# (claims, classes, pvs, capacities, shape) → score per node n1, n2, n3 (None: the node does not fit)
SCORE_CASES = [
    ("static-close-capacity-preferred", [pvc("a", size="50Gi")], [STATIC],
     [pv("a0", size="200Gi", host="n1"), pv("a1", size="200Gi", host="n1"), pv("b0", size="100Gi", host="n2"),
      pv("b1", size="100Gi", host="n2")], [], PACK, [25, 50, None]),
    ("static-close-capacity-two-claims", [pvc("a", size="50Gi"), pvc("b", size="50Gi")], [STATIC],
     [pv("a0", size="200Gi", host="n1"), pv("a1", size="200Gi", host="n1"), pv("b0", size="100Gi", host="n2"),
      pv("b1", size="100Gi", host="n2")], [], PACK, [25, 50, None]),
    ("storage-capacity", [pvc("a", cls="tracked", size="10Gi")], [TRACKED], [],
     [storage_capacity("c1", "tracked", "100Gi", hostname="n1"), storage_capacity("c2", "tracked", "50Gi", hostname="n2"),
      storage_capacity("c3", "tracked", "10Gi", hostname="n3")], PACK, [10, 20, 100]),
    ("static-binds-win-over-capacity", [pvc("a", cls="tracked", size="10Gi"), pvc("b", size="50Gi")],
     [TRACKED, STATIC], [pv("s1", size="100Gi", host="n1"), pv("s2", size="100Gi", host="n2"),
                         pv("s3", size="100Gi", host="n3")],
     [storage_capacity("c1", "tracked", "100Gi", hostname="n1"), storage_capacity("c2", "tracked", "50Gi", hostname="n2"),
      storage_capacity("c3", "tracked", "10Gi", hostname="n3")], PACK, [50, 50, 50]),
    ("two-claims-one-pool", [pvc("a", cls="tracked", size="50Gi"), pvc("b", cls="tracked", size="50Gi")], [TRACKED],
     [], [storage_capacity("c1", "tracked", "100Gi", hostname="n1")], PACK, [100, None, None]),
    ("least-allocatable-preferred", [pvc("a", cls="tracked", size="10Gi")], [TRACKED], [],
     [storage_capacity("c1", "tracked", "100Gi", hostname="n1"), storage_capacity("c2", "tracked", "20Gi", hostname="n2"),
      storage_capacity("c3", "tracked", "10Gi", hostname="n3")], PACK, [10, 50, 100]),
    ("most-allocatable-preferred-default-shape", [pvc("a", cls="tracked", size="10Gi")], [TRACKED], [],
     [storage_capacity("c1", "tracked", "100Gi", hostname="n1"), storage_capacity("c2", "tracked", "20Gi", hostname="n2"),
      storage_capacity("c3", "tracked", "10Gi", hostname="n3")], vol.DEFAULT_SHAPE, [90, 50, 0]),
    ("untracked-provisioning-scores-0", [pvc("a", size="10Gi")], [sc("local", provisioner="lahar.sh/local")], [], [],
     PACK, [0, 0, 0]),
    ("bound-claim-scores-0", [pvc("a", volume="pv1")], [STATIC], [pv("pv1", claim="a")], [], PACK, [0, 0, 0]),
]


@pytest.mark.parametrize(("claims", "classes", "pvs", "capacities", "shape", "want"),
                         [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_volume_score(claims, classes, pvs, capacities, shape, want) -> None:
    keyed = {f"{NS}/{c['metadata']['name']}": c for c in claims}
    got = []
    for name in ("n1", "n2", "n3"):
        answer, actions = vol.pod_on_node(pod_with(*(c["metadata"]["name"] for c in claims)), snode(name),
                                          claims=keyed, pvs=by_name(*pvs), classes=by_name(*classes),
                                          storage=storage(*capacities))
        got.append(vol.volume_score(actions, shape) if answer.ok else None)
    assert got == want


# --- volumebinding.shape (kube-scheduler's validateFunctionShape) -----------------------------------------------

SHAPE_CASES = [
    ("absent-is-default", None, vol.DEFAULT_SHAPE),
    ("one-point", [{"utilization": 50, "score": 5}], ((50, 5),)),
    ("volcano-example", [{"utilization": 0, "score": 10}, {"utilization": 40, "score": 8},
                         {"utilization": 80, "score": 4}, {"utilization": 100, "score": 0}],
     ((0, 10), (40, 8), (80, 4), (100, 0))),
    ("empty", [], "volumebinding.shape: Required value: at least one point must be specified"),
    ("not-a-list", "0:10", "volumebinding.shape: Required value: at least one point must be specified"),
    ("unsorted", [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
     "volumebinding.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order"),
    ("utilization-out-of-range", [{"utilization": 101, "score": 1}],
     "volumebinding.shape[0].utilization: Invalid value: 101: not in valid range [0, 100]"),
    ("score-out-of-range", [{"utilization": 0, "score": 11}],
     "volumebinding.shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
    ("score-not-an-integer", [{"utilization": 0, "score": "high"}],
     'volumebinding.shape[0].score: Invalid value: "high": must be an integer'),
    ("unknown-field", [{"utilization": 0, "score": 1, "weight": 2}], "volumebinding.shape[0]: unknown field 'weight'"),
]


@pytest.mark.parametrize(("raw", "want"), [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES])
def test_parse_shape(raw, want) -> None:
    if isinstance(want, str):
        with pytest.raises(vol.ShapeError) as e:
            vol.parse_shape(raw)
        assert str(e.value) == want
    else:
        assert vol.parse_shape(raw) == want


# --- sessions over the in-memory cluster --------------------------------------------------------------------------

def _cluster(*capacities: dict[str, Any], driver: bool = True) -> Any:
    c = base._cluster([sc("local")], [], ["data-0", "data-1"])
    rt = c.registry.get("storage.k8s.io", "v1", "csistoragecapacities")
    if driver:
        c.create(c.registry.get("storage.k8s.io", "v1", "csidrivers"), csidriver(DRIVER))
    for o in capacities:
        c.create(rt, o, namespace="kube-system")
    return c


def _nodes(c: Any) -> list[str]:
    return sorted(base._get(c, "pods", f"w{i}", NS)["spec"].get("nodeName") or "" for i in range(2))


def test_gang_goes_to_the_node_whose_storage_capacity_fits() -> None:
    c = _cluster(storage_capacity("c-n1", "local", "100Mi", hostname="n1"),
                 storage_capacity("c-n2", "local", "10Gi", hostname="n2"))
    _, result = base._session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    assert _nodes(c) == ["n2", "n2"]
    for i in range(2):
        claim = base._get(c, "persistentvolumeclaims", f"data-{i}", NS)
        assert claim["metadata"]["annotations"][vol.SELECTED_NODE_ANNOTATION] == "n2"


def test_a_driver_that_does_not_opt_in_is_not_checked() -> None:
    c = _cluster(driver=False)  # no CSIDriver, no capacities: provisioning anywhere
    _, result = base._session(c)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures


def test_room_checked_by_one_claim_is_not_offered_to_the_next_in_the_session() -> None:
    # 1.5Gi on n1 and nothing on n2: each 1Gi claim fits alone, not both — the gang stays whole and unbound
    c = _cluster(storage_capacity("c-n1", "local", "1536Mi", hostname="n1"))
    decisions, result = base._session(c)
    assert result.bound == [] and decisions.binds == []
    events = c.list(c.registry.get("", "v1", "events"), namespace=NS)["items"]
    assert any(vol.NOT_ENOUGH_SPACE in (e.get("message") or "") for e in events), [e.get("message") for e in events]
    for i in range(2):
        claim = base._get(c, "persistentvolumeclaims", f"data-{i}", NS)
        assert vol.SELECTED_NODE_ANNOTATION not in (claim["metadata"].get("annotations") or {})


SCORING = {"predicate.StorageCapacityScoringEnable": True,
           "volumebinding.shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}


@pytest.mark.parametrize(("args", "want"), [
    ({}, ["n1", "n1"]),  # off by default: n1 and n2 tie, the first by name wins
    (SCORING, ["n2", "n2"]),  # the fuller pool scores higher with this shape
    ({**SCORING, "volumebinding.weight": 0}, ["n1", "n1"]),
], ids=["off-by-default", "on-with-shape", "weight-zero"])
def test_storage_capacity_scoring_steers_the_gang(args, want) -> None:
    c = _cluster(storage_capacity("c-n1", "local", "100Gi", hostname="n1"),
                 storage_capacity("c-n2", "local", "10Gi", hostname="n2"))
    conf = yaml.safe_dump({"actions": "enqueue, allocate", "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "priority"}]},
        {"plugins": [{"name": "proportion"}, {"name": "predicates", "arguments": args},
                     {"name": "nodeorder", "arguments": {"leastrequested.weight": 0, "balancedresource.weight": 0}}]}]})
    _, result = base._session(c, conf)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    assert _nodes(c) == want


def test_a_bad_shape_is_refused_when_the_conf_is_loaded() -> None:
    reg = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates", "arguments": {
        "predicate.StorageCapacityScoringEnable": True, "volumebinding.shape": [{"utilization": 200, "score": 1}]}}]}]}),
        actions=reg.action_names, plugins=reg.plugin_names)
    with pytest.raises(confs.ConfError, match=r"plugin predicates: arguments: volumebinding\.shape\[0\]\.utilization: "
                                              r"Invalid value: 200: not in valid range \[0, 100\]"):
        reg.check_arguments(conf)


def test_the_shape_is_not_read_while_scoring_is_off() -> None:
    reg = in_tree_registry()
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates", "arguments": {
        "volumebinding.shape": "anything"}}]}]}), actions=reg.action_names, plugins=reg.plugin_names)
    reg.check_arguments(conf)  # as in Volcano, the shape only counts with the gate on
