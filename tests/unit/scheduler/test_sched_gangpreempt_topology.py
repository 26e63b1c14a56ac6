"""gangpreempt with HyperNodes and subgroups: the nomination a preemptor gets (parsed, encoded, the nodes it holds
from other jobs) and the victim subgroups a gang can lose as tables, a Hypothesis invariant (a victim subgroup is
never split), then sessions: the next session places the gang where it was nominated, other jobs keep off its
nodes, a preemptor's subgroups each get a whole HyperNode, a victim loses whole subgroups."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.scheduler.actions import _network, _subgroups
from lahar.scheduler.actions._network import Nomination
from lahar.scheduler.framework.session import Decisions
from tests.builders import pod, podgroup, queue, tiers_conf
from tests.unit.scheduler.test_sched_gangpreempt import evicted, hypernode, n, run, running, wanting

KEY = _network.NOMINATED_HYPERNODES_ANNOTATION
TREE = {"s0", "s1", "s2", "r0", "r1"}

# --- the nomination as data ----------------------------------------------------------------------------------

PARSE = [
    dict(id="job-and-subgroups", text='{"job":"s2","subgroups":{"tp-0":"s0","tp-1":"s1"}}',
         want=Nomination("s2", {"tp-0": "s0", "tp-1": "s1"})),
    dict(id="job-only", text='{"job":"s1","subgroups":{}}', want=Nomination("s1")),
    dict(id="subgroups-without-job-domain", text='{"job":"","subgroups":{"tp-0":"s0"}}',
         want=Nomination("", {"tp-0": "s0"})),
    dict(id="empty-value", text="", want=Nomination()),
    dict(id="not-json", text="s1", want=Nomination()),
    dict(id="json-but-not-an-object", text='["s1"]', want=Nomination()),
    dict(id="job-hypernode-gone", text='{"job":"gone"}', want=Nomination()),
    dict(id="job-gone-takes-its-subgroups-along", text='{"job":"gone","subgroups":{"tp-0":"s0"}}',
         want=Nomination()),
    dict(id="one-subgroup-hypernode-gone", text='{"job":"s2","subgroups":{"tp-0":"s0","tp-1":"gone"}}',
         want=Nomination("s2", {"tp-0": "s0"})),
    dict(id="wrong-types-ignored", text='{"job":7,"subgroups":{"tp-0":3}}', want=Nomination()),
]


@pytest.mark.parametrize("case", PARSE, ids=[c["id"] for c in PARSE])
def test_parse_nomination(case: dict[str, Any]) -> None:
    assert _network.parse_nomination(case["text"], TREE) == case["want"]


@pytest.mark.parametrize("nom", [Nomination("s2", {"b": "s1", "a": "s0"}), Nomination("s1")], ids=["subs", "job"])
def test_encode_reads_back(nom: Nomination) -> None:
    text = _network.encode_nomination(nom)
    assert _network.parse_nomination(text, TREE) == nom
    assert list(json.loads(text)["subgroups"]) == sorted(nom.subgroups)


def test_no_nomination_encodes_as_empty() -> None:
    assert _network.encode_nomination(Nomination()) == ""


MEMBERS = {"s0": frozenset({"n1", "n2"}), "s1": frozenset({"n3", "n4"}), "s2": frozenset({"n1", "n2", "n3", "n4"})}
HELD = [
    dict(id="pods-nominated-nodes", nominees={"hi": (Nomination("s1"), frozenset({"n3"}))}, job="other",
         want={"n3"}),
    dict(id="own-nomination-holds-nothing", nominees={"hi": (Nomination("s1"), frozenset({"n3"}))}, job="hi",
         want=set()),
    dict(id="no-pod-nominations-whole-hypernode", nominees={"hi": (Nomination("s1"), frozenset())}, job="other",
         want={"n3", "n4"}),
    dict(id="subgroups-hypernodes-not-the-job-domain",
         nominees={"hi": (Nomination("s2", {"tp-0": "s0"}), frozenset())}, job="other", want={"n1", "n2"}),
    dict(id="empty-nomination-ignored", nominees={"hi": (Nomination(), frozenset({"n1"}))}, job="other",
         want=set()),
    dict(id="two-nominees-add-up",
         nominees={"a": (Nomination("s0"), frozenset({"n1"})), "b": (Nomination("s1"), frozenset({"n4"}))},
         job="c", want={"n1", "n4"}),
]


@pytest.mark.parametrize("case", HELD, ids=[c["id"] for c in HELD])
def test_held_nodes(case: dict[str, Any]) -> None:
    assert _network.held_nodes(case["nominees"], case["job"], MEMBERS) == case["want"]


# --- the subgroups a victim may lose -----------------------------------------------------------------------------

def vg(uid: str, running: int, local: int, *, size: int = 2, policy: str = "g") -> _subgroups.VictimGroup:
    return _subgroups.VictimGroup(uid, policy, size, tuple(f"{uid}/{i}" for i in range(running)), local)


SAFE = [
    dict(id="one-above-min-sub-groups", groups=[vg("g-0", 2, 2), vg("g-1", 2, 2)], mins={"g": 1}, surplus=2,
         want=["g-0"]),
    dict(id="min-sub-groups-keeps-both", groups=[vg("g-0", 2, 2), vg("g-1", 2, 2)], mins={"g": 2}, surplus=4,
         want=[]),
    dict(id="min-available-caps-the-pods", groups=[vg("g-0", 2, 2), vg("g-1", 2, 2)], mins={"g": 0}, surplus=3,
         want=["g-0"]),
    dict(id="no-pods-in-the-domain-not-offered", groups=[vg("g-0", 2, 0), vg("g-1", 2, 1)], mins={}, surplus=4,
         want=["g-1"]),
    dict(id="broken-subgroup-first-and-free", groups=[vg("g-0", 2, 2), vg("g-1", 1, 1)], mins={"g": 1}, surplus=3,
         want=["g-1"]),
    dict(id="more-pods-here-first", groups=[vg("g-0", 2, 1), vg("g-1", 2, 2)], mins={"g": 1}, surplus=2,
         want=["g-1"]),
    dict(id="minimums-per-policy", groups=[vg("a-0", 2, 2, policy="a"), vg("b-0", 2, 2, policy="b"),
                                           vg("b-1", 2, 2, policy="b")], mins={"a": 1, "b": 1}, surplus=6,
         want=["b-0"]),
    dict(id="no-surplus-nothing", groups=[vg("g-0", 2, 2), vg("g-1", 2, 2)], mins={}, surplus=0, want=[]),
]


@pytest.mark.parametrize("case", SAFE, ids=[c["id"] for c in SAFE])
def test_safe_subgroups(case: dict[str, Any]) -> None:
    assert _subgroups.safe_subgroups(case["groups"], case["mins"], case["surplus"]) == case["want"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(0, 4), st.sampled_from("ab")),
                min_size=1, max_size=6),
       st.dictionaries(st.sampled_from("ab"), st.integers(0, 3)), st.integers(0, 12))
def test_a_victim_keeps_its_minimums_and_loses_only_whole_subgroups(
        spec: list[tuple[int, int, int, str]], mins: dict[str, int], surplus: int) -> None:
    groups = [vg(f"{p}-{i}", r, min(loc, r), size=s, policy=p) for i, (r, s, loc, p) in enumerate(spec)]
    got = _subgroups.safe_subgroups(groups, mins, surplus)
    by = {g.uid: g for g in groups}
    assert len(set(got)) == len(got) and all(by[u].local > 0 for u in got)
    assert sum(len(by[u].running) for u in got) <= surplus  # whole subgroups, within minAvailable
    for policy, m in mins.items():
        ready = [g for g in groups if g.policy == policy and len(g.running) >= g.size]
        left = [g for g in ready if g.uid not in got]
        assert len(left) >= min(m, len(ready))  # never below minSubGroups because of us


# --- sessions: nomination ------------------------------------------------------------------------------------

RACKS = [hypernode("s0", 1, "n1", "n2"), hypernode("s1", 1, "n3", "n4"), hypernode("s2", 2, children=("s0", "s1"))]
NODES = [n("n1"), n("n2"), n("n3"), n("n4")]


def hard(pg: podgroup, tier: int = 1) -> podgroup:
    pg.obj["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    return pg


def first_session() -> Decisions:
    """w (as high as hi: not a victim) fills s0, the low gang z fills s1: hi frees s1."""
    return run(nodes=NODES, hypernodes=RACKS,
               podgroups=[running("w", prio="high", min_=2), running("z", min_=2), hard(wanting("hi", 2))],
               pods=[pod("w1").req("2", "1G").group("w").on("n1"), pod("w2").req("2", "1G").group("w").on("n2"),
                     pod("z1").req("2", "1G").group("z").on("n3"), pod("z2").req("2", "1G").group("z").on("n4"),
                     pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")])


def hi_after(d: Decisions) -> tuple[podgroup, list[pod]]:
    """hi as the next session reads it: its PodGroup annotated, its pods nominated to their nodes."""
    pg = hard(wanting("hi", 2)).annotate(**d.podgroup_annotations["c1/hi"])
    pods = [pod(name).req("2", "1G").group("hi") for name in ("b1", "b2")]
    for p in pods:
        p.obj.setdefault("status", {})["nominatedNodeName"] = d.pipelined[f"c1/{p.obj['metadata']['name']}"]
    return pg, pods


def test_gangpreempt_nominates_the_hypernode_it_freed() -> None:
    d = first_session()
    assert evicted(d) == ["z1", "z2"]
    assert sorted(d.pipelined.values()) == ["n3", "n4"]
    assert _network.parse_nomination(d.podgroup_annotations["c1/hi"][KEY], TREE) == Nomination("s1")


@pytest.mark.parametrize("nominated", [True, False], ids=["nominated", "control-without-nomination"])
def test_the_next_session_places_the_gang_in_the_freed_rack(nominated: bool) -> None:
    """Between the sessions z is gone and w finished: both racks are free. The nomination keeps hi in s1 (without
    it the gradient's tie-break picks s0), and redeeming it clears the annotation."""
    pg, pods = hi_after(first_session())
    if not nominated:
        pg.obj["metadata"]["annotations"].pop(KEY)
    d = run(nodes=NODES, hypernodes=RACKS, podgroups=[pg], pods=pods)
    want = ["n3", "n4"] if nominated else ["n1", "n2"]
    assert sorted(d.bind_map().values()) == want
    if nominated:
        assert d.podgroup_annotations["c1/hi"][KEY] == ""
        assert d.podgroup_annotations["c1/hi"]["volcano.sh/job-allocated-hypernode"] == "s1"


# no proportion: queue a0 is simply ahead of c1 in queue order, so `other` is allocated first
NO_SHARES = tiers_conf("enqueue, allocate, gangpreempt", ["priority", "gang", "conformance"],
                       ["predicates", "nodeorder", "network-topology-aware"])


@pytest.mark.parametrize("nominated", [True, False], ids=["nominated", "control-without-nomination"])
def test_another_job_keeps_off_the_nominated_nodes(nominated: bool) -> None:
    """z is gone but w still runs: s1 is the only free rack. `other`, allocated first, takes it unless the
    nomination holds it for hi."""
    pg, pods = hi_after(first_session())
    if not nominated:
        pg.obj["metadata"]["annotations"].pop(KEY)
    d = run(nodes=NODES, hypernodes=RACKS, queues=[queue("c1"), queue("a0")], conf=NO_SHARES,
            podgroups=[running("w", prio="high", min_=2), pg, hard(wanting("other", 2, q="a0"))],
            pods=[pod("w1").req("2", "1G").group("w").on("n1"), pod("w2").req("2", "1G").group("w").on("n2"),
                  *pods, pod("o1").req("2", "1G").group("other"), pod("o2").req("2", "1G").group("other")])
    winner = "b" if nominated else "o"
    assert d.bind_map() == {f"c1/{winner}1": "n3", f"c1/{winner}2": "n4"}


def test_while_its_victims_terminate_the_gang_stays_pipelined_where_nominated() -> None:
    """z's pods are still terminating and s0 is free: hi stays pipelined in s1 (not bound in s0, nothing more
    evicted) and keeps its nomination."""
    pg, pods = hi_after(first_session())
    d = run(nodes=NODES, hypernodes=RACKS, podgroups=[running("z", min_=2), pg],
            pods=[pod("z1").req("2", "1G").group("z").on("n3").deleting(),
                  pod("z2").req("2", "1G").group("z").on("n4").deleting(), *pods])
    assert d.bind_map() == {} and d.evictions == []
    assert sorted(d.pipelined.values()) == ["n3", "n4"]
    assert KEY not in d.podgroup_annotations.get("c1/hi", {})


@pytest.mark.parametrize("nominated", [True, False], ids=["pods-nominated", "control-pods-not-nominated"])
def test_inside_the_nominated_hypernode_the_pods_go_to_their_nominated_nodes(nominated: bool) -> None:
    """s1 has three free nodes; hi's pods were nominated to n4 and n5 (Volcano's per-task NominatedNodeName):
    they go there, not to the first nodes of the node order."""
    racks = [hypernode("s0", 1, "n1", "n2"), hypernode("s1", 1, "n3", "n4", "n5"),
             hypernode("s2", 2, children=("s0", "s1"))]
    pg = hard(wanting("hi", 2)).annotate(**{KEY: _network.encode_nomination(Nomination("s1"))})
    pods = [pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")]
    if nominated:
        for p, node in zip(pods, ("n4", "n5"), strict=True):
            p.obj.setdefault("status", {})["nominatedNodeName"] = node
    d = run(nodes=[*NODES, n("n5")], hypernodes=racks, podgroups=[pg], pods=pods)
    got = set(d.bind_map().values())
    assert got <= {"n3", "n4", "n5"} and len(got) == 2
    assert (got == {"n4", "n5"}) is nominated


def test_a_nomination_that_no_longer_fits_lapses() -> None:
    """The rack hi was nominated to was taken (s1 full again): the nomination is dropped, hi is placed by the
    normal search (s0, free now)."""
    pg, pods = hi_after(first_session())
    d = run(nodes=NODES, hypernodes=RACKS,
            podgroups=[running("w", prio="high", min_=2), pg],
            pods=[pod("w1").req("2", "1G").group("w").on("n3"), pod("w2").req("2", "1G").group("w").on("n4"),
                  *pods])
    assert sorted(d.bind_map().values()) == ["n1", "n2"]
    assert d.podgroup_annotations["c1/hi"][KEY] == ""


# --- sessions: subgroups -----------------------------------------------------------------------------------------

THREE_RACKS = [hypernode("r0", 1, "n1", "n2"), hypernode("r1", 1, "n3", "n4"), hypernode("r2", 1, "n5", "n6"),
               hypernode("sp", 2, children=("r0", "r1", "r2"))]


def tp(name: str, *, subgroups: int, min_sub: int, min_: int, prio: str = "high", phase: str = "Inqueue",
       rack: bool = True) -> podgroup:
    pg = podgroup(name).min(min_).phase(phase).priority_class(prio).queue("c1")
    policy: dict[str, Any] = {"name": "tp", "matchLabelKeys": ["rank"], "subGroupSize": 2, "minSubGroups": min_sub}
    if rack:
        policy["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    pg.obj["spec"]["subGroupPolicy"] = [policy]
    return pg


def test_every_preemptor_subgroup_gets_a_whole_rack_with_the_fewest_victims() -> None:
    """Each rack has one free node and one low single-pod gang. Evicting one gang would cover the aggregate, but
    a subgroup needs both nodes of a rack: two gangs go, and each subgroup lands in the rack it freed."""
    pods = [pod("x1").req("2", "1G").group("x").on("n1"), pod("y1").req("2", "1G").group("y").on("n3"),
            pod("v1").req("2", "1G").group("v").on("n5")]
    pods += [pod(f"t{g}{i}").req("2", "1G").group("hi").label(rank=str(g)) for g in (0, 1) for i in (0, 1)]
    hi = hard(tp("hi", subgroups=2, min_sub=2, min_=4), tier=2)
    d = run(nodes=[n(f"n{i}") for i in range(1, 7)], hypernodes=THREE_RACKS,
            podgroups=[running("x"), running("y"), running("v"), hi], pods=pods)
    assert len(d.evictions) == 2
    rack = {"n1": "r0", "n2": "r0", "n3": "r1", "n4": "r1", "n5": "r2", "n6": "r2"}
    for g in (0, 1):
        assert len({rack[d.pipelined[f"c1/t{g}{i}"]] for i in (0, 1)}) == 1, d.pipelined  # never split
    nom = _network.parse_nomination(d.podgroup_annotations["c1/hi"][KEY], THREE_RACKS_NAMES)
    assert nom.job == "sp" and set(nom.subgroups) == {"tp-0", "tp-1"}
    assert {rack[d.pipelined["c1/t00"]], rack[d.pipelined["c1/t10"]]} == set(nom.subgroups.values())


THREE_RACKS_NAMES = {"r0", "r1", "r2", "sp"}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["", "low", "high"]), min_size=6, max_size=6), st.integers(1, 2))
def test_a_preemptor_subgroup_is_never_split_across_racks(occupants: list[str], min_sub: int) -> None:
    """Random occupancy of three racks (free, a low gang that may go, a high one that may not): whatever
    gangpreempt does, each pipelined subgroup sits in one rack and at least minSubGroups are whole."""
    pods, pgs = [], []
    for i, prio in enumerate(occupants, start=1):
        if prio:
            pgs.append(running(f"o{i}", prio=prio))
            pods.append(pod(f"o{i}").req("2", "1G").group(f"o{i}").on(f"n{i}"))
    pods += [pod(f"t{g}{i}").req("2", "1G").group("hi").label(rank=str(g)) for g in (0, 1) for i in (0, 1)]
    hi = hard(tp("hi", subgroups=2, min_sub=min_sub, min_=2 * min_sub), tier=2)
    d = run(nodes=[n(f"n{i}") for i in range(1, 7)], hypernodes=THREE_RACKS, podgroups=[*pgs, hi], pods=pods)
    rack = {f"n{i}": f"r{(i - 1) // 2}" for i in range(1, 7)}
    whole = 0
    for g in (0, 1):
        got = [d.pipelined[k] for k in (f"c1/t{g}0", f"c1/t{g}1") if k in d.pipelined]
        assert len({rack[x] for x in got}) <= 1, d.pipelined
        whole += len(got) == 2
        assert len(got) in (0, 2)
    assert not d.pipelined or whole >= min_sub
    assert all(e.name.startswith("o") and occupants[int(e.name[1:]) - 1] == "low" for e in d.evictions)


