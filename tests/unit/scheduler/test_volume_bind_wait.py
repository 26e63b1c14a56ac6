"""The bind waits for the claims (scheduler/volumebinding.py, scheduler/commit.py): kube-scheduler's VolumeBinding
PreBind check as a table, then commits over the in-memory cluster where devcluster's provisioner plays the PV
controller between two reads, or nobody does and the pods go back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lahar.devcluster.workloads.controllers import WorkloadControllers
from lahar.scheduler import volumebinding as vb
from tests.unit.scheduler import test_sched_volumes as base

REPO = Path(__file__).resolve().parents[3]
NS = base.NS
V = vb.Verdict


def claim(name: str = "data", *, selected: str | None = None, volume: str = "", completed: bool = False,
          deleting: bool = False, uid: str = "u1") -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if selected is not None:
        annotations[vb.SELECTED_NODE] = selected
    if completed:
        annotations[vb.BIND_COMPLETED] = "yes"
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"volumeName": volume} if volume else {}}


def pv(name: str = "pv-a", *, host: str | None = None, ref: str | None = "data", uid: str = "u1") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ref is not None:
        spec["claimRef"] = {"namespace": NS, "name": ref, "uid": uid}
    if host is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}
    return {"metadata": {"name": name}, "spec": spec}


N1 = {"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}}
PROVISION = {"namespace": NS, "claim": "data", "kind": "provision", "volume": "", "node": "n1"}
STATIC = {"namespace": NS, "claim": "data", "kind": "bind", "volume": "pv-a", "node": "n1"}
KEY = f"{NS}/data"

CASES = [
    # (actions, claims, pvs, elapsed, timeout, verdict, reason contains)
    ("no-volumes", [], {}, {}, 0, 1, V.BIND, ""),
    ("provision-bound", [PROVISION], {KEY: claim(selected="n1", volume="pvc-1", completed=True)},
     {"pvc-1": pv("pvc-1", host="n1")}, 0, 1, V.BIND, ""),
    ("provision-not-yet", [PROVISION], {KEY: claim(selected="n1")}, {}, 0, 1, V.WAIT, KEY),
    ("provision-volume-name-but-not-completed", [PROVISION], {KEY: claim(selected="n1", volume="pvc-1")},
     {"pvc-1": pv("pvc-1", host="n1")}, 0, 1, V.WAIT, KEY),
    ("provision-pv-not-seen-yet", [PROVISION], {KEY: claim(selected="n1", volume="pvc-1", completed=True)},
     {}, 0, 1, V.WAIT, KEY),
    ("provision-annotation-reset", [PROVISION], {KEY: claim()}, {}, 0, 1, V.GIVE_UP,
     'selectedNode annotation reset for PVC "data"'),
    ("provision-other-node", [PROVISION], {KEY: claim(selected="n2")}, {}, 0, 1, V.GIVE_UP,
     'provisioning failed for PVC "data"'),
    ("provision-pv-elsewhere", [PROVISION], {KEY: claim(selected="n1", volume="pvc-1", completed=True)},
     {"pvc-1": pv("pvc-1", host="n2")}, 0, 1, V.GIVE_UP, 'pv "pvc-1" node affinity doesn\'t match node "n1"'),
    ("claim-gone", [PROVISION], {KEY: None}, {}, 0, 1, V.GIVE_UP, f'persistentvolumeclaim "{KEY}" not found'),
    ("claim-deleting", [PROVISION], {KEY: claim(selected="n1", deleting=True)}, {}, 0, 1, V.GIVE_UP,
     "is being deleted"),
    ("claim-unread", [PROVISION], {}, {}, 0, 1, V.WAIT, KEY),
    ("static-bound", [STATIC], {KEY: claim(volume="pv-a", completed=True)}, {"pv-a": pv(host="n1")}, 0, 1,
     V.BIND, ""),
    ("static-claim-not-bound-yet", [STATIC], {KEY: claim()}, {"pv-a": pv(host="n1")}, 0, 1, V.WAIT, KEY),
    ("static-claim-ref-reset", [STATIC], {KEY: claim()}, {"pv-a": pv(ref=None)}, 0, 1, V.GIVE_UP,
     'ClaimRef got reset for pv "pv-a"'),
    ("static-taken-by-another-claim", [STATIC], {KEY: claim()}, {"pv-a": pv(ref="other")}, 0, 1, V.GIVE_UP,
     'ClaimRef got reset for pv "pv-a"'),
    ("static-pv-gone", [STATIC], {KEY: claim()}, {"pv-a": None}, 0, 1, V.GIVE_UP,
     'persistentvolume "pv-a" not found'),
    ("static-pv-unread", [STATIC], {KEY: claim()}, {}, 0, 1, V.WAIT, KEY),
    ("timed-out", [PROVISION], {KEY: claim(selected="n1")}, {}, 1, 1, V.GIVE_UP, vb.TIMED_OUT),
    ("bound-at-the-deadline-still-binds", [PROVISION],
     {KEY: claim(selected="n1", volume="pvc-1", completed=True)}, {"pvc-1": pv("pvc-1", host="n1")}, 5, 1,
     V.BIND, ""),
    ("give-up-wins-over-wait", [PROVISION, {**STATIC, "claim": "other"}],
     {KEY: claim(selected="n1"), f"{NS}/other": None}, {"pv-a": pv(ref="other")}, 0, 1, V.GIVE_UP, "not found"),
]


@pytest.mark.parametrize(("actions", "claims", "pvs", "elapsed", "timeout", "verdict", "reason"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_readiness(actions: list[dict[str, str]], claims: dict[str, Any], pvs: dict[str, Any], elapsed: float,
                   timeout: float, verdict: vb.Verdict, reason: str) -> None:
    got = vb.readiness(actions, node_name="n1", claims=claims, pvs=pvs, node=N1, elapsed=elapsed, timeout=timeout)
    assert got.verdict is verdict, got
    assert reason in got.reason, got


# --- commits over the in-memory cluster ------------------------------------------------------------------------

def _phases_at_bind(c: Any) -> list[set[str]]:
    """Spy on the pod binds: the claims' phases at the moment each pod is bound."""
    seen: list[set[str]] = []
    real = c.bind
    rt = c.registry.get("", "v1", "persistentvolumeclaims")

    def bind(**kw: Any) -> Any:
        seen.append({(o.get("status") or {}).get("phase") or "" for o in c.list(rt, namespace=NS)["items"]})
        return real(**kw)

    c.bind = bind
    return seen


