"""The dashboard's per-card GPU view (`lahar.dashboard.gpus`) as tables, on the demo profile's vGPU and MIG nodes;
the Jobs page's HyperNode tier; and the Nodes page's HyperNode tree on the `dgx-h100-superpod` network profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lahar.dashboard import gpus, nodes, pages, views
from lahar.dashboard.app import render
from lahar.devcluster import nodes as devnodes
from lahar.devcluster import profiles
from lahar.scheduler.devices import inventory as inv
from tests.builders import pod, podgroup, vcjob

REPO = Path(__file__).resolve().parents[3]

DEMO = devnodes.build(profiles.load("demo"))
T4 = next(o for o in DEMO if o["kind"] == "Node" and o["metadata"]["name"].startswith("t4-vgpu"))
A100 = next(o for o in DEMO if o["kind"] == "Node" and o["metadata"]["name"].startswith("a100-mig"))
DGX = next(o for o in DEMO if o["kind"] == "Node" and o["metadata"]["name"].startswith("dgx-h100"))
T4_UUIDS = [c.uuid for c in sorted(inv.inventory(T4).volcano, key=lambda c: c.index)]


def _on(name: str, node: dict, *, phase: str = "Running", limits: dict | None = None, **ann: str) -> dict:
    p = pod(name, "default").req(cpu="1").on(node["metadata"]["name"], phase).obj
    p["metadata"]["annotations"] = dict(ann)
    if limits:
        p["spec"]["containers"][0]["resources"]["limits"] = limits
    return p


def _vgpu(uuid: str, mem: int, cores: int) -> str:
    """Volcano's `volcano.sh/vgpu-ids-new`: one container, one device `UUID,Type,mem,cores`."""
    return f"{uuid},NVIDIA,{mem},{cores}"


def _holders(row: gpus.CardRow) -> list[tuple[str, int, int]]:
    return [(h.pod, h.memory_mib, h.cores) for h in row.holders]


# -- vGPU cards ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pods", "want"), [
    ([], {0: [], 1: [], 2: [], 3: []}),
    ([("a", 0, 4096, 30, "Running")], {0: [("default/a", 4096, 30)], 1: [], 2: [], 3: []}),
    ([("a", 1, 4096, 30, "Running"), ("b", 1, 2048, 20, "Running")],
     {0: [], 1: [("default/a", 4096, 30), ("default/b", 2048, 20)], 2: [], 3: []}),
    ([("done", 2, 4096, 30, "Succeeded")], {0: [], 1: [], 2: [], 3: []}),
], ids=["idle", "one-pod", "two-pods-share-a-card", "finished-pod-holds-nothing"])
def test_vgpu_cards_say_who_holds_what(pods: list, want: dict) -> None:
    objs = [_on(n, T4, phase=ph, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[card], mem, cores)})
            for n, card, mem, cores, ph in pods]
    rows, unrecorded = gpus.card_rows(T4, objs)
    assert {r.index: _holders(r) for r in rows} == want
    assert all(r.kind == "vgpu" and r.memory_mib > 0 and r.slots > 0 for r in rows) and unrecorded == {}


