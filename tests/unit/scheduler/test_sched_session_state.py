"""Per-session state (`Session.state`, kube-scheduler's CycleState) and the owner-kept `Session.shared_state`: what
plugins share lives on the session, not in module globals, so one session's placement or pod view never leaks
into another's."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.session import Session
from lahar.scheduler.placement import Placement, placement
from lahar.scheduler.plugins._podview import PodView, view_of
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, queue, tiers_conf

CONF = tiers_conf("allocate", ["gang"], ["predicates", "nodeorder", "numa-aware", "deviceshare"])


def _session(shared: dict[Any, Any] | None = None) -> Session:
    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    snap = snapshots.build(pods=[], nodes=[node("n1").alloc(cpu="4", memory="8Gi").build()],
                           podgroups=[], queues=[queue("default").build()])
    return Session(snap, c, registry, uid="s", shared=shared)


def test_state_is_created_once_per_session_and_key() -> None:
    ssn = _session()
    made: list[int] = []

    def factory() -> list[int]:
        made.append(1)
        return []

    first = ssn.state("k", factory)
    assert ssn.state("k", factory) is first
    assert ssn.state("other", factory) is not first
    assert len(made) == 2
    assert _session().state("k", factory) is not first  # a new session starts empty


@pytest.mark.parametrize("kept", [True, False], ids=["owner-keeps-it", "nobody-keeps-it"])
def test_shared_state_lives_as_long_as_its_owner(kept: bool) -> None:
    owner: dict[Any, Any] | None = {} if kept else None
    first = _session(owner).shared_state("cache", dict)
    again = _session(owner).shared_state("cache", dict)
    assert (again is first) is kept


@pytest.mark.parametrize(("key", "get"), [(Placement, placement), (PodView, lambda ssn: view_of(ssn, object()))],
                         ids=["placement", "pod-view"])
def test_plugins_share_work_through_the_session_state(key: type, get: Any) -> None:
    a, b = _session(), _session()
    assert get(a) is get(a) is a.state(key, lambda: None)  # the plugins opened it; the same one for every caller
    assert get(b) is not get(a)


def test_the_pod_view_owner_is_the_first_plugin_to_ask() -> None:
    ssn = _session()
    view = view_of(ssn, "late")
    assert view.owner is ssn.plugins["predicates"]  # predicates opened first (tier order)


def test_the_derived_object_cache_is_kept_by_the_sessions_owner_not_the_process() -> None:
    from lahar.scheduler.placement import DerivedCache
    from lahar.scheduler.session import run_session

    registry = in_tree_registry()
    c = confs.load(CONF, actions=registry.action_names, plugins=registry.plugin_names)
    n1 = node("n1").alloc(cpu="4", memory="8Gi").build()
    n1["metadata"]["resourceVersion"] = "3"

    def snap() -> snapshots.Snapshot:
        return snapshots.build(pods=[], nodes=[n1], podgroups=[], queues=[queue("default").build()])

    owner: dict[Any, Any] = {}
    run_session(snap(), c, registry=registry, shared=owner)
    cache = owner[DerivedCache]
    assert len(cache) == 1  # the node's fingerprint, by its resourceVersion
    run_session(snap(), c, registry=registry, shared=owner)
    assert owner[DerivedCache] is cache and len(cache) == 1
    assert _session().shared_state(DerivedCache, DerivedCache) is not cache  # nothing process-wide


def test_a_finished_session_is_freed_with_everything_its_plugins_shared() -> None:
    """The module-global WeakKeyDictionaries this replaces kept every session alive: their values (the pod view,
    the placement) hold the session, so the weak key never died and each tick's session and snapshot leaked."""
    import gc
    import weakref

    ssn = _session()
    view, place = weakref.ref(view_of(ssn, None)), weakref.ref(placement(ssn))
    ssn.close()
    gone = weakref.ref(ssn)
    del ssn
    gc.collect()
    assert gone() is None and view() is None and place() is None
