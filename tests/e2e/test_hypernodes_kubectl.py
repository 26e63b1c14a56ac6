"""HyperNodes on `lahar up --profile dgx-h100-superpod`, through the real kubectl: the tree appears by itself from the
nodes' fabric labels (the hypernode controller's label source), relabelling a node moves it to another leaf, and
`/hypernodes/validate` refuses a bad member selector naming the field.

Uses `Up` of `test_lahar_up` (the whole stack in its own process on a temporary data dir), with 24 nodes: 3 racks of
8 under leaf-0..2, leaves 0 and 1 under spine-0 and leaf 2 under spine-1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e import test_lahar_up as base
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark

LEAF, SPINE = "hypernode-superpod-tier1-leaf-", "hypernode-superpod-tier2-spine-"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    u = Up(tmp_path / "lahar", args=("--profile", "dgx-h100-superpod", "--nodes", "24"))
    try:
        yield u
    finally:
        u.kill()


def tree(up: Up) -> dict[str, tuple[int, list[str], int | None]]:
    items = json.loads(up.kubectl("get", "hypernodes", "-o", "json").stdout)["items"]
    return {h["metadata"]["name"]: (h["spec"]["tier"],
                                    [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]],
                                    (h.get("status") or {}).get("nodeCount")) for h in items}


def test_tree_appears_follows_relabelling_and_admission_refuses_bad_selectors(up: Up, tmp_path: Path) -> None:
    up.start()
    want = {
        LEAF + "0": (1, [f"dgx-h100-{i}" for i in sorted(range(8), key=str)], 8),
        LEAF + "1": (1, [f"dgx-h100-{i}" for i in sorted(range(8, 16), key=str)], 8),
        LEAF + "2": (1, [f"dgx-h100-{i}" for i in sorted(range(16, 24), key=str)], 8),
        SPINE + "0": (2, [LEAF + "0", LEAF + "1"], 16),
        SPINE + "1": (2, [LEAF + "2"], 8),
    }
    wait_for("the HyperNode tree", lambda: tree(up) == want, 120)
    table = up.kubectl("get", "hypernodes").stdout
    assert table.split("\n")[0].split()[:4] == ["NAME", "TIER", "TIERNAME", "NODECOUNT"], table
    assert any(line.split()[:4] == [SPINE + "0", "2", "volcano.sh/hypercluster", "16"] for line in table.split("\n"))

    # moved to rack 2 (its leaf and its spine), as a fabric-discovery tool would relabel it
    up.kubectl("label", "node", "dgx-h100-0", "volcano.sh/tor=leaf-2", "volcano.sh/hypercluster=spine-1", "--overwrite")
    wait_for("dgx-h100-0 to move to leaf-2",
             lambda: (t := tree(up)).get(LEAF + "0", (0, [], 0))[2] == 7 and "dgx-h100-0" in t[LEAF + "2"][1]
             and t[LEAF + "2"][2] == 9 and t[SPINE + "0"][2] == 15 and t[SPINE + "1"][2] == 9, 90)

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "bad"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "dgx-h100-1"}}},
                                        {"type": "Node", "selector": {"regexMatch": {"pattern": "^(a+)+$"}}}]}}))
    out = up.kubectl("apply", "-f", str(bad), check=False)
    assert out.returncode != 0, out.stdout
    assert 'admission webhook "validatehypernode.volcano.sh" denied the request' in out.stderr, out.stderr
    assert "spec.members[1].selector.regexMatch.pattern" in out.stderr, out.stderr
    valid = up.jsonpath("hypernode", SPINE + "1", '{.status.conditions[?(@.type=="Valid")].status}')
    assert valid == "True", valid

    # half a move (the leaf only) puts leaf-2 under both spines: both say so in their Valid condition
    up.kubectl("label", "node", "dgx-h100-1", "volcano.sh/tor=leaf-2", "--overwrite")
    wait_for("spine-0 to report the overlap", lambda: up.jsonpath(
        "hypernode", SPINE + "0", '{.status.conditions[?(@.type=="Valid")].message}').startswith(
        "10 node(s) also in tier-2 HyperNode " + SPINE + "1: "), 90)
    assert up.interrupt() == 0, up.output()