def test_vgpu_card_cell_is_device_memory_held() -> None:
    total = gpus.card_rows(T4, [])[0][0].memory_mib
    p = _on("a", T4, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[0], total // 2, 30)})
    card = gpus.card_rows(T4, [p])[0][0]
    assert (card.cell.percent, card.used_cores) == (50.0, 30)


@pytest.mark.parametrize("annotation", ["not,a,device", "", ";;;", "x" * 50],
                         ids=["short-entry", "empty", "only-separators", "garbage"])
def test_malformed_vgpu_annotations_hold_nothing(annotation: str) -> None:
    rows, _ = gpus.card_rows(T4, [_on("a", T4, **{"volcano.sh/vgpu-ids-new": annotation})])
    assert all(r.holders == () for r in rows)


def test_hami_allocation_counts_on_the_same_card() -> None:
    p = _on("h", T4, **{"hami.io/vgpu-devices-allocated": f"{T4_UUIDS[3]},NVIDIA,1024,10:;"})
    rows, _ = gpus.card_rows(T4, [p])
    assert _holders(rows[3]) == [("default/h", 1024, 10)]


# -- MIG cards ----------------------------------------------------------------------------------------------------


def test_mig_cards_list_instances_per_profile() -> None:
    rec = json.dumps({"1g.10gb": ["0/1"], "3g.40gb": ["2/0"]})
    p = _on("infer", A100, limits={"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-3g.40gb": "1"},
            **{"lahar.sh/mig-instances": rec})
    rows, unrecorded = gpus.card_rows(A100, [p])
    assert [r.index for r in rows] == [0, 1, 2, 3]  # the GPUs in MIG mode; 4-7 are whole GPUs
    by = {r.index: {pr.profile: (pr.used, pr.total, [h.instance for h in pr.holders]) for pr in r.profiles}
          for r in rows}
    assert by[0] == {"1g.10gb": (1, 2, ["0/1"]), "2g.20gb": (0, 1, []), "3g.40gb": (0, 1, [])}
    assert by[2]["3g.40gb"] == (1, 1, ["2/0"])
    assert rows[0].cell.used == 1 and rows[0].cell.total == 4 and unrecorded == {}


@pytest.mark.parametrize(("limits", "record", "want"), [
    ({"nvidia.com/mig-1g.10gb": "2"}, None, {"1g.10gb": 2}),
    ({"nvidia.com/mig-1g.10gb": "2"}, {"1g.10gb": ["0/0"]}, {"1g.10gb": 1}),
    ({"nvidia.com/mig-1g.10gb": "1"}, {"1g.10gb": ["0/0"]}, {}),
], ids=["none-recorded", "one-of-two-recorded", "all-recorded"])
def test_mig_instances_held_without_a_record_are_counted(limits: dict, record: dict | None, want: dict) -> None:
    ann = {"lahar.sh/mig-instances": json.dumps(record)} if record else {}
    assert gpus.card_rows(A100, [_on("m", A100, limits=limits, **ann)])[1] == want


def test_dynamic_mig_placements_show_on_their_card() -> None:
    mig = json.dumps([{"gpuUUID": T4_UUIDS[1], "profile": "1g.5gb", "placement": {"start": 0, "size": 1}}])
    rows, _ = gpus.card_rows(T4, [_on("d", T4, **{"hami.io/vgpu-mig-allocations": mig})])
    assert rows[1].kind == "mig" and [(p.profile, p.used, [h.instance for h in p.holders]) for p in rows[1].profiles] \
        == [("1g.5gb", 1, ["0+1"])]


# -- per node, and kept from events -------------------------------------------------------------------------------


def test_gpu_rows_only_for_nodes_that_share_or_split_gpus() -> None:
    node_objs = [o for o in DEMO if o["kind"] == "Node"]
    assert [r.node for r in gpus.gpu_rows(node_objs, [])] == [A100["metadata"]["name"], T4["metadata"]["name"]]
    assert not gpus.is_gpu_node(DGX)


def test_device_pods_kept_from_events_equal_the_regroup() -> None:
    a = _on("a", T4, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[0], 1024, 10)})
    b = _on("b", T4, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[1], 2048, 20)})
    plain = _on("plain", DGX)
    kept = gpus.DevicePods()
    for p in (a, b, plain):
        kept.put(p)
    kept.remove(b)
    moved = json.loads(json.dumps(a))
    moved["metadata"]["annotations"] = {}
    kept.put(moved)  # an update that drops the allocation drops the pod
    assert kept.snapshot() == {}
    kept.put(a)
    assert gpus.gpu_rows([T4], kept.snapshot()) == gpus.gpu_rows([T4], [a, b | {"status": {"phase": "Failed"}}])


def test_nodes_page_renders_the_cards_escaped() -> None:
    hostile = _on("<script>x</script>", T4, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[0], 1024, 10)})
    items = {"nodes": [T4, A100], "pods": [hostile]}
    _, main = render("nodes", lambda k: items.get(k, []))
    assert "GPUs per card" in main and "&lt;script&gt;x&lt;/script&gt;" in main and "<script>x" not in main
    assert f'data-gpu-node="{A100["metadata"]["name"]}"' in main and "1g.10gb 0/2" in main
    assert gpus.gpu_rows([], []) == [] and pages.cards_table([]) == ""


# -- HyperNodes: the job's tier, the tree on a network profile ----------------------------------------------------


def _hn(name: str, tier: object) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": []}}