def test_a_subgroup_takes_the_rack_that_needs_the_fewest_victims_even_when_the_aggregate_fits() -> None:
    """Five of eight nodes are free, enough for the gang's 4 pods in sum, but the subgroup needs a whole rack of
    4: r1 (one victim) is freed, not r0 (two)."""
    racks = [hypernode("r0", 1, "n1", "n2", "n3", "n4"), hypernode("r1", 1, "n5", "n6", "n7", "n8"),
             hypernode("sp", 2, children=("r0", "r1"))]
    pods = [pod("x1").req("2", "1G").group("x").on("n1"), pod("y1").req("2", "1G").group("y").on("n2"),
            pod("v1").req("2", "1G").group("v").on("n6")]
    pods += [pod(f"t0{i}").req("2", "1G").group("hi").label(rank="0") for i in range(4)]
    policy_pg = hard(tp("hi", subgroups=1, min_sub=1, min_=4), tier=2)
    policy_pg.obj["spec"]["subGroupPolicy"][0]["subGroupSize"] = 4
    d = run(nodes=[n(f"n{i}") for i in range(1, 9)], hypernodes=racks,
            podgroups=[running("x"), running("y"), running("v"), policy_pg], pods=pods)
    assert evicted(d) == ["v1"]
    assert sorted(d.pipelined.values()) == ["n5", "n6", "n7", "n8"]


