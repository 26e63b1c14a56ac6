"""Koordinator GPU partitions: the Device's `scheduling.koordinator.sh/gpu-partitions` table, the pod's
`gpu-partition-spec`, the choice of a partition (`partitions.choose`), and deviceshare honouring it in a session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.scheduler.devices import partitions, requests
from lahar.scheduler.devices.partitions import Partition, PartitionSpec
from tests.builders import tiers_conf
from tests.unit.scheduler.test_sched_deviceshare import _objs, dpod, session

# 8 GPUs: pairs score 1 (0-1, 2-3, ...) and 2 (0-2, 1-3 hypothetically better links), quads, the octet
TABLE_JSON = {
    "1": [{"minors": [i], "allocationScore": 1} for i in range(8)],
    "2": [{"minors": [0, 1], "allocationScore": 1}, {"minors": [2, 3], "allocationScore": 1},
          {"minors": [4, 5], "allocationScore": 1}, {"minors": [6, 7], "allocationScore": 1},
          {"minors": [0, 2], "allocationScore": 2, "ringBusBandwidth": "400Gi"}],
    "4": [{"minors": [0, 1, 2, 3], "allocationScore": 1}, {"minors": [4, 5, 6, 7], "allocationScore": 1}],
    "8": [{"minors": list(range(8)), "allocationScore": 1}],
}
DEVICE = {"metadata": {"name": "n", "annotations": {partitions.PARTITIONS_ANNOTATION: json.dumps(TABLE_JSON)}}}
TABLE = partitions.table(DEVICE)
ALL = frozenset(range(8))

CHOOSE = [
    # (id, count, free, spec, node_honors, expected)
    ("best-scored-pair", 2, ALL, PartitionSpec(), False, (0, 2)),
    ("best-taken-best-effort-falls-to-next-score-packing-beside-used", 2, ALL - {2}, PartitionSpec(), False,
     (0, 1)),
    ("restricted-only-the-best-score", 2, ALL - {2}, PartitionSpec(restricted=True), False,
     partitions.INSUFFICIENT_PARTITIONED),
    ("binpack-keeps-a-quad-whole", 2, ALL - {0}, PartitionSpec(), False, (2, 3)),
    ("ring-bus-bandwidth-filters", 2, ALL, PartitionSpec(ring_bus_bandwidth=500 * 2**30), False,
     partitions.INSUFFICIENT_PARTITIONED),
    ("quad", 4, ALL - {1}, PartitionSpec(), False, (4, 5, 6, 7)),
    ("count-without-partitions", 3, ALL, PartitionSpec(), False, partitions.UNSUPPORTED_COUNT),
    ("not-honoured-falls-back", 3, ALL, None, False, None),
    ("node-label-honours", 3, ALL, None, True, partitions.UNSUPPORTED_COUNT),
]


@pytest.mark.parametrize(("count", "free", "spec", "honors", "expected"), [x[1:] for x in CHOOSE],
                         ids=[x[0] for x in CHOOSE])
def test_choose_table(count: int, free: frozenset[int], spec: PartitionSpec | None, honors: bool,
                      expected: Any) -> None:
    assert partitions.choose(count, free, total=ALL, partitions=TABLE, spec=spec, node_honors=honors) == expected


def test_no_table_is_missing_only_when_honoured() -> None:
    assert partitions.choose(2, ALL, total=ALL, partitions=None, spec=PartitionSpec(), node_honors=False) == \
        partitions.MISSING_TABLE
    assert partitions.choose(2, ALL, total=ALL, partitions=None, spec=None, node_honors=False) is None


def test_table_groups_by_score_best_first() -> None:
    assert TABLE is not None
    assert TABLE[2][0] == (Partition((0, 2), 2, 400 * 2**30),)
    assert partitions.table({"metadata": {"annotations": {partitions.PARTITIONS_ANNOTATION: "nope"}}}) is None


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"allocatePolicy": "Restricted"}', PartitionSpec(restricted=True)),
    ('{"allocatePolicy": "BestEffort", "ringBusBandwidth": "1Gi"}', PartitionSpec(False, 2**30)),
    ("{}", PartitionSpec()),
    ('{"allocatePolicy": "Sometimes"}', "allocatePolicy must be Restricted or BestEffort"),
    ("[1]", "must be a JSON object"),
    ("{", "is not valid JSON"),
], ids=["restricted", "best-effort-bandwidth", "empty", "bad-policy", "not-an-object", "not-json"])
def test_spec_annotation(raw: str, expected: PartitionSpec | str) -> None:
    pod = {"metadata": {"annotations": {partitions.PARTITION_SPEC_ANNOTATION: raw}},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    req = requests.parse(pod)
    if isinstance(expected, str):
        assert req.partition_spec is None and expected in req.errors[0]
        assert partitions.PARTITION_SPEC_ANNOTATION in req.errors[0]
    else:
        assert req.partition_spec == expected and not req.errors


def _with_table(table: dict[str, Any], *, honor: bool = False) -> dict[str, list[dict[str, Any]]]:
    objs = _objs("dgx-h100", 1)
    dev = objs["devices"][0]
    dev["metadata"].setdefault("annotations", {})[partitions.PARTITIONS_ANNOTATION] = json.dumps(table)
    if honor:
        dev["metadata"].setdefault("labels", {})[partitions.POLICY_LABEL] = "Honor"
    return objs


CONF = tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"])


def _minors(d: Any) -> list[int]:
    (b,) = d.binds
    return sorted(g["minor"] for g in json.loads(
        d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])["gpu"])


def test_session_honours_the_spec_of_the_pod() -> None:
    p = dpod("p1", gpus=2, annotations={partitions.PARTITION_SPEC_ANNOTATION: '{"allocatePolicy": "Restricted"}'})
    _, d = session([p], _with_table(TABLE_JSON), min_member=1, conf=CONF)
    assert _minors(d) == [0, 2]


def test_session_refuses_a_count_the_honoured_table_lacks() -> None:
    _, d = session([dpod("p1", gpus=3)], _with_table(TABLE_JSON, honor=True), min_member=1, conf=CONF)
    assert not d.binds
    assert partitions.UNSUPPORTED_COUNT in d.pod_conditions[0].message


def test_session_without_honour_chooses_link_aware() -> None:
    _, d = session([dpod("p1", gpus=3)], _with_table(TABLE_JSON), min_member=1, conf=CONF)
    assert len(_minors(d)) == 3


def test_nodes_with_different_tables_are_not_one_node_class() -> None:
    """Two nodes alike but for their partition tables: each pod's choice follows its own node's table."""
    objs = _objs("dgx-h100", 2)
    other = {"2": [{"minors": [6, 7], "allocationScore": 1}]}
    for dev, table in zip(objs["devices"], (TABLE_JSON, other), strict=True):
        dev["metadata"].setdefault("annotations", {})[partitions.PARTITIONS_ANNOTATION] = json.dumps(table)
        dev["metadata"].setdefault("labels", {})[partitions.POLICY_LABEL] = "Honor"
    pods = [dpod(f"p{i}", gpus=2, cpu="150") for i in range(2)]   # one pod per node
    _, d = session(pods, objs, min_member=2, conf=CONF)
    got = {b.node: sorted(g["minor"] for g in json.loads(
        d.annotations[b.uid]["scheduling.koordinator.sh/device-allocated"])["gpu"]) for b in d.binds}
    assert got == {"dgx-h100-0": [0, 2], "dgx-h100-1": [6, 7]}