@pytest.mark.parametrize(("annotation", "hypernodes", "want"), [
    ("leaf-0", [_hn("leaf-0", 1), _hn("spine-0", 2)], ("leaf-0", 1)),
    ("spine-0", [_hn("leaf-0", 1), _hn("spine-0", "2")], ("spine-0", 2)),
    ("gone", [_hn("leaf-0", 1)], ("gone", None)),
    ("leaf-0", [_hn("leaf-0", "one")], ("leaf-0", None)),
    (None, [_hn("leaf-0", 1)], ("", None)),
], ids=["tier-1", "tier-as-string", "hypernode-deleted", "bad-tier", "no-annotation"])
def test_job_rows_carry_the_hypernode_tier(annotation: str | None, hypernodes: list, want: tuple) -> None:
    job = vcjob("train", "default").min_available(1).phase("Running").obj
    pg = podgroup("train-pg", "default").phase("Running").obj
    pg["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": "u", "apiVersion": "v"}]
    if annotation:
        pg["metadata"]["annotations"] = {"volcano.sh/job-allocated-hypernode": annotation}
    [row] = views.job_rows(jobs=[job], podgroups=[pg], pods=[], hypernodes=hypernodes)
    assert (row.hypernode, row.tier) == want


def test_superpod_hypernode_tree_occupancy_per_tier() -> None:
    from lahar.controllers import _hypernode_tree as tree

    objs = devnodes.build(profiles.load("dgx-h100-superpod"))
    node_objs = [o for o in objs if o["kind"] == "Node"]
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    config, _ = tree.parse_config(cm["data"]["volcano-controller.conf"])
    chains, _ = tree.label_chains(config.enabled("label").config)
    hns = tree.build_label_tree(node_objs, chains)
    gang = [pod(f"w{i}", "default").req(**{"nvidia.com/gpu": "8"}).on(f"dgx-h100-{i}").obj for i in range(8)]
    cols, rows = nodes.node_rows(node_objs, gang)
    got = {(h.name, h.tier, h.depth, h.nodes): h.cells["nvidia.com/gpu"].percent
           for h in nodes.hypernode_rows(hns, rows, node_objs)}
    assert got == {
        ("hypernode-superpod-tier2-spine-0", 2, 0, 16): 50.0,
        ("hypernode-superpod-tier1-leaf-0", 1, 1, 8): 100.0,
        ("hypernode-superpod-tier1-leaf-1", 1, 1, 8): 0.0,
        ("hypernode-superpod-tier2-spine-1", 2, 0, 16): 0.0,
        ("hypernode-superpod-tier1-leaf-2", 1, 1, 8): 0.0,
        ("hypernode-superpod-tier1-leaf-3", 1, 1, 8): 0.0,
    }
    assert [h.name for h in nodes.hypernode_rows(hns, rows, node_objs)][:2] == [
        "hypernode-superpod-tier2-spine-0", "hypernode-superpod-tier1-leaf-0"]


@pytest.mark.parametrize(("tier", "want"), [(2, 2), ("3", 3), ("one", 0), (None, 0), (True, 0)],
                         ids=["int", "digits", "word", "missing", "bool"])
def test_hypernode_table_reads_a_bad_tier_as_0(tier: object, want: int) -> None:
    """A HyperNode whose spec.tier is no number was a ValueError (a 500 for the Nodes page); now tier 0."""
    [row] = nodes.hypernode_rows([_hn("h", tier)], [], [])
    assert row.tier == want


def test_card_rows_are_remembered_per_version_and_recomputed_on_change(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = gpus.card_rows
    monkeypatch.setattr(gpus, "card_rows", lambda n, ps: calls.append(1) or real(n, ps))
    node = json.loads(json.dumps(T4))
    node["metadata"] |= {"uid": "n-uid", "resourceVersion": "1"}
    p = _on("a", T4, **{"volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[0], 1024, 10)})
    p["metadata"] |= {"uid": "p-uid", "resourceVersion": "5"}
    first = gpus.gpu_rows([node], {node["metadata"]["name"]: [p]})
    assert gpus.gpu_rows([node], {node["metadata"]["name"]: [p]}) == first and len(calls) == 1  # unchanged: once
    changed = json.loads(json.dumps(p))
    changed["metadata"] |= {"resourceVersion": "6", "annotations": {
        "volcano.sh/vgpu-ids-new": _vgpu(T4_UUIDS[0], 2048, 20)}}
    [row] = gpus.gpu_rows([node], {node["metadata"]["name"]: [changed]})
    assert _holders(row.cards[0]) == [("default/a", 2048, 20)] and len(calls) == 2
