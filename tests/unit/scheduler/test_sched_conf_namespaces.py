"""Where the scheduler looks for `lahar-scheduler-configmap`: with `namespaces` (as deploy/ runs it) only there, one
informer per namespace, so a Role in lahar-system is all it needs; lahar-system still wins over volcano-system."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube.apiserver import memory, store
from lahar.kube.resources import core
from lahar.scheduler import tasks
from lahar.scheduler.cache import CONFIGMAP_KEY, CONFIGMAP_NAME, ConfSource
from lahar.scheduler.registry import in_tree_registry

CM = next(rt for rt in core() if rt.group == "" and rt.plural == "configmaps")
NSES = next(rt for rt in core() if rt.group == "" and rt.plural == "namespaces")
CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'


def client_with(*namespaces: str) -> Any:
    client = memory.MemoryClient(store.Store())
    for ns in namespaces:
        client.create(NSES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        client.create(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": CONFIGMAP_NAME, "namespace": ns}, "data": {CONFIGMAP_KEY: CONF}},
                      namespace=ns)
    return client


CASES = [
    # stored in, looked up in, expected source namespace ("" = the built-in default)
    (("team-a",), (), "team-a"),
    (("team-a",), ("lahar-system", "volcano-system"), ""),
    (("volcano-system", "team-a"), ("lahar-system", "volcano-system"), "volcano-system"),
    (("volcano-system", "lahar-system"), ("lahar-system", "volcano-system"), "lahar-system"),
    (("volcano-system",), ("lahar-system",), ""),
]


@pytest.mark.parametrize(("stored", "namespaces", "want"), CASES,
                         ids=["cluster-wide", "namespaced-ignores-others", "fallback", "lahar-system-first",
                              "fallback-off"])
def test_conf_source_looks_only_in_its_namespaces(stored: tuple[str, ...], namespaces: tuple[str, ...],
                                                  want: str) -> None:
    source = ConfSource(client_with(*stored), in_tree_registry(), namespaces=namespaces)
    assert len(source.informers) == max(1, len(namespaces))
    assert source.start(timeout=10)
    try:
        state = source.current()
    finally:
        source.stop()
    assert (state.source.split("/")[0] if state.source != "default" else "") == want


@pytest.mark.parametrize(("raw", "want"), [("", ()), ("lahar-system", ("lahar-system",)),
                                           (" lahar-system , volcano-system,", ("lahar-system", "volcano-system"))],
                         ids=["empty-is-cluster-wide", "one", "list-with-spaces"])
def test_conf_namespaces_setting(raw: str, want: tuple[str, ...]) -> None:
    class S:
        scheduler_conf_namespaces = raw

    assert tasks.conf_namespaces(S()) == want
