"""Hook combination rules (spec §5.2), one table per rule, over stub plugins in tiers."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import hooks
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import build
from tests.builders import pod, podgroup, queue

P, A, R = Vote.PERMIT, Vote.ABSTAIN, Vote.REJECT


class Stub:
    def __init__(self, name: str, answers: dict[str, Any]) -> None:
        self.name = name
        for hook, value in answers.items():
            setattr(self, hook, (lambda v: lambda *_: v)(value))


def session(tiers: list[list[dict[str, Any]]], switches: dict[str, dict[str, bool]] | None = None) -> Session:
    reg = Registry()
    text_tiers = []
    for t, tier in enumerate(tiers):
        plugins = []
        for i, answers in enumerate(tier):
            name = f"s{t}{i}"
            reg.add_plugin(name, (lambda n, a: lambda _args: Stub(n, a))(name, answers))
            plugins.append({"name": name, **(switches or {}).get(name, {})})
        text_tiers.append({"plugins": plugins})
    import yaml
    conf = confs.load(yaml.safe_dump({"actions": "allocate", "tiers": text_tiers}))
    snap = build(pods=[pod("p1").req("1", "1Gi").group("pg1").build()], podgroups=[podgroup("pg1").build()],
                 queues=[queue("c1").build()])
    return Session(snap, conf, reg)


def job(ssn: Session):  # noqa: ANN201
    return ssn.jobs["c1/pg1"]


PIPELINED = [
    ("no-plugins", [], True),
    ("permit", [[{"job_pipelined": P}]], True),
    ("reject-wins", [[{"job_pipelined": P}, {"job_pipelined": R}]], False),
    ("abstain-falls-to-next-tier-reject", [[{"job_pipelined": A}], [{"job_pipelined": R}]], False),
    ("permit-in-tier1-stops", [[{"job_pipelined": P}], [{"job_pipelined": R}]], True),
    ("all-abstain-default-true", [[{"job_pipelined": A}], [{"job_pipelined": A}]], True),
]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in PIPELINED], ids=[i for i, _, _ in PIPELINED])
def test_job_pipelined_and_enqueueable_vote(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    assert ssn.job_pipelined(job(ssn)) is want
    renamed = [[{"job_enqueueable": a["job_pipelined"]} for a in tier] for tier in tiers]
    ssn = session(renamed)
    assert ssn.job_enqueueable(job(ssn)) is want


READY = [
    ("none-true", [], True),
    ("and-all-true", [[{"job_ready": True}], [{"job_ready": True}]], True),
    ("and-one-false", [[{"job_ready": True}, {"job_ready": False}]], False),
    ("false-in-later-tier", [[{"job_ready": True}], [{"job_ready": False}]], False),
]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in READY], ids=[i for i, _, _ in READY])
def test_job_ready_is_and(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    assert ssn.job_ready(job(ssn)) is want


def test_switch_off_removes_a_plugin_from_a_hook() -> None:
    ssn = session([[{"job_ready": False}]], {"s00": {"enableJobReady": False}})
    assert ssn.job_ready(job(ssn)) is True


STARVING = [
    ("default-false", [], False),
    ("first-tier-decides-true", [[{"job_starving": True}], [{"job_starving": False}]], True),
    ("and-within-tier", [[{"job_starving": True}, {"job_starving": False}]], False),
    ("empty-tier-skipped", [[{}], [{"job_starving": True}]], True),
]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in STARVING], ids=[i for i, _, _ in STARVING])
def test_job_starving_first_tier_with_plugins(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    assert ssn.job_starving(job(ssn)) is want


OVERUSED = [("or-any-true", [[{"overused": False}], [{"overused": True}]], True),
            ("or-all-false", [[{"overused": False}, {"overused": False}]], False),
            ("none", [], False)]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in OVERUSED], ids=[i for i, _, _ in OVERUSED])
def test_overused_is_or(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    assert ssn.overused(ssn.queues["c1"]) is want


ALLOCATABLE = [("and-true", [[{"allocatable": True}, {"allocatable": True}]], True),
               ("and-false", [[{"allocatable": True}], [{"allocatable": False}]], False),
               ("none", [], True)]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in ALLOCATABLE], ids=[i for i, _, _ in ALLOCATABLE])
def test_allocatable_and_preemptive_are_and(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    t = next(iter(job(ssn).tasks.values()))
    assert ssn.allocatable(ssn.queues["c1"], t) is want
    ssn = session([[{"preemptive": a["allocatable"]} for a in tier] for tier in tiers])
    assert ssn.preemptive(ssn.queues["c1"], t) is want


def _victims(names: list[str]):  # noqa: ANN202
    return lambda candidates: [c for c in candidates if c.name in names]


VICTIMS = [
    ("single", [[{"v": ["a", "b"]}]], ["a", "b"]),
    ("intersect-in-tier", [[{"v": ["a", "b"]}, {"v": ["b", "c"]}]], ["b"]),
    ("abstain-ignored", [[{"v": None}, {"v": ["a"]}]], ["a"]),
    ("first-tier-with-answer-decides", [[{"v": ["a"]}], [{"v": ["b"]}]], ["a"]),
    ("empty-from-one-means-none-in-tier-next-tier-decides", [[{"v": []}], [{"v": ["c"]}]], ["c"]),
    ("all-abstain", [[{"v": None}]], []),
]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in VICTIMS], ids=[i for i, _, _ in VICTIMS])
def test_preemptable_and_reclaimable_intersect_per_tier(tiers: list[list[dict[str, Any]]], want: list[str]) -> None:
    reg_tiers = [[{"preemptable": None} for _ in tier] for tier in tiers]
    ssn = session(reg_tiers)
    candidates = [pod(n).req("1", "1Gi").group("pg1").on("n1").build() for n in "abc"]
    from lahar.scheduler.framework.snapshot import Task
    tasks = [Task(c, ssn.resources, job="c1/pg1") for c in candidates]
    for hook in ("preemptable", "reclaimable"):
        stubs = [p for tier in ssn.tiers for _, p in tier]
        flat = [a["v"] for tier in tiers for a in tier]
        for stub, names in zip(stubs, flat, strict=True):
            setattr(stub, hook, (lambda n: lambda _actor, cands: None if n is None else
                                 [c for c in cands if c.name in n])(names))
        ssn._hooks[hook] = [[p for _, p in tier] for tier in ssn.tiers]
        got = getattr(ssn, hook)(tasks[0], tasks)
        assert sorted(t.name for t in got) == want


ORDER = [
    ("first-nonzero-wins", [[{"job_order": 0}, {"job_order": -1}], [{"job_order": 1}]], True),
    ("later-tier-when-tied", [[{"job_order": 0}], [{"job_order": 1}]], False),
]


@pytest.mark.parametrize(("tiers", "want"), [(t, w) for _, t, w in ORDER], ids=[i for i, _, _ in ORDER])
def test_orders_first_nonzero_compare_wins(tiers: list[list[dict[str, Any]]], want: bool) -> None:
    ssn = session(tiers)
    assert ssn.job_order(job(ssn), job(ssn)) is want


def test_every_in_tree_plugin_satisfies_the_protocols_it_implements() -> None:
    from lahar.scheduler.registry import in_tree_registry
    reg = in_tree_registry()
    for name in reg.plugin_names:
        plugin = reg.plugin(name, {})
        assert isinstance(plugin, hooks.Plugin) and plugin.name == name
        for hook, (proto, _) in hooks.HOOKS.items():
            if hasattr(plugin, hook):
                assert isinstance(plugin, proto), (name, hook)
    for name in reg.action_names:
        assert isinstance(reg.action(name, {}), hooks.Action)


def test_registry_rejects_duplicates_and_names_unknowns() -> None:
    reg = Registry().add_plugin("x", lambda a: Stub("x", {}))
    with pytest.raises(ValueError, match="already registered"):
        reg.add_plugin("x", lambda a: Stub("x", {}))
    with pytest.raises(KeyError, match="failed to find Plugin y"):
        reg.plugin("y")
    with pytest.raises(KeyError, match="failed to find Action z"):
        reg.action("z")
