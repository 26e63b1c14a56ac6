"""The Topology Manager merge against the kubelet's own test tables (pkg/kubelet/cm/topologymanager/*_test.go).

Upstream's cases are restated here as data in a compact notation. A hint is "<nodes><T|F>": "01T" = nodes {0,1},
preferred; "-F" = nil affinity, not preferred; "_T" = an empty (non-nil) mask; "*T" = every NUMA node of the
machine. A provider is None (no preference), or {resource: "hints" | None (no preference) | "" (cannot satisfy)}.
Every merge table runs through both the fast `merge` and the literal port `merge_cartesian`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.scheduler.topology import (
    TOPOLOGY_AFFINITY_ERROR,
    PolicyOptionError,
    PolicyOptions,
    TopologyHint,
    bitmask,
    merge,
    merge_container_scope,
    merge_pod_scope,
    numa_limit_error,
    parse_options,
)
from lahar.scheduler.topology._cartesian import compare, merge_cartesian
from lahar.scheduler.topology.merging import _Context, _filter_single_numa, _max_of_min, _merge

# --- notation -----------------------------------------------------------------------------------------------------


def hint(token: str, default: frozenset[int] = frozenset()) -> TopologyHint:
    nodes, flag = token[:-1], token[-1]
    assert flag in "TF", token
    if nodes == "-":
        affinity = None
    elif nodes == "*":
        affinity = default
    elif nodes == "_":
        affinity = frozenset()
    else:
        affinity = frozenset(int(c) for c in nodes)
    return TopologyHint(affinity, flag == "T")


def hints(spec: str) -> list[TopologyHint]:
    return [hint(t) for t in spec.split()]


def providers(*specs):
    out = []
    for spec in specs:
        if spec is None:
            out.append(None)
        else:
            out.append({res: None if h is None else hints(h) for res, h in spec.items()})
    return out


def as_hint_list(spec: str) -> list[tuple[int | None, bool]]:
    return [(h.mask, h.preferred) for h in hints(spec)]


FOUR = [0, 1, 2, 3]
EIGHT = list(range(8))
DIST_2 = {0: [10, 11], 1: [11, 10]}
DIST_4 = {0: [10, 11, 12, 12], 1: [11, 10, 12, 12], 2: [12, 12, 10, 11], 3: [12, 12, 11, 10]}
# commonNUMAInfoEightNodes, row 7 asymmetric as upstream has it.
DIST_8 = {
    0: [10, 11, 12, 12, 30, 30, 30, 30], 1: [11, 10, 12, 12, 30, 30, 30, 30],
    2: [12, 12, 10, 11, 30, 30, 30, 30], 3: [12, 12, 11, 10, 30, 30, 30, 30],
    4: [30, 30, 30, 30, 10, 11, 12, 12], 5: [30, 30, 30, 30, 11, 10, 12, 12],
    6: [30, 30, 30, 30, 12, 12, 10, 11], 7: [30, 30, 30, 30, 12, 12, 13, 10],
}
CLOSEST = {"prefer-closest-numa-nodes": "true"}

# --- merge tables -------------------------------------------------------------------------------------------------

# commonPolicyMergeTestCases: the same answer under every merging policy.
COMMON = [
    ("two-providers-same-mask-both-preferred-1", [{"r1": "0T"}, {"r2": "0T"}], "0T"),
    ("two-providers-same-mask-both-preferred-2", [{"r1": "1T"}, {"r2": "1T"}], "1T"),
    ("one-without-hints-one-single-preferred-1", [None, {"r": "0T"}], "0T"),
    ("one-without-hints-one-single-preferred-2", [None, {"r": "1T"}], "1T"),
    ("two-hints-vs-single-matching-1", [{"r1": "0T 1T"}, {"r2": "0T"}], "0T"),
    ("two-hints-vs-single-matching-2", [{"r1": "0T 1T"}, {"r2": "1T"}], "1T"),
    ("both-two-hints-narrower-preferred-wins", [{"r1": "0T 1T"}, {"r2": "0T 01F"}], "0T"),
    ("less-narrow-preferred-beats-narrower-non-preferred", [{"r1": "1T 01F"}, {"r2": "0T 1T 01F"}], "1T"),
    ("multiple-resources-same-provider", [{"r1": "1T 01F", "r2": "0T 1T 01F"}], "1T"),
]

# bestEffortPolicy.mergeTestCases (also run for restricted, on 4 and on 8 NUMA nodes).
BEST_EFFORT = [
    ("two-hints-each-some-different-bits", [{"r1": "01T 02T"}, {"r2": "01T 02T"}], "01T"),
    ("no-providers", [], "*T"),
    ("empty-provider-map", [{}], "*T"),
    ("nil-resource-hints", [{"r": None}], "*T"),
    ("empty-resource-hints-unsatisfiable", [{"r": ""}], "*F"),
    ("single-nil-affinity-preferred", [{"r": "-T"}], "*T"),
    ("single-nil-affinity-not-preferred", [{"r": "-F"}], "*F"),
    ("no-common-mask", [{"r1": "0T"}, {"r2": "1T"}], "*F"),
    ("same-mask-one-not-preferred-1", [{"r1": "0T"}, {"r2": "0F"}], "0F"),
    ("same-mask-one-not-preferred-2", [{"r1": "1T"}, {"r2": "1F"}], "1F"),
    ("one-wider-mask-both-preferred-1", [{"r1": "0T"}, {"r2": "01T"}], "0F"),
    ("two-hints-vs-single-non-preferred-matching", [{"r1": "0T 1T"}, {"r2": "01F"}], "0F"),
    ("one-wider-mask-both-preferred-2", [{"r1": "1T"}, {"r2": "01T"}], "1F"),
    ("best-non-preferred-count-1", [{"r1": "0123F 01F"}, {"r2": "01F"}], "01F"),
    ("best-non-preferred-count-2", [{"r1": "0123F 01F"}, {"r2": "03F"}], "03F"),
    ("best-non-preferred-count-3", [{"r1": "0123F 01F"}, {"r2": "12F"}], "12F"),
    ("best-non-preferred-count-4", [{"r1": "0123F 01F"}, {"r2": "23F"}], "23F"),
]

# bestEffortPolicy.mergeTestCasesNoPolicies (4 NUMA nodes, no options).
NO_OPTIONS = [
    ("best-non-preferred-count-5", [{"r1": "0123F 01F"}, {"r2": "12F 23F"}], "12F"),
    ("best-non-preferred-count-6", [{"r1": "0123F 01F"}, {"r2": "123F 12F 13F 23F"}], "12F"),
]

# bestEffortPolicy.mergeTestCasesClosestNUMA (8 NUMA nodes, prefer-closest-numa-nodes).
CLOSEST_CASES = [
    ("closest-same-width-preferred", [{"r1": "04T 02T"}, {"r2": "04T 02T"}], "02T"),
    ("closest-narrower-wins-first", [{"r1": "4T 02T"}, {"r2": "4T 02T"}], "4T"),
    ("closest-best-non-preferred-count-5", [{"r1": "0123F 01F"}, {"r2": "12F 23F"}], "23F"),
    ("closest-best-non-preferred-count-6", [{"r1": "0123F 01F"}, {"r2": "123F 12F 13F 23F"}], "23F"),
]

# singleNumaNodePolicy.mergeTestCases (2 NUMA nodes).
SINGLE_NUMA = [
    ("no-providers", [], "-T"),
    ("empty-provider-map", [{}], "-T"),
    ("nil-resource-hints", [{"r": None}], "-T"),
    ("empty-resource-hints-unsatisfiable", [{"r": ""}], "-F"),
    ("single-nil-affinity-preferred", [{"r": "-T"}], "-T"),
    ("single-nil-affinity-not-preferred", [{"r": "-F"}], "-F"),
    ("no-common-mask", [{"r1": "0T"}, {"r2": "1T"}], "-F"),
    ("same-mask-one-not-preferred-1", [{"r1": "0T"}, {"r2": "0F"}], "-F"),
    ("same-mask-one-not-preferred-2", [{"r1": "1T"}, {"r2": "1F"}], "-F"),
    ("two-hints-vs-single-non-preferred-matching", [{"r1": "0T 1T"}, {"r2": "01F"}], "-F"),
    ("single-numa-hint-generation", [{"r1": "01T", "r2": "0T 1T 01F"}], "-F"),
    ("one-no-preference-provider", [{"r1": "0T 1T 01F"}, None], "0T"),
]

IMPLS = [pytest.param(merge, id="fast"), pytest.param(merge_cartesian, id="cartesian")]


def _expand(cases, nodes, prefix=""):
    return [pytest.param(p, e, nodes, id=f"{prefix}{name}") for name, p, e in cases]


def _run(impl, policy, provs, expected, nodes, options=None, distances=None):
    got, admit = impl(policy, providers(*provs), nodes, options, distances)
    want = hint(expected, frozenset(nodes))
    assert got == want
    return got, admit


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("policy", ["best-effort", "restricted"])
@pytest.mark.parametrize(("provs", "expected", "nodes"),
                         _expand(COMMON, FOUR, "4n-") + _expand(BEST_EFFORT, FOUR, "4n-") + _expand(NO_OPTIONS, FOUR, "4n-"))
def test_best_effort_and_restricted_merge(impl, policy, provs, expected, nodes):
    got, admit = _run(impl, policy, provs, expected, nodes)
    assert admit is (True if policy == "best-effort" else got.preferred)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("policy", ["best-effort", "restricted"])
@pytest.mark.parametrize(("provs", "expected", "nodes"),
                         _expand(COMMON, EIGHT, "8n-") + _expand(BEST_EFFORT, EIGHT, "8n-")
                         + _expand(CLOSEST_CASES, EIGHT, "8n-"))
def test_merge_prefer_closest_numa_nodes(impl, policy, provs, expected, nodes):
    _run(impl, policy, provs, expected, nodes, CLOSEST, DIST_8)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("provs", "expected", "nodes"),
                         _expand(COMMON, [0, 1], "2n-") + _expand(SINGLE_NUMA, [0, 1], "2n-"))
def test_single_numa_node_merge(impl, provs, expected, nodes):
    got, admit = _run(impl, "single-numa-node", provs, expected, nodes)
    assert admit is got.preferred


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("provs", [[], [{"r": "0T 01F"}], [{"r": ""}], [None, {"r": "01F"}]], ids=["none", "a", "b", "c"])
def test_none_policy_never_merges(impl, provs):
    assert impl("none", providers(*provs), FOUR) == (TopologyHint(None, False), True)


def test_single_numa_node_ignores_prefer_closest():
    # Under single-numa-node the mask comparison is always Narrowest (spec §2.7 step 3).
    odd = {**DIST_4, 2: [12, 12, 20, 11]}  # node 2 "far from itself": Closest would take {3}, Narrowest takes {2}
    provs = providers({"r": "3T 2T"})
    assert merge("best-effort", provs, FOUR, CLOSEST, odd)[0] == hint("3T")
    assert merge("single-numa-node", provs, FOUR, CLOSEST, odd) == (TopologyHint(frozenset({2}), True), True)


def test_spec_illustration_six_cpus_and_a_node1_device():
    # spec §5.4: CPU hints [{0,1} T] and a device only on node 1 merge to {1} F.
    provs = providers({"cpu": "01T"}, {"gpu": "1T"})
    assert merge("best-effort", provs, [0, 1]) == (TopologyHint(frozenset({1}), False), True)
    assert merge("restricted", provs, [0, 1]) == (TopologyHint(frozenset({1}), False), False)
    assert merge("single-numa-node", provs, [0, 1]) == (TopologyHint(None, False), False)


def test_spec_asymmetric_row_closest_picks_lower_average():
    # spec §3.2: width-2 candidates {1,2} and {2,3}; Narrowest picks {1,2}, Closest picks {2,3} (10.5 < 11).
    provs = providers({"r": "12T 23T"})
    assert merge("best-effort", provs, EIGHT)[0] == hint("12T")
    assert merge("best-effort", provs, EIGHT, CLOSEST, DIST_8)[0] == hint("23T")


def test_machine_with_a_single_numa_node_reports_nil_under_single_numa_node():
    assert merge("single-numa-node", providers({"r": "0T"}), [0]) == (TopologyHint(None, True), True)


def test_sixteen_numa_nodes_merge_without_a_cap():
    nodes = list(range(16))
    provs = [{"cpu": [TopologyHint({n}, True) for n in (3, 9, 15)]}, {"gpu": [TopologyHint({9}, True)]}]
    assert merge("single-numa-node", provs, nodes) == (TopologyHint(frozenset({9}), True), True)
    assert numa_limit_error("single-numa-node", 16) == "unsupported on machines with more than 8 NUMA Nodes"
    assert numa_limit_error("single-numa-node", 16, {"max-allowable-numa-nodes": "16"}) is None
    assert numa_limit_error("none", 64) is None


def test_unknown_policy_is_refused_with_the_kubelet_message():
    with pytest.raises(PolicyOptionError, match='unknown policy: "strict"'):
        merge("strict", [], FOUR)


def test_prefer_closest_needs_distances():
    with pytest.raises(PolicyOptionError, match="error getting NUMA distances from cadvisor"):
        merge("best-effort", [], [0, 1], CLOSEST, {0: [10, 11]})


# --- HintMerger.compare (TestCompareHintsNarrowest) -----------------------------------------------------------------

COMPARE = [
    ("candidate-count-0-1", -1, None, "_F", "current"),
    ("candidate-count-0-2", -1, "_T", "_F", "current"),
    ("current-nil-1", -1, None, "0T", "candidate"),
    ("current-nil-2", -1, None, "0F", "candidate"),
    ("current-not-preferred-candidate-preferred", -1, "0F", "0T", "candidate"),
    ("current-preferred-candidate-not", -1, "0T", "0F", "current"),
    ("both-preferred-1", -1, "0T", "0T", "current"),
    ("both-preferred-2", -1, "01T", "0T", "candidate"),
    ("both-preferred-3", -1, "0T", "01T", "current"),
    ("neither-preferred-1.1", 1, "01F", "01F", "current"),
    ("neither-preferred-1.2", 1, "12F", "01F", "candidate"),
    ("neither-preferred-1.3", 1, "01F", "12F", "current"),
    ("neither-preferred-2.1", 2, "01F", "0F", "current"),
    ("neither-preferred-2.2", 2, "01F", "01F", "current"),
    ("neither-preferred-2.3", 2, "12F", "01F", "candidate"),
    ("neither-preferred-2.4", 2, "01F", "12F", "current"),
    ("neither-preferred-3a", 2, "0F", "012F", "current"),
    ("neither-preferred-3b", 2, "0F", "01F", "candidate"),
    ("neither-preferred-3ca.1", 3, "0F", "01F", "candidate"),
    ("neither-preferred-3ca.2", 3, "0F", "12F", "candidate"),
    ("neither-preferred-3ca.3", 4, "01F", "123F", "candidate"),
    ("neither-preferred-3cb", 4, "123F", "01F", "current"),
    ("neither-preferred-3cc.1", 4, "012F", "012F", "current"),
    ("neither-preferred-3cc.2", 4, "012F", "123F", "current"),
    ("neither-preferred-3cc.3", 4, "123F", "012F", "candidate"),
]


def _as_pair(token):
    h = hint(token)
    return (h.mask, h.preferred)


@pytest.mark.parametrize(("target", "current", "candidate", "expected"),
                         [pytest.param(*row[1:], id=row[0]) for row in COMPARE])
def test_compare_hints_narrowest(target, current, candidate, expected):
    ctx = _Context.build("best-effort", FOUR, PolicyOptions(), None)
    cur = None if current is None else _as_pair(current)
    cand = _as_pair(candidate)
    got = compare(cur, cand, target, ctx)
    assert got is (cur if expected == "current" else cand)


# --- maxOfMinAffinityCounts, filterSingleNumaHints, canAdmitPodResult ----------------------------------------------

MAX_OF_MIN = [
    ("no-lists", [], 0),
    ("empty-mask", ["_T"], 0),
    ("one-node", ["0T"], 1),
    ("two-nodes", ["01T"], 2),
    ("narrowest-of-two", ["01T 012T"], 2),
    ("max-over-lists", ["01T 012T", "012T"], 3),
    ("max-over-lists-2", ["01T 012T", "012T 0123T"], 3),
]


@pytest.mark.parametrize(("lists", "expected"), [pytest.param(r[1], r[2], id=r[0]) for r in MAX_OF_MIN])
def test_max_of_min_affinity_counts(lists, expected):
    assert _max_of_min([as_hint_list(spec) for spec in lists]) == expected


SINGLE_NUMA_FILTER = [
    ("empty", [], []),
    ("nil-masks-1", ["-F", "-T"], ["", "-T"]),
    ("nil-masks-2", ["0T -F", "1T -T"], ["0T", "1T -T"]),
    ("empty-resource", ["1T 0T -F", ""], ["1T 0T", ""]),
    ("wide-masks", ["0T 1T 12F 012F -F", "12F 012F 02F 3F", "12F 012F 02F"], ["0T 1T", "", ""]),
]


@pytest.mark.parametrize(("lists", "expected"), [pytest.param(r[1], r[2], id=r[0]) for r in SINGLE_NUMA_FILTER])
def test_filter_single_numa_hints(lists, expected):
    got = _filter_single_numa([as_hint_list(spec) if spec else [] for spec in lists])
    assert got == [as_hint_list(spec) if spec else [] for spec in expected]


ADMIT = [
    ("best-effort-not-preferred", "best-effort", False, True),
    ("best-effort-preferred", "best-effort", True, True),
    ("restricted-not-preferred", "restricted", False, False),
    ("restricted-preferred", "restricted", True, True),
    ("single-numa-node-not-preferred", "single-numa-node", False, False),
    ("none-not-preferred", "none", False, True),
]


@pytest.mark.parametrize(("policy", "preferred", "expected"), [pytest.param(*r[1:], id=r[0]) for r in ADMIT])
def test_can_admit_pod_result(policy, preferred, expected):
    from lahar.scheduler.topology import can_admit

    assert can_admit(policy, TopologyHint(None, preferred)) is expected


# --- scopes (TestAdmit: 14 cases, same expectations under container and pod scope) --------------------------------

TEST_ADMIT = [
    ("besteffort-qos-none-policy", "none", [], True),
    ("guaranteed-none-policy", "none", [], True),
    ("besteffort-qos-restricted-no-hints", "restricted", [None], True),
    ("besteffort-qos-restricted-nil-provider", "restricted", [None], True),
    ("guaranteed-best-effort-preferred", "best-effort", [{"r": "0T 01F"}], True),
    ("guaranteed-best-effort-two-preferred", "best-effort", [{"r": "0T 1T 01F"}], True),
    ("burstable-best-effort-two-preferred", "best-effort", [{"r": "0T 1T 01F"}], True),
    ("guaranteed-best-effort-none-preferred", "best-effort", [{"r": "01F"}], True),
    ("guaranteed-restricted-preferred", "restricted", [{"r": "0T 01F"}], True),
    ("burstable-restricted-preferred", "restricted", [{"r": "0T 01F"}], True),
    ("guaranteed-restricted-two-preferred", "restricted", [{"r": "0T 1T 01F"}], True),
    ("burstable-restricted-two-preferred", "restricted", [{"r": "0T 1T 01F"}], True),
    ("guaranteed-restricted-none-preferred", "restricted", [{"r": "01F"}], False),
    ("burstable-restricted-none-preferred", "restricted", [{"r": "01F"}], False),
]


@pytest.mark.parametrize(("policy", "provs", "expected"), [pytest.param(*r[1:], id=r[0]) for r in TEST_ADMIT])
def test_admit_container_and_pod_scope(policy, provs, expected):
    container = merge_container_scope(policy, [providers(*provs)], [0, 1])
    pod = merge_pod_scope(policy, providers(*provs), [0, 1])
    assert container.admit is expected
    assert pod.admit is expected
    if not expected:
        assert container.reason == pod.reason == TOPOLOGY_AFFINITY_ERROR
        assert container.message == "Resources cannot be allocated with Topology locality"


def test_container_scope_rejects_the_pod_at_the_first_refused_container():
    containers = [providers({"cpu": "0T"}), providers({"cpu": "01F"}), providers({"cpu": "1T"})]
    got = merge_container_scope("restricted", containers, [0, 1])
    assert (got.admit, got.rejected, len(got.hints)) == (False, 1, 2)
    assert got.hints[0] == hint("0T")


def test_pod_scope_gives_every_container_the_same_hint():
    got = merge_pod_scope("single-numa-node", providers({"cpu": "0T 1T 01F"}, {"gpu": "1T"}), [0, 1], containers=3)
    assert got.admit and got.hints == (hint("1T"),) * 3


def test_none_policy_scopes_store_the_zero_hint():
    assert merge_container_scope("none", [[], []], [0, 1]).hints == (TopologyHint(None, False),) * 2


# --- policy options (policy_options_test.go, topology_manager_test.go NewManager) --------------------------------

OPTIONS = [
    ("prefer-closest-and-max", {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "8"},
     PolicyOptions(True, 8), None),
    ("max-12", {"max-allowable-numa-nodes": "12"}, PolicyOptions(False, 12), None),
    ("empty", {}, PolicyOptions(False, 8), None),
    ("none-given", None, PolicyOptions(False, 8), None),
    ("go-bool-spelling", {"prefer-closest-numa-nodes": "T"}, PolicyOptions(True, 8), None),
    ("bad-bool", {"prefer-closest-numa-nodes": "not a boolean"}, None, 'bad value for option "prefer-closest-numa-nodes"'),
    ("bad-int", {"max-allowable-numa-nodes": "can't parse to int"}, None,
     'unable to convert policy option to integer "max-allowable-numa-nodes"'),
    ("below-8", {"max-allowable-numa-nodes": "4"}, None,
     'the minimum value of "max-allowable-numa-nodes" should not be less than 8'),
    ("unknown-option", {"fancy-new-option": "true"}, None, 'unknown Topology Manager Policy option: "fancy-new-option"'),
]


@pytest.mark.parametrize(("given", "expected", "error"), [pytest.param(*r[1:], id=r[0]) for r in OPTIONS])
def test_parse_policy_options(given, expected, error):
    if error:
        with pytest.raises(PolicyOptionError, match=error):
            parse_options(given)
    else:
        assert parse_options(given) == expected


NUMA_LIMIT = [
    ("eight-nodes-default", "best-effort", 8, None, None),
    ("nine-nodes-default", "best-effort", 9, None, "unsupported on machines with more than 8 NUMA Nodes"),
    ("nine-nodes-raised", "restricted", 9, {"max-allowable-numa-nodes": "12"}, None),
    ("thirteen-nodes-raised", "restricted", 13, {"max-allowable-numa-nodes": "12"},
     "unsupported on machines with more than 12 NUMA Nodes"),
    ("none-policy-never-checks", "none", 100, {"bogus": "x"}, None),
]


@pytest.mark.parametrize(("policy", "count", "options", "expected"), [pytest.param(*r[1:], id=r[0]) for r in NUMA_LIMIT])
def test_numa_limit_error_as_new_manager_reports_it(policy, count, options, expected):
    assert numa_limit_error(policy, count, options) == expected


# --- NUMA distances (numa_info_test.go) ---------------------------------------------------------------------------

AVERAGE = [
    ("one-node", [0], {0: [10]}, [0], 10.0),
    ("two-nodes-one-set", [0, 1], DIST_2, [0], 10.0),
    ("two-nodes-both-set", [0, 1], DIST_2, [0, 1], 10.5),
    ("four-nodes-two-set", FOUR, DIST_4, [0, 2], 11.0),
    ("four-nodes-three-set", FOUR, DIST_4, [0, 2, 3], 11.11111111111111),
    ("no-nodes", [], {}, [], 0.0),
]


@pytest.mark.parametrize(("nodes", "distances", "mask", "expected"), [pytest.param(*r[1:], id=r[0]) for r in AVERAGE])
def test_calculate_average_distance(nodes, distances, mask, expected):
    ctx = _Context.build("best-effort", nodes, PolicyOptions(prefer_closest_numa=True), distances)
    assert ctx.average(bitmask.from_bits(*mask)) == expected


FLAT_3 = {i: [10, 10, 10] for i in range(3)}
FLAT_4 = {i: [10, 10, 10, 10] for i in range(4)}
CLOSEST_ROWS = [
    ("different-width-current-narrower", FOUR, DIST_4, [0], [0, 2], "current"),
    ("same-distance-current-lower-bits", [0, 1, 2], FLAT_3, [0, 1], [0, 2], "current"),
    ("same-distance-candidate-lower-bits", FOUR, FLAT_4, [0, 3], [0, 2], "candidate"),
    ("candidate-closer", FOUR, DIST_4, [0, 3], [0, 1], "candidate"),
    ("current-closer", FOUR, DIST_4, [2, 3], [0, 3], "current"),
]


@pytest.mark.parametrize(("nodes", "distances", "current", "candidate", "expected"),
                         [pytest.param(*r[1:], id=r[0]) for r in CLOSEST_ROWS])
def test_closest(nodes, distances, current, candidate, expected):
    ctx = _Context.build("best-effort", nodes, PolicyOptions(prefer_closest_numa=True), distances)
    wins = ctx.better_mask(bitmask.from_bits(*current), bitmask.from_bits(*candidate))
    assert wins is (expected == "candidate")


# --- bitmask (bitmask_test.go) ------------------------------------------------------------------------------------

BITMASK_STRINGS = [
    ("empty", [], "00"), ("bit-0", [0], "01"), ("bit-1", [1], "10"), ("bits-0-1", [0, 1], "11"), ("bit-3", [3], "1000"),
]


@pytest.mark.parametrize(("ids", "expected"), [pytest.param(r[1], r[2], id=r[0]) for r in BITMASK_STRINGS])
def test_bitmask_string(ids, expected):
    assert bitmask.to_string(bitmask.from_bits(*ids)) == expected


AND_OR = [
    ("11-and-11", [[0, 1], [0, 1]], "11", "11"),
    ("11-and-10", [[0, 1], [1]], "10", "11"),
    ("01-and-11", [[0], [0, 1]], "01", "11"),
    ("11-11-10", [[0, 1], [0, 1], [1]], "10", "11"),
    ("01-01-10-11", [[0], [0], [1], [0, 1]], "00", "11"),
    ("1111-1110-1100-1000", [[0, 1, 2, 3], [1, 2, 3], [2, 3], [3]], "1000", "1111"),
    ("01-or-00", [[0], []], "00", "01"),
]


@pytest.mark.parametrize(("masks", "and_mask", "or_mask"), [pytest.param(*r[1:], id=r[0]) for r in AND_OR])
def test_bitmask_and_or(masks, and_mask, or_mask):
    values = [bitmask.from_bits(*m) for m in masks]
    conj, disj = values[0], values[0]
    for v in values[1:]:
        conj, disj = conj & v, disj | v
    assert (bitmask.to_string(conj), bitmask.to_string(disj)) == (and_mask, or_mask)


NARROWER = [
    ("unequal-count-1", [0], [0, 1], True),
    ("unequal-count-2", [0, 1], [0], False),
    ("equal-count-1", [0], [1], True),
    ("equal-count-2", [1], [0], False),
    ("numeric-not-lower-bits", [1, 2], [0, 3], True),
    ("equal-masks", [0, 1], [0, 1], False),
]


@pytest.mark.parametrize(("a", "b", "expected"), [pytest.param(*r[1:], id=r[0]) for r in NARROWER])
def test_bitmask_is_narrower(a, b, expected):
    assert bitmask.is_narrower(bitmask.from_bits(*a), bitmask.from_bits(*b)) is expected


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_iterate_bitmasks_visits_every_non_empty_mask(n):
    masks = list(bitmask.iterate(range(n)))
    assert len(masks) == len(set(masks)) == (1 << n) - 1
    assert [m.bit_count() for m in masks] == sorted(m.bit_count() for m in masks)


def test_bitmask_count_bits_and_negative_ids():
    assert bitmask.count(bitmask.from_bits(0, 1)) == 2
    assert bitmask.bits(bitmask.from_bits(3, 0, 64)) == [0, 3, 64]  # no 64-bit cap
    with pytest.raises(ValueError):
        bitmask.from_bits(-1)


# --- the fast merge equals the cartesian one ----------------------------------------------------------------------


@st.composite
def merge_inputs(draw):
    n = draw(st.integers(1, 5))
    nodes = draw(st.sampled_from([list(range(n)), [x * 2 + 1 for x in range(n)]]))
    universe = list(range(max(nodes) + 2))  # a stray bit outside the machine now and then
    affinity = st.one_of(st.none(), st.frozensets(st.sampled_from(universe), max_size=len(universe)))
    one_hint = st.builds(TopologyHint, affinity, st.booleans())
    resource = st.one_of(st.none(), st.just([]), st.lists(one_hint, min_size=1, max_size=5))
    provider = st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b", "c"]), resource, max_size=2))
    provs = draw(st.lists(provider, max_size=4))
    policy = draw(st.sampled_from(["best-effort", "restricted", "single-numa-node"]))
    options, distances = None, None
    if draw(st.booleans()):
        options = CLOSEST
        distances = {a: [draw(st.integers(10, 14)) if a != b else 10 for b in nodes] for a in nodes}
    return policy, provs, nodes, options, distances


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merge_inputs(), st.sampled_from(["auto", "sets", "zeta"]))
def test_fast_merge_equals_cartesian_merge(inputs, strategy):
    policy, provs, nodes, options, distances = inputs
    expected = merge_cartesian(policy, provs, nodes, options, distances)
    assert _merge(policy, provs, nodes, options, distances, strategy) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 255), min_size=1, max_size=12), min_size=1, max_size=3),
       st.lists(st.booleans(), min_size=36, max_size=36))
def test_fast_merge_equals_cartesian_on_eight_nodes(masks, flags):
    flag = iter(flags * 2)
    provs = [{"r": [TopologyHint(bitmask.to_frozenset(m), next(flag)) for m in lst]} for lst in masks]
    for policy in ("best-effort", "single-numa-node"):
        expected = merge_cartesian(policy, provs, EIGHT)
        for strategy in ("sets", "zeta"):
            assert _merge(policy, provs, EIGHT, None, None, strategy) == expected