def test_pods_are_bound_only_once_their_claims_are_bound() -> None:
    c = base._cluster([base.sc("local")], [], ["data-0", "data-1"])
    seen = _phases_at_bind(c)
    provisioner = WorkloadControllers(c, default_scheduler=False)
    reads: list[float] = []

    def between_reads(seconds: float) -> None:  # devcluster's PV controller runs while the commit waits
        reads.append(seconds)
        provisioner.sync()

    _, result = base._session(c, sleep=between_reads, volume_bind_timeout=30)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    assert reads, "the commit bound the pods without waiting for their claims"
    assert seen == [{"Bound"}, {"Bound"}], seen
    for i in range(2):
        node_name = base._get(c, "pods", f"w{i}", NS)["spec"]["nodeName"]
        got = base._get(c, "persistentvolumeclaims", f"data-{i}", NS)
        assert got["metadata"]["annotations"][vb.SELECTED_NODE] == node_name


def test_claims_never_bound_put_the_gang_back_with_the_reason() -> None:
    c = base._cluster([base.sc("local")], [], ["data-0", "data-1"])
    seen = _phases_at_bind(c)
    _, result = base._session(c, sleep=lambda _s: None, volume_bind_timeout=0)  # nobody provisions
    assert result.bound == [] and seen == []
    assert set(result.bind_failures) == {"c1/w0", "c1/w1"}
    assert all(vb.TIMED_OUT in r for r in result.bind_failures.values()), result.bind_failures
    assert all(not base._get(c, "pods", f"w{i}", NS)["spec"].get("nodeName") for i in range(2))
    events = [e.get("message") or "" for e in c.list(c.registry.get("", "v1", "events"), namespace=NS)["items"]]
    assert any(m.startswith('running PreBind plugin "VolumeBinding": ' + vb.TIMED_OUT) for m in events), events


def test_a_gang_mate_without_volumes_waits_for_the_others() -> None:
    c = base._cluster([base.sc("local")], [], ["data-0", "data-1"])
    pods_rt = c.registry.get("", "v1", "pods")
    w1 = base._get(c, "pods", "w1", NS)
    c.delete(pods_rt, "w1", namespace=NS)
    w1["metadata"] = {k: v for k, v in w1["metadata"].items() if k in ("name", "namespace", "annotations", "labels")}
    w1["spec"].pop("volumes")
    c.create(pods_rt, w1, namespace=NS)
    _, result = base._session(c, sleep=lambda _s: None, volume_bind_timeout=0)
    assert result.bound == []
    assert "not bound with its gang: the volumes of c1/w0 are not bound" in result.bind_failures["c1/w1"]


