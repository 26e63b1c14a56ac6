"""Link-aware GPU choice against NVIDIA/go-gpuallocator's tables (gpuallocator/besteffort_test.go, common_test.go).

The DGX-1 Pascal, DGX-1 Volta and 4×RTX8000 link matrices are restated as data (nvidia-smi words: NV<n>, PIX
single switch, PHB host bridge, NODE same CPU, SYS across CPUs). A literal port of upstream's partition enumeration
lives here as the reference the memoised `allocate` is checked against.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.scheduler.devices.gpu import allocate, link_score, links_from_annotation, pair_scores, set_score


def _links(nvlinks: dict[tuple[int, int], int], pcie: dict[tuple[int, int], str], gpus: int,
           default_pcie: str | None) -> dict[tuple[int, int], list[str]]:
    """Both directions of every pair: the PCIe word (if any), then the NVLink word (upstream's link order)."""
    links: dict[tuple[int, int], list[str]] = {}
    for a, b in itertools.permutations(range(gpus), 2):
        key = (min(a, b), max(a, b))
        words = []
        word = pcie.get(key, default_pcie)
        if word:
            words.append(word)
        if key in nvlinks:
            words.append(f"NV{nvlinks[key]}")
        links[(a, b)] = words
    return links


DGX1_PASCAL = _links(
    {(0, 1): 1, (0, 2): 1, (0, 3): 1, (0, 4): 1, (1, 2): 1, (1, 3): 1, (1, 5): 1, (2, 3): 1, (2, 6): 1, (3, 7): 1,
     (4, 5): 1, (4, 6): 1, (4, 7): 1, (5, 6): 1, (5, 7): 1, (6, 7): 1},
    {(0, 1): "PHB", (0, 2): "PIX", (0, 3): "PHB", (1, 2): "PHB", (1, 3): "PIX", (2, 3): "PHB",
     (4, 5): "PHB", (4, 6): "PIX", (4, 7): "PHB", (5, 6): "PHB", (5, 7): "PIX", (6, 7): "PHB"},
    8, "SYS")
DGX1_VOLTA = _links(
    {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2, (2, 6): 1, (3, 7): 1,
     (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2},
    {(0, 1): "PIX", (0, 2): "PHB", (0, 3): "PHB", (1, 2): "PHB", (1, 3): "PHB", (2, 3): "PIX",
     (4, 5): "PIX", (4, 6): "PHB", (4, 7): "PHB", (5, 6): "PHB", (5, 7): "PHB", (6, 7): "PIX"},
    8, "SYS")
RTX8000_X4 = _links({(0, 3): 2, (1, 2): 2}, {(0, 1): "NODE", (0, 2): "SYS", (1, 3): "SYS", (2, 3): "NODE"}, 4, None)

VOLTA = pair_scores(DGX1_VOLTA)

# TestBestEffortAllocate (DGX-1 Volta): available, required, size → expected (compared as sets).
POLICY_CASES = [
    ("single-nvlink-prefer-same-switch", [0, 2, 4, 5], [], 2, [4, 5]),
    ("single-nvlink-prefer-same-socket", [0, 4, 5, 6], [], 2, [5, 6]),
    ("prefer-dual-nvlink-same-socket", [0, 3, 1], [], 2, [0, 3]),
    ("prefer-dual-nvlink-cross-socket", [0, 1, 4], [], 2, [0, 4]),
    ("must-include-size-1", list(range(8)), [4], 1, [4]),
    ("must-include-size-2", list(range(8)), [4], 2, [4, 7]),
    ("must-include-size-4", list(range(8)), [4], 4, [4, 5, 6, 7]),
    ("must-include-unavailable-device", [1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], 4, []),
    ("must-include-full-set", list(range(8)), [0, 2, 4, 6], 4, [0, 2, 4, 6]),
    ("must-include-too-many", list(range(8)), [1, 2, 3, 4, 5, 6], 4, []),
    ("required-more-than-available", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6], 1, []),
    ("size-zero", list(range(8)), [], 0, []),
    ("fewer-available-than-size", [0, 1], [], 4, []),
]


@pytest.mark.parametrize(("available", "required", "size", "expected"),
                         [pytest.param(*r[1:], id=r[0]) for r in POLICY_CASES])
def test_best_effort_allocate_dgx1_volta(available, required, size, expected):
    assert sorted(allocate(available, required, size, VOLTA)) == sorted(expected)


# The Allocator sequences: each Allocate(n) gets the remaining GPUs sorted by index and no required ones.
SEQUENCES = [
    ("rtx8000-one", RTX8000_X4, [(1, [0]), (1, [1]), (1, [2]), (1, [3]), (1, [])]),
    ("rtx8000-two", RTX8000_X4, [(2, [0, 3]), (2, [1, 2]), (1, [])]),
    ("rtx8000-four", RTX8000_X4, [(4, [0, 1, 2, 3]), (1, [])]),
    ("pascal-one", DGX1_PASCAL, [(1, [i]) for i in range(8)] + [(1, [])]),
    ("pascal-two", DGX1_PASCAL, [(2, [0, 2]), (2, [1, 3]), (2, [4, 6]), (2, [5, 7]), (1, [])]),
    ("pascal-four", DGX1_PASCAL, [(4, [0, 1, 2, 3]), (4, [4, 5, 6, 7]), (1, [])]),
    ("pascal-eight", DGX1_PASCAL, [(8, list(range(8))), (1, [])]),
    ("volta-one", DGX1_VOLTA, [(1, [i]) for i in range(8)] + [(1, [])]),
    ("volta-two", DGX1_VOLTA, [(2, [0, 3]), (2, [1, 2]), (2, [4, 7]), (2, [5, 6]), (1, [])]),
    ("volta-four", DGX1_VOLTA, [(4, [0, 1, 2, 3]), (4, [4, 5, 6, 7]), (1, [])]),
    ("volta-eight", DGX1_VOLTA, [(8, list(range(8))), (1, [])]),
]


@pytest.mark.parametrize(("links", "steps"), [pytest.param(r[1], r[2], id=r[0]) for r in SEQUENCES])
def test_allocator_sequences(links, steps):
    scores = pair_scores(links)
    remaining = sorted({i for pair in links for i in pair})
    for size, expected in steps:
        got = allocate(remaining, [], size, scores)
        assert sorted(got) == sorted(expected)
        remaining = [g for g in remaining if g not in got]


def test_best_set_in_the_last_slot_of_the_best_partition():
    # TestBestEffortAllocateRetainsBestPartition: 14 GPUs, pairs with 2 NVLinks, 12-13 with 4.
    links = {}
    for i in range(0, 12, 2):
        links[(i, i + 1)] = links[(i + 1, i)] = ["NV2"]
    links[(12, 13)] = links[(13, 12)] = ["NV4"]
    assert sorted(allocate(list(range(14)), [], 2, pair_scores(links))) == [12, 13]


SCORES = [
    ("cross-cpu", ["SYS"], 10), ("same-cpu", ["NODE"], 20), ("host-bridge", ["PHB"], 30), ("multi-switch", ["PXB"], 40),
    ("single-switch", ["PIX"], 50), ("same-board", ["BOARD"], 60), ("one-nvlink", ["NV1"], 100),
    ("eighteen-nvlinks", ["NV18"], 1800), ("upstream-names", ["SingleSwitch", "TwoNVLINKLinks"], 250),
    ("go-gpuallocator-alias", ["CrossCPU"], 10), ("unknown", ["???"], 0), ("volta-2-3", ["PIX", "NV2"], 250),
]


@pytest.mark.parametrize(("words", "expected"), [pytest.param(r[1], r[2], id=r[0]) for r in SCORES])
def test_link_scores(words, expected):
    assert sum(link_score(w) for w in words) == expected


def test_pair_scores_are_symmetric_and_match_upstream():
    assert VOLTA[(2, 3)] == VOLTA[(3, 2)] == 250
    assert VOLTA[(0, 4)] == 210  # SYS + 2 NVLinks
    assert pair_scores(RTX8000_X4)[(0, 3)] == 200


def test_pair_scores_need_bidirectional_links():
    with pytest.raises(ValueError, match="bidirectional"):
        pair_scores({(0, 1): ["PIX", "NV1"], (1, 0): ["PIX"]})


def test_links_from_devcluster_annotation():
    from lahar.devcluster import nodes, profiles

    found = {}
    for obj in nodes.build(profiles.load("mixed")):
        annotation = obj.get("metadata", {}).get("annotations", {}).get(nodes.GPU_TOPOLOGY_ANNOTATION)
        if obj.get("kind") == "Node" and annotation:
            found[obj["metadata"]["name"]] = annotation
    t4 = next(v for k, v in found.items() if "t4" in k)
    scores = pair_scores(links_from_annotation(t4))
    assert scores[(0, 1)] == 50 and scores[(0, 2)] == 20
    assert sorted(allocate([0, 1, 2, 3], [], 2, scores)) == [0, 1]
    a100 = next(v for k, v in found.items() if "a100" in k)
    assert set(pair_scores(links_from_annotation(a100)).values()) == {1200}


def test_links_from_annotation_accepts_several_words_per_cell():
    annotation = json.dumps({"gpus": [{"index": 0}, {"index": 1}], "links": [["X", "NV2+PIX"], [["PIX", "NV2"], "X"]]})
    assert pair_scores(links_from_annotation(annotation))[(0, 1)] == 250


# --- the memoised search equals upstream's enumeration ------------------------------------------------------------


def _iterate_partitions(devices, size):
    """iterateGPUPartitions, literally (None = padding)."""
    if size <= 0 or size > len(devices):
        return
    if size == 1:
        for d in devices:
            yield [[d]]
        return
    devices = list(devices) + [None] * (-len(devices) % size)
    padding = devices.count(None)

    def rec(devs, accum):
        if len(devs) == size:
            yield [*accum, devs]
            return
        for combo in itertools.combinations(devs[1:], size - 1):
            group = [devs[0], *combo]
            pads = group.count(None)
            if pads not in (0, padding):
                continue
            remaining = [g for g in devs if g not in group]
            yield from rec(remaining, [*accum, group])

    yield from rec(devices, [])


def _reference_allocate(available, required, size, scores):
    if size <= 0 or len(available) < size or len(required) > size or len(required) > len(available):
        return []
    best, best_score = None, 0
    for partition in _iterate_partitions(available, size):
        if not any(set(required) <= set(g) and None not in g for g in partition):
            continue
        score = sum(set_score(g, scores) for g in partition)
        if best is None or score > best_score:
            best, best_score = partition, score
    groups = [g for g in (best or []) if set(required) <= set(g) and None not in g]
    if not groups:
        return []
    return max(groups, key=lambda g: set_score(g, scores))


PARTITIONS_4 = [
    ("size-0", 0, []),
    ("size-1", 1, [[[0]], [[1]], [[2]], [[3]]]),
    ("size-2", 2, [[[0, 1], [2, 3]], [[0, 2], [1, 3]], [[0, 3], [1, 2]]]),
    ("size-3", 3, [[[0, 1, 2], [3, None, None]], [[0, 1, 3], [2, None, None]], [[0, 2, 3], [1, None, None]],
                   [[0, None, None], [1, 2, 3]]]),
    ("size-4", 4, [[[0, 1, 2, 3]]]),
    ("too-many", 5, []),
]


@pytest.mark.parametrize(("size", "expected"), [pytest.param(r[1], r[2], id=r[0]) for r in PARTITIONS_4])
def test_reference_partition_enumeration(size, expected):
    assert list(_iterate_partitions([0, 1, 2, 3], size)) == expected


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 7).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.integers(0, 4), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2),
    st.integers(1, n),
    st.lists(st.integers(0, n - 1), max_size=3, unique=True),
)))
def test_allocate_equals_upstream_enumeration(case):
    n, raw, size, required = case
    scores = {}
    for (a, b), s in zip(itertools.combinations(range(n), 2), raw, strict=True):
        scores[(a, b)] = scores[(b, a)] = s * 10
    got = allocate(list(range(n)), required, size, scores)
    want = _reference_allocate(list(range(n)), required, size, scores)
    assert sorted(got) == sorted(want)