@pytest.mark.parametrize("nominated", [True, False], ids=["nominated", "control-without-nomination"])
def test_the_next_session_places_each_subgroup_in_its_nominated_rack(nominated: bool) -> None:
    """All three racks are free; the nomination says tp-0 → r2, tp-1 → r1 (where gangpreempt freed room). Without
    it the subgroups take r0 and r1 (tightest fit, then by name)."""
    hi = hard(tp("hi", subgroups=2, min_sub=2, min_=4), tier=2)
    if nominated:
        hi.annotate(**{KEY: _network.encode_nomination(Nomination("sp", {"tp-0": "r2", "tp-1": "r1"}))})
    pods = [pod(f"t{g}{i}").req("2", "1G").group("hi").label(rank=str(g)) for g in (0, 1) for i in (0, 1)]
    d = run(nodes=[n(f"n{i}") for i in range(1, 7)], hypernodes=THREE_RACKS, podgroups=[hi], pods=pods)
    rack = {f"n{i}": f"r{(i - 1) // 2}" for i in range(1, 7)}
    got = {g: {rack[d.bind_map()[f"c1/t{g}{i}"]] for i in (0, 1)} for g in (0, 1)}
    assert got == ({0: {"r2"}, 1: {"r1"}} if nominated else {0: {"r0"}, 1: {"r1"}})
    if nominated:
        assert d.podgroup_annotations["c1/hi"][KEY] == ""


