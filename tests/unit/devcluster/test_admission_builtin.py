"""kube-apiserver's built-in plugins in devcluster: DefaultTolerationSeconds, TaintNodesByCondition, and the node
lifecycle controller's condition → taint rule the simulated kubelets apply.

Pure tables over `devcluster.admission.builtin`, then the same through a store with devcluster's admission chain
and through `SimulatedKubelets` registering a node.
"""

from __future__ import annotations

import datetime as dt

import pytest

from lahar.devcluster.admission import WebhookAdmission, builtin
from lahar.devcluster.kubelet import SimulatedKubelets
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.apiserver.store import Store

NR = builtin.NOT_READY
UR = builtin.UNREACHABLE
NR_TOL = {"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
UR_TOL = {"key": UR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("given", "expected"), [
    (None, [NR_TOL, UR_TOL]),
    ([], [NR_TOL, UR_TOL]),
    ([GPU_TOL], [GPU_TOL, NR_TOL, UR_TOL]),
    ([{"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
     [{"key": NR, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}, UR_TOL]),
    ([{"key": UR, "operator": "Exists"}], [{"key": UR, "operator": "Exists"}, NR_TOL]),
    ([{"operator": "Exists"}], [{"operator": "Exists"}]),
    ([{"operator": "Exists", "effect": "NoExecute"}], [{"operator": "Exists", "effect": "NoExecute"}]),
    ([{"key": NR, "operator": "Exists", "effect": "NoSchedule"}],
     [{"key": NR, "operator": "Exists", "effect": "NoSchedule"}, NR_TOL, UR_TOL]),
], ids=["none", "empty", "appended-after-own", "own-not-ready-seconds-kept", "key-any-effect-covers",
        "tolerate-everything", "all-keys-no-execute", "no-schedule-does-not-cover"])
def test_default_tolerations(given, expected):
    assert builtin.default_tolerations(given) == expected


@pytest.mark.parametrize(("node", "changed", "taints"), [
    ({"metadata": {"name": "n"}}, True, [{"key": NR, "effect": "NoSchedule"}]),
    ({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, True,
     [{"key": "a", "effect": "NoSchedule"}, {"key": NR, "effect": "NoSchedule"}]),
    ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, False, None),
    ({"spec": {"taints": [{"key": NR, "effect": "NoSchedule"}]}}, False, [{"key": NR, "effect": "NoSchedule"}]),
], ids=["no-conditions", "not-ready-keeps-own-taints", "registers-ready", "already-tainted"])
def test_taint_new_node(node, changed, taints):
    assert builtin.taint_new_node(node) is changed
    assert (node.get("spec") or {}).get("taints") == taints


OWN = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(("taints", "ready", "expected"), [
    ([OWN, {"key": NR, "effect": "NoSchedule"}], "True", [OWN]),
    ([{"key": NR, "effect": "NoSchedule"}, {"key": NR, "effect": "NoExecute"}], "True", []),
    ([{"key": UR, "effect": "NoExecute"}], "True", []),
    ([OWN], "False", [OWN, {"key": NR, "effect": "NoSchedule"}, {"key": NR, "effect": "NoExecute"}]),
    ([{"key": NR, "effect": "NoSchedule"}], "Unknown",
     [{"key": UR, "effect": "NoSchedule"}, {"key": UR, "effect": "NoExecute"}]),
    ([{"key": NR, "effect": "NoSchedule"}], None, [{"key": NR, "effect": "NoSchedule"}]),
    ([OWN], "True", [OWN]),
], ids=["ready-lifts-not-ready", "ready-lifts-both-effects", "ready-lifts-unreachable", "false-adds-not-ready",
        "unknown-swaps-to-unreachable", "no-condition-no-change", "ready-keeps-own"])
def test_condition_taints(taints, ready, expected):
    assert builtin.condition_taints(taints, ready) == expected


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}


@pytest.mark.parametrize(("operation", "plural", "subresource", "obj", "changes"), [
    ("CREATE", "pods", None, POD, True),
    ("UPDATE", "pods", None, POD, True),
    ("UPDATE", "pods", "status", POD, False),
    ("CREATE", "pods", "binding", POD, False),
    ("DELETE", "pods", None, POD, False),
    ("CREATE", "pods", None, {**POD, "spec": {"tolerations": "x"}}, False),
    ("CREATE", "pods", None, {**POD, "spec": {"tolerations": [NR_TOL, UR_TOL]}}, False),
    ("CREATE", "nodes", None, {"metadata": {"name": "n"}}, True),
    ("UPDATE", "nodes", None, {"metadata": {"name": "n"}}, False),
    ("CREATE", "nodes", "status", {"metadata": {"name": "n"}}, False),
    ("CREATE", "configmaps", None, {"metadata": {"name": "c"}}, False),
], ids=["pod-create", "pod-update", "pod-status", "pod-binding", "pod-delete", "malformed-left-to-validation",
        "already-tolerated", "node-create", "node-update", "node-status", "other-kind"])
def test_admit_scope(operation, plural, subresource, obj, changes):
    before = repr(obj)
    out = builtin.admit(operation, "", plural, subresource, obj)
    assert (out is not None) is changes
    assert repr(obj) == before  # a copy is mutated, never the input


@pytest.fixture
def admitted_client():
    store = Store(registry=resources.Registry.of(resources.core()))
    store.admission = WebhookAdmission(store)
    client = MemoryClient(store)
    yield client
    store.admission.close()
    client.close()


def _rt(client, plural):
    return {rt.plural: rt for rt in resources.core()}[plural]


def test_store_with_devcluster_admission_defaults_pods_and_taints_new_nodes(admitted_client):
    c = admitted_client
    pod = c.create(_rt(c, "pods"), {**POD, "spec": {"containers": [{"name": "c", "image": "x"}],
                                                     "tolerations": [GPU_TOL]}}, namespace="default")
    assert pod["spec"]["tolerations"] == [GPU_TOL, NR_TOL, UR_TOL]
    node = c.create(_rt(c, "nodes"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}})
    assert node["spec"]["taints"] == [{"key": NR, "effect": "NoSchedule"}]
    ready = c.create(_rt(c, "nodes"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not (ready.get("spec") or {}).get("taints")


def test_simulated_kubelet_lifts_the_not_ready_taint_when_it_reports_ready(admitted_client):
    c = admitted_client
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    kubelets = SimulatedKubelets(c, ["n0"], clock=lambda: now)
    kubelets.register()
    assert c.get(_rt(c, "nodes"), "n0")["spec"]["taints"] == [{"key": NR, "effect": "NoSchedule"}]
    kubelets.heartbeat()
    node = c.get(_rt(c, "nodes"), "n0")
    assert not (node.get("spec") or {}).get("taints")
    assert {x["type"]: x["status"] for x in node["status"]["conditions"]}["Ready"] == "True"
