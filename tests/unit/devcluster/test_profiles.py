"""Cluster profiles and the node objects built from them (Node, Numatopology, Koordinator Device, vGPU registrations).

Checks the bundled profiles load, bad profiles name the offending field, `--nodes N` naming and splits, and the
device inventory formats of spec/devices.md; `publish` skips kinds whose CRD is not registered.
"""

from __future__ import annotations

import json

import pytest

from lahar.devcluster import nodes, profiles
from lahar.kube import resources
from lahar.kube.apiserver.memory import MemoryClient


def by(objects, kind, name):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


@pytest.mark.parametrize("name", ["cpu-small", "dgx-h100", "mixed", "dgx-h100-superpod"])
def test_bundled_profiles_load(name):
    assert name in profiles.bundled()
    assert profiles.load(name).name == name


def test_load_by_path(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\ngroups:\n  - name: t\n    instanceType: x\n    count: 2\n")
    assert [n for _, n in nodes.plan_names(profiles.load(path))] == ["t-0", "t-1"]
    assert profiles.load(str(path)).name == "tiny"


BAD_CASES = [
    ("unknown-field", {"name": "x", "groups": [{"name": "g", "instanceType": "i", "cpus": 4}]}, "groups.0.cpus"),
    ("missing-groups", {"name": "x"}, "groups"),
    ("bad-sharing", {"name": "x", "groups": [{"name": "g", "instanceType": "i", "gpus": {
        "model": "T4", "count": 1, "sharing": "timeslice"}}]}, "groups.0.gpus.sharing"),
    ("numa-split", {"name": "x", "groups": [{"name": "g", "instanceType": "i",
                                            "cpu": {"sockets": 1, "coresPerSocket": 3}, "numaNodes": 2}]},
     "do not split evenly"),
    ("duplicate-groups", {"name": "x", "groups": [{"name": "g", "instanceType": "i"},
                                                  {"name": "g", "instanceType": "j"}]}, "duplicate group names: g"),
]


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_profiles_name_the_field(data, message):
    with pytest.raises(profiles.ProfileError, match=message.replace(".", r"\.")):
        profiles.parse(data, source="p.yaml")


def test_unknown_profile_lists_bundled():
    with pytest.raises(profiles.ProfileError, match="bundled profiles are ") as info:
        profiles.load("nope")
    for name in ("cpu-small", "dgx-h100", "mixed", *profiles.bundled()):
        assert name in str(info.value)


NAME_CASES = [
    ("dgx-default", "dgx-h100", None, ["dgx-h100-0", "dgx-h100-1"]),
    ("dgx-3", "dgx-h100", 3, ["dgx-h100-0", "dgx-h100-1", "dgx-h100-2"]),
    ("cpu-1", "cpu-small", 1, ["cpu-small-0"]),
    ("mixed-4", "mixed", 4, ["mixed-a100-0", "mixed-t4-0", "mixed-cpu-0", "mixed-a100-1"]),
    ("mixed-default", "mixed", None, ["mixed-a100-0", "mixed-a100-1", "mixed-t4-0", "mixed-t4-1", "mixed-cpu-0",
                                      "mixed-cpu-1"]),
]


@pytest.mark.parametrize(("profile", "count", "names"), [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_node_names(profile, count, names):
    assert nodes.node_names(nodes.build(profiles.load(profile), count)) == names


def test_cpu_small_node():
    objects = nodes.build(profiles.load("cpu-small"), 1)
    assert [o["kind"] for o in objects] == ["Node", "Numatopology"]  # no devices → no Device object
    node = objects[0]
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "cpu-small-0"
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
    assert labels["node.kubernetes.io/instance-type"] == "sim.cpu-small"
    cap = node["status"]["capacity"]
    assert (cap["cpu"], cap["memory"], cap["pods"]) == ("4", "8388608Ki", "110")
    assert cap["hugepages-1Gi"] == "0" and "nvidia.com/gpu" not in cap
    assert node["status"]["allocatable"] == cap
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"
    topo = objects[1]["spec"]
    assert topo["numares"] == {"cpu": {"allocatable": "0-3", "capacity": 4}}
    assert topo["policies"] == {"CPUManagerPolicy": "none", "TopologyManagerPolicy": "none"}


@pytest.fixture(scope="module")
def dgx():
    return nodes.build(profiles.load("dgx-h100"), 1)


def test_dgx_node_resources_and_labels(dgx):
    node = by(dgx, "Node", "dgx-h100-0")
    cap = node["status"]["capacity"]
    assert cap["cpu"] == "224" and cap["memory"] == "2147483648Ki"
    assert cap["nvidia.com/gpu"] == "8" and node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert cap["nvidia.com/rdma_vf"] == "64" and cap["koordinator.sh/rdma"] == "800"
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"


def test_dgx_numatopology(dgx):
    spec = by(dgx, "Numatopology", "dgx-h100-0")["spec"]
    assert spec["numares"]["cpu"] == {"allocatable": "0-223", "capacity": 224}
    detail = spec["cpuDetail"]
    assert len(detail) == 224
    assert detail["0"] == {}  # Go omitempty: numa 0, socket 0, core 0
    assert detail["56"] == {"numa": 1, "socket": 1, "core": 56}
    assert detail["112"] == {}  # hyperthread sibling of CPU 0
    assert detail["168"] == {"numa": 1, "socket": 1, "core": 56}


def test_dgx_gpus_fully_nvlinked(dgx):
    topo = json.loads(by(dgx, "Node", "dgx-h100-0")["metadata"]["annotations"][nodes.GPU_TOPOLOGY_ANNOTATION])
    links = topo["links"]
    assert all(links[i][j] == ("X" if i == j else "NV18") for i in range(8) for j in range(8))
    assert [g["numa"] for g in topo["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_dgx_koordinator_device_pairs_nics_with_gpu_pairs(dgx):
    devices = by(dgx, "Device", "dgx-h100-0")["spec"]["devices"]
    gpus = [d for d in devices if d["type"] == "gpu"]
    nics = [d for d in devices if d["type"] == "rdma"]
    assert len(gpus) == 8 and len(nics) == 8
    for nic in nics:
        pair = [g for g in gpus if g["topology"]["pcieID"] == nic["topology"]["pcieID"]]
        assert [g["minor"] for g in pair] == [2 * (nic["minor"] // 2), 2 * (nic["minor"] // 2) + 1]
        assert nic["topology"]["nodeID"] == pair[0]["topology"]["nodeID"]
        vfs = nic["vfGroups"][0]["vfs"]
        assert len(vfs) == 8 and all(vf["minor"] == -1 for vf in vfs)
        assert len({vf["busID"] for vf in vfs}) == 8
    assert gpus[0]["resources"] == {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "81559Mi",
                                    "koordinator.sh/gpu-memory-ratio": "100"}
    assert len({g["id"] for g in gpus}) == 8 and all(g["id"].startswith("GPU-") for g in gpus)


def test_build_is_deterministic():
    assert nodes.build(profiles.load("mixed"), 3) == nodes.build(profiles.load("mixed"), 3)


@pytest.fixture(scope="module")
def mixed():
    return nodes.build(profiles.load("mixed"), 3)


def test_mixed_a100_mig_resources(mixed):
    node = by(mixed, "Node", "mixed-a100-0")
    cap = node["status"]["capacity"]
    assert cap["nvidia.com/gpu"] == "4"  # GPUs 4-7 whole
    assert (cap["nvidia.com/mig-1g.10gb"], cap["nvidia.com/mig-2g.20gb"], cap["nvidia.com/mig-3g.40gb"]) == (
        "8", "4", "4")
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/mig.capable"] == "true" and labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-1g.10gb.memory"] == "9856"


def test_mixed_t4_vgpu_registrations(mixed):
    node = by(mixed, "Node", "mixed-t4-0")
    cap = node["status"]["capacity"]
    assert cap["nvidia.com/gpu"] == "40"  # HAMi: GPUs × deviceSplitCount
    assert (cap["volcano.sh/vgpu-number"], cap["volcano.sh/vgpu-memory"], cap["volcano.sh/vgpu-cores"]) == (
        "40", "61440", "400")
    ann = node["metadata"]["annotations"]
    hami = json.loads(ann["hami.io/node-nvidia-register"])
    assert len(hami) == 4
    assert "index" not in hami[0] and hami[1]["index"] == 1  # Go omitempty
    assert {k: hami[1][k] for k in ("count", "devmem", "devcore", "type", "mode", "health")} == {
        "count": 10, "devmem": 15360, "devcore": 100, "type": "NVIDIA-Tesla T4", "mode": "hami-core", "health": True}
    volcano = ann["volcano.sh/node-vgpu-register"]
    assert volcano.endswith(":") and volcano.count(":") == 4
    fields = volcano.split(":")[0].split(",")
    assert fields[1:] == ["10", "15360", "NVIDIA-Tesla T4", "true", "hami-core"] and fields[0] == hami[0]["id"]


def test_publish_skips_unregistered_kinds():
    client = MemoryClient.with_crds()  # Volcano kinds, no Koordinator Device CRD
    try:
        written = nodes.publish(client, nodes.build(profiles.load("dgx-h100"), 1))
        assert [o["kind"] for o in written] == ["Node", "Numatopology"]
        node = client.get(next(rt for rt in resources.core() if rt.plural == "nodes"), "dgx-h100-0")
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        # publishing again replaces rather than failing
        assert len(nodes.publish(client, nodes.build(profiles.load("dgx-h100"), 1))) == 2
    finally:
        client.close()


# --- network shapes (dgx-h100-superpod): fabric labels and the hypernode controller's ConfigMap ---------------------

FABRIC = ("volcano.sh/tor", "volcano.sh/hypercluster")


def _fabric(objects):
    return [(o["metadata"]["name"], o["metadata"]["labels"][FABRIC[0]], o["metadata"]["labels"][FABRIC[1]])
            for o in objects if o["kind"] == "Node"]


@pytest.mark.parametrize(("count", "racks", "spines", "last"), [
    (None, 4, 2, ("dgx-h100-31", "leaf-3", "spine-1")),
    (12, 2, 1, ("dgx-h100-11", "leaf-1", "spine-0")),
    (1, 1, 1, ("dgx-h100-0", "leaf-0", "spine-0")),
], ids=["default-32", "nodes-12", "nodes-1"])
def test_superpod_racks_and_spines(count, racks, spines, last):
    objects = nodes.build(profiles.load("dgx-h100-superpod"), count)
    fabric = _fabric(objects)
    assert len({leaf for _, leaf, _ in fabric}) == racks and len({s for *_, s in fabric}) == spines
    assert fabric[-1] == last
    assert all(sum(1 for _, leaf, _ in fabric if leaf == f"leaf-{r}") <= 8 for r in range(racks))
    node = by(objects, "Node", "dgx-h100-0")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["capacity"]["nvidia.com/rdma_vf"] == "64"


def test_superpod_publishes_the_discovery_configmap():
    from lahar.controllers import _hypernode_tree as tree

    objects = nodes.build(profiles.load("dgx-h100-superpod"))
    cm = by(objects, "ConfigMap", "volcano-controller-configmap")
    assert cm["metadata"]["namespace"] == "kube-system"
    config, problems = tree.parse_config(cm["data"]["volcano-controller.conf"])
    assert problems == []
    label = config.enabled("label")
    assert label is not None
    chains, _ = tree.label_chains(label.config)
    assert chains == {"superpod": ("volcano.sh/tor", "volcano.sh/hypercluster")}
    built = tree.build_label_tree([o for o in objects if o["kind"] == "Node"], chains)
    assert [(h["metadata"]["name"], h["spec"]["tier"], len(h["spec"]["members"])) for h in built] == [
        *[(f"hypernode-superpod-tier1-leaf-{r}", 1, 8) for r in range(4)],
        *[(f"hypernode-superpod-tier2-spine-{s}", 2, 2) for s in range(2)]]


@pytest.mark.parametrize(("network", "needle"), [
    ({"leafLabel": "a", "spineLabel": "a"}, "network: Value error, leafLabel and spineLabel must differ"),
    ({"nodesPerLeaf": 0}, "network.nodesPerLeaf: Input should be greater than or equal to 1"),
    ({"topologyType": "t" * 21}, "network.topologyType: String should have at most 20 characters"),
    ({"racks": 4}, "network.racks: Extra inputs are not permitted"),
], ids=["same-labels", "empty-racks", "type-too-long", "unknown-field"])
def test_bad_network_names_the_field(network, needle):
    data = {"name": "x", "groups": [{"name": "g", "instanceType": "t"}], "network": network}
    with pytest.raises(profiles.ProfileError) as err:
        profiles.parse(data)
    assert needle in str(err.value)


def test_profiles_without_network_have_no_fabric_labels():
    objects = nodes.build(profiles.load("dgx-h100"))
    assert not any(k in FABRIC for o in objects if o["kind"] == "Node" for k in o["metadata"]["labels"])
    assert not [o for o in objects if o["kind"] == "ConfigMap"]