def test_a_victim_with_subgroups_loses_a_whole_subgroup() -> None:
    """lo runs 2 subgroups of 2 (minSubGroups 1, minAvailable 2): its safe bundle is one whole subgroup, not the
    first two pods by name (p1 of one subgroup and p2 of the other)."""
    lo = tp("lo", subgroups=2, min_sub=1, min_=2, prio="low", phase="Running", rack=False)
    pods = [pod("p1").req("2", "1G").group("lo").label(rank="0").on("n1"),
            pod("p2").req("2", "1G").group("lo").label(rank="1").on("n2"),
            pod("p3").req("2", "1G").group("lo").label(rank="0").on("n3"),
            pod("p4").req("2", "1G").group("lo").label(rank="1").on("n4"),
            pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")]
    d = run(nodes=NODES, podgroups=[lo, wanting("hi", 2)], pods=pods)
    assert evicted(d) == ["p1", "p3"]
    assert sorted(d.pipelined.values()) == ["n1", "n3"]


def test_racks_too_small_for_the_gang_do_not_use_up_max_domains() -> None:
    """Nine one-node racks under one spine, a hard tier-2 gang of 2: the racks cannot hold it even empty, so the
    spine is among the (at most 8) domains tried and the gang preempts there."""
    racks = [hypernode(f"r{i}", 1, f"n{i}") for i in range(9)]
    racks.append(hypernode("sp", 2, children=tuple(f"r{i}" for i in range(9))))
    pods = [pod(f"v{i}").req("2", "1G").group(f"v{i}").on(f"n{i}") for i in range(9)]
    pods += [pod("b1").req("2", "1G").group("hi"), pod("b2").req("2", "1G").group("hi")]
    d = run(nodes=[n(f"n{i}") for i in range(9)], hypernodes=racks,
            podgroups=[*(running(f"v{i}") for i in range(9)), hard(wanting("hi", 2), tier=2)], pods=pods)
    assert len(d.evictions) == 2 and len(d.pipelined) == 2
    assert _network.parse_nomination(d.podgroup_annotations["c1/hi"][KEY], {"sp"}) == Nomination("sp")