def test_the_next_session_binds_what_the_provisioner_bound_meanwhile() -> None:
    c = base._cluster([base.sc("local")], [], ["data-0", "data-1"])
    _, first = base._session(c, sleep=lambda _s: None, volume_bind_timeout=0)
    assert first.bound == []
    WorkloadControllers(c, default_scheduler=False).sync()  # the PVs arrive after the commit gave up
    _, second = base._session(c, sleep=lambda _s: None, volume_bind_timeout=0)
    assert sorted(second.bound) == ["c1/w0", "c1/w1"], second.bind_failures
    for i in range(2):
        node_name = base._get(c, "pods", f"w{i}", NS)["spec"]["nodeName"]
        got = base._get(c, "persistentvolumeclaims", f"data-{i}", NS)
        volume = base._get(c, "persistentvolumes", got["spec"]["volumeName"])
        assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0][
            "values"] == [node_name]


def test_pods_sharing_a_delayed_claim_follow_the_first_to_its_node() -> None:
    # a Volcano Job's `spec.volumes[].volumeClaim` is one claim mounted by every pod: one selected node for all
    c = base._cluster([base.sc("local")], [], ["data-0"])
    pods_rt = c.registry.get("", "v1", "pods")
    w1 = base._get(c, "pods", "w1", NS)
    c.delete(pods_rt, "w1", namespace=NS)
    w1["metadata"] = {k: v for k, v in w1["metadata"].items() if k in ("name", "namespace", "annotations", "labels")}
    w1["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "data-0"
    c.create(pods_rt, w1, namespace=NS)
    provisioner = WorkloadControllers(c, default_scheduler=False)
    decisions, result = base._session(c, sleep=lambda _s: provisioner.sync(), volume_bind_timeout=30)
    assert sorted(result.bound) == ["c1/w0", "c1/w1"], result.bind_failures
    nodes = {base._get(c, "pods", f"w{i}", NS)["spec"]["nodeName"] for i in range(2)}
    assert len(nodes) == 1, nodes
    assert {a["node"] for actions in decisions.volumes.values() for a in actions} == nodes
    got = base._get(c, "persistentvolumeclaims", "data-0", NS)
    assert got["status"]["phase"] == "Bound" and got["metadata"]["annotations"][vb.SELECTED_NODE] in nodes


def test_the_wait_reads_again_until_its_timeout_on_its_clock() -> None:
    from lahar.scheduler import commit
    from lahar.scheduler.framework.session import Bind

    c = base._cluster([base.sc("local")], [], ["data-0"])
    c.patch(c.registry.get("", "v1", "persistentvolumeclaims"), "data-0",
            {"metadata": {"annotations": {vb.SELECTED_NODE: "n1"}}}, namespace=NS)
    ticks = iter(range(100))
    sleeps: list[float] = []
    failed = commit.wait_for_volumes(c, [Bind(NS, "w0", "u0", "n1", f"{NS}/pg1")], {"u0": [
        {"namespace": NS, "claim": "data-0", "kind": "provision", "volume": "", "node": "n1"}]},
        timeout=3, poll=0.5, sleep=sleeps.append, clock=lambda: float(next(ticks)))
    assert sleeps == [0.5, 0.5] and vb.TIMED_OUT in failed[f"{NS}/w0"], (sleeps, failed)


@pytest.mark.parametrize(("args", "want"), [
    ({}, None),
    ({"volumebinding.bindTimeoutSeconds": 600}, 600),
    ({"volumebinding.bindTimeoutSeconds": 0}, 0),
    ({"volumebinding.bindTimeoutSeconds": "600"}, None),  # Volcano's framework.Get[int64]: not an int, unset
    ({"volumebinding.bindTimeoutSeconds": True}, None),
])
def test_bind_timeout_argument(args: dict[str, Any], want: int | None) -> None:
    from lahar.scheduler.plugins.predicates import bind_timeout_seconds
    assert bind_timeout_seconds(args) == want


def test_a_negative_bind_timeout_is_refused_when_the_conf_is_loaded() -> None:
    from lahar.scheduler.framework.conf import ConfError
    from lahar.scheduler.registry import in_tree_registry
    with pytest.raises(ConfError, match=r"predicates: arguments: volumebinding.bindTimeoutSeconds: invalid value -5"):
        in_tree_registry().load_conf(base._conf(**{"volumebinding.bindTimeoutSeconds": -5}))


def test_the_confs_bind_timeout_bounds_the_wait() -> None:
    """`volumebinding.bindTimeoutSeconds: 0`: the commit (30 s of its own) gives up at the first read."""
    c = base._cluster([base.sc("local")], [], ["data-0", "data-1"])

    def no_wait(_s: float) -> None:
        raise AssertionError("the commit waited although the conf's bindTimeoutSeconds is 0")

    decisions, result = base._session(c, base._conf(**{"volumebinding.bindTimeoutSeconds": 0}), sleep=no_wait,
                                      volume_bind_timeout=30)
    assert decisions.volume_bind_timeout == 0.0
    assert result.bound == [] and set(result.bind_failures) == {"c1/w0", "c1/w1"}
    assert all(vb.TIMED_OUT in r for r in result.bind_failures.values()), result.bind_failures
